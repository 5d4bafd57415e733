//! `bunx` (and `bun x`): which package a command line runs, where bunx keeps it, whether bunx
//! would run it without the network, and what its lock file says was installed (pure, apart from
//! [`cached_in`] and [`installed`], which read the layers they are given).
//!
//! bunx installs a package into its install cache, under `.bunx-<uid>/<spec>/` (a `package.json`
//! naming the package, `bun.lock`, `node_modules`); a spec without a version is kept as
//! `<name>@latest`. It runs from there without the network only while that `package.json` is
//! younger than a day; older, it resolves the package again, which a server without network
//! cannot. So airlock counts a bunx package as cached only while bunx itself would.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{TRUE, npm};

/// How long bunx runs an installed package without asking the registry again (a day), less an
/// hour so that a package about to go stale is fetched again rather than failing mid-session.
pub const FRESH_FOR: Duration = Duration::from_secs(23 * 60 * 60);

/// A `bunx` command line airlock fetches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bunx {
    /// The package spec as written (`@scope/name`, `name@1.2.3`).
    pub spec: String,
    /// Started as `bun x ...` rather than `bunx ...` (the install step is started the same way).
    pub bun_x: bool,
}

/// The package `bunx ARGS` runs, or `None` when airlock does not fetch for it: an option airlock
/// does not know, `--no-install`, a package that does not come from a registry.
pub fn parse(args: &[String], bun_x: bool) -> Option<Bunx> {
    let mut words = args.iter();
    let mut package = None;
    while let Some(word) = words.next() {
        let word = word.as_str();
        match word {
            "--bun" | "-b" | "--silent" | "--verbose" => {}
            "-p" | "--package" => package = Some(words.next()?.clone()),
            _ if word.starts_with("--package=") => {
                package = Some(word["--package=".len()..].to_string());
            }
            _ if word.starts_with('-') => return None,
            _ => {
                if package.is_none() {
                    package = Some(word.to_string());
                }
                break;
            }
        }
    }
    let spec = package?;
    let from_registry = !spec.is_empty()
        && !spec.starts_with(['.', '/', '~'])
        && !spec.contains(':')
        && !spec.contains('\\')
        && (spec.starts_with('@') || !spec.contains('/'));
    from_registry.then_some(Bunx { spec, bun_x })
}

impl Bunx {
    pub fn name(&self) -> &str {
        npm::package_name(&self.spec)
    }

    /// bunx's directory for this spec, relative to the install cache: `.bunx-<uid>/<spec>`, with
    /// `@latest` when the spec names no version.
    pub fn dir(&self, uid: u32) -> PathBuf {
        let spec = if self.name() == self.spec {
            format!("{}@latest", self.spec)
        } else {
            self.spec.clone()
        };
        PathBuf::from(format!(".bunx-{uid}")).join(spec)
    }

    /// The arguments that make bunx install the package into that directory and run nothing of
    /// it: `bunx --package=SPEC /bin/true` (`x --package=SPEC /bin/true` for `bun x`).
    /// By absolute path: a bare `true` would run a `true` bin the package itself declared.
    pub fn install_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.bun_x {
            args.push("x".to_string());
        }
        args.extend([format!("--package={}", self.spec), TRUE.to_string()]);
        args
    }
}

/// The first of `roots` (install caches, newest layer first) that has bunx's directory for
/// `bunx`, if bunx would run from it without the network (installed less than [`FRESH_FOR`]
/// before `now`). The first root that has it is the one the overlay shows: an older copy in a
/// lower layer does not count.
pub fn cached_in(roots: &[PathBuf], bunx: &Bunx, uid: u32, now: SystemTime) -> Option<PathBuf> {
    let dir = bunx.dir(uid);
    let root = roots
        .iter()
        .find(|root| root.join(&dir).join("package.json").is_file())?;
    let modified = std::fs::metadata(root.join(&dir).join("package.json"))
        .and_then(|meta| meta.modified())
        .ok()?;
    is_fresh(modified, now).then(|| root.clone())
}

/// Whether bunx runs a package installed at `installed` without asking the registry at `now`.
pub fn is_fresh(installed: SystemTime, now: SystemTime) -> bool {
    now.duration_since(installed)
        .map(|age| age < FRESH_FOR)
        // A time in the future (a clock set back): bunx treats it as fresh too.
        .unwrap_or(true)
}

/// The version and integrity bunx's lock file records for the package, read from `root`.
pub fn installed(root: &Path, bunx: &Bunx, uid: u32) -> Option<(String, Option<String>)> {
    // A regular file inside `root`, bounded: a confined install wrote it.
    let lock = bunx.dir(uid).join("bun.lock");
    let text = crate::paths::read_small_text_within(root, &lock, super::MAX_METADATA_BYTES).ok()?;
    from_lock(&text, bunx.name())
}

/// The `packages` entry of a text `bun.lock` for `name`: one line,
/// `"NAME": ["NAME@VERSION", "", {...}, "sha512-..."],`. The file is JSON with trailing commas,
/// which a JSON parser refuses, so the entry is read from its line.
pub fn from_lock(text: &str, name: &str) -> Option<(String, Option<String>)> {
    let prefix = format!("\"{name}\": [\"{name}@");
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with(&prefix))?;
    let rest = &line[prefix.len()..];
    let version = rest.split('"').next()?.to_string();
    let integrity = line
        .split('"')
        .rfind(|word| word.starts_with("sha512-") || word.starts_with("sha256-"))
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
    fn the_package_bunx_runs() {
        let p = |line: &str| parse(&words(line), false).map(|b| b.spec);
        assert_eq!(p("@scope/server /d"), Some("@scope/server".into()));
        assert_eq!(p("--bun pkg@1.2.3 --flag"), Some("pkg@1.2.3".into()));
        assert_eq!(p("-p pkg@1 bin-name x"), Some("pkg@1".into()));
        assert_eq!(p("--package=pkg bin"), Some("pkg".into()));
        assert_eq!(p("--no-install pkg"), None);
        assert_eq!(p("./local"), None);
        assert_eq!(p("github:me/repo"), None);
        assert_eq!(p("me/repo"), None);
        assert_eq!(p(""), None);
    }

    #[test]
    fn where_bunx_keeps_a_package_and_how_it_installs_one() {
        let bunx = |spec: &str, bun_x| Bunx {
            spec: spec.into(),
            bun_x,
        };
        assert_eq!(
            bunx("@s/p", false).dir(1000),
            Path::new(".bunx-1000/@s/p@latest")
        );
        assert_eq!(bunx("p@1.2.3", false).dir(0), Path::new(".bunx-0/p@1.2.3"));
        assert_eq!(
            bunx("@s/p@1", false).install_args(),
            words("--package=@s/p@1 /bin/true")
        );
        assert_eq!(
            bunx("p", true).install_args(),
            words("x --package=p /bin/true")
        );
    }

    #[test]
    fn a_package_installed_a_day_ago_is_not_cached_any_more() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10 * 24 * 3600);
        let hours = |h: u64| now - Duration::from_secs(h * 3600);
        assert!(is_fresh(hours(1), now));
        assert!(is_fresh(hours(22), now));
        assert!(!is_fresh(hours(23), now));
        assert!(!is_fresh(hours(25), now));
        assert!(is_fresh(now + Duration::from_secs(60), now));
    }

    #[test]
    fn the_newest_layer_decides_and_a_stale_one_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let bunx = Bunx {
            spec: "@s/p@1".into(),
            bun_x: false,
        };
        let (new, old) = (dir.path().join("new"), dir.path().join("old"));
        for root in [&new, &old] {
            let at = root.join(bunx.dir(7));
            std::fs::create_dir_all(&at).unwrap();
            std::fs::write(at.join("package.json"), "{}").unwrap();
        }
        let now = SystemTime::now();
        let roots = vec![new.clone(), old.clone()];
        assert_eq!(cached_in(&roots, &bunx, 7, now), Some(new.clone()));
        assert_eq!(cached_in(&roots, &bunx, 8, now), None);
        // The newest copy is two days old: bunx would ask the registry, whatever lies below.
        let later = now + Duration::from_secs(48 * 3600);
        assert_eq!(cached_in(&roots, &bunx, 7, later), None);
    }

    #[test]
    fn the_lock_file_says_what_was_installed() {
        let lock = r#"{
  "lockfileVersion": 1,
  "packages": {
    "@s/p": ["@s/p@1.2.3", "", { "dependencies": { "x": "^1" } }, "sha512-abc=="],
    "x": ["x@1.0.0", "", {}, "sha512-def=="],
  }
}"#;
        assert_eq!(
            from_lock(lock, "@s/p"),
            Some(("1.2.3".into(), Some("sha512-abc==".into())))
        );
        assert_eq!(
            from_lock(lock, "x"),
            Some(("1.0.0".into(), Some("sha512-def==".into())))
        );
        assert_eq!(from_lock(lock, "y"), None);
    }
}
