//! `airlock audit verify [FILE]`: proves the log's hash chain and its end against the checkpoint.
//! Exit 0 when the log verifies, 1 at the first problem (printed with its line; records appended
//! after the checkpoint's last one are a problem: nothing proves them), 2 when the log cannot be
//! read.

use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::log_path;
use crate::audit::chain::{Checkpoint, checkpoint_path};
use crate::audit::rotate;
use crate::audit::verify::{Continuation, Report, last_line_hash, verify as verify_log};
use crate::cli::{CliError, EXIT_FAILURE};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The audit log (default: where run and serve write it).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// The checkpoint to compare the log's end with (default: FILE.checkpoint beside the log).
    #[arg(long, value_name = "FILE", conflicts_with = "no_checkpoint")]
    checkpoint: Option<PathBuf>,
    /// Verify the chain alone (a copied log without its checkpoint): a cut tail goes unseen.
    #[arg(long)]
    no_checkpoint: bool,
    /// Verify the log's rotated files beside it too, oldest first, then the log: each against
    /// its own checkpoint, and each file's link to the one before.
    #[arg(long, conflicts_with = "checkpoint")]
    all: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Reads the log and its checkpoint under a shared lock, so no writer is half-way through.
fn read_locked(
    log: &std::path::Path,
    checkpoint: Option<&std::path::Path>,
) -> Result<(Vec<u8>, Option<Vec<u8>>), CliError> {
    let cannot = |path: &std::path::Path, err: std::io::Error| {
        CliError::Refused(format!(
            "cannot read {}: {err}. Fix: pass the audit log's path",
            path.display()
        ))
    };
    // A rotation replaces the file at the log's path under the old file's lock: once the lock
    // is ours, the path names this file still, or the rotation happened while we waited and
    // the file that replaced it is the one to read (its checkpoint is the one at the path).
    let mut file = File::open(log).map_err(|err| cannot(log, err))?;
    for _ in 0..8 {
        crate::lock::flock(&file, libc::LOCK_SH).map_err(|err| cannot(log, err))?;
        let current = File::open(log).map_err(|err| cannot(log, err))?;
        let same = matches!(
            (rotate::identity(&file), rotate::identity(&current)),
            (Ok(a), Ok(b)) if a == b
        );
        if same {
            break;
        }
        file = current;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|err| cannot(log, err))?;
    let checkpoint = match checkpoint {
        Some(path) => match std::fs::read(path) {
            Ok(text) => Some(text),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => return Err(cannot(path, err)),
        },
        None => None,
    };
    Ok((bytes, checkpoint))
}

fn describe(log: &std::path::Path, report: &Report) -> String {
    let mut text = format!(
        "{}: {} record(s) in {} session(s)",
        log.display(),
        report.records,
        report.sessions
    );
    if report.unchained > 0 {
        text.push_str(&format!(
            "; {} earlier line(s) carry no chain (written before chaining) and are not proven",
            report.unchained
        ));
    }
    text
}

/// What the rotated file a log goes on from says about that link.
enum Predecessor {
    /// Its last line is the one the log's first record links to.
    Links,
    /// It is not beside the log.
    Gone,
    /// It is there and ends otherwise: the message says so.
    Differs(String),
}

fn check_predecessor(
    log: &std::path::Path,
    continuation: &Continuation,
) -> Result<Predecessor, CliError> {
    let from = &continuation.from;
    // A name, not a path: the rotated file is always beside the log.
    if from.is_empty() || from.contains('/') || from == "." || from == ".." {
        return Ok(Predecessor::Differs(format!(
            "line 1 names {from:?} as the file it goes on from, which is no rotated file's name: edited or inserted"
        )));
    }
    // Beside the log's file itself, wherever a link to it is.
    let beside = std::fs::canonicalize(log).unwrap_or_else(|_| log.to_path_buf());
    let path = beside.with_file_name(from);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Predecessor::Gone),
        Err(err) => {
            return Err(CliError::Refused(format!(
                "cannot read {}: {err}",
                path.display()
            )));
        }
    };
    Ok(if last_line_hash(&bytes) == Some(continuation.last_line) {
        Predecessor::Links
    } else {
        Predecessor::Differs(format!(
            "line 1 goes on from the rotated file {from}, but that file's last line is not the one it links to: {from} was edited, cut or replaced"
        ))
    })
}

/// When `bytes` (the file at `log`) ends in a `rotated` record and the file prepared to take its
/// place is still beside it, the problem is most likely a rotation a crash stopped half-way,
/// not tampering: says so, and how it ends.
fn half_rotated_hint(log: &std::path::Path, bytes: &[u8]) -> String {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let last = &body[body
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |at| at + 1)..];
    let staged = rotate::staging_path(log);
    if rotate::is_rotation_marker(last) && staged.exists() {
        format!(
            " (but this file ends in a `rotated` record and {} is beside it: a rotation stopped half-way, most likely by a crash; the next airlock to write the log finishes it)",
            staged.display()
        )
    } else {
        String::new()
    }
}

pub fn verify(args: VerifyArgs) -> Result<ExitCode, CliError> {
    let log = log_path(args.file.clone())?;
    let (files, hole) = if args.all {
        let history = super::files_of(&log)?;
        let hole = deleted_by_hand(&history);
        (history.into_iter().map(|(path, _)| path).collect(), hole)
    } else {
        (vec![log.clone()], None)
    };
    for (place, file) in files.iter().enumerate() {
        if *file != log && !file.exists() {
            eprintln!(
                "airlock: {} was deleted (audit.keep_rotated) while verify ran: not verified",
                file.display()
            );
            continue;
        }
        let checkpoint = if args.no_checkpoint {
            None
        } else {
            Some(
                args.checkpoint
                    .clone()
                    .unwrap_or_else(|| checkpoint_path(file)),
            )
        };
        let hole = hole.as_deref().filter(|_| place == 0);
        if !verify_file(file, checkpoint, hole, args.json)? {
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// When the rotated file the oldest of `files` (a log's history as [`super::files_of`] walked
/// it, oldest first, the log last and open) goes on from is gone although every rotation since
/// kept it by its own record, what to say: it was deleted by hand, and the history before it is
/// cut off. None when it is there, when retention deleted it, when the records cannot tell
/// (written by an airlock that did not record its `keep_rotated`), or when the newest file is
/// not the live log (a rotated file given, or a rotation since the walk): then rotations after
/// it are not in view.
fn deleted_by_hand(files: &[(PathBuf, Option<File>)]) -> Option<String> {
    let continues_of = |(path, opened): &(PathBuf, Option<File>)| {
        let first = match opened {
            Some(file) => rotate::first_line(file),
            None => File::open(path).and_then(|file| rotate::first_line(&file)),
        };
        rotate::continues(&first.ok()?)
    };
    let (_, newest) = files.last()?;
    let newest = newest.as_ref()?;
    let length = newest.metadata().ok()?.len();
    if length == 0 || rotate::is_rotation_marker(&rotate::last_line(newest, length).ok()?.0) {
        return None;
    }
    let oldest = files.first()?;
    let link = continues_of(oldest)?;
    let beside = std::fs::canonicalize(&oldest.0).unwrap_or_else(|_| oldest.0.clone());
    if beside.with_file_name(&link.name).exists() {
        return None;
    }
    // Places before the log: the log 0, the file before it 1, ..., the missing one last.
    let keeps: Vec<Option<u64>> = files
        .iter()
        .rev()
        .map(|file| continues_of(file).and_then(|link| link.keep))
        .collect();
    let rotate::Gone::NotByRetention { keep } = rotate::why_gone(files.len(), &keeps) else {
        return None;
    };
    let kept = match keep {
        0 => "keeps every rotated file".to_string(),
        keep => format!(
            "keeps the newest {keep}, and it is only {} back",
            files.len()
        ),
    };
    Some(format!(
        "line 1 goes on from the rotated file {}, which is gone, and no rotation deleted it (the log's retention, audit.keep_rotated, {kept}): it was deleted by hand, and the history before this file is cut off. Fix: put it back from a backup; each file left still verifies alone (`airlock audit verify FILE`)",
        link.name
    ))
}

/// Verifies one file and prints what was found; false when it does not verify. `hole`: what to
/// say when the rotated file it goes on from is gone ([`deleted_by_hand`]).
fn verify_file(
    log: &std::path::Path,
    checkpoint_file: Option<PathBuf>,
    hole: Option<&str>,
    json: bool,
) -> Result<bool, CliError> {
    let (bytes, checkpoint_text) = read_locked(log, checkpoint_file.as_deref())?;
    let checkpoint = match (&checkpoint_file, &checkpoint_text) {
        (Some(path), Some(text)) => Some(Checkpoint::parse(text).ok_or_else(|| {
            CliError::Refused(format!(
                "{} is not an airlock audit checkpoint. Fix: pass the right one with --checkpoint",
                path.display()
            ))
        })?),
        (Some(path), None) => {
            eprintln!(
                "airlock: no checkpoint at {}: the end of the log cannot be proven, so a cut tail would go unseen. Fix: pass --checkpoint FILE, or --no-checkpoint to verify the chain alone",
                path.display()
            );
            return Ok(false);
        }
        (None, _) => None,
    };
    let mut report = verify_log(&bytes, checkpoint.as_ref());
    let predecessor = match (&report.problem, &report.continues) {
        (None, Some(continuation)) => Some(check_predecessor(log, continuation)?),
        _ => None,
    };
    match (&predecessor, hole) {
        (Some(Predecessor::Differs(message)), _) => {
            report.problem = Some(crate::audit::verify::Problem {
                line: 1,
                kind: crate::audit::verify::Tamper::Edited,
                message: message.clone(),
            });
        }
        (Some(Predecessor::Gone), Some(message)) => {
            report.problem = Some(crate::audit::verify::Problem {
                line: 1,
                kind: crate::audit::verify::Tamper::Deleted,
                message: message.to_string(),
            });
        }
        _ => {}
    }
    // Written, not printed: a reader that stops (`| head`) ends the output, not airlock.
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({
                "file": log.display().to_string(),
                "verified": report.problem.is_none(),
                "report": report,
            })
        );
    } else {
        match &report.problem {
            None => drop(writeln!(
                out,
                "{}; chain intact{}{}",
                describe(log, &report),
                if report.checkpoint_checked {
                    "; the end matches the checkpoint, which covers every record"
                } else {
                    " (no checkpoint compared: a cut tail would go unseen)"
                },
                match (&predecessor, &report.continues) {
                    (Some(Predecessor::Links), Some(c)) => format!(
                        "; it goes on from the rotated file {}, whose last line it links to (verify that file for what came before)",
                        c.from
                    ),
                    (Some(Predecessor::Gone), Some(c)) => format!(
                        "; it goes on from the rotated file {}, which is not here (deleted by audit.keep_rotated, or by hand): what came before it is not proven",
                        c.from
                    ),
                    _ => String::new(),
                }
            )),
            Some(problem) => {
                let _ = writeln!(
                    out,
                    "{}:{}: {}{}",
                    log.display(),
                    problem.line,
                    problem.message,
                    half_rotated_hint(log, &bytes)
                );
                eprintln!("airlock: the audit log does not verify");
            }
        }
    }
    Ok(report.problem.is_none())
}
