//! Which package registry the install step may reach: the one the user's own configuration names,
//! read at run time (never a name written into airlock). npm: `npm config list --json`
//! (`registry`, and `@scope:registry` for scoped packages), which reads the user's and the global
//! `.npmrc` and `npm_config_*` variables the way npm does; not a project's `.npmrc`, which a
//! server granted its project may have written (every query runs in [`NEUTRAL_DIR`]). uv: its index settings (`UV_DEFAULT_INDEX`,
//! `UV_INDEX_URL`, `UV_INDEX`, `UV_EXTRA_INDEX_URL`, `uv.toml`'s `index-url`, `extra-index-url` and
//! `[[index]]`), and when none is set, the default index pip itself reports (with the host its
//! files are served from).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::paths::VarSource;

/// How long reading a tool's configuration may take.
const CONFIG_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot run `{command}` to read the registry your configuration names: {why}")]
    Tool { command: String, why: String },
    #[error("`{command}` printed no registry: {why}")]
    Output { command: String, why: String },
    #[error("the registry URL {0:?} is not an http(s) URL")]
    Url(String),
    #[error(
        "npm is not installed, and neither NPM_CONFIG_REGISTRY nor a `registry=` line of an .npmrc names the registry {0} reads"
    )]
    Unnamed(&'static str),
}

/// The default registry bun and deno read when npm itself is not installed to say it (a user
/// with only bun or deno): `NPM_CONFIG_REGISTRY` (either case) of the user's environment, else
/// the `registry=` line of the first of `npmrc_texts` that has one (the user's `.npmrc`; never
/// a project's, which a server may have written). Pure.
pub fn npmrc_registry(env: &(impl VarSource + ?Sized), npmrc_texts: &[String]) -> Option<String> {
    let from_env = ["NPM_CONFIG_REGISTRY", "npm_config_registry"]
        .iter()
        .find_map(|name| env.var(name).filter(|url| !url.is_empty()));
    if let Some(url) = from_env {
        return Some(url.to_string());
    }
    // As npm reads a file: its last `registry` line counts. A file whose line cannot be read
    // here (`${VAR}`, quoted) decides nothing, and the files after it are not asked: their
    // registry is not the one the runner would use.
    for text in npmrc_texts {
        let last = text.lines().rev().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == "registry").then(|| value.trim().to_string())
        });
        if let Some(value) = last {
            let usable =
                !value.is_empty() && !value.contains("${") && !value.starts_with(['"', '\'']);
            return usable.then_some(value);
        }
    }
    None
}

/// `text` with the user info (`user:password@`) taken out of every URL in it (a URL, or URLs
/// apart by whitespace as `UV_INDEX` holds them), and whether there was any. The install step
/// runs a package's own build code with the network its registry needs: an index password in
/// its URL would be that code's to read, and would reach the audit log and the host's error
/// message. Pure.
pub fn without_user_info(text: &str) -> (String, bool) {
    let mut had = false;
    let words: Vec<String> = text
        .split(' ')
        .map(|word| {
            let Some((scheme, rest)) = word.split_once("://") else {
                return word.to_string();
            };
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..end].rsplit_once('@') {
                Some((_, host)) => {
                    had = true;
                    format!("{scheme}://{host}{}", &rest[end..])
                }
                None => word.to_string(),
            }
        })
        .collect();
    (words.join(" "), had)
}

/// `scheme://[user@]host[:port]/...` → `host:port` (443 for https, 80 for http), the form of a
/// network allow-list entry.
pub fn host_port(url: &str) -> Result<String, RegistryError> {
    let bad = || RegistryError::Url(url.to_string());
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return Err(bad()),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    if host_port.is_empty() {
        return Err(bad());
    }
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
            (host, port.parse::<u16>().map_err(|_| bad())?)
        }
        _ => (host_port, default_port),
    };
    Ok(format!("{}:{port}", host.to_ascii_lowercase()))
}

/// The registries npm uses for `packages`, from `npm config list --json`.
pub fn npm_registries(
    config_json: &str,
    packages: &[String],
) -> Result<Vec<String>, RegistryError> {
    let output = |why: String| RegistryError::Output {
        command: "npm config list --json".into(),
        why,
    };
    let config: serde_json::Value =
        serde_json::from_str(config_json).map_err(|err| output(err.to_string()))?;
    let get = |key: &str| config.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let default = get("registry").ok_or_else(|| output("no `registry` key".into()))?;
    let mut out = Vec::new();
    for package in packages {
        let registry = super::npm::scope(package)
            .and_then(|scope| get(&format!("{scope}:registry")))
            .unwrap_or_else(|| default.clone());
        if !out.contains(&registry) {
            out.push(registry);
        }
    }
    Ok(out)
}

/// The directory airlock's configuration queries run in. Never the server's working directory:
/// a server granted its project could have written files there that the query would obey (an
/// `.npmrc` naming another registry, a `pip` package Python imports from its working directory
/// first). The root is the user's own machine's, and no server writes there.
const NEUTRAL_DIR: &str = "/";

/// Runs `npm config list --json` as the user: their user and global configuration and their
/// `npm_config_*` variables, not a project's `.npmrc` (see [`NEUTRAL_DIR`]).
pub fn read_npm_config(npm: &Path, env: &[(String, String)]) -> Result<String, RegistryError> {
    let command = format!("{} config list --json", npm.display());
    // npm makes its cache directory whenever it starts: this query gets a throwaway one, so
    // reading the configuration never writes the user's cache.
    let scratch = std::env::temp_dir().join(format!("airlock-npm-config-{}", std::process::id()));
    let out = run_tool(
        Command::new(npm)
            .args(["config", "list", "--json"])
            .current_dir(NEUTRAL_DIR)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            // No debug log, no update check.
            .env("npm_config_logs_max", "0")
            .env("npm_config_update_notifier", "false")
            .env("npm_config_cache", &scratch),
        &command,
    );
    let _ = std::fs::remove_dir_all(&scratch);
    out
}

/// The index URLs uv's own settings name, in uv's order of precedence, and whether one of them is
/// the default index (else uv uses its built-in default, PyPI).
pub fn uv_indexes(env: &(impl VarSource + ?Sized), config_files: &[String]) -> (Vec<String>, bool) {
    let mut urls = Vec::new();
    let mut has_default = false;
    let mut push = |url: &str| {
        let url = url
            .split_once('=')
            .filter(|(name, _)| !name.contains(':'))
            .map_or(url, |(_, u)| u);
        if !url.is_empty() && !urls.iter().any(|have: &String| have == url) {
            urls.push(url.to_string());
        }
    };
    for var in ["UV_DEFAULT_INDEX", "UV_INDEX_URL"] {
        if let Some(url) = env.var(var) {
            push(url.trim());
            has_default = true;
        }
    }
    for var in ["UV_INDEX", "UV_EXTRA_INDEX_URL"] {
        for url in env.var(var).unwrap_or_default().split_whitespace() {
            push(url);
        }
    }
    for text in config_files {
        let Ok(config) = text.parse::<toml::Table>() else {
            continue;
        };
        if let Some(url) = config.get("index-url").and_then(|v| v.as_str()) {
            push(url);
            has_default = true;
        }
        for url in config
            .get("extra-index-url")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
        {
            push(url);
        }
        for index in config
            .get("index")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(url) = index.get("url").and_then(|v| v.as_str()) {
                push(url);
                has_default |= index.get("default").and_then(|v| v.as_bool()) == Some(true);
            }
        }
    }
    (urls, has_default)
}

/// uv's user and system configuration files (`$XDG_CONFIG_HOME/uv/uv.toml` or
/// `~/.config/uv/uv.toml`, then `/etc/uv/uv.toml`), the ones that exist, read.
pub fn uv_config_files(env: &(impl VarSource + ?Sized)) -> Vec<String> {
    let user = crate::paths::UserDirs::from_env(env)
        .config_base()
        .map(|dir| dir.join("uv/uv.toml"));
    [user, Some(PathBuf::from("/etc/uv/uv.toml"))]
        .into_iter()
        .flatten()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .collect()
}

/// pip's default index and the host its files are served from, as the installed pip reports
/// them (`python3`, as the user runs it): the default when no setting names an index.
pub fn pip_default_index(env: &[(String, String)]) -> Result<(String, String), RegistryError> {
    let code = "from pip._internal.models.index import PyPI as p; print(p.simple_url); print(p.file_storage_domain)";
    let command = "python3 -c 'from pip._internal.models.index import PyPI ...'".to_string();
    let out = run_tool(
        Command::new("python3")
            .args(["-c", code])
            // `python3 -c` imports from its working directory first.
            .current_dir(NEUTRAL_DIR)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v))),
        &command,
    )?;
    let mut lines = out.lines().map(str::trim);
    match (lines.next(), lines.next()) {
        (Some(url), Some(files)) if !url.is_empty() && !files.is_empty() => {
            Ok((url.to_string(), files.to_string()))
        }
        _ => Err(RegistryError::Output {
            command,
            why: format!("expected two lines, got {out:?}"),
        }),
    }
}

/// Runs a configuration query with a time limit; its stdout.
fn run_tool(command: &mut Command, shown: &str) -> Result<String, RegistryError> {
    use std::process::Stdio;
    let tool = |why: String| RegistryError::Tool {
        command: shown.to_string(),
        why,
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| tool(err.to_string()))?;
    let deadline = std::time::Instant::now() + CONFIG_TIMEOUT;
    loop {
        match child.try_wait().map_err(|err| tool(err.to_string()))? {
            Some(_) => break,
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(tool(format!(
                    "no answer within {}s",
                    CONFIG_TIMEOUT.as_secs()
                )));
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|err| tool(err.to_string()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(tool(format!(
            "{}: {}",
            out.status,
            stderr.lines().last().unwrap_or_default()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn registry_urls_lose_their_user_info_and_nothing_else() {
        use super::without_user_info;
        assert_eq!(
            without_user_info("https://alice:S3CRET@pypi.example/simple"),
            ("https://pypi.example/simple".to_string(), true)
        );
        assert_eq!(
            without_user_info("https://a:b@one.example/simple https://two.example:8443/x?y=1"),
            (
                "https://one.example/simple https://two.example:8443/x?y=1".to_string(),
                true
            )
        );
        assert_eq!(
            without_user_info("https://registry.example/"),
            ("https://registry.example/".to_string(), false)
        );
        assert_eq!(without_user_info("3"), ("3".to_string(), false));
        // An `@` in the path is not user info.
        assert_eq!(
            without_user_info("https://registry.example/@scope/pkg"),
            ("https://registry.example/@scope/pkg".to_string(), false)
        );
    }

    #[test]
    fn without_npm_the_registry_comes_from_the_environment_or_an_npmrc() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let project =
            "; the project's\n@s:registry=https://s.example/\nregistry = https://p.example/\n"
                .to_string();
        let user = "registry=https://u.example/\n".to_string();
        let found = |vars: &[(&str, &str)], texts: &[String]| {
            super::npmrc_registry(env(vars).as_slice(), texts)
        };
        assert_eq!(
            found(
                &[("NPM_CONFIG_REGISTRY", "https://e.example/")],
                std::slice::from_ref(&project)
            ),
            Some("https://e.example/".into())
        );
        assert_eq!(
            found(&[("npm_config_registry", "https://l.example/")], &[]),
            Some("https://l.example/".into())
        );
        assert_eq!(
            found(&[], &[project.clone(), user.clone()]),
            Some("https://p.example/".into())
        );
        assert_eq!(
            found(&[], std::slice::from_ref(&user)),
            Some("https://u.example/".into())
        );
        assert_eq!(
            found(&[], &["registry=${REG}\n".to_string(), user.clone()]),
            None
        );
        assert_eq!(
            found(
                &[],
                &["registry=https://a.example/\nregistry=https://b.example/\n".to_string()]
            ),
            Some("https://b.example/".into())
        );
        assert_eq!(found(&[], &[]), None);
    }

    use super::*;
    use crate::paths::EnvVars;

    #[test]
    fn urls_become_allow_list_entries() {
        assert_eq!(
            host_port("https://Registry.Example/").unwrap(),
            "registry.example:443"
        );
        assert_eq!(host_port("http://127.0.0.1:9/").unwrap(), "127.0.0.1:9");
        assert_eq!(
            host_port("https://user:pw@mirror.example:8443/simple").unwrap(),
            "mirror.example:8443"
        );
        assert!(host_port("file:///srv/wheels").is_err());
        assert!(host_port("mirror.example").is_err());
    }

    #[test]
    fn npm_uses_a_scopes_own_registry_for_its_packages() {
        let config = r#"{"registry":"https://r.example/","@corp:registry":"https://npm.corp.example/","fund":false}"#;
        let both = vec![
            "@corp/srv".to_string(),
            "plain".to_string(),
            "@other/x".to_string(),
        ];
        assert_eq!(
            npm_registries(config, &both).unwrap(),
            ["https://npm.corp.example/", "https://r.example/"]
        );
        assert!(npm_registries("{}", &both).is_err());
    }

    #[test]
    fn uv_indexes_come_from_its_variables_and_config_files() {
        let env = EnvVars::from_pairs([(
            "UV_INDEX",
            "corp=https://pypi.corp.example/simple https://extra.example/simple",
        )]);
        let files = vec![
            "index-url = \"https://mirror.example/simple\"\n[[index]]\nurl = \"https://x.example/simple\"\n".to_string(),
        ];
        let (urls, default) = uv_indexes(&env, &files);
        assert_eq!(
            urls,
            [
                "https://pypi.corp.example/simple",
                "https://extra.example/simple",
                "https://mirror.example/simple",
                "https://x.example/simple"
            ]
        );
        assert!(default);
        let (urls, default) = uv_indexes(&EnvVars::default(), &[]);
        assert!(urls.is_empty() && !default);
    }
}
