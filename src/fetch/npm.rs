//! `npx`: which packages a command line installs, where npx keeps them (`_npx/<hash>`), and what
//! its lock file says was installed (pure, apart from [`installed`] and [`cached_in`], which read
//! the layers they are given).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha512};

/// The packages `npx ARGS` installs, or `None` when airlock does not fetch for it: npx told not
/// to install (`--no`), a package that does not come from a registry (a path, a git or tarball
/// URL), an option airlock does not know.
pub fn packages(args: &[String]) -> Option<Vec<String>> {
    let mut packages = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let word = word.as_str();
        match word {
            "-y" | "--yes" | "-q" | "--quiet" | "--silent" => {}
            "--no" | "--no-install" | "-c" | "--call" => return None,
            "-p" | "--package" => packages.push(words.next()?.clone()),
            "--" => {
                if packages.is_empty() {
                    packages.push(words.next()?.clone());
                }
                break;
            }
            _ if word.starts_with("--package=") => {
                packages.push(word["--package=".len()..].to_string());
            }
            _ if word.starts_with('-') => return None,
            _ => {
                if packages.is_empty() {
                    packages.push(word.to_string());
                }
                break;
            }
        }
    }
    // A name (`name`, or `@scope/name`: one slash) and, after its `@`, a version or range or
    // tag, which never holds a `/` (`@x/y@owner/repo` is GitHub's shorthand, `@x/y@/some/dir` a
    // directory: neither comes from the registry).
    let from_registry = |spec: &String| {
        let name = package_name(spec);
        let version = spec[name.len()..].strip_prefix('@').unwrap_or("");
        let name_ok = match name.strip_prefix('@') {
            Some(scoped) => scoped.split_once('/').is_some_and(|(scope, bare)| {
                !scope.is_empty() && !bare.is_empty() && !bare.contains('/')
            }),
            None => !name.is_empty() && !name.contains('/'),
        };
        name_ok
            && !spec.starts_with(['.', '/', '~'])
            && !spec.contains(':')
            && !spec.contains('\\')
            && !version.contains('/')
    };
    (!packages.is_empty() && packages.iter().all(from_registry)).then_some(packages)
}

/// `@scope/name@^1.2` → `@scope/name`; `name@1` → `name`.
pub fn package_name(spec: &str) -> &str {
    match spec.rfind('@') {
        Some(at) if at > 0 => &spec[..at],
        _ => spec,
    }
}

/// The scope of a package spec (`@scope/name` → `@scope`).
pub fn scope(spec: &str) -> Option<&str> {
    spec.starts_with('@')
        .then(|| spec.split('/').next())
        .flatten()
}

/// npx's directory for a set of packages: `_npx/<first 16 hex digits of the SHA-512 of the specs,
/// sorted, joined by newlines>` (libnpmexec). npx sorts with `localeCompare`; for one package, or
/// plain lowercase names, byte order is the same.
pub fn npx_dir(packages: &[String]) -> String {
    let mut sorted: Vec<&str> = packages.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let digest = Sha512::digest(sorted.join("\n").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..16].to_string()
}

/// The arguments that make npx install `packages` into its `_npx` directory and run nothing of
/// them: `npx --yes --package=P ... -- /bin/true` (the same directory as `npx -y P`).
pub fn install_args(packages: &[String]) -> Vec<String> {
    let mut args = vec!["--yes".to_string()];
    args.extend(packages.iter().map(|p| format!("--package={p}")));
    args.extend(["--".to_string(), super::TRUE.to_string()]);
    args
}

/// The first of `roots` (npm caches, newest layer first) whose `_npx/<dir>` holds `name`.
pub fn cached_in(roots: &[PathBuf], dir: &str, name: &str) -> Option<PathBuf> {
    roots
        .iter()
        .find(|root| {
            root.join("_npx")
                .join(dir)
                .join("node_modules")
                .join(name)
                .join("package.json")
                .is_file()
        })
        .cloned()
}

/// What npx's lock file says about `name`: version, integrity, where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub version: String,
    pub integrity: Option<String>,
    pub resolved: Option<String>,
}

/// Reads `_npx/<dir>/package-lock.json` from the first root that has it: a regular file inside
/// that root, at most [`super::MAX_METADATA_BYTES`] (a confined install wrote it: a FIFO there
/// must not stop airlock, nor a link make it read a file of its own choosing).
pub fn installed(roots: &[PathBuf], dir: &str, name: &str) -> Option<Installed> {
    let lock = Path::new("_npx").join(dir).join("package-lock.json");
    let text = roots.iter().find_map(|root| {
        crate::paths::read_small_text_within(root, &lock, super::MAX_METADATA_BYTES).ok()
    })?;
    from_lock(&text, name)
}

/// The `node_modules/<name>` entry of a package-lock.json (lockfile v2/v3).
pub fn from_lock(text: &str, name: &str) -> Option<Installed> {
    let lock: serde_json::Value = serde_json::from_str(text).ok()?;
    let entry = lock.get("packages")?.get(format!("node_modules/{name}"))?;
    let field = |key: &str| entry.get(key).and_then(|v| v.as_str()).map(str::to_string);
    Some(Installed {
        version: field("version")?,
        integrity: field("integrity"),
        resolved: field("resolved"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_packages_npx_installs() {
        let p = |line: &str| packages(&words(line));
        assert_eq!(
            p("-y @modelcontextprotocol/server-filesystem /d"),
            Some(words("@modelcontextprotocol/server-filesystem"))
        );
        assert_eq!(p("--yes pkg@1.2 --flag"), Some(words("pkg@1.2")));
        assert_eq!(p("-p a --package=b -- cmd x"), Some(words("a b")));
        assert_eq!(p("-y -- pkg"), Some(words("pkg")));
        assert_eq!(p("--no pkg"), None);
        assert_eq!(p("-y ./local"), None);
        assert_eq!(p("-y github:me/repo"), None);
        assert_eq!(p("-y me/repo"), None);
        // After a scoped name, a version never holds a slash: GitHub's shorthand, a directory.
        assert_eq!(p("-y @x/y@npm/cli"), None);
        assert_eq!(p("-y @x/y@/usr/lib/node_modules/npm"), None);
        assert_eq!(p("-y @x/y/z"), None);
        assert_eq!(p("-y @x"), None);
        assert_eq!(p("-y @x/y@^1.2 --flag"), Some(words("@x/y@^1.2")));
        assert_eq!(p("-y pkg@latest"), Some(words("pkg@latest")));
        assert_eq!(p("--registry=x pkg"), None);
        assert_eq!(p("-y"), None);
    }

    #[test]
    fn names_scopes_and_npx_directories() {
        assert_eq!(package_name("@scope/name@^1.2"), "@scope/name");
        assert_eq!(package_name("@scope/name"), "@scope/name");
        assert_eq!(package_name("name@1"), "name");
        assert_eq!(scope("@scope/name@1"), Some("@scope"));
        assert_eq!(scope("name"), None);
        // The directory `npx -y @modelcontextprotocol/server-everything@2026.8.31` uses (as in
        // the cache `.ci/install-peers` fills).
        let dir = npx_dir(&words("@modelcontextprotocol/server-everything@2026.8.31"));
        assert_eq!(dir, "a705c79b42eea4c8");
        assert_eq!(
            install_args(&words("a b")),
            words("--yes --package=a --package=b -- /bin/true")
        );
    }

    #[test]
    fn the_lock_file_says_what_was_installed() {
        let lock = r#"{"name":"x","lockfileVersion":3,"packages":{"":{"dependencies":{"@s/p":"^1"}},
            "node_modules/@s/p":{"version":"1.2.3","resolved":"https://r.example/@s/p/-/p-1.2.3.tgz",
            "integrity":"sha512-abc"}}}"#;
        assert_eq!(
            from_lock(lock, "@s/p"),
            Some(Installed {
                version: "1.2.3".into(),
                integrity: Some("sha512-abc".into()),
                resolved: Some("https://r.example/@s/p/-/p-1.2.3.tgz".into()),
            })
        );
        assert_eq!(from_lock(lock, "other"), None);
    }
}
