//! Rewriting a TOML host file (Codex CLI's `config.toml`) with `toml_edit`, which keeps comments,
//! key order and layout of everything airlock does not touch.

use toml_edit::{Array, DocumentMut, Item, Table, TableLike, Value};

use super::entry::{Action, EntryFacts, RemoteFacts, Shape};
use super::hosts::Host;
use super::{Insert, InsertValue, Removed, Rewrite};

/// Why a TOML host file cannot be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TomlEditError {
    /// Byte offset of the problem, when the parser knows it.
    pub offset: Option<usize>,
    pub message: String,
}

fn strings(item: Option<&Item>) -> Option<Vec<String>> {
    match item {
        None => Some(Vec::new()),
        Some(item) => item
            .as_array()?
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect(),
    }
}

fn keys(item: Option<&Item>) -> Vec<String> {
    item.and_then(Item::as_table_like)
        .map(|t| t.iter().map(|(k, _)| k.to_string()).collect())
        .unwrap_or_default()
}

fn shape(entry: &dyn TableLike, host: &Host) -> Shape {
    if let Some(command) = entry.get("command") {
        let Some(program) = command.as_str() else {
            return Shape::Unknown("`command` is not a string".into());
        };
        let Some(args) = strings(entry.get("args")) else {
            return Shape::Unknown("`args` is not a list of strings".into());
        };
        let mut env_keys = keys(entry.get("env"));
        // Codex's `env_vars`: names passed through from its own environment.
        for name in strings(entry.get("env_vars")).unwrap_or_default() {
            if !env_keys.contains(&name) {
                env_keys.push(name);
            }
        }
        let path_env = entry
            .get("env")
            .and_then(Item::as_table_like)
            .map(|table| {
                table
                    .iter()
                    .filter_map(|(key, value)| {
                        let value = value.as_str()?;
                        super::entry::looks_like_path(key, value)
                            .then(|| (key.to_string(), value.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        return Shape::Stdio {
            command: program.to_string(),
            args,
            env_keys,
            path_env,
            env_file: None,
        };
    }
    let url = host
        .remote_keys
        .iter()
        .find_map(|key| entry.get(key).and_then(Item::as_str));
    let Some(url) = url else {
        let keys = entry.iter().map(|(key, _)| key);
        return Shape::Unknown(super::entry::neither_command_nor_url(keys));
    };
    let mut headers: Vec<(String, String)> = entry
        .get("http_headers")
        .and_then(Item::as_table_like)
        .map(|t| {
            t.iter()
                .filter_map(|(k, v)| Some((k.to_string(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    if let Some(variable) = entry.get("bearer_token_env_var").and_then(Item::as_str) {
        headers.push((
            "Authorization".into(),
            format!("Bearer ${{env:{variable}}}"),
        ));
    }
    // Codex's switch, tool filters, headers from variables and timeouts: no gateway config
    // carries them.
    let mut not_carried: Vec<String> = [
        "disabled_tools",
        "enabled_tools",
        "env_http_headers",
        "startup_timeout_sec",
        "tool_timeout_sec",
    ]
    .iter()
    .filter(|key| entry.get(key).is_some())
    .map(|key| format!("`{key}`"))
    .collect();
    if entry.get("enabled").and_then(Item::as_bool) == Some(false) {
        not_carried.insert(0, "`enabled = false`".to_string());
    }
    Shape::Remote(RemoteFacts {
        url: url.to_string(),
        sse: false,
        headers,
        not_carried,
    })
}

/// Sets a string value in place, keeping the whitespace and comments around it.
fn set_string(item: &mut Item, text: &str) {
    if let Some(value) = item.as_value_mut() {
        let decor = value.decor().clone();
        *value = Value::from(text);
        *value.decor_mut() = decor;
    }
}

fn wrap(entry: &mut dyn TableLike, command: &str, prepend: &[String]) {
    if let Some(item) = entry.get_mut("command") {
        set_string(item, command);
    }
    match entry.get_mut("args").and_then(Item::as_array_mut) {
        Some(args) => prepend_items(args, prepend),
        None => {
            let mut args = Array::new();
            for arg in prepend {
                args.push(arg.as_str());
            }
            entry.insert("args", Item::Value(Value::Array(args)));
        }
    }
}

/// Puts `items` in front of the array's first element, each formatted as that element was.
fn prepend_items(args: &mut Array, items: &[String]) {
    let first_prefix = args
        .get(0)
        .and_then(|v| v.decor().prefix())
        .and_then(|p| p.as_str())
        .map(str::to_string);
    for (offset, item) in items.iter().enumerate() {
        args.insert(offset, item.as_str());
    }
    let Some(prefix) = first_prefix else { return };
    // Multi-line arrays put each element on its own line: do the same for the new ones.
    let each = if prefix.contains('\n') {
        prefix.clone()
    } else {
        " ".to_string()
    };
    for index in 0..args.len().min(items.len() + 1) {
        if let Some(value) = args.get_mut(index) {
            let text = if index == 0 {
                prefix.as_str()
            } else {
                each.as_str()
            };
            value.decor_mut().set_prefix(text);
        }
    }
}

fn unwrap(entry: &mut dyn TableLike, command: &str, drop: usize) {
    if let Some(item) = entry.get_mut("command") {
        set_string(item, command);
    }
    if let Some(args) = entry.get_mut("args").and_then(Item::as_array_mut) {
        let prefix = args
            .get(0)
            .and_then(|v| v.decor().prefix())
            .and_then(|p| p.as_str())
            .map(str::to_string);
        for _ in 0..drop.min(args.len()) {
            args.remove(0);
        }
        if let (Some(prefix), Some(first)) = (prefix, args.get_mut(0)) {
            first.decor_mut().set_prefix(prefix);
        }
    }
}

fn map_mut<'a>(doc: &'a mut DocumentMut, path: &[&str]) -> Option<&'a mut dyn TableLike> {
    let mut current: &mut dyn TableLike = doc.as_table_mut();
    for step in path {
        current = current.get_mut(step)?.as_table_like_mut()?;
    }
    Some(current)
}

/// A removed entry as a small TOML document, so uninstall can put it back.
fn removed_text(name: &str, item: Item) -> String {
    let mut doc = DocumentMut::new();
    let item = match item {
        Item::Value(Value::InlineTable(inline)) => Item::Table(inline.into_table()),
        other => other,
    };
    doc.insert(name, item);
    doc.to_string()
}

fn new_item(insert: &Insert, inline: bool) -> Result<Item, TomlEditError> {
    let table = match &insert.value {
        InsertValue::Stdio { command, args } => {
            let mut table = Table::new();
            table.insert("command", toml_edit::value(command.as_str()));
            let mut list = Array::new();
            for arg in args {
                list.push(arg.as_str());
            }
            table.insert("args", toml_edit::value(list));
            table
        }
        InsertValue::Raw(raw) => {
            let doc: DocumentMut =
                raw.parse()
                    .map_err(|err: toml_edit::TomlError| TomlEditError {
                        offset: None,
                        message: format!("saved entry {:?} is not TOML: {err}", insert.name),
                    })?;
            doc.get(&insert.name)
                .and_then(Item::as_table)
                .cloned()
                .ok_or_else(|| TomlEditError {
                    offset: None,
                    message: format!("saved entry {:?} has no table", insert.name),
                })?
        }
    };
    Ok(if inline {
        Item::Value(Value::InlineTable(table.into_inline_table()))
    } else {
        Item::Table(table)
    })
}

/// Applies `decide` to every entry of the host's server maps, then `inserts` into the main map.
pub fn rewrite(
    text: &str,
    host: &Host,
    maps: &[&[&str]],
    decide: &mut dyn FnMut(&EntryFacts) -> Action,
    inserts: &[Insert],
) -> Result<Rewrite, TomlEditError> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|err: toml_edit::TomlError| TomlEditError {
            offset: err.span().map(|span| span.start),
            message: err.message().trim().to_string(),
        })?;
    let mut result = Rewrite::default();
    for (index, path) in maps.iter().enumerate() {
        let Some(map) = map_mut(&mut doc, path) else {
            continue;
        };
        let names: Vec<String> = map.iter().map(|(key, _)| key.to_string()).collect();
        for name in names {
            let Some(entry) = map.get_mut(&name).and_then(Item::as_table_like_mut) else {
                continue;
            };
            let facts = EntryFacts {
                map: index,
                map_label: path.join("."),
                name: name.clone(),
                shape: shape(entry, host),
            };
            let action = decide(&facts);
            match &action {
                Action::Wrap { command, prepend } => wrap(entry, command, prepend),
                Action::Unwrap { command, drop } => unwrap(entry, command, *drop),
                Action::Repoint { command } => unwrap(entry, command, 0),
                Action::Remove => {
                    if let Some(item) = map.remove(&name) {
                        result.removed.push(Removed {
                            name: name.clone(),
                            text: removed_text(&name, item),
                            remote: match &facts.shape {
                                Shape::Remote(remote) => Some(remote.clone()),
                                _ => None,
                            },
                        });
                    }
                }
                Action::Keep(_) => {}
            }
            result.entries.push((facts, action));
        }
    }
    if !inserts.is_empty() {
        let root = doc.as_table_mut();
        if !root.contains_key(maps[0][0]) {
            let mut table = Table::new();
            table.set_implicit(true);
            root.insert(maps[0][0], Item::Table(table));
        }
        let inline = matches!(doc.get(maps[0][0]), Some(Item::Value(_)));
        let map = map_mut(&mut doc, maps[0]).ok_or_else(|| TomlEditError {
            offset: None,
            message: format!("no `{}` table to add to", maps[0].join(".")),
        })?;
        for insert in inserts {
            if !map.contains_key(&insert.name) {
                map.insert(&insert.name, new_item(insert, inline)?);
            }
        }
    }
    result.text = doc.to_string();
    Ok(result)
}
