//! How a path argument resolves through the symlinks this host has along it, as the kernel will
//! resolve it for a local server (whose root binds what it is granted at the same places).
//!
//! The lexical reading alone puts `granted/link/b` outside a `secret` directory `link` points
//! into, and reads `granted/up/../c` as `granted/c` where the kernel takes the `..` after the
//! link `up`. So a path is also walked component by component: each link's target replaces it
//! (a dangling one too: the server would create its target), each `..` is taken after the link
//! before it, and the part that does not exist yet is appended as written.
//!
//! Bounded, and only where the server can look: lookups happen only on the way to and under
//! the server's own paths (`roots`: its grants), never under `/proc` or `/dev`, at most
//! [`MAX_LINKS`] links and [`MAX_STEPS`] components a path. A path past those bounds cannot be
//! read this way, and the caller fails closed. A link made after the decision is not seen: the
//! grants, not argument rules, bound what a server can reach.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::paths::normalize_path;

/// Links followed in one path, as the kernel's own limit.
pub const MAX_LINKS: usize = 40;
/// Components walked in one path, the links' targets included.
pub const MAX_STEPS: usize = 256;

/// How a path reads through this host's links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linked {
    /// Where the kernel will resolve it (which may be the lexical reading).
    At(PathBuf),
    /// Past the bounds (too many links or components): it cannot be read this way.
    TooFar,
}

/// `absolute` (not yet normalised) through the links along it, looking only on the way to and
/// under `roots`. Outside them the walk stops and the rest is taken as written: the server's
/// root shows nothing there, so no link there can take it anywhere.
pub fn through_links(absolute: &Path, roots: &[PathBuf]) -> Linked {
    let mut pending: VecDeque<OsString> = absolute
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    let mut real = PathBuf::from("/");
    let (mut links, mut steps) = (0, 0);
    while let Some(name) = pending.pop_front() {
        steps += 1;
        if steps > MAX_STEPS {
            return Linked::TooFar;
        }
        if name == ".." {
            real.pop();
            continue;
        }
        let next = real.join(&name);
        if !may_look(&next, roots) {
            pending.push_front(name);
            return Linked::At(rest_as_written(real, pending));
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return Linked::TooFar;
                }
                let Ok(target) = std::fs::read_link(&next) else {
                    return Linked::At(rest_as_written(next, pending));
                };
                if target.is_absolute() {
                    real = PathBuf::from("/");
                }
                for component in target.components().rev() {
                    match component {
                        Component::Normal(part) => pending.push_front(part.to_os_string()),
                        Component::ParentDir => pending.push_front(OsString::from("..")),
                        _ => {}
                    }
                }
            }
            Ok(_) => real = next,
            // Not there (yet), or not a directory on the way: the rest as written.
            Err(_) => {
                pending.push_front(name);
                return Linked::At(rest_as_written(real, pending));
            }
        }
    }
    Linked::At(real)
}

/// `real` with the components not looked up after it, normalised.
fn rest_as_written(real: PathBuf, rest: VecDeque<OsString>) -> PathBuf {
    let mut joined = real;
    joined.extend(rest);
    normalize_path(&joined)
}

/// Whether the walk may look at `path`: it is on the way to one of `roots` or under one, and
/// not in `/proc` or `/dev` (the server has its own there, and airlock's would answer instead).
fn may_look(path: &Path, roots: &[PathBuf]) -> bool {
    if path.starts_with("/proc") || path.starts_with("/dev") {
        return false;
    }
    roots
        .iter()
        .any(|root| path.starts_with(root) || root.starts_with(path))
}

/// Whether a reading names what a process has open (its `cwd`, `root`, `fd/N`, its own
/// `/proc` entry, `/dev/fd`, `/dev/stdin`): the server's kernel reads those for the server, which
/// the gate cannot, so such a reading fails closed.
pub fn names_a_process_handle(path: &str) -> bool {
    let path = Path::new(path);
    let mut components = path.components().skip(1);
    match (
        components.next().and_then(|c| c.as_os_str().to_str()),
        components.next().and_then(|c| c.as_os_str().to_str()),
    ) {
        (Some("proc"), Some(entry)) => {
            entry == "self" || entry == "thread-self" || entry.bytes().all(|b| b.is_ascii_digit())
        }
        (Some("dev"), Some(entry)) => matches!(entry, "fd" | "stdin" | "stdout" | "stderr"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("secret/sub")).unwrap();
        std::fs::create_dir_all(root.join("public/d")).unwrap();
        std::os::unix::fs::symlink("secret", root.join("link")).unwrap();
        std::os::unix::fs::symlink("secret/sub", root.join("up")).unwrap();
        std::os::unix::fs::symlink("../secret/newfile", root.join("public/dangle")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        (dir, root)
    }

    #[test]
    fn a_path_is_read_through_the_links_along_it_and_the_rest_as_written() {
        let (_dir, root) = tree();
        let roots = [root.clone()];
        let read = |rest: &str| match through_links(&root.join(rest), &roots) {
            Linked::At(path) => path,
            Linked::TooFar => panic!("{rest}: too far"),
        };
        assert_eq!(read("link/b"), root.join("secret/b"));
        assert_eq!(read("up/../c"), root.join("secret/c"));
        assert_eq!(read("up/../../x/./y"), root.join("x/y"));
        assert_eq!(
            read("new/../z"),
            root.join("z"),
            "a part that does not exist is lexical"
        );
        assert_eq!(
            read("public/dangle"),
            root.join("secret/newfile"),
            "a dangling link's target"
        );
        assert_eq!(read("secret/sub"), root.join("secret/sub"));
        // Padding with existing `d/..` pairs changes nothing.
        let padded = format!("public/{}../link/x", "d/../".repeat(40));
        assert_eq!(read(&padded), root.join("secret/x"));
    }

    #[test]
    fn a_walk_past_its_bounds_cannot_be_read_and_never_leaves_the_roots() {
        let (_dir, root) = tree();
        let roots = [root.clone()];
        assert_eq!(through_links(&root.join("loop/x"), &roots), Linked::TooFar);
        let long = format!("public/{}x", "d/../".repeat(MAX_STEPS));
        assert_eq!(through_links(&root.join(long), &roots), Linked::TooFar);
        // Outside the roots nothing is looked at: the path as written.
        let elsewhere = through_links(&root.join("link/b"), &[root.join("public")]);
        assert_eq!(elsewhere, Linked::At(root.join("link/b")));
        assert_eq!(
            through_links(Path::new("/proc/self/cwd/x"), &[PathBuf::from("/")]),
            Linked::At(PathBuf::from("/proc/self/cwd/x"))
        );
    }

    #[test]
    fn process_handles_are_told_apart() {
        for handle in [
            "/proc/self/cwd/x",
            "/proc/thread-self/root",
            "/proc/42/fd/3",
            "/dev/fd/0",
            "/dev/stdin",
        ] {
            assert!(names_a_process_handle(handle), "{handle}");
        }
        for plain in ["/proc/cpuinfo", "/dev/null", "/srv/proc/self", "/"] {
            assert!(!names_a_process_handle(plain), "{plain}");
        }
    }
}
