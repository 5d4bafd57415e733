//! `airlock install` / `uninstall`: put `airlock run` in front of every stdio server a host
//! starts, and take it out again.
//!
//! The knowledge of each host is data ([`hosts`]); what happens to an entry is a pure decision
//! ([`entry`]); the edit of the file is a pure function of its text per format ([`json_edit`] for
//! JSON and JSONC by splicing text, [`toml_edit_file`] for TOML through `toml_edit`), so the
//! formatting of everything airlock does not change is kept. Reading, backing up and writing the
//! files is the thin shell in `cli/install.rs` and [`record`].

pub mod entry;
pub mod hosts;
pub mod json_edit;
pub mod jsonc;
pub mod project;
pub mod record;
pub mod toml_edit_file;

use std::path::{Path, PathBuf};

use entry::{Action, EntryFacts, Kept, RemoteFacts, UninstallScope};
use hosts::{Base, Format, Host, HostFile};

/// The result of rewriting one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewrite {
    pub text: String,
    /// Every entry seen, with what was done to it.
    pub entries: Vec<(EntryFacts, Action)>,
    /// Entries taken out of the file, with their original text (to put back on uninstall).
    pub removed: Vec<Removed>,
}

impl Rewrite {
    pub fn changed(&self, before: &str) -> bool {
        self.text != before
    }

    pub fn wrapped(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(_, action)| matches!(action, Action::Wrap { .. } | Action::Repoint { .. }))
            .map(|(facts, _)| entry::recorded_as(facts))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub name: String,
    /// The entry's value as the file wrote it (JSON text, or a TOML document holding it).
    pub text: String,
    pub remote: Option<RemoteFacts>,
}

/// An entry to add to the file's main server map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    pub name: String,
    pub value: InsertValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertValue {
    Stdio {
        command: String,
        args: Vec<String>,
    },
    /// Text saved by [`Removed`], put back verbatim.
    Raw(String),
}

/// Why a host file cannot be edited: the byte offset (when known) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EditError {
    pub offset: Option<usize>,
    pub message: String,
}

impl From<jsonc::JsoncError> for EditError {
    fn from(err: jsonc::JsoncError) -> Self {
        EditError {
            offset: Some(err.offset),
            message: format!("not valid JSON: {}", err.message),
        }
    }
}

impl From<toml_edit_file::TomlEditError> for EditError {
    fn from(err: toml_edit_file::TomlEditError) -> Self {
        EditError {
            offset: err.offset,
            message: format!("not valid TOML: {}", err.message),
        }
    }
}

/// Rewrites `text` (a file in `format`) entry by entry, then adds `inserts` to the main map.
pub fn rewrite(
    text: &str,
    format: Format,
    host: &Host,
    maps: &[&[&str]],
    decide: &mut dyn FnMut(&EntryFacts) -> Action,
    inserts: &[Insert],
) -> Result<Rewrite, EditError> {
    Ok(match format {
        Format::Json => json_edit::rewrite(text, host, maps, decide, inserts)?,
        Format::Toml => toml_edit_file::rewrite(text, host, maps, decide, inserts)?,
    })
}

/// What `install` needs to know besides the file.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The command the host will start: airlock's absolute path.
    pub airlock: String,
    /// Where the gateway config goes when remote servers are routed through `airlock serve`;
    /// `None`: remote servers stay as they are.
    pub gateway_config: Option<PathBuf>,
    /// The text of the file at `gateway_config`, when there is one: an earlier `--gateway`
    /// install moved servers there, and a later one adds to them instead of replacing them.
    pub gateway_existing: Option<String>,
    /// Set for a project's own file (see [`project`]): the directory of the user's gateway
    /// configs, the only ones a project file's `airlock serve` entry may serve.
    pub project: Option<PathBuf>,
}

/// The name `--gateway` gives the entry it adds, when the file has no entry of that name yet.
pub const GATEWAY_ENTRY: &str = "airlock";

/// The `airlock serve` entry the remote servers are moved behind, and its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayPlan {
    /// The entry's name in the host file (`airlock`, or a free variant of it).
    pub name: String,
    /// Whether the entry is new (else an earlier install added it and it stays as it is).
    pub added: bool,
    pub path: PathBuf,
    /// The config to write: what an earlier install moved there, plus this install's servers.
    pub text: String,
}

/// The install of one file: the rewritten text and, with `--gateway`, the gateway config to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallPlan {
    pub rewrite: Rewrite,
    pub gateway: Option<GatewayPlan>,
}

/// Plans the install of one host file. Pure.
pub fn plan_install(
    text: &str,
    format: Format,
    host: &Host,
    maps: &[&[&str]],
    options: &InstallOptions,
) -> Result<InstallPlan, EditError> {
    let gateway = options.gateway_config.is_some();
    // A bare name (`"command": "airlock"`, written by hand) is the program PATH finds.
    let locate = |command: &str| {
        let path_var = std::env::var_os("PATH");
        let found = if command.contains('/') {
            std::path::PathBuf::from(command)
        } else {
            crate::paths::resolve_command(command, path_var.as_deref(), Path::new("/")).ok()?
        };
        std::fs::canonicalize(found).ok()
    };
    let mut names = entry::UniqueNames::default();
    // First the names of the entries airlock wraps already, wherever they are in the file.
    let mut reserve = |facts: &EntryFacts| {
        names.reserve(facts, &options.airlock);
        Action::Keep(Kept::NotWrapped)
    };
    rewrite(text, format, host, maps, &mut reserve, &[])?;
    let mut decide = |facts: &EntryFacts| {
        let refused = options
            .project
            .as_deref()
            .and_then(|configs| project::refusal(facts, &options.airlock, configs));
        let mut action = match refused {
            Some(why) => Action::Keep(Kept::Refused(why)),
            None => entry::decide_install(facts, &options.airlock, gateway, &locate),
        };
        // A project's file does not choose which airlock confines its servers either: a wrapper
        // of install's own shape naming another airlock runs this one.
        let another = match (&action, &facts.shape) {
            (Action::Keep(Kept::WrappedByOther(_)), _) => true,
            (Action::Keep(Kept::Gateway), entry::Shape::Stdio { command, .. }) => {
                *command != options.airlock
                    && locate(command).is_none_or(|found| locate(&options.airlock) != Some(found))
            }
            _ => false,
        };
        if options.project.is_some() && another {
            action = Action::Repoint {
                command: options.airlock.clone(),
            };
        }
        names.settle(facts, &mut action);
        action
    };
    let first = rewrite(text, format, host, maps, &mut decide, &[])?;
    let Some(config_path) = options
        .gateway_config
        .as_ref()
        .filter(|_| !first.removed.is_empty())
    else {
        return Ok(InstallPlan {
            rewrite: first,
            gateway: None,
        });
    };
    if let Some(name) = gateway_entry_serving(&first.entries, config_path, &options.airlock) {
        // An earlier install's gateway serves this config: the new servers join the old ones.
        let config = merge_gateway_config(options.gateway_existing.as_deref(), &first.removed)
            .map_err(|err| EditError {
                offset: None,
                message: format!(
                    "the gateway config {} {}; fix it or move it away",
                    config_path.display(),
                    err.message
                ),
            })?;
        return Ok(InstallPlan {
            rewrite: first,
            gateway: Some(GatewayPlan {
                name,
                added: false,
                path: config_path.clone(),
                text: config,
            }),
        });
    }
    let name = free_gateway_name(&first.entries);
    let insert = Insert {
        name: name.clone(),
        value: InsertValue::Stdio {
            command: options.airlock.clone(),
            args: vec![
                "serve".into(),
                "--config".into(),
                config_path.display().to_string(),
            ],
        },
    };
    let second = rewrite(text, format, host, maps, &mut decide, &[insert])?;
    Ok(InstallPlan {
        rewrite: second,
        gateway: Some(GatewayPlan {
            name,
            added: true,
            path: config_path.clone(),
            text: gateway_config_text(&first.removed),
        }),
    })
}

/// The name of the main map's `airlock serve --config <config>` entry, if there is one.
fn gateway_entry_serving(
    entries: &[(EntryFacts, Action)],
    config: &Path,
    airlock: &str,
) -> Option<String> {
    let config = config.display().to_string();
    entries.iter().find_map(|(facts, _)| {
        let entry::Shape::Stdio { command, args, .. } = &facts.shape else {
            return None;
        };
        let serves = facts.map == 0
            && entry::airlock_use(command, args, airlock) == Some(entry::AirlockUse::Serve)
            && args
                .windows(2)
                .any(|pair| pair[0] == "--config" && pair[1] == config);
        serves.then(|| facts.name.clone())
    })
}

/// [`GATEWAY_ENTRY`], or the first of `airlock-gateway`, `airlock-gateway-2`, ... that no entry
/// of the main map uses: the user's own server may be called `airlock`.
fn free_gateway_name(entries: &[(EntryFacts, Action)]) -> String {
    let taken = |name: &str| {
        entries
            .iter()
            .any(|(facts, _)| facts.map == 0 && facts.name == name)
    };
    std::iter::once(GATEWAY_ENTRY.to_string())
        .chain(std::iter::once(format!("{GATEWAY_ENTRY}-gateway")))
        .chain((2..).map(|n| format!("{GATEWAY_ENTRY}-gateway-{n}")))
        .find(|name| !taken(name))
        .unwrap_or_else(|| GATEWAY_ENTRY.to_string())
}

/// Plans the uninstall of one host file: unwraps airlock's entries, drops its gateway entry and
/// puts back what the install moved out. Pure.
pub fn plan_uninstall(
    text: &str,
    format: Format,
    host: &Host,
    maps: &[&[&str]],
    scope: UninstallScope<'_>,
    restore: &[Removed],
) -> Result<Rewrite, EditError> {
    // A name moved by two installs (the user declared it again in between) comes back once,
    // as the later install found it.
    let mut inserts: Vec<Insert> = Vec::new();
    for removed in restore.iter().rev() {
        if inserts.iter().all(|insert| insert.name != removed.name) {
            inserts.push(Insert {
                name: removed.name.clone(),
                value: InsertValue::Raw(removed.text.clone()),
            });
        }
    }
    inserts.reverse();
    let mut decide = |facts: &EntryFacts| entry::decide_uninstall(facts, scope);
    rewrite(text, format, host, maps, &mut decide, &inserts)
}

/// An `airlock.toml` declaring the remote servers `--gateway` moved out of a host file.
pub fn gateway_config_text(removed: &[Removed]) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    add_gateway_servers(&mut doc, removed);
    format!(
        "# Written by `airlock install --gateway`: the remote servers of a host's config, served\n\
         # through `airlock serve` (gated and audited). `airlock uninstall` puts them back.\n{doc}"
    )
}

/// The gateway config `existing` (written by an earlier install) with the servers of `removed`
/// added; a server of the same name is replaced, since the host file now declares it anew.
/// `None`: the file is gone, and the config is written afresh.
pub fn merge_gateway_config(
    existing: Option<&str>,
    removed: &[Removed],
) -> Result<String, EditError> {
    let Some(existing) = existing else {
        return Ok(gateway_config_text(removed));
    };
    let mut doc: toml_edit::DocumentMut =
        existing
            .parse()
            .map_err(|err: toml_edit::TomlError| EditError {
                offset: err.span().map(|span| span.start),
                message: format!("is not valid TOML: {}", err.message()),
            })?;
    if doc
        .get("servers")
        .is_some_and(|servers| !servers.is_table())
    {
        return Err(EditError {
            offset: None,
            message: "has a `servers` that is not a table".into(),
        });
    }
    add_gateway_servers(&mut doc, removed);
    Ok(doc.to_string())
}

fn add_gateway_servers(doc: &mut toml_edit::DocumentMut, removed: &[Removed]) {
    let servers = doc
        .entry("servers")
        .or_insert_with(|| {
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            toml_edit::Item::Table(table)
        })
        .as_table_mut();
    let Some(servers) = servers else {
        return;
    };
    for entry in removed {
        let Some(remote) = &entry.remote else {
            continue;
        };
        let mut table = toml_edit::Table::new();
        if remote.sse {
            table.insert("transport", toml_edit::value("sse"));
        }
        table.insert("url", toml_edit::value(remote.url.as_str()));
        if !remote.headers.is_empty() {
            let mut headers = toml_edit::InlineTable::new();
            for (key, value) in &remote.headers {
                headers.insert(key, value.as_str().into());
            }
            table.insert("headers", toml_edit::value(headers));
        }
        servers.insert(
            &entry::server_name(&entry.name),
            toml_edit::Item::Table(table),
        );
    }
}

/// Where a host's files are: the environment facts paths are built from.
#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    pub dirs: crate::paths::UserDirs,
    pub codex_home: Option<PathBuf>,
    pub project: PathBuf,
}

impl HostEnv {
    /// From environment variables (only absolute values count) and the project directory.
    pub fn from_env(env: &(impl crate::paths::VarSource + ?Sized), project: &Path) -> HostEnv {
        HostEnv {
            dirs: crate::paths::UserDirs::from_env(env),
            codex_home: env.absolute_path("CODEX_HOME"),
            project: project.to_path_buf(),
        }
    }

    /// The path of `file`, or `None` when the environment does not say (no `HOME`).
    pub fn path_of(&self, file: &HostFile) -> Option<PathBuf> {
        let base = match file.base {
            Base::Home => self.dirs.home.clone()?,
            Base::XdgConfig => self.dirs.config_base()?,
            Base::CodexHome => self
                .codex_home
                .clone()
                .or_else(|| self.dirs.home.as_ref().map(|h| h.join(".codex")))?,
            Base::Project => self.project.clone(),
        };
        Some(base.join(file.relative))
    }
}

/// One line per entry: what install/uninstall did (or would do) to it.
pub fn summary_lines(rewrite: &Rewrite) -> Vec<String> {
    rewrite
        .entries
        .iter()
        .map(|(facts, action)| {
            let what = match action {
                Action::Wrap { prepend, .. } => format!(
                    "wrapped in `airlock run --name {}`",
                    entry::run_name(prepend).unwrap_or(&entry::server_name(&facts.name))
                ),
                Action::Unwrap { command, .. } => format!("unwrapped: starts `{command}` again"),
                Action::Repoint { command } => format!(
                    "was wrapped by an airlock that is no longer there: now starts `{command}`"
                ),
                Action::Remove if facts.map == 0 => match &facts.shape {
                    entry::Shape::Remote(_) => "moved behind the airlock gateway".to_string(),
                    _ => "removed (airlock's gateway entry)".to_string(),
                },
                Action::Remove => "removed".to_string(),
                Action::Keep(kept) => match kept {
                    Kept::AlreadyWrapped => "already wrapped".to_string(),
                    Kept::WrappedByOther(other) => format!(
                        "already wrapped, by another airlock ({other}): left alone (uninstall, then install with this one to switch)"
                    ),
                    Kept::Gateway => "already an airlock gateway".to_string(),
                    Kept::Remote => {
                        "remote server: left alone (--gateway routes it through airlock serve)"
                            .to_string()
                    }
                    Kept::RemoteNotMain => {
                        "remote server: left alone (--gateway moves only the main map's)".into()
                    }
                    Kept::RemoteUnmovable(why) => format!("remote server: left alone ({why})"),
                    Kept::NotUnderstood(why) => format!("left alone: {why}"),
                    Kept::NotWrapped => "not wrapped by airlock".to_string(),
                    Kept::NotOurs => "wrapped, but not by this install: left alone".to_string(),
                    Kept::Refused(why) => format!("refused: {why}"),
                },
            };
            let place = if facts.map == 0 {
                String::new()
            } else {
                format!(" (in {})", facts.map_label)
            };
            let note = match (action, &facts.shape) {
                (
                    Action::Wrap { .. },
                    entry::Shape::Stdio {
                        path_env, env_file, ..
                    },
                ) => {
                    let mut note = path_env_note(path_env);
                    if let Some(file) = env_file {
                        // The host loads it into airlock's environment, which reaches the
                        // server only by name (a review found a server left without its
                        // tokens, and nothing said).
                        note.push_str(&format!(
                            "; its envFile {file} sets variables for airlock, which passes them to the server only by name: add `--allow-env=NAME` before the `--` for each the server needs"
                        ));
                    }
                    note
                }
                _ => String::new(),
            };
            format!("{}{place}: {what}{note}", facts.name)
        })
        .collect()
}

/// An `env` value that is a path reaches the server, but the sandbox grants nothing for it:
/// a server that keeps its data there (server-memory's `MEMORY_FILE_PATH`) fails, or writes
/// into its scratch space and loses it. Said, not granted: an env path may as well be a
/// credential (`KUBECONFIG`) the user would not hand over. A value is shown only when it is a
/// path on this machine ([`shown_path`]): one that starts with `/` may as well be a secret
/// (base64); otherwise only the variable's name is.
fn path_env_note(path_env: &[(String, String)]) -> String {
    if path_env.is_empty() {
        return String::new();
    }
    let mut named = Vec::new();
    let mut exact = Vec::new();
    for (key, value) in path_env {
        match shown_path(key, value) {
            Some((file, dir)) => exact.push(format!(
                "{key}: `--allow-write={}` if the server writes there, else `--allow-read={}`",
                dir.display(),
                file.display()
            )),
            None => named.push(key.as_str()),
        }
    }
    let mut parts = exact;
    if !named.is_empty() {
        parts.push(format!(
            "{}: `--allow-read=FILE`, or `--allow-write=DIR` if it writes there",
            named.join(", ")
        ));
    }
    format!(
        "; its env may name a file the sandbox does not grant; to let the server use it, add before the `--` of its airlock line: {}",
        parts.join("; ")
    )
}

/// The file an env value names and the directory to grant for writing it (a server writes its
/// data beside it: a temporary file renamed over it), when the value is plainly a path on this
/// machine: its name does not look like a credential's, and it names an existing directory,
/// or a file in an existing directory below the top level. `~/` is the user's home.
fn shown_path(key: &str, value: &str) -> Option<(PathBuf, PathBuf)> {
    if crate::secret::key_looks_secret(key) {
        return None;
    }
    let path = match value.strip_prefix("~/") {
        Some(rest) => crate::paths::UserDirs::from_env(&crate::paths::EnvVars::from_process())
            .home?
            .join(rest),
        None => PathBuf::from(value),
    };
    if path.is_dir() {
        return Some((path.clone(), path));
    }
    let dir = path.parent()?;
    (dir.components().count() > 2 && dir.is_dir()).then(|| (path.clone(), dir.to_path_buf()))
}

/// A unified diff of `before` → `after`, labelled with the file's path.
pub fn diff(path: &Path, before: &str, after: &str) -> String {
    let label = path.display().to_string();
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&label, &format!("{label} (after airlock)"))
        .to_string()
}

#[cfg(test)]
mod tests;
