//! `airlock audit [show]` and `airlock audit summary`: records, filtered, for people or for jq.

use crate::session::shell::stderr::shown;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::Value;

use super::{FilterArgs, files_of, log_path, open_in_turn};
use crate::audit::query::{Filter, Summary, format_record};
use crate::cli::CliError;

#[derive(Debug, Args, Default)]
pub struct ShowArgs {
    /// The audit log (default: where run and serve write it).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// Keep reading as the log grows (like tail -f); stop with Ctrl-C.
    #[arg(short, long)]
    follow: bool,
    /// Only the last N matching records (then follow, with -f).
    #[arg(short = 'n', long, value_name = "N")]
    lines: Option<usize>,
    /// Print the records as JSON Lines, exactly as logged (for jq).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    filters: FilterArgs,
}

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// The audit log (default: where run and serve write it).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    filters: FilterArgs,
}

fn open(path: &Path) -> Result<File, CliError> {
    File::open(path).map_err(|err| {
        CliError::Refused(format!(
            "cannot read the audit log {}: {err}. Fix: pass the log's path, or check audit.path in the policy",
            path.display()
        ))
    })
}

/// Parses one line; lines that are not JSON objects are counted, not shown.
fn parse(line: &[u8], skipped: &mut u64) -> Option<Value> {
    match serde_json::from_slice::<Value>(line) {
        Ok(value) if value.is_object() => Some(value),
        _ => {
            if !line.iter().all(u8::is_ascii_whitespace) {
                *skipped += 1;
            }
            None
        }
    }
}

/// Writes one matching record; false when stdout is gone (`| head`).
fn emit(out: &mut impl Write, line: &[u8], record: &Value, json: bool) -> bool {
    let written = if json {
        out.write_all(line).and_then(|()| out.write_all(b"\n"))
    } else {
        // A log is text anyone who could write it chose: its control characters are shown, not
        // acted (a tool name with `\r\n` would forge a line, escapes would drive the terminal).
        writeln!(out, "{}", shown(&format_record(record)))
    };
    written.is_ok()
}

pub fn show(args: ShowArgs) -> Result<ExitCode, CliError> {
    let path = log_path(args.file.clone())?;
    let filter = args.filters.filter()?;
    if !args.follow && no_records_yet(args.file.is_none(), &path) {
        return Ok(ExitCode::SUCCESS);
    }
    if args.follow && !path.exists() {
        // As `tail -F`: the log appears when the first session writes it.
        eprintln!(
            "airlock: {} is not there yet: waiting for it (airlock run and airlock serve write it once a server starts)",
            path.display()
        );
        while !path.exists() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut skipped = 0u64;
    let mut last: VecDeque<(Vec<u8>, Value)> = VecDeque::new();
    let mut line = Vec::new();
    // Where the log (the last file read) was read up to.
    let mut offset = 0u64;
    let mut followed = None;
    // The last file read ended with this `rotated` record (a rotation half-way, or a rotated
    // file named on the command line): the name it was renamed to, and the log that goes on.
    let mut closed_as = None;
    let mut continues_in = None;
    for entry in files_of(&path)? {
        let Some((file_path, file)) = open_in_turn(entry)? else {
            continue;
        };
        let mut reader = BufReader::new(&file);
        offset = 0;
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .with_context(|| format!("cannot read {}", file_path.display()))?;
            if read == 0 || !line.ends_with(b"\n") {
                // End of file, or a record still being written: follow picks it up from here.
                break;
            }
            offset += read as u64;
            let Some(record) = parse(line.trim_ascii_end(), &mut skipped) else {
                continue;
            };
            let rotated = record["event"] == "rotated";
            let detail = |key: &str| {
                rotated
                    .then(|| record["detail"][key].as_str().map(str::to_string))
                    .flatten()
            };
            (closed_as, continues_in) = (detail("renamed_to"), detail("continues_in"));
            if !filter.matches(&record) {
                continue;
            }
            match args.lines {
                Some(keep) => {
                    last.push_back((line.trim_ascii_end().to_vec(), record));
                    if last.len() > keep {
                        last.pop_front();
                    }
                }
                None => {
                    if !emit(&mut out, line.trim_ascii_end(), &record, args.json) {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
            }
        }
        // The log's file (the last) is kept to follow.
        drop(reader);
        followed = Some(file);
    }
    for (text, record) in &last {
        if !emit(&mut out, text, record, args.json) {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let _ = out.flush();
    drop(out);
    if skipped > 0 {
        eprintln!(
            "airlock: {skipped} line(s) of {} are not audit records (skipped)",
            path.display()
        );
    }
    if args.follow
        && let Some(file) = followed
    {
        // A rotated file named on the command line is followed on into its log's later files:
        // the log beside it, when a file of its chain goes on from this one, or when the log is
        // still this very file (a rotation half-way, which the next writer finishes).
        let renamed_to = closed_as.as_deref().unwrap_or_default();
        let given_rotated = path.file_name().and_then(|n| n.to_str()) == Some(renamed_to);
        let log = continues_in
            .as_deref()
            .and_then(|continues_in| log_of_rotated(&path, renamed_to, continues_in))
            .filter(|log| same_file(log, &file) || goes_on_from(log, renamed_to, &file));
        match log {
            Some(log) => follow(&log, file, offset, closed_as, &filter, args.json)?,
            None if given_rotated => eprintln!(
                "airlock: {} was rotated, and no log beside it goes on from it: nothing more to follow",
                path.display()
            ),
            None => follow(&path, file, offset, closed_as, &filter, args.json)?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The log that the rotated file `given` belongs to, when `given` is one: its last record,
/// `rotated`, says it was renamed to `given`'s own name and that the log goes on in
/// `continues_in` beside it; and that name is a rotated name of that log.
fn log_of_rotated(given: &Path, renamed_to: &str, continues_in: &str) -> Option<PathBuf> {
    if given.file_name()?.to_str()? != renamed_to {
        return None;
    }
    // A name in the same directory, nothing else: the record is text anyone who could write
    // the log chose.
    let plain = !continues_in.is_empty()
        && !continues_in.contains('/')
        && continues_in != "."
        && continues_in != "..";
    let log = given.with_file_name(continues_in);
    (plain && crate::audit::rotate::is_rotated_name(&log, renamed_to)).then_some(log)
}

/// Polls `file` (the log as `show` opened it) for new complete lines from `offset` on, forever.
/// When its last record is `rotated`, the file that goes on from it is read next, from its
/// start: found through the chain from the log back, so no file is skipped however many
/// rotations come between two polls. A file replaced without a `rotated` record, or one that
/// shrinks (truncated), is read again from the log's start, with a note on stderr.
fn follow(
    path: &Path,
    mut file: File,
    mut offset: u64,
    closed_as: Option<String>,
    filter: &Filter,
    json: bool,
) -> Result<(), CliError> {
    let mut pending: Vec<u8> = Vec::new();
    let mut skipped = 0u64;
    let stdout = std::io::stdout();
    // The log's path names another file: `file` gets one more read for its `rotated` record.
    let mut replaced_seen = false;
    // `file` ended with this `rotated` record, and the file that goes on from it is not there
    // yet (a rotation half-way: the next writer finishes it).
    let mut waiting_for: Option<String> = closed_as;
    let mut told_half_way = false;
    loop {
        if let Some(name) = &waiting_for {
            match next_after_rotated(path, &file, name) {
                Next::Goes(next) => {
                    (file, offset, waiting_for) = (next, 0, None);
                    pending.clear();
                }
                Next::Lost(oldest) => {
                    eprintln!(
                        "airlock: the files after {name} were deleted (audit.keep_rotated) before they were read: their records are not shown; going on from the oldest file kept"
                    );
                    (file, offset, waiting_for) = (oldest, 0, None);
                    pending.clear();
                }
                Next::HalfWay if file.metadata().is_ok_and(|m| m.len() < offset) => {
                    eprintln!(
                        "airlock: {} was truncated; reading it from the start",
                        path.display()
                    );
                    (file, offset, waiting_for) = (open(path)?, 0, None);
                    pending.clear();
                }
                Next::HalfWay => {
                    if !told_half_way {
                        eprintln!(
                            "airlock: {} was rotated half-way; waiting for the next airlock to finish it",
                            path.display()
                        );
                        told_half_way = true;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            }
        }
        let mut chunk = Vec::new();
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_to_end(&mut chunk))
            .with_context(|| format!("cannot read {}", path.display()))?;
        offset += chunk.len() as u64;
        pending.extend_from_slice(&chunk);
        let mut closed_as = None;
        if let Some(last_newline) = pending.iter().rposition(|b| *b == b'\n') {
            let complete: Vec<u8> = pending.drain(..=last_newline).collect();
            let mut out = stdout.lock();
            for line in complete.split(|b| *b == b'\n') {
                let Some(record) = parse(line, &mut skipped) else {
                    continue;
                };
                if record["event"] == "rotated" {
                    closed_as = record["detail"]["renamed_to"].as_str().map(str::to_string);
                }
                if filter.matches(&record) && !emit(&mut out, line, &record, json) {
                    return Ok(());
                }
            }
            if out.flush().is_err() {
                return Ok(());
            }
        }
        if let Some(name) = closed_as {
            replaced_seen = false;
            waiting_for = Some(name);
            continue;
        }
        if replaced_seen {
            eprintln!(
                "airlock: {} was replaced; reading it from the start",
                path.display()
            );
            (file, offset, replaced_seen) = (open(path)?, 0, false);
            pending.clear();
            continue;
        }
        std::thread::sleep(Duration::from_millis(200));
        let here = file.metadata().ok();
        let current = std::fs::metadata(path).ok();
        replaced_seen = matches!((&here, &current), (Some(here), Some(current))
            if (here.dev(), here.ino()) != (current.dev(), current.ino()));
        if here.is_some_and(|m| m.len() < offset) {
            eprintln!(
                "airlock: {} was truncated; reading it from the start",
                path.display()
            );
            (file, offset, replaced_seen) = (open(path)?, 0, false);
            pending.clear();
        }
    }
}

/// What comes after `file`, which ended with a `rotated` record that renamed it `name`.
enum Next {
    /// The file that goes on from it.
    Goes(File),
    /// That file is gone (retention deleted it before it was read; or the log was moved away
    /// by hand): the oldest file of the log's chain now.
    Lost(File),
    /// Nothing replaced it yet: the file at the log's path is still this one.
    HalfWay,
}

fn next_after_rotated(log: &Path, file: &File, name: &str) -> Next {
    if let Some(next) = successor(log, name) {
        return Next::Goes(next);
    }
    let still_the_log = std::fs::metadata(log).is_ok_and(|at_path| {
        file.metadata()
            .is_ok_and(|here| (here.dev(), here.ino()) == (at_path.dev(), at_path.ino()))
    });
    if still_the_log {
        return Next::HalfWay;
    }
    match crate::audit::rotate::chain_of(log) {
        Ok(history) => history
            .rotated
            .first()
            .and_then(|oldest| File::open(oldest).ok())
            .map_or(Next::Lost(history.log), Next::Lost),
        // No log at its path at all (moved away, not yet replaced): wait for one.
        Err(_) => Next::HalfWay,
    }
}

/// Whether `path` names `file` (the same device and inode).
fn same_file(path: &Path, file: &File) -> bool {
    let (Ok(at_path), Ok(here)) = (std::fs::metadata(path), file.metadata()) else {
        return false;
    };
    (at_path.dev(), at_path.ino()) == (here.dev(), here.ino())
}

/// Whether a file of `log`'s chain goes on from `file`, the rotated file `name`: its `continued`
/// record names it and links to its last line (a copy of a rotated file beside another log
/// leads nowhere).
fn goes_on_from(log: &Path, name: &str, file: &File) -> bool {
    let Ok(length) = file.metadata().map(|meta| meta.len()) else {
        return false;
    };
    let Ok((line, true)) = crate::audit::rotate::last_line(file, length) else {
        return false;
    };
    let last = crate::audit::chain::line_hash(&line);
    let Ok(history) = crate::audit::rotate::chain_of(log) else {
        return false;
    };
    history
        .rotated
        .iter()
        .filter_map(|path| File::open(path).ok())
        .chain([history.log])
        .filter_map(|next| crate::audit::rotate::first_line(&next).ok())
        .filter_map(|first| crate::audit::rotate::continues(&first))
        .any(|continues| continues.name == name && continues.last_line == last)
}

/// The file whose first record goes on from the rotated file `name`: the next file of the log's
/// chain after it.
fn successor(log: &Path, name: &str) -> Option<File> {
    let history = crate::audit::rotate::chain_of(log).ok()?;
    let goes_on_from_it = |file: &File| {
        crate::audit::rotate::first_line(file)
            .ok()
            .and_then(|line| crate::audit::rotate::continues(&line))
            .is_some_and(|continues| continues.name == name)
    };
    history
        .rotated
        .iter()
        .filter_map(|path| File::open(path).ok())
        .chain([history.log])
        .find(goes_on_from_it)
}

/// Whether the default log is not there yet (nothing has run): said on stderr, as an empty
/// result rather than an error (a new user's first `airlock audit` was "No such file or
/// directory", exit 2). A path given on the command line that is not there stays an error: it
/// may be a typo.
fn no_records_yet(default_path: bool, path: &std::path::Path) -> bool {
    // A log that ever held records leaves its checkpoint, and rotated files, beside it: without
    // the log they are an error to report (the log was moved or deleted), not a fresh start.
    let traces = || {
        let names = path
            .parent()
            .and_then(|dir| std::fs::read_dir(dir).ok())
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok().map(|entry| entry.file_name()));
        crate::audit::chain::checkpoint_path(path).exists()
            || !crate::audit::rotate::rotated_siblings(path, names).is_empty()
    };
    let missing = default_path && !path.exists() && !traces();
    if missing {
        eprintln!(
            "airlock: no audit records yet: {} is not there (airlock run and airlock serve write it once a server starts)",
            path.display()
        );
    }
    missing
}

pub fn summary(args: SummaryArgs) -> Result<ExitCode, CliError> {
    let path = log_path(args.file.clone())?;
    let filter = args.filters.filter()?;
    if no_records_yet(args.file.is_none(), &path) {
        return Ok(ExitCode::SUCCESS);
    }
    let mut summary = Summary::default();
    let mut skipped = 0u64;
    for entry in files_of(&path)? {
        let Some((file_path, file)) = open_in_turn(entry)? else {
            continue;
        };
        let reader = BufReader::new(file);
        for line in reader.split(b'\n') {
            let line = line.with_context(|| format!("cannot read {}", file_path.display()))?;
            if let Some(record) = parse(&line, &mut skipped)
                && filter.matches(&record)
            {
                summary.add(&record);
            }
        }
    }
    let servers = summary.finish();
    let mut out = std::io::stdout().lock();
    if args.json {
        let json = serde_json::json!({ "servers": servers });
        let _ = writeln!(out, "{json}");
        return Ok(ExitCode::SUCCESS);
    }
    let ms = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.3}"));
    let _ = writeln!(
        out,
        "{:<24} {:>7} {:>7} {:>7} {:>10} {:>10} {:>7} {:>10} {:>8}",
        "server", "calls", "denied", "errors", "p50 ms", "p95 ms", "starts", "net ok/no", "install"
    );
    for (name, row) in &servers {
        let net = format!("{}/{}", row.net_allowed, row.net_refused);
        let name = shown(name);
        let _ = writeln!(
            out,
            "{name:<24} {:>7} {:>7} {:>7} {:>10} {:>10} {:>7} {net:>10} {:>8}",
            row.calls,
            row.denied,
            row.errors,
            ms(row.p50_ms),
            ms(row.p95_ms),
            row.starts,
            row.install_net
        );
    }
    if servers.values().any(|row| row.install_net > 0) {
        let _ = writeln!(
            out,
            "(install: connections of the install step that fetched the server's package on first use)"
        );
    }
    if skipped > 0 {
        eprintln!(
            "airlock: {skipped} line(s) of {} are not audit records (skipped)",
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_file_leads_to_its_log_beside_it_and_nowhere_else() {
        let rotated = Path::new("/logs/audit.2026-11-29T16-40-12.123456Z.jsonl");
        let name = "audit.2026-11-29T16-40-12.123456Z.jsonl";
        assert_eq!(
            log_of_rotated(rotated, name, "audit.jsonl"),
            Some(PathBuf::from("/logs/audit.jsonl"))
        );
        // The record must name this very file, and a log whose rotated name it is.
        assert_eq!(
            log_of_rotated(Path::new("/logs/audit.jsonl"), name, "audit.jsonl"),
            None
        );
        assert_eq!(log_of_rotated(rotated, name, "other.jsonl"), None);
        // The record is text anyone who could write the log chose: no other directory.
        for forged in ["../audit.jsonl", "/etc/audit.jsonl", "..", ".", ""] {
            assert_eq!(log_of_rotated(rotated, name, forged), None, "{forged}");
        }
    }
}
