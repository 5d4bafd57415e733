//! What a pin covers: the parts of a tool, prompt or resource template definition that tell a
//! model (or a person) what it does, and the server's `instructions` (which many hosts put in
//! the model's system prompt), in a canonical form (object keys sorted, no whitespace), hashed
//! with SHA-256. Two listings that differ only in key order or spacing pin the same.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::hash::sha256_hex;

/// The kinds of definitions airlock pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Tool,
    Prompt,
    ResourceTemplate,
    /// The `instructions` of the server's `initialize` answer: one definition, named
    /// [`INSTRUCTIONS`], pinned as the listings are ([`Definition::instructions`]).
    Instructions,
}

/// The name of the one definition of [`Kind::Instructions`].
pub const INSTRUCTIONS: &str = "instructions";

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Tool,
        Kind::Prompt,
        Kind::ResourceTemplate,
        Kind::Instructions,
    ];

    /// The fields of a definition that are pinned. Anything else (`_meta`, `icons`, unknown
    /// fields) may change freely: it is presentation or bookkeeping, not what the model reads.
    pub fn pinned_fields(self) -> &'static [&'static str] {
        match self {
            Kind::Tool => &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
                // How a host must call it (`taskSupport`): a change changes every call.
                "execution",
            ],
            Kind::Prompt => &["name", "title", "description", "arguments"],
            Kind::Instructions => &["name", "instructions", "serverInfo", "metaServerInfo"],
            Kind::ResourceTemplate => &[
                "name",
                "title",
                "uriTemplate",
                "description",
                "mimeType",
                "annotations",
            ],
        }
    }

    /// The list method and the key of its result that holds the definitions.
    pub fn list_method(self) -> (&'static str, &'static str) {
        match self {
            Kind::Tool => ("tools/list", "tools"),
            Kind::Prompt => ("prompts/list", "prompts"),
            Kind::ResourceTemplate => ("resources/templates/list", "resourceTemplates"),
            // Not a list: the guard sees a one-item listing made of the `initialize` answer.
            Kind::Instructions => ("initialize", "instructions"),
        }
    }

    /// For messages: "tool", "prompt", "resource template".
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::ResourceTemplate => "resource template",
            Kind::Instructions => "server instructions",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.noun())
    }
}

/// One definition as listed by a server, reduced to its pinned fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub kind: Kind,
    pub name: String,
    /// The pinned fields, keys sorted at every depth.
    pub canonical: Value,
    /// SHA-256 (hex) of `canonical`'s compact encoding.
    pub sha256: String,
    /// The length of that encoding: what pinning it adds to the pin store.
    pub bytes: usize,
}

/// `value` with object keys sorted at every depth.
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut sorted = Map::with_capacity(map.len());
            for key in keys {
                sorted.insert(key.clone(), canonical(&map[key]));
            }
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The parts of a server's `serverInfo` that are its own words to a host, which may show them
/// or prompt with them; `name` and `version` are identity (they change with each release).
const SERVER_INFO_TEXT: [&str; 2] = ["title", "description"];

/// Where an `initialize` (or 2026-07-28 `server/discover`) result holds the server's info,
/// under the item's field name for it: `serverInfo`, and the era's `_meta` entry.
fn server_infos(result: &Map<String, Value>) -> [(&'static str, Option<&Map<String, Value>>); 2] {
    [
        (
            "serverInfo",
            result.get("serverInfo").and_then(Value::as_object),
        ),
        (
            "metaServerInfo",
            result
                .get("_meta")
                .and_then(|meta| meta.get(crate::mcp::META_SERVER_INFO))
                .and_then(Value::as_object),
        ),
    ]
}

/// The listing item the server's own text in an `initialize` or `server/discover` result is
/// pinned as ([`Kind::Instructions`]): its `instructions`, and the title and description of
/// its server info; `None` when it has none of them.
pub fn server_text_item(result: &Map<String, Value>) -> Option<Value> {
    let mut item = Map::new();
    if let Some(text) = result.get("instructions") {
        item.insert("instructions".into(), text.clone());
    }
    for (field, info) in server_infos(result) {
        let text: Map<String, Value> = SERVER_INFO_TEXT
            .iter()
            .filter_map(|key| Some(((*key).to_string(), info?.get(*key)?.clone())))
            .collect();
        if !text.is_empty() {
            item.insert(field.into(), Value::Object(text));
        }
    }
    if item.is_empty() {
        return None;
    }
    item.insert("name".into(), Value::String(INSTRUCTIONS.into()));
    Some(Value::Object(item))
}

/// Takes the server's own text (what [`server_text_item`] pins) out of a result.
pub fn remove_server_text(result: &mut Map<String, Value>) {
    result.remove("instructions");
    let take_text = |info: Option<&mut Value>| {
        if let Some(info) = info.and_then(Value::as_object_mut) {
            for key in SERVER_INFO_TEXT {
                info.remove(key);
            }
        }
    };
    take_text(
        result
            .get_mut("_meta")
            .and_then(|meta| meta.get_mut(crate::mcp::META_SERVER_INFO)),
    );
    take_text(result.get_mut("serverInfo"));
}

/// Keys of a tool's `_meta` that hosts act on, pinned with its definition: `ui` and `ui/*` (MCP
/// Apps, nested or flat as in `ui/resourceUri`: the host renders a UI the server supplies, which
/// can call tools) and `openai/*` (the same for ChatGPT's apps). The rest of `_meta` is the server's own bookkeeping and is not pinned.
fn host_acts_on(key: &str) -> bool {
    key == "ui" || key.starts_with("ui/") || key.starts_with("openai/")
}

impl Definition {
    /// Reads one listed item; `None` when it has no string `name`.
    pub fn from_listed(kind: Kind, item: &Value) -> Option<Definition> {
        let name = item.get("name")?.as_str()?.to_string();
        let mut pinned = Map::new();
        for field in kind.pinned_fields() {
            if let Some(value) = item.get(*field) {
                pinned.insert((*field).to_string(), value.clone());
            }
        }
        if kind == Kind::Tool
            && let Some(meta) = item.get("_meta").and_then(Value::as_object)
        {
            let acted_on: Map<String, Value> = meta
                .iter()
                .filter(|(key, _)| host_acts_on(key))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            // Only when there are any: a tool without them hashes as it always did.
            if !acted_on.is_empty() {
                pinned.insert("_meta".to_string(), Value::Object(acted_on));
            }
        }
        let canonical = canonical(&Value::Object(pinned));
        let encoded = canonical.to_string();
        Some(Definition {
            kind,
            name,
            sha256: sha256_hex(encoded.as_bytes()),
            bytes: encoded.len(),
            canonical,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_unpinned_fields_do_not_change_the_hash() {
        let a = json!({"name": "echo", "description": "Echo", "inputSchema": {"type": "object", "properties": {"b": {}, "a": {}}}, "_meta": {"x": 1}});
        let b = json!({"inputSchema": {"properties": {"a": {}, "b": {}}, "type": "object"}, "description": "Echo", "name": "echo", "icons": []});
        let (a, b) = (
            Definition::from_listed(Kind::Tool, &a).unwrap(),
            Definition::from_listed(Kind::Tool, &b).unwrap(),
        );
        assert_eq!(a.sha256, b.sha256);
        assert_eq!(
            a.canonical.to_string(),
            r#"{"description":"Echo","inputSchema":{"properties":{"a":{},"b":{}},"type":"object"},"name":"echo"}"#
        );
    }

    #[test]
    fn the_meta_keys_hosts_act_on_are_pinned_and_the_rest_is_not() {
        let base = json!({"name": "echo", "description": "Echo", "_meta": {"progress": 1}});
        let plain =
            Definition::from_listed(Kind::Tool, &json!({"name": "echo", "description": "Echo"}));
        let base = Definition::from_listed(Kind::Tool, &base).unwrap().sha256;
        assert_eq!(
            base,
            plain.unwrap().sha256,
            "other _meta keys change nothing"
        );
        for meta in [
            json!({"ui": {"resourceUri": "ui://evil/app"}}),
            json!({"openai/outputTemplate": "ui://evil"}),
            json!({"ui/resourceUri": "ui://evil/app"}),
        ] {
            let item = json!({"name": "echo", "description": "Echo", "_meta": meta});
            let changed = Definition::from_listed(Kind::Tool, &item).unwrap().sha256;
            assert_ne!(changed, base, "{item}");
        }
    }

    #[test]
    fn every_pinned_field_changes_the_hash() {
        for kind in Kind::ALL {
            let base = json!({"name": "n"});
            let reference = Definition::from_listed(kind, &base).unwrap().sha256;
            for field in kind.pinned_fields().iter().filter(|f| **f != "name") {
                let mut changed = base.clone();
                changed[*field] = json!("something else");
                let hash = Definition::from_listed(kind, &changed).unwrap().sha256;
                assert_ne!(hash, reference, "{kind} {field}");
            }
        }
        assert!(Definition::from_listed(Kind::Tool, &json!({"description": "no name"})).is_none());
    }
}
