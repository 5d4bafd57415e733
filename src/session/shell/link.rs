//! A running server as the loop sees it: a confined child's pipes (or a remote session's queue),
//! its supervisor, and the count of junk it wrote.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use super::io::{FrameReader, Outlet};
use crate::gateway::remote::{Emit, RemoteEvent, RemoteSession};
use crate::process::{ConfinedChild, ExitSummary};

/// How long the exit of a failed sandbox waits for the helper's last stderr line.
const HELPER_WORDS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long the loop waits, after a server's output closed, for its exit report before it tells
/// the core the output closed. A server that exits (the usual reason its output closes, and
/// always so when its sandbox could not be set up) is reported within milliseconds, and the
/// report says why (the exit code, or the confine helper's step and fix), which is what the
/// host's error then carries instead of only "its output closed".
pub const EXIT_REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Junk lines from a server recorded (audit and stderr) one by one; after that only counted.
pub const JUNK_RECORDED: u64 = 10;

/// Reports from the helper tasks (spawns, kill sequences, remote sessions, the control socket).
pub enum Input {
    Spawned {
        server: usize,
        generation: u64,
        result: Result<Connected, crate::process::launch::LaunchError>,
    },
    /// A message from a remote server (local servers' lines are read by the loop itself).
    Remote {
        server: usize,
        generation: u64,
        message: Value,
    },
    /// A remote server sent something that is not an MCP message.
    RemoteDropped {
        server: usize,
        reason: String,
    },
    /// A remote server's link ended (its counterpart of `Exited`).
    RemoteEnded {
        server: usize,
        generation: u64,
        reason: String,
        stopped: bool,
    },
    Exited {
        server: usize,
        generation: u64,
        summary: ExitSummary,
        /// airlock asked for the kill sequence (it did not end on its own first).
        stopped: bool,
    },
    /// A server's output closed and no exit report followed within [`EXIT_REPORT_WAIT`]: the
    /// core is told it closed (and the kill sequence makes sure it is gone).
    OutputClosed {
        server: usize,
        generation: u64,
    },
    Status(oneshot::Sender<Value>),
    Reload(oneshot::Sender<Value>),
    /// A connection event of a server's resolver or connect hand-over (`crate::net`).
    Net(Box<crate::net::route::NetAudit>),
    /// SIGTERM, SIGINT or SIGHUP arrived (`signals::watch`).
    Signal(&'static str),
    /// The host closed its end of airlock's stdout (`signals::watch`).
    HostGone,
}

/// A started server, as its spawn task hands it to the loop.
pub enum Connected {
    Local(Box<ConfinedChild>),
    Remote(RemoteSession),
}

/// Junk accounting: what a server wrote that is not a message airlock forwards (oversized,
/// not UTF-8, not JSON, an answer to no request in flight). The first [`JUNK_RECORDED`] are
/// recorded one by one, the rest only counted, so a flooding server cannot flood the log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Junk {
    pub lines: u64,
}

impl Junk {
    /// Counts one; true when it is to be recorded on its own.
    pub fn note(&mut self) -> bool {
        self.lines += 1;
        self.lines <= JUNK_RECORDED
    }

    /// The lines counted but not recorded, for the summary at the end of the stream.
    pub fn unrecorded(&self) -> u64 {
        self.lines.saturating_sub(JUNK_RECORDED)
    }
}

/// A running server's pipes (or a remote session's queue) and its supervisor.
pub struct Link {
    pub generation: u64,
    pub reader: Option<FrameReader<ChildStdout>>,
    pub writer: Option<Outlet<ChildStdin>>,
    /// A remote server's outgoing queue (its session task does the HTTP).
    pub remote: Option<mpsc::Sender<Vec<u8>>>,
    pub stop: Option<oneshot::Sender<()>>,
    pub pid: Option<u32>,
    pub junk: Junk,
    /// airlock asked for the kill sequence while the server's output was still open (so not
    /// because the server had gone): see [`crate::session::exit::ended_by`].
    pub stopped_while_output_open: bool,
    /// Why airlock stopped it (a reload replaced it, it was idle, the session ends), for the
    /// exit event: a server that then exits on its input's EOF did not end "on its own" alone.
    pub stopped_because: Option<String>,
}

/// Wires a spawned server to the loop: its pipes become the loop's reader and outlet; the stderr
/// relay and the supervisor (runs the kill sequence when asked, or reaps the server when it
/// exits) are tasks of their own.
pub fn attach(
    mut child: ConfinedChild,
    server: usize,
    generation: u64,
    name: String,
    max_line_bytes: usize,
    input_limit: usize,
    inputs: mpsc::UnboundedSender<Input>,
) -> Link {
    let pid = child.id();
    let writer = child
        .stdin
        .take()
        .map(|stdin| Outlet::new(stdin, input_limit));
    let reader = child
        .stdout
        .take()
        .map(|stdout| FrameReader::new(stdout, max_line_bytes));
    let relay = child.stderr.take().map(|stderr| {
        tokio::spawn(async move {
            // Never the blocking stderr: a host that does not read it would freeze the loop.
            let mut sink = crate::session::stderr_queue::QueueWriter::default();
            super::stderr::relay_stderr(stderr, &name, &mut sink).await
        })
    });
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let kill_timeout = child.kill_timeout();
    tokio::spawn(async move {
        let stopped = tokio::select! {
            _ = child.wait() => false,
            _ = stop_rx => true,
        };
        let mut summary = child.shutdown(kill_timeout).await;
        // A sandbox that could not be set up, or a server that failed by itself: its own words
        // (its stderr ends with them; every process of the sandbox is gone by now, so the
        // relay ends at once).
        let failed_by_itself = !stopped && summary.code.is_some_and(|code| code != 0);
        if (summary.helper_step.is_some() || failed_by_itself)
            && let Some(relay) = relay
            && let Ok(Ok(end)) = tokio::time::timeout(HELPER_WORDS_WAIT, relay).await
        {
            summary.helper_message = end.helper_line;
            if failed_by_itself && summary.helper_step.is_none() {
                summary.last_words = end.last_line;
            }
        }
        let _ = inputs.send(Input::Exited {
            server,
            generation,
            summary,
            stopped,
        });
    });
    Link {
        generation,
        reader,
        writer,
        remote: None,
        stop: Some(stop_tx),
        pid,
        junk: Junk::default(),
        stopped_while_output_open: false,
        stopped_because: None,
    }
}

/// Wires a connected remote server to the loop: its session task does the HTTP and reports
/// through the inputs; the link's end stands in for the process exit.
pub fn attach_remote(
    session: RemoteSession,
    server: usize,
    generation: u64,
    queue: usize,
    inputs: mpsc::UnboundedSender<Input>,
) -> Link {
    let (writer_tx, writer_rx) = mpsc::channel::<Vec<u8>>(queue);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let dropped = AtomicU64::new(0);
    let emit: Emit = Arc::new(move |event| {
        let input = match event {
            RemoteEvent::Message(message) => Input::Remote {
                server,
                generation,
                message,
            },
            RemoteEvent::Dropped { reason, .. } => {
                // Counted here too, so a flood does not even cross the channel.
                if dropped.fetch_add(1, Ordering::Relaxed) >= JUNK_RECORDED {
                    return true;
                }
                Input::RemoteDropped { server, reason }
            }
            RemoteEvent::Ended { reason, stopped } => Input::RemoteEnded {
                server,
                generation,
                reason,
                stopped,
            },
        };
        inputs.send(input).is_ok()
    });
    tokio::spawn(session.run(writer_rx, stop_rx, emit));
    Link {
        generation,
        reader: None,
        writer: None,
        remote: Some(writer_tx),
        stop: Some(stop_tx),
        pid: None,
        junk: Junk::default(),
        stopped_while_output_open: false,
        stopped_because: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junk_is_recorded_ten_times_then_counted() {
        let mut junk = Junk::default();
        let recorded = (0..25).filter(|_| junk.note()).count();
        assert_eq!(recorded, 10);
        assert_eq!(junk.lines, 25);
        assert_eq!(junk.unrecorded(), 15);
    }
}
