//! The JSON configs users already have: `{"mcpServers": {...}}` (Claude Desktop, Claude Code,
//! Cursor) and `{"servers": {...}}` (VS Code).
//!
//! These files belong to other tools and carry their keys (`autoApprove`, `timeout`, `envFile`,
//! `inputs`, ...). Unknown keys are therefore warnings here, not errors: a user must be able to
//! point airlock at the file they have. Typos still surface, because a misspelt `command` leaves
//! the server without one, which is an error. serde_json reports no positions for values, so
//! validation errors point at the server's key, found in the text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{ConfigFormat, Located, RawServer, ServerConfig, Validator, collect};
use crate::diagnostic::{LineCol, SourceError, SourceWarning};
use crate::policy::command_line::{CommandLineGrants, Flag};

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
    // VS Code's and Zed's files are JSON with comments and trailing commas: read as the plain
    // JSON they stand for, every line and column where it is in the file.
    // A byte order mark (an editor may save one) is three bytes of nothing to a JSON reader.
    let without_mark = text
        .strip_prefix('\u{feff}')
        .map(|rest| format!("   {rest}"));
    let text = without_mark.as_deref().unwrap_or(text);
    let plain = crate::install::jsonc::as_plain_json(text);
    let had_comments = plain.is_some();
    let text = plain.as_deref().unwrap_or(text);
    let root = parse_json(path, text)?;
    let (format, key) = servers_key(path, &root)?;
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
        json: true,
        path,
        separator: &separator,
        strict_env: false,
        lookup,
        warnings: Vec::new(),
    };
    let mut servers = Vec::with_capacity(entries.len());
    let mut errors = Vec::new();
    let mut cursor = section_offset;
    for (name, entry) in entries {
        let offset = find_key(text, name, cursor).unwrap_or(cursor);
        cursor = offset;
        let entry_text = EntryText { path, text, offset };
        if let Some(config) = gateway_entry(entry) {
            // `airlock install --gateway` put the gateway itself here. It is not a server of
            // this file: serving it would start airlock inside airlock, and its servers are in
            // its own config.
            let check = config.map_or(String::new(), |config| {
                format!("; its servers are in {config} (`airlock check --config {config}`)")
            });
            validator.warnings.push(SourceWarning::new(
                path,
                entry_text.at(),
                format!("server {name:?} is the airlock gateway (`airlock serve`), not a server: skipped{check}"),
            ));
            continue;
        }
        let raw = raw_server(&entry_text, name, entry, &mut validator.warnings);
        let validated = raw.and_then(|raw| validator.validate(raw));
        let validated = validated.map_err(|err| with_typo_hints(err, entry));
        servers.extend(collect(&mut errors, validated));
    }
    if let Some(err) = SourceError::all(errors) {
        return Err(err);
    }
    let mut warnings = validator.warnings;
    if had_comments && format != ConfigFormat::VsCodeJson {
        warnings.push(SourceWarning::new(
            path,
            EntryText { path, text, offset: 0 }.at(),
            format!(
                "comments or trailing commas, read here as VS Code and Zed read them; a host that reads `{key}` as strict JSON (Claude Desktop, Claude Code) would not load this file"
            ),
        ));
    }
    if let Some(unread) = project_servers(&root) {
        let offset = find_key(text, "projects", 0).unwrap_or(0);
        warnings.push(SourceWarning::new(
            path,
            EntryText { path, text, offset }.at(),
            format!(
                "{unread} not read here: only the top-level `{key}` is (`airlock install` wraps them too, each under its own name)"
            ),
        ));
    }
    Ok((format, servers, separator, warnings))
}

/// Claude Code's per-directory servers (`projects.<dir>.mcpServers` in `~/.claude.json`, where
/// `claude mcp add` puts a server by default), counted for a warning: a config is the file's
/// top-level servers, and these would collide by name across directories.
fn project_servers(root: &Value) -> Option<String> {
    let projects = root.get("projects")?.as_object()?;
    let mut servers = 0;
    let mut directories = 0;
    for project in projects.values() {
        let count = project
            .get("mcpServers")
            .and_then(Value::as_object)
            .map_or(0, |map| map.len());
        if count > 0 {
            servers += count;
            directories += 1;
        }
    }
    (servers > 0).then(|| {
        format!(
            "{servers} server(s) under `projects.<dir>.mcpServers` ({directories} director{})",
            if directories == 1 { "y" } else { "ies" }
        )
    })
}

/// "did you mean "command"?" for a key that looks like a misspelt key airlock reads.
fn typo_hint(key: &str) -> Option<String> {
    crate::diagnostic::did_you_mean_quoted(key, &KNOWN_KEYS, &|name| format!("{name:?}"))
}

/// `err` (about one server entry) with a did-you-mean for each of the entry's unknown keys that
/// looks like a misspelt key airlock reads: `"comand"` is why the entry has no `command`.
fn with_typo_hints(mut err: SourceError, entry: &Value) -> SourceError {
    let hints: Vec<String> = entry
        .as_object()
        .into_iter()
        .flat_map(|object| object.keys())
        .filter(|key| !KNOWN_KEYS.contains(&key.as_str()))
        .filter_map(|key| typo_hint(key).map(|hint| format!("the entry's key {key:?}: {hint}")))
        .collect();
    if !hints.is_empty() {
        let hints = hints.join("; ");
        err.fix = Some(match err.fix.take() {
            Some(fix) => format!("{fix}; {hints}"),
            None => hints,
        });
    }
    err
}

fn parse_json(path: &Path, text: &str) -> Result<Value, SourceError> {
    serde_json::from_str(text).map_err(|err| {
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
    })
}

/// Which of the two shapes this file has, and the key its servers are under.
fn servers_key(path: &Path, root: &Value) -> Result<(ConfigFormat, &'static str), SourceError> {
    if root.get("mcpServers").is_some() {
        Ok((ConfigFormat::McpServersJson, "mcpServers"))
    } else if root.get("servers").is_some() {
        Ok((ConfigFormat::VsCodeJson, "servers"))
    } else {
        Err(SourceError::new(path, Some(LineCol { line: 1, column: 1 }), "no `mcpServers` or `servers` object in this JSON file")
            .with_fix("point airlock at a Claude Desktop/Claude Code/Cursor config ({\"mcpServers\": {...}}), a VS Code mcp.json ({\"servers\": {...}}), or an airlock.toml"))
    }
}

/// Where one server entry sits in the file, for positions in its messages.
struct EntryText<'a> {
    path: &'a Path,
    text: &'a str,
    /// Byte offset of the server's key.
    offset: usize,
}

impl EntryText<'_> {
    fn at(&self) -> Option<LineCol> {
        Some(LineCol::from_offset(self.text, self.offset))
    }

    /// The position of `field` inside this entry, or the entry's own when it is not found.
    fn field_at(&self, field: &str) -> Option<LineCol> {
        find_key(self.text, field, self.offset)
            .map(|o| LineCol::from_offset(self.text, o))
            .or(self.at())
    }
}

/// What an entry `airlock install` wrapped stands for: the command it wraps, and the `env`
/// keys `--allow-env` lets through (none other reaches the server under `airlock run`).
#[derive(Debug, PartialEq, Eq)]
struct Wrapped {
    command: String,
    args: Vec<String>,
    allow_env: Vec<String>,
    /// `--trust`: the run line opts the command out of the launch allowlist.
    trust: bool,
    /// `--allow-read`, `--allow-write` and `--allow-net`, with their values as written.
    grants: Vec<(Flag, String)>,
}

/// `airlock run --name N [--allow-env=K,...] [--allow-read|--allow-write|--allow-net=...]
/// [--trust] -- CMD ARGS...`, as `airlock install` writes an entry named `N` and a user adds
/// the flags airlock's hints name. `None` for anything else: another name (the policy would
/// apply to another server than the host runs), or a flag whose meaning a gateway's config could
/// not keep. Pure.
fn unwrap_airlock_run(name: &str, args: &[String]) -> Option<Wrapped> {
    if args.first().map(String::as_str) != Some("run") {
        return None;
    }
    let dashes = args.iter().position(|arg| arg == "--")?;
    let mut flags = args[1..dashes].iter();
    let mut named = None;
    let mut allow_env = Vec::new();
    let mut grants = Vec::new();
    let mut trust = false;
    while let Some(flag) = flags.next() {
        // `run` refuses a flag given twice, so such a line starts nothing: read as written.
        if flag == "--trust" {
            if std::mem::replace(&mut trust, true) {
                return None;
            }
            continue;
        }
        let (key, value) = match flag.split_once('=') {
            Some((key, value)) => (key, value.to_string()),
            None => (flag.as_str(), flags.next()?.clone()),
        };
        match key {
            "--name" if named.is_none() => named = Some(value),
            "--allow-env" => allow_env.extend(value.split(',').map(str::to_string)),
            "--allow-read" => grants.push((Flag::Read, value)),
            "--allow-write" => grants.push((Flag::Write, value)),
            "--allow-net" => grants.push((Flag::Net, value)),
            _ => return None,
        }
    }
    if named.as_deref() != Some(name) {
        return None;
    }
    let (command, rest) = args[dashes + 1..].split_first()?;
    Some(Wrapped {
        command: command.clone(),
        args: rest.to_vec(),
        allow_env,
        trust,
        grants,
    })
}

/// The grants of a wrapped entry's run line, as `run` makes them, each named after the file
/// and the server it came from. A relative path is left out, with a warning: `run` takes it
/// from the directory the host starts it in, which this file does not say.
fn wrapped_grants(
    wrapped: &Wrapped,
    file: &Path,
    server: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<CommandLineGrants>, String> {
    let mut out = Vec::new();
    for (flag, value) in &wrapped.grants {
        let mut kept = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let relative = !entry.starts_with(['/', '~', '$']);
            if relative && matches!(flag, Flag::Read | Flag::Write) {
                warnings.push(format!(
                    "server {server:?}: its `airlock run` line grants the relative path {entry:?} ({}), which depends on where the host starts it: not granted here. Fix: write it as an absolute path",
                    flag.name()
                ));
            } else {
                kept.push(entry.to_string());
            }
        }
        let source = PathBuf::from(format!(
            "{} (server {server:?}: `airlock run {}`)",
            file.display(),
            flag.name()
        ));
        let grants = CommandLineGrants::flag_from(*flag, &kept, source)
            .map_err(|err| format!("its `airlock run` line: {err}"))?;
        if !grants.is_empty() {
            out.push(grants);
        }
    }
    Ok(out)
}

/// An entry that starts this airlock's gateway (`airlock serve ...`, as `airlock install
/// --gateway` writes it): `Some` with its `--config` value if it gives one.
fn gateway_entry(entry: &Value) -> Option<Option<String>> {
    let command = entry.get("command")?.as_str()?;
    let args: Vec<&str> = entry
        .get("args")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if args.first() != Some(&"serve") || !is_this_airlock(command) {
        return None;
    }
    let config = args
        .iter()
        .enumerate()
        .find_map(|(i, arg)| match arg.strip_prefix("--config") {
            Some("") => args.get(i + 1).map(|v| v.to_string()),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => None,
        });
    Some(config)
}

/// Whether `command` is this airlock binary: its absolute path (as `airlock install` writes
/// it), or a bare name that this process's `PATH` finds it under (as a user writes it by hand).
/// Another program called `airlock` is read as written.
fn is_this_airlock(command: &str) -> bool {
    let Ok(this) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return false;
    };
    let found = if std::path::Path::new(command).is_absolute() {
        Some(std::path::PathBuf::from(command))
    } else if !command.contains('/') {
        let path_var = std::env::var_os("PATH");
        crate::paths::resolve_command(command, path_var.as_deref(), std::path::Path::new("/")).ok()
    } else {
        None
    };
    found.and_then(|path| std::fs::canonicalize(path).ok()) == Some(this)
}

/// One JSON server entry read into the shape the validator takes; keys airlock does not use
/// become warnings.
fn raw_server(
    entry_text: &EntryText<'_>,
    name: &str,
    entry: &Value,
    warnings: &mut Vec<SourceWarning>,
) -> Result<RawServer, SourceError> {
    let path = entry_text.path;
    let at = entry_text.at();
    let field_at = |field: &str| entry_text.field_at(field);
    let bad = |message: String| SourceError::new(path, at, format!("server {name:?}: {message}"));
    let Some(object) = entry.as_object() else {
        return Err(
            bad("must be an object".into()).with_fix("write { \"command\": ..., \"args\": [...] }")
        );
    };
    for unknown in object.keys().filter(|k| !KNOWN_KEYS.contains(&k.as_str())) {
        let hint = typo_hint(unknown)
            .map(|hint| format!("; {hint}"))
            .unwrap_or_default();
        warnings.push(SourceWarning::new(
            path,
            field_at(unknown),
            format!("server {name:?}: key {unknown:?} is not used by airlock (ignored){hint}"),
        ));
    }
    let flag = |key: &str| object.get(key).and_then(Value::as_bool);
    // Every wrongly typed field is reported; a field in error reads as absent until then.
    let mut errors = Vec::new();
    let args = match object.get("args") {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>(),
        Some(_) => None,
    };
    if args.is_none() {
        errors.push(
            bad("`args` must be an array of strings".into())
                .with_fix("write \"args\": [\"--flag\", \"value\"]"),
        );
    }
    let with_fix = |err: FieldTypeError| bad(err.to_string()).with_fix("correct the value's type");
    let mut string = |key: &str| {
        let field = string_field(object, key, field_at(key)).map_err(with_fix);
        collect(&mut errors, field).flatten()
    };
    let transport = string("type").or_else(|| string("transport"));
    let command = string("command");
    let cwd = string("cwd");
    let url = string("url");
    let start = string("start");
    let mut seconds = |key: &str| {
        let field = int_field(object, key, field_at(key)).map_err(with_fix);
        collect(&mut errors, field).flatten()
    };
    let startup_timeout = seconds("startup_timeout");
    let tool_timeout = seconds("tool_timeout");
    let idle_timeout = seconds("idle_timeout");
    let env = collect(&mut errors, string_map(object, "env").map_err(with_fix));
    let headers = collect(&mut errors, string_map(object, "headers").map_err(with_fix));
    if let Some(err) = SourceError::all(errors) {
        return Err(err);
    }
    let mut args = args.unwrap_or_default();
    let mut command = command;
    let mut env = env.unwrap_or_default();
    // An entry `airlock install` wrapped: checked and served as the command it wraps (serving
    // it as written would start airlock inside airlock), with the env `run` would pass.
    let wrapped = command
        .as_ref()
        .filter(|command| is_this_airlock(&command.value))
        .and_then(|_| unwrap_airlock_run(name, &args));
    // The run line decides trust for a wrapped entry: a `"trust"` key beside it reaches no
    // airlock.
    let mut trust = flag("trust").unwrap_or(false);
    let mut grants = Vec::new();
    if let Some(wrapped) = wrapped {
        trust = wrapped.trust;
        let mut said = Vec::new();
        grants = wrapped_grants(&wrapped, path, name, &mut said).map_err(|why| {
            SourceError::new(path, field_at("args"), format!("server {name:?}: {why}"))
        })?;
        for message in said {
            warnings.push(SourceWarning::new(path, field_at("args"), message));
        }
        warnings.push(SourceWarning::new(
            path,
            field_at("command"),
            format!(
                "server {name:?} starts through `airlock run` (airlock install): read as the command it wraps, {}",
                wrapped.command
            ),
        ));
        command = Some(Located {
            value: wrapped.command,
            at: field_at("command"),
        });
        args = wrapped.args;
        // As `run` passes them: exact names, and `PREFIX_*` families.
        env.retain(|key, _| {
            wrapped
                .allow_env
                .iter()
                .any(|pattern| crate::sandbox::env_name_matches(pattern, key))
        });
    } else if command.as_ref().is_some_and(|command| {
        std::path::Path::new(&command.value).file_name() == Some(std::ffi::OsStr::new("airlock"))
    }) {
        warnings.push(SourceWarning::new(
            path,
            field_at("command"),
            format!(
                "server {name:?} starts airlock itself, not as `airlock install` wraps a server with this airlock: read as written"
            ),
        ));
    }
    Ok(RawServer {
        name: name.to_string(),
        at,
        transport,
        command,
        args,
        env,
        env_at: field_at("env"),
        cwd,
        url,
        headers: headers.unwrap_or_default(),
        headers_at: field_at("headers"),
        trust,
        startup_timeout,
        tool_timeout,
        idle_timeout,
        enabled: flag("enabled").unwrap_or(true) && !flag("disabled").unwrap_or(false),
        start,
        sandbox: None,
        tools: None,
        grants,
    })
}
