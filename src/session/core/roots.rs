//! Roots the host offers that a server cannot use.
//!
//! A host answers a server's `roots/list` with the directories it works in (a workspace, a
//! project). A confined server sees only what its sandbox was given when it started, and landlock
//! cannot be widened afterwards, so a root outside that view is one the server will reject
//! ("inaccessible") or fail on. The answer passes unchanged (the server decides what to do with
//! its roots); airlock says once per server and root which one it cannot reach, and how to grant
//! it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Core;
use crate::mcp::Field;
use crate::policy::reading::file_url_to_path;

impl Core {
    /// Looks at a message on its way to a server: when it answers `roots/list`, warns about each
    /// offered root the server's sandbox does not show it (once per server and root).
    pub(super) fn note_offered_roots(&mut self, index: usize, message: &Value) {
        let Some(roots) = message.at(&["result", "roots"]).and_then(Value::as_array) else {
            return;
        };
        let server = &mut self.servers[index];
        let Some(shown) = &server.spec.shown_paths else {
            return;
        };
        for path in unreachable_roots(roots, shown) {
            if server.roots_told.insert(path.clone()) {
                tracing::warn!(
                    server = %server.name,
                    "the host offers the root {path}, which the server's sandbox does not show it (it was fixed when the server started): grant it to use it (`airlock run --allow-write={path}`, or `write = [\"{path}\"]` in the server's [sandbox] table) and start the server again",
                    path = path.display()
                );
            }
        }
    }
}

/// The local directories of `roots` (`file:` URIs) that no path in `shown` holds. Pure.
pub fn unreachable_roots(roots: &[Value], shown: &[PathBuf]) -> Vec<PathBuf> {
    roots
        .iter()
        .filter_map(|root| root.field("uri").and_then(Value::as_str))
        .filter_map(file_url_to_path)
        .filter(|path| !is_shown(path, shown))
        .collect()
}

fn is_shown(path: &Path, shown: &[PathBuf]) -> bool {
    shown.iter().any(|granted| path.starts_with(granted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_root_is_unreachable_unless_a_shown_path_holds_it() {
        let shown = vec![PathBuf::from("/home/me/notes"), PathBuf::from("/usr")];
        let roots = json!([
            {"uri": "file:///home/me/notes", "name": "notes"},
            {"uri": "file:///home/me/notes/2026"},
            {"uri": "file:///home/me/repo"},
            {"uri": "file:///home/me/notes-old"},
            {"uri": "file:///home/me/notes/../repo"},
            {"uri": "file:///home/me/my%20project"},
            {"uri": "https://example.org/x"},
            {"uri": "file://otherhost/home/me/x"},
            {"name": "no uri"}
        ]);
        assert_eq!(
            unreachable_roots(roots.as_array().unwrap(), &shown),
            [
                PathBuf::from("/home/me/repo"),
                PathBuf::from("/home/me/notes-old"),
                PathBuf::from("/home/me/repo"),
                PathBuf::from("/home/me/my project"),
            ]
        );
    }
}
