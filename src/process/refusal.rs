//! The words of a refused launch: what is wrong, and a fix that applies to this very case (pure;
//! the facts about the disk are gathered by [`super::launch`]).

use std::path::{Path, PathBuf};

use crate::paths::ResolveError;

/// Where the server's command was written: the fix says where to change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclaredIn {
    /// `airlock run CMD ...` (or `airlock check CMD ...`).
    CommandLine,
    /// A server config file (`airlock.toml`, an `mcpServers` JSON file).
    Config(String),
}

impl DeclaredIn {
    /// How the user opts a command out of the allowlist here.
    pub fn trust_fix(&self, server: &str) -> String {
        match self {
            DeclaredIn::CommandLine => {
                "pass `--trust` (`airlock run --trust -- CMD ...`)".to_string()
            }
            DeclaredIn::Config(file) if is_json(file) => format!(
                "in {file}, add \"--trust\" before \"--\" in the args of \"{server}\" (the `airlock run` line `airlock install` wrote), or, for `airlock serve --config {file}`, \"trust\": true to the entry"
            ),
            DeclaredIn::Config(file) => {
                format!("add `trust = true` to [servers.{server}] in {file}")
            }
        }
    }

    /// How the user names another program here.
    fn write_command(&self, server: &str, path: &str) -> String {
        match self {
            DeclaredIn::CommandLine => format!("start it as `airlock run -- {path} ...`"),
            DeclaredIn::Config(file) => {
                format!("write `command = \"{path}\"` in [servers.{server}] of {file}")
            }
        }
    }
}

/// A host's `mcpServers` file rather than an airlock TOML config.
fn is_json(file: &str) -> bool {
    file.ends_with(".json") || file.ends_with(".jsonc")
}

/// What the disk says about a command path that did not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Missing,
    Directory,
    /// A file without an execute bit.
    NotExecutable,
    /// Something else (a socket, a dangling link the kernel cannot follow, no permission).
    Unusable,
}

impl PathKind {
    pub fn of(path: &Path) -> PathKind {
        match std::fs::metadata(path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => PathKind::Missing,
            Err(_) => PathKind::Unusable,
            Ok(meta) if meta.is_dir() => PathKind::Directory,
            Ok(meta) if meta.is_file() => PathKind::NotExecutable,
            Ok(_) => PathKind::Unusable,
        }
    }
}

/// Directories where installers put programs that are often missing from the `PATH` an MCP host
/// starts airlock with (uv's and pipx's `~/.local/bin`, cargo, bun, deno, Homebrew on Linux).
pub fn usual_bin_dirs(home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = home {
        for dir in [
            ".local/bin",
            "bin",
            ".cargo/bin",
            ".bun/bin",
            ".deno/bin",
            ".linuxbrew/bin",
            ".volta/bin",
        ] {
            dirs.push(home.join(dir));
        }
    }
    dirs.push(PathBuf::from("/home/linuxbrew/.linuxbrew/bin"));
    dirs.push(PathBuf::from("/usr/local/bin"));
    dirs
}

/// The refusal for a command that does not resolve. `elsewhere`: the same name found outside
/// airlock's `PATH` (in [`usual_bin_dirs`]); `kind`: what is at a path that is not executable.
pub fn unresolved_command(
    server: &str,
    err: &ResolveError,
    declared: &DeclaredIn,
    path_var: &str,
    elsewhere: &[PathBuf],
    kind: PathKind,
) -> String {
    match err {
        ResolveError::Empty => format!(
            "server `{server}` has an empty command. Fix: {}",
            declared.write_command(server, "PROGRAM")
        ),
        ResolveError::NotFound(name) => match elsewhere.first() {
            Some(found) => format!(
                "server `{server}`: command {name:?} is not on airlock's PATH ({path_var}), but {} exists. Fix: {}, or add {} to the PATH airlock is started with",
                found.display(),
                declared.write_command(server, &found.to_string_lossy()),
                found.parent().unwrap_or(found).display()
            ),
            None => format!(
                "server `{server}`: command {name:?} was not found on PATH ({path_var}). Fix: install it, or {}",
                declared.write_command(server, "/absolute/path/to/it")
            ),
        },
        ResolveError::NotExecutable(path) => {
            let shown = path.display();
            match kind {
                PathKind::Missing => format!(
                    "server `{server}`: {shown} does not exist. Fix: correct the path ({})",
                    declared.write_command(server, "/absolute/path/to/program")
                ),
                PathKind::Directory => format!(
                    "server `{server}`: {shown} is a directory, not a program. Fix: name the program inside it"
                ),
                PathKind::NotExecutable => format!(
                    "server `{server}`: {shown} is not executable. Fix: `chmod +x {shown}`, or start it through its interpreter (e.g. `node {shown}` or `python3 {shown}`)"
                ),
                PathKind::Unusable => format!(
                    "server `{server}`: {shown} cannot be executed by airlock's user. Fix: check that the file and every directory leading to it are readable"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(
        err: ResolveError,
        declared: DeclaredIn,
        elsewhere: &[&str],
        kind: PathKind,
    ) -> String {
        let elsewhere: Vec<PathBuf> = elsewhere.iter().map(PathBuf::from).collect();
        unresolved_command("fs", &err, &declared, "/usr/bin:/bin", &elsewhere, kind)
    }

    #[test]
    fn an_absolute_path_is_never_told_to_become_absolute() {
        let config = DeclaredIn::Config("airlock.toml".into());
        for kind in [
            PathKind::Missing,
            PathKind::Directory,
            PathKind::NotExecutable,
            PathKind::Unusable,
        ] {
            let text = refusal(
                ResolveError::NotExecutable("/opt/srv".into()),
                config.clone(),
                &[],
                kind,
            );
            assert!(!text.contains("give its absolute path"), "{text}");
            assert!(
                text.contains("/opt/srv") && text.contains("Fix: "),
                "{text}"
            );
        }
        let text = refusal(
            ResolveError::NotExecutable("/opt/srv".into()),
            config,
            &[],
            PathKind::NotExecutable,
        );
        assert!(text.contains("chmod +x /opt/srv"), "{text}");
    }

    #[test]
    fn a_name_off_path_points_at_the_copy_that_exists() {
        let text = refusal(
            ResolveError::NotFound("uvx".into()),
            DeclaredIn::CommandLine,
            &["/home/me/.local/bin/uvx"],
            PathKind::Missing,
        );
        assert!(
            text.contains("airlock run -- /home/me/.local/bin/uvx")
                && text.contains("add /home/me/.local/bin to the PATH"),
            "{text}"
        );
        let text = refusal(
            ResolveError::NotFound("uvx".into()),
            DeclaredIn::Config("airlock.toml".into()),
            &[],
            PathKind::Missing,
        );
        assert!(
            text.contains("install it")
                && text.contains("[servers.fs] of airlock.toml")
                && text.contains("/usr/bin:/bin"),
            "{text}"
        );
    }

    #[test]
    fn trust_is_a_flag_on_the_command_line_and_a_key_in_a_config() {
        let flag = DeclaredIn::CommandLine.trust_fix("fs");
        assert!(
            flag.contains("--trust") && !flag.contains("trust = true"),
            "{flag}"
        );
        let key = DeclaredIn::Config("airlock.toml".into()).trust_fix("fs");
        assert_eq!(key, "add `trust = true` to [servers.fs] in airlock.toml");
        let json = DeclaredIn::Config("/home/me/.claude.json".into()).trust_fix("fs");
        assert!(
            json.contains("\"--trust\" before \"--\"") && !json.contains("[servers."),
            "{json}"
        );
    }
}
