//! The sandbox: [`plan`] decides (pure), [`confine`] applies (the confine helper).
//!
//! `plan(request, host) -> SandboxPlan` turns the merged [`SandboxPolicy`], the resolved command
//! and what the kernel offers ([`HostFacts`]) into every concrete rule: landlock paths and ports,
//! namespaces, the identity to run as, rlimits, seccomp switches and the exact environment. The plan
//! is serialisable: `process::spawn_confined` hands it to `airlock __confine`, which applies it in
//! a fresh single-threaded process and `execve`s the server (see [`confine`] for the order and the
//! exit codes). The rules are documented in `docs/sandbox.md`.

pub mod cgroup;
pub mod confine;
pub mod host;
pub mod paths;
pub mod procfs;
pub mod profile;
pub mod root;
pub mod seccomp;

use std::path::PathBuf;

use crate::policy::SandboxPolicy;

pub use host::HostFacts;
pub use paths::{AirlockDirs, ResolvedPaths};
pub use profile::RuntimeProfile;

/// The uid/gid a server runs as when airlock is root and the policy says `run_as = "nobody"`.
pub const NOBODY: u32 = 65534;

/// Everything [`plan`] needs, gathered by the caller (the only effectful part is
/// [`ResolvedPaths::inspect`], which the caller runs first).
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub server: String,
    /// Resolved absolute path of the command (never resolved through a shell).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The server's own `env` entries, already interpolated.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub sandbox: SandboxPolicy,
    pub dirs: AirlockDirs,
    /// airlock's own environment: passthrough names and `${env:NAME}` are looked up here.
    pub parent_env: Vec<(String, String)>,
    /// Facts about the command's files (canonical path, venv, script, package root).
    pub resolved: ResolvedPaths,
    /// This is the install step (`crate::fetch`): its runner must reach the registry its allow
    /// list names. A server itself runs from the cache unless its network is `host`.
    pub fetches_packages: bool,
}

/// Why a plan cannot be made. Each is bad input (the CLI maps it to exit 2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("program must be an absolute path, got {0}")]
    RelativeProgram(PathBuf),
    #[error(
        "the policy requires {unmet}, but this host has {have}; airlock refuses to run `{server}` less confined than the policy says (see `airlock doctor`)"
    )]
    Unmet {
        server: String,
        unmet: String,
        have: String,
    },
    #[error(
        "grant `{grant}` ({origin}) would expose {what} ({path}) to the server; grant a narrower directory"
    )]
    GrantsProtected {
        grant: String,
        origin: String,
        what: String,
        path: PathBuf,
    },
    #[error(
        "grant `{grant}` ({origin}) names a variable that is not set in airlock's environment; set it, or remove the grant"
    )]
    UnsetGrant { grant: String, origin: String },
    #[error("grant `{grant}` ({origin}) is not an absolute path after expansion: {expanded}")]
    RelativeGrant {
        grant: String,
        origin: String,
        expanded: String,
    },
    #[error("invalid server name `{0}` (it names the server's private directory)")]
    BadServerName(String),
}

pub mod arguments;
mod display;
mod env;
mod grants;
pub mod layouts;
mod limits;
mod model;
mod overlays;
mod plan;
mod vars;

pub use cgroup::{CgroupVersion, MemoryCgroup};
pub use env::{
    TLS_TRUST, env_name_matches, ungranted_env_paths, withheld_credentials, withheld_tls_trust,
};
pub use grants::{install_prefix, is_servers_own_device};
pub use model::*;
pub use plan::plan;
pub use root::{RootFile, RootFileContent, RootPlan};

#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod tests;
