//! The JSON configs users already have: `{"mcpServers": {...}}` (Claude Desktop, Claude Code,
//! Cursor) and `{"servers": {...}}` (VS Code).
//!
//! These files belong to other tools and carry their keys (`autoApprove`, `timeout`, `envFile`,
//! `inputs`, ...). Unknown keys are therefore warnings here, not errors: a user must be able to
//! point airlock at the file they have. Typos still surface, because a misspelt `command` leaves
//! the server without one, which is an error. serde_json reports no positions for values, so
//! validation errors point at the server's key, found in the text.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{ConfigFormat, Located, RawServer, ServerConfig, Validator};
use crate::diagnostic::{LineCol, SourceError, SourceWarning};

/// Keys airlock reads from a JSON server entry.
const KNOWN_KEYS: [&str; 15] = [
    "type",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "trust",
    "disabled",
    "enabled",
    "startup_timeout",
    "tool_timeout",
    "idle_timeout",
    "start",
];

type Parsed = (
    ConfigFormat,
    Vec<ServerConfig>,
    String,
    Vec<crate::diagnostic::SourceWarning>,
);

/// Finds `"key"` followed by `:` at or after `from`, returning its byte offset.
fn find_key(text: &str, key: &str, from: usize) -> Option<usize> {
    let needle = format!("\"{key}\"");
    let mut search_from = from;
    while let Some(found) = text.get(search_from..)?.find(&needle) {
        let start = search_from + found;
        let after = text[start + needle.len()..].trim_start();
        if after.starts_with(':') {
            return Some(start);
        }
        search_from = start + needle.len();
    }
    None
}

/// A JSON field of the wrong type; the variant names the type it must have, the value the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FieldTypeError {
    #[error("`{0}` must be a string")]
    String(String),
    #[error("`{0}` must be a whole number of seconds")]
    Seconds(String),
    #[error("`{0}` must be an object of strings")]
    StringMap(String),
}

fn string_field(
    object: &serde_json::Map<String, Value>,
    key: &str,
    at: Option<LineCol>,
) -> Result<Option<Located<String>>, FieldTypeError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(Located {
            value: value.clone(),
            at,
        })),
        Some(_) => Err(FieldTypeError::String(key.to_string())),
    }
}

fn int_field(
    object: &serde_json::Map<String, Value>,
    key: &str,
    at: Option<LineCol>,
) -> Result<Option<Located<i64>>, FieldTypeError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .map(|v| Some(Located { value: v, at }))
            .ok_or_else(|| FieldTypeError::Seconds(key.to_string())),
    }
}

fn string_map(
    object: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<BTreeMap<String, String>, FieldTypeError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(FieldTypeError::String(format!("{key}.{k}"))),
            })
            .collect(),
        Some(_) => Err(FieldTypeError::StringMap(key.to_string())),
    }
}

pub(super) fn parse(
    path: &Path,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Parsed, SourceError> {
    let root: Value = serde_json::from_str(text).map_err(|err| {
        SourceError::new(
            path,
            Some(LineCol {
                line: err.line(),
                column: err.column(),
            }),
            format!("invalid JSON: {err}"),
        )
        .with_fix(
            "correct the JSON syntax (a trailing comma or a missing quote is the usual cause)",
        )
    })?;
    let (format, key) = if root.get("mcpServers").is_some() {
        (ConfigFormat::McpServersJson, "mcpServers")
    } else if root.get("servers").is_some() {
        (ConfigFormat::VsCodeJson, "servers")
    } else {
        return Err(SourceError::new(path, Some(LineCol { line: 1, column: 1 }), "no `mcpServers` or `servers` object in this JSON file")
            .with_fix("point airlock at a Claude Desktop/Claude Code/Cursor config ({\"mcpServers\": {...}}), a VS Code mcp.json ({\"servers\": {...}}), or an airlock.toml"));
    };
    let section_offset = find_key(text, key, 0).unwrap_or(0);
    let Some(entries) = root.get(key).and_then(Value::as_object) else {
        return Err(SourceError::at_span(
            path,
            text,
            section_offset..section_offset,
            format!("`{key}` must be an object"),
        )
        .with_fix(format!(
            "write \"{key}\": {{ \"name\": {{ \"command\": ... }} }}"
        )));
    };

    let separator = "__".to_string();
    let mut validator = Validator {
        path,
        separator: &separator,
        strict_env: false,
        lookup,
        warnings: Vec::new(),
    };
    let mut servers = Vec::with_capacity(entries.len());
    let mut cursor = section_offset;
    for (name, entry) in entries {
        let offset = find_key(text, name, cursor).unwrap_or(cursor);
        cursor = offset;
        let at = Some(LineCol::from_offset(text, offset));
        let field_at = |field: &str| {
            find_key(text, field, offset)
                .map(|o| LineCol::from_offset(text, o))
                .or(at)
        };
        let bad =
            |message: String| SourceError::new(path, at, format!("server {name:?}: {message}"));
        let Some(object) = entry.as_object() else {
            return Err(bad("must be an object".into())
                .with_fix("write { \"command\": ..., \"args\": [...] }"));
        };
        for unknown in object.keys().filter(|k| !KNOWN_KEYS.contains(&k.as_str())) {
            let hint = crate::diagnostic::closest(unknown, KNOWN_KEYS)
                .map(|known| format!("; did you mean {known:?}?"))
                .unwrap_or_default();
            validator.warnings.push(SourceWarning::new(
                path,
                field_at(unknown),
                format!("server {name:?}: key {unknown:?} is not used by airlock (ignored){hint}"),
            ));
        }
        let flag = |key: &str| object.get(key).and_then(Value::as_bool);
        let args = match object.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("`args` must be an array of strings".into()))?,
            Some(_) => return Err(bad("`args` must be an array of strings".into())),
        };
        let with_fix =
            |err: FieldTypeError| bad(err.to_string()).with_fix("correct the value's type");
        let raw = RawServer {
            name: name.clone(),
            at,
            transport: string_field(object, "type", field_at("type"))
                .and_then(|t| match t {
                    Some(t) => Ok(Some(t)),
                    None => string_field(object, "transport", field_at("transport")),
                })
                .map_err(with_fix)?,
            command: string_field(object, "command", field_at("command")).map_err(with_fix)?,
            args,
            env: string_map(object, "env").map_err(with_fix)?,
            env_at: field_at("env"),
            cwd: string_field(object, "cwd", field_at("cwd")).map_err(with_fix)?,
            url: string_field(object, "url", field_at("url")).map_err(with_fix)?,
            headers: string_map(object, "headers").map_err(with_fix)?,
            headers_at: field_at("headers"),
            trust: flag("trust").unwrap_or(false),
            startup_timeout: int_field(object, "startup_timeout", field_at("startup_timeout"))
                .map_err(with_fix)?,
            tool_timeout: int_field(object, "tool_timeout", field_at("tool_timeout"))
                .map_err(with_fix)?,
            idle_timeout: int_field(object, "idle_timeout", field_at("idle_timeout"))
                .map_err(with_fix)?,
            enabled: flag("enabled").unwrap_or(true) && !flag("disabled").unwrap_or(false),
            start: string_field(object, "start", field_at("start")).map_err(with_fix)?,
            sandbox: None,
            tools: None,
        };
        servers.push(validator.validate(raw)?);
    }
    let warnings = validator.warnings;
    Ok((format, servers, separator, warnings))
}
