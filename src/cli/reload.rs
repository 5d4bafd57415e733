//! `airlock reload`: asks every running `airlock serve` of this user to re-read its config and
//! policies, as SIGHUP does, and prints what each did (a bad file keeps the running state).

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::CliError;
use crate::gateway::control::{Request, ask_all, gateways_dir};
use crate::sandbox::{AirlockDirs, HostFacts};

/// Make every running gateway re-read its config and policies (like SIGHUP).
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  airlock reload")]
pub struct ReloadArgs {}

pub fn run(_args: ReloadArgs) -> Result<ExitCode, CliError> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let dirs = AirlockDirs::from_env(&env, HostFacts::detect().is_root);
    let dir = gateways_dir(&dirs.state_dir);
    let reports =
        ask_all(&dirs.state_dir, Request::Reload, Duration::from_secs(30)).map_err(|err| {
            CliError::Failure(anyhow::anyhow!("cannot read {}: {err}", dir.display()))
        })?;
    // `airlock run` sessions answer too; they have nothing to reload.
    let reports: Vec<_> = reports
        .into_iter()
        .filter(|r| !matches!(&r.status, Ok(answer) if answer["skipped"] == Value::Bool(true)))
        .collect();
    if reports.is_empty() {
        eprintln!(
            "airlock: no running `airlock serve` found (looked in {})",
            dir.display()
        );
        return Ok(ExitCode::from(super::EXIT_FAILURE));
    }
    let mut failed = false;
    for report in &reports {
        // The gateway by its config and pid (its socket is named `<pid>.sock`).
        let socket = match (&report.status, report.socket.file_stem()) {
            (Ok(answer), Some(pid)) if answer["config"].is_string() => format!(
                "{} (gateway pid {})",
                answer["config"].as_str().unwrap_or_default(),
                pid.to_string_lossy()
            ),
            _ => report.socket.display().to_string(),
        };
        match &report.status {
            Ok(answer) if answer["reloaded"] == Value::Bool(true) => println!(
                "{socket}: reloaded (started {}, retiring {}, unchanged {})",
                answer["started"], answer["retiring"], answer["unchanged"]
            ),
            Ok(answer) => {
                failed = true;
                // The gateway's own words, lines and all (not a JSON string with its quotes).
                let why = match &answer["error"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                println!("{socket}: not reloaded: {why}");
            }
            Err(err) => {
                failed = true;
                println!("{socket}: no answer ({err})");
            }
        }
    }
    Ok(if failed {
        ExitCode::from(super::EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}
