//! One output stream of a session (to the host or to the server), shared by the loops that
//! produce for it.
//!
//! Bytes are written straight from the producer when the stream can take them right away (the
//! common case: a pipe with room), so a batch reaches the peer without a hop through a queue
//! and a second wake-up of the task. What the stream cannot take at once is queued, in order,
//! and written by [`Outlet::drain`], which the session polls alongside its loops. Nothing is
//! borrowed across an `await`: every borrow lives inside one synchronous call or one poll.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::sync::Notify;

/// Queued bytes above which producers wait for the writer (backpressure on their readers).
const QUEUE_BYTES: usize = 1024 * 1024;
/// Queue capacity kept once drained; a burst may grow it, a lull gives it back.
const KEPT_CAPACITY: usize = 256 * 1024;

pub(crate) struct Outlet<W> {
    writer: RefCell<W>,
    /// Bytes not yet written, from `written` on.
    queue: RefCell<Vec<u8>>,
    written: Cell<usize>,
    /// Written but not yet flushed (only matters for writers that buffer, like tokio's stdout).
    unflushed: Cell<bool>,
    /// No more bytes will come: drain, flush, shut the stream down.
    closed: Cell<bool>,
    /// The stream failed; later bytes are dropped. The error is reported once, by `drain`.
    failed: Cell<bool>,
    error: RefCell<Option<io::Error>>,
    /// The `drain` future, waiting for bytes (or for `close`).
    drainer: RefCell<Option<Waker>>,
    /// Producers waiting for the queue to shrink.
    room: Notify,
}

impl<W: AsyncWrite + Unpin> Outlet<W> {
    pub(crate) fn new(writer: W) -> Self {
        Outlet {
            writer: RefCell::new(writer),
            queue: RefCell::new(Vec::new()),
            written: Cell::new(0),
            unflushed: Cell::new(false),
            closed: Cell::new(false),
            failed: Cell::new(false),
            error: RefCell::new(None),
            drainer: RefCell::new(None),
            room: Notify::new(),
        }
    }

    fn queued(&self) -> usize {
        self.queue.borrow().len() - self.written.get()
    }

    fn wake_drainer(&self) {
        if let Some(waker) = self.drainer.borrow_mut().take() {
            waker.wake();
        }
    }

    fn fail(&self, err: io::Error) {
        self.failed.set(true);
        *self.error.borrow_mut() = Some(err);
        self.queue.borrow_mut().clear();
        self.written.set(0);
        self.room.notify_waiters();
        self.wake_drainer();
    }

    /// Sends `bytes` after everything sent before. Writes at once what the stream takes
    /// without waiting; the rest is queued for `drain`. Dropped after `close` or a failure
    /// (the peer is gone; the failure itself is reported by `drain`).
    pub(crate) fn push(&self, mut bytes: &[u8]) {
        if bytes.is_empty() || self.closed.get() || self.failed.get() {
            return;
        }
        if self.queued() == 0 {
            let mut cx = Context::from_waker(Waker::noop());
            let mut writer = self.writer.borrow_mut();
            while !bytes.is_empty() {
                match Pin::new(&mut *writer).poll_write(&mut cx, bytes) {
                    Poll::Ready(Ok(0)) => {
                        drop(writer);
                        self.fail(io::ErrorKind::WriteZero.into());
                        return;
                    }
                    Poll::Ready(Ok(n)) => {
                        bytes = &bytes[n..];
                        self.unflushed.set(true);
                    }
                    Poll::Ready(Err(err)) => {
                        drop(writer);
                        self.fail(err);
                        return;
                    }
                    // The real waker is registered when `drain` polls the stream.
                    Poll::Pending => break,
                }
            }
            if bytes.is_empty() {
                match Pin::new(&mut *writer).poll_flush(&mut cx) {
                    Poll::Ready(Ok(())) => {
                        self.unflushed.set(false);
                        return;
                    }
                    Poll::Ready(Err(err)) => {
                        drop(writer);
                        self.fail(err);
                        return;
                    }
                    Poll::Pending => {}
                }
            }
        }
        self.queue.borrow_mut().extend_from_slice(bytes);
        self.wake_drainer();
    }

    /// Waits until the queue has room (backpressure), so a reader does not run ahead of a
    /// peer that is not reading.
    pub(crate) async fn room(&self) {
        loop {
            // Registered before the check; nothing can run between the two (one thread).
            let notified = self.room.notified();
            if self.queued() < QUEUE_BYTES || self.closed.get() || self.failed.get() {
                return;
            }
            notified.await;
        }
    }

    /// No more bytes: `drain` writes what is queued, flushes and shuts the stream down.
    pub(crate) fn close(&self) {
        self.closed.set(true);
        self.wake_drainer();
    }

    /// Writes queued bytes as the stream takes them, until `close` (then flush and shutdown)
    /// or a failure (returned once).
    pub(crate) async fn drain(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_drain(cx)).await
    }

    fn poll_drain(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.failed.get() {
                let err = self
                    .error
                    .borrow_mut()
                    .take()
                    .unwrap_or_else(|| io::ErrorKind::BrokenPipe.into());
                return Poll::Ready(Err(err));
            }
            let mut writer = self.writer.borrow_mut();
            if self.queued() > 0 {
                let result = {
                    let queue = self.queue.borrow();
                    Pin::new(&mut *writer).poll_write(cx, &queue[self.written.get()..])
                };
                match result {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(0)) => {
                        drop(writer);
                        self.fail(io::ErrorKind::WriteZero.into());
                    }
                    Poll::Ready(Ok(n)) => {
                        self.unflushed.set(true);
                        self.written.set(self.written.get() + n);
                        if self.queued() == 0 {
                            let mut queue = self.queue.borrow_mut();
                            queue.clear();
                            if queue.capacity() > KEPT_CAPACITY {
                                queue.shrink_to(KEPT_CAPACITY);
                            }
                            self.written.set(0);
                        }
                        if self.queued() < QUEUE_BYTES {
                            self.room.notify_waiters();
                        }
                    }
                    Poll::Ready(Err(err)) => {
                        drop(writer);
                        self.fail(err);
                    }
                }
                continue;
            }
            if self.unflushed.get() {
                match Pin::new(&mut *writer).poll_flush(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(())) => self.unflushed.set(false),
                    Poll::Ready(Err(err)) => {
                        drop(writer);
                        self.fail(err);
                    }
                }
                continue;
            }
            if self.closed.get() {
                return Pin::new(&mut *writer).poll_shutdown(cx);
            }
            *self.drainer.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn keeps_order_when_the_peer_is_slow_and_shuts_down_after_draining() {
        // A 64-byte pipe: most of each push has to wait for `drain`.
        let (write, mut read) = tokio::io::duplex(64);
        let outlet = Outlet::new(write);
        let mut expected = Vec::new();
        let produce = async {
            for i in 0..200u32 {
                let line = format!("{{\"n\":{i}}}\n");
                outlet.room().await;
                outlet.push(line.as_bytes());
                expected.extend_from_slice(line.as_bytes());
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            outlet.close();
        };
        let consume = async {
            let mut got = Vec::new();
            read.read_to_end(&mut got).await.unwrap();
            got
        };
        let (_, drained, got) = tokio::join!(produce, outlet.drain(), consume);
        drained.unwrap();
        assert_eq!(got, expected);
    }

    #[tokio::test]
    async fn reports_a_failure_once_and_drops_later_bytes() {
        let (write, read) = tokio::io::duplex(64);
        drop(read);
        let outlet = Outlet::new(write);
        outlet.push(b"lost\n");
        outlet.push(b"also lost\n");
        outlet.room().await;
        assert!(outlet.drain().await.is_err());
    }
}
