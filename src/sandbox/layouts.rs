//! What a program needs to run, for the layouts real users have: a runtime in its own prefix
//! (`~/.pyenv/versions/3.11.7`, `~/.nvm/versions/node/v20`, a venv), a single binary in a shared
//! directory (uv's installer puts `uv` and `uvx` in `~/.local/bin`), a script whose first line
//! names its interpreter (`#!/usr/bin/env node`, a `uv tool`/`pipx` venv's python), Homebrew on
//! Linux (`/home/linuxbrew/.linuxbrew/bin/node` → a keg in `Cellar`).
//!
//! The rule: a dedicated prefix (`<x>/bin/prog` → `<x>`) is granted read-only, all but its
//! runtime-wide config ([`CONFIG_ENTRIES`]: an nvm prefix's `etc/npmrc` holds npm's registry
//! tokens); a *shared* one
//! (the home, `~/.local`, `~/.cargo`, `~/go`, a Homebrew prefix, anything holding airlock's own
//! files) never is: the program file itself is, with the programs its profile says it runs from
//! the same directory (`uvx` runs `uv`). The facts are gathered by [`inspect`]; [`program_grants`]
//! decides, pure.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::grants::{SYSTEM_READ, covers_protected, install_prefix};
use super::{PlanRequest, RuntimeProfile};

/// Facts about the program's runtime, read from the disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeFacts {
    /// The interpreter the program's `#!` line names (through `/usr/bin/env NAME`: found on
    /// `PATH`; a version manager's shim: the version it selects).
    pub interpreter: Option<PathBuf>,
    /// The same with its symlinks resolved (a venv's `python` → the base interpreter).
    pub interpreter_canonical: Option<PathBuf>,
    /// The Homebrew prefix the program lives in (the directory holding `Cellar`).
    pub homebrew_prefix: Option<PathBuf>,
    /// For each runtime directory (an install prefix of the program or its interpreter, a venv,
    /// a venv's base): its entries other than runtime-wide config ([`CONFIG_ENTRIES`]), which are
    /// granted instead of the directory ([`as_grants`]).
    #[serde(default)]
    pub config_free_entries: Vec<(PathBuf, Vec<String>)>,
}

/// Entries of a runtime's directory that hold configuration for everything that runs from it,
/// where credentials are kept: an nvm prefix's `etc/npmrc` is npm's global config (`npm config
/// set -g` puts registry tokens there), a venv's `pip.conf` names its index, password included.
/// A runtime directory is granted as its other entries, as they are at the start: a grant of the
/// whole would show such an entry made while the server runs (`npm config set -g` creates
/// `etc/`; found by a review).
pub const CONFIG_ENTRIES: &[&str] = &["etc", "pip.conf"];

/// `dir` as read grants: its entries other than [`CONFIG_ENTRIES`] as `facts` found them, or
/// itself when they could not be read. Pure.
pub fn as_grants(dir: &Path, facts: &RuntimeFacts) -> Vec<PathBuf> {
    match facts.config_free_entries.iter().find(|(d, _)| d == dir) {
        Some((_, entries)) => entries.iter().map(|entry| dir.join(entry)).collect(),
        None => vec![dir.to_path_buf()],
    }
}

/// Notes in `facts` the entries of each of `dirs` but its runtime-wide config (see
/// [`CONFIG_ENTRIES`]).
pub fn note_config_entries<'a>(facts: &mut RuntimeFacts, dirs: impl IntoIterator<Item = &'a Path>) {
    for dir in dirs {
        if facts.config_free_entries.iter().any(|(d, _)| d == dir) {
            continue;
        }
        if let Some(entries) = entries_besides_config(dir) {
            facts.config_free_entries.push((dir.to_path_buf(), entries));
        }
    }
}

/// Reads the program's `#!` line and looks for a Homebrew prefix around it.
pub fn inspect(
    program: &Path,
    canonical: Option<&Path>,
    env: &[(String, String)],
    cwd: Option<&Path>,
) -> RuntimeFacts {
    use crate::paths::VarSource;
    let real = canonical.unwrap_or(program);
    let path_var = env.var("PATH");
    let interpreter = shebang(real).and_then(|line| {
        let (interp, command) = parse_shebang(&line)?;
        // A `..` in the line derives nothing: resolved lexically it lands elsewhere than the
        // kernel goes when a link is on the way, and resolved physically the link is lost.
        let dotted = |c: std::path::Component<'_>| {
            matches!(
                c,
                std::path::Component::ParentDir | std::path::Component::CurDir
            )
        };
        if interp.components().any(dotted) {
            return None;
        }
        let found = match command {
            Some(name) => path_var?
                .split(':')
                .map(|dir| Path::new(dir).join(&name))
                .find(|candidate| candidate.is_file())?,
            None => interp,
        };
        let cwd = cwd.unwrap_or(Path::new("/"));
        match crate::paths::resolve_shim(&found, env, cwd, path_var, &crate::paths::RealDisk) {
            crate::paths::Shim::Resolved { program, .. } => Some(program),
            _ => Some(found),
        }
    });
    let interpreter_canonical = interpreter
        .as_ref()
        .and_then(|interp| std::fs::canonicalize(interp).ok())
        .filter(|canonical| Some(canonical) != interpreter.as_ref());
    let homebrew_prefix = [Some(program), canonical]
        .into_iter()
        .flatten()
        .flat_map(Path::ancestors)
        .find(|dir| dir.join("Cellar").is_dir() && dir.join("bin").is_dir())
        .map(Path::to_path_buf);
    let mut facts = RuntimeFacts {
        interpreter,
        interpreter_canonical,
        homebrew_prefix,
        config_free_entries: Vec::new(),
    };
    let involved: Vec<PathBuf> = [Some(program), canonical]
        .into_iter()
        .chain([
            facts.interpreter.as_deref(),
            facts.interpreter_canonical.as_deref(),
        ])
        .flatten()
        .filter_map(install_prefix)
        .collect();
    note_config_entries(&mut facts, involved.iter().map(PathBuf::as_path));
    facts
}

/// A program's directory with more entries than this and no runtime-wide config in it (a
/// binary dropped into a large directory) is granted whole: one bind, not hundreds.
const MAX_ENTRIES: usize = 64;

/// The entries of `dir` other than [`CONFIG_ENTRIES`]; `None` when it cannot be read, or holds
/// more than [`MAX_ENTRIES`] and no config. A symlink is kept only when it leads to another
/// entry of `dir` (a venv's `lib64 -> lib`): a grant of its own would be resolved to wherever it
/// points.
fn entries_besides_config(dir: &Path) -> Option<Vec<String>> {
    let real_dir = std::fs::canonicalize(dir).ok()?;
    let stays_inside = |path: &Path| {
        std::fs::canonicalize(path).is_ok_and(|target| {
            target
                .strip_prefix(&real_dir)
                .ok()
                .and_then(|rest| rest.components().next())
                .is_some_and(|first| !CONFIG_ENTRIES.iter().any(|name| first.as_os_str() == *name))
        })
    };
    let all: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    let is_config = |entry: &std::fs::DirEntry| {
        CONFIG_ENTRIES
            .iter()
            .any(|name| entry.file_name() == std::ffi::OsStr::new(name))
    };
    if all.len() > MAX_ENTRIES && !all.iter().any(is_config) {
        return None;
    }
    let mut entries: Vec<String> = all
        .iter()
        .filter(|entry| !is_config(entry))
        .filter(|entry| {
            entry
                .file_type()
                .is_ok_and(|kind| !kind.is_symlink() || stays_inside(&entry.path()))
        })
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    entries.sort();
    Some(entries)
}

/// The first line of a file when it starts with `#!` (at most 256 bytes).
fn shebang(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = crate::paths::open_regular(path)
        .ok()?
        .read(&mut head)
        .ok()?;
    let head = &head[..read];
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    String::from_utf8(line[..end].to_vec()).ok()
}

/// `#!/path/interp ...` → (`/path/interp`, None); `#!/usr/bin/env [-S] [-opts] NAME ...` →
/// (`/usr/bin/env`, `NAME`).
pub fn parse_shebang(line: &str) -> Option<(PathBuf, Option<String>)> {
    let mut words = line.split_whitespace();
    let interp = PathBuf::from(words.next()?);
    if !interp.is_absolute() {
        return None;
    }
    if interp.file_name().is_some_and(|name| name == "env") {
        let command = words.find(|word| !word.starts_with('-') && !word.contains('='))?;
        return Some((interp, Some(command.to_string())));
    }
    Some((interp, None))
}

fn in_system(path: &Path) -> bool {
    SYSTEM_READ.iter().any(|(dir, _)| path.starts_with(dir))
}

/// [`is_shared`] for a prefix found elsewhere than beside the program (a virtualenv's base):
/// with the Homebrew prefix among its own ancestors.
pub(super) fn shared_prefix(prefix: &Path, home: Option<&Path>) -> Option<String> {
    let homebrew = prefix
        .ancestors()
        .find(|dir| dir.join("Cellar").is_dir() && dir.join("bin").is_dir());
    is_shared(prefix, home, homebrew)
}

/// A prefix that holds more than one program's install, or the user's own files: never granted
/// as a whole.
fn is_shared(prefix: &Path, home: Option<&Path>, homebrew: Option<&Path>) -> Option<String> {
    if prefix.parent().is_none() {
        return Some("the root directory".into());
    }
    if let Some(home) = home {
        if home.starts_with(prefix) {
            return Some("the home directory".into());
        }
        for shared in [".local", ".cargo", "go", ".linuxbrew"] {
            if prefix == home.join(shared) {
                return Some(format!(
                    "~/{shared}, shared by many programs and their data"
                ));
            }
        }
    }
    if Some(prefix) == homebrew {
        return Some("the Homebrew prefix (its var/ and etc/ hold other programs' data)".into());
    }
    None
}

/// Homebrew's software, read-only: the kegs (`Cellar`), their stable links (`opt`), its shared
/// libraries and dynamic loader (`lib`), and its TLS certificates. Not `var/` (databases, logs)
/// nor the rest of `etc/`.
const HOMEBREW_RUNTIME: &[&str] = &[
    "Cellar",
    "opt",
    "lib",
    "etc/openssl@3",
    "etc/ca-certificates",
];

/// Read-only grants for the program and its runtime: `(path, reason)`.
/// A grant derived from what is on disk: the path, why, and where it came from.
pub(super) type Derived = (PathBuf, String, Provenance);

/// Where a derived grant came from, for the helper to judge (`FsRule::derived_via`,
/// `FsRule::named_by`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Provenance {
    /// The path as written it was derived through, when that crossed symlinks.
    pub via: Option<PathBuf>,
    /// The file whose content named it (a program's `#!` line).
    pub named_by: Option<PathBuf>,
}

pub(super) fn program_grants(
    request: &PlanRequest,
    profile: Option<&RuntimeProfile>,
    protected: &[(String, PathBuf)],
) -> Vec<Derived> {
    let resolved = &request.resolved;
    let runtime = &resolved.runtime;
    let home = request.dirs.home.as_deref();
    let homebrew = runtime.homebrew_prefix.as_deref();
    // Each with the path as written it was reached through, when that crossed links.
    let mut programs: Vec<(&Path, &str, Option<&Path>)> =
        vec![(&request.program, "the program", None)];
    if let Some(canonical) = &resolved.program_canonical {
        programs.push((
            canonical,
            "the program's link target",
            Some(&request.program),
        ));
    }
    let mut out = Vec::new();
    let mut from_program: Vec<(&Path, &str, Provenance)> = programs
        .into_iter()
        .map(|(path, what, via)| {
            let via = via.map(Path::to_path_buf);
            (
                path,
                what,
                Provenance {
                    via,
                    named_by: None,
                },
            )
        })
        .collect();
    // The interpreter comes from the program's first line: text a server may have rewritten when
    // the program lies in its write grant, so the helper judges it like a link lying there.
    let named_by = Some(
        resolved
            .program_canonical
            .clone()
            .unwrap_or_else(|| request.program.clone()),
    );
    if let Some(interp) = &runtime.interpreter {
        let named_by = named_by.clone();
        let provenance = Provenance {
            via: None,
            named_by,
        };
        from_program.push((interp, "the interpreter its first line names", provenance));
    }
    if let Some(interp) = &runtime.interpreter_canonical {
        let via = runtime.interpreter.clone();
        let provenance = Provenance { via, named_by };
        from_program.push((interp, "that interpreter's link target", provenance));
    }
    for (program, what, provenance) in from_program.into_iter().filter(|(p, _, _)| !in_system(p)) {
        let via = provenance;
        let Some(prefix) = install_prefix(program) else {
            continue;
        };
        let shared = is_shared(&prefix, home, homebrew).or_else(|| {
            covers_protected(&prefix, protected).map(|(what, _)| format!("it holds {what}"))
        });
        let Some(why) = shared else {
            let reason = format!(
                "install prefix of {}, all but runtime-wide config ({})",
                program.display(),
                CONFIG_ENTRIES.join(", ")
            );
            for grant in as_grants(&prefix, runtime) {
                out.push((grant, reason.clone(), via.clone()));
            }
            continue;
        };
        out.push((
            program.to_path_buf(),
            format!(
                "{what} alone: its directory's prefix {} is not granted ({why})",
                prefix.display()
            ),
            via.clone(),
        ));
        let companions = profile.map(|p| p.companions.as_slice()).unwrap_or(&[]);
        for companion in companions {
            if let Some(dir) = program.parent() {
                out.push((
                    dir.join(companion),
                    format!("{companion}, which {} runs", program.display()),
                    via.clone(),
                ));
            }
        }
    }
    if let Some(prefix) = homebrew {
        for part in HOMEBREW_RUNTIME {
            out.push((
                prefix.join(part),
                "Homebrew's kegs and libraries the program links against (read-only)".into(),
                Provenance::default(),
            ));
        }
    }
    out
}

/// Directories to put in front of the server's `PATH`: where its program and interpreter are
/// (what nvm, pyenv and uv's installer do in a login shell), so `#!/usr/bin/env node` finds the
/// runtime the program came with even when the host started airlock with a short `PATH`.
pub(super) fn path_prefix(request: &PlanRequest) -> Vec<PathBuf> {
    let runtime = &request.resolved.runtime;
    let mut out: Vec<PathBuf> = Vec::new();
    for program in [Some(&request.program), runtime.interpreter.as_ref()]
        .into_iter()
        .flatten()
    {
        if let Some(dir) = program.parent()
            && !in_system(dir)
            && !out.iter().any(|have| have == dir)
        {
            out.push(dir.to_path_buf());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_name_an_interpreter_or_a_command_for_env() {
        assert_eq!(
            parse_shebang("/usr/bin/env node"),
            Some((PathBuf::from("/usr/bin/env"), Some("node".into())))
        );
        assert_eq!(
            parse_shebang("/usr/bin/env -S NODE_OPTIONS=x node --flag"),
            Some((PathBuf::from("/usr/bin/env"), Some("node".into())))
        );
        assert_eq!(
            parse_shebang("/home/me/.local/share/uv/tools/x/bin/python3 -I"),
            Some((
                PathBuf::from("/home/me/.local/share/uv/tools/x/bin/python3"),
                None
            ))
        );
        assert_eq!(parse_shebang("python"), None);
    }

    #[test]
    fn shared_prefixes_are_the_home_its_shared_dirs_and_homebrew() {
        let home = Some(Path::new("/home/me"));
        let brew = Some(Path::new("/home/linuxbrew/.linuxbrew"));
        for shared in [
            "/home/me",
            "/home",
            "/home/me/.local",
            "/home/me/.cargo",
            "/home/linuxbrew/.linuxbrew",
        ] {
            assert!(
                is_shared(Path::new(shared), home, brew).is_some(),
                "{shared}"
            );
        }
        for own in [
            "/home/me/.pyenv/versions/3.11.7",
            "/home/me/.nvm/versions/node/v20.1.0",
            "/home/linuxbrew/.linuxbrew/Cellar/node/22.1.0",
            "/opt/node-v20",
        ] {
            assert!(is_shared(Path::new(own), home, brew).is_none(), "{own}");
        }
    }
}
