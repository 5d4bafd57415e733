//! Poll-style pipe I/O for the session's single event loop: a bounded line reader and the one
//! outlet type (a writer that writes at once, with a backlog bounded in bytes).
//!
//! Why not a task per pipe with channels between them: every hop between tasks is a wakeup and a
//! scheduler pass, and on a `tools/call` round trip those hops cost more than the routing itself.
//! Here the loop polls every reader itself, and bytes are written to their pipe in the same step
//! that routed them; only what the pipe cannot take at once waits in a backlog that the loop
//! drains when the pipe becomes writable. Nothing here ever waits: the loop decides.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::mcp::Frame;
use crate::mcp::framing::{LineAssembler, tab_for_carriage_return};

/// Bytes read from a pipe at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Backlog capacity kept once drained; a burst may grow it, a lull gives it back.
const KEPT_CAPACITY: usize = 256 * 1024;

/// Newline-delimited frames with a hard cap on the line size, with the rules of
/// [`crate::mcp::LineReader`] (both feed the same [`LineAssembler`]), but polled rather than
/// awaited, so one loop can wait on many readers at once.
pub struct FrameReader<R> {
    inner: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    lines: LineAssembler,
    eof: bool,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, max_line_bytes: usize) -> FrameReader<R> {
        FrameReader {
            inner,
            buf: vec![0; READ_CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            lines: LineAssembler::new(max_line_bytes),
            eof: false,
        }
    }

    /// The next non-empty frame, `None` at end of stream (and after it).
    pub fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Frame>>> {
        loop {
            if let Some(frame) = self.buffered() {
                return Poll::Ready(Ok(Some(frame)));
            }
            if self.eof {
                return Poll::Ready(Ok(self.lines.finish().map(message_line)));
            }
            let mut read = ReadBuf::new(&mut self.buf);
            match Pin::new(&mut self.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Ready(Ok(())) => {
                    let filled = read.filled().len();
                    self.start = 0;
                    self.end = filled;
                    self.eof = filled == 0;
                }
            }
        }
    }

    /// The next frame already in the buffer, without reading: lets the loop take a burst of
    /// messages in one step (one audit write, one write per peer).
    pub fn buffered(&mut self) -> Option<Frame> {
        while self.start < self.end {
            let (consumed, frame) = self.lines.feed(&self.buf[self.start..self.end]);
            self.start += consumed;
            if frame.is_some() {
                return frame.map(message_line);
            }
        }
        None
    }
}

/// A frame of a message stream (the host's, a server's stdout): a line reaches the core with no
/// `\r` another reader could end a line at ([`tab_for_carriage_return`]), so whatever airlock
/// passes on as these bytes is read as the one message airlock read.
fn message_line(frame: Frame) -> Frame {
    match frame {
        Frame::Line(mut line) => {
            tab_for_carriage_return(&mut line);
            Frame::Line(line)
        }
        oversized => oversized,
    }
}

/// What became of bytes handed to [`Outlet::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Written, or queued behind earlier bytes the pipe has not taken yet.
    Accepted,
    /// The backlog is over its bound (the peer stopped reading): not taken.
    Full,
    /// The pipe failed or is closing: dropped.
    Closed,
}

/// One pipe airlock writes to. `send` writes at once when nothing is queued; what the pipe does
/// not take waits in the backlog, which the owner drains with [`Outlet::poll_drain`]. The
/// backlog is bounded in bytes: past `limit`, `send` refuses (the caller decides what that
/// means: backpressure on a reader, or an error answer).
pub struct Outlet<W> {
    sink: W,
    backlog: Vec<u8>,
    /// Bytes of the backlog already written.
    offset: usize,
    limit: usize,
    /// Written but not yet flushed (only sinks with their own buffer care).
    unflushed: bool,
    closing: bool,
    failed: bool,
}

impl<W: AsyncWrite + Unpin> Outlet<W> {
    pub fn new(sink: W, limit: usize) -> Outlet<W> {
        Outlet {
            sink,
            backlog: Vec::new(),
            offset: 0,
            limit,
            unflushed: false,
            closing: false,
            failed: false,
        }
    }

    /// Bytes waiting for the peer.
    pub fn queued(&self) -> usize {
        self.backlog.len() - self.offset
    }

    pub fn has_failed(&self) -> bool {
        self.failed
    }

    /// Whether the owner must poll [`Outlet::poll_drain`] (backlog, flush or close pending).
    pub fn busy(&self) -> bool {
        !self.failed && (self.queued() > 0 || self.unflushed || self.closing)
    }

    pub fn send(&mut self, bytes: &[u8]) -> Sent {
        if self.failed || self.closing {
            return Sent::Closed;
        }
        if self.queued() > 0 {
            if self.queued() >= self.limit {
                return Sent::Full;
            }
            self.backlog.extend_from_slice(bytes);
            return Sent::Accepted;
        }
        // Nothing queued: write now. A no-op waker is enough here, because a write that cannot
        // complete leaves the rest in the backlog, and the owner polls `poll_drain` with its real
        // waker before it sleeps, which registers for writability again.
        let mut cx = Context::from_waker(Waker::noop());
        let mut written = 0;
        while written < bytes.len() {
            match Pin::new(&mut self.sink).poll_write(&mut cx, &bytes[written..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    self.failed = true;
                    return Sent::Closed;
                }
                Poll::Ready(Ok(n)) => written += n,
                Poll::Pending => break,
            }
        }
        self.unflushed = true;
        if written < bytes.len() {
            self.backlog.clear();
            self.offset = 0;
            self.backlog.extend_from_slice(&bytes[written..]);
        } else if let Poll::Ready(result) = Pin::new(&mut self.sink).poll_flush(&mut cx) {
            // Pipes have no user-space buffer: this returns at once; other sinks keep their
            // flush pending in `unflushed` until `poll_drain`.
            self.unflushed = false;
            self.failed |= result.is_err();
        }
        Sent::Accepted
    }

    /// Writes what is queued. Ready when there is nothing left to do: `Ok(true)` when the
    /// outlet was closing and is now shut down (drop it: that closes the pipe), `Ok(false)` when
    /// merely idle.
    pub fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        if self.failed {
            return Poll::Ready(Ok(self.closing));
        }
        while self.queued() > 0 {
            match Pin::new(&mut self.sink).poll_write(cx, &self.backlog[self.offset..]) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    self.failed = true;
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => {
                    self.unflushed = true;
                    self.offset += n;
                    if self.queued() == 0 {
                        self.backlog.clear();
                        self.offset = 0;
                        if self.backlog.capacity() > KEPT_CAPACITY {
                            self.backlog.shrink_to(KEPT_CAPACITY);
                        }
                    }
                }
                Poll::Ready(Err(err)) => {
                    self.failed = true;
                    return Poll::Ready(Err(err));
                }
            }
        }
        if self.unflushed {
            match Pin::new(&mut self.sink).poll_flush(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(result) => {
                    self.unflushed = false;
                    if let Err(err) = result {
                        self.failed = true;
                        return Poll::Ready(Err(err));
                    }
                }
            }
        }
        if self.closing {
            return match Pin::new(&mut self.sink).poll_shutdown(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(_) => {
                    self.failed = true;
                    Poll::Ready(Ok(true))
                }
            };
        }
        Poll::Ready(Ok(false))
    }

    /// Stops accepting bytes; what is queued is still written, then the sink is shut down.
    pub fn close(&mut self) {
        self.closing = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use tokio::io::AsyncReadExt;

    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut reader = FrameReader::new(input, max);
        let mut out = Vec::new();
        while let Some(frame) = poll_fn(|cx| reader.poll_frame(cx)).await.unwrap() {
            out.push(frame);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_like_the_line_reader() {
        let got = frames(b"{\"a\":1}\r\n\n  \n{\"b\":2}\n0123456789abc\nlast", 10).await;
        assert_eq!(
            got,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{\"b\":2}".to_vec()),
                Frame::Oversized { bytes: 13 },
                Frame::Line(b"last".to_vec()),
            ]
        );
        assert_eq!(
            frames(b"0123456789abc", 10).await,
            vec![Frame::Oversized { bytes: 13 }]
        );
        assert!(frames(b"", 10).await.is_empty());
    }

    #[tokio::test]
    async fn queues_what_the_pipe_does_not_take_and_drains_it_in_order() {
        let (writer, mut reader) = tokio::io::duplex(8);
        let mut outlet = Outlet::new(writer, 10);
        assert_eq!(outlet.send(b"0123456789"), Sent::Accepted);
        assert_eq!(outlet.queued(), 2);
        assert_eq!(outlet.send(b"abcdefghij"), Sent::Accepted);
        assert_eq!(outlet.send(b"full"), Sent::Full, "bounded in bytes");
        assert!(outlet.busy());
        outlet.close();
        let drain = tokio::spawn(async move { poll_fn(|cx| outlet.poll_drain(cx)).await });
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"0123456789abcdefghij");
        assert!(drain.await.unwrap().unwrap());
    }
}
