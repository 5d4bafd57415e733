//! Server-Sent Events: the bytes of one event, event ids, and the bounded replay buffer behind
//! `Last-Event-ID` resumption. Pure.
//!
//! Event ids are `<stream>-<seq>`: `stream` numbers the session's streams (0 is the GET stream,
//! each POST answered with SSE gets the next number), `seq` counts that stream's events from 1
//! (0 is the priming event). An id therefore names the stream it belongs to, so a resumption
//! replays exactly that stream, never another one's messages (the transport spec's rule).

use std::collections::VecDeque;

use bytes::Bytes;

/// The stream server-initiated messages use: the one a GET opens.
pub const GET_STREAM: u32 = 0;

/// One SSE event carrying a JSON-RPC message (one `data:` line: compact JSON has no newline).
pub fn message_event(id: Option<EventId>, json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 48);
    if let Some(id) = id {
        out.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The priming event (2025-11-25): an id and empty data, so a client that loses the connection
/// before the first message can still resume.
pub fn priming_event(id: EventId) -> Bytes {
    Bytes::from(format!("id: {id}\ndata: \n\n"))
}

/// A comment line: keeps idle connections (and proxies) from timing out; clients ignore it.
pub const KEEPALIVE: &[u8] = b":\n\n";

/// `<stream>-<seq>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventId {
    pub stream: u32,
    pub seq: u64,
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.stream, self.seq)
    }
}

impl EventId {
    /// Parses a `Last-Event-ID` value this server issued; anything else is `None`.
    pub fn parse(text: &str) -> Option<EventId> {
        let (stream, seq) = text.trim().split_once('-')?;
        Some(EventId {
            stream: stream.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

/// The last events of a session, oldest first, bounded by count and bytes.
#[derive(Debug, Default)]
pub struct ReplayBuffer {
    events: VecDeque<(EventId, Bytes)>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
}

impl ReplayBuffer {
    pub fn new(max_events: usize, max_bytes: usize) -> ReplayBuffer {
        ReplayBuffer {
            events: VecDeque::new(),
            bytes: 0,
            max_events,
            max_bytes,
        }
    }

    /// Keeps an event, forgetting the oldest ones past the bounds.
    pub fn push(&mut self, id: EventId, event: Bytes) {
        if self.max_events == 0 || event.len() > self.max_bytes {
            return;
        }
        self.bytes += event.len();
        self.events.push_back((id, event));
        while self.events.len() > self.max_events || self.bytes > self.max_bytes {
            match self.events.pop_front() {
                Some((_, old)) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// The kept events of `after.stream` that come after `after`, oldest first.
    pub fn after(&self, after: EventId) -> Vec<Bytes> {
        self.events
            .iter()
            .filter(|(id, _)| id.stream == after.stream && id.seq > after.seq)
            .map(|(_, event)| event.clone())
            .collect()
    }

    /// Forgets a stream's events (its client has them all, or the stream is gone).
    pub fn forget(&mut self, stream: u32) {
        let mut freed = 0;
        self.events.retain(|(id, event)| {
            let keep = id.stream != stream;
            if !keep {
                freed += event.len();
            }
            keep
        });
        self.bytes -= freed;
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(stream: u32, seq: u64) -> EventId {
        EventId { stream, seq }
    }

    #[test]
    fn events_are_one_data_line() {
        let event = message_event(Some(id(3, 7)), br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(
            &event[..],
            b"id: 3-7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
        );
        assert_eq!(&priming_event(id(2, 0))[..], b"id: 2-0\ndata: \n\n");
    }

    #[test]
    fn ids_round_trip_and_foreign_ids_do_not_parse() {
        assert_eq!(EventId::parse("12-34"), Some(id(12, 34)));
        assert_eq!(EventId::parse(&id(0, 9).to_string()), Some(id(0, 9)));
        for bad in ["", "x-1", "1-", "1", "abc", "-1-2"] {
            assert_eq!(EventId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn replay_returns_only_that_streams_later_events() {
        let mut buffer = ReplayBuffer::new(10, 1 << 20);
        for (stream, seq) in [(1, 1), (2, 1), (1, 2), (1, 3), (2, 2)] {
            buffer.push(id(stream, seq), Bytes::from(format!("{stream}.{seq}")));
        }
        assert_eq!(buffer.after(id(1, 1)), vec!["1.2", "1.3"]);
        assert_eq!(buffer.after(id(2, 0)), vec!["2.1", "2.2"]);
        assert!(buffer.after(id(3, 0)).is_empty());
        buffer.forget(1);
        assert_eq!(buffer.len(), 2);
        assert!(buffer.after(id(1, 0)).is_empty());
    }

    #[test]
    fn the_buffer_is_bounded_by_count_and_bytes() {
        let mut buffer = ReplayBuffer::new(3, 10);
        for seq in 1..=5 {
            buffer.push(id(1, seq), Bytes::from_static(b"ab"));
        }
        assert_eq!(buffer.after(id(1, 0)).len(), 3);
        buffer.push(id(1, 6), Bytes::from_static(b"0123456789"));
        assert_eq!(
            buffer.after(id(1, 0)),
            vec![Bytes::from_static(b"0123456789")]
        );
        buffer.push(id(1, 7), Bytes::from_static(b"01234567890"));
        assert_eq!(
            buffer.len(),
            1,
            "an event larger than the whole buffer is not kept"
        );
    }
}
