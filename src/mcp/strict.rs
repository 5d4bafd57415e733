//! Parsing a line the way the gate reads it and telling whether another reader could read it
//! otherwise. A JSON object with one key twice is read by `serde_json` as its last value; a
//! server whose parser keeps the first would see another tool name or other arguments than the
//! gate decided on. Such a line is never forwarded as the bytes that came (see
//! `session/core/fast.rs`): it is re-encoded from what the gate read.
//!
//! The same pass notes where the envelope's `id` and its `params.name` are in the line, so a
//! gateway can put its own id and the server's own tool name there instead of encoding the whole
//! request again ([`Spans`]).

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A parsed line, and whether any of its objects repeats a key.
pub struct Parsed {
    pub value: Value,
    pub duplicate_keys: bool,
    pub spans: Spans,
}

/// Where (start, end: byte offsets into the line) the envelope's `id` value and its
/// `params.name` value are, when the line is an object that has them. Only worth reading when
/// no object repeats a key: with `"id"` twice, this is the last one's (the one a `Value` holds).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Spans {
    pub id: Option<(usize, usize)>,
    pub name: Option<(usize, usize)>,
}

/// Parses `line` as `serde_json::from_slice::<Value>` does (last duplicate wins), noting any
/// repeated key on the way (one pass, no second parse), and with `note_spans` the [`Spans`]
/// (which costs reading those two values twice: only a gateway needs them).
pub fn parse_noting_duplicate_keys(
    line: &[u8],
    note_spans: bool,
) -> Result<Parsed, serde_json::Error> {
    let duplicate = Cell::new(false);
    let spans = Cell::new(Spans::default());
    let envelope = Noting {
        duplicate: &duplicate,
        spans: &spans,
        line,
        place: if note_spans {
            Place::Envelope
        } else {
            Place::Unspanned
        },
    };
    // As `super::from_line` reads: text when the whole line is UTF-8 (its strings are not
    // checked again), bytes otherwise (serde_json's own error).
    let value = match std::str::from_utf8(line) {
        Ok(text) => read_all(envelope, serde_json::Deserializer::from_str(text))?,
        Err(_) => read_all(envelope, serde_json::Deserializer::from_slice(line))?,
    };
    Ok(Parsed {
        value,
        duplicate_keys: duplicate.get(),
        spans: spans.get(),
    })
}

/// The one value of a whole line, and nothing after it but whitespace.
fn read_all<'de, R: serde_json::de::Read<'de>>(
    seed: Noting<'_>,
    mut deserializer: serde_json::Deserializer<R>,
) -> Result<Value, serde_json::Error> {
    let value = seed.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Where in the line a value is, as far as [`Spans`] go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The line's outermost value: an object there is a JSON-RPC envelope.
    Envelope,
    /// The envelope's `params`.
    Params,
    Elsewhere,
    /// The line's outermost value, when no spans are asked for.
    Unspanned,
}

/// Builds a `Value` and sets the flag when an object repeats a key.
#[derive(Clone, Copy)]
struct Noting<'a> {
    duplicate: &'a Cell<bool>,
    spans: &'a Cell<Spans>,
    line: &'a [u8],
    place: Place,
}

impl Noting<'_> {
    /// The seed for the value of `key` inside this one.
    fn inner(self, key: &str) -> Self {
        let place = match (self.place, key) {
            (Place::Envelope, "params") => Place::Params,
            _ => Place::Elsewhere,
        };
        Noting { place, ..self }
    }

    /// `raw` (a value of this object) read as a `Value`. An array or object is read as deep
    /// down as it is in the line (inside as many arrays as it has objects around it), so the
    /// nesting limit falls where `serde_json` puts it.
    fn read_raw(self, raw: &RawValue) -> Result<Value, serde_json::Error> {
        let inner = Noting {
            place: Place::Elsewhere,
            ..self
        };
        let text = raw.get();
        if !text.starts_with(['[', '{']) {
            return inner.deserialize(&mut serde_json::Deserializer::from_str(text));
        }
        let around = match self.place {
            Place::Envelope => 1,
            _ => 2,
        };
        let wrapped = format!("{}{text}{}", "[".repeat(around), "]".repeat(around));
        let mut value = inner.deserialize(&mut serde_json::Deserializer::from_str(&wrapped))?;
        for _ in 0..around {
            if let Value::Array(items) = &mut value
                && items.len() == 1
            {
                value = items.swap_remove(0);
            }
        }
        Ok(value)
    }

    /// Where `raw` (a value borrowed from the line) is in the line.
    fn span_of(&self, raw: &RawValue) -> Option<(usize, usize)> {
        let start = (raw.get().as_ptr() as usize).checked_sub(self.line.as_ptr() as usize)?;
        let end = start.checked_add(raw.get().len())?;
        (end <= self.line.len()).then_some((start, end))
    }
}

impl<'de> DeserializeSeed<'de> for Noting<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Noting<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        // serde_json's own reading: a number it cannot hold as f64 is null.
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let item = Noting {
            place: Place::Elsewhere,
            ..self
        };
        while let Some(value) = seq.next_element_seed(item)? {
            items.push(value);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // An envelope gets room for its keys at once (growing from empty rehashes at the
        // fourth); any other object starts empty, as `{}` costs nothing then: reserving for
        // every object would let a 4 MiB line of `{},{},...` take eight times the memory.
        let mut object = if matches!(self.place, Place::Envelope | Place::Unspanned) {
            Map::with_capacity(4)
        } else {
            Map::new()
        };
        while let Some(key) = map.next_key::<String>()? {
            let spanned = matches!(
                (self.place, key.as_str()),
                (Place::Envelope, "id") | (Place::Params, "name")
            );
            let value = if spanned {
                // The value as it is in the line (scalars are short), then read as a `Value`.
                let raw = map.next_value::<&RawValue>()?;
                let mut spans = self.spans.get();
                let span = self.span_of(raw);
                match self.place {
                    Place::Envelope => spans.id = span,
                    _ => spans.name = span,
                }
                self.spans.set(spans);
                self.read_raw(raw).map_err(serde::de::Error::custom)?
            } else {
                map.next_value_seed(self.inner(&key))?
            };
            if object.insert(key, value).is_some() {
                self.duplicate.set(true);
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_serde_json_does_and_notes_repeated_keys() {
        let lines: [&[u8]; 4] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.50,"big":18446744073709551615,"neg":-3,"s":"\u00e9","a":[null,true,{}]}}}"#,
            br#"{"params":{"name":"denied","name":"allowed"}}"#,
            br#"[{"a":1},{"a":2,"b":{"c":1,"c":2}}]"#,
            br#" "x" "#,
        ];
        for spans in [false, true] {
            let noted: Vec<bool> = lines
                .iter()
                .map(|line| {
                    let parsed = parse_noting_duplicate_keys(line, spans).unwrap();
                    let plain: Value = serde_json::from_slice(line).unwrap();
                    assert_eq!(parsed.value, plain, "{}", String::from_utf8_lossy(line));
                    assert_eq!(
                        parsed.spans.id.is_some(),
                        spans && line.starts_with(b"{\"j")
                    );
                    parsed.duplicate_keys
                })
                .collect();
            assert_eq!(noted, vec![false, true, true, false]);
        }
    }

    #[test]
    fn what_serde_json_refuses_is_refused() {
        for line in [
            &b"{not json"[..],
            b"{\"a\":1} trailing",
            b"\"\\ud800\"",
            b"{\"a\":\"\xff\"}",
            b"{\"\xc3\":1}",
        ] {
            let strict = parse_noting_duplicate_keys(line, true).err();
            let plain = serde_json::from_slice::<Value>(line).err();
            // The same error at the same place as serde_json's own reading of the bytes.
            assert_eq!(
                strict.map(|e| e.to_string()),
                plain.map(|e| e.to_string()),
                "{}",
                String::from_utf8_lossy(line)
            );
            assert!(
                parse_noting_duplicate_keys(line, true).is_err(),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    /// The text of `span` in `line`.
    fn text(line: &[u8], span: Option<(usize, usize)>) -> Option<&str> {
        let (start, end) = span?;
        std::str::from_utf8(&line[start..end]).ok()
    }

    #[test]
    fn notes_where_the_envelopes_id_and_params_name_are_however_spelled() {
        let cases: [(&[u8], Option<&str>, Option<&str>); 7] = [
            (
                br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":{"name":"x","id":1}}}"#,
                Some("7"),
                Some(r#""a__echo""#),
            ),
            // Spacing, an escaped key, an escaped value, the id after params.
            (
                br#"{ "params" : { "n\u0061me" : "a__\u00e9" } , "i\u0064" : "r-\"1\"" }"#,
                Some(r#""r-\"1\"""#),
                Some(r#""a__\u00e9""#),
            ),
            // Only the envelope's id and params' own name: not a name elsewhere.
            (
                br#"{"name":"top","params":{"arguments":{"name":"deep"}},"result":{"id":2}}"#,
                None,
                None,
            ),
            (br#"{"id":[1,{"id":2}],"params":[{"name":"x"}]}"#, Some(r#"[1,{"id":2}]"#), None),
            (br#"{"id":null,"params":{"name":5}}"#, Some("null"), Some("5")),
            (br#"[{"id":1,"params":{"name":"x"}}]"#, None, None),
            (br#""id""#, None, None),
        ];
        for (line, id, name) in cases {
            let parsed = parse_noting_duplicate_keys(line, true).unwrap();
            let shown = String::from_utf8_lossy(line);
            let plain: Value = serde_json::from_slice(line).unwrap();
            assert_eq!(parsed.value, plain, "{shown}");
            assert_eq!(text(line, parsed.spans.id), id, "{shown}");
            assert_eq!(text(line, parsed.spans.name), name, "{shown}");
        }
    }

    #[test]
    fn a_spanned_value_is_refused_as_serde_json_refuses_it() {
        for line in [
            &br#"{"id":"\ud800"}"#[..],
            br#"{"params":{"name":"\ud800"}}"#,
            br#"{"id":1e999}"#,
            br#"{"id":tru}"#,
        ] {
            assert!(serde_json::from_slice::<Value>(line).is_err());
            assert!(
                parse_noting_duplicate_keys(line, true).is_err(),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn a_nested_id_meets_the_nesting_limit_where_serde_json_does() {
        for depth in 120..132 {
            let nested = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
            for line in [
                format!(r#"{{"id":{}}}"#, nested(depth)),
                format!(r#"{{"params":{{"name":{}}}}}"#, nested(depth)),
            ] {
                let plain = serde_json::from_slice::<Value>(line.as_bytes());
                let strict = parse_noting_duplicate_keys(line.as_bytes(), true);
                assert_eq!(plain.is_ok(), strict.is_ok(), "{depth}: {line}");
                if let (Ok(plain), Ok(strict)) = (plain, strict) {
                    assert_eq!(plain, strict.value);
                }
            }
        }
    }
}
