//! What the two commands that carry a live MCP session (`run` and `serve`) share: their common
//! options, the audit log they open, and the host's stdio as async streams.

use std::os::fd::AsFd;
use std::path::PathBuf;

use clap::Args;
use tokio::io::{AsyncRead, AsyncWrite};

use super::CliError;
use crate::audit::{AuditLog, AuditTarget, Event, EventKind, resolve_target};
use crate::mcp::DEFAULT_MAX_LINE_BYTES;
use crate::paths::EnvVars;
use crate::policy::Policy;

/// Options of every gated session.
#[derive(Debug, Args)]
pub struct SessionOptions {
    /// User policy file or preset (default: $XDG_CONFIG_HOME/airlock/policy.toml).
    #[arg(long)]
    pub policy: Option<String>,
    /// Audit log file, or `-` for stderr (default: policy `audit.path`, else
    /// $XDG_STATE_HOME/airlock/audit.jsonl). Refused if the org policy pins another path.
    #[arg(long)]
    pub audit: Option<String>,
    /// Maximum size of one MCP message (one line) in bytes, either direction.
    #[arg(long, default_value_t = DEFAULT_MAX_LINE_BYTES as u64, value_parser = clap::value_parser!(u64).range(1024..=1 << 30))]
    pub max_line_bytes: u64,
    /// Keep denied tools in `tools/list` results (calling them is still denied).
    #[arg(long)]
    pub show_denied: bool,
}

impl SessionOptions {
    pub fn max_line_bytes(&self) -> usize {
        usize::try_from(self.max_line_bytes).unwrap_or(DEFAULT_MAX_LINE_BYTES)
    }
}

/// Opens the audit log `--audit` or the policy names (an org-pinned path cannot be overridden).
pub fn open_audit(
    cli: Option<&str>,
    policy: &Policy,
) -> Result<(AuditLog, Option<PathBuf>), CliError> {
    let target = resolve_target(cli, &policy.audit, &EnvVars::from_process())
        .map_err(|err| CliError::Refused(err.to_string()))?;
    match target {
        AuditTarget::Stderr => Ok((AuditLog::stderr(), None)),
        AuditTarget::File(path) => {
            let mut log = AuditLog::open_file(&path)
                .map_err(|err| CliError::Failure(anyhow::Error::new(err)))?;
            log.rotate_at(crate::audit::rotate::Rotation::from_policy(
                policy.audit.rotate_mb.value,
                policy.audit.keep_rotated.value,
            ));
            // A device every server's own /dev holds (`/dev/null`, `/dev/zero`, ...) has
            // nothing of the user's to keep from the server, and as a protected path it would
            // have each sandbox refuse to start.
            if let Some(device) = servers_own_device(&path) {
                if device != std::path::Path::new("/dev/full") {
                    tracing::warn!(
                        "the audit log is {}: no record of the calls is kept",
                        path.display()
                    );
                }
                return Ok((log, None));
            }
            Ok((log, Some(path)))
        }
    }
}

/// The device the audit log at `path` is (however reached), when it is one of those every
/// server's `/dev` holds: all but `/dev/full` (whose writes fail) keep nothing written to them.
fn servers_own_device(path: &std::path::Path) -> Option<PathBuf> {
    std::fs::canonicalize(path)
        .ok()
        .filter(|real| crate::sandbox::is_servers_own_device(real))
}

/// The audit log `run` and `serve` would open without `--audit`, expanded as they expand it, for
/// the commands that only look (`check`, `doctor`): an unexpandable `audit.path` is the same
/// error here as there. `None` when there is no default location at all.
pub fn policy_audit_path(policy: &Policy) -> Result<Option<PathBuf>, CliError> {
    match resolve_target(None, &policy.audit, &EnvVars::from_process()) {
        Ok(AuditTarget::File(path)) => Ok(Some(path)),
        Ok(AuditTarget::Stderr) | Err(crate::audit::TargetError::NoDefault) => Ok(None),
        Err(err) => Err(CliError::Refused(err.to_string())),
    }
}

/// The session's first audit event: the merged policy in force (its digest and the files it
/// came from). `server` is the server's name in `run`, `gateway` in `serve`.
pub fn policy_event(server: &str, policy: &Policy) -> Event {
    let mut event = Event::new(EventKind::Policy, server);
    event.detail =
        Some(serde_json::json!({"digest": policy.digest, "sources": policy.source_names()}));
    event
}

/// airlock's stdin and stdout as async streams. Pipes (the normal case under a host) are driven
/// by the reactor directly; anything else (a terminal, a file) falls back to tokio's blocking
/// stdio.
pub fn host_stdio() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    use tokio::net::unix::pipe;
    let input: Box<dyn AsyncRead + Unpin + Send> = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok())
    {
        Some(receiver) => Box::new(receiver),
        None => Box::new(tokio::io::stdin()),
    };
    let output: Box<dyn AsyncWrite + Unpin + Send> = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok())
    {
        Some(sender) => Box::new(sender),
        None => Box::new(tokio::io::stdout()),
    };
    (input, output)
}
