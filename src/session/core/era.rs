//! What each protocol era needs on the host side of a gateway (pure).
//!
//! In `Single` the host and the server negotiate end to end and airlock changes nothing of what
//! the server says; its own answers and requests follow the host's era too. A gateway speaks the handshake era to its servers and must present their results to a
//! 2026-07-28 host in that era's shape: every result carries `resultType` (`"complete"`), the
//! cacheable results (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`, `resources/read`, `server/discover`) carry `ttlMs` and
//! `cacheScope`, and `server/discover` names the server in `_meta`.

use serde_json::{Map, Value, json};

use super::HostState;
use crate::mcp::Field;
use crate::mcp::version::{self, Era};

pub use crate::mcp::META_SERVER_INFO;
/// How long a 2026-07-28 host may cache airlock's lists: not at all, since a server's tools can
/// change under the gateway at any time (restart, `list_changed`, reload).
const TTL_MS: u64 = 0;

/// Whether the host speaks the stateless era (2026-07-28 or later).
pub fn stateless(host: &HostState) -> bool {
    host.version
        .as_deref()
        .is_some_and(|v| version::era_of(v) == Era::Stateless)
}

/// Whether `request` (a host request) speaks the stateless era: by the version its own `_meta`
/// names; one that names none speaks the era the host opened with (its `initialize`), or, with
/// no `initialize` ever, the era the host's requests have spoken. A call the core sends later
/// (held for the user's approval, or for the server's first listing) keeps its own era this
/// way, whatever requests came in between.
pub fn request_stateless(request: &Value, host: &HostState) -> bool {
    match version::request_version(request.field("params")) {
        Some(declared) => version::era_of(declared) == Era::Stateless,
        None => match host.handshake_version.as_deref() {
            Some(opened) => version::era_of(opened) == Era::Stateless,
            None => stateless(host),
        },
    }
}

/// The methods whose 2026-07-28 results are cacheable.
pub fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "server/discover"
    )
}

/// A message on its way to the host, in the host's era. Only answers to a stateless host
/// change: a result without `resultType` gets `"complete"`. That is every result of a gateway
/// (its servers speak the handshake era) and airlock's own answers in `run` too (a refusal, an
/// error result); a 2026-07-28 server's own results already carry theirs.
pub fn shape_for_host(mut message: Value, stateless: bool) -> Value {
    if !stateless {
        return message;
    }
    if let Some(result) = message.field_mut("result").and_then(Value::as_object_mut) {
        result
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
    }
    message
}

/// Adds the cache hints of a cacheable result for a stateless host.
pub fn add_cache_hints(result: &mut Map<String, Value>) {
    result.entry("ttlMs").or_insert_with(|| json!(TTL_MS));
    // The gateway answers one host; what it lists depends on its own config and policy.
    result
        .entry("cacheScope")
        .or_insert_with(|| Value::String("private".into()));
}

/// airlock's identity, in every era's place for it.
pub fn server_info() -> Value {
    json!({"name": "airlock", "version": env!("CARGO_PKG_VERSION")})
}

/// Every version a gateway serves to hosts.
pub fn supported_versions() -> Vec<&'static str> {
    let mut versions: Vec<&str> = version::HANDSHAKE_VERSIONS.to_vec();
    versions.push(version::STATELESS_VERSION);
    versions
}

/// The error for a stateless request whose `_meta` names a version airlock does not serve
/// (`UnsupportedProtocolVersionError`: the client may retry with one of `supported`).
pub fn unsupported_version(requested: &str) -> (i64, String, Value) {
    (
        crate::mcp::code::UNSUPPORTED_PROTOCOL_VERSION,
        format!("Unsupported protocol version: {requested}"),
        json!({"supported": supported_versions(), "requested": requested}),
    )
}

/// Whether a gateway serves `requested` to a stateless host.
pub fn serves_stateless(requested: &str) -> bool {
    version::era_of(requested) == Era::Stateless && requested == version::STATELESS_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(version: &str) -> HostState {
        HostState {
            version: Some(version.into()),
            ..HostState::default()
        }
    }

    #[test]
    fn only_results_for_a_stateless_request_are_shaped() {
        assert!(stateless(&host("2026-07-28")) && !stateless(&host("2025-06-18")));
        let answer = json!({"jsonrpc":"2.0","id":1,"result":{"content":[]}});
        let shaped = shape_for_host(answer.clone(), true);
        assert_eq!(shaped["result"]["resultType"], "complete");
        assert_eq!(shape_for_host(answer.clone(), false), answer);
        let own = json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}});
        assert_eq!(shape_for_host(own.clone(), true), own);
        let error = json!({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}});
        assert_eq!(shape_for_host(error.clone(), true), error);
    }

    #[test]
    fn versions_and_cache_hints() {
        assert!(serves_stateless("2026-07-28"));
        assert!(!serves_stateless("2027-01-01"));
        assert!(!serves_stateless("2025-06-18"));
        let (code, message, data) = unsupported_version("2099-01-01");
        assert_eq!(code, -32022);
        assert!(message.contains("2099-01-01"));
        assert!(data["supported"].to_string().contains("2026-07-28"));
        let mut result = Map::new();
        add_cache_hints(&mut result);
        assert_eq!(result["ttlMs"], 0);
        assert_eq!(result["cacheScope"], "private");
        assert!(cacheable("resources/read") && !cacheable("tools/call"));
    }
}
