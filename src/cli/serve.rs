//! `airlock serve --config airlock.toml`: every configured server behind one MCP server on
//! stdio, each confined, gated and audited, with lifecycle supervision (see `docs/serve.md`).
//!
//! stdout carries only MCP; logs go to stderr. Exit status: 0 when the host closed the
//! connection or airlock was told to stop (SIGTERM, SIGINT); 2 for a bad config or policy;
//! 1 for a failure (e.g. the audit log cannot be written).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::CliError;
use super::session::{SessionOptions, host_stdio, open_audit};
use crate::audit::Redactor;
use crate::config::{Config, StartMode, Transport};
use crate::gateway::control::ControlSocket;
use crate::gateway::remote::{Launch, RemoteTarget};
use crate::gateway::shell::{self, Gateway};
use crate::gateway::{Router, ServerSpec};
use crate::paths::{EnvVars, UserDirs};
use crate::policy::Policy;
use crate::process::launch::{LaunchContext, prepare};
use anyhow::Context;
use clap::Args;

/// Serve every configured server to one host as a single MCP server (stdio).
#[derive(Debug, Args)]
#[command(
    after_help = "Example (in a host's MCP config):\n  \"command\": \"airlock\",\n  \"args\": [\"serve\", \"--config\", \"/home/me/.config/airlock/airlock.toml\"]\n\nThen, from a terminal: airlock status"
)]
pub struct ServeArgs {
    /// Server config: airlock.toml, or an mcpServers/servers JSON file (default: ./airlock.toml,
    /// else $XDG_CONFIG_HOME/airlock/airlock.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub session: SessionOptions,
}

/// `--config`, else `./airlock.toml`, else `$XDG_CONFIG_HOME/airlock/airlock.toml`.
pub fn config_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    let local = PathBuf::from("airlock.toml");
    if local.is_file() {
        return local;
    }
    UserDirs::from_env(&EnvVars::from_process())
        .default_server_config()
        .unwrap_or(local)
}

/// Loads the config and the policy merged with its per-server blocks.
pub fn load(config: Option<&Path>, policy: Option<String>) -> Result<(Config, Policy), CliError> {
    let config = crate::config::load_file(&config_path(config))?;
    for warning in &config.warnings {
        tracing::warn!("{}: {warning}", config.path.display());
    }
    let policy = super::active_policy::load_active(policy, Some(&config))?;
    Ok((config, policy))
}

pub fn run(args: ServeArgs) -> Result<ExitCode, CliError> {
    let (config, policy) = load(args.config.as_deref(), args.session.policy.clone())?;
    let policy = Arc::new(policy);
    let redactor = Redactor::new(policy.audit.redact.iter().map(|r| r.value.as_str()))
        .map_err(|err| CliError::Refused(err.to_string()))?;
    let (audit, audit_path) = open_audit(args.session.audit.as_deref(), &policy)?;
    let context = LaunchContext::detect(&policy, audit_path.as_deref(), &config.path);

    let mut specs = Vec::new();
    let mut launches = Vec::new();
    let mut kill_timeout = Duration::from_secs(policy.sandbox.kill_timeout.value);
    let max_line_bytes = args.session.max_line_bytes();
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
                .map_err(|err| crate::process::launch::LaunchError::Refused(err.to_string()))
        };
        let (refused, launch) = match launch {
            Ok(launch) => (None, Some(launch)),
            Err(err) => {
                tracing::warn!(server = %server.name, "will not start: {err}");
                (Some(err.to_string()), None)
            }
        };
        specs.push(ServerSpec {
            name: server.name.clone(),
            startup_timeout: server.startup_timeout,
            tool_timeout: Some(server.tool_timeout),
            idle_timeout: server.idle_timeout,
            eager: server.start == StartMode::Eager,
            refused,
        });
        launches.push(launch);
    }
    let router = Router::new(
        specs,
        &config.separator,
        policy.clone(),
        Arc::new(redactor),
        args.session.show_denied,
        Instant::now(),
    );
    let control = match ControlSocket::bind(&context.dirs.state_dir) {
        Ok(control) => Some(control),
        Err(err) => {
            tracing::warn!("no status socket (airlock status will not see this gateway): {err}");
            None
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let gateway = Gateway {
        router,
        launches,
        audit,
        max_line_bytes,
        control,
        config_path: config.path.clone(),
        kill_timeout,
    };
    let ended = runtime.block_on(async {
        let (host_in, host_out) = host_stdio();
        shell::run(gateway, host_in, host_out).await
    });
    // Tasks still holding children are dropped with the runtime: kill_on_drop and the helpers'
    // parent-death signal take any straggler down.
    drop(runtime);
    ended.map_err(|err| CliError::Failure(err.into()))?;
    Ok(ExitCode::SUCCESS)
}
