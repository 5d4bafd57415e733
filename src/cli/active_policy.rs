//! The active policy of a command: every policy layer found on disk, merged with the per-server
//! blocks of the server config. It lives here, in the layer that calls both `config` and
//! `policy`, so neither of those rooms has to know the other's loading.

use crate::config::Config;
use crate::diagnostic::SourceError;
use crate::paths::EnvVars;
use crate::policy::{Policy, discover, load};

/// Discovers every policy layer from the environment and merges them with the config's
/// per-server blocks. `user_override` is `--policy` (a file or a preset name).
pub fn load_active(
    user_override: Option<String>,
    config: Option<&Config>,
) -> Result<Policy, SourceError> {
    let inputs = discover::DiscoveryInputs::new(
        &EnvVars::from_process(),
        std::env::current_dir().ok(),
        user_override,
    );
    let sources = discover::discover(&inputs)?;
    let overrides = config.map(Config::policy_overrides).unwrap_or_default();
    load(&sources, &overrides)
}
