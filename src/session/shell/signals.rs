//! What stops or reloads a session from outside: signals, and the host closing airlock's stdout.

use std::future::{Future, poll_fn};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc::UnboundedSender;

use super::link::Input;

/// SIGTERM, SIGINT and SIGHUP, polled by [`watch`]'s task.
pub struct Signals {
    streams: Vec<(Option<Signal>, &'static str)>,
}

impl Default for Signals {
    fn default() -> Signals {
        Signals::new()
    }
}

impl Signals {
    pub fn new() -> Signals {
        let kinds = [
            (SignalKind::terminate(), "SIGTERM"),
            (SignalKind::interrupt(), "SIGINT"),
            (SignalKind::hangup(), "SIGHUP"),
        ];
        let streams = kinds
            .into_iter()
            .map(|(kind, name)| (signal(kind).ok(), name))
            .collect();
        Signals { streams }
    }

    /// The name of a signal that arrived.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<&'static str> {
        for (stream, name) in &mut self.streams {
            if let Some(signals) = stream.as_mut()
                && let Poll::Ready(received) = signals.poll_recv(cx)
            {
                if received.is_none() {
                    *stream = None;
                }
                return Poll::Ready(name);
            }
        }
        Poll::Pending
    }
}

/// Watches for signals and for the host closing airlock's stdout in a task of their own, which
/// hands each to the loop as an [`Input`]: the loop then polls one channel on every turn instead
/// of three signal streams and a pipe (about 2,500 instructions per call through `run`,
/// callgrind). Registered before it returns, so nothing that arrives after is missed.
pub fn watch(
    mut host_gone: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    inputs: UnboundedSender<Input>,
) {
    let mut signals = Signals::new();
    tokio::spawn(async move {
        loop {
            let input = poll_fn(|cx| {
                if let Poll::Ready(name) = signals.poll(cx) {
                    return Poll::Ready(Input::Signal(name));
                }
                if poll_once(&mut host_gone, cx).is_ready() {
                    return Poll::Ready(Input::HostGone);
                }
                Poll::Pending
            })
            .await;
            if inputs.send(input).is_err() {
                return;
            }
        }
    });
}

/// Resolves when the host closes its end of airlock's stdout (a pipe whose reader is gone
/// reports an error condition), so that a host which stopped listening ends the session instead
/// of leaving airlock executing calls whose answers nobody receives. `None` when stdout is not a
/// pipe airlock can watch (a file, a terminal).
pub fn host_output_closed() -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> {
    let fd: OwnedFd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    // SAFETY: `fd` is an `OwnedFd` we just duplicated and hand to the `AsyncFd` by value: it is
    // open, owned by nothing else, and `as_raw_fd` returns the same descriptor until it drops.
    let watched = unsafe { AsyncFd::register_with_interest(fd, Interest::ERROR) }.ok()?;
    Some(Box::pin(async move {
        let _ = watched.ready(Interest::ERROR).await;
    }))
}

/// How often, once the host closed airlock's stdin, airlock looks whether its stdout is gone too.
const GONE_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether the host's end of airlock's stdout is gone: a pipe whose reader closed (an error
/// condition) or a socket whose peer closed (hang-up). Node hosts give their servers sockets,
/// which the watcher of [`host_output_closed`] cannot see: it waits for the error condition
/// only, since waiting for a socket's hang-up would wake it on every write.
pub fn host_output_gone() -> bool {
    let mut poll = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: polls one pollfd on our own stdout, without waiting; nothing is read or written.
    let rc = unsafe { libc::poll(&mut poll, 1, 0) };
    rc > 0 && (poll.revents & (libc::POLLHUP | libc::POLLERR)) != 0
}

/// Once the host closed airlock's stdin, a host that is gone altogether (its stdout closed too)
/// must end the session at once, not after the answers it will never read: checked now and
/// every [`GONE_CHECK_EVERY`] (only in this state, so no call pays for it).
pub fn watch_output_after_eof(inputs: UnboundedSender<Input>) {
    tokio::spawn(async move {
        loop {
            if host_output_gone() {
                let _ = inputs.send(Input::HostGone);
                return;
            }
            tokio::time::sleep(GONE_CHECK_EVERY).await;
            if inputs.is_closed() {
                return;
            }
        }
    });
}

/// Polls an optional one-shot future; `None` afterwards.
pub fn poll_once(
    future: &mut Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    cx: &mut Context<'_>,
) -> Poll<()> {
    match future.as_mut().map(|f| f.as_mut().poll(cx)) {
        Some(Poll::Ready(())) => {
            *future = None;
            Poll::Ready(())
        }
        _ => Poll::Pending,
    }
}
