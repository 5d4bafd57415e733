//! `airlock status`: what each running `airlock serve` says about its servers, read from the
//! owner-only control sockets in the state directory.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::CliError;
use crate::gateway::control::{gateways_dir, query_all};
use crate::sandbox::{AirlockDirs, HostFacts};

/// Show every running gateway's servers: state, tools, restarts, last call, last error.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  airlock status\n  airlock status --json")]
pub struct StatusArgs {
    /// Print the raw status documents (one JSON array).
    #[arg(long)]
    pub json: bool,
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The human table of one gateway's status.
pub fn render(status: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gateway pid {} (config {}, since {})",
        text(&status["pid"]),
        text(&status["config"]),
        text(&status["started"])
    );
    let _ = writeln!(
        out,
        "  {:<20} {:<9} {:>5} {:>8} {:>6}  {:<27} LAST ERROR",
        "SERVER", "STATE", "TOOLS", "RESTARTS", "CALLS", "LAST CALL"
    );
    for server in status["servers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  {:<20} {:<9} {:>5} {:>8} {:>6}  {:<27} {}",
            text(&server["name"]),
            text(&server["state"]),
            text(&server["tools"]),
            text(&server["restarts"]),
            text(&server["calls"]),
            text(&server["last_call"]),
            text(&server["last_error"])
        );
    }
    out
}

pub fn run(args: StatusArgs) -> Result<ExitCode, CliError> {
    let env: Vec<(String, String)> = crate::paths::EnvVars::from_process().into_pairs();
    let dirs = AirlockDirs::from_env(&env, HostFacts::detect().is_root);
    let reports = query_all(&dirs.state_dir, Duration::from_secs(5)).map_err(|err| {
        CliError::Failure(anyhow::anyhow!(
            "cannot read {}: {err}",
            gateways_dir(&dirs.state_dir).display()
        ))
    })?;
    if reports.is_empty() {
        eprintln!(
            "airlock: no running `airlock serve` found (looked in {})",
            gateways_dir(&dirs.state_dir).display()
        );
        return Ok(ExitCode::from(super::EXIT_FAILURE));
    }
    if args.json {
        let all: Vec<Value> = reports
            .iter()
            .map(|r| match &r.status {
                Ok(status) => status.clone(),
                Err(err) => {
                    serde_json::json!({"socket": r.socket.display().to_string(), "error": err})
                }
            })
            .collect();
        println!("{}", Value::Array(all));
        return Ok(ExitCode::SUCCESS);
    }
    for report in &reports {
        match &report.status {
            Ok(status) => print!("{}", render(status)),
            Err(err) => println!("gateway at {}: no answer ({err})", report.socket.display()),
        }
    }
    Ok(ExitCode::SUCCESS)
}
