//! What the Streamable HTTP transport adds to JSON-RPC, as pure functions: which versions a
//! request may declare, the 2026-07-28 header/body checks (`MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` mirror the body), and the HTTP status an answer travels with.

use base64::Engine;
use serde_json::{Value, json};

use crate::mcp::message::{code, error_response};
use crate::mcp::version::{
    HANDSHAKE_VERSIONS, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, STATELESS_VERSION,
    request_version,
};

/// `Mcp-Session-Id`.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// `MCP-Protocol-Version`.
pub const VERSION_HEADER: &str = "mcp-protocol-version";
pub const METHOD_HEADER: &str = "mcp-method";
pub const NAME_HEADER: &str = "mcp-name";

/// 2026-07-28: the HTTP headers do not match the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: a capability the request needs was not declared.
pub const MISSING_CLIENT_CAPABILITY: i64 = code::MISSING_CLIENT_CAPABILITY;
/// 2026-07-28: the declared protocol version is not served here.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
pub const METHOD_NOT_FOUND: i64 = -32601;

/// The version assumed for a handshake-era request without `MCP-Protocol-Version` (the header
/// came with 2025-06-18; the transport spec says to assume 2025-03-26).
pub const VERSION_WITHOUT_HEADER: &str = "2025-03-26";

/// Every protocol version the listener speaks.
pub fn supported_versions() -> Vec<&'static str> {
    let mut versions = HANDSHAKE_VERSIONS.to_vec();
    versions.push(STATELESS_VERSION);
    versions
}

pub fn is_supported(version: &str) -> bool {
    version == STATELESS_VERSION || HANDSHAKE_VERSIONS.contains(&version)
}

/// A 2026-07-28 request: the header says so, or (without a session) the body's `_meta` does.
pub fn is_stateless(header_version: Option<&str>, message: &Value) -> bool {
    match header_version {
        Some(version) => version == STATELESS_VERSION,
        None => request_version(message.get("params")).is_some_and(|v| v >= STATELESS_VERSION),
    }
}

/// The standard request headers of a 2026-07-28 POST, as received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StandardHeaders<'a> {
    pub version: Option<&'a str>,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// Methods whose `Mcp-Name` header mirrors `params.name` or `params.uri`.
fn named_by(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// Checks a 2026-07-28 request's headers against its body. `Err` is the JSON-RPC error answer
/// (always HTTP 400).
pub fn check_stateless_headers(headers: &StandardHeaders, message: &Value) -> Result<(), Value> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let mismatch = |text: String| Err(error_response(id.clone(), HEADER_MISMATCH, &text, None));
    let Some(version) = headers.version.map(str::trim) else {
        return mismatch("Header mismatch: the MCP-Protocol-Version header is missing".into());
    };
    if !is_supported(version) {
        return Err(unsupported_version(id, version));
    }
    check_meta(message, &id)?;
    let body_version = request_version(message.get("params")).unwrap_or_default();
    if body_version != version {
        return mismatch(format!(
            "Header mismatch: MCP-Protocol-Version header value '{version}' does not match body value '{body_version}'"
        ));
    }
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    match headers.method.map(str::trim) {
        None => return mismatch("Header mismatch: the Mcp-Method header is missing".into()),
        Some(header) if header != method => {
            return mismatch(format!(
                "Header mismatch: Mcp-Method header value '{header}' does not match body value '{method}'"
            ));
        }
        Some(_) => {}
    }
    let Some(field) = named_by(method) else {
        return Ok(());
    };
    let Some(body_name) = message
        .get("params")
        .and_then(|p| p.get(field))
        .and_then(Value::as_str)
    else {
        return Ok(()); // the method's own validation answers a missing name
    };
    match headers.name.map(decode_header_value) {
        None => mismatch("Header mismatch: the Mcp-Name header is missing".into()),
        Some(None) => mismatch("Header mismatch: the Mcp-Name header is not valid".into()),
        Some(Some(header)) if header != body_name => mismatch(format!(
            "Header mismatch: Mcp-Name header value '{header}' does not match body value '{body_name}'"
        )),
        Some(Some(_)) => Ok(()),
    }
}

/// A 2026-07-28 request carries its version and client capabilities in `_meta`; without them it
/// is malformed (`-32602`, HTTP 400).
fn check_meta(message: &Value, id: &Value) -> Result<(), Value> {
    let invalid = |what: &str| {
        Err(error_response(
            id.clone(),
            code::INVALID_PARAMS,
            &format!("Invalid params: a 2026-07-28 request needs {what} in params._meta"),
            None,
        ))
    };
    let Some(meta) = message.pointer("/params/_meta").and_then(Value::as_object) else {
        return invalid("`_meta`");
    };
    if !meta
        .get(META_PROTOCOL_VERSION)
        .is_some_and(Value::is_string)
    {
        return invalid(&format!("`{META_PROTOCOL_VERSION}`"));
    }
    if !meta
        .get(META_CLIENT_CAPABILITIES)
        .is_some_and(Value::is_object)
    {
        return invalid(&format!("`{META_CLIENT_CAPABILITIES}`"));
    }
    Ok(())
}

/// A header value as sent: surrounding whitespace dropped, the `=?base64?...?=` form decoded.
/// `None` when the base64 or its UTF-8 is broken.
pub fn decode_header_value(raw: &str) -> Option<String> {
    let value = raw.trim_matches([' ', '\t']);
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_string()),
    }
}

/// The 2026-07-28 answer for a version not served here.
pub fn unsupported_version(id: Value, version: &str) -> Value {
    error_response(
        id,
        UNSUPPORTED_PROTOCOL_VERSION,
        &format!("Unsupported protocol version: {version}"),
        Some(json!({"supported": supported_versions(), "requested": version})),
    )
}

/// The HTTP status a JSON answer travels with. Handshake-era answers are always 200 (errors are
/// JSON-RPC's business); 2026-07-28 maps protocol errors onto HTTP so intermediaries see them.
pub fn status_for(stateless: bool, answer: &Value) -> u16 {
    if !stateless {
        return 200;
    }
    match answer.pointer("/error/code").and_then(Value::as_i64) {
        Some(METHOD_NOT_FOUND) => 404,
        Some(
            code::INVALID_PARAMS
            | code::INVALID_REQUEST
            | code::PARSE_ERROR
            | HEADER_MISMATCH
            | MISSING_CLIENT_CAPABILITY
            | UNSUPPORTED_PROTOCOL_VERSION,
        ) => 400,
        _ => 200,
    }
}

/// Whether an `Accept` header value admits a media type (`*/*` and `type/*` count).
/// Whether a POST's `Content-Type` is `application/json` (any parameters, any case). Anything
/// else is refused: a web page may POST `text/plain` or a form to any origin without a CORS
/// preflight, and a body it sends that way must not reach the gate as a message.
pub fn is_json_body(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| {
        value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case("application/json")
    })
}

pub fn accepts(accept: Option<&str>, media: &str) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let kind = media.split('/').next().unwrap_or("");
    accept.split(',').any(|item| {
        let range = item
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        range == media || range == "*/*" || range == format!("{kind}/*")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_json_body_is_a_message() {
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            " application/json ;x=y",
        ] {
            assert!(is_json_body(Some(json)), "{json}");
        }
        for other in [
            None,
            Some(""),
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
            Some("application/json-seq"),
        ] {
            assert!(!is_json_body(other), "{other:?}");
        }
    }

    fn call(name: &str) -> Value {
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":name,"_meta":{
            "io.modelcontextprotocol/protocolVersion":"2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":{}}}})
    }

    fn headers<'a>(method: &'a str, name: Option<&'a str>) -> StandardHeaders<'a> {
        StandardHeaders {
            version: Some("2026-07-28"),
            method: Some(method),
            name,
        }
    }

    fn code_of(answer: Value) -> i64 {
        answer
            .pointer("/error/code")
            .and_then(Value::as_i64)
            .unwrap()
    }

    #[test]
    fn matching_headers_pass_whitespace_and_base64_included() {
        assert_eq!(
            check_stateless_headers(&headers("tools/call", Some("echo")), &call("echo")),
            Ok(())
        );
        assert_eq!(
            check_stateless_headers(&headers("tools/call", Some("  echo \t")), &call("echo")),
            Ok(())
        );
        // "Hello, 世界" in the sentinel form.
        assert_eq!(
            check_stateless_headers(
                &headers("tools/call", Some("=?base64?SGVsbG8sIOS4lueVjA==?=")),
                &call("Hello, 世界")
            ),
            Ok(())
        );
        let mut list = call("x");
        list["method"] = json!("tools/list");
        assert_eq!(
            check_stateless_headers(&headers("tools/list", None), &list),
            Ok(())
        );
    }

    #[test]
    fn every_mismatch_is_header_mismatch_with_the_request_id() {
        let cases = [
            headers("prompts/list", Some("echo")),
            headers("tools/call", Some("other")),
            headers("tools/call", None),
            headers("TOOLS/CALL", Some("echo")),
            StandardHeaders {
                version: None,
                ..headers("tools/call", Some("echo"))
            },
            StandardHeaders {
                method: None,
                ..headers("tools/call", Some("echo"))
            },
            headers("tools/call", Some("=?base64?***?=")),
        ];
        for case in cases {
            let answer = check_stateless_headers(&case, &call("echo")).unwrap_err();
            assert_eq!(code_of(answer.clone()), HEADER_MISMATCH, "{case:?}");
            assert_eq!(answer["id"], json!(1));
        }
        let other_version = StandardHeaders {
            version: Some("2025-11-25"),
            ..headers("tools/call", Some("echo"))
        };
        assert_eq!(
            code_of(check_stateless_headers(&other_version, &call("echo")).unwrap_err()),
            HEADER_MISMATCH
        );
    }

    #[test]
    fn a_request_without_its_meta_is_invalid_params() {
        let bare = json!({"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}});
        let answer = check_stateless_headers(&headers("tools/list", None), &bare).unwrap_err();
        assert_eq!(
            (code_of(answer.clone()), answer["id"].clone()),
            (-32602, json!(7))
        );
        assert_eq!(status_for(true, &answer), 400);
        let mut no_caps = call("echo");
        no_caps["params"]["_meta"]
            .as_object_mut()
            .unwrap()
            .remove("io.modelcontextprotocol/clientCapabilities");
        let answer =
            check_stateless_headers(&headers("tools/call", Some("echo")), &no_caps).unwrap_err();
        assert_eq!(code_of(answer), -32602);
    }

    #[test]
    fn an_unknown_version_lists_the_supported_ones() {
        let unknown = StandardHeaders {
            version: Some("2099-01-01"),
            ..headers("tools/call", Some("echo"))
        };
        let answer = check_stateless_headers(&unknown, &call("echo")).unwrap_err();
        assert_eq!(code_of(answer.clone()), UNSUPPORTED_PROTOCOL_VERSION);
        assert!(
            answer["error"]["data"]["supported"]
                .as_array()
                .unwrap()
                .contains(&json!("2026-07-28"))
        );
        assert_eq!(status_for(true, &answer), 400);
    }

    #[test]
    fn statuses_map_only_in_the_stateless_era() {
        let not_found = error_response(json!(1), METHOD_NOT_FOUND, "x", None);
        assert_eq!(status_for(true, &not_found), 404);
        assert_eq!(status_for(false, &not_found), 200);
        assert_eq!(
            status_for(true, &error_response(json!(1), -32602, "x", None)),
            400
        );
        assert_eq!(
            status_for(true, &error_response(json!(1), -32000, "x", None)),
            200
        );
        assert_eq!(
            status_for(true, &json!({"jsonrpc":"2.0","id":1,"result":{}})),
            200
        );
    }

    #[test]
    fn stateless_requests_are_told_by_header_or_meta() {
        let plain = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"});
        assert!(is_stateless(Some("2026-07-28"), &plain));
        assert!(!is_stateless(Some("2025-11-25"), &call("x")));
        assert!(is_stateless(None, &call("x")));
        assert!(!is_stateless(None, &plain));
    }

    #[test]
    fn accept_ranges() {
        assert!(accepts(
            Some("application/json, text/event-stream"),
            "text/event-stream"
        ));
        assert!(accepts(
            Some("text/event-stream;q=0.9"),
            "text/event-stream"
        ));
        assert!(accepts(Some("*/*"), "application/json"));
        assert!(accepts(Some("application/*"), "application/json"));
        assert!(!accepts(Some("text/event-stream"), "application/json"));
        assert!(!accepts(None, "application/json"));
    }
}
