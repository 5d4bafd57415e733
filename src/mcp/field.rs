//! Reading fields of the small objects a JSON-RPC message is made of.
//!
//! serde_json keeps object keys in order (`preserve_order`: a tool's `inputSchema` must reach the
//! host with its properties as the server wrote them), and its ordered map finds a key by
//! hashing it with SipHash. A message's envelope and `params` have a handful of keys, and a
//! `tools/call` is looked into some thirty times on its way through airlock, so those hashes
//! were the largest single item of airlock's own work per call (callgrind, `docs/run.md`
//! "Performance"). Comparing a few short keys in order costs a fraction of one hash, so small
//! objects are scanned; a large one is still looked up by hash. The answer is the same either
//! way: a map holds each key once.

use serde_json::{Map, Value};

/// Up to this many keys an object is scanned rather than looked up by hash.
const SCANNED_KEYS: usize = 12;

/// Field access by key, the same as serde_json's `get`/`get_mut`, faster on small objects.
pub trait Field {
    /// The value of `key`, when this is an object that has it.
    fn field(&self, key: &str) -> Option<&Value>;
    /// [`Field::field`], mutable.
    fn field_mut(&mut self, key: &str) -> Option<&mut Value>;
    /// Whether this is an object that has `key`.
    fn has_field(&self, key: &str) -> bool {
        self.field(key).is_some()
    }
    /// The value at `keys` (object keys, outermost first), like `Value::pointer` without
    /// splitting and unescaping a pointer string.
    fn at(&self, keys: &[&str]) -> Option<&Value>;
}

impl Field for Map<String, Value> {
    fn field(&self, key: &str) -> Option<&Value> {
        if self.len() <= SCANNED_KEYS {
            self.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
        } else {
            self.get(key)
        }
    }

    fn field_mut(&mut self, key: &str) -> Option<&mut Value> {
        if self.len() <= SCANNED_KEYS {
            self.iter_mut()
                .find(|(k, _)| k.as_str() == key)
                .map(|(_, v)| v)
        } else {
            self.get_mut(key)
        }
    }

    /// On a map the path must name a field: an empty path would name the map itself, which is
    /// not a `Value`, so it gives `None` (on a `Value` it gives the value).
    fn at(&self, keys: &[&str]) -> Option<&Value> {
        let (first, rest) = keys.split_first()?;
        self.field(first)?.at(rest)
    }
}

impl Field for Value {
    fn field(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(object) => object.field(key),
            _ => None,
        }
    }

    fn field_mut(&mut self, key: &str) -> Option<&mut Value> {
        match self {
            Value::Object(object) => object.field_mut(key),
            _ => None,
        }
    }

    fn at(&self, keys: &[&str]) -> Option<&Value> {
        keys.iter().try_fold(self, |value, key| value.field(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_what_get_finds_in_small_and_large_objects() {
        let mut large = Map::new();
        for n in 0..40 {
            large.insert(format!("k{n}"), json!(n));
        }
        let small =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        for value in [small, Value::Object(large)] {
            for key in [
                "jsonrpc", "id", "method", "params", "k0", "k39", "k40", "", "ID",
            ] {
                assert_eq!(value.field(key), value.get(key), "{key}");
            }
        }
        assert_eq!(json!([1, 2]).field("0"), None);
        assert_eq!(json!("text").field("text"), None);
    }

    #[test]
    fn a_key_written_twice_reads_as_serde_json_reads_it() {
        let value: Value = serde_json::from_str(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        assert_eq!(value.field("a"), value.get("a"));
        assert_eq!(value.field("a"), Some(&json!(3)));
    }

    #[test]
    fn field_mut_changes_the_value_get_reads() {
        let mut value = json!({"params": {"name": "x"}, "id": 1});
        *value.field_mut("id").unwrap() = json!(2);
        if let Some(params) = value.field_mut("params") {
            *params.field_mut("name").unwrap() = json!("y");
        }
        assert_eq!(value, json!({"params": {"name": "y"}, "id": 2}));
        assert!(json!(null).clone().field_mut("id").is_none());
    }

    #[test]
    fn at_walks_object_keys_like_pointer() {
        let value = json!({"params": {"_meta": {"progressToken": 7}, "a/b": 1}});
        assert_eq!(
            value.at(&["params", "_meta", "progressToken"]),
            value.pointer("/params/_meta/progressToken")
        );
        assert_eq!(value.at(&["params", "a/b"]), Some(&json!(1)));
        assert_eq!(value.at(&["params", "missing", "x"]), None);
        assert_eq!(value.at(&[]), Some(&value));
        let params = value["params"].as_object().unwrap();
        assert_eq!(params.at(&["_meta", "progressToken"]), Some(&json!(7)));
        assert_eq!(params.at(&[]), None);
    }
}
