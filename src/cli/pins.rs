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
use crate::pins::record::{Approved, Change, REVIEWED_HASH_DIGITS, Review, ServerPins, Unreviewed};
use crate::pins::{Kind, PinStore};
use crate::sandbox::paths::AirlockDirs;
use crate::session::shell::stderr::shown;

/// Review and approve changed tool, prompt and resource-template definitions.
#[derive(Debug, Args)]
#[command(
    after_help = "A definition that changed since it was pinned, or that is new, is hidden from the host and refused until approved. `diff` prints a hash of each waiting definition; `approve --hash` takes it and refuses anything else, so what is approved is what was reviewed. Without --hash, approve shows what waits and asks (on a terminal), or refuses (elsewhere; --yes approves unreviewed).\n\nExamples:\n  airlock pins list\n  airlock pins diff fs write_file\n  airlock pins approve fs write_file --hash <the 64 hex digits diff printed>\n  airlock pins approve fs          approve everything fs waits for (and the server, if quarantined)\n  airlock pins reset fs            forget fs: it is new again"
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
    /// Trust what waits (all of it and the server itself, or NAME only), as reviewed.
    Approve {
        server: String,
        name: Option<String>,
        /// The hash `airlock pins diff` printed for a definition you reviewed (repeat for
        /// several): anything waiting that is not one of them is refused, so a server that
        /// changed again after your review is not approved.
        #[arg(long = "hash", value_name = "SHA256")]
        hashes: Vec<String>,
        /// Approve whatever waits now, unreviewed (for scripts).
        #[arg(long, conflicts_with = "hashes")]
        yes: bool,
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
        PinsCommand::Approve {
            server,
            name,
            hashes,
            yes,
        } => approve(&store, &server, name.as_deref(), &hashes, yes),
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
                let waiting = record.pending_for(kind, name);
                let name = shown(name);
                let status = match waiting {
                    Some(_) => "CHANGED, waiting for approval",
                    None => "pinned",
                };
                let _ = write!(
                    out,
                    "  {:<18} {name:<32} {status:<30} sha256:{} {} ({})",
                    kind.noun(),
                    &pin.sha256[..12],
                    pin.pinned_at,
                    pin.by
                );
                // The hash `approve --hash` takes, as for a new definition.
                match waiting {
                    Some(waiting) => {
                        let _ = writeln!(
                            out,
                            "; waiting sha256:{} seen {}",
                            short(&waiting.sha256),
                            waiting.seen_at
                        );
                    }
                    None => out.push('\n'),
                }
            }
            for (name, waiting) in record.pending.get(&kind).into_iter().flatten() {
                let name = shown(name);
                if waiting.change == Change::New {
                    let _ = writeln!(
                        out,
                        "  {:<18} {name:<32} {:<30} sha256:{} seen {}",
                        kind.noun(),
                        "NEW, waiting for approval",
                        short(&waiting.sha256),
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
    match render_diff(&record, name) {
        Some(out) => print!("{out}"),
        None => {
            let what = name.map_or("nothing".to_string(), |n| format!("nothing named {n:?}"));
            println!(
                "{server}: {what} is waiting for approval ({})",
                state(&record)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A hash as `diff` prints it and `approve --hash` takes it: all of it.
fn short(sha256: &str) -> &str {
    sha256.get(..REVIEWED_HASH_DIGITS).unwrap_or(sha256)
}

/// What waits (called `name`, or all of it), the pinned definition beside each, with the hash
/// and the command that approves exactly that; `None` when nothing waits.
fn render_diff(record: &ServerPins, name: Option<&str>) -> Option<String> {
    let server = &record.server;
    let width = 60;
    let mut out = String::new();
    let mut hashes = Vec::new();
    for (kind, pending_name, pending) in record.waiting(name) {
        let pin = record.pin(kind, pending_name);
        let hash = short(&pending.sha256);
        // A name is the server's text too: escapes and invisible characters as codes.
        let pending_name = shown(pending_name);
        hashes.push(hash);
        let _ = writeln!(
            out,
            "{server}: {} \"{pending_name}\" {} (seen {}, sha256:{hash})",
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
            "approve with: airlock pins approve {server} {pending_name} --hash {hash}\n"
        );
    }
    if name.is_none() && hashes.len() > 1 {
        let all: Vec<String> = hashes.iter().map(|h| format!("--hash {h}")).collect();
        let _ = writeln!(
            out,
            "approve all of it with: airlock pins approve {server} {}",
            all.join(" ")
        );
    }
    (!hashes.is_empty()).then_some(out)
}

fn approve(
    store: &PinStore,
    server: &str,
    name: Option<&str>,
    hashes: &[String],
    yes: bool,
) -> Result<ExitCode, CliError> {
    check_server(server)?;
    if let Some(bad) = hashes.iter().find(|h| !is_hash_prefix(h)) {
        return Err(CliError::Refused(format!(
            "--hash {bad:?} is not a hash as `airlock pins diff` prints it ({REVIEWED_HASH_DIGITS} hex digits). Fix: copy it from `airlock pins diff {server}`"
        )));
    }
    let shown;
    let review = if yes {
        Review::Anything
    } else if !hashes.is_empty() {
        Review::Hashes(hashes)
    } else {
        // Nothing reviewed yet: show what waits now and ask, then approve exactly that.
        match reviewed_here(store, server, name)? {
            Some(reviewed) => {
                shown = reviewed;
                Review::Hashes(&shown)
            }
            None => return Ok(ExitCode::from(crate::cli::EXIT_FAILURE)),
        }
    };
    let now = now();
    let approved = store
        .update(server, |record| {
            let mut record = record.unwrap_or_else(|| ServerPins::new(server, None));
            match record.approve(name, &review, &now) {
                Ok(approved) => (Some(record), Ok(approved)),
                Err(unreviewed) => (Some(record), Err(unreviewed)),
            }
        })
        .map_err(failure)?;
    let approved = approved.map_err(|unreviewed| not_reviewed(server, &unreviewed))?;
    report_approval(store, server, name, &approved)
}

/// The refusal when what waits is not what was reviewed.
fn not_reviewed(server: &str, unreviewed: &[Unreviewed]) -> CliError {
    let list: Vec<String> = unreviewed
        .iter()
        .map(|u| {
            format!(
                "{} \"{}\" (sha256:{})",
                u.kind.noun(),
                u.name,
                short(&u.sha256)
            )
        })
        .collect();
    CliError::Refused(format!(
        "nothing approved: what waits is not what you reviewed: {}. The server may have changed again since. Fix: review it with `airlock pins diff {server}` and approve with the hashes it prints",
        list.join(", ")
    ))
}

fn report_approval(
    store: &PinStore,
    server: &str,
    name: Option<&str>,
    approved: &Approved,
) -> Result<ExitCode, CliError> {
    if approved.server {
        println!("{server}: approved on this machine");
    }
    for (kind, approved_name) in &approved.definitions {
        println!(
            "{server}: {} \"{approved_name}\" approved and pinned",
            kind.noun()
        );
    }
    if let Some(name) = name {
        if approved.definitions.is_empty() {
            return Err(CliError::Refused(format!(
                "server {server:?} has nothing named {name:?} waiting for approval. Fix: see `airlock pins diff {server}`"
            )));
        }
        let quarantined = store
            .load(server)
            .map_err(failure)?
            .is_some_and(|record| record.approved.is_none());
        if quarantined {
            println!(
                "{server}: still quarantined: only what was approved by name is exposed (`airlock pins approve {server}` approves the server)"
            );
        }
    } else if approved.definitions.is_empty() && !approved.server {
        println!("{server}: nothing was waiting for approval");
    }
    Ok(ExitCode::SUCCESS)
}

fn is_hash_prefix(text: &str) -> bool {
    text.len() == REVIEWED_HASH_DIGITS && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `approve` without `--hash` or `--yes`: on a terminal, the diff of what waits now and a
/// question; the hashes shown when the person says yes (`None`: they did not). Elsewhere a
/// refusal: nobody reviewed anything.
fn reviewed_here(
    store: &PinStore,
    server: &str,
    name: Option<&str>,
) -> Result<Option<Vec<String>>, CliError> {
    use std::io::{BufRead, IsTerminal, Write};
    // One snapshot: what is shown is what the hashes approve.
    let Some(record) = store.load(server).map_err(failure)? else {
        // Nothing to review: a server approved before it ever runs.
        return Ok(Some(Vec::new()));
    };
    let waiting: Vec<String> = record
        .waiting(name)
        .map(|(_, _, pending)| pending.sha256.clone())
        .collect();
    let Some(shown) = render_diff(&record, name) else {
        // Nothing waits: approving the server itself, or a name that waits for nothing.
        return Ok(Some(Vec::new()));
    };
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Refused(format!(
            "approve what you reviewed: pass --hash with each hash `airlock pins diff {server}` prints (or --yes to approve whatever waits now, unreviewed)"
        )));
    }
    print!("{shown}");
    eprint!("Approve exactly this? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|err| CliError::Failure(anyhow::Error::new(err)))?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(Some(waiting))
    } else {
        eprintln!("airlock: nothing approved");
        Ok(None)
    }
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
