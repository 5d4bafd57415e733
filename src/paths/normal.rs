//! Lexical path normalisation: `.` and empty components vanish, `..` removes the component
//! before it and never climbs above the root. Nothing touches the disk (symlinks are the
//! sandbox's business), so the result is a pure function of the text.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The names a walk that resolves symlinks one component at a time visits, in order: every
/// normal name and every `..` (the walk decides what `..` means after a symlink, so it is kept);
/// the root, `.` and empty components vanish. The sandbox's root builder and the confine
/// helper's walk both take their work list from here.
pub fn walk_components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Normalises `path` lexically. Absolute paths stay absolute and cannot climb above `/`; relative
/// paths keep leading `..` components (they cannot be resolved without a working directory, and a
/// leading `..` can never satisfy an absolute prefix). An empty path is `.`.
pub fn normalize_path(path: &Path) -> PathBuf {
    let absolute = path.has_root();
    let mut parts: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(Component::ParentDir),
            },
            Component::Normal(_) => parts.push(component),
        }
    }
    let mut out = PathBuf::from(if absolute { "/" } else { "" });
    out.extend(parts);
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// [`normalize_path`] for text (argument values, which are JSON strings).
pub fn normalize(path: &str) -> String {
    normalize_path(Path::new(path))
        .to_string_lossy()
        .into_owned()
}

/// True when `path` (already normalised) is `prefix` or lies below it, component-wise: `/tmpx` is
/// not under `/tmp`.
pub fn is_under(path: &str, prefix: &str) -> bool {
    let prefix = normalize(prefix);
    if prefix == "/" {
        return path.starts_with('/');
    }
    match path.strip_prefix(prefix.as_str()) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_cannot_escape_a_prefix() {
        assert_eq!(normalize("/tmp/../etc/passwd"), "/etc/passwd");
        assert!(!is_under(&normalize("/tmp/../etc/passwd"), "/tmp/"));
        assert_eq!(normalize("/../../etc"), "/etc");
        assert_eq!(normalize("/tmp/./a//b/"), "/tmp/a/b");
        assert_eq!(normalize("a/../../b"), "../b");
        assert_eq!(normalize("./a/./b"), "a/b");
        assert_eq!(normalize(""), ".");
        assert_eq!(normalize("a/.."), ".");
        assert_eq!(normalize("/"), "/");
        assert_eq!(
            normalize_path(Path::new("/usr/lib/../bin")),
            PathBuf::from("/usr/bin")
        );
    }

    #[test]
    fn prefixes_compare_whole_components() {
        assert!(is_under("/tmp/x", "/tmp"));
        assert!(is_under("/tmp/x", "/tmp/"));
        assert!(is_under("/tmp", "/tmp/"));
        assert!(!is_under("/tmpx/y", "/tmp"));
        assert!(is_under("/anything", "/"));
    }

    #[test]
    fn a_walk_visits_names_and_parent_steps_in_order() {
        let names: Vec<OsString> = walk_components(Path::new("/a/./b//../c/")).into();
        assert_eq!(names, ["a", "b", "..", "c"].map(OsString::from));
        assert!(walk_components(Path::new("/")).is_empty());
    }
}
