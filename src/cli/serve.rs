//! `airlock serve --config airlock.toml`: every configured server behind one MCP server on
//! stdio, each confined, gated and audited, with lifecycle supervision (see `docs/serve.md`).
//!
//! stdout carries only MCP; logs go to stderr. Exit status: 0 when the host closed the
//! connection or airlock was told to stop (SIGTERM, SIGINT); 2 for a bad config or policy;
//! 1 for a failure (e.g. the audit log cannot be written). SIGHUP reloads.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::CliError;
use super::session::{SessionOptions, host_stdio, open_audit, policy_event};
use crate::audit::{AuditTarget, Redactor, resolve_target};
use crate::config::{Config, ConfigFormat, StartMode, Transport};
use crate::gateway::control::ControlSocket;
use crate::gateway::remote::{Launch, RemoteTarget};
use crate::http::config::HttpConfig;
use crate::http::{HttpSettings, ListenAddr};
use crate::paths::{EnvVars, UserDirs};
use crate::policy::Policy;
use crate::process::launch::{LaunchContext, LaunchError, prepare};
use crate::session::core::Reloaded;
use crate::session::shell::{self, signals::host_output_closed};
use crate::session::{Core, ReloadError, ReloadPlan, Reloader, ServerSpec, Session, Topology};
use anyhow::Context;
use clap::Args;

/// Serve every configured server as a single MCP server: to one host on stdio, or over HTTP (`--listen`).
#[derive(Debug, Args)]
#[command(
    after_help = "Example (in a host's MCP config):\n  \"command\": \"airlock\",\n  \"args\": [\"serve\", \"--config\", \"/home/me/.config/airlock/airlock.toml\"]\n\nThen, from a terminal: airlock status; airlock reload (or SIGHUP) after editing the files"
)]
pub struct ServeArgs {
    /// Server config: airlock.toml, or an mcpServers/servers JSON file (default: ./airlock.toml,
    /// else $XDG_CONFIG_HOME/airlock/airlock.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Serve over Streamable HTTP at ADDR:PORT or unix:PATH instead of stdio (overrides
    /// `[http] listen`). Loopback unless authentication is configured (docs/http.md).
    #[arg(long, value_name = "ADDR:PORT|unix:PATH")]
    pub listen: Option<String>,
    /// With --listen: serve the stdio host too (both faces share the gateway).
    #[arg(long)]
    pub stdio: bool,
    #[command(flatten)]
    pub session: SessionOptions,
}

/// `--config`, else `./airlock.toml`, else `$XDG_CONFIG_HOME/airlock/airlock.toml`.
pub fn config_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    let searched = default_config_places();
    searched
        .iter()
        .find(|place| place.is_file())
        .or(searched.last())
        .cloned()
        .unwrap_or_else(|| PathBuf::from("airlock.toml"))
}

/// The config `serve` would use without `--config`, when one of its places holds a file; Err
/// when `serve` would refuse it ([`written_by_a_server`]).
pub fn found_default_config() -> Result<Option<PathBuf>, CliError> {
    let found = default_config_places()
        .into_iter()
        .find(|place| place.is_file());
    match found.as_deref().and_then(written_by_a_server) {
        Some(why) => Err(CliError::Refused(why)),
        None => Ok(found),
    }
}

/// Where `serve` looks for its config when `--config` is not given, in order.
pub fn default_config_places() -> Vec<PathBuf> {
    let mut places = vec![PathBuf::from("airlock.toml")];
    places.extend(UserDirs::from_env(&EnvVars::from_process()).default_server_config());
    places
}

/// Why a config found without `--config` is not loaded, if it is not: it lies in a directory
/// that was granted writable to a server (airlock's grant ledger), so a server may have written
/// it, and a config may widen the policy (it is the user's own layer).
fn written_by_a_server(found: &Path) -> Option<String> {
    let state_dir = UserDirs::from_env(&EnvVars::from_process()).state_dir()?;
    // SAFETY: geteuid cannot fail and touches no memory.
    let uid = unsafe { libc::geteuid() };
    let ledger_path = crate::sandbox::root::grant_ledger_path(&state_dir, uid);
    let file = std::fs::canonicalize(found).ok()?;
    let ledger = match std::fs::read_to_string(&ledger_path) {
        Ok(ledger) => ledger,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        // Fails closed, as the sandbox's own reading of the ledger does.
        Err(err) => {
            return Some(format!(
                "{} was not loaded: --config was not given, and airlock's grant ledger {} (the directories granted writable to servers) cannot be read: {err}. Fix: pass --config {} if the file is yours, or make the ledger readable",
                file.display(),
                ledger_path.display(),
                file.display()
            ));
        }
    };
    let granted = crate::sandbox::root::written_by_a_server(&file, &ledger)?;
    Some(format!(
        "{} was not loaded: --config was not given, and {} was granted writable to a server, which may have written it (airlock's grant ledger, {}). Fix: read it, then pass --config {} if it is yours, or start airlock serve from another directory",
        file.display(),
        granted.display(),
        ledger_path.display(),
        file.display()
    ))
}

/// Loads the config and the policy merged with its per-server blocks.
pub fn load(config: Option<&Path>, policy: Option<String>) -> Result<(Config, Policy), CliError> {
    let searched = config.is_none().then(default_config_places);
    let path = config_path(config);
    if config.is_none()
        && let Some(why) = written_by_a_server(&path)
    {
        return Err(CliError::Refused(why));
    }
    let config = crate::config::load_found(&path, searched.as_deref())?;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let policy = super::active_policy::load_active(policy, Some(&config))?;
    warn_of_misspelt_servers(&policy, &config);
    Ok((config, policy))
}

/// A rule naming a server one or two letters from a declared one does nothing: said at start
/// and at each reload (`airlock check` also lists rules for servers the config does not declare
/// at all, which a policy shared by many configs has).
fn warn_of_misspelt_servers(policy: &Policy, config: &Config) {
    let here = super::active_policy::server_names(config);
    for warning in crate::policy::names::misspelt_warnings(policy, &here) {
        tracing::warn!("{warning}");
    }
}

/// Everything the gateway runs, read from the files (at start, and at each reload).
struct Loaded {
    config: Config,
    policy: Arc<Policy>,
    redactor: Arc<Redactor>,
    specs: Vec<ServerSpec>,
    launches: Vec<Option<Launch>>,
    kill_timeout: Duration,
}

fn assemble(
    config: Config,
    policy: Policy,
    audit_path: Option<&Path>,
    max_line_bytes: usize,
) -> Result<Loaded, CliError> {
    let policy = Arc::new(policy);
    let redactor = Redactor::new(policy.audit.redact.iter().map(|r| r.value.as_str()))
        .map_err(|err| CliError::Refused(err.to_string()))?;
    let context = LaunchContext::detect_for(&policy, audit_path, &config);
    let mut specs = Vec::new();
    let mut launches = Vec::new();
    let mut kill_timeout = Duration::from_secs(policy.sandbox.kill_timeout.value);
    for server in config.servers.iter().filter(|s| s.enabled) {
        let launch = if server.transport == Transport::Stdio {
            prepare(server, &policy, &context).map(|prepared| {
                kill_timeout =
                    kill_timeout.max(Duration::from_secs(prepared.plan.kill_timeout_secs));
                Launch::Local(prepared)
            })
        } else {
            // No process, no sandbox: still gated and audited like every other server.
            RemoteTarget::new(server, max_line_bytes)
                .map(Launch::Remote)
                .map_err(|err| LaunchError::Refused(err.to_string()))
        };
        let (refused, launch) = match launch {
            Ok(launch) => (None, Some(launch)),
            Err(err) => {
                tracing::warn!(server = %server.name, "will not start: {err}");
                (Some(err.to_string()), None)
            }
        };
        let shown_paths = match &launch {
            Some(Launch::Local(prepared)) => Some(prepared.shown_paths()),
            _ => None,
        };
        let paths = match &launch {
            Some(Launch::Local(prepared)) => prepared.path_context(),
            _ => crate::policy::reading::PathContext {
                user_homes: crate::process::launch::user_homes(context.dirs.home.as_deref()),
                ..Default::default()
            },
        };
        // A package that is not cached yet is installed first (crate::fetch): its first start
        // may take that much longer.
        let fetching = matches!(&launch, Some(Launch::Local(prepared)) if prepared.needs_fetch());
        let install_allowance = if fetching {
            crate::fetch::step::FETCH_TIMEOUT
        } else {
            Duration::ZERO
        };
        specs.push(ServerSpec {
            name: server.name.clone(),
            startup_timeout: server.startup_timeout,
            install_allowance,
            tool_timeout: Some(server.tool_timeout),
            idle_timeout: server.idle_timeout,
            eager: server.start == StartMode::Eager,
            refused,
            paths,
            shown_paths,
        });
        launches.push(launch);
    }
    Ok(Loaded {
        config,
        policy,
        redactor: Arc::new(redactor),
        specs,
        launches,
        kill_timeout,
    })
}

/// Whether two launches start the same thing (command, arguments, environment, sandbox; for a
/// remote server its URL and header names).
fn same_launch(a: Option<&Launch>, b: Option<&Launch>) -> bool {
    match (a, b) {
        (Some(Launch::Local(a)), Some(Launch::Local(b))) => a.plan == b.plan,
        (Some(Launch::Remote(a)), Some(Launch::Remote(b))) => a.spawn_detail() == b.spawn_detail(),
        (None, None) => true,
        _ => false,
    }
}

/// Re-reads the same files the gateway started from.
struct FileReloader {
    config: PathBuf,
    /// Whether `--config` named it (else it was found in a default place): for the fix of a
    /// reload that cannot read it.
    config_given: bool,
    policy: Option<String>,
    /// `--audit` as given, to resolve the reloaded policy's audit target as the start did.
    audit_flag: Option<String>,
    /// Where the running gateway writes its audit log (`None`: stderr).
    audit_path: Option<PathBuf>,
    max_line_bytes: usize,
}

impl Reloader for FileReloader {
    fn reload(&mut self, running: &[(String, Option<Launch>)]) -> Result<ReloadPlan, ReloadError> {
        let searched = [self.config.clone()];
        if !self.config_given
            && let Some(why) = written_by_a_server(&self.config)
        {
            return Err(ReloadError(why));
        }
        let config =
            crate::config::load_found(&self.config, (!self.config_given).then_some(&searched[..]))
                .map_err(|err| ReloadError(err.to_string()))?;
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        let policy = super::active_policy::load_active(self.policy.clone(), Some(&config))
            .map_err(|err| ReloadError(err.to_string()))?;
        warn_of_misspelt_servers(&policy, &config);
        audit_stays_put(
            self.audit_flag.as_deref(),
            &policy,
            self.audit_path.as_deref(),
        )?;
        let loaded = assemble(
            config,
            policy,
            self.audit_path.as_deref(),
            self.max_line_bytes,
        )
        .map_err(|err| ReloadError(err.to_string()))?;
        let mut servers = Vec::new();
        let mut launches = Vec::new();
        for (spec, launch) in loaded.specs.into_iter().zip(loaded.launches) {
            let old = running.iter().find(|(name, _)| *name == spec.name);
            let launch_changed =
                old.is_none_or(|(_, old)| !same_launch(old.as_ref(), launch.as_ref()));
            launches.push((spec.name.clone(), launch));
            servers.push(Reloaded {
                spec,
                launch_changed,
            });
        }
        let mut event = policy_event("gateway", &loaded.policy);
        event.reason = Some(format!("reload of {}", loaded.config.path.display()));
        Ok(ReloadPlan {
            servers,
            launches,
            policy: loaded.policy,
            redactor: loaded.redactor,
            policy_event: event,
            kill_timeout: loaded.kill_timeout,
        })
    }
}

/// A reload cannot move the audit log (the gateway goes on writing where it started), so a
/// policy that would put it elsewhere is refused whole: taking the rest of it would put a policy
/// in force, and its digest in the log, whose `audit.path` is not what the gateway does.
fn audit_stays_put(
    flag: Option<&str>,
    policy: &Policy,
    running: Option<&Path>,
) -> Result<(), ReloadError> {
    let shown = |path: Option<&Path>| {
        path.map_or_else(|| "stderr".to_string(), |p| p.display().to_string())
    };
    let fix = "a reload cannot move the audit log. Fix: restart `airlock serve` to write it there, or put `audit.path` back";
    let target = resolve_target(flag, &policy.audit, &EnvVars::from_process())
        .map_err(|err| ReloadError(format!("{err}; {fix}")))?;
    let wanted = match &target {
        AuditTarget::File(path) => Some(path.as_path()),
        AuditTarget::Stderr => None,
    };
    if wanted == running {
        return Ok(());
    }
    Err(ReloadError(format!(
        "the reloaded policy puts the audit log at {}, and this gateway writes {}: {fix}",
        shown(wanted),
        shown(running)
    )))
}

/// The config's `[http]` section (none in a host's JSON file), validated as `serve` does.
pub(super) fn http_config(config: &Config) -> Result<HttpConfig, CliError> {
    Ok(match config.format {
        ConfigFormat::AirlockToml => {
            let tokens = UserDirs::from_env(&EnvVars::from_process()).token_store();
            crate::http::config::load(&config.path, &config.text, tokens)?
        }
        _ => HttpConfig::default(),
    })
}

/// The listener's settings for `listen`, refused when they would expose the gateway.
pub(super) fn checked_settings(
    http: &HttpConfig,
    listen: ListenAddr,
) -> Result<HttpSettings, CliError> {
    let settings = http.settings(listen);
    if let Err(err) = settings.check() {
        return Err(CliError::Refused(format!("{err}\n  fix: {}", err.fix())));
    }
    Ok(settings)
}

/// The listener's settings when serving over HTTP (`--listen`, or `[http] listen`).
fn http_settings(args: &ServeArgs, config: &Config) -> Result<Option<HttpSettings>, CliError> {
    let http = http_config(config)?;
    let listen = match &args.listen {
        Some(text) => Some(
            ListenAddr::parse(text)
                .map_err(|err| CliError::Refused(format!("--listen {text}: {err}")))?,
        ),
        None => http.listen.clone(),
    };
    let Some(listen) = listen else {
        if args.stdio {
            return Err(CliError::Refused(
                "--stdio goes with --listen (stdio alone is the default)".into(),
            ));
        }
        return Ok(None);
    };
    let settings = checked_settings(&http, listen)?;
    if let Some(store) = &settings.auth.tokens
        && !store.exists()
    {
        tracing::warn!(
            "the token store {} does not exist yet: every token is refused until `airlock token create NAME --file {}` makes one",
            store.display(),
            store.display()
        );
    }
    Ok(Some(settings))
}

pub fn run(args: ServeArgs) -> Result<ExitCode, CliError> {
    // From here on nothing waits for the host to read airlock's stderr.
    crate::session::stderr_queue::start();
    // The audit log comes from the first policy; a reload cannot move it.
    let (config, policy) = load(args.config.as_deref(), args.session.policy.clone())?;
    let http = http_settings(&args, &config)?;
    let (audit, audit_path) = open_audit(args.session.audit.as_deref(), &policy)?;
    let max_line_bytes = args.session.max_line_bytes();
    let loaded = assemble(config, policy, audit_path.as_deref(), max_line_bytes)?;
    let context = LaunchContext::detect_for(&loaded.policy, audit_path.as_deref(), &loaded.config);
    let control = match ControlSocket::bind(&context.dirs.state_dir) {
        Ok(control) => Some(control),
        Err(err) => {
            tracing::warn!(
                "no control socket (airlock status and reload will not see this gateway): {err}"
            );
            None
        }
    };
    let separator = loaded.config.separator.clone();
    let separator_for_http = separator.clone();
    let mut core = Core::new(
        Topology::Gateway { separator },
        loaded.specs,
        loaded.policy.clone(),
        loaded.redactor,
        args.session.show_denied,
        Instant::now(),
    );
    core.enable_pins(crate::pins::PinStore::in_state_dir(&context.dirs.state_dir));
    if http.is_some() {
        core.trust_identity_meta();
    }
    let mut event = policy_event("gateway", &loaded.policy);
    event.reason = Some(format!("config {}", loaded.config.path.display()));
    // A reload re-reads the file the gateway started from (it does not search again).
    let reloader = FileReloader {
        config: loaded.config.path.clone(),
        config_given: args.config.is_some(),
        policy: args.session.policy.clone(),
        audit_flag: args.session.audit.clone(),
        audit_path,
        max_line_bytes,
    };
    let session = Session {
        core,
        launches: loaded.launches,
        audit,
        policy_event: event,
        max_line_bytes,
        control,
        config_path: loaded.config.path.clone(),
        kill_timeout: loaded.kill_timeout,
        reloader: Some(Box::new(reloader)),
        host_output_closed: None,
        status_extra: None,
        outside_audit: None,
    };
    if let Some(settings) = http {
        let ended = super::listen::run(session, settings, separator_for_http, args.stdio)?;
        drop(ended);
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let ended = runtime.block_on(async {
        let (host_in, host_out) = host_stdio();
        let session = Session {
            host_output_closed: host_output_closed(),
            ..session
        };
        shell::run(session, host_in, host_out).await
    });
    // Tasks still holding children are dropped with the runtime: kill_on_drop and the helpers'
    // parent-death signal take any straggler down.
    drop(runtime);
    ended.map_err(|err| CliError::Failure(err.into()))?;
    Ok(ExitCode::SUCCESS)
}
