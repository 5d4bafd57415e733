//! Version-manager shims (pyenv, rbenv, nodenv): `<root>/shims/python3` is a shell script that
//! runs the manager, which picks a version and `exec`s `<root>/versions/<v>/bin/python3`. Inside a
//! sandbox the manager itself (its libexec scripts, its plugins, the version files up the working
//! directory) is not there, so airlock does the manager's choice once, before launching, and
//! starts the real interpreter: the server is granted exactly that version's install, not the
//! manager's whole tree.

use std::path::{Path, PathBuf};

use super::VarSource;

/// The facts about the disk that a shim's resolution reads (a fake in the tests).
pub trait Disk {
    fn is_dir(&self, path: &Path) -> bool;
    fn is_file(&self, path: &Path) -> bool;
    fn read(&self, path: &Path) -> Option<String>;
    /// Names of the entries of a directory.
    fn list(&self, path: &Path) -> Vec<String>;
}

/// The real file system.
pub struct RealDisk;

impl Disk for RealDisk {
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
    fn read(&self, path: &Path) -> Option<String> {
        // Version files sit in project directories a server may write.
        super::read_small_text(path, 64 * 1024).ok()
    }
    fn list(&self, path: &Path) -> Vec<String> {
        std::fs::read_dir(path)
            .map(|dir| {
                dir.flatten()
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A version manager that works by shims.
struct Manager {
    tool: &'static str,
    /// The variable that selects a version for one command (`PYENV_VERSION`).
    version_var: &'static str,
    /// The per-project version file looked for from the working directory up.
    version_file: &'static str,
}

const MANAGERS: &[Manager] = &[
    Manager {
        tool: "pyenv",
        version_var: "PYENV_VERSION",
        version_file: ".python-version",
    },
    Manager {
        tool: "rbenv",
        version_var: "RBENV_VERSION",
        version_file: ".ruby-version",
    },
    Manager {
        tool: "nodenv",
        version_var: "NODENV_VERSION",
        version_file: ".node-version",
    },
];

/// What a command turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shim {
    /// Not a shim: launch it as it is.
    NotAShim,
    /// A shim, and the program it runs for this working directory and environment.
    Resolved {
        tool: &'static str,
        program: PathBuf,
        /// Where the version came from (`PYENV_VERSION`, a file, or the default).
        chosen_by: String,
    },
    /// A shim whose choice cannot be made (the version is not installed, or it is the system's and
    /// the system has no such command): the reason and the fix.
    Unresolved { reason: String, fix: String },
}

/// Resolves `program` if it is a version manager's shim. `path_var` is the `PATH` the server
/// gets (for a `system` version), `cwd` its working directory.
pub fn resolve_shim(
    program: &Path,
    env: &(impl VarSource + ?Sized),
    cwd: &Path,
    path_var: Option<&str>,
    disk: &dyn Disk,
) -> Shim {
    let (Some(shims), Some(command)) = (program.parent(), program.file_name()) else {
        return Shim::NotAShim;
    };
    let Some(root) = shims.parent().filter(|_| shims.ends_with("shims")) else {
        return Shim::NotAShim;
    };
    let Some(manager) = MANAGERS.iter().find(|manager| {
        disk.is_dir(&root.join("versions"))
            && (disk.is_file(&root.join("libexec").join(manager.tool))
                || disk.is_file(&root.join("bin").join(manager.tool)))
    }) else {
        return Shim::NotAShim;
    };
    let (versions, chosen_by) = selected_versions(manager, root, env, cwd, disk);
    for version in &versions {
        if version == "system" {
            if let Some(found) = on_path_except(command, path_var, shims, disk) {
                return Shim::Resolved {
                    tool: manager.tool,
                    program: found,
                    chosen_by,
                };
            }
            continue;
        }
        let Some(dir) = installed_version(root, version, disk) else {
            continue;
        };
        let candidate = root.join("versions").join(dir).join("bin").join(command);
        if disk.is_file(&candidate) {
            return Shim::Resolved {
                tool: manager.tool,
                program: candidate,
                chosen_by,
            };
        }
    }
    let command = command.to_string_lossy();
    let wanted = versions.join(" ");
    Shim::Unresolved {
        reason: format!(
            "{program} is a {tool} shim; {tool} selects version {wanted} ({chosen_by}), which does not provide {command}",
            program = program.display(),
            tool = manager.tool,
        ),
        fix: format!(
            "`{tool} install {first}` (or select an installed version with `{tool} local`), or start the server with the interpreter's own path (`{tool} which {command}` prints it)",
            tool = manager.tool,
            first = versions.first().map(String::as_str).unwrap_or("VERSION"),
        ),
    }
}

/// The versions a manager selects, and where that choice came from.
fn selected_versions(
    manager: &Manager,
    root: &Path,
    env: &(impl VarSource + ?Sized),
    cwd: &Path,
    disk: &dyn Disk,
) -> (Vec<String>, String) {
    if let Some(value) = env
        .var(manager.version_var)
        .filter(|v| !v.trim().is_empty())
    {
        let versions = value.split(':').map(|v| v.trim().to_string()).collect();
        return (versions, manager.version_var.to_string());
    }
    for dir in cwd.ancestors() {
        let file = dir.join(manager.version_file);
        if let Some(text) = disk.read(&file) {
            let versions = version_words(&text);
            if !versions.is_empty() {
                return (versions, file.display().to_string());
            }
        }
    }
    let global = root.join("version");
    if let Some(text) = disk.read(&global) {
        let versions = version_words(&text);
        if !versions.is_empty() {
            return (versions, global.display().to_string());
        }
    }
    (
        vec!["system".to_string()],
        format!("no version file: {}'s default", manager.tool),
    )
}

/// The versions a version file names: the first word of each line, comments skipped. A version
/// file lies in a project a server may write: a word that is a path (`/x`, `a/b`, `..`, `.x`)
/// would pick any directory holding the command, so it is no version.
fn version_words(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| !word.starts_with(['#', '.']) && !word.contains(['/', '\\']))
        .map(str::to_string)
        .collect()
}

/// The installed directory for a version: itself, or the newest installed `version.*` (pyenv
/// accepts a prefix such as `3.11`).
fn installed_version(root: &Path, version: &str, disk: &dyn Disk) -> Option<String> {
    let versions = root.join("versions");
    if disk.is_dir(&versions.join(version)) {
        return Some(version.to_string());
    }
    let prefix = format!("{version}.");
    disk.list(&versions)
        .into_iter()
        .filter(|name| {
            name.strip_prefix(&prefix)
                .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
        })
        .max_by_key(|name| version_key(name))
}

fn version_key(name: &str) -> Vec<u64> {
    name.split('.')
        .filter_map(|part| part.parse().ok())
        .collect()
}

/// `command` on `PATH`, skipping the shims directory (a `system` version).
fn on_path_except(
    command: &std::ffi::OsStr,
    path_var: Option<&str>,
    shims: &Path,
    disk: &dyn Disk,
) -> Option<PathBuf> {
    path_var?
        .split(':')
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute() && dir != shims)
        .map(|dir| dir.join(command))
        .find(|candidate| disk.is_file(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::EnvVars;
    use std::collections::BTreeMap;

    #[test]
    fn a_version_file_names_versions_never_paths() {
        let text =
            "/home/linuxbrew/.linuxbrew\n3.11 # comment\n.hidden\na/b\n../x\n# note\nsystem\n";
        assert_eq!(version_words(text), ["3.11", "system"]);
    }

    #[derive(Default)]
    struct Fake {
        files: BTreeMap<PathBuf, String>,
        dirs: Vec<PathBuf>,
    }

    impl Fake {
        fn file(mut self, path: &str, text: &str) -> Self {
            self.files.insert(PathBuf::from(path), text.to_string());
            self
        }
        fn dir(mut self, path: &str) -> Self {
            self.dirs.push(PathBuf::from(path));
            self
        }
    }

    impl Disk for Fake {
        fn is_dir(&self, path: &Path) -> bool {
            self.dirs.iter().any(|dir| dir == path)
        }
        fn is_file(&self, path: &Path) -> bool {
            self.files.contains_key(path)
        }
        fn read(&self, path: &Path) -> Option<String> {
            self.files.get(path).cloned()
        }
        fn list(&self, path: &Path) -> Vec<String> {
            self.dirs
                .iter()
                .filter(|dir| dir.parent() == Some(path))
                .filter_map(|dir| dir.file_name()?.to_str().map(str::to_string))
                .collect()
        }
    }

    fn pyenv() -> Fake {
        Fake::default()
            .file("/root/.pyenv/libexec/pyenv", "")
            .file("/root/.pyenv/shims/python3", "#!/usr/bin/env bash")
            .dir("/root/.pyenv/versions")
            .dir("/root/.pyenv/versions/3.11.7")
            .dir("/root/.pyenv/versions/3.12.1")
            .file("/root/.pyenv/versions/3.11.7/bin/python3", "")
            .file("/root/.pyenv/versions/3.12.1/bin/python3", "")
            .file("/root/.pyenv/version", "3.11.7\n")
            .file("/usr/bin/python3", "")
    }

    fn resolve(disk: &Fake, env: &[(&str, &str)], cwd: &str) -> Shim {
        resolve_shim(
            Path::new("/root/.pyenv/shims/python3"),
            &EnvVars::from_pairs(env.iter().copied()),
            Path::new(cwd),
            Some("/root/.pyenv/shims:/usr/bin"),
            disk,
        )
    }

    fn program(shim: Shim) -> PathBuf {
        match shim {
            Shim::Resolved { program, .. } => program,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_global_version_file_the_project_file_and_the_variable_choose_in_that_order() {
        let disk = pyenv();
        assert_eq!(
            program(resolve(&disk, &[], "/work")),
            Path::new("/root/.pyenv/versions/3.11.7/bin/python3")
        );
        let disk = disk.file("/work/.python-version", "3.12.1\n");
        assert_eq!(
            program(resolve(&disk, &[], "/work/sub")),
            Path::new("/root/.pyenv/versions/3.12.1/bin/python3")
        );
        assert_eq!(
            program(resolve(&disk, &[("PYENV_VERSION", "system")], "/work")),
            Path::new("/usr/bin/python3")
        );
        // A prefix picks the newest installed match, as pyenv does.
        let disk = disk.file("/work/.python-version", "3.11\n");
        assert_eq!(
            program(resolve(&disk, &[], "/work")),
            Path::new("/root/.pyenv/versions/3.11.7/bin/python3")
        );
    }

    #[test]
    fn a_version_that_is_not_installed_is_refused_with_the_install_command() {
        let disk = pyenv().file("/work/.python-version", "3.9.1\n");
        match resolve(&disk, &[], "/work") {
            Shim::Unresolved { reason, fix } => {
                assert!(reason.contains("/work/.python-version"), "{reason}");
                assert!(fix.contains("pyenv install 3.9.1"), "{fix}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn other_programs_are_not_shims() {
        let disk = pyenv();
        let not = |path: &str| {
            resolve_shim(
                Path::new(path),
                &EnvVars::from_pairs(Vec::<(&str, &str)>::new()),
                Path::new("/"),
                None,
                &disk,
            )
        };
        assert_eq!(not("/usr/bin/python3"), Shim::NotAShim);
        assert_eq!(not("/opt/shims/python3"), Shim::NotAShim);
        assert_eq!(
            not("/root/.pyenv/versions/3.11.7/bin/python3"),
            Shim::NotAShim
        );
    }
}
