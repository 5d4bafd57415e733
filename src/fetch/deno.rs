//! `deno run npm:PKG`: which npm package a command line runs, whether deno's cache holds it, and
//! what was installed (pure, apart from [`cached_in`] and [`installed`], which read the layers
//! they are given).
//!
//! deno keeps npm packages in its cache dir (`DENO_DIR`) under `npm/<registry host>/<name>/`:
//! the registry's metadata (`registry.json`) and one directory per version. With them there it
//! runs the package without the network, whatever the spec says (it resolves against the cached
//! metadata). `deno cache npm:SPEC` fills them and runs nothing of the package.

use std::path::{Path, PathBuf};

use super::npm;

/// Options of `deno run` that take their value as the next word.
const VALUED: &[&str] = &[
    "-c",
    "--config",
    "--import-map",
    "--lock",
    "--cert",
    "--location",
    "--seed",
    "-L",
    "--log-level",
    "--preload",
    "--import",
];

/// The npm spec (`@scope/name@1`, without `npm:`) of `deno run [OPTIONS] npm:SPEC ...`, or
/// `None` when the program deno runs is anything else (a file, `jsr:`, a URL) or the line
/// cannot be read with certainty.
pub fn parse(args: &[String]) -> Option<String> {
    let (first, rest) = args.split_first()?;
    if first != "run" {
        return None;
    }
    let mut words = rest.iter();
    while let Some(word) = words.next() {
        if VALUED.contains(&word.as_str()) {
            words.next()?;
        } else if !word.starts_with('-') {
            // `npm:pkg/sub/path.js`: the package is the part before the path.
            let spec = sub_path_removed(word.strip_prefix("npm:")?);
            let from_registry = !spec.is_empty()
                && !spec.contains(':')
                && (spec.starts_with('@') || !spec.contains('/'));
            return from_registry.then(|| spec.to_string());
        }
    }
    None
}

/// `@s/p@1/bin/x.js` → `@s/p@1`; `p@1/x` → `p@1`.
pub fn sub_path_removed(spec: &str) -> &str {
    let skip = usize::from(spec.starts_with('@'));
    match spec.match_indices('/').nth(skip) {
        Some((at, _)) => &spec[..at],
        None => spec,
    }
}

/// The arguments that make deno fetch the package and run nothing of it.
pub fn install_args(spec: &str) -> Vec<String> {
    vec!["cache".to_string(), format!("npm:{spec}")]
}

/// The version a spec pins exactly (`p@1.2.3`), if it does.
fn exact_version(spec: &str) -> Option<&str> {
    let name = npm::package_name(spec);
    let version = spec.get(name.len() + 1..)?;
    let is_exact = !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
        && version.starts_with(|c: char| c.is_ascii_digit());
    is_exact.then_some(version)
}

/// The package's directories under `npm/<registry host>/` of a deno cache root.
fn package_dirs(root: &Path, name: &str) -> Vec<PathBuf> {
    std::fs::read_dir(root.join("npm"))
        .map(|hosts| {
            hosts
                .flatten()
                .map(|host| host.path().join(name))
                .filter(|dir| dir.join("registry.json").is_file())
                .collect()
        })
        .unwrap_or_default()
}

/// The versions of a package directory (its subdirectories).
fn versions(dir: &Path) -> Vec<String> {
    let mut versions: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.path().is_dir())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions
}

/// The first of `roots` (deno caches, newest layer first) holding the package's metadata and a
/// version of it (the version the spec pins, when it pins one).
pub fn cached_in(roots: &[PathBuf], spec: &str) -> Option<PathBuf> {
    let name = npm::package_name(spec);
    roots
        .iter()
        .find(|root| {
            package_dirs(root, name)
                .iter()
                .any(|dir| match exact_version(spec) {
                    Some(version) => dir.join(version).is_dir(),
                    None => !versions(dir).is_empty(),
                })
        })
        .cloned()
}

/// What an install left in `layer`: the version it put there, and that version's integrity as
/// the registry's metadata names it (deno checks the tarball against it).
pub fn installed(layer: &Path, spec: &str) -> Option<(String, Option<String>)> {
    let name = npm::package_name(spec);
    let dir = package_dirs(layer, name).into_iter().next()?;
    let version = match exact_version(spec) {
        Some(version) => version.to_string(),
        None => versions(&dir).pop()?,
    };
    let metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("registry.json")).ok()?).ok()?;
    let integrity = metadata
        .pointer(&format!("/versions/{version}/dist/integrity"))
        .and_then(|value| value.as_str())
        .map(str::to_string);
    Some((version, integrity))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_npm_package_deno_runs() {
        let p = |line: &str| parse(&words(line));
        assert_eq!(p("run -A npm:@s/p@1 /d"), Some("@s/p@1".into()));
        assert_eq!(
            p("run --allow-read=/d -c deno.json npm:p stdio"),
            Some("p".into())
        );
        assert_eq!(p("run -A npm:@s/p@1/bin/x.js"), Some("@s/p@1".into()));
        assert_eq!(p("run -A npm:p@2/cli"), Some("p@2".into()));
        assert_eq!(p("run -A server.ts npm:p"), None);
        assert_eq!(p("run -A jsr:@s/p"), None);
        assert_eq!(p("run -A npm:"), None);
        assert_eq!(p("serve npm:p"), None);
        assert_eq!(p("run -c"), None);
        assert_eq!(install_args("@s/p@1"), words("cache npm:@s/p@1"));
    }

    #[test]
    fn exact_versions() {
        assert_eq!(exact_version("@s/p@1.2.3"), Some("1.2.3"));
        assert_eq!(exact_version("p@1.0.0-beta.1"), Some("1.0.0-beta.1"));
        assert_eq!(exact_version("p@^1"), None);
        assert_eq!(exact_version("p@latest"), None);
        assert_eq!(exact_version("p"), None);
    }

    #[test]
    fn a_package_is_cached_with_its_metadata_and_the_version_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let package = root.join("npm/registry.example/@s/p");
        std::fs::create_dir_all(package.join("1.2.3")).unwrap();
        let roots = vec![root.clone()];
        // No metadata yet: deno would ask the registry.
        assert_eq!(cached_in(&roots, "@s/p"), None);
        std::fs::write(
            package.join("registry.json"),
            r#"{"versions":{"1.2.3":{"dist":{"integrity":"sha512-abc"}}}}"#,
        )
        .unwrap();
        assert_eq!(cached_in(&roots, "@s/p"), Some(root.clone()));
        assert_eq!(cached_in(&roots, "@s/p@1.2.3"), Some(root.clone()));
        assert_eq!(cached_in(&roots, "@s/p@2.0.0"), None);
        assert_eq!(cached_in(&roots, "@s/q"), None);
        assert_eq!(
            installed(&root, "@s/p"),
            Some(("1.2.3".into(), Some("sha512-abc".into())))
        );
    }
}
