//! Paths on the server's own command line: `npx -y @modelcontextprotocol/server-filesystem
//! ~/notes` names the directory the user means the server to work on, so it is granted
//! (`sandbox.grant_args`: directories read-write, files read-only; or everything read-only; or
//! nothing). The facts (does it exist, is it a directory, where does it really lead) are gathered
//! by [`inspect`]; the decision is [`argument_rules`], pure.
//!
//! Never granted, whatever `grant_args` says: `/`, the home itself or a directory above it,
//! airlock's own config, state, audit log and policy files, system paths (`/etc`, `/proc`,
//! `/usr`, ...), and a path that only leads to one of those through a symlink.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::grants::{FsRules, covers_protected, inside_protected};
use super::{FsAccess, Shown};
use crate::paths::{expand_tilde, normalize_path};
use crate::policy::{GrantArgs, Origin, SandboxPolicy};

/// An argument of the server that names an existing path (the facts; nothing decided yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgumentPath {
    /// Index in the server's arguments (not counting the program).
    pub index: usize,
    /// The word as written (`~/notes`, `--root=/srv/data`).
    pub written: String,
    /// The path it names: `~` expanded, made absolute against the working directory, `.`/`..`
    /// resolved lexically.
    pub path: PathBuf,
    /// The same with every symlink resolved: what a bind would really expose.
    pub canonical: PathBuf,
    pub is_dir: bool,
}

/// What became of one argument path: granted (with the access), or not (with why).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgumentGrant {
    pub argument: String,
    pub path: PathBuf,
    /// `None`: not granted.
    pub access: Option<FsAccess>,
    /// Where the decision comes from (`grant_args = write [builtin ...]`), or why not.
    pub source: String,
}

/// The path a word names, if it looks like one: `/x`, `~`, `~/x`, `./x`, `../x`, `.`, `..`, or
/// a relative path with a `/` in it; or the value of `--option=PATH`. URLs (`scheme://`) and
/// bare words (`stdio`, `serve`) are not paths. Returns the byte offset of the path in the word.
pub fn path_in_word(word: &str) -> Option<(usize, &str)> {
    let looks_like_path = |text: &str| {
        !text.is_empty()
            && !text.contains("://")
            && (text.starts_with('/')
                || text == "~"
                || text.starts_with("~/")
                || text == "."
                || text == ".."
                || text.starts_with("./")
                || text.starts_with("../")
                || (text.contains('/') && !text.starts_with(['-', '@', '~'])))
    };
    if let Some(option) = word.strip_prefix("--")
        && let Some((_, value)) = option.split_once('=')
    {
        let offset = word.len() - value.len();
        return looks_like_path(value).then_some((offset, value));
    }
    if word.starts_with('-') {
        return None;
    }
    looks_like_path(word).then_some((0, word))
}

/// A bare word (`notes`, `todo.txt`) that names an existing file or directory in the server's
/// working directory: `server-filesystem notes` means the directory as surely as `./notes` does.
/// Options, `~user` forms and URLs are not; a word without an entry of that name stays a word.
fn bare_entry<'w>(word: &'w str, cwd: Option<&Path>) -> Option<&'w str> {
    let bare = !word.is_empty() && !word.starts_with(['-', '~']) && !word.contains("://");
    (bare && std::fs::symlink_metadata(cwd?.join(word)).is_ok()).then_some(word)
}

/// The server's arguments as it receives them: every `~`/`~/x` path word (and `--opt=~/x`)
/// expanded with the user's home (the server's own `HOME` is its private home, so a `~` left in
/// its arguments would name the wrong place).
pub fn expanded_argv(args: &[String], from: usize, home: Option<&Path>) -> Vec<String> {
    args.iter()
        .enumerate()
        .map(|(index, word)| {
            let expanded = (index >= from)
                .then(|| path_in_word(word))
                .flatten()
                .and_then(|(offset, text)| {
                    let path = expand_tilde(text, home)?;
                    Some(format!("{}{}", &word[..offset], path.display()))
                });
            expanded.unwrap_or_else(|| word.clone())
        })
        .collect()
}

/// Looks at the disk for every path word among the server's own arguments (from index `from`).
pub fn inspect(
    args: &[String],
    from: usize,
    cwd: Option<&Path>,
    home: Option<&Path>,
) -> Vec<ArgumentPath> {
    let mut out = Vec::new();
    for (index, word) in args.iter().enumerate().skip(from) {
        let Some(text) = path_in_word(word)
            .map(|(_, text)| text)
            .or_else(|| bare_entry(word, cwd))
        else {
            continue;
        };
        let path = match expand_tilde(text, home) {
            Some(path) => path,
            None if text.starts_with('~') => continue,
            None if Path::new(text).is_absolute() => PathBuf::from(text),
            None => match cwd {
                Some(cwd) => cwd.join(text),
                None => continue,
            },
        };
        let path = normalize_path(&path);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let Ok(canonical) = std::fs::canonicalize(&path) else {
            continue;
        };
        if !(meta.is_dir() || meta.is_file()) {
            continue;
        }
        out.push(ArgumentPath {
            index,
            written: word.clone(),
            path,
            canonical,
            is_dir: meta.is_dir(),
        });
    }
    out
}

/// System paths: an argument there is never granted (`--allow-read` states such a grant
/// explicitly). Covers what every server reads anyway (`/usr`) and what it must never write.
const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/proc", "/sys", "/dev", "/boot",
    "/run", "/var/run", "/var/lib", "/var/log", "/snap",
];

/// Whether `path` is a system path (see [`SYSTEM_PATHS`]).
pub(super) fn is_system_path(path: &Path) -> bool {
    SYSTEM_PATHS.iter().any(|dir| path.starts_with(dir))
}

/// How the user can grant a path themselves: the `--allow-*` flags, unless the org locks
/// `[sandbox]`, which refuses them (then only the org can add it).
fn grant_it_with(flags: &str, lock: Option<&Origin>) -> String {
    match lock {
        None => format!("grant it with {flags}"),
        Some(lock) => format!(
            "the org policy locks [sandbox] ({lock}), so --allow-read and --allow-write are refused: ask whoever manages that file to add the path to its `read` or `write` list"
        ),
    }
}

/// Why a path may not be granted from the command line, if it may not.
fn refusal(
    path: &Path,
    home: Option<&Path>,
    protected: &[(String, PathBuf)],
    lock: Option<&Origin>,
) -> Option<String> {
    if path.parent().is_none() {
        return Some("it is the root directory".into());
    }
    if let Some(home) = home
        && home.starts_with(path)
    {
        return Some(if home == path {
            "it is the home directory itself; name the directory inside it the server needs".into()
        } else {
            format!("it contains the home directory {}", home.display())
        });
    }
    if let Some((what, at)) = covers_protected(path, protected) {
        return Some(format!("it is or contains {what} ({})", at.display()));
    }
    if let Some((what, at)) = inside_protected(path, protected, home) {
        return Some(format!("it is inside {what} ({})", at.display()));
    }
    if let Some(system) = SYSTEM_PATHS.iter().find(|dir| path.starts_with(dir)) {
        return Some(format!(
            "it is a system path (under {system}); {} if the server must read it",
            grant_it_with("--allow-read", lock)
        ));
    }
    None
}

/// The grants of the server's command-line paths, added to `fs`; every decision (granted or
/// not, and why) is returned for `check`, the spawn audit event and the warnings of `run`.
pub(super) fn argument_rules(
    found: &[ArgumentPath],
    sandbox: &SandboxPolicy,
    home: Option<&Path>,
    protected: &[(String, PathBuf)],
    shown: Shown,
    fs: &mut FsRules,
) -> Vec<ArgumentGrant> {
    let grant_args = &sandbox.grant_args;
    let lock = sandbox.locked.as_ref();
    let mut out = Vec::new();
    for argument in found {
        let position = argument.index + 1;
        let decided = |access: Option<FsAccess>, source: String| ArgumentGrant {
            argument: argument.written.clone(),
            path: argument.path.clone(),
            access,
            source,
        };
        if grant_args.value == GrantArgs::None {
            out.push(decided(
                None,
                format!(
                    "grant_args = none [{}]; {}",
                    grant_args.origin,
                    grant_it_with("--allow-read or --allow-write", lock)
                ),
            ));
            continue;
        }
        let why_not = refusal(&argument.path, home, protected, lock).or_else(|| {
            refusal(&argument.canonical, home, protected, lock).map(|why| {
                format!(
                    "it leads to {} through a symlink, and {why}",
                    argument.canonical.display()
                )
            })
        });
        if let Some(why) = why_not {
            out.push(decided(None, format!("not granted: {why}")));
            continue;
        }
        let access = match (grant_args.value, argument.is_dir) {
            (GrantArgs::Write, true) => FsAccess::ReadWrite,
            _ => FsAccess::ReadExec,
        };
        let source = format!(
            "argument {position} of the server ({}), grant_args = {} [{}]",
            argument.written, grant_args.value, grant_args.origin
        );
        // With a constructed root the bind lands where the path really leads and the links on
        // the way are copied into the root, so the server reaches it by the name it was given.
        fs.push(argument.path.clone(), access, &source, shown);
        out.push(decided(Some(access), source));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Layer, Sourced};

    #[test]
    fn path_words_are_paths_and_other_words_are_not() {
        for (word, path) in [
            ("/srv/data", Some("/srv/data")),
            ("~", Some("~")),
            ("~/notes", Some("~/notes")),
            (".", Some(".")),
            ("./x", Some("./x")),
            ("notes/2026", Some("notes/2026")),
            ("--root=/srv", Some("/srv")),
            ("--root=~/x", Some("~/x")),
            ("stdio", None),
            ("--verbose", None),
            ("https://example.com/x", None),
            ("--url=https://example.com/x", None),
            ("-d/tmp", None),
            ("@scope/pkg", None),
            ("~user/x", None),
        ] {
            assert_eq!(path_in_word(word).map(|(_, p)| p), path, "{word}");
        }
    }

    #[test]
    fn tildes_in_the_servers_own_arguments_are_the_users_home() {
        let args: Vec<String> = ["-y", "pkg", "~/notes", "--root=~/x", "~", "~user", "x~"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            expanded_argv(&args, 2, Some(Path::new("/home/me"))),
            [
                "-y",
                "pkg",
                "/home/me/notes",
                "--root=/home/me/x",
                "/home/me",
                "~user",
                "x~"
            ]
        );
        // Before the server's own arguments (the package, launcher options) nothing changes.
        let args = vec!["~/pkg".to_string()];
        assert_eq!(expanded_argv(&args, 1, Some(Path::new("/h"))), ["~/pkg"]);
    }

    fn found(path: &str, canonical: &str, is_dir: bool) -> ArgumentPath {
        ArgumentPath {
            index: 2,
            written: path.to_string(),
            path: PathBuf::from(path),
            canonical: PathBuf::from(canonical),
            is_dir,
        }
    }

    fn grant(value: GrantArgs) -> Sourced<GrantArgs> {
        Sourced {
            value,
            origin: Origin {
                layer: Layer::Builtin,
                file: "default.toml".into(),
                line: None,
            },
        }
    }

    fn decide(
        found_paths: &[ArgumentPath],
        value: GrantArgs,
    ) -> (Vec<ArgumentGrant>, Vec<super::super::FsRule>) {
        decide_under(found_paths, value, None)
    }

    fn decide_under(
        found_paths: &[ArgumentPath],
        value: GrantArgs,
        lock: Option<Origin>,
    ) -> (Vec<ArgumentGrant>, Vec<super::super::FsRule>) {
        let mut sandbox = crate::policy::load(&[], &[]).unwrap().sandbox;
        sandbox.grant_args = grant(value);
        sandbox.locked = lock;
        let protected = vec![
            ("the home directory".to_string(), PathBuf::from("/home/me")),
            (
                "airlock's state directory".to_string(),
                PathBuf::from("/home/me/.local/state/airlock"),
            ),
            (
                "airlock's config directory".to_string(),
                PathBuf::from("/home/me/.config/airlock"),
            ),
        ];
        let mut fs = FsRules::default();
        let out = argument_rules(
            found_paths,
            &sandbox,
            Some(Path::new("/home/me")),
            &protected,
            Shown::Bind,
            &mut fs,
        );
        (out, fs.into_rules())
    }

    #[test]
    fn directories_are_granted_read_write_and_files_read_only() {
        let (out, rules) = decide(
            &[
                found("/home/me/notes", "/home/me/notes", true),
                found("/home/me/todo.txt", "/home/me/todo.txt", false),
            ],
            GrantArgs::Write,
        );
        assert_eq!(out[0].access, Some(FsAccess::ReadWrite));
        assert_eq!(out[1].access, Some(FsAccess::ReadExec));
        assert!(
            out[0].source.contains("argument 3") && out[0].source.contains("grant_args = write")
        );
        assert_eq!(rules.len(), 2);
        let (out, _) = decide(
            &[found("/home/me/notes", "/home/me/notes", true)],
            GrantArgs::Read,
        );
        assert_eq!(out[0].access, Some(FsAccess::ReadExec));
        let (out, rules) = decide(
            &[found("/home/me/notes", "/home/me/notes", true)],
            GrantArgs::None,
        );
        assert_eq!(out[0].access, None);
        assert!(rules.is_empty() && out[0].source.contains("--allow-write"));
    }

    #[test]
    fn the_root_the_home_airlocks_own_and_system_paths_are_never_granted() {
        for (path, canonical, why) in [
            ("/", "/", "root directory"),
            ("/home/me", "/home/me", "home directory itself"),
            ("/home", "/home", "contains the home"),
            (
                "/home/me/.local/state/airlock/servers",
                "/home/me/.local/state/airlock/servers",
                "inside airlock's state",
            ),
            ("/home/me/.config", "/home/me/.config", "airlock's config"),
            ("/etc", "/etc", "system path"),
            ("/etc/shadow", "/etc/shadow", "system path"),
            ("/home/me/link", "/home/me", "through a symlink"),
        ] {
            let (out, rules) = decide(&[found(path, canonical, true)], GrantArgs::Write);
            assert_eq!(out[0].access, None, "{path}");
            assert!(out[0].source.contains(why), "{path}: {}", out[0].source);
            assert!(rules.is_empty(), "{path}");
        }
    }

    #[test]
    fn a_symlinked_argument_is_granted_by_the_name_it_was_given() {
        let (out, rules) = decide(
            &[found("/home/me/notes", "/data/notes", true)],
            GrantArgs::Write,
        );
        assert_eq!(out[0].access, Some(FsAccess::ReadWrite));
        let paths: Vec<&Path> = rules.iter().map(|r| r.path.as_path()).collect();
        assert_eq!(paths, [Path::new("/home/me/notes")]);
    }

    #[test]
    fn under_an_org_lock_the_fix_is_the_org_not_the_refused_flags() {
        let lock = Origin {
            layer: Layer::Org,
            file: "/etc/airlock/policy.toml".into(),
            line: Some(2),
        };
        let notes = found("/home/me/notes", "/home/me/notes", true);
        let etc = found("/etc/ssl", "/etc/ssl", true);
        let (out, _) = decide(&[notes.clone(), etc.clone()], GrantArgs::None);
        assert!(
            out[0]
                .source
                .ends_with("grant it with --allow-read or --allow-write")
        );
        let (out, _) = decide(std::slice::from_ref(&etc), GrantArgs::Write);
        assert!(
            out[0].source.contains("grant it with --allow-read if"),
            "{}",
            out[0].source
        );
        for value in [GrantArgs::None, GrantArgs::Write] {
            let (out, rules) =
                decide_under(&[notes.clone(), etc.clone()], value, Some(lock.clone()));
            let told: Vec<&str> = out.iter().map(|grant| grant.source.as_str()).collect();
            assert_eq!(rules.is_empty(), value == GrantArgs::None, "{told:?}");
            for refused in out.iter().filter(|grant| grant.access.is_none()) {
                assert!(
                    !refused.source.contains("grant it with")
                        && refused
                            .source
                            .contains("locks [sandbox] (org /etc/airlock/policy.toml:2)"),
                    "{told:?}"
                );
            }
        }
    }

    #[test]
    fn a_bare_word_naming_an_entry_of_the_working_directory_is_a_path() {
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir(cwd.path().join("notes")).unwrap();
        std::fs::create_dir(cwd.path().join("pkg")).unwrap();
        std::fs::write(cwd.path().join("todo.txt"), "x").unwrap();
        let args: Vec<String> = [
            "-y", "pkg", "notes", "stdio", "todo.txt", "--notes", "~notes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let found = inspect(&args, 2, Some(cwd.path()), None);
        let named: Vec<(&str, &Path, bool)> = found
            .iter()
            .map(|f| (f.written.as_str(), f.path.as_path(), f.is_dir))
            .collect();
        assert_eq!(
            named,
            [
                ("notes", cwd.path().join("notes").as_path(), true),
                ("todo.txt", cwd.path().join("todo.txt").as_path(), false),
            ]
        );
        // Without a working directory a bare word names nothing.
        assert!(inspect(&args, 2, None, None).is_empty());
        // The never-granted list still holds for a bare word: `etc` from `/` is `/etc`.
        let found = inspect(&["etc".to_string()], 0, Some(Path::new("/")), None);
        assert_eq!(found[0].path, Path::new("/etc"));
        let (out, rules) = decide(&found, GrantArgs::Write);
        assert!(out[0].access.is_none() && rules.is_empty(), "{out:?}");
        assert!(out[0].source.contains("system path"), "{out:?}");
    }
}
