//! `airlock status`: what each running `airlock run` and `airlock serve` says about its servers,
//! read from the owner-only control sockets in the state directory (both register one).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::CliError;
use crate::gateway::control::{gateways_dir, query_all};
use crate::sandbox::{AirlockDirs, HostFacts};

/// Show every running `airlock run` and gateway: servers, pids, uptime, calls, denials, last error.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  airlock status\n  airlock status --json\n\nExit status: 0, also when nothing is running (then an empty list: `[]` with --json)."
)]
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

/// `3d4h`, `2h05m`, `4m09s`, `12s`: an uptime at a glance.
pub fn uptime(seconds: u64) -> String {
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, _) => format!("{minutes}m{secs:02}s"),
        (0, _, _) => format!("{hours}h{minutes:02}m"),
        _ => format!("{days}d{hours}h"),
    }
}

fn uptime_of(status: &Value) -> String {
    status["uptime_s"]
        .as_u64()
        .map_or_else(|| "-".to_string(), uptime)
}

/// One table for every `airlock run`: one server each.
pub fn render_runs(runs: &[&Value]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "airlock run ({})", runs.len());
    let _ = writeln!(
        out,
        "  {:>8} {:<20} {:<9} {:>10} {:>8} {:>6} {:>7}  LAST ERROR",
        "PID", "SERVER", "STATE", "SERVER PID", "UPTIME", "CALLS", "DENIALS"
    );
    for status in runs {
        for server in status["servers"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "  {:>8} {:<20} {:<9} {:>10} {:>8} {:>6} {:>7}  {}",
                text(&status["pid"]),
                text(&server["name"]),
                text(&server["state"]),
                text(&server["pid"]),
                uptime_of(status),
                text(&server["calls"]),
                text(&server["denials"]),
                text(&server["last_error"])
            );
        }
    }
    out
}

/// The human table of one gateway's status.
pub fn render(status: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gateway pid {} (config {}, since {}, up {})",
        text(&status["pid"]),
        text(&status["config"]),
        text(&status["started"]),
        uptime_of(status)
    );
    if let Some(listen) = status.get("listen") {
        let sessions = text(&listen["sessions"]);
        let noun = if sessions == "1" {
            "session"
        } else {
            "sessions"
        };
        let _ = writeln!(
            out,
            "  listening at {} ({sessions} open {noun})",
            text(&listen["url"])
        );
    }
    let _ = writeln!(
        out,
        "  {:<20} {:<9} {:>5} {:>8} {:>6} {:>7}  {:<27} LAST ERROR",
        "SERVER", "STATE", "TOOLS", "RESTARTS", "CALLS", "DENIALS", "LAST CALL"
    );
    for server in status["servers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  {:<20} {:<9} {:>5} {:>8} {:>6} {:>7}  {:<27} {}",
            text(&server["name"]),
            text(&server["state"]),
            text(&server["tools"]),
            text(&server["restarts"]),
            text(&server["calls"]),
            text(&server["denials"]),
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
    // Nothing running is an answer, not a failure: an empty list (exit 0), said on stderr.
    if reports.is_empty() {
        eprintln!(
            "airlock: no running `airlock run` or `airlock serve` found (looked in {})",
            gateways_dir(&dirs.state_dir).display()
        );
        if args.json {
            println!("[]");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        let all: Vec<Value> = reports
            .iter()
            .map(|r| match &r.status {
                Ok(status) => status.clone(),
                Err(err) => {
                    serde_json::json!({"socket": r.socket.display().to_string(), "error": err.to_string()})
                }
            })
            .collect();
        println!("{}", Value::Array(all));
        return Ok(ExitCode::SUCCESS);
    }
    let answered: Vec<&Value> = reports
        .iter()
        .filter_map(|r| r.status.as_ref().ok())
        .collect();
    let runs: Vec<&Value> = answered
        .iter()
        .copied()
        .filter(|status| status["mode"] == "run")
        .collect();
    if !runs.is_empty() {
        print!("{}", render_runs(&runs));
    }
    for status in answered.iter().filter(|status| status["mode"] != "run") {
        print!("{}", render(status));
    }
    for report in &reports {
        if let Err(err) = &report.status {
            println!("instance at {}: no answer ({err})", report.socket.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptimes_read_at_a_glance() {
        assert_eq!(uptime(9), "9s");
        assert_eq!(uptime(249), "4m09s");
        assert_eq!(uptime(7_500), "2h05m");
        assert_eq!(uptime(3 * 86_400 + 4 * 3600 + 59), "3d4h");
    }

    #[test]
    fn runs_share_one_table_with_pid_calls_and_denials() {
        let status = serde_json::json!({"pid": 42, "mode": "run", "uptime_s": 61, "servers": [
            {"name": "fs", "state": "ready", "pid": 43, "calls": 5, "denials": 2, "last_error": null}
        ]});
        let table = render_runs(&[&status]);
        let row = table.lines().nth(2).unwrap();
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(words, ["42", "fs", "ready", "43", "1m01s", "5", "2", "-"]);
    }
}
