//! Where a user's airlock files live: the XDG base directories.
//!
//! - state: `$XDG_STATE_HOME/airlock`, else `~/.local/state/airlock` (audit log, private server
//!   dirs, gateway sockets);
//! - config: `$XDG_CONFIG_HOME/airlock`, else `~/.config/airlock` (`policy.toml`, `airlock.toml`).
//!
//! Empty or relative values of the variables are ignored, as the specification says.

use std::path::PathBuf;

use super::VarSource;

/// The user's home and XDG base directories, as the environment gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserDirs {
    /// `HOME` (for `~`; never granted to a server).
    pub home: Option<PathBuf>,
    /// `XDG_STATE_HOME`, when set.
    pub xdg_state_home: Option<PathBuf>,
    /// `XDG_CONFIG_HOME`, when set.
    pub xdg_config_home: Option<PathBuf>,
}

impl UserDirs {
    pub fn from_env(env: &(impl VarSource + ?Sized)) -> UserDirs {
        UserDirs {
            home: env.absolute_path("HOME"),
            xdg_state_home: env.absolute_path("XDG_STATE_HOME"),
            xdg_config_home: env.absolute_path("XDG_CONFIG_HOME"),
        }
    }

    /// The base of every program's state: `$XDG_STATE_HOME`, else `~/.local/state`.
    pub fn state_base(&self) -> Option<PathBuf> {
        self.xdg_state_home
            .clone()
            .or_else(|| self.home.as_ref().map(|home| home.join(".local/state")))
    }

    /// The base of every program's configuration: `$XDG_CONFIG_HOME`, else `~/.config` (where
    /// hosts such as Claude Desktop, VS Code and Zed, and uv, keep theirs on Linux too).
    pub fn config_base(&self) -> Option<PathBuf> {
        self.xdg_config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|home| home.join(".config")))
    }

    /// `$XDG_STATE_HOME/airlock`, else `~/.local/state/airlock`; `None` with neither set.
    pub fn state_dir(&self) -> Option<PathBuf> {
        self.state_base().map(|base| base.join("airlock"))
    }

    /// `$XDG_CONFIG_HOME/airlock`, else `~/.config/airlock`; `None` with neither set.
    pub fn config_dir(&self) -> Option<PathBuf> {
        self.config_base().map(|base| base.join("airlock"))
    }

    /// The user policy layer's file: `<config dir>/policy.toml`.
    pub fn user_policy(&self) -> Option<PathBuf> {
        self.config_dir().map(|dir| dir.join("policy.toml"))
    }

    /// The gateway config used when `--config` is not given and `./airlock.toml` does not exist.
    pub fn default_server_config(&self) -> Option<PathBuf> {
        self.config_dir().map(|dir| dir.join("airlock.toml"))
    }

    /// The bearer-token store of `airlock token` (hashes only): `<config dir>/tokens.json`.
    pub fn token_store(&self) -> Option<PathBuf> {
        self.config_dir().map(|dir| dir.join("tokens.json"))
    }

    /// The audit log when neither `--audit` nor the policy names one.
    pub fn default_audit_log(&self) -> Option<PathBuf> {
        self.state_dir().map(|dir| dir.join("audit.jsonl"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::EnvVars;

    #[test]
    fn xdg_variables_win_over_home() {
        let dirs = UserDirs::from_env(&EnvVars::from_pairs([
            ("HOME", "/home/me"),
            ("XDG_STATE_HOME", "/xs"),
            ("XDG_CONFIG_HOME", "/xc"),
        ]));
        assert_eq!(dirs.state_dir(), Some(PathBuf::from("/xs/airlock")));
        assert_eq!(
            dirs.user_policy(),
            Some(PathBuf::from("/xc/airlock/policy.toml"))
        );
        assert_eq!(
            dirs.default_audit_log(),
            Some(PathBuf::from("/xs/airlock/audit.jsonl"))
        );
    }

    #[test]
    fn home_supplies_the_defaults_and_relative_values_are_ignored() {
        let dirs = UserDirs::from_env(&EnvVars::from_pairs([
            ("HOME", "/home/me"),
            ("XDG_STATE_HOME", "relative"),
        ]));
        assert_eq!(
            dirs.state_dir(),
            Some(PathBuf::from("/home/me/.local/state/airlock"))
        );
        assert_eq!(
            dirs.default_server_config(),
            Some(PathBuf::from("/home/me/.config/airlock/airlock.toml"))
        );
        assert_eq!(UserDirs::default().state_dir(), None);
        assert_eq!(dirs.config_base(), Some(PathBuf::from("/home/me/.config")));
        assert_eq!(
            dirs.state_base(),
            Some(PathBuf::from("/home/me/.local/state"))
        );
        let only_xdg = UserDirs::from_env(&EnvVars::from_pairs([("XDG_CONFIG_HOME", "/xc")]));
        assert_eq!(only_xdg.config_base(), Some(PathBuf::from("/xc")));
    }
}
