//! Lexical path normalisation for argument rules.
//!
//! Argument rules compare what a model asked for (`{"path": "/tmp/../etc/passwd"}`) against a
//! prefix or glob. Comparing the raw string would let `..` climb out of an allowed prefix, so values
//! are normalised first: `.` and empty components vanish, `..` removes the component before it and
//! never climbs above the root. This is lexical on purpose (the arguments name paths inside the
//! server's sandbox, not airlock's filesystem); symlinks are the sandbox's job (landlock).

/// Normalises `path` lexically. Absolute paths stay absolute and cannot climb above `/`; relative
/// paths keep leading `..` components (they cannot be resolved without the server's cwd, and a
/// leading `..` can never satisfy an absolute prefix).
pub fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
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
        assert_eq!(normalize(""), ".");
        assert_eq!(normalize("/"), "/");
    }

    #[test]
    fn prefixes_compare_whole_components() {
        assert!(is_under("/tmp/x", "/tmp"));
        assert!(is_under("/tmp/x", "/tmp/"));
        assert!(is_under("/tmp", "/tmp/"));
        assert!(!is_under("/tmpx/y", "/tmp"));
        assert!(is_under("/anything", "/"));
    }
}
