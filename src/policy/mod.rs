//! The policy engine: policy files, layering (org > user > config > project), org locks,
//! tool-pattern compilation and the pure [`Policy::decide`].
//!
//! Reading order for a newcomer: [`file`] is the on-disk shape, [`merge`] turns layers into one
//! [`Policy`] (and refuses widening where it is not allowed), [`rules`] compiles tool patterns into
//! an index, and [`Policy::decide`] answers a [`Call`].

pub mod command_line;
pub mod discover;
pub mod file;
pub mod keys;
pub mod merge;
pub mod names;
pub mod network;
pub mod pattern;
pub mod presets;
pub mod reading;
pub mod rules;
pub mod value_texts;

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use merge::{LayerSource, ServerOverride, load};
pub use network::Network;
pub use rules::ToolRules;

/// What happens to a tool call.
///
/// Ordered by strictness: `Allow < Ask < Deny`, so "the stricter of two" is `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

impl Action {
    /// The word policies and the audit log use.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the gate does with a call whose arguments do not validate against the tool's listed
/// `inputSchema` (`tools.gate_schema`). Ordered by strictness: `Off < Warn < Enforce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SchemaMode {
    /// Arguments are not checked.
    Off,
    /// The call goes through; the mismatch is logged and audited.
    Warn,
    /// The call is refused before the server sees it, with the validation error.
    Enforce,
}

impl fmt::Display for SchemaMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchemaMode::Off => "off",
            SchemaMode::Warn => "warn",
            SchemaMode::Enforce => "enforce",
        })
    }
}

/// Where a policy layer comes from. Ordered by authority, highest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// `/etc/airlock/policy.toml` and `policy.d/*.toml`: may lock sections.
    Org,
    /// `$XDG_CONFIG_HOME/airlock/policy.toml` or `--policy`.
    User,
    /// Per-server `sandbox` / `tools` blocks in the server config the user points airlock at.
    Config,
    /// `.airlock/policy.toml` found from the working directory up: untrusted, may only narrow.
    Project,
    /// `policies/default.toml`, compiled in: used for every key no other layer sets.
    Builtin,
}

impl Layer {
    /// The layer's name, as `airlock check` and the audit log write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Org => "org",
            Layer::User => "user",
            Layer::Config => "config",
            Layer::Project => "project",
            Layer::Builtin => "builtin",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a value of the merged policy was written: layer, file and line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub layer: Layer,
    pub file: PathBuf,
    pub line: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.layer, self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        Ok(())
    }
}

/// A value of the merged policy together with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

/// Which user the sandboxed server runs as when airlock itself runs as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunAs {
    /// uid/gid 65534: owns nothing.
    Nobody,
    Uid(u32),
    Root,
}

impl fmt::Display for RunAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunAs::Nobody => f.write_str("nobody (65534)"),
            RunAs::Uid(uid) => write!(f, "uid {uid}"),
            RunAs::Root => f.write_str("root"),
        }
    }
}

/// What existing paths on a server's own command line are granted (`sandbox.grant_args`).
/// Ordered by reach: `None < Read < Write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantArgs {
    /// Nothing: only the policy's grants and `--allow-read`/`--allow-write`.
    None,
    /// Files and directories read-only.
    Read,
    /// Directories read-write, files read-only.
    Write,
}

impl fmt::Display for GrantArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GrantArgs::None => "none",
            GrantArgs::Read => "read",
            GrantArgs::Write => "write",
        })
    }
}

/// A kernel feature a policy insists on (`require = ["landlock>=6"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    Landlock,
    Seccomp,
    UserNamespaces,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub feature: Feature,
    /// Minimum ABI version (landlock only).
    pub min_version: Option<u32>,
    pub text: String,
}

/// Resource limits for each sandboxed server (applied as rlimits in the confine helper).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub processes: Sourced<u64>,
    pub memory_mb: Sourced<u64>,
    pub open_files: Sourced<u64>,
    pub file_size_mb: Sourced<u64>,
    /// The server's scratch disk (home, tmp, cache layers): a tmpfs of this size.
    pub disk_mb: Sourced<u64>,
    pub cpu_seconds: Option<Sourced<u64>>,
}

/// What the sandbox must enforce for a server, after merging every layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxPolicy {
    pub network: Sourced<Network>,
    /// Path templates (`~`, `${env:NAME}` not yet expanded) granted read+execute.
    pub read: Vec<Sourced<String>>,
    /// Path templates granted read+write.
    pub write: Vec<Sourced<String>>,
    /// Environment variable names (or `PREFIX_*` globs) passed through from airlock's environment.
    pub env: Vec<Sourced<String>>,
    pub run_as: Sourced<RunAs>,
    pub require: Vec<Sourced<Requirement>>,
    /// Seconds between SIGTERM and SIGKILL in the kill sequence.
    pub kill_timeout: Sourced<u64>,
    pub limits: Limits,
    /// What existing paths on the server's own command line are granted.
    pub grant_args: Sourced<GrantArgs>,
    /// Where the org locks `[sandbox]`, if it does: no lower layer and no `--allow-*` flag may
    /// widen it (fix lines then point at the org, not at the flags).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked: Option<Origin>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchPolicy {
    /// Command basenames or absolute paths that may be launched without `trust = true`.
    pub allow_commands: Vec<Sourced<String>>,
    /// Whether a server may opt out of the allowlist with `trust = true`.
    pub allow_trust: Sourced<bool>,
}

impl LaunchPolicy {
    /// True when `resolved` (an absolute path) or its basename is on the allowlist.
    pub fn allows_command(&self, resolved: &std::path::Path) -> bool {
        let basename = resolved.file_name().and_then(|name| name.to_str());
        self.allow_commands.iter().any(|entry| {
            let allowed = entry.value.as_str();
            if allowed.starts_with('/') {
                std::path::Path::new(allowed) == resolved
            } else {
                basename == Some(allowed)
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPolicy {
    /// Audit log file (template; `None` = the default under `$XDG_STATE_HOME/airlock/`).
    pub path: Option<Sourced<String>>,
    /// Extra regexes whose matches are redacted from logged arguments.
    pub redact: Vec<Sourced<String>>,
    /// A log file is rotated at this size in MiB (0: never).
    pub rotate_mb: Sourced<u64>,
    /// Rotated files kept beside the log, the oldest deleted first (0: all).
    pub keep_rotated: Sourced<u64>,
    /// Where the org locks `[audit]`, if it does: then `--audit` may not move the log either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked: Option<Origin>,
}

/// What airlock does when a pinned definition (tool, prompt, resource template) changes or a
/// new one appears. Ordered by strictness: `Off < Warn < Enforce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PinningMode {
    /// No pins are kept or checked.
    Off,
    /// Changes are recorded and warned about (stderr, audit), but stay visible and callable.
    Warn,
    /// Changed and new definitions are hidden and refused until approved.
    Enforce,
}

impl fmt::Display for PinningMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PinningMode::Off => "off",
            PinningMode::Warn => "warn",
            PinningMode::Enforce => "enforce",
        })
    }
}

/// What happens to a server this machine has never approved. Ordered by strictness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NewServers {
    /// Its definitions are pinned the first time they are seen (trust on first use).
    Trust,
    /// It starts but exposes nothing until `airlock pins approve SERVER`.
    Quarantine,
}

impl fmt::Display for NewServers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NewServers::Trust => "trust",
            NewServers::Quarantine => "quarantine",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinsPolicy {
    pub pinning: Sourced<PinningMode>,
    pub new_servers: Sourced<NewServers>,
}

/// One tool call as the gate sees it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub arguments: Option<&'a serde_json::Value>,
    /// Who makes the call: an authenticated HTTP client's identity (`serve --listen`); `None`
    /// for a stdio host. `[identities.NAME]` rules apply only to calls made by NAME.
    pub identity: Option<&'a str>,
}

/// The answer for one call: what to do, which rule said so, and from which layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub action: Action,
    /// Human-readable rule, e.g. `tools.deny "mcp:fs__write_*"` or `tools.default`.
    pub rule: String,
    pub layer: Layer,
    /// `file:line` of the rule.
    pub source: String,
    /// How the argument the deciding rule is conditioned on was read (absent for rules without
    /// an argument condition and for the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argument: Option<rules::ArgumentTrace>,
}

/// The merged, compiled policy. Built once by [`load`]; [`Policy::decide`] is pure.
#[derive(Debug, Clone)]
pub struct Policy {
    pub launch: LaunchPolicy,
    pub tools: ToolRules,
    /// `tools.gate_schema`: arguments checked against the listed `inputSchema`.
    pub gate_schema: Sourced<SchemaMode>,
    pub sandbox: SandboxPolicy,
    /// Sandbox per configured server (global sandbox plus that server's config block).
    pub server_sandbox: std::collections::BTreeMap<String, SandboxPolicy>,
    pub audit: AuditPolicy,
    pub pins: PinsPolicy,
    /// The policy files that were merged, highest authority first.
    pub sources: Vec<(Layer, PathBuf)>,
    /// The config layer's inputs: the server config file (`serve`) and the command line's
    /// `--allow-*` flags (`run`), each once, in the order they were merged.
    pub config_sources: Vec<PathBuf>,
    /// SHA-256 over every input of the merge (the built-in default, each file's path and
    /// contents, the config layer's), for the audit log and `airlock check`.
    pub digest: String,
}

impl Policy {
    /// Decides one call with no knowledge of the server's HOME or working directory: a relative
    /// or `~` path argument is then unreadable, which fails closed (see [`reading`]). Pure.
    pub fn decide(&self, call: &Call<'_>) -> Decision {
        self.tools.decide(call)
    }

    /// Decides one call, reading path arguments the way the server whose HOME and working
    /// directory `context` names will. Pure, but for the links along a path when `context`
    /// follows them (a local server's): same policy, call, context and links, same decision.
    pub fn decide_in(&self, call: &Call<'_>, context: &reading::PathContext) -> Decision {
        self.tools.decide_in(call, context)
    }

    /// Every input the digest covers, highest authority first, as `airlock check` and the
    /// audit log's `policy` event name them (`user /home/me/.config/airlock/policy.toml`,
    /// `config --allow-write (command line)`, `builtin builtin:default.toml`).
    pub fn source_names(&self) -> Vec<String> {
        let named = |(layer, path): &(Layer, PathBuf)| format!("{layer} {}", path.display());
        let above_config = self
            .sources
            .iter()
            .filter(|(layer, _)| *layer < Layer::Config)
            .map(named);
        let config = self.config_sources.iter().map(|path| {
            let shown = path.display().to_string();
            if shown.starts_with("--") {
                format!("{} {shown} (command line)", Layer::Config)
            } else {
                format!("{} {shown}", Layer::Config)
            }
        });
        let below_config = self
            .sources
            .iter()
            .filter(|(layer, _)| *layer > Layer::Config)
            .map(named);
        above_config
            .chain(config)
            .chain(below_config)
            .chain(std::iter::once(format!(
                "{} {}",
                Layer::Builtin,
                presets::DEFAULT_NAME
            )))
            .collect()
    }

    /// The sandbox for `server`: its own merged block if the config declared one, else the global.
    pub fn sandbox_for(&self, server: &str) -> &SandboxPolicy {
        self.server_sandbox.get(server).unwrap_or(&self.sandbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_order_by_strictness() {
        assert!(Action::Deny > Action::Ask && Action::Ask > Action::Allow);
    }

    #[test]
    fn a_container_engine_is_refused_even_when_trusted_or_listed() {
        let policy = load(&[], &[]).unwrap();
        let mut launch = policy.launch.clone();
        launch.allow_commands.push(launch.allow_commands[0].clone());
        launch.allow_commands.last_mut().unwrap().value = "docker".into();
        for engine in ["/usr/bin/docker", "/usr/local/bin/podman"] {
            let verdict = launch.verdict("gh", std::path::Path::new(engine), true, "pass --trust");
            let LaunchVerdict::Refused { message, fix } = verdict else {
                panic!("{engine}: {verdict:?}");
            };
            assert!(message.contains("is a container engine"), "{message}");
            assert!(fix.contains("npx -y PACKAGE"), "{fix}");
        }
        assert!(matches!(
            launch.verdict("n", std::path::Path::new("/usr/bin/node"), false, ""),
            LaunchVerdict::Allowed(_)
        ));
        // A link to one is one too.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("docker"), "").unwrap();
        std::os::unix::fs::symlink(dir.path().join("docker"), dir.path().join("dkr")).unwrap();
        let verdict = launch.verdict("gh", &dir.path().join("dkr"), true, "pass --trust");
        assert!(
            matches!(verdict, LaunchVerdict::Refused { .. }),
            "{verdict:?}"
        );
    }
}

/// Programs that start a server in a container: none can work inside the sandbox.
const CONTAINER_ENGINES: [&str; 6] = [
    "docker",
    "podman",
    "podman-remote",
    "nerdctl",
    "finch",
    "com.docker.cli",
];

/// The outcome of the launch allowlist for one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchVerdict {
    /// May launch; the reason is shown by `check` and recorded in the audit log.
    Allowed(String),
    /// Must not launch: what is wrong and the exact fix.
    Refused { message: String, fix: String },
}

impl LaunchPolicy {
    /// Decides whether `server` may launch `resolved`. `trust_fix` is how the user opts this
    /// server out of the allowlist where it was declared (e.g. "add `trust = true` to
    /// [servers.fs] in airlock.toml", or "pass `--trust`" on the command line).
    pub fn verdict(
        &self,
        server: &str,
        resolved: &std::path::Path,
        trust: bool,
        trust_fix: &str,
    ) -> LaunchVerdict {
        let basename = resolved
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Trust opts a program out of the allowlist, not out of the sandbox, in which no
        // container engine can start a container: refused whatever the lists say, with why.
        // By the name it was started as, and by the file a link leads to (`dkr -> docker`).
        let target = std::fs::canonicalize(resolved).ok();
        let target_name = target
            .as_deref()
            .and_then(std::path::Path::file_name)
            .map(|n| n.to_string_lossy().into_owned());
        let is_engine = |name: &str| CONTAINER_ENGINES.contains(&name);
        if is_engine(&basename) || target_name.as_deref().is_some_and(is_engine) {
            return LaunchVerdict::Refused {
                message: format!(
                    "server {server:?}: {} is a container engine, which cannot start a server inside airlock's sandbox (docker's socket is root on this machine, and the sandbox refuses unix sockets; a rootless engine needs the namespaces and mounts it refuses)",
                    resolved.display()
                ),
                fix: "run the server's own package instead of its image (most servers published as images are also on npm or PyPI: `npx -y PACKAGE`, `uvx PACKAGE`), or keep this entry outside airlock, where its engine confines it".to_string(),
            };
        }
        if self.allows_command(resolved) {
            return LaunchVerdict::Allowed(format!("{basename:?} is on launch.allow_commands"));
        }
        if trust && self.allow_trust.value {
            return LaunchVerdict::Allowed("the server declares trust = true".to_string());
        }
        let message = format!(
            "server {server:?}: {} is not on the launch allowlist (launch.allow_commands){}",
            resolved.display(),
            if trust {
                " and this policy forbids trust = true"
            } else {
                ""
            }
        );
        let fix = if self.allow_trust.value {
            // The whole list to write: the first layer that sets it replaces the built-in one,
            // so a list of only the new command would refuse every other server.
            let mut listed: Vec<String> = self
                .allow_commands
                .iter()
                .map(|entry| format!("{:?}", entry.value))
                .collect();
            listed.push(format!("{basename:?}"));
            format!(
                "if you trust this program, {trust_fix}, or allow it for every server in your user policy: `allow_commands = [{}]` under [launch] (the whole list: the first policy to set it replaces the built-in one)",
                listed.join(", ")
            )
        } else {
            format!(
                "launch.allow_trust = false ({}); ask the owner of that policy to add {basename:?} or {:?} to launch.allow_commands",
                self.allow_trust.origin,
                resolved.display()
            )
        };
        LaunchVerdict::Refused { message, fix }
    }
}

#[cfg(test)]
mod grant_args_tests;
#[cfg(test)]
mod merge_audit_tests;
#[cfg(test)]
mod merge_tests;
#[cfg(test)]
mod rules_tests;
