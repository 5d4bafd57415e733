//! Resolving a server's command to one absolute path, once, without a shell.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("command {0:?} was not found on PATH")]
    NotFound(String),
    #[error("{0} is not an executable file")]
    NotExecutable(PathBuf),
    #[error("command is empty")]
    Empty,
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Resolves `command` like `execvp` would, but once and up front, so what is checked against the
/// allowlist is exactly what is executed. A name with a `/` is taken relative to `cwd`; a bare
/// name is searched on `path_var`. Symlinks are not resolved: the allowlist matches the name the
/// user wrote (`python3`, not `python3.11`), and the kernel follows the link at exec.
pub fn resolve_command(
    command: &str,
    path_var: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, ResolveError> {
    if command.is_empty() {
        return Err(ResolveError::Empty);
    }
    if command.contains('/') {
        let candidate = cwd.join(command);
        let candidate = super::normalize_path(&candidate);
        return if is_executable_file(&candidate) {
            Ok(candidate)
        } else {
            Err(ResolveError::NotExecutable(candidate))
        };
    }
    let path_var = path_var.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable_file(candidate))
        .ok_or_else(|| ResolveError::NotFound(command.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_are_searched_on_path_and_relative_dirs_are_skipped() {
        let resolved = resolve_command(
            "sh",
            Some(OsStr::new("relative:/bin:/usr/bin")),
            Path::new("/"),
        )
        .unwrap();
        assert!(resolved.is_absolute() && resolved.ends_with("sh"));
        assert_eq!(
            resolve_command(
                "no-such-command-airlock",
                Some(OsStr::new("/bin")),
                Path::new("/")
            ),
            Err(ResolveError::NotFound("no-such-command-airlock".into()))
        );
    }

    #[test]
    fn paths_resolve_against_cwd() {
        assert_eq!(
            resolve_command("./sh", None, Path::new("/bin")).unwrap(),
            PathBuf::from("/bin/sh")
        );
        assert!(matches!(
            resolve_command("/etc/passwd", None, Path::new("/")),
            Err(ResolveError::NotExecutable(_))
        ));
    }
}
