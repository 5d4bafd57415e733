//! Rewriting a JSON(C) host file by splicing text: only the spans airlock changes are replaced,
//! so comments, indentation, key order and everything else stay byte for byte.

use std::ops::Range;

use super::entry::{Action, EntryFacts, RemoteFacts, Shape};
use super::hosts::Host;
use super::jsonc::{self, JsoncError, Member, Node, Value, quote};
use super::{Insert, Rewrite};

/// One text replacement.
struct Splice {
    span: Range<usize>,
    text: String,
}

/// A server map found in the document.
struct MapRef<'a> {
    index: usize,
    label: String,
    node: &'a Node,
}

/// Finds the server maps at `paths` (with `*` matching every key at its level).
/// A key written twice where install reads (hosts read the last of two, install's edit would
/// take the first): in an object on the way to a server map (the key the way follows), among a
/// map's entries, or anywhere inside an entry. Elsewhere (a VS Code setting written twice) it
/// is the host's business and install leaves it be.
fn written_twice_where_read<'a>(root: &'a Node, paths: &[&[&str]]) -> Option<&'a Member> {
    fn twice<'a>(node: &'a Node, key: Option<&str>) -> Option<&'a Member> {
        let members = node.members()?;
        members.iter().enumerate().find_map(|(at, member)| {
            let counted = key.is_none_or(|key| member.key == key);
            (counted && members[..at].iter().any(|m| m.key == member.key)).then_some(member)
        })
    }
    fn anywhere_in(node: &Node) -> Option<&Member> {
        match &node.value {
            jsonc::Value::Object(members) => {
                twice(node, None).or_else(|| members.iter().find_map(|m| anywhere_in(&m.value)))
            }
            jsonc::Value::Array(items) => items.iter().find_map(anywhere_in),
            _ => None,
        }
    }
    for path in paths {
        let mut frontier = vec![root];
        for step in path.iter() {
            let mut next = Vec::new();
            for node in frontier {
                if *step == "*" {
                    if let Some(found) = twice(node, None) {
                        return Some(found);
                    }
                    next.extend(node.members().unwrap_or_default().iter().map(|m| &m.value));
                } else {
                    if let Some(found) = twice(node, Some(step)) {
                        return Some(found);
                    }
                    next.extend(node.get(step));
                }
            }
            frontier = next;
        }
        if let Some(found) = frontier.into_iter().find_map(anywhere_in) {
            return Some(found);
        }
    }
    None
}

fn find_maps<'a>(root: &'a Node, paths: &[&[&str]]) -> Vec<MapRef<'a>> {
    let mut found = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let mut frontier: Vec<(String, &Node)> = vec![(String::new(), root)];
        for step in path.iter() {
            let mut next = Vec::new();
            for (label, node) in frontier {
                let join = |key: &str| {
                    if label.is_empty() {
                        key.to_string()
                    } else {
                        format!("{label}.{key}")
                    }
                };
                if *step == "*" {
                    for member in node.members().unwrap_or_default() {
                        next.push((join(&member.key), &member.value));
                    }
                } else if let Some(child) = node.get(step) {
                    next.push((join(step), child));
                }
            }
            frontier = next;
        }
        for (label, node) in frontier {
            if node.members().is_some() {
                found.push(MapRef { index, label, node });
            }
        }
    }
    found
}

/// Where the command line sits in an entry: flat (`command`, `args`, `env`) or Zed's older
/// `"command": {"path", "args", "env"}`.
fn command_holder(entry: &Node) -> Option<(&Node, &Member)> {
    let command = entry.member("command")?;
    match &command.value.value {
        Value::String(_) => Some((entry, command)),
        Value::Object(_) => {
            let holder = &command.value;
            holder.member("path").map(|path| (holder, path))
        }
        _ => None,
    }
}

fn remote_facts(entry: &Node, host: &Host) -> Option<RemoteFacts> {
    // Most hosts say `type`; some configs (Cursor's among them) write `transport` instead.
    let declared = ["type", "transport"]
        .iter()
        .find_map(|key| entry.get(key).and_then(Node::as_str))
        .unwrap_or("");
    let key = host
        .remote_keys
        .iter()
        .find(|key| entry.get(key).and_then(Node::as_str).is_some())?;
    let url = entry.get(key).and_then(Node::as_str)?.to_string();
    let sse = declared == "sse" || (declared.is_empty() && host.sse_keys.contains(key));
    let headers = entry
        .get("headers")
        .and_then(Node::members)
        .unwrap_or_default()
        .iter()
        .filter_map(|m| Some((m.key.clone(), m.value.as_str()?.to_string())))
        .collect();
    // Cursor's and Windsurf's `disabled: true`, another host's `enabled: false`: switched off.
    let mut not_carried = Vec::new();
    if entry.get("disabled").and_then(Node::as_bool) == Some(true) {
        not_carried.push("`disabled`".to_string());
    }
    if entry.get("enabled").and_then(Node::as_bool) == Some(false) {
        not_carried.push("`enabled = false`".to_string());
    }
    Some(RemoteFacts {
        url,
        sse,
        headers,
        not_carried,
    })
}

fn shape(entry: &Node, host: &Host) -> Shape {
    if entry.members().is_none() {
        return Shape::Unknown("the entry is not an object".into());
    }
    if let Some((holder, command)) = command_holder(entry) {
        let Some(program) = command.value.as_str() else {
            return Shape::Unknown("`command` is not a string".into());
        };
        let args = match holder.get("args") {
            None => Some(Vec::new()),
            Some(node) => node.strings(),
        };
        let Some(args) = args else {
            return Shape::Unknown("`args` is not a list of strings".into());
        };
        let env = holder
            .get("env")
            .and_then(Node::members)
            .unwrap_or_default();
        let env_keys = env.iter().map(|m| m.key.clone()).collect();
        let path_env = env
            .iter()
            .filter(|m| {
                m.value
                    .as_str()
                    .is_some_and(|value| super::entry::looks_like_path(&m.key, value))
            })
            .map(|m| {
                (
                    m.key.clone(),
                    m.value.as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let env_file = holder
            .get("envFile")
            .map(|node| node.as_str().unwrap_or("(not a string)").to_string());
        return Shape::Stdio {
            command: program.to_string(),
            args,
            env_keys,
            path_env,
            env_file,
        };
    }
    match remote_facts(entry, host) {
        Some(remote) => Shape::Remote(remote),
        None => {
            let members = entry.members().unwrap_or_default();
            let keys = members.iter().map(|m| m.key.as_str());
            Shape::Unknown(super::entry::neither_command_nor_url(keys))
        }
    }
}

/// The whitespace right before `at`: how the file indents what starts there.
fn indent_before(text: &str, at: usize) -> &str {
    let before = &text[..at];
    let trimmed = before.trim_end_matches([' ', '\t', '\n', '\r']);
    &before[trimmed.len()..]
}

/// The separator between the items of an array as the file writes it.
fn item_separator(text: &str, array: &Node, items: &[Node]) -> String {
    if let [first, second, ..] = items {
        let between = &text[first.span.end..second.span.start];
        if !between.contains("//") && !between.contains("/*") {
            return between.to_string();
        }
    }
    if let Some(first) = items.first() {
        let lead = &text[array.span.start + 1..first.span.start];
        if lead.contains('\n') && lead.trim().is_empty() {
            return format!(",{lead}");
        }
    }
    ", ".to_string()
}

fn quoted_list(items: &[String], separator: &str) -> String {
    items
        .iter()
        .map(|item| quote(item))
        .collect::<Vec<_>>()
        .join(separator)
}

fn wrap_splices(text: &str, entry: &Node, command: &str, prepend: &[String]) -> Vec<Splice> {
    let Some((holder, program)) = command_holder(entry) else {
        return Vec::new();
    };
    let mut splices = vec![Splice {
        span: program.value.span.clone(),
        text: quote(command),
    }];
    match holder.member("args") {
        Some(args) => {
            let items = args.value.items().unwrap_or_default();
            let separator = item_separator(text, &args.value, items);
            match items.first() {
                Some(first) => splices.push(Splice {
                    span: first.span.start..first.span.start,
                    text: format!("{}{separator}", quoted_list(prepend, &separator)),
                }),
                None => splices.push(Splice {
                    span: args.value.span.clone(),
                    text: format!("[{}]", quoted_list(prepend, ", ")),
                }),
            }
        }
        None => {
            let indent = indent_before(text, program.key_span.start);
            let indent = if indent.is_empty() { " " } else { indent };
            splices.push(Splice {
                span: program.value.span.end..program.value.span.end,
                text: format!(",{indent}\"args\": [{}]", quoted_list(prepend, ", ")),
            });
        }
    }
    splices
}

fn unwrap_splices(entry: &Node, command: &str, drop: usize) -> Vec<Splice> {
    let Some((holder, program)) = command_holder(entry) else {
        return Vec::new();
    };
    let mut splices = vec![Splice {
        span: program.value.span.clone(),
        text: quote(command),
    }];
    let items = holder.get("args").and_then(Node::items).unwrap_or_default();
    if let (Some(first), Some(last_dropped)) = (items.first(), items.get(drop.saturating_sub(1))) {
        let end = items
            .get(drop)
            .map_or(last_dropped.span.end, |next| next.span.start);
        splices.push(Splice {
            span: first.span.start..end,
            text: String::new(),
        });
    }
    splices
}

/// Removes member `index` of `map` together with one adjoining comma.
fn remove_member(text: &str, map: &Node, index: usize) -> Splice {
    let members = map.members().unwrap_or_default();
    let member = &members[index];
    let span = if index > 0 {
        members[index - 1].value.span.end..member.value.span.end
    } else if let Some(next) = members.get(1) {
        member.key_span.start..next.key_span.start
    } else {
        // The only member: empty the object but keep its braces.
        let inner = map.span.start + 1..map.span.end - 1;
        let kept = if text[inner.clone()].contains(['/']) {
            member.key_span.start..member.value.span.end
        } else {
            inner
        };
        return Splice {
            span: kept,
            text: String::new(),
        };
    };
    Splice {
        span,
        text: String::new(),
    }
}

/// Adds `"name": value` at the end of `map`, indented like its other members.
fn insert_member(text: &str, map: &Node, name: &str, value: &str) -> Splice {
    let members = map.members().unwrap_or_default();
    match members.last() {
        Some(last) => {
            let indent = indent_before(text, last.key_span.start);
            let indent = if indent.is_empty() { " " } else { indent };
            Splice {
                span: last.value.span.end..last.value.span.end,
                text: format!(",{indent}{}: {value}", quote(name)),
            }
        }
        None => Splice {
            span: map.span.clone(),
            text: format!("{{ {}: {value} }}", quote(name)),
        },
    }
}

/// The JSON text of a new stdio entry.
pub fn entry_text(command: &str, args: &[String]) -> String {
    format!(
        "{{\"command\": {}, \"args\": [{}]}}",
        quote(command),
        quote_args(args)
    )
}

fn quote_args(args: &[String]) -> String {
    quoted_list(args, ", ")
}

fn apply(text: &str, mut splices: Vec<Splice>) -> String {
    splices.sort_by_key(|s| std::cmp::Reverse(s.span.start));
    let mut out = text.to_string();
    for splice in splices {
        out.replace_range(splice.span, &splice.text);
    }
    out
}

/// Applies `decide` to every entry of the host's server maps in `text`, then `inserts` into the
/// main map. Pure: the caller reads and writes the file.
pub fn rewrite(
    text: &str,
    host: &Host,
    maps: &[&[&str]],
    decide: &mut dyn FnMut(&EntryFacts) -> Action,
    inserts: &[Insert],
) -> Result<Rewrite, JsoncError> {
    let root = jsonc::parse(text)?;
    if let Some(twice) = written_twice_where_read(&root, maps) {
        return Err(JsoncError {
            offset: twice.key_span.start,
            message: format!(
                "the key {:?} appears twice in one object: hosts read the last one, and an edit of either would not be the one they start; keep one",
                twice.key
            ),
        });
    }
    let mut splices = Vec::new();
    let mut result = Rewrite::default();
    let found = find_maps(&root, maps);
    for map in &found {
        for (position, member) in map.node.members().unwrap_or_default().iter().enumerate() {
            let facts = EntryFacts {
                map: map.index,
                map_label: map.label.clone(),
                name: member.key.clone(),
                shape: shape(&member.value, host),
            };
            let action = decide(&facts);
            match &action {
                Action::Wrap { command, prepend } => {
                    splices.extend(wrap_splices(text, &member.value, command, prepend));
                }
                Action::Unwrap { command, drop } => {
                    splices.extend(unwrap_splices(&member.value, command, *drop));
                }
                Action::Repoint { command } => {
                    splices.extend(unwrap_splices(&member.value, command, 0));
                }
                Action::Remove => {
                    result.removed.push(super::Removed {
                        name: member.key.clone(),
                        text: text[member.value.span.clone()].to_string(),
                        remote: match &facts.shape {
                            Shape::Remote(remote) => Some(remote.clone()),
                            _ => None,
                        },
                    });
                    splices.push(remove_member(text, map.node, position));
                }
                Action::Keep(_) => {}
            }
            result.entries.push((facts, action));
        }
    }
    if !inserts.is_empty() {
        let main = found
            .iter()
            .find(|map| map.index == 0)
            .ok_or_else(|| JsoncError {
                offset: 0,
                message: format!("no `{}` object to add to", maps[0].join(".")),
            })?;
        let existing: Vec<&str> = main
            .node
            .members()
            .unwrap_or_default()
            .iter()
            .map(|m| m.key.as_str())
            .collect();
        let removed_all = main.node.members().unwrap_or_default().len() == result.removed.len();
        let mut combined = String::new();
        for insert in inserts
            .iter()
            .filter(|i| !existing.contains(&i.name.as_str()))
        {
            let value = match &insert.value {
                super::InsertValue::Stdio { command, args } => entry_text(command, args),
                super::InsertValue::Raw(raw) => raw.clone(),
            };
            if combined.is_empty() && (removed_all || existing.is_empty()) {
                combined = format!("{}: {value}", quote(&insert.name));
            } else if combined.is_empty() {
                splices.push(insert_member(text, main.node, &insert.name, &value));
            } else {
                combined.push_str(&format!(", {}: {value}", quote(&insert.name)));
            }
        }
        if !combined.is_empty() {
            // Every member goes (or there were none): the map's whole text is replaced.
            splices.retain(|s| {
                !(s.span.start > main.node.span.start && s.span.end < main.node.span.end)
            });
            splices.push(Splice {
                span: main.node.span.clone(),
                text: format!("{{ {combined} }}"),
            });
        }
    }
    result.text = apply(text, splices);
    Ok(result)
}
