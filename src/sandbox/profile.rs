//! Runtime profiles (`policies/runtimes/*.toml`): what a runtime needs beyond the system dirs,
//! as data. Compiled in with `include_str!`.

use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeProfile {
    pub name: String,
    /// Command basenames; a trailing `*` matches a prefix (`python3.*`).
    pub commands: Vec<String>,
    /// Path templates granted read+execute (missing paths and unset variables are skipped).
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    /// Environment set for the server (templates), in file order.
    #[serde(default)]
    pub env: toml::Table,
    /// Extra environment when the policy's network is `none` (nothing can be downloaded).
    #[serde(default)]
    pub env_offline: toml::Table,
    /// Extra environment when the policy allows egress (`host` or TCP ports).
    #[serde(default)]
    pub env_online: toml::Table,
    /// Package caches the server sees through a private copy-on-write overlay.
    #[serde(default)]
    pub cache_overlays: Vec<CacheOverlay>,
    /// Programs the command runs from its own directory (`uvx` runs the `uv` beside it): granted
    /// with it when only the program itself is granted (a shared directory like `~/.local/bin`).
    #[serde(default)]
    pub companions: Vec<String>,
}

/// A runtime cache shown to the server as an overlayfs: the user's real cache is the read-only
/// lower layer, the server's writes land in an upper layer on its scratch disk. The real cache is
/// never written, so a server cannot plant code the user later runs unconfined.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheOverlay {
    /// Names the server's layer: `layers/<name>/{upper,work}` on its scratch disk.
    pub name: String,
    /// Template of the real cache (the lower layer).
    pub lower: String,
    /// Template of the mount point; must lie inside `${private_home}`. With `mount_at_real_path`,
    /// the mount point when the real path cannot be used (no mount namespace).
    pub at: String,
    /// Mount the overlay over the real cache path itself (`lower`), in the server's own root: for
    /// runtimes whose cache refers to itself by absolute path (uv's tool environments link into
    /// `archive-v0` by the path the cache had when they were built).
    #[serde(default)]
    pub mount_at_real_path: bool,
    /// Environment variable pointed at the mount point.
    #[serde(default)]
    pub env: Option<String>,
}

impl RuntimeProfile {
    pub fn env_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        table_pairs(&self.env)
    }

    /// The network-dependent environment: `env_offline` or `env_online`.
    pub fn network_env_pairs(&self, offline: bool) -> impl Iterator<Item = (&str, &str)> {
        table_pairs(if offline {
            &self.env_offline
        } else {
            &self.env_online
        })
    }

    fn matches(&self, basename: &str) -> bool {
        self.commands
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => basename.starts_with(prefix),
                None => pattern == basename,
            })
    }
}

fn table_pairs(table: &toml::Table) -> impl Iterator<Item = (&str, &str)> {
    table
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
}

const SOURCES: &[(&str, &str)] = &[
    (
        "node.toml",
        include_str!("../../policies/runtimes/node.toml"),
    ),
    (
        "python.toml",
        include_str!("../../policies/runtimes/python.toml"),
    ),
    ("uv.toml", include_str!("../../policies/runtimes/uv.toml")),
    (
        "deno.toml",
        include_str!("../../policies/runtimes/deno.toml"),
    ),
    ("bun.toml", include_str!("../../policies/runtimes/bun.toml")),
];

/// Every built-in profile. A profile that fails to parse is a build defect caught by the unit
/// test below; at run time it is skipped (and logged) rather than crashing airlock.
pub fn all() -> &'static [RuntimeProfile] {
    static PROFILES: OnceLock<Vec<RuntimeProfile>> = OnceLock::new();
    PROFILES.get_or_init(|| {
        SOURCES
            .iter()
            .filter_map(
                |(file, text)| match toml::from_str::<RuntimeProfile>(text) {
                    Ok(profile) => Some(profile),
                    Err(err) => {
                        tracing::error!("built-in runtime profile {file} is invalid: {err}");
                        None
                    }
                },
            )
            .collect()
    })
}

/// The profile for a program: by its basename, else by its canonical target's basename
/// (`/usr/bin/nodejs` -> `node`, `venv/bin/python` -> `python3.11`).
pub fn for_program(program: &Path, canonical: Option<&Path>) -> Option<&'static RuntimeProfile> {
    let basename = |path: &Path| {
        path.file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
    };
    let names: Vec<String> = [Some(program), canonical]
        .into_iter()
        .flatten()
        .filter_map(basename)
        .collect();
    names
        .iter()
        .find_map(|name| all().iter().find(|profile| profile.matches(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_parses() {
        assert_eq!(all().len(), SOURCES.len());
    }

    #[test]
    fn node_and_uv_caches_are_overlays_not_grants() {
        for (name, var) in [("node", "npm_config_cache"), ("uv", "UV_CACHE_DIR")] {
            let profile = all().iter().find(|p| p.name == name).unwrap();
            let overlay = profile.cache_overlays.first().unwrap();
            assert_eq!(overlay.env.as_deref(), Some(var));
            assert!(overlay.at.starts_with("${private_home}/"), "{overlay:?}");
            // uv's cached environments name the cache by its absolute path (see uv.toml).
            assert_eq!(overlay.mount_at_real_path, name == "uv", "{overlay:?}");
            // The real cache is reached only through the overlay, never by a landlock grant.
            assert!(!profile.read.iter().any(|r| r.contains(var)), "{profile:?}");
            assert!(!profile.env.contains_key(var), "{profile:?}");
        }
    }

    #[test]
    fn profiles_match_by_basename_or_target() {
        assert_eq!(
            for_program(Path::new("/usr/bin/npx"), None).map(|p| p.name.as_str()),
            Some("node")
        );
        assert_eq!(
            for_program(Path::new("/v/bin/python"), None).map(|p| p.name.as_str()),
            Some("python")
        );
        assert_eq!(
            for_program(Path::new("/x/bin/python3.11"), None).map(|p| p.name.as_str()),
            Some("python")
        );
        assert_eq!(
            for_program(Path::new("/x/uvx"), None).map(|p| p.name.as_str()),
            Some("uv")
        );
        assert_eq!(for_program(Path::new("/x/server"), None), None);
        let via_target = for_program(Path::new("/x/srv"), Some(Path::new("/usr/bin/deno")));
        assert_eq!(via_target.map(|p| p.name.as_str()), Some("deno"));
    }
}
