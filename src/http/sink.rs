//! A connection's queue of frames: bounded in frames and in bytes. A client that does not read
//! its stream must not make the gateway hold what the stream carries: once the queue is full
//! the connection is detached (the client resumes with `Last-Event-ID`, from the replay buffer,
//! which has bounds of its own). Counting frames alone let 256 frames of a 4 MB log line each,
//! about 1 GiB, wait for one unread stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::sync::mpsc;

use super::session::Frame;

/// Frames queued for one connection before it counts as too slow and is detached.
pub const SINK_QUEUE: usize = 256;

/// Bytes queued for one connection before it counts as too slow. One frame alone is always
/// queued, however large: a message is bounded by the line limit already.
pub const SINK_BYTES: usize = 16 * 1024 * 1024;

/// The sending side, kept by the session for an attached connection.
#[derive(Debug, Clone)]
pub struct Sink {
    frames: mpsc::Sender<Frame>,
    queued: Arc<AtomicUsize>,
}

/// The receiving side, read by the connection's response body.
#[derive(Debug)]
pub struct SinkReceiver {
    frames: mpsc::Receiver<Frame>,
    queued: Arc<AtomicUsize>,
}

/// A new queue of [`SINK_QUEUE`] frames and [`SINK_BYTES`] bytes.
pub fn sink() -> (Sink, SinkReceiver) {
    sink_of(SINK_QUEUE)
}

/// A queue of `frames` frames (tests use small ones).
pub fn sink_of(frames: usize) -> (Sink, SinkReceiver) {
    let (tx, rx) = mpsc::channel(frames);
    let queued = Arc::new(AtomicUsize::new(0));
    (
        Sink {
            frames: tx,
            queued: queued.clone(),
        },
        SinkReceiver { frames: rx, queued },
    )
}

fn size(frame: &Frame) -> usize {
    match frame {
        Frame::Json { body, .. } | Frame::Sse(body) => body.len(),
        Frame::End => 0,
    }
}

impl Sink {
    /// Whether its connection is gone.
    pub fn is_closed(&self) -> bool {
        self.frames.is_closed()
    }

    /// Queues `frame`; false when the queue is full (in frames or bytes) or its connection gone.
    pub fn try_send(&self, frame: Frame) -> bool {
        let bytes = size(&frame);
        let queued = self.queued.load(Ordering::Acquire);
        if queued > 0 && queued.saturating_add(bytes) > SINK_BYTES {
            return false;
        }
        if self.frames.try_send(frame).is_err() {
            return false;
        }
        self.queued.fetch_add(bytes, Ordering::AcqRel);
        true
    }
}

impl SinkReceiver {
    fn taken(&self, frame: Option<Frame>) -> Option<Frame> {
        if let Some(frame) = &frame {
            self.queued.fetch_sub(size(frame), Ordering::AcqRel);
        }
        frame
    }

    pub async fn recv(&mut self) -> Option<Frame> {
        let frame = self.frames.recv().await;
        self.taken(frame)
    }

    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        match self.frames.poll_recv(cx) {
            Poll::Ready(frame) => Poll::Ready(self.taken(frame)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// A frame already queued, without waiting (tests).
    pub fn try_recv(&mut self) -> Option<Frame> {
        let frame = self.frames.try_recv().ok();
        self.taken(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn a_queue_is_bounded_in_bytes_and_one_frame_alone_always_goes() {
        let (tx, mut rx) = sink();
        let big = || Frame::Sse(Bytes::from(vec![b'x'; SINK_BYTES + 1]));
        assert!(tx.try_send(big()), "one frame alone, however large");
        assert!(!tx.try_send(Frame::Sse(Bytes::from_static(b"x"))));
        assert!(rx.try_recv().is_some());
        let quarter = || Frame::Sse(Bytes::from(vec![b'x'; SINK_BYTES / 4]));
        for _ in 0..4 {
            assert!(tx.try_send(quarter()));
        }
        assert!(!tx.try_send(Frame::Sse(Bytes::from_static(b"x"))), "full");
        assert!(rx.try_recv().is_some());
        assert!(
            tx.try_send(Frame::Sse(Bytes::from_static(b"x"))),
            "room again"
        );
    }
}
