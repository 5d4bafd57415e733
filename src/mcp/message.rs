//! JSON-RPC 2.0 message classes as MCP uses them. Ids are kept verbatim as `serde_json::Value`.

use crate::mcp::Field;
use serde_json::{Map, Value, json};

/// JSON-RPC error codes airlock itself answers with.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Server-defined range: the MCP server exited before answering.
    pub const SERVER_EXITED: i64 = -32000;
    /// The code the MCP SDKs use for a request timeout.
    pub const REQUEST_TIMEOUT: i64 = -32001;
    /// MCP before 2026-07-28: resource not found (2026-07-28 uses `INVALID_PARAMS`).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// MCP 2026-07-28: the request's protocol version is not one the server supports.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// MCP 2026-07-28: processing the request needs a client capability the request's `_meta`
    /// did not declare (`MissingRequiredClientCapabilityError`).
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
}

/// What a parsed JSON value is, as a JSON-RPC message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Class<'a> {
    Request {
        id: &'a Value,
        method: &'a str,
    },
    Notification {
        method: &'a str,
    },
    Response {
        id: &'a Value,
    },
    /// An error response; `id` may be `null` when the peer could not read the request's id.
    Error {
        id: &'a Value,
    },
    Batch(&'a [Value]),
}

/// Why a JSON value is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("a JSON-RPC message must be an object or an array")]
    NotAnObject,
    #[error("`jsonrpc` must be \"2.0\"")]
    Version,
    #[error("`id` must be a string or a number")]
    Id,
    #[error("`method` must be a string")]
    Method,
    #[error("a message needs `method`, `result` or `error`")]
    Shape,
    #[error("an empty batch is not a message")]
    EmptyBatch,
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_))
}

/// Classifies one JSON value. Pure; looks only at `jsonrpc`, `id`, `method`, `result`, `error`.
pub fn classify(value: &Value) -> Result<Class<'_>, Invalid> {
    let object = match value {
        Value::Object(object) => object,
        Value::Array(items) if items.is_empty() => return Err(Invalid::EmptyBatch),
        Value::Array(items) => return Ok(Class::Batch(items)),
        _ => return Err(Invalid::NotAnObject),
    };
    if object.field("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Invalid::Version);
    }
    if let Some(method) = object.field("method") {
        let method = method.as_str().ok_or(Invalid::Method)?;
        return match object.field("id") {
            None => Ok(Class::Notification { method }),
            Some(id) if valid_id(id) => Ok(Class::Request { id, method }),
            Some(_) => Err(Invalid::Id),
        };
    }
    let id = object.field("id").ok_or(Invalid::Shape)?;
    if object.has_field("error") {
        return if valid_id(id) || id.is_null() {
            Ok(Class::Error { id })
        } else {
            Err(Invalid::Id)
        };
    }
    if object.has_field("result") {
        return if valid_id(id) {
            Ok(Class::Response { id })
        } else {
            Err(Invalid::Id)
        };
    }
    Err(Invalid::Shape)
}

/// A map key for an id that keeps `1` and `"1"` apart, and takes `1.0` (or `1e0`) for `1`: a
/// JavaScript server parses them as one number, so two requests in flight with them are one id
/// to it (and its answers name `1`).
pub fn id_key(id: &Value) -> String {
    use std::fmt::Write as _;
    // Built by hand: this runs several times per message, and `format!` of a `Value` goes
    // through its serializer.
    let mut key = String::with_capacity(24);
    match id {
        Value::String(text) => {
            key.push_str("s:");
            key.push_str(text);
        }
        Value::Number(number) => {
            key.push_str("n:");
            // Integers (nearly every id) without the formatting machinery; a Number prints as
            // it encodes, so others go through Display (writing to a String cannot fail).
            if let Some(unsigned) = number.as_u64() {
                key.push_str(itoa::Buffer::new().format(unsigned));
            } else if let Some(signed) = number.as_i64() {
                key.push_str(itoa::Buffer::new().format(signed));
            } else if let Some(integral) = number.as_f64().and_then(integral_value) {
                key.push_str(itoa::Buffer::new().format(integral));
            } else {
                let _ = write!(key, "{number}");
            }
        }
        other => {
            let _ = write!(key, "n:{other}");
        }
    }
    key
}

/// A float with no fractional part as the integer it is (within `i64`; beyond it a float is no
/// id anyone sends).
fn integral_value(value: f64) -> Option<i64> {
    // 2^63 as f64 is exact; every finite integral float below it in magnitude fits an i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (value.is_finite() && value.fract() == 0.0 && value.abs() < LIMIT).then_some(value as i64)
}

/// Whether `id_key(id) == key`, without building the key: the scans of in-flight ids run for
/// every host message, over every call in flight.
pub fn has_id_key(id: &Value, key: &str) -> bool {
    match id {
        Value::String(text) => key.strip_prefix("s:") == Some(text.as_str()),
        Value::Number(number) => {
            let Some(rest) = key.strip_prefix("n:") else {
                return false;
            };
            // An integer prints without a sign or leading zeros: only that spelling is its key.
            match (number.as_i64(), number.as_u64()) {
                (Some(signed), _) => is_canonical_integer(rest) && rest.parse() == Ok(signed),
                (None, Some(unsigned)) => {
                    is_canonical_integer(rest) && rest.parse() == Ok(unsigned)
                }
                (None, None) => id_key(id) == key,
            }
        }
        other => id_key(other) == key,
    }
}

/// `0`, or digits not starting with `0`, optionally after one `-`.
fn is_canonical_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" && text == "0" || !digits.starts_with('0'))
}

/// [`Field::at`], mutable: the value at `keys` (object keys, outermost first).
pub fn at_mut<'a>(value: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
    keys.iter()
        .try_fold(value, |value, key| value.field_mut(key))
}

/// The id of a message that failed classification, if one can be read (for the error answer).
pub fn salvage_id(value: &Value) -> Value {
    match value.field("id") {
        Some(id) if valid_id(id) => id.clone(),
        _ => Value::Null,
    }
}

/// Keeps only the members JSON-RPC gives a message of its kind: `jsonrpc`, `id`, and `method`
/// with `params` for a request or notification, else `error`, or `result` when there is no
/// `error`. Pure.
///
/// What a server sends reaches the host as airlock read it, whatever the host's parser: Go's
/// `encoding/json` matches keys regardless of case, cJSON also stops a key at a NUL, so a
/// server's `"ID"` or `"id\u0000"` beside `"id"` could be read as the id of another call, and a
/// `result` beside the `error` airlock audited as a success.
pub fn keep_envelope_members(message: &mut Value) {
    let Value::Object(object) = message else {
        return;
    };
    let answer = !object.has_field("method");
    let error = object.has_field("error");
    object.retain(|key, _| match key.as_str() {
        "jsonrpc" | "id" => true,
        "method" | "params" => !answer,
        "error" => answer,
        "result" => answer && !error,
        _ => false,
    });
    // The outcome airlock audits is the result's `isError`: no other spelling of it reaches the
    // host, which could read another outcome from it.
    if let Some(Value::Object(result)) = object.get_mut("result") {
        super::lenient::drop_other_spellings(result, &["isError"]);
    }
}

pub fn error_response(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = Map::new();
    error.insert("code".into(), code.into());
    error.insert("message".into(), message.into());
    if let Some(data) = data {
        error.insert("data".into(), data);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

pub fn result_response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A tool result that says what went wrong: airlock's refusals, and calls whose server failed.
/// Hosts show it to the model, which can react (a JSON-RPC error would end the turn).
pub fn tool_error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// Whether a request is task-augmented (`params.task`, protocol 2025-11-25): its requestor takes
/// a `CreateTaskResult` or an error as the answer, never a plain result.
pub fn task_augmented(request: &Value) -> bool {
    request
        .at(&["params", "task"])
        .is_some_and(Value::is_object)
}

/// The answer to a `tools/call` airlock refuses or its server never answers: a tool result with
/// `isError: true` ([`tool_error_result`]), or, for a task-augmented call, a JSON-RPC error with
/// `code` and the same text (its requestor validates the answer as a `CreateTaskResult`, and
/// would drop a tool result, and with it the reason, as malformed).
pub fn failed_call_answer(id: Value, text: &str, task_augmented: bool, code: i64) -> Value {
    if task_augmented {
        error_response(id, code, text, None)
    } else {
        result_response(id, tool_error_result(text))
    }
}

/// The answer to a host line that is not a message airlock can read: too long (`-32600`, the
/// line was never buffered whole) or not JSON (`-32700`). The id is unknown: `null`.
pub fn unreadable_line_reply(problem: &Unreadable) -> Value {
    let code = match problem {
        Unreadable::Oversized { .. } => code::INVALID_REQUEST,
        Unreadable::NotJson(_) => code::PARSE_ERROR,
    };
    error_response(Value::Null, code, &problem.to_string(), None)
}

/// Why a line could not be read as JSON (the text is the host's answer and airlock's warning).
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error("message of {bytes} bytes exceeds airlock's limit of {limit} bytes")]
    Oversized { bytes: usize, limit: usize },
    #[error("parse error: {0}")]
    NotJson(serde_json::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_only_the_members_of_its_kind() {
        let mut answer = json!({"jsonrpc": "2.0", "ID": 5, "id": 6, "result": {"a": 1},
            "id\u{0}": 7, "Result": 1, "extra": {"id": 8}});
        keep_envelope_members(&mut answer);
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": 6, "result": {"a": 1}})
        );
        let mut both = json!({"jsonrpc": "2.0", "id": 6, "result": {}, "error": {"code": 1}});
        keep_envelope_members(&mut both);
        assert_eq!(
            both,
            json!({"jsonrpc": "2.0", "id": 6, "error": {"code": 1}})
        );
        let mut request = json!({"jsonrpc": "2.0", "id": "a", "method": "m", "params": {},
            "result": {}, "Method": "x"});
        keep_envelope_members(&mut request);
        assert_eq!(
            request,
            json!({"jsonrpc": "2.0", "id": "a", "method": "m", "params": {}})
        );
        let mut notification = json!({"jsonrpc": "2.0", "method": "n", "ID": 1});
        keep_envelope_members(&mut notification);
        assert_eq!(notification, json!({"jsonrpc": "2.0", "method": "n"}));
        let mut batch = json!([1]);
        keep_envelope_members(&mut batch);
        assert_eq!(batch, json!([1]));
    }

    #[test]
    fn has_id_key_agrees_with_id_key() {
        let ids = [
            json!(1),
            json!(-7),
            json!(18446744073709551615u64),
            json!(1.5),
            json!(1.0),
            json!(-7.0),
            json!(-0.0),
            json!(1e300),
            json!("1"),
            json!("s:x"),
            json!(""),
            json!(null),
        ];
        for id in &ids {
            for other in &ids {
                assert_eq!(
                    has_id_key(id, &id_key(other)),
                    id_key(id) == id_key(other),
                    "{id} vs {other}"
                );
            }
        }
        // A key whose digits parse to the same integer but are not its spelling.
        assert!(!has_id_key(&json!(1), "n:01"));
        // An integral float is the integer to a JavaScript server, so to airlock.
        assert_eq!(id_key(&json!(1.0)), id_key(&json!(1)));
        assert_eq!(id_key(&json!(-7.0)), id_key(&json!(-7)));
        assert_eq!(id_key(&json!(-0.0)), id_key(&json!(0)));
        assert_ne!(id_key(&json!(1.5)), id_key(&json!(1)));
        assert_ne!(id_key(&json!(1.0)), id_key(&json!("1")));
    }

    #[test]
    fn classifies_every_shape() {
        let req = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}});
        assert_eq!(
            classify(&req),
            Ok(Class::Request {
                id: &json!(7),
                method: "tools/call"
            })
        );
        let note = json!({"jsonrpc":"2.0","method":"notifications/cancelled"});
        assert_eq!(
            classify(&note),
            Ok(Class::Notification {
                method: "notifications/cancelled"
            })
        );
        let resp = json!({"jsonrpc":"2.0","id":"a","result":{}});
        assert_eq!(classify(&resp), Ok(Class::Response { id: &json!("a") }));
        let err = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}});
        assert_eq!(classify(&err), Ok(Class::Error { id: &Value::Null }));
        let batch = json!([req.clone(), note.clone()]);
        assert!(matches!(classify(&batch), Ok(Class::Batch(items)) if items.len() == 2));
    }

    #[test]
    fn rejects_what_is_not_a_message() {
        assert_eq!(classify(&json!(3)), Err(Invalid::NotAnObject));
        assert_eq!(classify(&json!([])), Err(Invalid::EmptyBatch));
        assert_eq!(
            classify(&json!({"id":1,"method":"x"})),
            Err(Invalid::Version)
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":{},"method":"x"})),
            Err(Invalid::Id)
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":null,"method":"x"})),
            Err(Invalid::Id)
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","method":5})),
            Err(Invalid::Method)
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":1})),
            Err(Invalid::Shape)
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":null,"result":{}})),
            Err(Invalid::Id)
        );
    }

    #[test]
    fn paths_read_like_pointers() {
        let mut message = json!({"params": {"_meta": {"a/b": 1}, "list": [2]}});
        assert_eq!(
            message.at(&["params", "_meta", "a/b"]),
            message.pointer("/params/_meta/a~1b")
        );
        assert_eq!(message.at(&["params", "list", "0"]), None);
        assert_eq!(message.at(&[]), Some(&message.clone()));
        if let Some(meta) = at_mut(&mut message, &["params", "_meta"]) {
            *meta = json!(null);
        }
        assert_eq!(message.pointer("/params/_meta"), Some(&json!(null)));
    }

    #[test]
    fn an_integer_id_key_spells_the_number_as_display_does() {
        let numbers = [
            json!(0),
            json!(7),
            json!(10),
            json!(1234567890),
            json!(u64::MAX),
            json!(-1),
            json!(-10),
            json!(i64::MIN),
            json!(1.5),
            json!(-0.25),
            json!(1e300),
        ];
        for number in &numbers {
            assert_eq!(id_key(number), format!("n:{number}"), "{number}");
        }
    }

    #[test]
    fn id_keys_keep_types_apart() {
        assert_ne!(id_key(&json!(1)), id_key(&json!("1")));
        assert_eq!(id_key(&json!("x")), id_key(&json!("x")));
        assert_eq!(salvage_id(&json!({"id": "k", "method": 3})), json!("k"));
        assert_eq!(salvage_id(&json!({"id": [1]})), Value::Null);
    }

    #[test]
    fn an_error_reply_carries_its_id_code_message_and_only_given_data() {
        let plain = error_response(json!("r1"), code::METHOD_NOT_FOUND, "no such method", None);
        assert_eq!(
            plain,
            json!({"jsonrpc":"2.0","id":"r1","error":{"code":-32601,"message":"no such method"}})
        );
        assert!(plain["error"].get("data").is_none(), "no data key at all");
        let with_data =
            error_response(json!(4), code::INVALID_PARAMS, "bad", Some(json!({"k": 1})));
        assert_eq!(with_data["error"]["data"], json!({"k": 1}));
        assert_eq!(with_data["id"], json!(4));
        // The answer is itself a message the host can classify.
        assert_eq!(classify(&with_data), Ok(Class::Error { id: &json!(4) }));
    }

    #[test]
    fn a_tool_error_is_a_result_with_is_error_and_one_text() {
        let result = tool_error_result("airlock denied it");
        assert_eq!(
            result,
            json!({"content":[{"type":"text","text":"airlock denied it"}],"isError":true})
        );
        let answer = result_response(json!(9), result);
        assert_eq!(classify(&answer), Ok(Class::Response { id: &json!(9) }));
    }

    #[test]
    fn an_unreadable_line_gets_invalid_request_or_parse_error_with_a_null_id() {
        let oversized = unreadable_line_reply(&Unreadable::Oversized {
            bytes: 2048,
            limit: 1024,
        });
        assert_eq!(oversized["id"], Value::Null);
        assert_eq!(oversized["error"]["code"], code::INVALID_REQUEST);
        assert_eq!(
            oversized["error"]["message"],
            "message of 2048 bytes exceeds airlock's limit of 1024 bytes"
        );
        let Err(err) = serde_json::from_str::<Value>("{not json") else {
            panic!("parsed");
        };
        let not_json = unreadable_line_reply(&Unreadable::NotJson(err));
        assert_eq!(not_json["id"], Value::Null);
        assert_eq!(not_json["error"]["code"], code::PARSE_ERROR);
        let message = not_json["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("parse error: key must be a string"),
            "{message}"
        );
    }
}
