//! `airlock audit`: read the audit log as a person. `show` (the default) prints records, one a
//! line, filtered, optionally following the file as it grows; `summary` gives per-server figures;
//! `verify` proves the log's hash chain and its end against the checkpoint.
//!
//! The log is `--file`/`FILE`, else where `run` and `serve` write it (the policy's `audit.path`,
//! else `$XDG_STATE_HOME/airlock/audit.jsonl`). `show` and `summary` read its rotated files
//! beside it first, oldest first; `verify` proves one file and its link to the one before.

mod show;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Args, Subcommand};

use super::CliError;
use crate::audit::query::{Filter, parse_time};
use crate::audit::{AuditTarget, resolve_target};
use crate::paths::EnvVars;
use crate::policy::pattern::Glob;

/// Show, summarise or verify the audit log.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  airlock audit -f --server fs              follow calls to server fs\n  airlock audit --decision deny --since 1h   denials of the last hour\n  airlock audit summary --since 7d\n  airlock audit verify ~/.local/state/airlock/audit.jsonl"
)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    #[command(flatten)]
    show: show::ShowArgs,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Print records, one a line (the default).
    Show(show::ShowArgs),
    /// Per server: calls, denials, errors, p50/p95 duration, starts, network connections allowed/refused.
    Summary(show::SummaryArgs),
    /// Prove the log: its hash chain, and its end against the checkpoint beside it. Exits 1 at
    /// the first edited, inserted, reordered or deleted record, or a cut tail.
    Verify(verify::VerifyArgs),
}

/// The filters `show` and `summary` share.
#[derive(Debug, Args, Default)]
pub struct FilterArgs {
    /// Server name (`*` and `?` allowed).
    #[arg(long)]
    server: Option<String>,
    /// Tool name (`*` and `?` allowed).
    #[arg(long)]
    tool: Option<String>,
    /// allow, ask or deny (decision records).
    #[arg(long, value_parser = ["allow", "ask", "deny"])]
    decision: Option<String>,
    /// ok, error, denied, timeout or cancelled (outcome records).
    #[arg(long, value_parser = ["ok", "error", "denied", "timeout", "cancelled"])]
    outcome: Option<String>,
    /// Authenticated identity of the caller (`*` and `?` allowed).
    #[arg(long)]
    identity: Option<String>,
    /// Session id, or its first characters.
    #[arg(long)]
    session: Option<String>,
    /// Event kind: policy, spawn, decision, elicitation, outcome, dropped, exit.
    #[arg(long)]
    event: Option<String>,
    /// From this time on: RFC 3339 (`2026-03-01T12:00:00Z`), a date, or an age (`30m`, `2h`, `7d`).
    #[arg(long)]
    since: Option<String>,
    /// Before this time (same forms as --since).
    #[arg(long)]
    until: Option<String>,
}

impl FilterArgs {
    fn filter(&self) -> Result<Filter, CliError> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or_default();
        let time = |flag: &str, value: &Option<String>| -> Result<Option<i64>, CliError> {
            value
                .as_deref()
                .map(|text| {
                    parse_time(text, now).ok_or_else(|| {
                        CliError::Refused(format!(
                            "{flag} {text:?} is not a time. Fix: write RFC 3339 (2026-03-01T12:00:00Z), a date (2026-03-01) or an age (30m, 2h, 7d)"
                        ))
                    })
                })
                .transpose()
        };
        Ok(Filter {
            server: self.server.as_deref().map(Glob::parse),
            tool: self.tool.as_deref().map(Glob::parse),
            decision: self.decision.clone(),
            outcome: self.outcome.clone(),
            identity: self.identity.as_deref().map(Glob::parse),
            session: self.session.clone(),
            event: self.event.clone(),
            since: time("--since", &self.since)?,
            until: time("--until", &self.until)?,
        })
    }
}

/// The files that hold the log's records, oldest first: the rotated files of its chain that are
/// still there, each `(path, None)` (opened when it is read, by [`open_in_turn`], so a long
/// history does not take a descriptor a file), then the log itself, opened first (a rotation
/// while this reads hides no file). Read from the chain, not from names
/// (`audit::rotate::chain_of`): a file that only looks rotated is not history.
fn files_of(path: &std::path::Path) -> Result<Vec<(PathBuf, Option<std::fs::File>)>, CliError> {
    let history = crate::audit::rotate::chain_of(path).map_err(|err| {
        CliError::Refused(format!(
            "cannot read the audit log {}: {err}. Fix: pass the log's path, or check audit.path in the policy",
            path.display()
        ))
    })?;
    let mut files: Vec<(PathBuf, Option<std::fs::File>)> = history
        .rotated
        .into_iter()
        .map(|rotated| (rotated, None))
        .collect();
    files.push((path.to_path_buf(), Some(history.log)));
    Ok(files)
}

/// One entry of [`files_of`], opened: `None`, with a note, for a rotated file deleted since
/// (retention deletes the oldest at each rotation).
fn open_in_turn(
    (path, opened): (PathBuf, Option<std::fs::File>),
) -> Result<Option<(PathBuf, std::fs::File)>, CliError> {
    if let Some(file) = opened {
        return Ok(Some((path, file)));
    }
    match std::fs::File::open(&path) {
        Ok(file) => Ok(Some((path, file))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "airlock: {} was deleted (audit.keep_rotated) while this read the log; its records are not shown",
                path.display()
            );
            Ok(None)
        }
        Err(err) => Err(CliError::Refused(format!(
            "cannot read the rotated audit file {}: {err}",
            path.display()
        ))),
    }
}

/// The log to read: the one given, else the one `run` and `serve` write to.
fn log_path(given: Option<PathBuf>) -> Result<PathBuf, CliError> {
    if let Some(path) = given {
        return Ok(path);
    }
    let policy = super::active_policy::load_active(None, None)?;
    match resolve_target(None, &policy.audit, &EnvVars::from_process())
        .map_err(|err| CliError::Refused(err.to_string()))?
    {
        AuditTarget::File(path) => Ok(path),
        AuditTarget::Stderr => Err(CliError::Refused(
            "the audit log goes to stderr; there is no file to read. Fix: pass FILE".into(),
        )),
    }
}

pub fn run(args: AuditArgs) -> Result<ExitCode, CliError> {
    match args.command {
        None => show::show(args.show),
        Some(AuditCommand::Show(show_args)) => show::show(show_args),
        Some(AuditCommand::Summary(summary_args)) => show::summary(summary_args),
        Some(AuditCommand::Verify(verify_args)) => verify::verify(verify_args),
    }
}
