//! Arguments against the tool's own listed `inputSchema` (`tools.gate_schema`).
//!
//! A server describes each tool's arguments in `tools/list`. The gate remembers those schemas and
//! checks a call's arguments before forwarding it: in `warn` mode a mismatch is logged and
//! audited, in `enforce` mode the call is refused with the validation error, so a server never
//! sees arguments its own contract rules out (an extra key it would trip over, a number where it
//! expects a path). A schema that cannot be compiled (or that points at a remote `$ref`, which is
//! never fetched) is unusable: `enforce` refuses calls to that tool rather than let them through
//! unchecked.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// At most this many validation errors are reported for one call.
const MAX_ERRORS: usize = 5;

/// The compiled `inputSchema` of each listed tool of one server.
#[derive(Default)]
pub struct ToolSchemas {
    by_tool: HashMap<String, Compiled>,
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
    /// Each entry: `<instance path>: <what is wrong>`.
    Invalid(Vec<String>),
    /// The listed schema itself cannot be used; the reason.
    Unusable(String),
}

impl ToolSchemas {
    /// Remembers the schemas of one `tools/list` result page's `tools` (later pages add to
    /// earlier ones; call [`ToolSchemas::forget_all`] before re-listing).
    pub fn learn(&mut self, tools: &[Value]) {
        for tool in tools {
            let (Some(name), Some(schema)) = (tool["name"].as_str(), tool.get("inputSchema"))
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
                let at = err.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                format!("{at}: {err}")
            })
            .collect();
        SchemaCheck::Invalid(errors)
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
