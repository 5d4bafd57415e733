//! `airlock pins list|diff|approve|reset SERVER [NAME]`: what airlock trusts of each server's
//! tools, prompts and resource templates, what changed, and a person's approval.
//!
//! NAME is a tool, prompt or resource template name (definitions of every kind with that name
//! are meant). Pins live in `$XDG_STATE_HOME/airlock/pins/SERVER.json`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Args, Subcommand};
use serde_json::json;

use super::CliError;
use crate::audit::event::rfc3339;
use crate::paths::EnvVars;
use crate::pins::diff::side_by_side;
use crate::pins::record::{Change, ServerPins};
use crate::pins::{Kind, PinStore};
use crate::sandbox::paths::AirlockDirs;

/// Review and approve changed tool, prompt and resource-template definitions.
#[derive(Debug, Args)]
#[command(
    after_help = "A definition that changed since it was pinned, or that is new, is hidden from the host and refused until approved.\n\nExamples:\n  airlock pins list\n  airlock pins diff fs write_file\n  airlock pins approve fs write_file\n  airlock pins approve fs          approve everything fs waits for (and the server, if quarantined)\n  airlock pins reset fs            forget fs: it is new again"
)]
pub struct PinsArgs {
    #[command(subcommand)]
    command: PinsCommand,
}

#[derive(Debug, Subcommand)]
enum PinsCommand {
    /// Every server with pins, or one server's definitions and their state.
    List {
        server: Option<String>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What changed: the pinned definition and the one waiting, side by side.
    Diff {
        server: String,
        name: Option<String>,
    },
    /// Trust what waits (all of it, or NAME) and the server itself.
    Approve {
        server: String,
        name: Option<String>,
    },
    /// Forget the server's pins (it is new again), or NAME's (pinned again on next sight).
    Reset {
        server: String,
        name: Option<String>,
    },
}

fn store() -> PinStore {
    let dirs = AirlockDirs::from_env(&EnvVars::from_process(), false);
    PinStore::in_state_dir(&dirs.state_dir)
}

fn now() -> String {
    rfc3339(SystemTime::now())
}

fn failure(err: crate::pins::PinError) -> CliError {
    CliError::Failure(anyhow::Error::new(err))
}

fn check_server(server: &str) -> Result<(), CliError> {
    crate::config::check_server_name(server, "__").map_err(|err| CliError::Refused(err.to_string()))
}

pub fn run(args: PinsArgs) -> Result<ExitCode, CliError> {
    let store = store();
    match args.command {
        PinsCommand::List { server, json } => list(&store, server.as_deref(), json),
        PinsCommand::Diff { server, name } => diff(&store, &server, name.as_deref()),
        PinsCommand::Approve { server, name } => approve(&store, &server, name.as_deref()),
        PinsCommand::Reset { server, name } => reset(&store, &server, name.as_deref()),
    }
}

fn state(record: &ServerPins) -> String {
    let pending = record.pending_count();
    match (&record.approved, pending) {
        (None, _) => format!("quarantined, {pending} waiting"),
        (Some(_), 0) => "ok".to_string(),
        (Some(_), n) => format!("{n} waiting for approval"),
    }
}

fn list(store: &PinStore, server: Option<&str>, json: bool) -> Result<ExitCode, CliError> {
    let servers = match server {
        Some(server) => {
            check_server(server)?;
            vec![server.to_string()]
        }
        None => store.servers().map_err(failure)?,
    };
    let mut records = Vec::new();
    for name in &servers {
        match store.load(name).map_err(failure)? {
            Some(record) => records.push(record),
            None if server.is_some() => {
                return Err(CliError::Refused(format!(
                    "no pins for server {name:?} (in {}). Its definitions are pinned when airlock first sees them",
                    store.dir().display()
                )));
            }
            None => {}
        }
    }
    if json {
        println!("{}", json!({ "servers": records }));
        return Ok(ExitCode::SUCCESS);
    }
    if records.is_empty() {
        println!("no pins yet (in {})", store.dir().display());
    }
    let mut out = String::new();
    for record in &records {
        let _ = writeln!(
            out,
            "{}: {} pinned, {}",
            record.server,
            record.pinned_count(),
            state(record)
        );
        if server.is_none() {
            continue;
        }
        for kind in Kind::ALL {
            let pinned = record.pinned.get(&kind);
            for (name, pin) in pinned.into_iter().flatten() {
                let status = match record.pending_for(kind, name) {
                    Some(_) => "CHANGED, waiting for approval",
                    None => "pinned",
                };
                let _ = writeln!(
                    out,
                    "  {:<18} {name:<32} {status:<30} sha256:{} {} ({})",
                    kind.noun(),
                    &pin.sha256[..12],
                    pin.pinned_at,
                    pin.by
                );
            }
            for (name, waiting) in record.pending.get(&kind).into_iter().flatten() {
                if waiting.change == Change::New {
                    let _ = writeln!(
                        out,
                        "  {:<18} {name:<32} {:<30} sha256:{} seen {}",
                        kind.noun(),
                        "NEW, waiting for approval",
                        &waiting.sha256[..12],
                        waiting.seen_at
                    );
                }
            }
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn load_existing(store: &PinStore, server: &str) -> Result<ServerPins, CliError> {
    check_server(server)?;
    store.load(server).map_err(failure)?.ok_or_else(|| {
        CliError::Refused(format!(
            "no pins for server {server:?} (in {}). Fix: check the name with `airlock pins list`",
            store.dir().display()
        ))
    })
}

fn diff(store: &PinStore, server: &str, name: Option<&str>) -> Result<ExitCode, CliError> {
    let record = load_existing(store, server)?;
    let width = 60;
    let mut out = String::new();
    let mut shown = 0;
    for (kind, waiting) in &record.pending {
        for (pending_name, pending) in waiting {
            if name.is_some_and(|wanted| wanted != pending_name) {
                continue;
            }
            shown += 1;
            let pin = record.pin(*kind, pending_name);
            let _ = writeln!(
                out,
                "{server}: {} \"{pending_name}\" {} (seen {})",
                kind.noun(),
                match pin {
                    Some(pin) => format!("changed since it was pinned {}", pin.pinned_at),
                    None => "is new".to_string(),
                },
                pending.seen_at
            );
            let lines = side_by_side(
                kind.pinned_fields(),
                pin.map(|p| &p.definition),
                &pending.definition,
                width,
            );
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            let _ = writeln!(
                out,
                "approve with: airlock pins approve {server} {pending_name}\n"
            );
        }
    }
    if shown == 0 {
        let what = name.map_or("nothing".to_string(), |n| format!("nothing named {n:?}"));
        println!(
            "{server}: {what} is waiting for approval ({})",
            state(&record)
        );
    } else {
        print!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}

fn approve(store: &PinStore, server: &str, name: Option<&str>) -> Result<ExitCode, CliError> {
    check_server(server)?;
    let now = now();
    let (was_quarantined, approved) = store
        .update(server, |record| {
            let mut record = record.unwrap_or_else(|| ServerPins::new(server, None));
            let was_quarantined = record.approved.is_none();
            let approved = record.approve(name, &now);
            (Some(record), (was_quarantined, approved))
        })
        .map_err(failure)?;
    if was_quarantined {
        println!("{server}: approved on this machine");
    }
    for (kind, approved_name) in &approved {
        println!(
            "{server}: {} \"{approved_name}\" approved and pinned",
            kind.noun()
        );
    }
    if let Some(name) = name
        && approved.is_empty()
    {
        return Err(CliError::Refused(format!(
            "server {server:?} has nothing named {name:?} waiting for approval. Fix: see `airlock pins diff {server}`"
        )));
    }
    if approved.is_empty() && !was_quarantined {
        println!("{server}: nothing was waiting for approval");
    }
    Ok(ExitCode::SUCCESS)
}

fn reset(store: &PinStore, server: &str, name: Option<&str>) -> Result<ExitCode, CliError> {
    load_existing(store, server)?;
    match name {
        None => {
            store.update(server, |_| (None, ())).map_err(failure)?;
            println!("{server}: pins forgotten; the server is new again");
        }
        Some(name) => {
            let forgotten = store
                .update(server, |record| {
                    let mut record = record.unwrap_or_else(|| ServerPins::new(server, None));
                    let forgotten = record.reset(name);
                    (Some(record), forgotten)
                })
                .map_err(failure)?;
            if forgotten.is_empty() {
                return Err(CliError::Refused(format!(
                    "server {server:?} has no pin named {name:?}. Fix: see `airlock pins list {server}`"
                )));
            }
            for kind in forgotten {
                println!(
                    "{server}: {} \"{name}\" forgotten; it is pinned again the next time it is seen",
                    kind.noun()
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
