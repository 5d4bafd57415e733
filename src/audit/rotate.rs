//! Rotation of the audit log (design: `docs/run.md`, "Rotation").
//!
//! When a log file reaches `audit.rotate_mb`, the writer that finds it there (under the log's
//! lock, right after its own records) closes it with a `rotated` record, gives it a dated name
//! beside the log, and puts a new file at the log's path whose first record, `continued`, links
//! to the closed file's last line. So the chain runs on across files, and every other airlock
//! process appending to the log notices the `rotated` record at the end of the file it holds the
//! next time it writes (it reads that line anyway, since another process wrote it) and follows
//! to the new file. Rotated files beyond `audit.keep_rotated` are deleted, oldest first.
//!
//! Which files make up a log's history is read from the chain itself, never from names alone:
//! from the log back, each file's first record (`continued`) names the file before it
//! ([`chain_of`]). Readers and retention walk that, so a file that only looks rotated (a name
//! planted beside the log, a stale second name left by a crash, a date from a clock that
//! stepped back) is neither read as history nor counted nor deleted.
//!
//! Names and what to delete are pure; [`chain_of`] reads first lines. `sink` does the locking
//! and the writing.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;

use super::chain::{self, LineHash};
use super::event::write_rfc3339;

/// When a log file is rotated and how many rotated files are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// A file is rotated once it holds this many bytes (0: never).
    pub at_bytes: u64,
    /// Rotated files kept beside the log, newest first (0: all of them).
    pub keep: usize,
}

/// `audit.rotate_mb` when no policy sets it.
pub const DEFAULT_ROTATE_MB: u64 = 64;
/// `audit.keep_rotated` when no policy sets it: with the default size, at most about 576 MiB
/// of log on disk.
pub const DEFAULT_KEEP_ROTATED: u64 = 8;

impl Rotation {
    pub fn from_policy(rotate_mb: u64, keep_rotated: u64) -> Rotation {
        Rotation {
            at_bytes: rotate_mb.saturating_mul(1024 * 1024),
            keep: usize::try_from(keep_rotated).unwrap_or(usize::MAX),
        }
    }

    /// Whether a file of `bytes` is due.
    pub fn is_due(&self, bytes: u64) -> bool {
        self.at_bytes > 0 && bytes >= self.at_bytes
    }
}

/// The length of the date in a rotated file's name: `2026-11-29T16-40-12.123456Z`.
const STAMP_BYTES: usize = 27;

/// The log's file name split before its extension: `audit.jsonl` → (`audit`, `.jsonl`);
/// `log` → (`log`, ``).
fn split_name(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot) if dot > 0 => name.split_at(dot),
        _ => (name, ""),
    }
}

/// The name `log` takes when it is rotated at `at`: the date goes before the extension
/// (`audit.jsonl` → `audit.2026-11-29T16-40-12.123456Z.jsonl`), so a rotated file still reads as
/// JSON Lines and names sort by age. Colons are written as `-` (they trouble other tools).
pub fn rotated_path(log: &Path, at: SystemTime) -> PathBuf {
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, extension) = split_name(&name);
    let mut stamp = Vec::with_capacity(STAMP_BYTES);
    write_rfc3339(&mut stamp, at);
    let stamp = String::from_utf8_lossy(&stamp).replace(':', "-");
    log.with_file_name(format!("{stem}.{stamp}{extension}"))
}

/// Whether `text` has the shape of a rotation date.
fn is_stamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == STAMP_BYTES
        && bytes.iter().enumerate().all(|(index, byte)| match index {
            4 | 7 | 13 | 16 => *byte == b'-',
            10 => *byte == b'T',
            19 => *byte == b'.',
            26 => *byte == b'Z',
            _ => byte.is_ascii_digit(),
        })
}

/// The rotated files of `log` among `names` (the entries of its directory), oldest first.
pub fn rotated_siblings(log: &Path, names: impl IntoIterator<Item = OsString>) -> Vec<PathBuf> {
    let mut found: Vec<String> = names
        .into_iter()
        .filter_map(|entry| entry.into_string().ok())
        .filter(|entry| is_rotated_name(log, entry))
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|entry| log.with_file_name(entry))
        .collect()
}

/// Of `rotated` (oldest first), those to delete so that `keep` remain (`keep` 0: none).
pub fn beyond_keep(rotated: &[PathBuf], keep: usize) -> &[PathBuf] {
    if keep == 0 {
        return &[];
    }
    &rotated[..rotated.len().saturating_sub(keep)]
}

/// Where the next file is prepared before it takes the log's place: hidden, beside the log.
/// Only the writer holding the log's lock rotates, so one name is enough; a leftover of a
/// rotation that died half-way is replaced.
pub fn staging_path(log: &Path) -> PathBuf {
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    log.with_file_name(format!(".{name}.rotating"))
}

/// A first line longer than this is no `continued` record.
const FIRST_LINE_AT_MOST: u64 = 64 * 1024;

/// The first line of `file` (without its newline), read from its start.
pub fn first_line(file: &File) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    while (head.len() as u64) < FIRST_LINE_AT_MOST {
        let read = file.read_at(&mut chunk, head.len() as u64)?;
        if read == 0 {
            break;
        }
        if let Some(newline) = chunk[..read].iter().position(|b| *b == b'\n') {
            head.extend_from_slice(&chunk[..newline]);
            return Ok(head);
        }
        head.extend_from_slice(&chunk[..read]);
    }
    Ok(head)
}

/// What a `continued` record says: the file before it, and the hash of that file's last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continues {
    /// A plain file name (the rotated file is always beside the one that goes on from it).
    pub name: String,
    pub last_line: LineHash,
    /// The `keep_rotated` of the rotation that started this file (0: all), when on record
    /// (airlock before 2026-11-30 did not write it).
    pub keep: Option<u64>,
}

/// The rotated file a log file's first line says it goes on from: a `continued` record's
/// `detail.continues` and `prev`.
pub fn continues(first_line: &[u8]) -> Option<Continues> {
    #[derive(Deserialize)]
    struct Detail {
        continues: Option<String>,
        keep_rotated: Option<u64>,
    }
    #[derive(Deserialize)]
    struct Record {
        event: Option<String>,
        detail: Option<Detail>,
        prev: Option<String>,
    }
    let record: Record = serde_json::from_slice(first_line).ok()?;
    if record.event.as_deref() != Some("continued") {
        return None;
    }
    let detail = record.detail?;
    let name = detail.continues?;
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    let last_line = chain::parse_hash(&record.prev?)?;
    plain.then_some(Continues {
        name,
        last_line,
        keep: detail.keep_rotated,
    })
}

/// Why a rotated file of a log's history is gone, as the history's own records tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// A rotation's retention deleted it.
    ByRetention,
    /// Every rotation since it was written kept it (the log's own rotation with `keep`): it
    /// was deleted otherwise, by hand.
    NotByRetention { keep: u64 },
    /// A rotation since then did not record its `keep_rotated` (an older airlock): it may have.
    Unknown,
}

/// Why the file at `missing` places before the log is gone, given the `keep_rotated` each file
/// since then recorded in its `continued` record (`keeps[0]` the log's, `keeps[1]` the file
/// before it's, ...). The rotation that started the file at place `p` deleted, once it was done,
/// the rotated files beyond its `keep` newest: those at places past `p + keep` (0: none). So
/// retention deleted the missing file when some `p + keep < missing`; a file with nothing on
/// record might have, with any `keep` of at least 1, when `p + 1 < missing`.
pub fn why_gone(missing: usize, keeps: &[Option<u64>]) -> Gone {
    let mut unknown = false;
    let missing = missing as u64;
    for (place, keep) in keeps.iter().enumerate().take(missing as usize) {
        let place = place as u64;
        match keep {
            Some(0) => {}
            // Saturating: a forged record's huge `keep` explains nothing.
            Some(keep) if place.saturating_add(*keep) < missing => return Gone::ByRetention,
            Some(_) => {}
            None if place + 1 < missing => unknown = true,
            None => {}
        }
    }
    match keeps.first() {
        _ if unknown => Gone::Unknown,
        Some(Some(keep)) => Gone::NotByRetention { keep: *keep },
        _ => Gone::Unknown,
    }
}

/// A log's history as its chain tells it.
#[derive(Debug)]
pub struct History {
    /// Its rotated files that are still there, oldest first. Named only: a reader opens each
    /// when it gets to it, so a long history does not take a descriptor a file.
    pub rotated: Vec<PathBuf>,
    /// The log itself, opened before anything else was looked at: a rotation after that hides
    /// no file from whoever reads this.
    pub log: File,
}

/// A log's history: from the log back, each file's `continued` record names the file before
/// it. A file counts only when it has a rotated file's name for this log and its last line is
/// the one the link holds, so no name planted beside the log (nor a file elsewhere) is ever
/// read, counted or deleted as history. The walk ends at the first file that is gone (deleted
/// by retention) or does not fit; a file that cannot be read is an error, not an end.
pub fn chain_of(log: &Path) -> std::io::Result<History> {
    chain_from(File::open(log)?, log)
}

/// [`chain_of`] from `file`, a file of the log at `log` (opened earlier: the log's path may name
/// a newer file since, which this walk does not look at).
pub fn chain_from(file: File, log: &Path) -> std::io::Result<History> {
    // The rotated files lie beside the log's file itself, wherever a link to it is.
    let beside = std::fs::canonicalize(log).unwrap_or_else(|_| log.to_path_buf());
    let mut seen = HashSet::new();
    seen.insert(identity(&file)?);
    let mut rotated = Vec::new();
    let mut first = first_line(&file)?;
    while let Some(link) = continues(&first) {
        if !is_rotated_name(&beside, &link.name) {
            break;
        }
        let path = beside.with_file_name(&link.name);
        let previous = match File::open(&path) {
            Ok(previous) => previous,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => break,
            Err(err) => return Err(err),
        };
        // A cycle, or a second name of a file already in the chain.
        if !seen.insert(identity(&previous)?) {
            break;
        }
        if last_line_hash(&previous)? != Some(link.last_line) {
            break;
        }
        first = first_line(&previous)?;
        rotated.push(path);
    }
    rotated.reverse();
    Ok(History { rotated, log: file })
}

/// The last line of `file` (which is `end` bytes long, not empty) without its newline, and
/// whether it is terminated: an unterminated one (a writer died mid-line, or a foreign write)
/// gets the next record on a new line, and the chain links to the fragment.
pub fn last_line(file: &File, end: u64) -> std::io::Result<(Vec<u8>, bool)> {
    const CHUNK: u64 = 8192;
    let mut last_byte = [0u8; 1];
    file.read_exact_at(&mut last_byte, end - 1)?;
    let terminated = last_byte[0] == b'\n';
    let line_end = if terminated { end - 1 } else { end };
    // Read backwards until the newline before the last line (or the start of the file).
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut position = line_end;
    'outer: while position > 0 {
        let start = position.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; usize::try_from(position - start).unwrap_or(0)];
        file.read_exact_at(&mut chunk, start)?;
        if let Some(newline) = chunk.iter().rposition(|b| *b == b'\n') {
            chunks.push(chunk.split_off(newline + 1));
            break 'outer;
        }
        chunks.push(chunk);
        position = start;
    }
    let line: Vec<u8> = chunks.into_iter().rev().flatten().collect();
    Ok((line, terminated))
}

/// The hash of the last line of `file` when that line is terminated (a rotated file's
/// `rotated` record).
fn last_line_hash(file: &File) -> std::io::Result<Option<LineHash>> {
    let length = file.metadata()?.len();
    if length == 0 {
        return Ok(None);
    }
    let (line, terminated) = last_line(file, length)?;
    Ok(terminated.then(|| chain::line_hash(&line)))
}

/// Whether `name` has the shape of a rotated file of `log` (`<stem>.<date><extension>`).
pub fn is_rotated_name(log: &Path, name: &str) -> bool {
    let Some(log_name) = log.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let (stem, extension) = split_name(log_name);
    name.strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.strip_suffix(extension))
        .is_some_and(is_stamp)
}

/// A file's device and inode: two names of one file have the same.
pub fn identity(file: &File) -> std::io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

/// Whether `line` (one line of a log, without its newline) is a `rotated` record: the file it
/// ends was replaced at the log's path, and nothing may be appended after it.
pub fn is_rotation_marker(line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Kind {
        event: Option<String>,
    }
    serde_json::from_slice::<Kind>(line).is_ok_and(|kind| kind.event.as_deref() == Some("rotated"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(seconds: u64, micros: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(seconds, micros * 1000)
    }

    #[test]
    fn a_rotated_name_keeps_the_extension_and_sorts_by_age() {
        let log = Path::new("/s/airlock/audit.jsonl");
        let first = rotated_path(log, at(1_780_000_000, 5));
        assert_eq!(
            first,
            PathBuf::from("/s/airlock/audit.2026-05-28T20-26-40.000005Z.jsonl")
        );
        let later = rotated_path(log, at(1_780_000_000, 6));
        assert!(later > first);
        assert_eq!(
            rotated_path(Path::new("/l/log"), at(0, 0)),
            PathBuf::from("/l/log.1970-01-01T00-00-00.000000Z")
        );
    }

    #[test]
    fn siblings_are_the_logs_own_rotated_files_oldest_first() {
        let log = Path::new("/s/audit.jsonl");
        let names = [
            "audit.jsonl",
            "audit.jsonl.checkpoint",
            "audit.2026-05-28T20-26-40.000006Z.jsonl",
            "audit.2026-05-28T20-26-40.000006Z.jsonl.checkpoint",
            "audit.2026-05-28T20-26-40.000005Z.jsonl",
            "other.2026-05-28T20-26-40.000005Z.jsonl",
            "audit.2026-05-28T20-26-40.00000xZ.jsonl",
            ".audit.jsonl.rotating",
        ]
        .map(OsString::from);
        assert_eq!(
            rotated_siblings(log, names),
            vec![
                PathBuf::from("/s/audit.2026-05-28T20-26-40.000005Z.jsonl"),
                PathBuf::from("/s/audit.2026-05-28T20-26-40.000006Z.jsonl"),
            ]
        );
    }

    #[test]
    fn the_oldest_go_beyond_keep() {
        let rotated: Vec<PathBuf> = ["a", "b", "c"].map(PathBuf::from).to_vec();
        assert_eq!(beyond_keep(&rotated, 2), &rotated[..1]);
        assert_eq!(beyond_keep(&rotated, 3), &[] as &[PathBuf]);
        assert_eq!(beyond_keep(&rotated, 0), &[] as &[PathBuf]);
    }

    #[test]
    fn a_file_is_gone_by_retention_only_where_a_rotation_since_kept_fewer() {
        // keep 2 at every rotation: the log, two rotated files, and the third back deleted.
        assert_eq!(why_gone(3, &[Some(2); 3]), Gone::ByRetention);
        // The second back gone while the third is there: nothing since kept fewer than 2.
        assert_eq!(why_gone(2, &[Some(2); 2]), Gone::NotByRetention { keep: 2 });
        // keep 2 when an older file started, 8 since: that older rotation deleted it.
        assert_eq!(
            why_gone(4, &[Some(8), Some(2), Some(8), Some(8)]),
            Gone::ByRetention
        );
        assert_eq!(
            why_gone(3, &[Some(8), Some(2), Some(8)]),
            Gone::NotByRetention { keep: 8 }
        );
        // keep 0 keeps every file, and so does a keep too large to add up.
        assert_eq!(why_gone(5, &[Some(0); 5]), Gone::NotByRetention { keep: 0 });
        assert_eq!(
            why_gone(3, &[Some(8), Some(u64::MAX), Some(8)]),
            Gone::NotByRetention { keep: 8 }
        );
        // A rotation with nothing on record might have deleted it, unless it was the file
        // right before it (any retention keeps at least one).
        assert_eq!(why_gone(3, &[Some(8), None, Some(8)]), Gone::Unknown);
        assert_eq!(
            why_gone(2, &[Some(8), None]),
            Gone::NotByRetention { keep: 8 }
        );
        assert_eq!(why_gone(1, &[None]), Gone::Unknown);
    }

    #[test]
    fn a_continued_record_says_the_retention_it_was_started_with() {
        let hash = "ab".repeat(32);
        let line = format!(
            r#"{{"event":"continued","detail":{{"continues":"a.2026-01-01T00-00-00.000000Z.jsonl","keep_rotated":3}},"prev":"{hash}"}}"#
        );
        assert_eq!(continues(line.as_bytes()).map(|c| c.keep), Some(Some(3)));
        let older = format!(
            r#"{{"event":"continued","detail":{{"continues":"a.2026-01-01T00-00-00.000000Z.jsonl"}},"prev":"{hash}"}}"#
        );
        assert_eq!(continues(older.as_bytes()).map(|c| c.keep), Some(None));
    }

    #[test]
    fn only_a_top_level_rotated_event_is_a_marker() {
        assert!(is_rotation_marker(
            br#"{"ts":"x","event":"rotated","prev":"0"}"#
        ));
        assert!(!is_rotation_marker(
            br#"{"event":"decision","args":{"event":"rotated"}}"#
        ));
        assert!(!is_rotation_marker(b"not json"));
    }

    #[test]
    fn rotation_is_due_at_its_size_and_never_at_zero() {
        let rotation = Rotation::from_policy(1, 2);
        assert!(!rotation.is_due(1024 * 1024 - 1));
        assert!(rotation.is_due(1024 * 1024));
        assert!(!Rotation::from_policy(0, 2).is_due(u64::MAX));
    }
}
