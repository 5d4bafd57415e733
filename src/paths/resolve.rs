//! Where a path that may not exist yet would land: its links resolved as far as the disk has
//! them. A file a server could create tomorrow (a host's `mcp.json` that is not there yet) lies
//! behind the same symlinked directories as one that exists today, and a protection that only
//! resolved existing paths would look at the wrong place for it.

use std::path::{Path, PathBuf};

/// How many symlinks one resolution follows before it gives up (the kernel's own bound).
const MAX_LINKS: usize = 40;

/// `path` (absolute) with every symlink the disk holds on its way resolved: the deepest existing
/// ancestor canonicalised, then each missing step that is itself a link (a dangling one) followed,
/// and the rest of the names appended as written. `None` when the path is relative, a link chain
/// is longer than the kernel would follow, or an ancestor cannot be read.
pub fn resolve_as_far_as_exists(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut pending: Vec<std::ffi::OsString> =
        super::walk_components(path).into_iter().rev().collect();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&name);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                // The link's names go in front of what is left; an absolute one starts over.
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                pending.extend(super::walk_components(&target).into_iter().rev());
            }
            Ok(_) => resolved = next,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                // Nothing below a missing name can be a link yet: the rest is as written.
                resolved = next;
                while let Some(rest) = pending.pop() {
                    if rest == ".." {
                        resolved.pop();
                    } else {
                        resolved.push(rest);
                    }
                }
            }
            Err(_) => return None,
        }
    }
    Some(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_behind_a_linked_directory_resolves_to_where_it_would_be_created() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("dotfiles/cursor")).unwrap();
        std::os::unix::fs::symlink(root.join("dotfiles/cursor"), root.join(".cursor")).unwrap();
        assert_eq!(
            resolve_as_far_as_exists(&root.join(".cursor/mcp.json")),
            Some(root.join("dotfiles/cursor/mcp.json"))
        );
        // A dangling link (its directory not made yet), relative, through a second link.
        std::os::unix::fs::symlink("dotfiles/later", root.join(".later")).unwrap();
        std::os::unix::fs::symlink(root.join(".later"), root.join(".again")).unwrap();
        assert_eq!(
            resolve_as_far_as_exists(&root.join(".again/sub/mcp.json")),
            Some(root.join("dotfiles/later/sub/mcp.json"))
        );
        // `..` after a link climbs from where the link leads, as the kernel does.
        assert_eq!(
            resolve_as_far_as_exists(&root.join(".cursor/../x")),
            Some(root.join("dotfiles/x"))
        );
        // An existing path is its canonical form.
        assert_eq!(
            resolve_as_far_as_exists(&root.join(".cursor")),
            Some(root.join("dotfiles/cursor"))
        );
    }

    #[test]
    fn a_link_loop_or_a_relative_path_resolves_to_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(root.join("b"), root.join("a")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("b")).unwrap();
        assert_eq!(resolve_as_far_as_exists(&root.join("a/file")), None);
        assert_eq!(resolve_as_far_as_exists(Path::new("relative/x")), None);
    }
}
