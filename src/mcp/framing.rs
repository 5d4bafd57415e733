//! Newline-delimited JSON framing with a hard cap on the line size.
//!
//! The reader never holds more than `max_line_bytes` of one line: an oversized line is skipped to
//! its newline while only counting its bytes, so a peer cannot make airlock allocate without bound.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The default maximum line size: 4 MiB, enough for large tool results.
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// One frame read from a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A line without its `\n` (and without a trailing `\r`). Never empty.
    Line(Vec<u8>),
    /// A line longer than the limit; its content was discarded.
    Oversized { bytes: usize },
}

/// Turns every carriage return in a message line into a tab, in place (same length: offsets
/// into the line stay true).
///
/// In valid JSON a raw `\r` can only be whitespace between tokens (inside a string it must be
/// escaped), where a tab means the same. But many readers also end a line at a lone `\r`
/// (Python's text streams, Java's and .NET's `readLine`, Node's `readline`): a line with `\r`
/// between tokens would reach such a peer as several messages, one of them a request or an
/// answer airlock never read as one, so never gated or audited. A `\r` inside a string becomes
/// a tab, still a control character the parse refuses: nothing invalid turns valid.
pub fn tab_for_carriage_return(line: &mut [u8]) {
    let mut from = 0;
    while let Some(at) = memchr::memchr(b'\r', &line[from..]) {
        line[from + at] = b'\t';
        from += at + 1;
    }
}

/// The line rules every reader follows, on bytes it has already read: an oversized line is
/// skipped to its newline while only its bytes are counted; `\r\n` is accepted; blank lines are
/// keep-alive noise, not messages; a last line without `\n` still counts at end of stream.
///
/// Pure: [`LineReader`] (awaited) and the gateway's polled reader own the I/O and feed it.
#[derive(Debug)]
pub(crate) struct LineAssembler {
    max_line_bytes: usize,
    line: Vec<u8>,
    /// Bytes of the current line seen so far once it has exceeded the limit.
    discarding: Option<usize>,
}

impl LineAssembler {
    pub(crate) fn new(max_line_bytes: usize) -> Self {
        LineAssembler {
            max_line_bytes: max_line_bytes.max(1),
            line: Vec::new(),
            discarding: None,
        }
    }

    /// Takes bytes from `available` up to and including its first newline. Returns how many
    /// bytes were taken and the frame they completed, if any.
    pub(crate) fn feed(&mut self, available: &[u8]) -> (usize, Option<Frame>) {
        let (chunk_len, consumed, complete) = match memchr::memchr(b'\n', available) {
            Some(pos) => (pos, pos + 1, true),
            None => (available.len(), available.len(), false),
        };
        if complete && self.line.is_empty() && self.discarding.is_none() {
            // The common case: a whole line in one read. It becomes its frame in one allocation
            // of its own size, and the buffer for split lines is left alone.
            return (consumed, self.whole_line(&available[..chunk_len]));
        }
        match self.discarding.as_mut() {
            Some(seen) => *seen += chunk_len,
            None if self.line.len() + chunk_len > self.max_line_bytes => {
                self.discarding = Some(self.line.len() + chunk_len);
                self.line = Vec::new();
            }
            None => self.line.extend_from_slice(&available[..chunk_len]),
        }
        if !complete {
            return (consumed, None);
        }
        (consumed, self.finish())
    }

    /// A line that arrived whole, by the rules of [`LineAssembler::finish`].
    fn whole_line(&self, line: &[u8]) -> Option<Frame> {
        if line.len() > self.max_line_bytes {
            return Some(Frame::Oversized { bytes: line.len() });
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        // Room for the newline it goes on with, so that a large line can be sent as it is.
        let mut frame = Vec::with_capacity(line.len() + 1);
        frame.extend_from_slice(line);
        Some(Frame::Line(frame))
    }

    /// The frame ending here (at a newline or at end of stream), if it is not blank.
    pub(crate) fn finish(&mut self) -> Option<Frame> {
        if let Some(bytes) = self.discarding.take() {
            return Some(Frame::Oversized { bytes });
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        if self.line.iter().all(u8::is_ascii_whitespace) {
            self.line.clear();
            return None;
        }
        Some(Frame::Line(std::mem::take(&mut self.line)))
    }
}

/// A bounded line reader over any `AsyncBufRead`.
///
/// Cancel-safe: partial state lives in the reader, so dropping a pending `next_frame` future loses
/// nothing.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    lines: LineAssembler,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max_line_bytes: usize) -> Self {
        LineReader {
            inner,
            lines: LineAssembler::new(max_line_bytes),
        }
    }

    pub fn max_line_bytes(&self) -> usize {
        self.lines.max_line_bytes
    }

    /// The next non-empty frame, or `None` at end of stream.
    pub async fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(self.lines.finish());
            }
            let (consumed, frame) = self.lines.feed(available);
            self.inner.consume(consumed);
            if frame.is_some() {
                return Ok(frame);
            }
        }
    }

    /// The next frame if it can be had without waiting: already buffered, or readable from the
    /// stream right now. `None` means "nothing yet" (call [`LineReader::next_frame`] to wait);
    /// end of stream and errors are reported like `next_frame` does.
    ///
    /// Lets a caller gather every message that has already arrived into one batch (one audit
    /// write, one forward) without an extra wait. Cheap when nothing is ready: once a read has
    /// drained the stream, tokio knows it is not readable and this returns without a syscall.
    pub fn try_next_frame(&mut self) -> Option<io::Result<Option<Frame>>> {
        let mut cx = Context::from_waker(Waker::noop());
        // `next_frame` is cancel-safe: dropping it while pending keeps the partial line here. The
        // no-op waker is replaced by the real one at the next `next_frame().await`.
        match pin!(self.next_frame()).poll(&mut cx) {
            Poll::Ready(result) => Some(result),
            Poll::Pending => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize, capacity: usize) -> Vec<Frame> {
        let reader = tokio::io::BufReader::with_capacity(capacity, input);
        let mut lines = LineReader::new(reader, max);
        let mut out = Vec::new();
        while let Some(frame) = lines.next_frame().await.unwrap() {
            out.push(frame);
        }
        out
    }

    fn line(text: &str) -> Frame {
        Frame::Line(text.as_bytes().to_vec())
    }

    #[test]
    fn a_carriage_return_becomes_a_tab_between_tokens_and_stays_refused_in_a_string() {
        let mut smuggled = b"{\"a\":\r{\"id\":1}\r,\"b\":\r\r2}".to_vec();
        tab_for_carriage_return(&mut smuggled);
        assert_eq!(smuggled, b"{\"a\":\t{\"id\":1}\t,\"b\":\t\t2}".to_vec());
        let read: serde_json::Value = serde_json::from_slice(&smuggled).unwrap();
        assert_eq!(read, serde_json::json!({"a": {"id": 1}, "b": 2}));
        let mut in_string = b"{\"a\":\"x\ry\"}".to_vec();
        tab_for_carriage_return(&mut in_string);
        assert!(serde_json::from_slice::<serde_json::Value>(&in_string).is_err());
        let mut plain = b"{}".to_vec();
        tab_for_carriage_return(&mut plain);
        assert_eq!(plain, b"{}".to_vec());
    }

    #[tokio::test]
    async fn splits_lines_strips_cr_and_skips_blanks() {
        for capacity in [1, 3, 64] {
            let got = frames(b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}", 100, capacity).await;
            assert_eq!(
                got,
                vec![line("{\"a\":1}"), line("{\"b\":2}"), line("{\"c\":3}")],
                "capacity {capacity}"
            );
        }
    }

    #[tokio::test]
    async fn oversized_lines_are_reported_and_skipped_without_losing_the_next() {
        for capacity in [1, 4, 1024] {
            let got = frames(b"12345\n123456789\nabc\n1234567890123", 5, capacity).await;
            assert_eq!(
                got,
                vec![
                    line("12345"),
                    Frame::Oversized { bytes: 9 },
                    line("abc"),
                    Frame::Oversized { bytes: 13 }
                ],
                "capacity {capacity}"
            );
        }
    }

    #[tokio::test]
    async fn try_next_frame_takes_what_is_ready_and_keeps_partial_lines() {
        let (mut tx, rx) = tokio::io::duplex(1024);
        let mut lines = LineReader::new(tokio::io::BufReader::new(rx), 100);
        assert!(lines.try_next_frame().is_none());
        tokio::io::AsyncWriteExt::write_all(&mut tx, b"{\"a\":1}\n{\"b\":2}\n{\"c\"")
            .await
            .unwrap();
        assert_eq!(
            lines.try_next_frame().unwrap().unwrap(),
            Some(line("{\"a\":1}"))
        );
        assert_eq!(
            lines.try_next_frame().unwrap().unwrap(),
            Some(line("{\"b\":2}"))
        );
        assert!(lines.try_next_frame().is_none());
        tokio::io::AsyncWriteExt::write_all(&mut tx, b":3}\n")
            .await
            .unwrap();
        drop(tx);
        assert_eq!(lines.next_frame().await.unwrap(), Some(line("{\"c\":3}")));
        assert_eq!(lines.try_next_frame().unwrap().unwrap(), None);
    }

    #[tokio::test]
    async fn never_buffers_more_than_the_limit() {
        let big = vec![b'x'; 1 << 20];
        let reader = tokio::io::BufReader::with_capacity(4096, &big[..]);
        let mut lines = LineReader::new(reader, 1000);
        assert_eq!(
            lines.next_frame().await.unwrap(),
            Some(Frame::Oversized { bytes: 1 << 20 })
        );
        assert!(lines.lines.line.capacity() <= 1000 + 4096);
    }
}
