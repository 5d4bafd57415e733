//! Sinks: an append-only JSON Lines file and/or stderr. Staged events go out as whole lines in
//! one `write` straight to the file descriptor (no user-space buffer), so a decision is in the
//! kernel's hands before the call it records is forwarded, even if airlock dies right after.
//!
//! Every record is stamped `ts`, `session` (random, one per airlock process) and `seq` (1, 2, ...
//! within the session) in front, and chained with `prev` at the end (see [`super::chain`]). For a
//! regular file the chain runs through every process that appends to it: each commit takes an
//! exclusive `flock` on the log, links to whatever line is last in the file at that moment, writes,
//! and rewrites the checkpoint beside the log, all before it lets go.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::chain::{self, Checkpoint, GENESIS, LineHash};
use super::event::{Event, EventKind, write_rfc3339};
use crate::lock::flock;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot open the audit log {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the audit log {target}: {source}")]
    Write {
        target: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode an audit event: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A regular file shared with other airlock processes: the chain is kept under its lock.
#[derive(Debug)]
struct SharedFile {
    file: File,
    path: PathBuf,
    checkpoint: File,
    /// Where this process's last write ended, and the hash of its last line: when the file still
    /// ends there, nobody else wrote since and the tail need not be read.
    end: u64,
    last: LineHash,
    /// Set between a commit's write and its seal: the lock is held and the checkpoint is behind
    /// by the records of that write, whose last `seq` this is.
    unsealed: Option<u64>,
    /// The lines of the last commit as written.
    out: Vec<u8>,
    /// Where the last line of `out` starts while `last` is not yet its hash: the hash is taken
    /// at the seal, after the calls the line records are forwarded, since only the next line
    /// and the checkpoint need it.
    unhashed: Option<usize>,
}

#[derive(Debug)]
enum Sink {
    File(Box<SharedFile>),
    /// stderr, a pipe or a device: the chain runs through this process's records only.
    Stream {
        target: Stream,
        last: LineHash,
    },
}

#[derive(Debug)]
enum Stream {
    Stderr,
    /// A non-regular file (`--audit /dev/fd/3`, a FIFO).
    Other {
        file: File,
        path: PathBuf,
    },
    /// In-memory, for tests and benchmarks.
    Memory(Vec<u8>),
}

/// Staging buffer capacity kept between commits; a burst may grow it, a lull gives it back.
const MAX_KEPT_CAPACITY: usize = 256 * 1024;

#[derive(Debug)]
pub struct AuditLog {
    sinks: Vec<Sink>,
    session: String,
    seq: u64,
    /// Encoded records staged and not yet written, without their links.
    staged: Vec<u8>,
    /// Where each staged record ends in `staged`.
    staged_ends: Vec<usize>,
    /// The chained lines of one commit to a stream sink, reused (a shared file keeps its own).
    out: Vec<u8>,
    /// Tool calls in flight, to attribute connections (only when a server has network egress).
    calls: Option<super::calls::CallsInFlight>,
    /// Events kept by [`AuditLog::defer`], staged in order before anything else.
    deferred: Vec<Event>,
    /// Outcomes kept by [`AuditLog::hold`], and when the first of them was held.
    held: Vec<Event>,
    held_since: Option<Instant>,
}

/// How long [`AuditLog::hold`] may keep an outcome when no call goes out to take it along.
pub const HOLD_AT_MOST: Duration = Duration::from_millis(100);

/// A fresh random session id: 16 hex digits.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 8];
    if crate::random::fill(&mut bytes).is_err() {
        // No entropy source (a very old kernel): unique enough from time and pid, and the chain
        // does not rely on the id being unpredictable.
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let seed = format!("{}{}", std::process::id(), now.as_nanos());
        bytes.copy_from_slice(&chain::line_hash(seed.as_bytes())[..8]);
    }
    crate::hash::hex(&bytes)
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> AuditError + '_ {
    move |source| AuditError::Write {
        target: path.display().to_string(),
        source,
    }
}

/// The hash of the last line of `file` (which is `end` bytes long), and whether that line is
/// unterminated (a writer died mid-line, or a foreign write): the next record then starts on a
/// new line, and the chain links to the fragment.
fn tail_hash(file: &File, end: u64) -> std::io::Result<(LineHash, bool)> {
    if end == 0 {
        return Ok((GENESIS, false));
    }
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
    Ok((chain::line_hash(&line), !terminated))
}

impl SharedFile {
    /// Links `records` to the file's current last line and appends them, under the lock, which
    /// stays held until [`SharedFile::seal`] (the records are in the kernel's hands when this
    /// returns Ok).
    fn commit(&mut self, records: &[&[u8]], seq: u64, session: &str) -> Result<(), AuditError> {
        self.seal(session)?;
        if records.is_empty() {
            return Ok(());
        }
        flock(&self.file, libc::LOCK_EX).map_err(write_error(&self.path))?;
        match self.append(records) {
            Ok(()) => {
                self.unsealed = Some(seq);
                Ok(())
            }
            Err(err) => {
                let _ = flock(&self.file, libc::LOCK_UN);
                Err(err)
            }
        }
    }

    fn append(&mut self, records: &[&[u8]]) -> Result<(), AuditError> {
        let end = (&self.file)
            .seek(SeekFrom::End(0))
            .map_err(write_error(&self.path))?;
        let (mut prev, unterminated) = if end == self.end {
            (self.last_hash(), false)
        } else {
            self.unhashed = None;
            tail_hash(&self.file, end).map_err(write_error(&self.path))?
        };
        self.out.clear();
        if unterminated {
            self.out.push(b'\n');
        }
        // `commit` passes at least one record.
        let Some((last, before)) = records.split_last() else {
            return Ok(());
        };
        for record in before {
            prev = chain::append_linked(&mut self.out, record, &prev);
        }
        let last_start = self.out.len();
        chain::append_unhashed(&mut self.out, last, &prev);
        (&self.file)
            .write_all(&self.out)
            .map_err(write_error(&self.path))?;
        self.end = end + self.out.len() as u64;
        self.unhashed = Some(last_start);
        Ok(())
    }

    /// The hash of the last line this process wrote, taken now if it was left for later.
    fn last_hash(&mut self) -> LineHash {
        if let Some(start) = self.unhashed.take() {
            let line = &self.out[start..];
            self.last = chain::line_hash(line.strip_suffix(b"\n").unwrap_or(line));
        }
        self.last
    }

    /// Rewrites the checkpoint to cover the last commit and lets go of the lock. A no-op when
    /// there is nothing to seal.
    fn seal(&mut self, session: &str) -> Result<(), AuditError> {
        let Some(seq) = self.unsealed.take() else {
            return Ok(());
        };
        let checkpoint = Checkpoint {
            bytes: self.end,
            last: self.last_hash(),
            session: session.to_string(),
            seq,
        };
        if self.out.capacity() > MAX_KEPT_CAPACITY {
            self.out.clear();
            self.out.shrink_to(MAX_KEPT_CAPACITY);
        }
        let written = self
            .checkpoint
            .write_all_at(&checkpoint.encode(), 0)
            .map_err(write_error(&self.path));
        let _ = flock(&self.file, libc::LOCK_UN);
        written
    }
}

impl AuditLog {
    /// Opens (creating, mode 0600, parents 0711) `path` for appending, and its checkpoint.
    ///
    /// Parents are 0711, not 0700: the default audit directory is airlock's state dir, under
    /// which servers' private home and tmp live, and a server running as another uid (nobody,
    /// when airlock runs as root) must be able to traverse to them. 0711 lets it pass through
    /// without listing anything; the log itself stays 0600.
    pub fn open_file(path: &Path) -> Result<AuditLog, AuditError> {
        let open_error = |source| AuditError::Open {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o711)
                .create(parent)
                .map_err(open_error)?;
        }
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(open_error)?;
        if !file.metadata().map_err(open_error)?.is_file() {
            return Ok(AuditLog::with_sinks(vec![Sink::Stream {
                target: Stream::Other {
                    file,
                    path: path.to_path_buf(),
                },
                last: GENESIS,
            }]));
        }
        let checkpoint_path = chain::checkpoint_path(path);
        let checkpoint = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&checkpoint_path)
            .map_err(|source| AuditError::Open {
                path: checkpoint_path.clone(),
                source,
            })?;
        Ok(AuditLog::with_sinks(vec![Sink::File(Box::new(
            SharedFile {
                file,
                path: path.to_path_buf(),
                checkpoint,
                // Unknown: the first commit reads the tail.
                end: u64::MAX,
                last: GENESIS,
                unsealed: None,
                out: Vec::with_capacity(512),
                unhashed: None,
            },
        ))]))
    }

    pub fn stderr() -> AuditLog {
        AuditLog::with_sinks(vec![Sink::Stream {
            target: Stream::Stderr,
            last: GENESIS,
        }])
    }

    pub fn memory() -> AuditLog {
        AuditLog::with_sinks(vec![Sink::Stream {
            target: Stream::Memory(Vec::new()),
            last: GENESIS,
        }])
    }

    fn with_sinks(sinks: Vec<Sink>) -> AuditLog {
        AuditLog {
            sinks,
            session: new_session_id(),
            seq: 0,
            staged: Vec::with_capacity(512),
            staged_ends: Vec::new(),
            out: Vec::with_capacity(512),
            calls: None,
            deferred: Vec::new(),
            held: Vec::new(),
            held_since: None,
        }
    }

    /// From now on, a `net_connect` event written while exactly one tool call of its server is in
    /// flight carries that call's `request_id` (see [`super::calls`]).
    pub fn attribute_connections(&mut self) {
        self.calls.get_or_insert_with(Default::default);
    }

    /// This process's session id, as written in every record.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Everything written to the in-memory sink so far (empty for other sinks).
    pub fn memory_contents(&self) -> &[u8] {
        self.sinks
            .iter()
            .find_map(|sink| match sink {
                Sink::Stream {
                    target: Stream::Memory(buffer),
                    ..
                } => Some(buffer.as_slice()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Stamps and writes the event as one line to every sink (together with any events staged
    /// before it, in order).
    pub fn record(&mut self, event: Event) -> Result<(), AuditError> {
        self.stage(event)?;
        self.commit()
    }

    /// Stamps `ts`, `session` and `seq` and encodes the event, but does not write it yet: the
    /// next [`AuditLog::commit`] (or `record`) links and writes every staged event in one
    /// `write`. This lets a session record the decisions of all the calls that arrived together
    /// with one syscall, still before any of them is forwarded.
    pub fn stage(&mut self, event: Event) -> Result<(), AuditError> {
        self.release_held();
        self.stage_deferred()?;
        self.stage_now(event)
    }

    /// Keeps the event to be stamped and encoded at the next [`AuditLog::stage`], `record` or
    /// `commit`, in order with everything recorded. A session defers the events of a step
    /// until the host's answers of that step are out: an answer does not wait for the encoding
    /// of its own `outcome`, and every `decision` is still written before its call is forwarded
    /// (the commit that precedes forwarding stages whatever is deferred).
    pub fn defer(&mut self, event: Event) {
        if event.event != EventKind::Decision {
            self.release_held();
        }
        self.deferred.push(event);
    }

    /// Keeps an `outcome` to be written later than [`AuditLog::defer`] would: nothing waits for
    /// it, and a session writes it where it costs no call any time, after it forwards the next
    /// call (while the server works on it) or when [`HOLD_AT_MOST`] has passed
    /// ([`AuditLog::held_until`]). Only decisions are written before it: anything else staged or
    /// deferred after it releases it first, and so does dropping the log. (So connection
    /// attribution, which follows the log's order, sees it before any `net_connect` that comes
    /// after it; the decisions that overtake it are of other calls.)
    pub fn hold(&mut self, event: Event) {
        self.held_since.get_or_insert_with(Instant::now);
        self.held.push(event);
    }

    /// When the held outcomes are due, if any are held.
    pub fn held_until(&self) -> Option<Instant> {
        self.held_since.map(|since| since + HOLD_AT_MOST)
    }

    /// Queues the held outcomes behind what is deferred: the next `commit` or `write_unsealed`
    /// writes them.
    pub fn release_held(&mut self) {
        if self.held_since.take().is_some() {
            self.deferred.append(&mut self.held);
        }
    }

    /// Writes the held outcomes now (with anything deferred before them). A no-op when none are
    /// held.
    pub fn commit_held(&mut self) -> Result<(), AuditError> {
        if self.held_since.is_none() {
            return Ok(());
        }
        self.release_held();
        self.commit()
    }

    fn stage_deferred(&mut self) -> Result<(), AuditError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let mut events = std::mem::take(&mut self.deferred);
        let mut result = Ok(());
        for event in events.drain(..) {
            if result.is_ok() {
                result = self.stage_now(event);
            }
        }
        // The emptied buffer is kept for the next step's events.
        self.deferred = events;
        result
    }

    fn stage_now(&mut self, mut event: Event) -> Result<(), AuditError> {
        if let Some(calls) = &mut self.calls {
            calls.observe(&mut event);
        }
        self.seq += 1;
        let start = self.staged.len();
        // The stamp is written by hand in front of the event's own fields: `{"ts":..,"session":
        // ..,"seq":N` then the event's encoding with its opening brace turned into a comma.
        self.staged.extend_from_slice(b"{\"ts\":\"");
        write_rfc3339(&mut self.staged, SystemTime::now());
        self.staged.extend_from_slice(b"\",\"session\":\"");
        self.staged.extend_from_slice(self.session.as_bytes());
        self.staged.extend_from_slice(b"\",\"seq\":");
        self.staged
            .extend_from_slice(itoa::Buffer::new().format(self.seq).as_bytes());
        let event_start = self.staged.len();
        if let Err(err) = serde_json::to_writer(&mut self.staged, &event) {
            self.staged.truncate(start);
            self.seq -= 1;
            return Err(err.into());
        }
        self.staged[event_start] = b',';
        self.staged_ends.push(self.staged.len());
        Ok(())
    }

    /// Whether events are staged or deferred and not yet written (held outcomes not counted:
    /// they have their own time, [`AuditLog::held_until`]).
    pub fn has_staged(&self) -> bool {
        !self.staged_ends.is_empty() || !self.deferred.is_empty()
    }

    /// Writes every staged event, as whole chained lines, with one `write` per sink (no user-space
    /// buffer is left behind: when this returns Ok the events are in the kernel's hands), and
    /// seals the log (see [`AuditLog::write_unsealed`]). On an error the staged events are
    /// discarded; the caller must not forward what they record.
    pub fn commit(&mut self) -> Result<(), AuditError> {
        self.write_unsealed()?;
        self.seal()
    }

    /// [`AuditLog::commit`] without its last step: on a shared file the lock stays held and the
    /// checkpoint is not yet rewritten until [`AuditLog::seal`]. The records are in the kernel's
    /// hands when this returns Ok, so a session forwards the calls they record between the two
    /// and the call does not wait for the checkpoint. Anything that writes to the log seals
    /// first, and so does dropping it.
    pub fn write_unsealed(&mut self) -> Result<(), AuditError> {
        let staged = self.stage_deferred();
        if self.staged_ends.is_empty() {
            return staged;
        }
        let result = staged.and_then(|()| self.write_staged());
        self.staged.clear();
        self.staged_ends.clear();
        for buffer in [&mut self.staged, &mut self.out] {
            if buffer.capacity() > MAX_KEPT_CAPACITY {
                buffer.shrink_to(MAX_KEPT_CAPACITY);
            }
        }
        result
    }

    /// Finishes the last [`AuditLog::write_unsealed`]: the checkpoint rewritten to cover its
    /// records, and the lock given back. A no-op when nothing is unsealed.
    pub fn seal(&mut self) -> Result<(), AuditError> {
        for sink in &mut self.sinks {
            if let Sink::File(shared) = sink {
                shared.seal(&self.session)?;
            }
        }
        Ok(())
    }

    fn write_staged(&mut self) -> Result<(), AuditError> {
        let mut records = Vec::with_capacity(self.staged_ends.len());
        let mut start = 0;
        for end in &self.staged_ends {
            records.push(&self.staged[start..*end]);
            start = *end;
        }
        let out = &mut self.out;
        for sink in &mut self.sinks {
            match sink {
                Sink::File(shared) => shared.commit(&records, self.seq, &self.session)?,
                Sink::Stream { target, last } => {
                    out.clear();
                    for record in &records {
                        *last = chain::append_linked(out, record, last);
                    }
                    match target {
                        Stream::Stderr => {
                            std::io::stderr().lock().write_all(out).map_err(|source| {
                                AuditError::Write {
                                    target: "stderr".into(),
                                    source,
                                }
                            })?
                        }
                        Stream::Other { file, path } => {
                            file.write_all(out).map_err(write_error(path))?
                        }
                        Stream::Memory(buffer) => buffer.extend_from_slice(out),
                    }
                }
            }
        }
        Ok(())
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.release_held();
        if let Err(err) = self.commit() {
            tracing::warn!(
                "the audit log could not be finished (its last records or its checkpoint): {err}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::EventKind;

    fn parse_lines(text: &str) -> Vec<serde_json::Value> {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn staged_events_are_written_together_in_order_on_commit() {
        let mut log = AuditLog::memory();
        log.stage(Event::new(EventKind::Decision, "a")).unwrap();
        log.stage(Event::new(EventKind::Decision, "a")).unwrap();
        assert!(log.has_staged());
        assert!(log.memory_contents().is_empty());
        log.commit().unwrap();
        assert!(!log.has_staged());
        log.record(Event::new(EventKind::Outcome, "a")).unwrap();
        let text = String::from_utf8(log.memory_contents().to_vec()).unwrap();
        let records = parse_lines(&text);
        let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert!(records.iter().all(|r| r["session"] == log.session()));
        // Each line links to the one before it.
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(records[0]["prev"], "0".repeat(64));
        for pair in lines.windows(2) {
            let prev = crate::hash::sha256_hex(pair[0].as_bytes());
            assert!(
                pair[1].ends_with(&format!("\"prev\":\"{prev}\"}}")),
                "{}",
                pair[1]
            );
        }
        assert!(lines[0].starts_with(r#"{"ts":""#));
    }

    fn servers_in_order(log: &AuditLog) -> Vec<String> {
        let text = String::from_utf8(log.memory_contents().to_vec()).unwrap();
        parse_lines(&text)
            .iter()
            .map(|r| r["server"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn only_decisions_are_written_before_a_held_outcome() {
        let mut log = AuditLog::memory();
        log.hold(Event::new(EventKind::Outcome, "held"));
        assert!(log.held_until().is_some());
        log.defer(Event::new(EventKind::Decision, "decision"));
        log.commit().unwrap();
        assert_eq!(
            servers_in_order(&log),
            ["decision"],
            "the outcome is still held"
        );
        assert!(!log.has_staged(), "a held outcome is not staged");
        // Anything else releases it first: an exit is never written before an outcome.
        log.defer(Event::new(EventKind::Exit, "exit"));
        assert_eq!(log.held_until(), None);
        log.commit().unwrap();
        log.hold(Event::new(EventKind::Outcome, "held again"));
        log.record(Event::new(EventKind::Dropped, "dropped"))
            .unwrap();
        assert_eq!(
            servers_in_order(&log),
            ["decision", "held", "exit", "held again", "dropped"]
        );
        let seqs: Vec<u64> = parse_lines(&String::from_utf8_lossy(log.memory_contents()))
            .iter()
            .map(|r| r["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5], "seq follows the file's order");
    }

    #[test]
    fn a_held_outcome_is_written_when_released_or_when_the_log_is_dropped() {
        let mut log = AuditLog::memory();
        log.hold(Event::new(EventKind::Outcome, "a"));
        log.release_held();
        log.commit().unwrap();
        assert_eq!(servers_in_order(&log), ["a"]);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open_file(&path).unwrap();
        log.hold(Event::new(EventKind::Outcome, "held at the end"));
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(parse_lines(&text)[0]["server"], "held at the end");
    }

    #[test]
    fn deferred_events_keep_their_place_before_anything_staged_after_them() {
        let mut log = AuditLog::memory();
        log.defer(Event::new(EventKind::Outcome, "first"));
        assert!(log.has_staged());
        log.stage(Event::new(EventKind::Dropped, "second")).unwrap();
        log.commit().unwrap();
        log.defer(Event::new(EventKind::Outcome, "third"));
        let written = |log: &AuditLog| {
            log.memory_contents()
                .iter()
                .filter(|b| **b == b'\n')
                .count()
        };
        assert_eq!(written(&log), 2, "a deferred event waits for the commit");
        log.commit().unwrap();
        assert!(!log.has_staged());
        let text = String::from_utf8(log.memory_contents().to_vec()).unwrap();
        let records = parse_lines(&text);
        let order: Vec<(&str, u64)> = records
            .iter()
            .map(|r| (r["server"].as_str().unwrap(), r["seq"].as_u64().unwrap()))
            .collect();
        assert_eq!(order, [("first", 1), ("second", 2), ("third", 3)]);
    }

    #[test]
    fn appends_numbered_chained_lines_to_a_private_file_and_keeps_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/airlock/audit.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
        let mut log = AuditLog::open_file(&path).unwrap();
        log.record(Event::new(EventKind::Spawn, "a")).unwrap();
        log.record(Event::new(EventKind::Exit, "a")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let records = parse_lines(&text);
        assert_eq!(records[2]["seq"], 2);
        assert_eq!(records[2]["event"], "exit");
        assert!(records[2]["ts"].as_str().unwrap().ends_with('Z'));
        // The first record links to the line that was there before.
        assert_eq!(
            records[1]["prev"],
            crate::hash::sha256_hex(lines[0].as_bytes())
        );
        let checkpoint =
            Checkpoint::parse(&std::fs::read(chain::checkpoint_path(&path)).unwrap()).unwrap();
        assert_eq!(checkpoint.bytes, text.len() as u64);
        assert_eq!(checkpoint.last, chain::line_hash(lines[2].as_bytes()));
        assert_eq!(checkpoint.seq, 2);
        use std::os::unix::fs::PermissionsExt;
        let fresh = dir.path().join("fresh/dir/audit.jsonl");
        AuditLog::open_file(&fresh).unwrap();
        for file in [fresh.clone(), chain::checkpoint_path(&fresh)] {
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}", file.display());
        }
    }

    #[test]
    fn an_unsealed_write_holds_the_lock_and_the_seal_covers_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let checkpoint =
            || Checkpoint::parse(&std::fs::read(chain::checkpoint_path(&path)).unwrap());
        let other_writer_can_lock = || {
            // flock locks belong to the open file description: another open of the log is
            // another writer.
            let other = File::open(&path).unwrap();
            crate::lock::flock(&other, libc::LOCK_EX | libc::LOCK_NB).is_ok()
        };
        let mut log = AuditLog::open_file(&path).unwrap();
        log.record(Event::new(EventKind::Spawn, "a")).unwrap();
        assert_eq!(checkpoint().unwrap().seq, 1);
        log.stage(Event::new(EventKind::Decision, "a")).unwrap();
        log.write_unsealed().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().count(),
            2,
            "the record is written before the seal"
        );
        assert_eq!(
            checkpoint().unwrap().seq,
            1,
            "the checkpoint waits for the seal"
        );
        assert!(!other_writer_can_lock(), "the lock is held until the seal");
        log.seal().unwrap();
        let sealed = checkpoint().unwrap();
        assert_eq!((sealed.seq, sealed.bytes), (2, text.len() as u64));
        assert!(other_writer_can_lock());
        // Whatever writes next seals first, and so does dropping the log.
        log.stage(Event::new(EventKind::Decision, "a")).unwrap();
        log.write_unsealed().unwrap();
        log.record(Event::new(EventKind::Outcome, "a")).unwrap();
        assert_eq!(checkpoint().unwrap().seq, 4);
        // Several records in one write, the last one's hash taken at the seal.
        for _ in 0..3 {
            log.stage(Event::new(EventKind::Decision, "a")).unwrap();
        }
        log.write_unsealed().unwrap();
        drop(log);
        let sealed = checkpoint().unwrap();
        assert_eq!(sealed.seq, 7);
        assert!(other_writer_can_lock());
        let text = std::fs::read(&path).unwrap();
        let last_line = text[..text.len() - 1]
            .rsplit(|b| *b == b'\n')
            .next()
            .unwrap();
        assert_eq!(sealed.last, chain::line_hash(last_line));
        let report = crate::audit::verify::verify(&text, Some(&sealed));
        assert_eq!(report.problem, None);
        assert_eq!((report.records, report.uncovered), (7, 0));
    }

    #[test]
    fn two_logs_on_one_file_form_one_chain_and_a_torn_tail_gets_its_own_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut first = AuditLog::open_file(&path).unwrap();
        let mut second = AuditLog::open_file(&path).unwrap();
        first.record(Event::new(EventKind::Spawn, "a")).unwrap();
        second.record(Event::new(EventKind::Spawn, "b")).unwrap();
        first.record(Event::new(EventKind::Exit, "a")).unwrap();
        // A writer that died mid-line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"torn")
            .unwrap();
        second.record(Event::new(EventKind::Exit, "b")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert_eq!(lines[3], "{\"torn");
        for pair in lines.windows(2) {
            let prev = crate::hash::sha256_hex(pair[0].as_bytes());
            if pair[1] != "{\"torn" {
                assert!(
                    pair[1].ends_with(&format!("\"prev\":\"{prev}\"}}")),
                    "{text}"
                );
            }
        }
        assert_ne!(first.session(), second.session());
    }
}
