//! `deno run npm:PKG`: which npm package a command line runs, whether deno's cache holds it, and
//! what was installed (pure, apart from [`cached_in`] and [`installed`], which read the layers
//! they are given).
//!
//! deno keeps npm packages in its cache dir (`DENO_DIR`) under `npm/<registry host>/<name>/`:
//! the registry's metadata (`registry.json`) and one directory per version. With them there it
//! runs the package without the network, whatever the spec says (it resolves against the cached
//! metadata). `deno cache npm:SPEC` fills them and runs nothing of the package.
//!
//! "Cached" is decided as deno would run offline: the pinned version's directory, or the one the
//! cached metadata tags (`latest` for a bare name). A range is not evaluated here; a finished
//! install of the same spec counts for it (`step::is_cached`).

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

/// What a spec asks for after the package name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted<'a> {
    /// `p@1.2.3`.
    Exact(&'a str),
    /// `p` (the `latest` tag) or `p@beta`: the version the registry's metadata tags so.
    Tag(&'a str),
    /// `p@^1.2`, `p@1.x`, `p@>=1 <2`: a range, which airlock does not evaluate.
    Range,
}

fn wanted(spec: &str) -> Wanted<'_> {
    let name = npm::package_name(spec);
    let Some(version) = spec.get(name.len() + 1..).filter(|v| !v.is_empty()) else {
        return Wanted::Tag("latest");
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+');
    let starts_with_digit = version.starts_with(|c: char| c.is_ascii_digit());
    let is_number = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit());
    let release = version.split(['-', '+']).next().unwrap_or_default();
    let full = release.split('.').count() == 3 && release.split('.').all(is_number);
    if !version.chars().all(plain) {
        Wanted::Range
    } else if starts_with_digit && full {
        Wanted::Exact(version)
    } else if !starts_with_digit {
        Wanted::Tag(version)
    } else {
        Wanted::Range
    }
}

/// The package's cached metadata in `package_dir` under `root`: a regular file inside `root`
/// (a confined install wrote the layer) and at most [`super::MAX_METADATA_BYTES`].
fn metadata(root: &Path, package_dir: &Path) -> Option<serde_json::Value> {
    let relative = package_dir.strip_prefix(root).ok()?.join("registry.json");
    let text =
        crate::paths::read_small_text_within(root, &relative, super::MAX_METADATA_BYTES).ok()?;
    serde_json::from_str(&text).ok()
}

/// The version the package's cached metadata (under `root`) tags `tag`.
fn tagged(root: &Path, package_dir: &Path, tag: &str) -> Option<String> {
    let metadata = metadata(root, package_dir)?;
    metadata
        .get("dist-tags")?
        .get(tag)?
        .as_str()
        .map(str::to_string)
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

/// The highest of `versions` by their numbers (`10.0.0` above `9.1.0`).
fn newest(versions: Vec<String>) -> Option<String> {
    let key = |version: &String| -> Vec<u64> {
        version
            .split(['-', '+'])
            .next()
            .unwrap_or_default()
            .split('.')
            .map(|part| part.parse().unwrap_or(0))
            .collect()
    };
    versions.into_iter().max_by_key(key)
}

/// The first of `roots` (deno caches, newest layer first) holding the package's metadata and
/// the version deno would run offline: the one the spec pins, or the one the cached metadata
/// tags (`latest` for a bare name). A range is never counted as cached (airlock does not
/// evaluate npm ranges); its install step runs, and finds what is cached quickly.
pub fn cached_in(roots: &[PathBuf], spec: &str) -> Option<PathBuf> {
    let name = npm::package_name(spec);
    roots
        .iter()
        .find(|root| {
            package_dirs(root, name)
                .iter()
                .any(|dir| match wanted(spec) {
                    Wanted::Exact(version) => dir.join(version).is_dir(),
                    Wanted::Tag(tag) => {
                        tagged(root, dir, tag).is_some_and(|v| dir.join(v).is_dir())
                    }
                    Wanted::Range => false,
                })
        })
        .cloned()
}

/// What an install left in `layer`: the version it put there, and that version's integrity as
/// the registry's metadata names it (deno checks the tarball against it).
pub fn installed(layer: &Path, spec: &str) -> Option<(String, Option<String>)> {
    let name = npm::package_name(spec);
    let dir = package_dirs(layer, name).into_iter().next()?;
    let version = match wanted(spec) {
        Wanted::Exact(version) => version.to_string(),
        Wanted::Tag(tag) => tagged(layer, &dir, tag).filter(|v| dir.join(v).is_dir())?,
        Wanted::Range => newest(versions(&dir))?,
    };
    let metadata = metadata(layer, &dir)?;
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
    fn what_a_spec_asks_for() {
        assert_eq!(wanted("@s/p@1.2.3"), Wanted::Exact("1.2.3"));
        assert_eq!(wanted("p@1.0.0-beta.1"), Wanted::Exact("1.0.0-beta.1"));
        assert_eq!(wanted("p@^1"), Wanted::Range);
        assert_eq!(wanted("p@1"), Wanted::Range);
        assert_eq!(wanted("p@1.x"), Wanted::Range);
        assert_eq!(wanted("p@>=1 <2"), Wanted::Range);
        assert_eq!(wanted("p@latest"), Wanted::Tag("latest"));
        assert_eq!(wanted("p@beta"), Wanted::Tag("beta"));
        assert_eq!(wanted("@s/p"), Wanted::Tag("latest"));
        assert_eq!(
            newest(vec!["9.1.0".into(), "10.0.0".into(), "2.0.0".into()]),
            Some("10.0.0".into())
        );
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
            r#"{"dist-tags":{"latest":"1.2.3","next":"2.0.0"},"versions":{"1.2.3":{"dist":{"integrity":"sha512-abc"}}}}"#,
        )
        .unwrap();
        assert_eq!(cached_in(&roots, "@s/p"), Some(root.clone()));
        assert_eq!(cached_in(&roots, "@s/p@latest"), Some(root.clone()));
        assert_eq!(cached_in(&roots, "@s/p@1.2.3"), Some(root.clone()));
        assert_eq!(cached_in(&roots, "@s/p@2.0.0"), None);
        // The tag names a version that is not cached; a range is never taken as cached.
        assert_eq!(cached_in(&roots, "@s/p@next"), None);
        assert_eq!(cached_in(&roots, "@s/p@^1"), None);
        assert_eq!(cached_in(&roots, "@s/q"), None);
        assert_eq!(
            installed(&root, "@s/p"),
            Some(("1.2.3".into(), Some("sha512-abc".into())))
        );
    }
}
