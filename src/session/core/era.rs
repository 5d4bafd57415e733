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

/// Which era a gateway's stdio session speaks, from what its host did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEra {
    /// Nothing yet: the first request chooses.
    Fresh,
    /// Opened with `initialize`: its requests carry no version of their own.
    Handshake,
    /// Opened with 2026-07-28 requests (no `initialize`): every request carries its envelope.
    Stateless,
    /// Behind the HTTP face, where sessions of both eras share one core and the transport
    /// checks each request's envelope against its own session.
    Shared,
}

/// A refused request's error: code, message, data.
pub type Refusal = (i64, String, Option<Value>);

/// Why a gateway refuses a host's request for its era, as a server of that era would (pure):
/// a version in `_meta` that is no string, or one a request does not speak in; a 2026-07-28
/// request without its client capabilities, or for a method that version does not have; and,
/// on one stdio connection, a request of the other era than the session's: a 2026-07-28 one
/// after `initialize`, an `initialize` or a request without its envelope after 2026-07-28
/// requests (the official SDK's servers refuse each).
pub fn request_refusal(
    method: &str,
    params: Option<&Value>,
    session: SessionEra,
) -> Option<Refusal> {
    use crate::mcp::code;
    let one_connection = session != SessionEra::Shared;
    let meta = params.and_then(|p| p.field("_meta"));
    let declared = meta.and_then(|m| m.field(version::META_PROTOCOL_VERSION));
    if method == "initialize" {
        return (one_connection && session == SessionEra::Stateless).then(|| {
            let requested = params
                .and_then(|p| p.field("protocolVersion"))
                .cloned()
                .unwrap_or(Value::Null);
            let text = format!(
                "initialize: this session speaks {} (each request carries its version), which has no handshake; a session speaks one era",
                version::STATELESS_VERSION
            );
            let data = json!({"supported": [version::STATELESS_VERSION], "requested": requested});
            (code::UNSUPPORTED_PROTOCOL_VERSION, text, Some(data))
        });
    }
    let Some(declared) = declared else {
        return (one_connection && session == SessionEra::Stateless).then(|| {
            let text = format!(
                "{method}: a 2026-07-28 request carries `{}` and `{}` in params._meta",
                version::META_PROTOCOL_VERSION,
                version::META_CLIENT_CAPABILITIES
            );
            (code::INVALID_PARAMS, text, None)
        });
    };
    let Some(requested) = declared.as_str() else {
        let text = format!("`{}` must be a string", version::META_PROTOCOL_VERSION);
        return Some((code::INVALID_PARAMS, text, None));
    };
    if version::era_of(requested) == Era::Handshake {
        let (code, _, data) = unsupported_version(requested);
        let text = format!(
            "Unsupported protocol version in params._meta: {requested}, which is negotiated with initialize; a request that carries its version names {}",
            version::STATELESS_VERSION
        );
        return Some((code, text, Some(data)));
    }
    if !serves_stateless(requested) {
        let (code, text, data) = unsupported_version(requested);
        return Some((code, text, Some(data)));
    }
    if one_connection && session == SessionEra::Handshake {
        let text = format!(
            "{method}: this session opened with initialize, so its requests carry no version of their own; a {requested} request belongs to a session without one"
        );
        return Some((code::INVALID_REQUEST, text, None));
    }
    if !meta
        .and_then(|m| m.field(version::META_CLIENT_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        let text = format!(
            "{method}: a {requested} request carries `{}` (an object) in params._meta",
            version::META_CLIENT_CAPABILITIES
        );
        return Some((code::INVALID_PARAMS, text, None));
    }
    version::removed_in_stateless(method).then(|| {
        let text = format!("Method not found: {method} does not exist in protocol {requested}");
        (code::METHOD_NOT_FOUND, text, None)
    })
}

/// A tool as a 2026-07-28 host may see it (pure): that version's tools have no `execution`
/// (task support is the tasks extension's), and a tool that requires a 2025-11-25 task can never
/// be called by such a host, so it is not listed.
pub fn tool_for_stateless(tool: &Value) -> Option<Value> {
    let execution = tool.field("execution");
    let task_support = execution.and_then(|e| e.field("taskSupport"));
    if task_support.and_then(Value::as_str) == Some("required") {
        return None;
    }
    let mut tool = tool.clone();
    if let Some(tool) = tool.as_object_mut() {
        tool.remove("execution");
    }
    Some(tool)
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
    fn a_request_is_refused_for_its_era_as_a_server_of_it_would() {
        use SessionEra::*;
        let with = |meta: Value| Some(json!({"_meta": meta}));
        let stateless = with(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}));
        let code = |refusal: Option<Refusal>| refusal.map(|(code, _, _)| code);
        let fresh = |method: &str, params: &Option<Value>, session| {
            code(request_refusal(method, params.as_ref(), session))
        };
        assert_eq!(fresh("tools/call", &stateless, Fresh), None);
        assert_eq!(fresh("ping", &stateless, Stateless), Some(-32601));
        assert_eq!(fresh("tools/call", &stateless, Handshake), Some(-32600));
        assert_eq!(fresh("tools/call", &stateless, Shared), None);
        assert_eq!(fresh("ping", &None, Stateless), Some(-32602));
        assert_eq!(fresh("ping", &None, Shared), None);
        assert_eq!(fresh("ping", &None, Handshake), None);
        assert_eq!(fresh("initialize", &None, Stateless), Some(-32022));
        assert_eq!(fresh("initialize", &None, Fresh), None);
        let no_caps = with(json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}));
        assert_eq!(fresh("tools/call", &no_caps, Fresh), Some(-32602));
        let not_text = with(json!({"io.modelcontextprotocol/protocolVersion": null}));
        assert_eq!(fresh("tools/call", &not_text, Fresh), Some(-32602));
        let handshake = with(json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25"}));
        let refused = request_refusal("tools/call", handshake.as_ref(), Fresh).unwrap();
        assert_eq!(refused.0, -32022);
        assert!(refused.1.contains("initialize"), "{}", refused.1);
        let future = with(json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01"}));
        assert_eq!(fresh("tools/call", &future, Stateless), Some(-32022));
    }

    #[test]
    fn a_stateless_host_is_listed_no_tool_that_needs_a_task() {
        let required = json!({"name": "r", "execution": {"taskSupport": "required"}});
        assert_eq!(tool_for_stateless(&required), None);
        let optional = json!({"name": "o", "execution": {"taskSupport": "optional"}});
        assert_eq!(tool_for_stateless(&optional), Some(json!({"name": "o"})));
        let plain = json!({"name": "p"});
        assert_eq!(tool_for_stateless(&plain), Some(plain.clone()));
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
