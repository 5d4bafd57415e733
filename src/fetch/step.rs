//! Running the install step: is the package cached already; which registry; the confined install
//! into a staging layer; committing it, or throwing it away; the audit records.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::mpsc;

use super::failure::{install_fix, prime_fix, telling_line};
use super::layers::{Record, Store};
use super::{FetchPlan, Runner, bun, deno, npm, registry, uv};
use crate::audit::event::millis;
use crate::audit::{AuditLog, Event, EventKind, Outcome};
use crate::net::NetRule;
use crate::net::route::NetAudit;
use crate::policy::{GrantArgs, Layer, Network, Origin, Sourced};
use crate::sandbox::{PlanRequest, SandboxPlan};

/// How long an install may take before it is stopped.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(600);
/// Lines of the install's stderr kept for the error message.
const TAIL: usize = 12;

/// Where the install's audit records go.
pub enum Sink<'a> {
    /// Written by the caller's own audit log (before the session starts).
    Log(&'a mut AuditLog),
    /// Handed to the session's loop, which writes them (a start during the session).
    Session(&'a mpsc::Sender<NetAudit>),
}

impl Sink<'_> {
    /// Writes the install's own event, and waits until it is written: the session records the
    /// server's `spawn` (and answers its calls) only after the install that preceded it.
    async fn record(&mut self, event: Event) -> Result<(), FetchError> {
        let (written, done) = tokio::sync::oneshot::channel();
        self.net(NetAudit {
            event,
            written: Some(written),
        })
        .await?;
        done.await
            .map_err(|_| FetchError::Audit("the session has ended".into()))
    }

    async fn net(&mut self, net: NetAudit) -> Result<(), FetchError> {
        match self {
            Sink::Log(log) => {
                log.record(net.event)
                    .map_err(|err| FetchError::Audit(err.to_string()))?;
                if let Some(written) = net.written {
                    let _ = written.send(());
                }
                Ok(())
            }
            Sink::Session(events) => events
                .send(net)
                .await
                .map_err(|_| FetchError::Audit("the session has ended".into())),
        }
    }
}

/// A finished install.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub record: Record,
    pub registries: Vec<String>,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The install could not be done: what happened, and what to change.
    #[error("{message}. Fix: {fix}")]
    Failed { message: String, fix: String },
    #[error("the install step cannot write the audit log: {0}")]
    Audit(String),
}

fn failed(message: impl Into<String>, fix: impl Into<String>) -> FetchError {
    FetchError::Failed {
        message: message.into(),
        fix: fix.into(),
    }
}

/// Whether the server's package is in its cache view already: npx's `_npx/<hash>` in a finished
/// layer or the real cache; for uvx, a finished install of the same requirements; bunx's
/// directory, young enough that bunx runs it without the network; deno's metadata and version.
pub(super) fn is_cached(plan: &FetchPlan, store: &Store) -> bool {
    let roots = || {
        let mut roots = store.layers();
        roots.push(plan.real_cache.clone());
        roots
    };
    match &plan.runner {
        Runner::Bunx(bunx) => {
            bun::cached_in(&roots(), bunx, plan.uid, std::time::SystemTime::now()).is_some()
        }
        Runner::Deno { spec } => {
            // A range is not evaluated: a finished install of the same spec counts for it.
            let installed = store
                .record(&plan.runner.key())
                .is_some_and(|record| store.layers_dir().join(record.layer).is_dir());
            installed || deno::cached_in(&roots(), spec).is_some()
        }
        Runner::Npx { packages } => {
            let mut roots = store.layers();
            roots.push(plan.real_cache.clone());
            let name = npm::package_name(&packages[0]);
            npm::cached_in(&roots, &npm::npx_dir(packages), name).is_some()
        }
        Runner::Uvx(uvx) => {
            let installed = store
                .record(&plan.runner.key())
                .is_some_and(|record| store.layers_dir().join(record.layer).is_dir());
            let mut roots = store.layers();
            roots.push(plan.real_cache.clone());
            installed || uv::cached_in(&roots, uvx)
        }
    }
}

/// Makes sure the server's package is in its cache view: nothing to do when it is, else the
/// install step. `Ok(None)`: it was cached.
pub async fn ensure(plan: &FetchPlan, mut sink: Sink<'_>) -> Result<Option<Fetched>, FetchError> {
    let request = &plan.request;
    let store = plan.store();
    if is_cached(plan, &store) {
        return Ok(None);
    }
    let started = Instant::now();
    let registry_plan = plan.clone();
    let (registries, rules, env) = tokio::task::spawn_blocking(move || registries(&registry_plan))
        .await
        .map_err(|err| failed(err.to_string(), "start the server again"))??;
    let upper = store
        .dir
        .join("staging")
        .join(std::process::id().to_string())
        .join("upper");
    let install = install_plan(plan, rules, env, upper)?;
    let begin_store = store.clone();
    let identity = install.identity;
    let staging = tokio::task::spawn_blocking(move || begin_store.begin(identity))
        .await
        .map_err(|err| failed(err.to_string(), "start the server again"))?
        .map_err(|err| {
            failed(
                err.to_string(),
                "check that airlock's state directory is writable",
            )
        })?;
    if is_cached(plan, &store) {
        // Another instance installed it while this one waited for the lock.
        staging.discard();
        return Ok(None);
    }
    let label = format!("{} install", request.server);
    tracing::info!(server = %request.server, "installing {} from {}", plan.runner.packages().join(" "), registries.join(", "));
    let outcome = run_install(&install, &mut sink, &label).await;
    let mut event = Event::new(EventKind::Install, &request.server);
    event.duration_ms = Some(millis(started.elapsed()));
    let mut detail = json!({
        "runner": plan.runner.name(),
        "packages": plan.runner.packages(),
        "package": plan.runner.package(),
        "registry": registries,
    });
    let stdout = match outcome {
        Ok(stdout) => stdout,
        Err(why) => {
            staging.discard();
            event.outcome = Some(Outcome::Error);
            event.reason = Some(why.to_string());
            event.detail = Some(detail);
            sink.record(event).await?;
            return Err(failed(
                format!(
                    "installing {} from {} failed: {why}",
                    plan.runner.packages().join(" "),
                    registries.join(", ")
                ),
                install_fix(&why, &registries, &plan.runner),
            ));
        }
    };
    let mut record = what_was_installed(plan, &store, &staging.upper(), &stdout);
    record.key = plan.runner.key();
    let layer_store = staging;
    let layer = layer_store.commit(record.clone()).map_err(|err| {
        failed(
            err.to_string(),
            "check that airlock's state directory is writable",
        )
    })?;
    record.layer = layer
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    detail["version"] = json!(record.version);
    detail["integrity"] = json!(record.integrity);
    detail["integrity_of"] = json!(integrity_of(&plan.runner));
    detail["layer"] = json!(layer);
    if let Some(resolved) = resolved_of(plan, &store, &layer) {
        detail["resolved"] = json!(resolved);
    }
    event.outcome = Some(Outcome::Ok);
    event.detail = Some(detail);
    sink.record(event).await?;
    Ok(Some(Fetched {
        record,
        registries,
        duration: started.elapsed(),
    }))
}

/// What the `integrity` of an install event is the hash of. npm records the tarball's own hash
/// in its lock file. uv does not expose the hash of the wheel it fetched for `uvx` (its cache
/// keeps it only in an internal binary index), so airlock hashes what the install left: the
/// distribution's `RECORD`, which lists every installed file with that file's SHA-256, so its
/// hash fixes the content of every installed file of the package (not its dependencies').
fn integrity_of(runner: &Runner) -> &'static str {
    match runner {
        Runner::Npx { .. } => {
            "the package tarball the registry served (npm's lock file `integrity`, SRI form)"
        }
        Runner::Uvx(_) => {
            "the installed distribution's .dist-info/RECORD file (SHA-256 of its text: the list of every installed file with its own SHA-256), not the wheel file; uv does not expose the wheel's hash for uvx"
        }
        Runner::Bunx(_) => {
            "the package tarball the registry served (bun's lock file `bun.lock`, SRI form)"
        }
        Runner::Deno { .. } => {
            "the package tarball, as the registry's metadata names it for the version deno installed (`dist.integrity`, SRI form; deno checks the tarball against it)"
        }
    }
}

/// Where npm says the package came from (its tarball URL), for the audit record.
fn resolved_of(plan: &FetchPlan, store: &Store, layer: &std::path::Path) -> Option<String> {
    let Runner::Npx { packages } = &plan.runner else {
        return None;
    };
    let mut roots = vec![layer.to_path_buf()];
    roots.extend(store.layers());
    roots.push(plan.real_cache.clone());
    npm::installed(
        &roots,
        &npm::npx_dir(packages),
        npm::package_name(&packages[0]),
    )?
    .resolved
}

/// The version and integrity of what the install put in place.
fn what_was_installed(
    plan: &FetchPlan,
    store: &Store,
    upper: &std::path::Path,
    stdout: &str,
) -> Record {
    let (version, integrity) = match &plan.runner {
        Runner::Npx { packages } => {
            let mut roots = vec![upper.to_path_buf()];
            roots.extend(store.layers());
            roots.push(plan.real_cache.clone());
            let name = npm::package_name(&packages[0]);
            match npm::installed(&roots, &npm::npx_dir(packages), name) {
                Some(installed) => (installed.version, installed.integrity),
                None => ("unknown".to_string(), None),
            }
        }
        Runner::Uvx(_) => match uv::read_report(stdout) {
            Some((version, record)) => (version, Some(format!("sha256:{record}"))),
            None => ("unknown".to_string(), None),
        },
        Runner::Bunx(bunx) => {
            bun::installed(upper, bunx, plan.uid).unwrap_or_else(|| ("unknown".to_string(), None))
        }
        Runner::Deno { spec } => {
            deno::installed(upper, spec).unwrap_or_else(|| ("unknown".to_string(), None))
        }
    };
    Record {
        key: String::new(),
        package: plan.runner.package(),
        version,
        integrity,
        layer: String::new(),
    }
}

type Registries = (Vec<String>, Vec<Sourced<NetRule>>, Vec<(String, String)>);

/// What the install step may reach (`host:port`), read from the user's configuration as the
/// install itself reads it: for `check` and `explain`.
pub fn reaches(plan: &FetchPlan) -> Result<Vec<String>, FetchError> {
    let (_, rules, _) = registries(plan)?;
    Ok(rules.iter().map(|rule| rule.value.to_string()).collect())
}

/// A runner's way to its registries: their URLs, extra hosts to reach (`host:port`, where the
/// files come from elsewhere), and the environment that names them to the runner.
type Route = (Vec<String>, Vec<String>, Vec<(String, String)>);

/// The registry URLs, their allow-list entries and the environment that points the runner at
/// them inside the sandbox (it cannot read the user's configuration files there).
fn registries(plan: &FetchPlan) -> Result<Registries, FetchError> {
    let request = &plan.request;
    let unreadable = |err: String| {
        failed(
            format!("cannot tell which package registry to fetch from: {err}"),
            prime_fix(&plan.runner),
        )
    };
    let (urls, mut hosts, env) = match &plan.runner {
        Runner::Bunx(_) | Runner::Deno { .. } => {
            npm_style_registries(plan).map_err(|err| unreadable(err.to_string()))?
        }
        Runner::Npx { packages } => {
            // The npm beside this npx reads the configuration as this npx will.
            let beside = request.program.with_file_name("npm");
            let npm = if beside.is_file() {
                beside
            } else {
                npm_on_path(&request.parent_env).ok_or_else(|| {
                    unreadable(format!(
                        "there is no npm beside {} nor in an absolute directory of PATH",
                        request.program.display()
                    ))
                })?
            };
            let config = registry::read_npm_config(&npm, &request.parent_env)
                .map_err(|err| unreadable(err.to_string()))?;
            let urls = registry::npm_registries(&config, packages)
                .map_err(|err| unreadable(err.to_string()))?;
            let mut env = vec![("npm_config_yes".to_string(), "true".to_string())];
            let default = config_value(&config, "registry").unwrap_or_default();
            env.push(("npm_config_registry".to_string(), default));
            // How the user's npm retries and waits (the sandbox cannot read their .npmrc).
            for key in NPM_FETCH_SETTINGS {
                if let Some(value) = config_value(&config, key) {
                    env.push((format!("npm_config_{}", key.replace('-', "_")), value));
                }
            }
            for package in packages {
                if let Some(scope) = npm::scope(package)
                    && let Some(url) = config_value(&config, &format!("{scope}:registry"))
                {
                    env.push((format!("npm_config_{scope}:registry"), url));
                }
            }
            (urls, Vec::new(), env)
        }
        Runner::Uvx(_) => {
            uv_registries(&request.parent_env).map_err(|err| unreadable(err.to_string()))?
        }
    };
    // No registry password reaches the install step (see `registry::without_user_info`): a
    // private index that needs one is filled by the user's own runner once, outside airlock.
    let mut stripped = false;
    let mut strip = |text: &str| {
        let (text, had) = registry::without_user_info(text);
        stripped |= had;
        text
    };
    let urls: Vec<String> = urls.iter().map(|url| strip(url)).collect();
    let env: Vec<(String, String)> = env
        .into_iter()
        .map(|(name, value)| (name, strip(&value)))
        .collect();
    if stripped {
        tracing::warn!(
            "the registry's user name and password are not passed to the install step (it runs the package's own build code); if the registry needs them: {}",
            prime_fix(&plan.runner)
        );
    }
    for url in &urls {
        hosts.push(registry::host_port(url).map_err(|err| unreadable(err.to_string()))?);
    }
    let origin = Origin {
        layer: Layer::User,
        // Shown after the layer: "user npm configuration (install step)".
        file: PathBuf::from(format!(
            "{} configuration (install step)",
            plan.runner.cache()
        )),
        line: None,
    };
    let mut rules = Vec::new();
    for host in hosts {
        let rule = NetRule::parse(&host).map_err(|err| unreadable(err.to_string()))?;
        rules.push(Sourced {
            value: rule,
            origin: origin.clone(),
        });
    }
    Ok((urls, rules, env))
}

/// The registry of a runner that reads npm's configuration files (bun and deno read `.npmrc`):
/// what npm's configuration names for the package (the npm on the search path reads it as they
/// do), or for bun the `BUN_CONFIG_REGISTRY` of the user's environment, which bun puts first.
/// Without npm on the search path: `NPM_CONFIG_REGISTRY`, else the user's `.npmrc`
/// (`registry::npmrc_registry`), else a clear error (no registry name is built in).
/// Named to the runner by the variable it reads (`BUN_CONFIG_REGISTRY`, `NPM_CONFIG_REGISTRY`).
/// A scope's own registry is allowed but not named to them: an install from it fails with the
/// cache fix.
fn npm_style_registries(plan: &FetchPlan) -> Result<Route, registry::RegistryError> {
    use crate::paths::VarSource;
    let request = &plan.request;
    let variable = match plan.runner {
        Runner::Bunx(_) => "BUN_CONFIG_REGISTRY",
        _ => "NPM_CONFIG_REGISTRY",
    };
    let own = match plan.runner {
        Runner::Bunx(_) => request
            .parent_env
            .var("BUN_CONFIG_REGISTRY")
            .filter(|url| !url.is_empty())
            .map(str::to_string),
        _ => None,
    };
    let (default, mut urls) = match (own, npm_on_path(&request.parent_env)) {
        (Some(url), _) => (url.clone(), vec![url]),
        (None, Some(npm)) => {
            let config = registry::read_npm_config(&npm, &request.parent_env)?;
            let urls = registry::npm_registries(&config, &plan.runner.packages())?;
            let default = config_value(&config, "registry").unwrap_or_default();
            (default, urls)
        }
        (None, None) => {
            // Only bun or deno on this machine: the user's settings they read, read here.
            let texts: Vec<String> = request
                .dirs
                .home
                .iter()
                .filter_map(|home| std::fs::read_to_string(home.join(".npmrc")).ok())
                .collect();
            let url = registry::npmrc_registry(&request.parent_env, &texts)
                .ok_or(registry::RegistryError::Unnamed(plan.runner.name()))?;
            (url.clone(), vec![url])
        }
    };
    // Dependencies come from the default registry even when the package's scope has its own.
    if !default.is_empty() && !urls.contains(&default) {
        urls.push(default.clone());
    }
    Ok((urls, Vec::new(), vec![(variable.to_string(), default)]))
}

/// The user's npm settings the install step gets: how it retries and waits, never credentials.
const NPM_FETCH_SETTINGS: &[&str] = &[
    "fetch-retries",
    "fetch-retry-factor",
    "fetch-retry-mintimeout",
    "fetch-retry-maxtimeout",
    "fetch-timeout",
];

/// A key of `npm config list --json` as npm would read it from the environment.
fn config_value(config: &str, key: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(config).ok()?;
    match value.get(key)? {
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Number(number) => Some(number.to_string()),
        serde_json::Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// uv's indexes; without a setting, the default index pip reports and the host serving its files.
fn uv_registries(env: &[(String, String)]) -> Result<Route, registry::RegistryError> {
    let files = registry::uv_config_files(env);
    let (urls, has_default) = registry::uv_indexes(env, &files);
    let mut hosts = Vec::new();
    let mut out_env = Vec::new();
    let mut all = urls.clone();
    if has_default {
        out_env.push(("UV_DEFAULT_INDEX".to_string(), urls[0].clone()));
        if urls.len() > 1 {
            out_env.push(("UV_INDEX".to_string(), urls[1..].join(" ")));
        }
    } else {
        // uv's built-in default is the index pip reports; its files come from another host.
        let (url, files_host) = registry::pip_default_index(env)?;
        if !urls.is_empty() {
            out_env.push(("UV_INDEX".to_string(), urls.join(" ")));
        }
        all.insert(0, url);
        hosts.push(format!("{files_host}:443"));
    }
    Ok((all, hosts, out_env))
}

/// The user's TLS trust settings ([`crate::sandbox::TLS_TRUST`]) and the paths they name. The
/// install step talks TLS to the registry as the user's own tools do, so it gets the ones the
/// user set (and read access to the files they name).
fn tls_trust(env: &[(String, String)]) -> (Vec<(String, String)>, Vec<String>) {
    use crate::paths::VarSource;
    let mut vars = Vec::new();
    let mut paths = Vec::new();
    for name in crate::sandbox::TLS_TRUST {
        if let Some(value) = env.var(name) {
            vars.push((name.to_string(), value.to_string()));
            if value.starts_with('/') && !paths.iter().any(|p| p == value) {
                paths.push(value.to_string());
            }
        }
    }
    (vars, paths)
}

/// What the install step may pass on of airlock's environment: the search path and the locale,
/// never the names the server's policy passes (its tokens and keys).
const INSTALL_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "TZ",
    "TERM",
    "LC_ALL",
    "LC_CTYPE",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "LC_MONETARY",
    "LC_MESSAGES",
    "LC_PAPER",
    "LC_NAME",
    "LC_ADDRESS",
    "LC_TELEPHONE",
    "LC_MEASUREMENT",
    "LC_IDENTIFICATION",
];

/// The install's plan request: the server's own (same uid, root, limits and runtime), with the
/// install command, the registry as its only network, the user's TLS trust settings and the
/// runner's registry settings, and nothing the server was granted: no read or write grants, no
/// variables of the server's `env` or its policy's passthrough list, no grants from its command
/// line. Its only lasting write is the cache's upper layer (added by [`install_plan`]).
fn install_request(
    plan: &FetchPlan,
    rules: Vec<Sourced<NetRule>>,
    env: Vec<(String, String)>,
) -> PlanRequest {
    let mut request = plan.request.clone();
    request.args = match &plan.runner {
        Runner::Npx { packages } => npm::install_args(packages),
        Runner::Uvx(uvx) => uv::install_args(uvx),
        Runner::Bunx(bunx) => bunx.install_args(),
        Runner::Deno { spec } => deno::install_args(spec),
    };
    let own_origin = Origin {
        layer: Layer::Builtin,
        file: PathBuf::from("the install step"),
        line: None,
    };
    request.sandbox.env = INSTALL_ENV
        .iter()
        .map(|name| Sourced {
            value: name.to_string(),
            origin: own_origin.clone(),
        })
        .collect();
    request.sandbox.read.clear();
    request.sandbox.write.clear();
    request.env = env;
    let (trust, trusted_paths) = tls_trust(&request.parent_env);
    request.env.extend(trust);
    let trust_origin = Origin {
        layer: Layer::User,
        file: PathBuf::from("the TLS trust variables of your environment"),
        line: None,
    };
    for path in trusted_paths {
        request.sandbox.read.push(Sourced {
            value: path,
            origin: trust_origin.clone(),
        });
    }
    let origin = rules
        .first()
        .map(|rule| rule.origin.clone())
        .unwrap_or_else(|| request.sandbox.network.origin.clone());
    request.sandbox.network = Sourced {
        value: Network::Allow(rules),
        origin,
    };
    request.sandbox.grant_args.value = GrantArgs::None;
    request.resolved.arguments.clear();
    request.resolved.own_arguments_from = request.args.len();
    request.resolved.script_root = None;
    request.resolved.script_root_as_written = None;
    request.resolved.script_alone.clear();
    request.cwd = None;
    request.fetches_packages = true;
    request
}

/// The install's sandbox ([`install_request`]), with the cache's upper layer on disk.
fn install_plan(
    plan: &FetchPlan,
    rules: Vec<Sourced<NetRule>>,
    env: Vec<(String, String)>,
    upper: PathBuf,
) -> Result<SandboxPlan, FetchError> {
    let request = install_request(plan, rules, env);
    let mut install = crate::sandbox::plan(&request, &plan.host).map_err(|err| {
        failed(
            format!("the install step cannot be confined: {err}"),
            prime_fix(&plan.runner),
        )
    })?;
    let cache = plan.runner.cache();
    let overlay = install
        .cache_overlays
        .iter_mut()
        .find(|overlay| overlay.name == cache && overlay.mount)
        .ok_or_else(|| {
            failed(
                format!("the install step needs a private view of the {cache} cache (a mount namespace), which this system cannot give"),
                prime_fix(&plan.runner),
            )
        })?;
    overlay.upper_on_disk = Some(upper);
    Ok(install)
}

/// Why the confined install did not succeed (the install event's reason, and the error's).
#[derive(Debug, thiserror::Error)]
pub(super) enum InstallFailed {
    #[error("{0}")]
    Spawn(#[from] crate::process::SpawnError),
    /// Its network events could not be audited.
    #[error("{0}")]
    Audit(Box<FetchError>),
    #[error("it did not finish within {seconds}s")]
    TimedOut { seconds: u64 },
    /// The sandbox could not be set up: the helper's step and message.
    #[error("{0}")]
    Sandbox(String),
    /// The installer failed: how it ended, the line of its stderr that says why, and the hosts
    /// it tried to reach that are not its registries (refused).
    #[error("{status}{}", super::failure::why_it_ended(.line, .refused))]
    Exited {
        status: String,
        line: String,
        refused: Vec<String>,
    },
}

/// Runs the install confined; its stdout, or why it failed.
/// The `npm` the user's PATH finds, from its absolute entries only: npm runs in the server's
/// working directory, against which a relative entry (`node_modules/.bin`) would find a
/// project's own `npm`, unconfined.
fn npm_on_path(env: &[(String, String)]) -> Option<PathBuf> {
    use crate::paths::VarSource;
    env.var("PATH")?
        .split(':')
        .map(std::path::Path::new)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("npm"))
        .find(|npm| npm.is_file())
}

/// Marks a connection of the install step (`detail.step = "install"`): it is audited under the
/// server's name, but it is airlock's install, not the server, that made it.
fn install_step(mut net: NetAudit) -> NetAudit {
    if let Some(serde_json::Value::Object(detail)) = &mut net.event.detail {
        detail.insert("step".into(), "install".into());
    }
    net
}

/// Notes the host of a refused connection or lookup of the install (the first few, once each):
/// what a failed install tried to reach says more than its exit status.
fn note_refused(net: &NetAudit, refused: &mut Vec<String>) {
    let event = &net.event;
    if event.decision.as_deref() != Some("deny") {
        return;
    }
    let host = event
        .detail
        .as_ref()
        .and_then(|d| d.get("host"))
        .and_then(|h| h.as_str());
    if let Some(host) = host
        && refused.len() < 3
        && !refused.iter().any(|seen| seen == host)
    {
        refused.push(host.to_string());
    }
}

async fn run_install(
    plan: &SandboxPlan,
    sink: &mut Sink<'_>,
    label: &str,
) -> Result<String, InstallFailed> {
    let (events_tx, mut events) = mpsc::channel::<NetAudit>(256);
    let mut child = crate::process::spawn_confined_with(plan, Some(&events_tx)).await?;
    drop(child.stdin.take());
    let stdout = child
        .stdout
        .take()
        .map(|out| tokio::spawn(read_bounded(out)));
    let stderr = child
        .stderr
        .take()
        .map(|err| tokio::spawn(relay_tail(err, label.to_string())));
    let deadline = tokio::time::sleep(FETCH_TIMEOUT);
    tokio::pin!(deadline);
    let mut refused: Vec<String> = Vec::new();
    let timed_out = loop {
        tokio::select! {
            Some(net) = events.recv() => {
                note_refused(&net, &mut refused);
                if let Err(err) = sink.net(install_step(net)).await {
                    return Err(InstallFailed::Audit(Box::new(err)));
                }
            }
            _ = child.wait() => break false,
            _ = &mut deadline => break true,
        }
    };
    let summary = child
        .shutdown(Duration::from_secs(plan.kill_timeout_secs))
        .await;
    while let Ok(Some(net)) =
        tokio::time::timeout(crate::session::shell::net::QUIET, events.recv()).await
    {
        note_refused(&net, &mut refused);
        sink.net(install_step(net))
            .await
            .map_err(|err| InstallFailed::Audit(Box::new(err)))?;
    }
    let out = match stdout {
        Some(task) => task.await.unwrap_or_default(),
        None => String::new(),
    };
    let (tail, helper) = match stderr {
        Some(task) => task.await.unwrap_or_default(),
        None => (Vec::new(), None),
    };
    if timed_out {
        return Err(InstallFailed::TimedOut {
            seconds: FETCH_TIMEOUT.as_secs(),
        });
    }
    match summary.code {
        Some(0) => Ok(out),
        Some(code) if summary.helper_step.is_some() => Err(InstallFailed::Sandbox(
            crate::session::exit::sandbox_failure(code, helper.as_deref()),
        )),
        code => Err(InstallFailed::Exited {
            status: code.map_or_else(|| "was killed".to_string(), |c| format!("exited with {c}")),
            line: telling_line(&tail),
            refused,
        }),
    }
}

async fn read_bounded(out: impl AsyncRead + Unpin) -> String {
    let mut text = String::new();
    let _ = out.take(1 << 20).read_to_string(&mut text).await;
    text
}

/// Relays the install's stderr to airlock's, line by line with `[label]` in front; keeps the last
/// lines for the error message, and the helper's own failure line.
async fn relay_tail(err: impl AsyncRead + Unpin, label: String) -> (Vec<String>, Option<String>) {
    let mut lines = BufReader::new(err).lines();
    let mut tail: Vec<String> = Vec::new();
    let mut helper = None;
    while let Ok(Some(line)) = lines.next_line().await {
        // The install runs inside a session's loop: stderr through the queue, never blocking.
        crate::session::stderr_queue::say(format_args!("[{label}] {line}"));
        if let Some(why) = line.strip_prefix(crate::session::shell::stderr::HELPER_PREFIX) {
            helper = Some(why.to_string());
        }
        if !line.trim().is_empty() {
            tail.push(line);
            if tail.len() > TAIL {
                tail.remove(0);
            }
        }
    }
    (tail, helper)
}

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
