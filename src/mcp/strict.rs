//! Parsing a line the way the gate reads it and telling whether another reader could read it
//! otherwise. A JSON object with one key twice is read by `serde_json` as its last value; a
//! server whose parser keeps the first would see another tool name or other arguments than the
//! gate decided on. Such a line is never forwarded as the bytes that came (see
//! `session/core/fast.rs`): it is re-encoded from what the gate read.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A parsed line, and whether any of its objects repeats a key.
pub struct Parsed {
    pub value: Value,
    pub duplicate_keys: bool,
}

/// Parses `line` as `serde_json::from_slice::<Value>` does (last duplicate wins), noting any
/// repeated key on the way (one pass, no second parse).
pub fn parse_noting_duplicate_keys(line: &[u8]) -> Result<Parsed, serde_json::Error> {
    let duplicate = Cell::new(false);
    let mut deserializer = serde_json::Deserializer::from_slice(line);
    let envelope = Noting {
        duplicate: &duplicate,
        envelope: true,
    };
    let value = envelope.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(Parsed {
        value,
        duplicate_keys: duplicate.get(),
    })
}

/// Builds a `Value` and sets the flag when an object repeats a key.
#[derive(Clone, Copy)]
struct Noting<'a> {
    duplicate: &'a Cell<bool>,
    /// The line's outermost value: an object there is a JSON-RPC envelope.
    envelope: bool,
}

impl Noting<'_> {
    /// The seed for a value inside this one.
    fn inner(self) -> Self {
        Noting {
            envelope: false,
            ..self
        }
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
        while let Some(item) = seq.next_element_seed(self.inner())? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // An envelope gets room for its keys at once (growing from empty rehashes at the
        // fourth); any other object starts empty, as `{}` costs nothing then: reserving for
        // every object would let a 4 MiB line of `{},{},...` take eight times the memory.
        let mut object = if self.envelope {
            Map::with_capacity(4)
        } else {
            Map::new()
        };
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.inner())?;
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
        let noted: Vec<bool> = lines
            .iter()
            .map(|line| {
                let parsed = parse_noting_duplicate_keys(line).unwrap();
                let plain: Value = serde_json::from_slice(line).unwrap();
                assert_eq!(parsed.value, plain, "{}", String::from_utf8_lossy(line));
                parsed.duplicate_keys
            })
            .collect();
        assert_eq!(noted, vec![false, true, true, false]);
    }

    #[test]
    fn what_serde_json_refuses_is_refused() {
        for line in [&b"{not json"[..], b"{\"a\":1} trailing", b"\"\\ud800\""] {
            assert!(
                parse_noting_duplicate_keys(line).is_err(),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }
}
