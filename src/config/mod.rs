//! Server declarations: `airlock.toml` (`[servers.NAME]`), and the `{"mcpServers": ...}` JSON of
//! Claude Desktop, Claude Code and Cursor or VS Code's `{"servers": ...}`, detected by content.
//!
//! Loading is all or nothing: a file either yields a fully validated [`Config`] or one
//! [`SourceError`] with file:line:col and the fix. Interpolation (`${env:NAME}`) happens at load,
//! values that may be secret are flagged so every human-facing output can mask them.

mod json_file;
mod toml_file;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use crate::diagnostic::{LineCol, SourceError, SourceWarning};
use crate::policy::ServerOverride;
use crate::policy::command_line::CommandLineGrants;
use crate::policy::file::{SandboxSection, ToolsSection};
use crate::secret;

/// How airlock reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    /// Streamable HTTP.
    Http,
    /// Legacy HTTP+SSE.
    Sse,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::Sse => "sse",
        })
    }
}

/// An `env` or `headers` value after interpolation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue {
    pub value: String,
    /// Shown masked in human output and never logged: its key looks secret, it came from the
    /// environment, or it looks like a credential.
    pub secret: bool,
}

impl ConfigValue {
    /// The value as it may be shown to a human.
    pub fn display(&self) -> String {
        if self.secret {
            secret::mask(&self.value)
        } else {
            self.value.clone()
        }
    }
}

/// When a gateway starts a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// On the first request that needs it.
    Lazy,
    /// As soon as the gateway starts.
    Eager,
}

/// Timeout bounds, in seconds: (min, default, max).
pub const STARTUP_TIMEOUT: (u64, u64, u64) = (1, 30, 600);
pub const TOOL_TIMEOUT: (u64, u64, u64) = (1, 180, 600);
/// `idle_timeout = 0` means never stop an idle server.
pub const IDLE_TIMEOUT: (u64, u64, u64) = (0, 300, 86_400);

/// One validated server declaration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, ConfigValue>,
    pub cwd: Option<PathBuf>,
    pub url: Option<String>,
    pub headers: BTreeMap<String, ConfigValue>,
    pub trust: bool,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// `None`: never stopped for idleness.
    pub idle_timeout: Option<Duration>,
    pub enabled: bool,
    pub start: StartMode,
    /// Per-server policy blocks (TOML only), merged as the config layer.
    pub sandbox: Option<Spanned<SandboxSection>>,
    pub tools: Option<Spanned<ToolsSection>>,
    /// The `--allow-read`, `--allow-write` and `--allow-net` of an entry a host starts through
    /// `airlock run` (JSON only), merged as the config layer as `run` merges them.
    pub grants: Vec<CommandLineGrants>,
    /// Where the declaration starts, for later errors about this server.
    pub position: Option<LineCol>,
}

impl ServerConfig {
    /// A stdio server declared on the command line (`airlock run -- CMD ARGS...`): no env, no
    /// per-server policy blocks, default timeouts.
    pub fn stdio(name: &str, command: &str, args: &[String], trust: bool) -> ServerConfig {
        ServerConfig {
            name: name.to_string(),
            transport: Transport::Stdio,
            command: Some(command.to_string()),
            args: args.to_vec(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            trust,
            startup_timeout: Duration::from_secs(STARTUP_TIMEOUT.1),
            tool_timeout: Duration::from_secs(TOOL_TIMEOUT.1),
            idle_timeout: None,
            enabled: true,
            start: StartMode::Eager,
            sandbox: None,
            tools: None,
            grants: Vec::new(),
            position: None,
        }
    }
}

/// Which format a config file was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFormat {
    AirlockToml,
    /// `{"mcpServers": {...}}`: Claude Desktop, Claude Code, Cursor.
    McpServersJson,
    /// `{"servers": {...}}`: VS Code.
    VsCodeJson,
}

/// A loaded server config.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub text: String,
    pub format: ConfigFormat,
    pub servers: Vec<ServerConfig>,
    /// Between server and tool in namespaced names (`server__tool`).
    pub separator: String,
    /// Non-fatal findings (unset variables, ignored host-specific keys), for stderr.
    pub warnings: Vec<SourceWarning>,
    /// The name the file was given by (absolute), when that is not `path` (a link): the next
    /// start reads through it, so it is protected as the file is.
    pub named: Option<PathBuf>,
}

impl Config {
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|server| server.name == name)
    }

    /// The per-server `sandbox`/`tools` blocks, as the policy's config layer.
    pub fn policy_overrides(&self) -> Vec<ServerOverride<'_>> {
        self.servers
            .iter()
            .flat_map(|server| {
                let declared = ServerOverride {
                    server: &server.name,
                    path: &self.path,
                    text: &self.text,
                    tools: server.tools.as_ref(),
                    sandbox: server.sandbox.as_ref(),
                    adds_only: false,
                };
                let granted = server.grants.iter().map(|g| g.as_override(&server.name));
                std::iter::once(declared).chain(granted)
            })
            .collect()
    }
}

/// Reads and validates the config file given with `--config`, detecting its format by content.
pub fn load_file(path: &Path) -> Result<Config, SourceError> {
    load_found(path, None)
}

/// Reads and validates a config file. `searched`: `--config` was not given, and these are the
/// places airlock looked (the first that exists is `path`), so the fix says so.
pub fn load_found(path: &Path, searched: Option<&[PathBuf]>) -> Result<Config, SourceError> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        let fix = match searched {
            None => "check the path given to --config".to_string(),
            Some(places) => {
                let places: Vec<String> =
                    places.iter().map(|p| p.display().to_string()).collect();
                format!(
                    "--config was not given and no config exists at {}: pass --config FILE (an airlock.toml, or your host's mcpServers JSON file), or create one there",
                    places.join(" or ")
                )
            }
        };
        SourceError::new(path, None, format!("cannot read config: {err}")).with_fix(fix)
    })?;
    let mut config = parse(path, text, &|name| std::env::var(name).ok())?;
    // From here on the file itself, not the path as given: `airlock status` and `airlock
    // reload` run from other directories, the origins of its per-server blocks must read the
    // same at start and at each reload (which re-reads this file), and the policy digest, which
    // covers the path, must be the same in `airlock check` as in the session's audit log.
    let named = std::path::absolute(&config.path).ok();
    config.path = std::fs::canonicalize(&config.path).unwrap_or(config.path);
    config.named = named.filter(|named| *named != config.path);
    Ok(config)
}

/// Parses config text; `lookup` resolves `${env:NAME}`.
pub fn parse(
    path: &Path,
    text: String,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, SourceError> {
    // JSON (with comments, as VS Code's): `{` first, or a `//` or `/*` comment, which TOML
    // never starts with (its comments start with `#`).
    let start = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let looks_like_json = ["{", "//", "/*"]
        .iter()
        .any(|opener| start.starts_with(opener));
    let (format, servers, separator, warnings) = if looks_like_json {
        json_file::parse(path, &text, lookup)?
    } else {
        toml_file::parse(path, &text, lookup)?
    };
    Ok(Config {
        path: path.to_path_buf(),
        text,
        format,
        servers,
        separator,
        warnings,
        named: None,
    })
}

/// Why a server name or separator cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("server name {0:?} must be 1 to 64 characters long")]
    Length(String),
    #[error("server name {name:?} contains {bad:?}; use only letters, digits, `_`, `.` and `-`")]
    Character { name: String, bad: char },
    #[error(
        "server name {name:?} contains {separator:?}, which separates server from tool in namespaced names"
    )]
    ContainsSeparator { name: String, separator: String },
    #[error(
        "server name {name:?} runs into the separator {separator:?}: `{name}{separator}tool` would read as another server's name; drop the trailing {trailing:?}"
    )]
    RunsIntoSeparator {
        name: String,
        separator: String,
        trailing: String,
    },
    #[error("separator {0:?} must be 1 to 4 of `_`, `-`, `.`")]
    Separator(String),
    #[error(
        "server name {0:?} is airlock's own in the audit log (its records about the gateway itself and the host go under it)"
    )]
    Reserved(String),
}

/// Names the audit log gives airlock's own records: no server may take one, or its records would
/// read as airlock's (and the other way round) in `airlock audit` and its summary.
pub const RESERVED_SERVER_NAMES: [&str; 2] = ["gateway", "host"];

/// Checks a server name: 1–64 of `[A-Za-z0-9_.-]`, and never the namespace separator.
pub fn check_server_name(name: &str, separator: &str) -> Result<(), NameError> {
    if name.is_empty() || name.len() > 64 {
        return Err(NameError::Length(name.to_string()));
    }
    if RESERVED_SERVER_NAMES.contains(&name) {
        return Err(NameError::Reserved(name.to_string()));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(NameError::Character {
            name: name.to_string(),
            bad,
        });
    }
    if name.contains("__") || name.contains(separator) {
        let separator = if name.contains("__") { "__" } else { separator };
        return Err(NameError::ContainsSeparator {
            name: name.to_string(),
            separator: separator.to_string(),
        });
    }
    // `a_` with `__`: `a___tool` is read as server `a` and tool `_tool`, since a namespaced name is
    // split at the first separator. ("__" is every policy pattern's separator.)
    for separator in ["__", separator] {
        let joined = format!("{name}{separator}");
        if let Some(at) = joined.find(separator).filter(|&at| at < name.len()) {
            return Err(NameError::RunsIntoSeparator {
                name: name.to_string(),
                separator: separator.to_string(),
                trailing: name[at..].to_string(),
            });
        }
    }
    Ok(())
}

/// A valid name close to `name`, for the fix of a refused one: each separator (and `__`) becomes
/// `-`, what runs into the separator at the end goes (`a__b` → `a-b`, `fs_` → `fs`); `my-server`
/// when that is no valid name either.
pub fn suggest_server_name(name: &str, separator: &str) -> String {
    let mut suggestion = sanitize_server_name(&name.replace("__", "-").replace(separator, "-"));
    if RESERVED_SERVER_NAMES.contains(&suggestion.as_str()) {
        suggestion.push_str("-server");
    }
    while !suggestion.is_empty() && check_server_name(&suggestion, separator).is_err() {
        suggestion.pop();
    }
    if suggestion.is_empty() {
        "my-server".into()
    } else {
        suggestion
    }
}

/// Turns any text into a valid server name: characters outside `[A-Za-z0-9_.-]` become `-`, runs
/// of `_` collapse (never `__`), leading and trailing `-_.` go, at most 64 characters, `server` if
/// nothing is left. `airlock run` derives names with it; `airlock install` names host entries.
pub fn sanitize_server_name(raw: &str) -> String {
    let mut name = String::with_capacity(raw.len());
    for c in raw.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            c
        } else {
            '-'
        };
        if c == '_' && name.ends_with('_') {
            continue;
        }
        name.push(c);
    }
    let name: String = name
        .trim_matches(|c| matches!(c, '-' | '_' | '.'))
        .chars()
        .take(64)
        .collect();
    if name.is_empty() {
        "server".into()
    } else {
        name
    }
}

/// Checks the namespace separator: 1–4 of `_ - .`.
pub fn check_separator(separator: &str) -> Result<(), NameError> {
    let valid = !separator.is_empty()
        && separator.len() <= 4
        && separator.chars().all(|c| matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(NameError::Separator(separator.to_string()))
    }
}

/// A field value with where it was written (if known), shared by both file formats.
#[derive(Debug, Clone)]
pub(crate) struct Located<T> {
    pub value: T,
    pub at: Option<LineCol>,
}

/// A server declaration as read, before validation: the common ground of both formats.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawServer {
    pub name: String,
    pub at: Option<LineCol>,
    pub transport: Option<Located<String>>,
    pub command: Option<Located<String>>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub env_at: Option<LineCol>,
    pub cwd: Option<Located<String>>,
    pub url: Option<Located<String>>,
    pub headers: BTreeMap<String, String>,
    pub headers_at: Option<LineCol>,
    pub trust: bool,
    pub startup_timeout: Option<Located<i64>>,
    pub tool_timeout: Option<Located<i64>>,
    pub idle_timeout: Option<Located<i64>>,
    pub enabled: bool,
    pub start: Option<Located<String>>,
    pub sandbox: Option<Spanned<SandboxSection>>,
    pub tools: Option<Spanned<ToolsSection>>,
    pub grants: Vec<CommandLineGrants>,
}

/// Validation shared by both formats.
/// Keeps the error of `result` in `errors`; the value when there was none.
pub(crate) fn collect<T>(
    errors: &mut Vec<SourceError>,
    result: Result<T, SourceError>,
) -> Option<T> {
    result.map_err(|err| errors.push(err)).ok()
}

pub(crate) struct Validator<'a> {
    pub path: &'a Path,
    /// The file is a host's JSON config: fixes are written in its syntax.
    pub json: bool,
    pub separator: &'a str,
    pub strict_env: bool,
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    pub warnings: Vec<SourceWarning>,
}

impl Validator<'_> {
    fn error(&self, at: Option<LineCol>, message: impl Into<String>) -> SourceError {
        SourceError::new(self.path, at, message)
    }

    /// `key = value` as the file's own syntax writes it (TOML, or a JSON member), for fixes.
    fn field(&self, key: &str, value: &str) -> String {
        if self.json {
            format!("\"{key}\": {value}")
        } else {
            format!("{key} = {value}")
        }
    }

    fn timeout(
        &self,
        server: &str,
        key: &str,
        value: &Option<Located<i64>>,
        (min, default, max): (u64, u64, u64),
    ) -> Result<u64, SourceError> {
        let Some(value) = value else {
            return Ok(default);
        };
        u64::try_from(value.value)
            .ok()
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(|| {
                self.error(
                    value.at,
                    format!(
                        "server {server:?}: `{key}` = {} is out of range",
                        value.value
                    ),
                )
                .with_fix(format!(
                    "use whole seconds from {min} to {max} (default {default})"
                ))
            })
    }

    fn expand(
        &mut self,
        server: &str,
        key: &str,
        template: &str,
        at: Option<LineCol>,
    ) -> Result<(String, bool), SourceError> {
        let lookup = |var: crate::paths::Var<'_>| (self.lookup)(var.name());
        let expanded = crate::paths::expand(template, &lookup).map_err(|err| {
            self.error(at, format!("server {server:?}: `{key}`: {err}"))
                .with_fix("write references as ${env:NAME}; use $${ for a literal ${")
        })?;
        for name in &expanded.unset {
            if self.strict_env {
                return Err(self
                    .error(
                        at,
                        format!(
                            "server {server:?}: `{key}` uses the variable {name}, which is not set"
                        ),
                    )
                    .with_fix(format!(
                        "export {name} before starting airlock, or set strict_env = false"
                    )));
            }
            self.warnings.push(SourceWarning::new(
                self.path,
                at,
                format!("server {server:?}: `{key}` uses the variable {name}, which is not set; it expands to \"\""),
            ));
        }
        Ok((expanded.value, expanded.interpolated))
    }

    fn expand_map(
        &mut self,
        server: &str,
        key: &str,
        map: &BTreeMap<String, String>,
        at: Option<LineCol>,
    ) -> Result<BTreeMap<String, ConfigValue>, SourceError> {
        let mut out = BTreeMap::new();
        for (name, template) in map {
            let (value, interpolated) =
                self.expand(server, &format!("{key}.{name}"), template, at)?;
            let secret = interpolated
                || secret::key_looks_secret(name)
                || secret::value_looks_secret(&value);
            out.insert(name.clone(), ConfigValue { value, secret });
        }
        Ok(out)
    }

    /// Validates one server. Every problem of the declaration is reported, not only the first:
    /// the checks that do not depend on each other all run.
    pub fn validate(&mut self, raw: RawServer) -> Result<ServerConfig, SourceError> {
        let mut errors = Vec::new();
        let name = raw.name.clone();
        let named = check_server_name(&name, self.separator).map_err(|err| {
            let suggestion = suggest_server_name(&name, self.separator);
            self.error(raw.at, err.to_string())
                .with_fix(format!("rename the server, e.g. {suggestion:?}"))
        });
        collect(&mut errors, named);
        let transport = collect(&mut errors, self.transport(&raw));
        let fields = match transport {
            Some(Transport::Stdio) => self.check_stdio_fields(&raw),
            Some(transport) => self.check_remote_fields(&raw, transport),
            None => Ok(()),
        };
        collect(&mut errors, fields);
        let mut timeout = |key, value, range| {
            let checked = self.timeout(&name, key, value, range);
            collect(&mut errors, checked)
        };
        let startup = timeout("startup_timeout", &raw.startup_timeout, STARTUP_TIMEOUT);
        let tool = timeout("tool_timeout", &raw.tool_timeout, TOOL_TIMEOUT);
        let idle = timeout("idle_timeout", &raw.idle_timeout, IDLE_TIMEOUT);
        let start = collect(&mut errors, self.start_mode(&raw));
        let args = collect(&mut errors, self.expand_args(&raw));
        let cwd = collect(&mut errors, self.expand_cwd(&raw));
        let url = match &raw.url {
            None => Some(None),
            Some(url) => {
                let expanded = self.expand(&name, "url", &url.value, url.at);
                collect(&mut errors, expanded).map(|(value, _)| Some(value))
            }
        };
        let env = self.expand_map(&name, "env", &raw.env, raw.env_at.or(raw.at));
        let env = collect(&mut errors, env);
        let headers = self.expand_map(&name, "headers", &raw.headers, raw.headers_at.or(raw.at));
        let headers = collect(&mut errors, headers);

        let checked = (
            transport, startup, tool, idle, start, args, cwd, url, env, headers,
        );
        let (
            Some(transport),
            Some(startup),
            Some(tool),
            Some(idle),
            Some(start),
            Some(args),
            Some(cwd),
            Some(url),
            Some(env),
            Some(headers),
        ) = checked
        else {
            return Err(SourceError::all(errors)
                .unwrap_or_else(|| self.error(raw.at, format!("server {name:?} is not valid"))));
        };
        if let Some(err) = SourceError::all(errors) {
            return Err(err);
        }
        Ok(ServerConfig {
            name,
            transport,
            command: raw.command.map(|c| c.value),
            args,
            env,
            cwd,
            url,
            headers,
            trust: raw.trust,
            startup_timeout: Duration::from_secs(startup),
            tool_timeout: Duration::from_secs(tool),
            idle_timeout: (idle > 0).then(|| Duration::from_secs(idle)),
            enabled: raw.enabled,
            start,
            sandbox: raw.sandbox,
            tools: raw.tools,
            grants: raw.grants,
            position: raw.at,
        })
    }

    fn expand_args(&mut self, raw: &RawServer) -> Result<Vec<String>, SourceError> {
        let at = raw.command.as_ref().and_then(|c| c.at);
        // The elements have no positions of their own: each is named by its index.
        raw.args
            .iter()
            .enumerate()
            .map(|(index, arg)| {
                Ok(self
                    .expand(&raw.name, &format!("args[{index}]"), arg, at)?
                    .0)
            })
            .collect()
    }

    /// The declared transport, or the one `command`/`url` imply when none is declared.
    fn transport(&self, raw: &RawServer) -> Result<Transport, SourceError> {
        let name = &raw.name;
        let Some(declared) = &raw.transport else {
            return match (&raw.command, &raw.url) {
                (Some(_), Some(url)) => Err(self
                    .error(
                        url.at,
                        format!(
                            "server {name:?} mixes transports: it has both `command` and `url`"
                        ),
                    )
                    .with_fix(
                        "keep `command` for a local stdio server, or `url` for a remote one",
                    )),
                (Some(_), None) => Ok(Transport::Stdio),
                (None, Some(_)) => Ok(Transport::Http),
                (None, None) => Err(self
                    .error(
                        raw.at,
                        format!("server {name:?} has neither `command` nor `url`"),
                    )
                    .with_fix(format!(
                        "add `{}` (with `args`) for a stdio server, or `{}` for a remote one",
                        self.field("command", "\"npx\""),
                        self.field("url", "\"https://...\"")
                    ))),
            };
        };
        match declared.value.as_str() {
            "stdio" => Ok(Transport::Stdio),
            "http" | "streamable-http" | "streamableHttp" => Ok(Transport::Http),
            "sse" => Ok(Transport::Sse),
            other => Err(self
                .error(
                    declared.at,
                    format!("server {name:?}: unknown transport {other:?}"),
                )
                .with_fix("use \"stdio\", \"http\" or \"sse\"")),
        }
    }

    /// A stdio server has a command, and no `url` or `headers`.
    fn check_stdio_fields(&self, raw: &RawServer) -> Result<(), SourceError> {
        let name = &raw.name;
        if let Some(url) = &raw.url {
            return Err(self
                .error(
                    url.at,
                    format!("server {name:?} mixes transports: a stdio server cannot have `url`"),
                )
                .with_fix(format!(
                    "remove `url`, or set `{}` and remove `command`",
                    self.field("transport", "\"http\"")
                )));
        }
        if raw
            .command
            .as_ref()
            .is_none_or(|c| c.value.trim().is_empty())
        {
            return Err(self
                .error(
                    raw.command.as_ref().and_then(|c| c.at).or(raw.at),
                    format!("server {name:?} is a stdio server without a `command`"),
                )
                .with_fix(format!(
                    "add `{}` and its `args`",
                    self.field("command", "\"npx\"")
                )));
        }
        if !raw.headers.is_empty() {
            return Err(self
                .error(
                    raw.headers_at.or(raw.at),
                    format!("server {name:?}: `headers` apply to http/sse servers only"),
                )
                .with_fix("pass credentials to a stdio server through `env`"));
        }
        Ok(())
    }

    /// A remote (http/sse) server has an http(s) `url`, and none of the stdio-only fields.
    fn check_remote_fields(
        &self,
        raw: &RawServer,
        transport: Transport,
    ) -> Result<(), SourceError> {
        let name = &raw.name;
        if let Some(command) = &raw.command {
            return Err(self
                .error(command.at, format!("server {name:?} mixes transports: a {transport} server cannot have `command`"))
                .with_fix(format!("remove `command`/`args`, or set `{}` and remove `url`", self.field("transport", "\"stdio\""))));
        }
        let Some(url) = &raw.url else {
            return Err(self
                .error(
                    raw.at,
                    format!("server {name:?} is a {transport} server without a `url`"),
                )
                .with_fix(format!("add `{}`", self.field("url", "\"https://...\""))));
        };
        if !(url.value.starts_with("https://") || url.value.starts_with("http://")) {
            return Err(self
                .error(
                    url.at,
                    format!(
                        "server {name:?}: `url` {:?} is not an http(s) URL",
                        url.value
                    ),
                )
                .with_fix("write the full endpoint, e.g. \"https://example.com/mcp\""));
        }
        if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() || raw.sandbox.is_some()
        {
            return Err(self
                .error(raw.env_at.or(raw.at), format!("server {name:?}: `args`, `env`, `cwd` and `sandbox` apply to stdio servers only"))
                .with_fix("remove them; remote servers take `headers`"));
        }
        Ok(())
    }

    fn start_mode(&self, raw: &RawServer) -> Result<StartMode, SourceError> {
        match raw.start.as_ref().map(|s| s.value.as_str()) {
            None | Some("lazy") => Ok(StartMode::Lazy),
            Some("eager") => Ok(StartMode::Eager),
            Some(other) => {
                let at = raw.start.as_ref().and_then(|s| s.at);
                Err(self
                    .error(at, format!("server {:?}: `start` = {other:?}", raw.name))
                    .with_fix("use \"lazy\" or \"eager\""))
            }
        }
    }

    /// `cwd` expanded; it must be absolute.
    fn expand_cwd(&mut self, raw: &RawServer) -> Result<Option<PathBuf>, SourceError> {
        let Some(cwd) = &raw.cwd else {
            return Ok(None);
        };
        let name = &raw.name;
        let (value, _) = self.expand(name, "cwd", &cwd.value, cwd.at)?;
        if !value.starts_with('/') {
            // `~` is a shell's word, not a path: the config names the home through the
            // environment, as it names any other value.
            let fix = match value.strip_prefix('~') {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    format!("write the home as ${{env:HOME}}: cwd = \"${{env:HOME}}{rest}\"")
                }
                _ => "write an absolute directory".to_string(),
            };
            return Err(self
                .error(
                    cwd.at,
                    format!("server {name:?}: `cwd` {value:?} is not absolute"),
                )
                .with_fix(fix));
        }
        Ok(Some(PathBuf::from(value)))
    }
}

#[cfg(test)]
mod tests;
