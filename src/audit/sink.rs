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
use super::rotate::{self, Rotation};
use crate::lock::flock;

#[path = "sink_rotate.rs"]
mod rotating;

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
    /// `why` ends with the fix.
    #[error("cannot go on writing the audit log {path}: {why}")]
    Rotate { path: PathBuf, why: String },
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
    /// When this process rotates the file (`None`: never; it still follows other writers'
    /// rotations).
    rotation: Option<Rotation>,
    /// Set when a rotation failed after its `rotated` record was written: nothing more may go
    /// into this file, and there is no other to go to. Every later write fails with this.
    broken: Option<String>,
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
    /// Deferred events already encoded into `staged`, dropped once written.
    encoded: Vec<Event>,
    /// Outcomes kept by [`AuditLog::hold`] and not encoded yet, and when the first outcome
    /// still unwritten was held.
    held: Vec<Event>,
    held_since: Option<Instant>,
    /// How many of the first records in `staged` are held outcomes already encoded
    /// ([`AuditLog::encode_held`]): they wait for the next write, which takes them along.
    held_encoded: usize,
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

/// Opens the log at `path` for appending (creating it, mode 0600) and its checkpoint. `None`
/// when the log is not a regular file (a pipe or a device: no lock, no checkpoint).
fn open_log_files(path: &Path) -> Result<(File, Option<File>), AuditError> {
    let open_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AuditError::Open { path, source }
    };
    // A link at the log's path is followed only when it is the running user's or root's: one
    // that another user planted (in a directory they may write, a log root shares with them)
    // would have airlock, as root, create or append to a file of that user's choosing. What
    // was no link when looked at is opened as none (it cannot become one in between).
    let link = std::fs::symlink_metadata(path)
        .ok()
        .filter(|meta| meta.file_type().is_symlink());
    if let Some(link) = &link {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if link.uid() != me && link.uid() != 0 {
            return Err(open_error(path)(std::io::Error::other(format!(
                "it is a link owned by uid {}, neither root nor who runs airlock: a link another user planted is not followed (remove it, or point --audit at the file itself)",
                link.uid()
            ))));
        }
    }
    let follow = if link.is_some() { 0 } else { libc::O_NOFOLLOW };
    let file = OpenOptions::new()
        .append(true)
        .read(true)
        .create(true)
        .mode(0o600)
        .custom_flags(follow)
        .open(path)
        .map_err(open_error(path))?;
    let meta = file.metadata().map_err(open_error(path))?;
    if let Some(why) = planted_by_another(path, &meta) {
        return Err(open_error(path)(std::io::Error::other(why)));
    }
    if !meta.is_file() {
        return Ok((file, None));
    }
    let checkpoint_path = chain::checkpoint_path(path);
    // The checkpoint is airlock's own file beside the log: never through a link, and never
    // anything but a regular file (a FIFO there would stop airlock at its open or its writes).
    let checkpoint = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&checkpoint_path)
        .map_err(open_error(&checkpoint_path))?;
    let checkpoint_meta = checkpoint
        .metadata()
        .map_err(open_error(&checkpoint_path))?;
    if !checkpoint_meta.is_file() {
        let why = "it is not a regular file (remove it: airlock writes its checkpoint there)";
        return Err(open_error(&checkpoint_path)(std::io::Error::other(why)));
    }
    // The chain's anchor in a file another user made could be read and rewritten by them.
    if let Some(why) = planted_by_another(&checkpoint_path, &checkpoint_meta) {
        return Err(open_error(&checkpoint_path)(std::io::Error::other(why)));
    }
    Ok((file, Some(checkpoint)))
}

/// Why the log at `path` (its metadata `meta`) is taken for one another user planted, if it is:
/// it belongs to neither the running user nor root, and its directory lets others than that
/// owner put files there (writable by group or others, or someone else's). A user's own log in
/// their own directory, which root writes under `sudo -E`, is theirs; a file or FIFO another
/// user made in a shared directory would have airlock's records go where they read them.
fn planted_by_another(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let owner = meta.uid();
    if owner == me || owner == 0 {
        return None;
    }
    // A bare name (`--audit a.jsonl`) is in the working directory.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = std::fs::metadata(dir).ok()?;
    let dir_shared = dir.mode() & 0o022 != 0 || (dir.uid() != owner && dir.uid() != 0);
    dir_shared.then(|| {
        format!(
            "it belongs to uid {owner} (neither root nor who runs airlock), in a directory others may write: a log another user planted is not written (remove it, or keep the log in a directory only its owner may change)"
        )
    })
}

/// Why the log's directory could not be made: the error, unless it is that the directory's
/// place is taken by a file (the system says "File exists", which reads as if all were well).
fn why_no_directory(dir: &Path, err: std::io::Error) -> std::io::Error {
    let taken_by_a_file = std::fs::metadata(dir).is_ok_and(|meta| !meta.is_dir());
    if err.kind() == std::io::ErrorKind::AlreadyExists && taken_by_a_file {
        return std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{} is a file, not a directory", dir.display()),
        );
    }
    err
}

/// How many rotations in a row a writer follows before it gives up (each follow goes to the
/// newest file, so more than one means others rotated while it opened one: a bound, not a
/// count any real load reaches).
const FOLLOW_AT_MOST: usize = 64;

impl SharedFile {
    /// Links `records` to the file's current last line and appends them, under the lock, which
    /// stays held until [`SharedFile::seal`] (the records are in the kernel's hands when this
    /// returns Ok).
    fn commit(&mut self, records: &[&[u8]], seq: u64, session: &str) -> Result<(), AuditError> {
        self.seal(session)?;
        if records.is_empty() {
            return Ok(());
        }
        if let Some(why) = &self.broken {
            return Err(AuditError::Rotate {
                path: self.path.clone(),
                why: why.clone(),
            });
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
        let (end, mut prev, unterminated) = self.find_end()?;
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

    /// Under the lock: where the file ends, the hash of its last line, and whether that line is
    /// unterminated. When another writer rotated the file since this process last wrote (its
    /// last line is a `rotated` record), the new file at the log's path is opened and locked
    /// instead, and looked at the same way.
    fn find_end(&mut self) -> Result<(u64, LineHash, bool), AuditError> {
        for _ in 0..FOLLOW_AT_MOST {
            let end = (&self.file)
                .seek(SeekFrom::End(0))
                .map_err(write_error(&self.path))?;
            if end == self.end {
                return Ok((end, self.last_hash(), false));
            }
            self.unhashed = None;
            if end == 0 {
                return Ok((end, GENESIS, false));
            }
            let (line, terminated) =
                rotate::last_line(&self.file, end).map_err(write_error(&self.path))?;
            let hash = chain::line_hash(&line);
            if !(terminated && rotate::is_rotation_marker(&line)) {
                return Ok((end, hash, !terminated));
            }
            self.follow_rotation(&line, end)?;
        }
        Err(AuditError::Rotate {
            path: self.path.clone(),
            why: format!(
                "other writers rotated it {FOLLOW_AT_MOST} times while this one followed. Fix: start airlock again"
            ),
        })
    }

    /// Moves to the file now at the log's path, under its lock, letting go of this one, whose
    /// last line (`end` bytes into it) is the `rotated` record `closing`. When nothing replaced
    /// this file (a rotation that stopped half-way), the rotation is finished first if its
    /// prepared file is there and links to that record.
    fn follow_rotation(&mut self, closing: &[u8], end: u64) -> Result<(), AuditError> {
        let path = self.path.clone();
        let unfinished = |why: &str| AuditError::Rotate {
            path: path.clone(),
            why: why.to_string(),
        };
        let (mut file, mut checkpoint) = open_log_files(&self.path)?;
        let same_file = |a: &File, b: &File| matches!((rotate::identity(a), rotate::identity(b)), (Ok(a), Ok(b)) if a == b);
        if same_file(&file, &self.file) {
            self.finish_rotation(closing, end)
                .map_err(|why| unfinished(&why))?;
            (file, checkpoint) = open_log_files(&self.path)?;
        }
        let Some(checkpoint) = checkpoint else {
            return Err(unfinished("what replaced it is not a regular file"));
        };
        // Let go first: the two are different files, and nothing more goes into this one.
        let _ = flock(&self.file, libc::LOCK_UN);
        flock(&file, libc::LOCK_EX).map_err(write_error(&self.path))?;
        self.file = file;
        self.checkpoint = checkpoint;
        self.end = u64::MAX;
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
    /// there is nothing to seal. True when the file has reached its rotation size: then the
    /// lock is still held, for [`AuditLog::seal`] to rotate the file and let go.
    fn seal(&mut self, session: &str) -> Result<bool, AuditError> {
        let Some(seq) = self.unsealed.take() else {
            return Ok(false);
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
        let due = written.is_ok() && self.rotation.is_some_and(|r| r.is_due(self.end));
        if !due {
            let _ = flock(&self.file, libc::LOCK_UN);
        }
        written.map(|()| due)
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
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o711)
                .create(parent)
                .map_err(|source| AuditError::Open {
                    path: path.to_path_buf(),
                    source: why_no_directory(parent, source),
                })?;
        }
        let (file, checkpoint) = open_log_files(path)?;
        let Some(checkpoint) = checkpoint else {
            return Ok(AuditLog::with_sinks(vec![Sink::Stream {
                target: Stream::Other {
                    file,
                    path: path.to_path_buf(),
                },
                last: GENESIS,
            }]));
        };
        // A log reached through a link is kept where its file is: its checkpoint and rotated
        // files lie beside the file itself, and the link stays a link to the log.
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let (file, checkpoint) = if real == path {
            (file, checkpoint)
        } else {
            match open_log_files(&real)? {
                (file, Some(checkpoint)) => (file, checkpoint),
                (_, None) => (file, checkpoint),
            }
        };
        let path = real.as_path();
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
                rotation: None,
                broken: None,
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
            encoded: Vec::new(),
            held: Vec::new(),
            held_since: None,
            held_encoded: 0,
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
    pub fn stage(&mut self, mut event: Event) -> Result<(), AuditError> {
        self.release_held();
        self.stage_deferred()?;
        self.stage_now(&mut event)
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
    /// it. A session encodes it once the step's bytes are out ([`AuditLog::encode_held`]) and
    /// the log writes it with the next commit, in the same `write` as the next call's decision
    /// (so it costs no lock, seek or checkpoint of its own), or when [`HOLD_AT_MOST`] has passed
    /// ([`AuditLog::held_until`]). Only decisions of the same step are written before it:
    /// anything else staged or deferred after it releases it first, and so does dropping the
    /// log. (So connection attribution, which follows the log's order, sees it before any
    /// `net_connect` that comes after it.)
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
            self.held_encoded = 0;
        }
    }

    /// Encodes the held outcomes, which then wait, ready, at the head of what is staged: the
    /// next write takes them along without encoding them on a call's way to its server. Left
    /// for later when anything else is staged or deferred (that is written first and releases
    /// nothing: a held outcome stays behind it).
    pub fn encode_held(&mut self) -> Result<(), AuditError> {
        if self.held.is_empty()
            || !self.deferred.is_empty()
            || self.staged_ends.len() != self.held_encoded
        {
            return Ok(());
        }
        let mut held = std::mem::take(&mut self.held);
        let result = self.stage_all(&mut held);
        // Freed here, where nothing waits, and the emptied buffer kept for the next outcomes.
        held.clear();
        self.held = held;
        self.held_encoded = self.staged_ends.len();
        result
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
        let result = self.stage_all(&mut events);
        // Dropped after the write that carries them (`write_unsealed`): freeing them is no
        // part of a call's way to its server.
        self.encoded.append(&mut events);
        // The emptied buffer is kept for the next step's events.
        self.deferred = events;
        result
    }

    /// Stages `events` in order, up to the first that cannot be encoded.
    fn stage_all(&mut self, events: &mut [Event]) -> Result<(), AuditError> {
        events
            .iter_mut()
            .try_for_each(|event| self.stage_now(event))
    }

    fn stage_now(&mut self, event: &mut Event) -> Result<(), AuditError> {
        if let Some(calls) = &mut self.calls {
            calls.observe(event);
        }
        self.seq += 1;
        if let Err(err) = stamp_into(&mut self.staged, &self.session, self.seq, event) {
            self.seq -= 1;
            return Err(err);
        }
        self.staged_ends.push(self.staged.len());
        Ok(())
    }

    /// Whether events are staged or deferred and not yet written (held outcomes not counted:
    /// they have their own time, [`AuditLog::held_until`]).
    pub fn has_staged(&self) -> bool {
        self.staged_ends.len() > self.held_encoded || !self.deferred.is_empty()
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
        if self.staged_ends.len() == self.held_encoded {
            // Nothing but held outcomes (or nothing): they wait for a write that has a reason.
            self.encoded.clear();
            return staged;
        }
        let result = staged.and_then(|()| self.write_staged());
        self.encoded.clear();
        self.staged.clear();
        self.staged_ends.clear();
        self.held_encoded = 0;
        if self.held.is_empty() {
            self.held_since = None;
        }
        for buffer in [&mut self.staged, &mut self.out] {
            if buffer.capacity() > MAX_KEPT_CAPACITY {
                buffer.shrink_to(MAX_KEPT_CAPACITY);
            }
        }
        result
    }

    /// Finishes the last [`AuditLog::write_unsealed`]: the checkpoint rewritten to cover its
    /// records, and the lock given back; a file that has reached its rotation size is rotated
    /// first (after the calls of that write were forwarded). A no-op when nothing is unsealed.
    pub fn seal(&mut self) -> Result<(), AuditError> {
        for index in 0..self.sinks.len() {
            let Sink::File(shared) = &mut self.sinks[index] else {
                continue;
            };
            if shared.seal(&self.session)? {
                self.rotate(index)?;
            }
        }
        Ok(())
    }

    /// From now on this process rotates a log file that reaches `rotation.at_bytes` (a log that
    /// is no regular file is never rotated).
    pub fn rotate_at(&mut self, rotation: Rotation) {
        for sink in &mut self.sinks {
            if let Sink::File(shared) = sink {
                shared.rotation = Some(rotation);
            }
        }
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

/// Appends `event` encoded as a record of `session` numbered `seq`, without its link. The stamp is
/// written by hand in front of the event's own fields: `{"ts":..,"session":..,"seq":N` then the
/// event's encoding with its opening brace turned into a comma. On an error `out` is as before.
fn stamp_into(out: &mut Vec<u8>, session: &str, seq: u64, event: &Event) -> Result<(), AuditError> {
    let start = out.len();
    out.extend_from_slice(b"{\"ts\":\"");
    write_rfc3339(out, SystemTime::now());
    out.extend_from_slice(b"\",\"session\":\"");
    out.extend_from_slice(session.as_bytes());
    out.extend_from_slice(b"\",\"seq\":");
    out.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    let event_start = out.len();
    if let Err(err) = event.encode_into(out) {
        out.truncate(start);
        return Err(err.into());
    }
    out[event_start] = b',';
    Ok(())
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.release_held();
        // A log that cannot take more records said so when it failed; saying it again here
        // would only repeat it.
        let broken = self
            .sinks
            .iter()
            .any(|sink| matches!(sink, Sink::File(shared) if shared.broken.is_some()));
        if broken {
            return;
        }
        if let Err(err) = self.commit() {
            tracing::warn!(
                "the audit log could not be finished (its last records or its checkpoint): {err}"
            );
        }
    }
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "sink_rotate_tests.rs"]
mod rotate_tests;
