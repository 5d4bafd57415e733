//! `uvx`: which requirements a command line installs, and the install step's command, which
//! builds the same cached environment and reports what it holds (pure).

/// What `uvx ARGS` installs: the options that decide its environment, and the package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uvx {
    /// `--from SPEC`, or the command itself (`uvx mcp-server-time@1.0`).
    pub from: String,
    /// `--with` requirements.
    pub with: Vec<String>,
    /// `--python VERSION`, passed on as given.
    pub python: Option<String>,
}

impl Uvx {
    /// Every requirement (for the audit record and the marker of a finished install).
    pub fn packages(&self) -> Vec<String> {
        let mut out = vec![self.from.clone()];
        out.extend(self.with.iter().cloned());
        out
    }

    /// The distribution name of the main package: `mcp-server-time@1.0` → `mcp-server-time`,
    /// `pkg[extra]==1` → `pkg`.
    pub fn name(&self) -> &str {
        let spec = self.from.as_str();
        let end = spec
            .find(['@', '=', '<', '>', '~', '!', '[', ';', ' '])
            .unwrap_or(spec.len());
        &spec[..end]
    }
}

/// The exact version `from` pins (`name@1.2`, `name==1.2`), if any.
fn pinned_version(from: &str) -> Option<&str> {
    from.split_once("==")
        .or_else(|| from.split_once('@'))
        .map(|(_, version)| version.trim())
        .filter(|version| !version.is_empty())
}

/// Whether one of `roots` (uv caches) holds an unpacked wheel of the package: an
/// `archive-v0/<hash>/<name>-<version>.dist-info` (the pinned version when `from` pins one), as a
/// first `uvx PKG` leaves it. Then uv builds the environment offline.
pub fn cached_in(roots: &[std::path::PathBuf], uvx: &Uvx) -> bool {
    let name = uvx.name().to_ascii_lowercase().replace(['-', '.'], "_");
    let wanted = |entry: &str| match pinned_version(&uvx.from) {
        Some(version) => entry == format!("{name}-{version}.dist-info"),
        // `<name>-<version>.dist-info`, the version without a `-` (not another package's name).
        None => entry
            .strip_suffix(".dist-info")
            .and_then(|stem| stem.strip_prefix(&format!("{name}-")))
            .is_some_and(|version| !version.contains('-')),
    };
    roots.iter().any(|root| {
        let Ok(archives) = std::fs::read_dir(root.join("archive-v0")) else {
            return false;
        };
        archives.flatten().any(|archive| {
            std::fs::read_dir(archive.path()).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|entry| entry.file_name().to_str().is_some_and(wanted))
            })
        })
    })
}

/// Reads `uvx ARGS`, or `None` when airlock does not fetch for it (an option it does not know,
/// a requirements file, a local path or URL).
pub fn parse(args: &[String]) -> Option<Uvx> {
    let mut from = None;
    let mut with = Vec::new();
    let mut python = None;
    let mut words = args.iter();
    let value = |word: &str, name: &str, words: &mut std::slice::Iter<'_, String>| match word
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix('='))
    {
        Some(inline) => Some(inline.to_string()),
        None => words.next().cloned(),
    };
    let command = loop {
        let word = words.next()?.as_str();
        if word == "--from" || word.starts_with("--from=") {
            from = Some(value(word, "--from", &mut words)?);
        } else if word == "--with" || word.starts_with("--with=") {
            with.push(value(word, "--with", &mut words)?);
        } else if word == "--python" || word == "-p" || word.starts_with("--python=") {
            python = Some(value(
                word,
                if word == "-p" { "-p" } else { "--python" },
                &mut words,
            )?);
        } else if matches!(word, "-q" | "--quiet" | "--isolated") {
        } else if word.starts_with('-') {
            return None;
        } else {
            break word.to_string();
        }
    };
    let from = from.unwrap_or(command);
    let local = |spec: &String| spec.starts_with(['.', '/', '~']) || spec.contains("://");
    if local(&from) || with.iter().any(local) {
        return None;
    }
    Some(Uvx { from, with, python })
}

/// Python that reports the installed distribution: its version and the SHA-256 of its `RECORD`
/// (the hash of every file it installed). Standard library only: nothing of the package runs.
fn report_code(name: &str) -> String {
    format!(
        "import hashlib, importlib.metadata as m, json; d = m.distribution({name:?}); \
         print(json.dumps({{'version': d.version, 'record_sha256': \
         hashlib.sha256((d.read_text('RECORD') or '').encode()).hexdigest()}}))"
    )
}

/// `uvx [--python V] --from SPEC [--with W]... python -c REPORT`: the environment `uvx SPEC`
/// runs in, built (and cached) by uv, and the report of what it holds, printed on stdout.
pub fn install_args(uvx: &Uvx) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(python) = &uvx.python {
        args.extend(["--python".to_string(), python.clone()]);
    }
    args.extend(["--from".to_string(), uvx.from.clone()]);
    for with in &uvx.with {
        args.extend(["--with".to_string(), with.clone()]);
    }
    args.extend([
        "python".to_string(),
        "-c".to_string(),
        report_code(uvx.name()),
    ]);
    args
}

/// The report line printed by the install command.
pub fn read_report(stdout: &str) -> Option<(String, String)> {
    let line = stdout.lines().rev().find(|line| line.starts_with('{'))?;
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    Some((
        value.get("version")?.as_str()?.to_string(),
        value.get("record_sha256")?.as_str()?.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn what_uvx_installs() {
        let uvx = parse(&words("mcp-server-time --local-timezone UTC")).unwrap();
        assert_eq!(uvx.from, "mcp-server-time");
        assert_eq!(uvx.name(), "mcp-server-time");
        let uvx = parse(&words(
            "--from mcp-server-git==1.0 --with x --python 3.12 mcp-server-git",
        ))
        .unwrap();
        assert_eq!(uvx.packages(), ["mcp-server-git==1.0", "x"]);
        assert_eq!(uvx.name(), "mcp-server-git");
        assert_eq!(uvx.python.as_deref(), Some("3.12"));
        assert_eq!(parse(&words("pkg[cli]@1.2")).unwrap().name(), "pkg");
        assert_eq!(parse(&words("--from=./local tool")), None);
        assert_eq!(parse(&words("--with-requirements r.txt tool")), None);
        assert_eq!(parse(&words("--from")), None);
    }

    #[test]
    fn a_cached_wheel_is_found_by_name_and_pinned_version() {
        let cache = tempfile::tempdir().unwrap();
        let archive = cache.path().join("archive-v0/abc");
        std::fs::create_dir_all(archive.join("mcp_server_time-2026.10.19.dist-info")).unwrap();
        let roots = vec![cache.path().to_path_buf()];
        let cached = |line: &str| cached_in(&roots, &parse(&words(line)).unwrap());
        assert!(cached("mcp-server-time"));
        assert!(cached("mcp-server-time@2026.10.19"));
        assert!(cached("--from mcp-server-time==2026.10.19 mcp-server-time"));
        assert!(!cached("mcp-server-time@2026.1.1"));
        assert!(!cached("mcp-server"));
        assert!(!cached_in(&[], &parse(&words("mcp-server-time")).unwrap()));
    }

    #[test]
    fn the_install_command_builds_the_same_environment_and_reports_it() {
        let uvx = parse(&words("--with x mcp-server-time@2026.10.19")).unwrap();
        let args = install_args(&uvx);
        assert_eq!(
            args[..5],
            words("--from mcp-server-time@2026.10.19 --with x python")
        );
        assert!(
            args[6].contains("distribution(\"mcp-server-time\")"),
            "{}",
            args[6]
        );
        assert_eq!(
            read_report("noise\n{\"version\": \"1.0\", \"record_sha256\": \"ab\"}\n"),
            Some(("1.0".into(), "ab".into()))
        );
    }
}
