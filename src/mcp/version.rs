//! Protocol versions: the handshake era (2024-11-05 .. 2025-11-25, `initialize` first) and the
//! stateless era (2026-07-28: no `initialize`, `server/discover`, version and client capabilities
//! in every request's `_meta`).

use crate::mcp::Field;
use serde_json::Value;

/// The handshake-era versions airlock has been checked against.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The first stateless version.
pub const STATELESS_VERSION: &str = "2026-07-28";
/// `_meta` key carrying the protocol version on each request (stateless era).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the client's capabilities on each request (stateless era).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The other keys of the 2026-07-28 request envelope (`params._meta`).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// Puts the 2026-07-28 request envelope (protocol version and client capabilities) into a
/// request's `params._meta`, keeping what else `_meta` holds.
pub fn add_envelope(params: &mut Value, version: &str, capabilities: &Value) {
    if !params.is_object() {
        *params = Value::Object(serde_json::Map::new());
    }
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(serde_json::Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(META_PROTOCOL_VERSION.into(), Value::String(version.into()));
        let capabilities = if capabilities.is_object() {
            capabilities.clone()
        } else {
            Value::Object(serde_json::Map::new())
        };
        meta.insert(META_CLIENT_CAPABILITIES.into(), capabilities);
    }
}

/// Takes the 2026-07-28 request envelope out of a request's `params._meta` (and `_meta` itself
/// when nothing else is left in it): for a server spoken to in the handshake era, which may
/// refuse a request that carries it (the Python SDK 2.x does).
pub fn strip_envelope(message: &mut Value) {
    let Some(params) = message.field_mut("params").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(meta) = params.field_mut("_meta").and_then(Value::as_object_mut) else {
        return;
    };
    for key in [
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
        META_CLIENT_INFO,
        META_LOG_LEVEL,
    ] {
        meta.remove(key);
    }
    if meta.is_empty() {
        params.remove("_meta");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Handshake,
    Stateless,
}

/// Versions are dates, so they order as strings; anything from 2026-07-28 on is stateless.
pub fn era_of(version: &str) -> Era {
    if version >= STATELESS_VERSION {
        Era::Stateless
    } else {
        Era::Handshake
    }
}

/// Host requests 2026-07-28 does not have: the lifecycle, `ping`, logging's level and the
/// resource subscription pair were removed, and tasks are an extension there
/// (`io.modelcontextprotocol/tasks`, its own methods and shapes), not the 2025-11-25 `tasks/*`. A
/// stateless request for one gets `-32601`, as a server of that version answers it.
pub fn removed_in_stateless(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "tasks/get"
            | "tasks/result"
            | "tasks/cancel"
            | "tasks/list"
    )
}

/// The 2025-11-25 tasks (`params.task`, `tasks/*`, the `tasks` capability) exist only in that
/// version: earlier ones did not have them, and 2026-07-28 made tasks an extension of its own.
pub fn has_tasks(version: &str) -> bool {
    version == "2025-11-25"
}

/// JSON-RPC batches exist only in 2025-03-26 (added there, removed in 2025-06-18).
pub fn supports_batches(version: Option<&str>) -> bool {
    version == Some("2025-03-26")
}

fn meta(params: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    params?.field("_meta")?.as_object()
}

/// The protocol version a stateless-era request declares in its `_meta`.
pub fn request_version(params: Option<&Value>) -> Option<&str> {
    meta(params)?.get(META_PROTOCOL_VERSION)?.as_str()
}

/// The client capabilities a stateless-era request declares in its `_meta`.
pub fn request_capabilities(params: Option<&Value>) -> Option<&Value> {
    meta(params)?.get(META_CLIENT_CAPABILITIES)
}

/// Whether client capabilities allow a form-mode `elicitation/create`.
///
/// `{}` means form (2025-06-18 and the 2025-11-25 back-compat rule); an object naming modes must
/// name `form`.
pub fn elicitation_form_supported(capabilities: &Value) -> bool {
    match capabilities.field("elicitation") {
        Some(Value::Object(modes)) => modes.is_empty() || modes.has_field("form"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_2025_11_25_has_tasks() {
        assert!(has_tasks("2025-11-25"));
        for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2026-07-28"] {
            assert!(!has_tasks(version), "{version}");
        }
    }

    #[test]
    fn what_2026_removed() {
        for method in [
            "initialize",
            "ping",
            "logging/setLevel",
            "tasks/get",
            "tasks/list",
        ] {
            assert!(removed_in_stateless(method), "{method}");
        }
        for method in [
            "tools/call",
            "server/discover",
            "subscriptions/listen",
            "prompts/get",
        ] {
            assert!(!removed_in_stateless(method), "{method}");
        }
    }

    #[test]
    fn eras_and_batches() {
        for version in HANDSHAKE_VERSIONS {
            assert_eq!(era_of(version), Era::Handshake);
        }
        assert_eq!(era_of(STATELESS_VERSION), Era::Stateless);
        assert!(supports_batches(Some("2025-03-26")));
        assert!(!supports_batches(Some("2025-06-18")));
        assert!(!supports_batches(None));
    }

    #[test]
    fn reads_stateless_meta() {
        let params = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {"elicitation": {}}}});
        assert_eq!(request_version(Some(&params)), Some("2026-07-28"));
        assert!(elicitation_form_supported(
            request_capabilities(Some(&params)).unwrap()
        ));
        assert_eq!(request_version(Some(&json!({}))), None);
    }

    #[test]
    fn elicitation_modes() {
        assert!(elicitation_form_supported(&json!({"elicitation": {}})));
        assert!(elicitation_form_supported(
            &json!({"elicitation": {"form": {}, "url": {}}})
        ));
        assert!(!elicitation_form_supported(
            &json!({"elicitation": {"url": {}}})
        ));
        assert!(!elicitation_form_supported(&json!({"sampling": {}})));
    }
}
