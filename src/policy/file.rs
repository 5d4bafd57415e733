//! The on-disk shape of a policy file (`version = 1`). Parsing only: no merging, no decisions.
//!
//! Every struct rejects unknown keys so a typo (`alow = [...]`) is a load error with its
//! line and column rather than a silently ignored rule. Values that need checking beyond their
//! type keep their span (`Spanned`) so the check can point at them.

use serde::Deserialize;
use toml::Spanned;

use super::{Action, SchemaMode};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    pub version: Option<Spanned<i64>>,
    #[serde(default)]
    pub launch: Option<Spanned<LaunchSection>>,
    #[serde(default)]
    pub tools: Option<Spanned<ToolsSection>>,
    #[serde(default)]
    pub sandbox: Option<Spanned<SandboxSection>>,
    #[serde(default)]
    pub audit: Option<Spanned<AuditSection>>,
    #[serde(default)]
    pub pins: Option<Spanned<PinsSection>>,
    /// `[identities.NAME]` (NAME may hold `*` and `?`): tool rules that apply only to calls made
    /// by that authenticated identity (`airlock serve --listen`).
    #[serde(default)]
    pub identities: std::collections::BTreeMap<Spanned<String>, Spanned<IdentitySection>>,
}

/// `[identities.NAME]`: like `[tools]`'s lists, for one identity's calls.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentitySection {
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub ask: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSection {
    pub locked: Option<Spanned<bool>>,
    pub allow_commands: Option<Vec<Spanned<String>>>,
    pub allow_trust: Option<Spanned<bool>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    pub locked: Option<Spanned<bool>>,
    pub default: Option<Spanned<Action>>,
    pub gate_schema: Option<Spanned<SchemaMode>>,
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub ask: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    #[serde(default)]
    pub rule: Vec<Spanned<RuleDecl>>,
}

/// `[[tools.rule]]`: an action for a tool pattern, conditioned on one named argument.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleDecl {
    pub tool: Spanned<String>,
    pub action: Spanned<Action>,
    pub argument: Spanned<String>,
    pub glob: Option<Spanned<String>>,
    pub regex: Option<Spanned<String>>,
    pub prefix: Option<Spanned<String>>,
    /// The rule applies when the argument does NOT match (e.g. deny writes outside a prefix).
    #[serde(default)]
    pub negate: bool,
    /// Normalise the value as a path before matching. Defaults to on for `prefix` and `glob`.
    pub normalize_path: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    pub locked: Option<Spanned<bool>>,
    /// `"none"`, `"host"`, or a list of TCP ports the server may connect to.
    pub network: Option<Spanned<toml::Value>>,
    pub read: Option<Vec<Spanned<String>>>,
    pub write: Option<Vec<Spanned<String>>>,
    /// Names (or `PREFIX_*` globs) of airlock's environment variables passed to the server.
    pub env: Option<Vec<Spanned<String>>>,
    /// `"nobody"` (default when airlock runs as root), `"root"`, or a numeric uid.
    pub run_as: Option<Spanned<toml::Value>>,
    /// Kernel features the sandbox must have, e.g. `"landlock>=6"`, `"seccomp"`.
    pub require: Option<Vec<Spanned<String>>>,
    pub kill_timeout: Option<Spanned<i64>>,
    pub limits: Option<Spanned<LimitsSection>>,
    /// `"write"` (directories read-write, files read), `"read"` or `"none"`: what existing paths
    /// on a server's own command line are granted.
    pub grant_args: Option<Spanned<super::GrantArgs>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    pub processes: Option<Spanned<i64>>,
    pub memory_mb: Option<Spanned<i64>>,
    pub open_files: Option<Spanned<i64>>,
    pub file_size_mb: Option<Spanned<i64>>,
    pub disk_mb: Option<Spanned<i64>>,
    pub cpu_seconds: Option<Spanned<i64>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSection {
    pub locked: Option<Spanned<bool>>,
    pub path: Option<Spanned<String>>,
    pub redact: Option<Vec<Spanned<String>>>,
    pub rotate_mb: Option<Spanned<i64>>,
    pub keep_rotated: Option<Spanned<i64>>,
}

/// `[pins]`: what happens when a server's tool, prompt or resource template definitions change,
/// and to servers this machine has never approved.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinsSection {
    pub locked: Option<Spanned<bool>>,
    pub pinning: Option<Spanned<super::PinningMode>>,
    pub new_servers: Option<Spanned<super::NewServers>>,
}
