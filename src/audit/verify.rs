//! `airlock audit verify`: walks a log's hash chain and compares its end with the checkpoint.
//! Pure: the caller reads the log (under a shared lock) and the checkpoint and passes the bytes.
//!
//! The first problem is reported with the line it concerns and what most likely happened. The
//! chain proves that something changed at that point; the session's `seq` numbers tell an edit
//! from a deletion where they can, and where they cannot the message says both.

use std::collections::HashMap;

use serde::Serialize;

use super::chain::{Checkpoint, GENESIS, LineHash, line_hash, parse_hash};

/// What happened at the first point where the proof fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tamper {
    /// A record's bytes changed.
    Edited,
    /// A record is missing.
    Deleted,
    /// Records that are not in the chain at this point (or a line that is not a record).
    Inserted,
    /// Records in the wrong order.
    Reordered,
    /// The log ends before the checkpoint says it should.
    Truncated,
    /// Chained records after the checkpoint's last record: airlock rewrites the checkpoint with
    /// every write, so nothing it wrote is past it (a forged append, or a writer that died
    /// between its write and the checkpoint's).
    Appended,
    /// The chain breaks and the evidence fits more than one of the above.
    EditedOrDeleted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// 1-based line of the record the problem concerns.
    pub line: usize,
    pub kind: Tamper,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Chained records read (up to the first problem).
    pub records: usize,
    /// Lines before the first chained record (written before chaining existed): not proven.
    pub unchained: usize,
    pub sessions: usize,
    /// Whether the end of the log was compared with a checkpoint.
    pub checkpoint_checked: bool,
    /// Chained records after the checkpoint's last one: not covered by it, so not proven.
    pub uncovered: usize,
    /// The file begins with a `continued` record: it took the place of a rotated file, whose
    /// last line its first record links to.
    pub continues: Option<Continuation>,
    pub problem: Option<Problem>,
}

/// Where the chain of a file that replaced a rotated one comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Continuation {
    /// The rotated file's name (beside this one).
    pub from: String,
    /// The hash of its last line, as this file's first record holds it.
    #[serde(serialize_with = "hex_hash")]
    pub last_line: LineHash,
}

fn hex_hash<S: serde::Serializer>(hash: &LineHash, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&crate::hash::hex(hash))
}

/// One line of the log, as far as the chain is concerned.
struct Line<'a> {
    bytes: &'a [u8],
    /// Byte offset just after its `\n`.
    end: u64,
    hash: LineHash,
}

/// The chain fields of a record.
struct Link {
    prev: LineHash,
    session: String,
    seq: u64,
    /// `rotated`: the file ends here.
    closes_the_file: bool,
    /// `continued`: the name of the rotated file this one goes on from.
    continues: Option<String>,
}

/// Why a line carries no readable chain link (the text follows "line N ").
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum BadLink {
    #[error("is not a JSON record")]
    NotJson,
    #[error("is not a JSON object")]
    NotObject,
    #[error("has a malformed `prev`")]
    MalformedPrev,
    #[error("has no `session`")]
    NoSession,
    #[error("has no `seq`")]
    NoSeq,
}

fn link_of(bytes: &[u8]) -> Result<Option<Link>, BadLink> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| BadLink::NotJson)?;
    let object = value.as_object().ok_or(BadLink::NotObject)?;
    let Some(prev) = object.get("prev") else {
        return Ok(None);
    };
    let prev = prev
        .as_str()
        .and_then(parse_hash)
        .ok_or(BadLink::MalformedPrev)?;
    let session = object
        .get("session")
        .and_then(|s| s.as_str())
        .ok_or(BadLink::NoSession)?
        .to_string();
    let seq = object
        .get("seq")
        .and_then(serde_json::Value::as_u64)
        .ok_or(BadLink::NoSeq)?;
    let event = object.get("event").and_then(|e| e.as_str());
    let continues = (event == Some("continued"))
        .then(|| {
            object
                .get("detail")
                .and_then(|d| d.get("continues"))
                .and_then(|c| c.as_str())
                .map(str::to_string)
        })
        .flatten();
    Ok(Some(Link {
        prev,
        session,
        seq,
        closes_the_file: event == Some("rotated"),
        continues,
    }))
}

fn split_lines(log: &[u8]) -> (Vec<Line<'_>>, Option<usize>) {
    let mut lines = Vec::new();
    let mut start = 0usize;
    for (index, byte) in log.iter().enumerate() {
        if *byte == b'\n' {
            let bytes = &log[start..index];
            lines.push(Line {
                bytes,
                end: (index + 1) as u64,
                hash: line_hash(bytes),
            });
            start = index + 1;
        }
    }
    let unterminated = (start < log.len()).then(|| {
        let bytes = &log[start..];
        lines.push(Line {
            bytes,
            end: log.len() as u64,
            hash: line_hash(bytes),
        });
        lines.len()
    });
    (lines, unterminated)
}

fn problem(line: usize, kind: Tamper, message: String) -> Option<Problem> {
    Some(Problem {
        line,
        kind,
        message,
    })
}

/// Explains a record whose `prev` is not the hash of the line before it. `last_seq` holds, per
/// session, the line index and seq of its last record before `index`.
fn explain_break(
    lines: &[Line<'_>],
    by_hash: &HashMap<LineHash, usize>,
    index: usize,
    link: &Link,
    last_seq: &HashMap<String, (usize, u64)>,
    checkpoint: Option<&Checkpoint>,
) -> Option<Problem> {
    let number = index + 1;
    if link.prev == GENESIS {
        return problem(
            number,
            Tamper::Inserted,
            format!(
                "line {number} starts a new chain in the middle of the log: it, or lines before it, were inserted (or the lines before it deleted)"
            ),
        );
    }
    match by_hash.get(&link.prev).copied() {
        Some(found) if found + 1 < index => {
            return problem(
                found + 2,
                Tamper::Inserted,
                format!(
                    "line {number} follows line {} in the chain: lines {}..{} were inserted or moved there",
                    found + 1,
                    found + 2,
                    index
                ),
            );
        }
        Some(found) if found > index => {
            return problem(
                number,
                Tamper::Reordered,
                format!(
                    "line {number} belongs after line {} in the chain: records were reordered",
                    found + 1
                ),
            );
        }
        _ => {}
    }
    // An edit of this very line (its `prev` included) also breaks the link after it.
    let next_link_broken = match lines.get(index + 1) {
        Some(next) => {
            !matches!(link_of(next.bytes), Ok(Some(after)) if after.prev == lines[index].hash)
        }
        None => {
            checkpoint.is_some_and(|c| c.bytes == lines[index].end && c.last != lines[index].hash)
        }
    };
    if next_link_broken {
        return problem(
            number,
            Tamper::Edited,
            format!(
                "line {number} was edited: neither its link to line {index} nor its own hash match"
            ),
        );
    }
    if let Some(gap) = deletion_around(lines, index, link, last_seq) {
        return problem(number, Tamper::Deleted, gap);
    }
    if index == 0 {
        return problem(
            number,
            Tamper::Deleted,
            "line 1 is not the start of the chain: records were deleted from the head of the log"
                .to_string(),
        );
    }
    problem(
        index,
        Tamper::Edited,
        format!(
            "line {index} was edited: line {number} recorded a different hash for it (or the last records of a session were deleted after line {index})"
        ),
    )
}

/// A session whose numbering jumps across the break before line `index + 1`: the records in
/// between were deleted. Checks the breaking record's own session first, then every session
/// that wrote before the break and again after it.
fn deletion_around(
    lines: &[Line<'_>],
    index: usize,
    link: &Link,
    last_seq: &HashMap<String, (usize, u64)>,
) -> Option<String> {
    let number = index + 1;
    match last_seq.get(&link.session) {
        Some((_, seq)) if seq + 1 < link.seq => {
            return Some(format!(
                "records were deleted before line {number}: session {} jumps from #{seq} to #{}",
                link.session, link.seq
            ));
        }
        None if link.seq > 1 => {
            return Some(format!(
                "records were deleted before line {number}: session {} begins at #{} here",
                link.session, link.seq
            ));
        }
        _ => {}
    }
    let mut pending: HashMap<&str, u64> = last_seq
        .iter()
        .filter(|(session, _)| **session != link.session)
        .map(|(session, (_, seq))| (session.as_str(), *seq))
        .collect();
    for (offset, line) in lines[index + 1..].iter().enumerate() {
        if pending.is_empty() {
            break;
        }
        let Ok(Some(later)) = link_of(line.bytes) else {
            continue;
        };
        if let Some(seq) = pending.remove(later.session.as_str())
            && seq + 1 < later.seq
        {
            return Some(format!(
                "records were deleted before line {number}: session {} jumps from #{seq} to #{} at line {}",
                later.session,
                later.seq,
                index + offset + 2
            ));
        }
    }
    None
}

/// Verifies `log` against its `checkpoint` (`None`: the chain alone).
pub fn verify(log: &[u8], checkpoint: Option<&Checkpoint>) -> Report {
    let (lines, unterminated) = split_lines(log);
    let mut by_hash: HashMap<LineHash, usize> = HashMap::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        by_hash.entry(line.hash).or_insert(index);
    }
    let mut report = Report {
        records: 0,
        unchained: 0,
        sessions: 0,
        checkpoint_checked: checkpoint.is_some(),
        uncovered: 0,
        continues: None,
        problem: None,
    };
    let mut last_seq: HashMap<String, (usize, u64)> = HashMap::new();
    let mut chained = false;
    // The record before was `rotated`: nothing may follow it in this file.
    let mut closed_by_rotation = false;
    for (index, line) in lines.iter().enumerate() {
        let number = index + 1;
        let link = match link_of(line.bytes) {
            Ok(Some(link)) => link,
            Ok(None) if !chained => {
                report.unchained += 1;
                continue;
            }
            Ok(None) => {
                report.problem = problem(
                    number,
                    Tamper::Edited,
                    format!("line {number} has no chain link (`prev`): edited or inserted"),
                );
                break;
            }
            Err(_) if unterminated == Some(number) => {
                report.problem = problem(
                    number,
                    Tamper::Truncated,
                    format!("line {number} is cut short: the log ends in the middle of a record"),
                );
                break;
            }
            Err(what) => {
                let kind = if line.bytes.is_empty() {
                    Tamper::Inserted
                } else {
                    Tamper::Edited
                };
                report.problem = problem(
                    number,
                    kind,
                    format!("line {number} {what}: edited or inserted"),
                );
                break;
            }
        };
        chained = true;
        if closed_by_rotation {
            report.problem = problem(
                number,
                Tamper::Inserted,
                format!(
                    "line {number} comes after line {index}, which closed this file when it was rotated: it was appended by something else"
                ),
            );
            break;
        }
        let expected = match (index, &link.continues) {
            // The first record of a file that replaced a rotated one links to that file's last
            // line; the caller checks it against that file.
            (0, Some(from)) => {
                report.continues = Some(Continuation {
                    from: from.clone(),
                    last_line: link.prev,
                });
                link.prev
            }
            (0, None) => GENESIS,
            _ => lines[index - 1].hash,
        };
        if link.prev != expected {
            report.problem = explain_break(&lines, &by_hash, index, &link, &last_seq, checkpoint);
            break;
        }
        report.records += 1;
        closed_by_rotation = link.closes_the_file;
        last_seq.insert(link.session, (index, link.seq));
    }
    report.sessions = last_seq.len();
    if report.problem.is_none()
        && let Some(number) = unterminated
    {
        report.problem = problem(
            number,
            Tamper::Truncated,
            format!("line {number} is cut short (no newline at the end of the log)"),
        );
    }
    if report.problem.is_none()
        && let Some(checkpoint) = checkpoint
    {
        report.problem = check_tail(&lines, log.len() as u64, checkpoint);
        if let Some(Problem {
            kind: Tamper::Appended,
            line,
            ..
        }) = &report.problem
        {
            report.uncovered = lines.len() + 1 - line;
        }
    }
    report
}

/// The hash of the last line of `log` (a terminated one, without its newline): what the first
/// record of the file that replaced it links to.
pub fn last_line_hash(log: &[u8]) -> Option<LineHash> {
    let body = log.strip_suffix(b"\n")?;
    let start = body
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |at| at + 1);
    Some(line_hash(&body[start..]))
}

/// Compares the log's end with the checkpoint written after the last append.
fn check_tail(lines: &[Line<'_>], length: u64, checkpoint: &Checkpoint) -> Option<Problem> {
    let who = format!("session {} #{}", checkpoint.session, checkpoint.seq);
    // The checkpoint's own last record is still the last line, only shorter: edited, not cut.
    let last_is_the_checkpoints = lines.last().is_some_and(|line| {
        matches!(link_of(line.bytes), Ok(Some(link))
            if link.session == checkpoint.session && link.seq == checkpoint.seq)
    });
    if length < checkpoint.bytes && last_is_the_checkpoints {
        return problem(
            lines.len(),
            Tamper::Edited,
            format!(
                "line {} was edited: it is the checkpoint's last record ({who}), but the log now ends at byte {length}, not {}",
                lines.len(),
                checkpoint.bytes
            ),
        );
    }
    if length < checkpoint.bytes {
        return problem(
            lines.len() + 1,
            Tamper::Truncated,
            format!(
                "the log was cut: it is {length} bytes, the checkpoint says {} (its last record, {who}, is missing)",
                checkpoint.bytes
            ),
        );
    }
    match lines.iter().position(|line| line.end == checkpoint.bytes) {
        Some(index) if lines[index].hash == checkpoint.last && index + 1 == lines.len() => None,
        Some(index) if lines[index].hash == checkpoint.last => {
            let (first, last) = (index + 2, lines.len());
            problem(
                first,
                Tamper::Appended,
                format!(
                    "lines {first}..{last} ({} record(s)) come after the checkpoint's last record ({who}, line {}): airlock rewrites the checkpoint with every write, so they were appended by something else (or by an airlock that died between writing them and updating the checkpoint); nothing proves them",
                    last + 1 - first,
                    index + 1
                ),
            )
        }
        Some(index) => problem(
            index + 1,
            Tamper::Edited,
            format!(
                "line {} was edited: it does not match the checkpoint ({who})",
                index + 1
            ),
        ),
        None => {
            let index = lines
                .iter()
                .position(|line| line.end > checkpoint.bytes)
                .unwrap_or(lines.len().saturating_sub(1));
            problem(
                index + 1,
                Tamper::EditedOrDeleted,
                format!(
                    "the log no longer ends a line at byte {} where the checkpoint's last record ({who}) ended: line {} or a line before it was edited, inserted or deleted",
                    checkpoint.bytes,
                    index + 1
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests;
