//! A cheap look at a message: the few fields the gate reads from what a server sends, taken
//! straight from the bytes without building a `Value` tree of the rest.
//!
//! A tool result can be megabytes of file content; the gate only needs the id, whether it is an
//! error, `result.isError` and `error.message`. Everything else is skipped (still validated as
//! JSON by the parser). The classification mirrors [`crate::mcp::classify`] exactly, including
//! "the last of duplicate keys wins" as in a parsed `Value`; whatever this cannot read (not an
//! object, not JSON) is left to the full parse.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::RELATED_TASK;
use super::lenient::reads_as_one_of;

/// The keys of a 2026-07-28 multi round-trip answer's result.
pub const MULTI_ROUND_TRIP_KEYS: [&str; 3] = ["resultType", "inputRequests", "requestState"];

/// What a message is, as far as the gate's handling of server messages goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Peek {
    /// A request with a valid id (the gate may need to renumber it).
    Request { id: Value },
    /// A result or error answering `id` (`null` for an error that could not name its request).
    Answer {
        id: Value,
        /// `error` is present (a JSON-RPC error).
        is_error: bool,
        /// `result.isError` is `true` (a tool-level error).
        tool_error: bool,
        /// `result` is an object that names a task, in any spelling a lenient reader takes for
        /// it: a `task` key (a task-augmented request's `CreateTaskResult`) or a related task in
        /// its `_meta`. A gateway names tasks for their server, so it takes the full path.
        task: bool,
        /// `result` has a key a lenient reader takes for one of a 2026-07-28 multi round-trip
        /// answer's (`resultType`, `inputRequests`, `requestState`): a gateway takes them out of
        /// its servers' answers, so it takes the full path.
        multi_round_trip: bool,
        /// `error.message`, when it is a string.
        error_message: Option<String>,
        /// Where the id's bytes are in the line (start, end), when another id can be put there
        /// and every reader still reads the answer as this one does: its envelope names each of
        /// `jsonrpc`, `id`, `method`, `result` and `error` at most once (however spelled) and
        /// nothing else, holds exactly one of `result` and `error`, and names what the gate
        /// reads of the outcome once. See [`splice_id`].
        id_at: Option<(usize, usize)>,
    },
    /// A notification, or not a valid JSON-RPC message.
    Other,
}

/// The answer `line` with `id` in place of its own, everything else as the server wrote it:
/// `at` is [`Peek::Answer`]'s `id_at` for this line. `None` when `at` does not fit the line.
///
/// A gateway puts its host's id into a server's answer this way, without parsing the line a
/// second time.
pub fn splice_id(line: &[u8], at: (usize, usize), id: &Value) -> Option<Vec<u8>> {
    let (start, end) = at;
    let (before, after) = (line.get(..start)?, line.get(end..)?);
    let mut out = Vec::with_capacity(line.len() + 16);
    out.extend_from_slice(before);
    serde_json::to_writer(&mut out, id).ok()?;
    out.extend_from_slice(after);
    Some(out)
}

/// Peeks at one line. `None` when the line is not a single JSON object (a batch, not JSON), or
/// nests deeper than a parse into a `Value` reads: then parse it in full, which refuses what it
/// cannot read.
pub fn peek(line: &[u8]) -> Option<Peek> {
    let first = line.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    if super::nesting::nests_deeper_than(line, super::nesting::SERDE_JSON_DEPTH) {
        return None;
    }
    let envelope: Envelope<'_> = super::from_line(line).ok()?;
    let id_at = envelope.id_at(line);
    Some(envelope.classify(id_at))
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_))
}

#[derive(Default)]
struct Envelope<'a> {
    /// `jsonrpc` is present and is the string "2.0".
    jsonrpc_ok: bool,
    /// `method` is present; `true` when it is a string.
    method: Option<bool>,
    id: Option<Value>,
    /// The id's bytes in the line (the last `id`, as `id` above).
    id_raw: Option<&'a RawValue>,
    /// One of the envelope's keys came more than once, or a key that is not one of them (a
    /// reader matching keys regardless of case could take `"ID"` for `id`), or a key the gate
    /// reads of the outcome (`result.isError`, `result.task`, `error.message`) came twice.
    repeated: bool,
    /// `result` is present, with what its probe saw.
    result: Option<ResultProbe>,
    /// `error` is present, with its `message` when that is a string.
    error: Option<Option<String>>,
}

impl Envelope<'_> {
    /// Where the id is in `line`, when splicing another id there is safe (see `Peek::Answer`).
    fn id_at(&self, line: &[u8]) -> Option<(usize, usize)> {
        if self.repeated || self.result.is_some() == self.error.is_some() {
            return None;
        }
        let raw = self.id_raw?.get().as_bytes();
        // The raw id borrows from `line`; its place is its distance from the line's start,
        // checked against the bytes themselves.
        let start = raw.as_ptr().addr().checked_sub(line.as_ptr().addr())?;
        let end = start.checked_add(raw.len())?;
        (line.get(start..end)? == raw).then_some((start, end))
    }

    fn classify(self, id_at: Option<(usize, usize)>) -> Peek {
        if !self.jsonrpc_ok {
            return Peek::Other;
        }
        if let Some(method_is_str) = self.method {
            return match self.id {
                Some(id) if method_is_str && valid_id(&id) => Peek::Request { id },
                _ => Peek::Other,
            };
        }
        let Some(id) = self.id else {
            return Peek::Other;
        };
        let (tool_error, task, multi_round_trip) =
            self.result.map_or((false, false, false), |probe| {
                (probe.is_error, probe.task, probe.multi_round_trip)
            });
        if let Some(error_message) = self.error {
            return if valid_id(&id) || id.is_null() {
                Peek::Answer {
                    id,
                    is_error: true,
                    tool_error,
                    task,
                    multi_round_trip,
                    error_message,
                    id_at,
                }
            } else {
                Peek::Other
            };
        }
        if self.result.is_some() && valid_id(&id) {
            return Peek::Answer {
                id,
                is_error: false,
                tool_error,
                task,
                multi_round_trip,
                error_message: None,
                id_at,
            };
        }
        Peek::Other
    }
}

/// A key of the envelope, read without allocating.
enum Field {
    Jsonrpc,
    Id,
    Method,
    Result,
    Error,
    Other,
}

impl Field {
    /// Which of the envelope's keys this is (for noticing one twice), `None` for any other key.
    fn envelope_slot(&self) -> Option<usize> {
        match self {
            Field::Jsonrpc => Some(0),
            Field::Id => Some(1),
            Field::Method => Some(2),
            Field::Result => Some(3),
            Field::Error => Some(4),
            Field::Other => None,
        }
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
                Ok(match key {
                    "jsonrpc" => Field::Jsonrpc,
                    "id" => Field::Id,
                    "method" => Field::Method,
                    "result" => Field::Result,
                    "error" => Field::Error,
                    _ => Field::Other,
                })
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
    }
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvelopeVisitor;
        impl<'de> Visitor<'de> for EnvelopeVisitor {
            type Value = Envelope<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
                let mut envelope = Envelope::default();
                let mut seen = [false; 5];
                // Later duplicates overwrite earlier ones, as in a parsed `Value`.
                while let Some(field) = map.next_key::<Field>()? {
                    match field.envelope_slot() {
                        Some(slot) => {
                            envelope.repeated |= std::mem::replace(&mut seen[slot], true);
                        }
                        None => envelope.repeated = true,
                    }
                    match field {
                        Field::Jsonrpc => {
                            envelope.jsonrpc_ok = map.next_value::<StrProbe>()?.0 == Some(true)
                        }
                        Field::Method => {
                            envelope.method = Some(map.next_value::<StrProbe>()?.0.is_some())
                        }
                        Field::Id => {
                            let raw: &'de RawValue = map.next_value()?;
                            let id = serde_json::from_str(raw.get()).map_err(de::Error::custom)?;
                            envelope.id = Some(id);
                            envelope.id_raw = Some(raw);
                        }
                        Field::Result => {
                            let probe = map.next_value::<ResultProbe>()?;
                            envelope.repeated |= probe.repeated;
                            envelope.result = Some(probe);
                        }
                        Field::Error => {
                            let ErrorProbe(message, repeated) = map.next_value()?;
                            envelope.repeated |= repeated;
                            envelope.error = Some(message);
                        }
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(envelope)
            }
        }
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

/// Skips the rest of an array.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Skips the rest of an object.
fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements the non-string, non-container `visit_*` methods of a probe as "not what we look
/// for", so any JSON value is accepted and skipped.
macro_rules! accept_scalars {
    ($value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            skip_seq(seq)?;
            Ok($value)
        }
    };
}

/// For `jsonrpc` and `method`: `Some(is "2.0")` when the value is a string, else `None`.
struct StrProbe(Option<bool>);

impl<'de> Deserialize<'de> for StrProbe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrProbe;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<StrProbe, E> {
                Ok(StrProbe(Some(text == "2.0")))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<StrProbe, A::Error> {
                skip_map(map)?;
                Ok(StrProbe(None))
            }
            accept_scalars!(StrProbe(None));
        }
        deserializer.deserialize_any(V)
    }
}

/// For `result`: whether it is an object whose (last) `isError` is `true`, and whether it has a
/// `task` key.
#[derive(Clone, Copy, Default)]
struct ResultProbe {
    is_error: bool,
    task: bool,
    multi_round_trip: bool,
    /// `isError` or `task` came twice: a reader keeping the first could read another outcome.
    repeated: bool,
}

impl<'de> Deserialize<'de> for ResultProbe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ResultProbe;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<ResultProbe, E> {
                Ok(ResultProbe::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResultProbe, A::Error> {
                let mut probe = ResultProbe::default();
                let (mut seen_is_error, mut seen_task) = (false, false);
                while let Some(key) = map.next_key::<ResultKey>()? {
                    match key {
                        ResultKey::IsError { exact: true } => {
                            probe.repeated |= std::mem::replace(&mut seen_is_error, true);
                            probe.is_error = map.next_value::<TrueProbe>()?.0;
                        }
                        // `IsError`: a lenient host could read another outcome than the one
                        // airlock audits; the full path takes it out.
                        ResultKey::IsError { exact: false } => {
                            probe.repeated = true;
                            map.next_value::<IgnoredAny>()?;
                        }
                        ResultKey::Task { exact } => {
                            probe.repeated |= exact && std::mem::replace(&mut seen_task, true);
                            probe.task = true;
                            map.next_value::<IgnoredAny>()?;
                        }
                        ResultKey::Meta => {
                            probe.task |= map.next_value::<RelatedTaskProbe>()?.0;
                        }
                        ResultKey::MultiRoundTrip => {
                            probe.multi_round_trip = true;
                            map.next_value::<IgnoredAny>()?;
                        }
                        ResultKey::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(probe)
            }
            accept_scalars!(ResultProbe::default());
        }
        deserializer.deserialize_any(V)
    }
}

/// A key of `result`, as far as the probe cares: `isError` (what the gate reads of the outcome;
/// another spelling of it is told apart), and the keys a lenient reader takes for `task` or
/// `_meta` (a task to name).
enum ResultKey {
    IsError {
        exact: bool,
    },
    Task {
        exact: bool,
    },
    Meta,
    /// `resultType`, `inputRequests` or `requestState`, however spelled.
    MultiRoundTrip,
    Other,
}

impl<'de> Deserialize<'de> for ResultKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ResultKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<ResultKey, E> {
                Ok(match key {
                    "isError" => ResultKey::IsError { exact: true },
                    key if reads_as_one_of(key, &["isError"]) => {
                        ResultKey::IsError { exact: false }
                    }
                    key if reads_as_one_of(key, &["task"]) => ResultKey::Task {
                        exact: key == "task",
                    },
                    key if reads_as_one_of(key, &["_meta"]) => ResultKey::Meta,
                    key if reads_as_one_of(key, &MULTI_ROUND_TRIP_KEYS) => {
                        ResultKey::MultiRoundTrip
                    }
                    _ => ResultKey::Other,
                })
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

/// For a result's `_meta`: whether it has a key a lenient reader takes for the related task's.
struct RelatedTaskProbe(bool);

impl<'de> Deserialize<'de> for RelatedTaskProbe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RelatedTaskProbe;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<RelatedTaskProbe, E> {
                Ok(RelatedTaskProbe(false))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RelatedTaskProbe, A::Error> {
                let mut related = false;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    related |= reads_as_one_of(&key, &[RELATED_TASK]);
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(RelatedTaskProbe(related))
            }
            accept_scalars!(RelatedTaskProbe(false));
        }
        deserializer.deserialize_any(V)
    }
}

/// For `error`: its (last) `message` when the error is an object and the message a string, and
/// whether `message` came twice (a reader keeping the first would show another).
struct ErrorProbe(Option<String>, bool);

impl<'de> Deserialize<'de> for ErrorProbe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ErrorProbe;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<ErrorProbe, E> {
                Ok(ErrorProbe(None, false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ErrorProbe, A::Error> {
                let (mut message, mut seen, mut repeated) = (None, false, false);
                while let Some(key) = map.next_key::<KeyIs>()? {
                    if key.0 == Some("message") {
                        repeated |= std::mem::replace(&mut seen, true);
                        message = map.next_value::<Value>()?.as_str().map(str::to_string);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(ErrorProbe(message, repeated))
            }
            accept_scalars!(ErrorProbe(None, false));
        }
        deserializer.deserialize_any(V)
    }
}

/// A key compared against the few names the probes look for, without allocating.
struct KeyIs(Option<&'static str>);

impl<'de> Deserialize<'de> for KeyIs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyIs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<KeyIs, E> {
                Ok(KeyIs(match key {
                    "isError" => Some("isError"),
                    "message" => Some("message"),
                    "task" => Some("task"),
                    _ => None,
                }))
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

/// Whether a value is the boolean `true`.
struct TrueProbe(bool);

impl<'de> Deserialize<'de> for TrueProbe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TrueProbe;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_bool<E: de::Error>(self, value: bool) -> Result<TrueProbe, E> {
                Ok(TrueProbe(value))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<TrueProbe, E> {
                Ok(TrueProbe(false))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<TrueProbe, E> {
                Ok(TrueProbe(false))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<TrueProbe, E> {
                Ok(TrueProbe(false))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<TrueProbe, E> {
                Ok(TrueProbe(false))
            }
            fn visit_unit<E: de::Error>(self) -> Result<TrueProbe, E> {
                Ok(TrueProbe(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<TrueProbe, A::Error> {
                skip_seq(seq)?;
                Ok(TrueProbe(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TrueProbe, A::Error> {
                skip_map(map)?;
                Ok(TrueProbe(false))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::mcp::{Class, classify};

    /// What the full parse + `classify` + the gate's lookups say about a line, in `Peek` terms.
    fn reference(line: &str) -> Option<Peek> {
        let value: Value = serde_json::from_str(line).ok()?;
        if !value.is_object() {
            return None;
        }
        Some(match classify(&value) {
            Ok(Class::Request { id, .. }) => Peek::Request { id: id.clone() },
            Ok(Class::Response { id } | Class::Error { id }) => Peek::Answer {
                id: id.clone(),
                is_error: value.get("error").is_some(),
                tool_error: value.pointer("/result/isError").and_then(Value::as_bool) == Some(true),
                task: value.pointer("/result/task").is_some(),
                multi_round_trip: value.get("result").and_then(Value::as_object).is_some_and(
                    |result| {
                        result
                            .keys()
                            .any(|key| reads_as_one_of(key, &MULTI_ROUND_TRIP_KEYS))
                    },
                ),
                error_message: value
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                id_at: None,
            },
            _ => Peek::Other,
        })
    }

    #[test]
    fn agrees_with_the_full_parse() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"isError":true,"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"isError":"yes"}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"isError":true,"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":[true]}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"task":{"taskId":"t1","status":"working"}}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"ta\u0073k":null,"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"task":1}]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":null}"#,
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"boom","data":{"x":[1,2]}}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":null}"#,
            r#"{"jsonrpc":"2.0","id":3,"error":{"message":7},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":[3],"error":{"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":2,"id":1,"result":{}}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"roots/list"}"#,
            r#"{"jsonrpc":"2.0","id":"airlock-x","method":"ping","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1}}"#,
            r#"{"jsonrpc":"2.0","method":5,"id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":"two","result":{"a":"\u00e9\"x"}}"#,
            r#"{"jso\u006erpc":"2.0","id":1,"result":{"is\u0045rror":true}}"#,
            r#"  {"jsonrpc":"2.0","id":1.5,"result":{},"extra":{"deep":[[[{}]]]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"REQUESTSTATE":"s","content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"requestState":"nested"}]}}"#,
        ];
        for line in lines {
            assert_eq!(
                peek(line.as_bytes()).map(without_id_at),
                reference(line),
                "{line}"
            );
        }
    }

    fn without_id_at(peeked: Peek) -> Peek {
        match peeked {
            Peek::Answer {
                id,
                is_error,
                tool_error,
                task,
                multi_round_trip,
                error_message,
                ..
            } => Peek::Answer {
                id,
                is_error,
                tool_error,
                task,
                multi_round_trip,
                error_message,
                id_at: None,
            },
            other => other,
        }
    }

    fn id_at(line: &str) -> Option<(usize, usize)> {
        match peek(line.as_bytes()) {
            Some(Peek::Answer { id_at, .. }) => id_at,
            _ => None,
        }
    }

    #[test]
    fn a_spliced_answer_is_the_answer_with_the_new_id() {
        let host_id = Value::String("h-\"1".into());
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"result":{"b":1,"a":[1.50,"x"]}}"#,
            r#"{"result":{"content":[]},"jsonrpc":"2.0","id":"s-7"}"#,
            r#"{"jsonrpc":"2.0","id":"\u0073-\"7","error":{"code":-1,"message":"m"}}"#,
            r#" {"jsonrpc":"2.0", "id" : 1.5e0 ,"result":{"id":9}} "#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#,
        ] {
            let at = id_at(line).unwrap_or_else(|| panic!("no splice point in {line}"));
            let spliced = splice_id(line.as_bytes(), at, &host_id).unwrap();
            let mut expected: Value = serde_json::from_str(line).unwrap();
            expected["id"] = host_id.clone();
            let got: Value = serde_json::from_slice(&spliced).unwrap();
            assert_eq!(got, expected, "{line}");
            // Every byte but the id's is the server's.
            let (start, end) = at;
            assert_eq!(&spliced[..start], &line.as_bytes()[..start]);
            assert_eq!(
                &spliced[spliced.len() - (line.len() - end)..],
                &line.as_bytes()[end..]
            );
        }
        assert_eq!(splice_id(b"{}", (1, 5), &host_id), None);
    }

    #[test]
    fn no_splice_point_where_a_reader_could_read_another_answer() {
        for line in [
            // The id twice, however spelled: a host might read the first, airlock read the last.
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"\u0069d":2,"result":{}}"#,
            // A key a reader may match regardless of case, or cut at a NUL.
            r#"{"jsonrpc":"2.0","id":6,"result":{},"ID":5}"#,
            r#"{"jsonrpc":"2.0","id\u0000":5,"id":6,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":6,"result":{},"extra":1}"#,
            // What the gate reads of the outcome, twice: the host could read the first.
            r#"{"jsonrpc":"2.0","id":6,"result":{"isError":true,"isError":false}}"#,
            // ... or in another spelling, which a lenient host reads as the outcome.
            r#"{"jsonrpc":"2.0","id":6,"result":{"content":[],"IsError":true}}"#,
            r#"{"jsonrpc":"2.0","id":6,"result":{"isError":false,"ISERROR":true}}"#,
            r#"{"jsonrpc":"2.0","id":6,"result":{"task":{},"ta\u0073k":{}}}"#,
            r#"{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"a","message":"b"}}"#,
            // result and error together, or either twice: which one the host takes is its own.
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"a"},"error":{"code":2,"message":"b"}}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"result":{}}"#,
        ] {
            assert!(
                matches!(
                    peek(line.as_bytes()),
                    Some(Peek::Answer { id_at: None, .. })
                ),
                "{line}"
            );
        }
    }

    #[test]
    fn leaves_what_it_cannot_read_to_the_full_parse() {
        for line in [
            "[]",
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            "not json",
            r#"{"jsonrpc":"2.0","id":1,"result":{}} trailing"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"#,
            "",
            "   ",
        ] {
            assert_eq!(peek(line.as_bytes()), None, "{line}");
        }
    }
}
