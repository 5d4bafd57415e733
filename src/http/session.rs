//! One client session's streams: which stream a message from the gateway goes on, its event id,
//! the replay buffer, and the sinks of the connections currently attached.
//!
//! A stream carries either one request's answer (a POST) or the server-initiated messages (the
//! GET stream, number 0). Routing ([`SessionState::target`]) is pure:
//!
//! 1. an answer goes on the stream of the request it answers (and ends it);
//! 2. a message the gateway says is related to a request in flight goes on that request's stream,
//!    and so does a progress notification carrying that request's `progressToken`;
//! 3. anything else goes on the GET stream when one is attached; else on the newest request
//!    stream still open (a client that never opens the GET stream still sees an elicitation sent
//!    during its call); else it waits on the GET stream (bounded) for the next GET.
//!
//! A POST whose first message is its answer is answered as plain JSON (no SSE framing, no
//! replay copy); a stream that carries anything before its answer becomes SSE. Each message is
//! sent on exactly one stream (the transport's rule), and a slow connection is detached rather
//! than buffered without bound: the client resumes with `Last-Event-ID`.

use std::collections::HashMap;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;

use super::sse::{EventId, GET_STREAM, ReplayBuffer, message_event, priming_event};
use super::wire;
use crate::mcp::message::{Class, classify, id_key};

/// What a connection's sink receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// The whole answer as one JSON body (with its HTTP status).
    Json { body: Bytes, status: u16 },
    /// SSE bytes (an event, the priming event, a replayed event).
    Sse(Bytes),
    /// The stream is complete: end the response.
    End,
}

pub use super::sink::{SINK_QUEUE, Sink};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No message yet: the first one decides JSON or SSE.
    Undecided {
        accepts_json: bool,
    },
    Json,
    Sse,
}

#[derive(Debug)]
struct Stream {
    next_seq: u64,
    /// Events up to this seq went into a live sink (GET stream: what a plain GET re-sends).
    delivered: u64,
    sink: Option<Sink>,
    mode: Mode,
    /// The id of the request this stream answers (`None`: the GET stream).
    request: Option<Value>,
    /// Answers `initialize`: its result names the session's protocol version.
    initialize: bool,
    done: bool,
}

impl Stream {
    /// A stream the gateway writes to before any connection asked for it (the GET stream).
    fn detached() -> Stream {
        Stream {
            next_seq: 1,
            delivered: 0,
            sink: None,
            mode: Mode::Sse,
            request: None,
            initialize: false,
            done: false,
        }
    }

    fn live(&self) -> bool {
        self.sink.as_ref().is_some_and(|sink| !sink.is_closed())
    }
}

/// Where a message from the gateway goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Stream(u32),
    /// Nobody can take it (an answer to no request in flight here).
    Drop(&'static str),
}

/// Why a request could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("request id {0} is already in flight in this session")]
    Duplicate(String),
    #[error("the session has ended")]
    Closed,
}

/// Why a GET could not attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    #[error("this session already has an open GET stream")]
    Busy,
}

/// The mutable part of a session (behind the session's lock).
#[derive(Debug)]
pub struct SessionState {
    pub closed: bool,
    /// A 2026-07-28 request's session: one request, no ids, HTTP statuses for protocol errors.
    pub stateless: bool,
    /// The negotiated protocol version (from the `initialize` answer).
    pub version: Option<String>,
    pub last_active: Instant,
    next_stream: u32,
    streams: HashMap<u32, Stream>,
    /// Request id key → its stream.
    pending: HashMap<String, u32>,
    /// Progress token key → the stream of the request that carries it.
    progress: HashMap<String, u32>,
    replay: ReplayBuffer,
}

impl SessionState {
    pub fn new(now: Instant, replay_events: usize, replay_bytes: usize) -> SessionState {
        SessionState {
            closed: false,
            stateless: false,
            version: None,
            last_active: now,
            next_stream: 1,
            streams: HashMap::new(),
            pending: HashMap::new(),
            progress: HashMap::new(),
            replay: ReplayBuffer::new(replay_events, replay_bytes),
        }
    }

    /// Nothing in flight and no connection attached.
    pub fn idle(&self) -> bool {
        self.pending.is_empty() && !self.streams.values().any(Stream::live)
    }

    /// A request arrived on a POST: it gets its own stream and `sink` waits for its answer.
    pub fn register(
        &mut self,
        request: &Value,
        accepts_json: bool,
        sink: Sink,
        now: Instant,
    ) -> Result<u32, RegisterError> {
        if self.closed {
            return Err(RegisterError::Closed);
        }
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let key = id_key(&id);
        if self.pending.contains_key(&key) {
            return Err(RegisterError::Duplicate(id.to_string()));
        }
        let number = self.next_stream;
        self.next_stream += 1;
        self.pending.insert(key, number);
        if let Some(token) = request.pointer("/params/_meta/progressToken") {
            self.progress.insert(id_key(token), number);
        }
        let initialize = request.get("method").and_then(Value::as_str) == Some("initialize");
        self.streams.insert(
            number,
            Stream {
                next_seq: 1,
                delivered: 0,
                sink: Some(sink),
                mode: Mode::Undecided { accepts_json },
                request: Some(id),
                initialize,
                done: false,
            },
        );
        self.last_active = now;
        Ok(number)
    }

    /// The request of `stream` is abandoned (its client went away, stateless era): forget it.
    /// Returns the request's id when it was still in flight.
    pub fn abandon(&mut self, stream: u32) -> Option<Value> {
        let gone = self.streams.remove(&stream)?;
        self.progress.retain(|_, s| *s != stream);
        self.replay.forget(stream);
        let id = gone.request?;
        self.pending.remove(&id_key(&id));
        Some(id)
    }

    /// The client cancelled its request `id`: no answer will come (the server is told not to
    /// send one), so its stream ends and the id may be used again.
    pub fn cancelled(&mut self, id: &Value) {
        let Some(number) = self.pending.get(&id_key(id)).copied() else {
            return;
        };
        if let Some(stream) = self.streams.get_mut(&number) {
            send(stream, Frame::End);
        }
        self.finish(number);
    }

    /// Where `message` goes. `related`: the id of the request the gateway says it belongs to.
    pub fn target(&self, message: &Value, related: Option<&Value>) -> Target {
        match classify(message) {
            Ok(Class::Response { id } | Class::Error { id }) => {
                return match self.pending.get(&id_key(id)) {
                    Some(stream) => Target::Stream(*stream),
                    None => Target::Drop("an answer to no request in flight in this session"),
                };
            }
            Err(_) | Ok(Class::Batch(_)) => return Target::Drop("not a JSON-RPC message"),
            Ok(Class::Request { .. } | Class::Notification { .. }) => {}
        }
        if let Some(stream) = related.and_then(|id| self.pending.get(&id_key(id))) {
            return Target::Stream(*stream);
        }
        if let Some(stream) = message
            .pointer("/params/progressToken")
            .and_then(|token| self.progress.get(&id_key(token)))
        {
            return Target::Stream(*stream);
        }
        if self.streams.get(&GET_STREAM).is_some_and(Stream::live) {
            return Target::Stream(GET_STREAM);
        }
        let newest_open = self
            .streams
            .iter()
            .filter(|(n, s)| **n != GET_STREAM && !s.done && s.live() && s.mode != Mode::Json)
            .map(|(n, _)| *n)
            .max();
        Target::Stream(newest_open.unwrap_or(GET_STREAM))
    }

    /// Sends `message` where [`target`](Self::target) says. Returns why it was dropped, if it was.
    pub fn deliver(&mut self, message: &Value, related: Option<&Value>) -> Option<&'static str> {
        if self.closed {
            return Some("the session has ended");
        }
        let number = match self.target(message, related) {
            Target::Stream(number) => number,
            Target::Drop(why) => return Some(why),
        };
        let is_answer = matches!(
            classify(message),
            Ok(Class::Response { .. } | Class::Error { .. })
        );
        let Ok(body) = serde_json::to_vec(message).map(Bytes::from) else {
            return Some("cannot be encoded");
        };
        if is_answer && self.streams.get(&number).is_some_and(|s| s.initialize) {
            self.version = message
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .map(String::from);
        }
        let (priming, stateless) = (self.priming(), self.stateless);
        let stream = self.streams.entry(number).or_insert_with(Stream::detached);
        if let Mode::Undecided { accepts_json } = stream.mode {
            if is_answer && accepts_json {
                stream.mode = Mode::Json;
                let status = wire::status_for(stateless, message);
                send(stream, Frame::Json { body, status });
                self.finish(number);
                return None;
            }
            stream.mode = Mode::Sse;
            if priming {
                send(
                    stream,
                    Frame::Sse(priming_event(EventId {
                        stream: number,
                        seq: 0,
                    })),
                );
            }
        }
        if stateless {
            // 2026-07-28 streams are not resumable: no ids, no replay copy.
            send(stream, Frame::Sse(message_event(None, &body)));
        } else {
            let id = EventId {
                stream: number,
                seq: stream.next_seq,
            };
            stream.next_seq += 1;
            let event = message_event(Some(id), &body);
            if send(stream, Frame::Sse(event.clone())) {
                stream.delivered = id.seq;
            }
            self.replay.push(id, event);
        }
        if is_answer {
            if let Some(stream) = self.streams.get_mut(&number) {
                send(stream, Frame::End);
            }
            self.finish(number);
        }
        None
    }

    /// The answer went out: the request is no longer in flight. A stream whose connection is
    /// still attached is forgotten with its events; a detached one is kept for resumption.
    fn finish(&mut self, number: u32) {
        let Some(stream) = self.streams.get_mut(&number) else {
            return;
        };
        stream.done = true;
        if let Some(id) = stream.request.take() {
            self.pending.remove(&id_key(&id));
        }
        self.progress.retain(|_, s| *s != number);
        if stream.mode == Mode::Json || stream.live() {
            self.streams.remove(&number);
            self.replay.forget(number);
        }
    }

    /// Priming events are for clients of 2025-11-25 and later (older ones may choke on them).
    fn priming(&self) -> bool {
        self.version
            .as_deref()
            .is_some_and(|v| v >= "2025-11-25" && wire::is_supported(v))
    }

    /// A GET: attach `sink` to the GET stream, or resume the stream `after` names. The frames to
    /// send first (priming, replayed events) go into `sink` at once. `Err` when a GET stream is
    /// already attached and this is not a resumption.
    pub fn attach(
        &mut self,
        sink: Sink,
        after: Option<EventId>,
        now: Instant,
    ) -> Result<(), AttachError> {
        self.last_active = now;
        let priming = self.priming();
        let number = after.map_or(GET_STREAM, |id| id.stream);
        let stream = self.streams.entry(number).or_insert_with(|| Stream {
            // A POST stream we no longer know: it finished and its events are gone.
            done: number != GET_STREAM,
            ..Stream::detached()
        });
        if after.is_none() && stream.live() {
            return Err(AttachError::Busy);
        }
        let from = after.map_or(stream.delivered, |id| id.seq);
        if priming {
            sink.try_send(Frame::Sse(priming_event(EventId {
                stream: number,
                seq: from,
            })));
        }
        let replayed = self.replay.after(EventId {
            stream: number,
            seq: from,
        });
        let stream = self.streams.get_mut(&number).ok_or(AttachError::Busy)?;
        stream.sink = Some(sink);
        for event in replayed {
            send(stream, Frame::Sse(event));
        }
        stream.delivered = stream.next_seq - 1;
        if stream.done {
            send(stream, Frame::End);
            self.streams.remove(&number);
            self.replay.forget(number);
        }
        Ok(())
    }

    /// The session ends: every attached connection is ended.
    pub fn close(&mut self) {
        self.closed = true;
        for stream in self.streams.values_mut() {
            send(stream, Frame::End);
            stream.sink = None;
        }
        self.pending.clear();
        self.progress.clear();
    }

    /// Request ids in flight (for the gateway to cancel when the session ends).
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }
}

/// Queues a frame for a stream's connection; a full or closed queue detaches the connection
/// (the client can resume). Returns whether the frame was queued.
fn send(stream: &mut Stream, frame: Frame) -> bool {
    let Some(sink) = &stream.sink else {
        return false;
    };
    if sink.try_send(frame) {
        true
    } else {
        stream.sink = None;
        false
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
