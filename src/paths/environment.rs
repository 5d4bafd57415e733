//! A snapshot of environment variables.
//!
//! The process environment is read once, at the edge (`EnvVars::from_process`); everything that
//! depends on it takes a [`VarSource`], so tests pass their own.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Something to look environment variables up in.
pub trait VarSource {
    /// The value of `name`, or `None` when it is unset. An empty value counts as unset: that is
    /// how shells and the XDG specification treat `NAME=`.
    fn var(&self, name: &str) -> Option<&str>;

    /// The value of `name` as a path, only when it is absolute (the XDG base directory
    /// specification says relative values are to be ignored; a relative `HOME` is as unusable).
    fn absolute_path(&self, name: &str) -> Option<PathBuf> {
        self.var(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    }
}

impl VarSource for [(String, String)] {
    fn var(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }
}

impl VarSource for Vec<(String, String)> {
    fn var(&self, name: &str) -> Option<&str> {
        self.as_slice().var(name)
    }
}

/// An owned snapshot of environment variables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVars(Vec<(String, String)>);

impl EnvVars {
    /// The process environment now. Variables whose name or value is not UTF-8 are left out
    /// (`std::env::vars` would panic on them): no template can name them, and a server's
    /// environment is built from names the policy lists, which are UTF-8.
    pub fn from_process() -> EnvVars {
        EnvVars(
            std::env::vars_os()
                .filter_map(|(name, value)| {
                    Some((name.into_string().ok()?, value.into_string().ok()?))
                })
                .collect(),
        )
    }

    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> EnvVars {
        EnvVars(
            pairs
                .into_iter()
                .map(|(name, value)| (name.into(), value.into()))
                .collect(),
        )
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    pub fn into_pairs(self) -> Vec<(String, String)> {
        self.0
    }
}

impl VarSource for EnvVars {
    fn var(&self, name: &str) -> Option<&str> {
        self.0.as_slice().var(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_are_unset_and_relative_paths_are_ignored() {
        let env = EnvVars::from_pairs([("A", ""), ("B", "x"), ("XDG_STATE_HOME", "rel/dir")]);
        assert_eq!(env.var("A"), None);
        assert_eq!(env.var("B"), Some("x"));
        assert_eq!(env.var("C"), None);
        assert_eq!(env.absolute_path("XDG_STATE_HOME"), None);
        let env = EnvVars::from_pairs([("XDG_STATE_HOME", "/s")]);
        assert_eq!(
            env.absolute_path("XDG_STATE_HOME"),
            Some(PathBuf::from("/s"))
        );
    }
}
