//! Arguments against the tool's own listed `inputSchema` (`tools.gate_schema`).
//!
//! A server describes each tool's arguments in `tools/list`. The gate remembers those schemas and
//! checks a call's arguments before forwarding it: in `warn` mode a mismatch is logged and
//! audited, in `enforce` mode the call is refused with the validation error, so a server never
//! sees arguments its own contract rules out (an extra key it would trip over, a number where it
//! expects a path). A schema that cannot be compiled (or that points at a remote `$ref`, which is
//! never fetched) is unusable: `enforce` refuses calls to that tool rather than let them through
//! unchecked.

use crate::fast_map::FastMap;

use crate::mcp::Field;
use serde_json::{Map, Value};

/// At most this many validation errors are reported for one call.
const MAX_ERRORS: usize = 5;

/// The compiled `inputSchema` of each listed tool of one server.
#[derive(Default)]
pub struct ToolSchemas {
    by_tool: FastMap<String, Compiled>,
}

enum Compiled {
    Usable(Box<jsonschema::Validator>),
    Unusable(String),
}

/// The outcome of checking one call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaCheck {
    Valid,
    /// The tool has not been listed (or listed no schema): nothing to check against.
    Unlisted,
    /// Each entry: `<instance path>: <what is wrong>`, never quoting the value (see
    /// [`what_failed`]).
    Invalid(Vec<String>),
    /// The listed schema itself cannot be used; the reason.
    Unusable(String),
}

impl ToolSchemas {
    /// Remembers the schemas of one `tools/list` result page's `tools` (later pages add to
    /// earlier ones; call [`ToolSchemas::forget_all`] before re-listing).
    pub fn learn(&mut self, tools: &[Value]) {
        for tool in tools {
            let (Some(name), Some(schema)) = (tool["name"].as_str(), tool.field("inputSchema"))
            else {
                continue;
            };
            let compiled = match jsonschema::validator_for(schema) {
                Ok(validator) => Compiled::Usable(Box::new(validator)),
                Err(err) => Compiled::Unusable(err.to_string()),
            };
            self.by_tool.insert(name.to_string(), compiled);
        }
    }

    pub fn forget_all(&mut self) {
        self.by_tool.clear();
    }

    /// Keeps the schemas of the tools `keep` says.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.by_tool.retain(|name, _| keep(name));
    }

    /// Checks a call's `arguments` (absent means `{}`, as MCP defines it) against the tool's
    /// schema.
    pub fn check(&self, tool: &str, arguments: Option<&Value>) -> SchemaCheck {
        let Some(compiled) = self.by_tool.get(tool) else {
            return SchemaCheck::Unlisted;
        };
        let validator = match compiled {
            Compiled::Usable(validator) => validator,
            Compiled::Unusable(why) => return SchemaCheck::Unusable(why.clone()),
        };
        let empty = Value::Object(Map::new());
        let instance = arguments.unwrap_or(&empty);
        if validator.is_valid(instance) {
            return SchemaCheck::Valid;
        }
        let errors = validator
            .iter_errors(instance)
            .take(MAX_ERRORS)
            .map(|err| {
                let at = shorten_pointer(err.instance_path().to_string());
                let at = if at.is_empty() { "/".to_string() } else { at };
                format!("{at}: {}", what_failed(err.kind()))
            })
            .collect();
        SchemaCheck::Invalid(errors)
    }
}

/// A JSON pointer longer than this (a host can send a key of any size) is cut, with `…`.
const MAX_POINTER_BYTES: usize = 128;

fn shorten_pointer(mut pointer: String) -> String {
    if pointer.len() <= MAX_POINTER_BYTES {
        return pointer;
    }
    let mut end = MAX_POINTER_BYTES;
    while !pointer.is_char_boundary(end) {
        end -= 1;
    }
    pointer.truncate(end);
    pointer.push('…');
    pointer
}

/// What a value failed, said by the schema's side only. The validator's own messages quote the
/// value (`"ghp_…" is not of type "integer"`), and this text reaches the host's refusal, the
/// audit log and stderr: an argument's value must never travel there past redaction and the
/// cap, so the pointer says where it is and this says what the schema wanted. Keys the schema
/// does not allow are named by their pointers, shortened like any other.
fn what_failed(kind: &jsonschema::error::ValidationErrorKind) -> String {
    use jsonschema::error::{TypeKind, ValidationErrorKind as Kind};
    match kind {
        Kind::Type { kind } => {
            let types: Vec<String> = match kind {
                TypeKind::Single(one) => vec![one.to_string()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect(),
            };
            format!("is not of type {}", types.join(" or "))
        }
        Kind::Required { property } => format!("lacks the required property {property}"),
        Kind::AdditionalProperties { unexpected } | Kind::UnevaluatedProperties { unexpected } => {
            let pointers: Vec<String> = unexpected
                .iter()
                .map(|key| {
                    shorten_pointer(format!("/{}", key.replace('~', "~0").replace('/', "~1")))
                })
                .collect();
            format!(
                "has properties the schema does not allow ({}: {})",
                kind.keyword(),
                pointers.join(", ")
            )
        }
        Kind::MaxLength { limit } => format!("is longer than {limit} characters"),
        Kind::MinLength { limit } => format!("is shorter than {limit} characters"),
        Kind::Maximum { limit } => format!("is greater than the maximum of {limit}"),
        Kind::Minimum { limit } => format!("is less than the minimum of {limit}"),
        Kind::ExclusiveMaximum { limit } => format!("is not less than {limit}"),
        Kind::ExclusiveMinimum { limit } => format!("is not greater than {limit}"),
        Kind::MaxItems { limit } => format!("has more than {limit} items"),
        Kind::MinItems { limit } => format!("has fewer than {limit} items"),
        Kind::MaxProperties { limit } => format!("has more than {limit} properties"),
        Kind::MinProperties { limit } => format!("has fewer than {limit} properties"),
        Kind::Enum { .. } => "is not one of the values the schema's enum lists".to_string(),
        Kind::Constant { .. } => "is not the schema's const value".to_string(),
        Kind::Format { format } => format!("is not a valid {format:?}"),
        Kind::Pattern { pattern } => format!("does not match the pattern {pattern:?}"),
        other => format!("fails the schema's {:?} keyword", other.keyword()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> ToolSchemas {
        let mut schemas = ToolSchemas::default();
        schemas.learn(&[
            json!({"name": "read_file", "inputSchema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": false
            }}),
            json!({"name": "odd", "inputSchema": {"type": "object", "$ref": "https://example.invalid/s.json"}}),
            json!({"name": "bare"}),
        ]);
        schemas
    }

    #[test]
    fn arguments_are_checked_against_the_listed_schema() {
        let schemas = schemas();
        assert_eq!(
            schemas.check("read_file", Some(&json!({"path": "/a"}))),
            SchemaCheck::Valid
        );
        let SchemaCheck::Invalid(errors) = schemas.check("read_file", Some(&json!({"path": 7})))
        else {
            panic!("a number where a string is listed must not validate");
        };
        assert!(errors[0].starts_with("/path: "), "{errors:?}");
        assert!(matches!(
            schemas.check(
                "read_file",
                Some(&json!({"path": "/a", "Path": "/etc/passwd"}))
            ),
            SchemaCheck::Invalid(_)
        ));
        // Absent arguments are {}: the required key is missing.
        assert!(matches!(
            schemas.check("read_file", None),
            SchemaCheck::Invalid(_)
        ));
    }

    #[test]
    fn unlisted_tools_and_unusable_schemas_are_told_apart() {
        let schemas = schemas();
        assert_eq!(schemas.check("bare", None), SchemaCheck::Unlisted);
        assert_eq!(schemas.check("nope", None), SchemaCheck::Unlisted);
        assert!(matches!(
            schemas.check("odd", Some(&json!({}))),
            SchemaCheck::Unusable(_)
        ));
    }
}
