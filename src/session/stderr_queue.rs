//! airlock's stderr during a session. Nothing in `run` or `serve` may wait on it: a host that
//! never reads airlock's stderr (many only read stdout) fills the pipe after 64 KiB, and one
//! blocking write in the single-threaded event loop would freeze every call, every timer and the
//! signals. So while a session runs, every line for stderr (the servers' relayed stderr,
//! airlock's own log, its messages) goes into one bounded queue that a thread of its own writes
//! out. When the queue is full a line is dropped and counted; the next line that fits is
//! preceded by one notice with the count, so the reader learns what it missed.
//!
//! Outside a session (every other command, unit tests) lines are written directly, as before.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Bytes the queue holds before it drops lines: well above what a healthy reader lags behind,
/// small enough that a reader that is gone costs little memory.
pub const QUEUE_BYTES: usize = 1024 * 1024;

/// The pure part: which lines are queued, which dropped, and when the notice is due.
#[derive(Debug)]
pub struct LineQueue {
    lines: VecDeque<Vec<u8>>,
    bytes: usize,
    limit: usize,
    /// Lines dropped since the last notice.
    dropped: u64,
    /// Lines dropped in all (for the tests and the final notice).
    dropped_total: u64,
}

impl LineQueue {
    pub fn new(limit: usize) -> LineQueue {
        LineQueue {
            lines: VecDeque::new(),
            bytes: 0,
            limit,
            dropped: 0,
            dropped_total: 0,
        }
    }

    /// Queues `line` if it fits (after the notice of earlier drops, which must fit with it);
    /// else drops and counts it. True when queued.
    pub fn push(&mut self, line: Vec<u8>) -> bool {
        let notice = (self.dropped > 0).then(|| dropped_notice(self.dropped));
        let needed = line.len() + notice.as_ref().map_or(0, Vec::len);
        if self.bytes + needed > self.limit {
            self.dropped += 1;
            self.dropped_total += 1;
            return false;
        }
        if let Some(notice) = notice {
            self.enqueue(notice);
            self.dropped = 0;
        }
        self.enqueue(line);
        true
    }

    /// At the end: the notice of drops not yet told, even past the limit (it is one short line).
    pub fn close(&mut self) {
        if self.dropped > 0 {
            let notice = dropped_notice(self.dropped);
            self.enqueue(notice);
            self.dropped = 0;
        }
    }

    pub fn pop(&mut self) -> Option<Vec<u8>> {
        let line = self.lines.pop_front()?;
        self.bytes -= line.len();
        Some(line)
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped_total
    }

    fn enqueue(&mut self, line: Vec<u8>) {
        self.bytes += line.len();
        self.lines.push_back(line);
    }
}

/// The one line that tells how many lines a slow (or absent) reader of stderr missed.
pub fn dropped_notice(lines: u64) -> Vec<u8> {
    format!("airlock: {lines} stderr lines dropped (airlock's stderr was not read fast enough)\n")
        .into_bytes()
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a line is queued (the writer waits on it).
    queued: Condvar,
    /// Signalled when the writer has written everything (`finish` waits on it).
    drained: Condvar,
}

struct State {
    queue: LineQueue,
    /// The writer holds a line it took from the queue and has not written yet.
    writing: bool,
    /// stderr is gone (a write failed): lines are discarded from then on.
    broken: bool,
}

static QUEUE: OnceLock<Arc<Shared>> = OnceLock::new();

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; carry on with it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Routes stderr through the queue from now on (idempotent). Called by `run` and `serve` before
/// their session starts. Without a thread (the system refused one) lines stay direct.
pub fn start() {
    if QUEUE.get().is_some() {
        return;
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: LineQueue::new(QUEUE_BYTES),
            writing: false,
            broken: false,
        }),
        queued: Condvar::new(),
        drained: Condvar::new(),
    });
    let for_thread = Arc::clone(&shared);
    let spawned = std::thread::Builder::new()
        .name("airlock-stderr".into())
        .spawn(move || write_out(&for_thread));
    if spawned.is_ok() {
        let _ = QUEUE.set(shared);
    }
}

/// The writer thread: takes lines one by one and writes them, blocking as long as the reader
/// makes it (only this thread waits for the reader).
fn write_out(shared: &Shared) {
    let mut stderr = std::io::stderr();
    loop {
        let line = {
            let mut state = shared.lock();
            loop {
                if let Some(line) = state.queue.pop() {
                    state.writing = true;
                    break line;
                }
                state.writing = false;
                shared.drained.notify_all();
                state = shared
                    .queued
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        let written = stderr.write_all(&line).and_then(|()| stderr.flush());
        if written.is_err() {
            let mut state = shared.lock();
            state.broken = true;
            while state.queue.pop().is_some() {}
        }
    }
}

/// Writes one line (with its newline) to stderr without waiting: queued during a session,
/// direct otherwise.
pub fn write_line(line: Vec<u8>) {
    let Some(shared) = QUEUE.get() else {
        let _ = std::io::stderr().write_all(&line);
        return;
    };
    let mut state = shared.lock();
    if state.broken {
        return;
    }
    if state.queue.push(line) {
        shared.queued.notify_one();
    }
}

/// `write_line` for a message: adds the newline.
pub fn say(message: impl std::fmt::Display) {
    write_line(format!("{message}\n").into_bytes());
}

/// At exit: tells the drops not yet told and waits until everything queued is written, or
/// `within` passes (a reader that is gone must not keep airlock alive).
pub fn finish(within: Duration) {
    let Some(shared) = QUEUE.get() else {
        return;
    };
    let deadline = Instant::now() + within;
    let mut state = shared.lock();
    state.queue.close();
    shared.queued.notify_one();
    while !state.broken && (state.writing || !state.queue.is_empty()) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        state = match shared.drained.wait_timeout(state, left) {
            Ok((state, _)) => state,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
}

/// A `Write` for whole lines into the queue: bytes are gathered and each complete line is queued
/// as one (so a line is kept or dropped whole); a last partial line is queued when it is dropped.
/// The `MakeWriter` of airlock's log and the sink of the servers' relayed stderr.
#[derive(Default)]
pub struct QueueWriter {
    pending: Vec<u8>,
}

impl Write for QueueWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        complete_lines(&mut self.pending, buf)
            .into_iter()
            .for_each(write_line);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for QueueWriter {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            write_line(std::mem::take(&mut self.pending));
        }
    }
}

/// Adds `buf` to `pending` and takes out the lines it completed (each with its newline).
pub fn complete_lines(pending: &mut Vec<u8>, buf: &[u8]) -> Vec<Vec<u8>> {
    pending.extend_from_slice(buf);
    let mut lines = Vec::new();
    while let Some(end) = pending.iter().position(|&b| b == b'\n') {
        let rest = pending.split_off(end + 1);
        lines.push(std::mem::replace(pending, rest));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_past_the_limit_are_dropped_and_told_once_with_their_count() {
        let mut queue = LineQueue::new(200);
        let line = |n: u8| vec![n; 50];
        assert!((0..4).all(|n| queue.push(line(n))));
        assert!(!queue.push(line(4)), "200 bytes are full");
        assert!(!queue.push(line(5)));
        assert_eq!(queue.dropped_total(), 2);
        assert_eq!(queue.pop(), Some(line(0)));
        // 150 queued: the notice (over 50 bytes) and a line do not fit yet.
        assert!(!queue.push(line(6)));
        assert_eq!(queue.pop(), Some(line(1)));
        assert_eq!(queue.pop(), Some(line(2)));
        assert!(queue.push(line(7)));
        assert_eq!(queue.pop(), Some(line(3)));
        assert_eq!(queue.pop(), Some(dropped_notice(3)));
        assert_eq!(queue.pop(), Some(line(7)));
        assert!(queue.push(line(8)), "the notice is not repeated");
        assert_eq!(queue.pop(), Some(line(8)));
        assert!(queue.is_empty());
    }

    #[test]
    fn drops_not_yet_told_are_told_at_the_close() {
        let mut queue = LineQueue::new(10);
        assert!(!queue.push(vec![b'x'; 11]));
        queue.close();
        assert_eq!(queue.pop(), Some(dropped_notice(1)));
        queue.close();
        assert!(queue.is_empty(), "told once");
    }

    #[test]
    fn writes_are_gathered_into_whole_lines() {
        let mut pending = Vec::new();
        assert!(complete_lines(&mut pending, b"WARN a").is_empty());
        assert_eq!(
            complete_lines(&mut pending, b" b\nINFO"),
            vec![b"WARN a b\n".to_vec()]
        );
        assert_eq!(
            complete_lines(&mut pending, b" c\n\nx"),
            vec![b"INFO c\n".to_vec(), b"\n".to_vec()]
        );
        assert_eq!(pending, b"x");
    }
}
