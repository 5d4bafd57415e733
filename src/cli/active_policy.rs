//! The active policy of a command: every policy layer found on disk, merged with the per-server
//! blocks of the server config. It lives here, in the layer that calls both `config` and
//! `policy`, so neither of those rooms has to know the other's loading.

use crate::config::Config;
use crate::diagnostic::SourceError;
use crate::paths::EnvVars;
use crate::policy::{Policy, ServerOverride, discover, load, names};

/// Discovers every policy layer from the environment and merges them with the config's
/// per-server blocks. `user_override` is `--policy` (a file or a preset name). With a config,
/// tool patterns are read against its server names (`mcp:fs_write_file` as `mcp:fs__write_file`
/// when `fs` is declared; an ambiguous pattern is a load error).
pub fn load_active(
    user_override: Option<String>,
    config: Option<&Config>,
) -> Result<Policy, SourceError> {
    let policy = load_layers(user_override, config, &[])?;
    match config {
        Some(config) => names::apply(policy, &server_names(config)),
        None => Ok(policy),
    }
}

/// The active policy of `airlock run`, its patterns read against the one server it serves;
/// `extra` are config-layer blocks for it (the command line's grants,
/// `crate::policy::command_line`).
pub fn load_active_for_server(
    user_override: Option<String>,
    server: &str,
    extra: &[ServerOverride<'_>],
) -> Result<Policy, SourceError> {
    names::apply(load_layers(user_override, None, extra)?, &[server])
}

/// Every server the config declares (enabled or not): the names patterns are read against.
pub fn server_names(config: &Config) -> Vec<&str> {
    config.servers.iter().map(|s| s.name.as_str()).collect()
}

fn load_layers(
    user_override: Option<String>,
    config: Option<&Config>,
    extra: &[ServerOverride<'_>],
) -> Result<Policy, SourceError> {
    let inputs = discover::DiscoveryInputs::new(
        &EnvVars::from_process(),
        std::env::current_dir().ok(),
        user_override,
    );
    let sources = discover::discover(&inputs)?;
    let mut overrides = config.map(Config::policy_overrides).unwrap_or_default();
    overrides.extend_from_slice(extra);
    load(&sources, &overrides)
}
