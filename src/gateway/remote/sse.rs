//! A bounded parser for `text/event-stream` (the WHATWG server-sent events format), pure.
//!
//! Both remote transports carry JSON-RPC messages in SSE events. Written here rather than taken
//! from a crate because the whole format is a few dozen lines and the one property airlock needs
//! most is a hard bound: a server that never ends a line, or sends an endless event, must cost at
//! most `max_event_bytes` of memory, and the oversized event is reported, not buffered.

/// One thing the stream yielded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A complete event: its type (`message` when the server named none) and its data.
    Event { event: String, data: String },
    /// An event whose data exceeded the limit; it was skipped. `bytes`: how much was seen.
    Oversized { bytes: usize },
}

/// Longest `event:` name kept; event names are short words (`message`, `endpoint`).
const MAX_EVENT_NAME: usize = 256;
/// Room for a field name and its separator on top of the data limit.
const FIELD_SLACK: usize = 64;

#[derive(Debug)]
pub struct SseParser {
    max_event_bytes: usize,
    line: Vec<u8>,
    /// The current line is longer than any valid one: skip to its end.
    line_too_long: bool,
    data: Vec<u8>,
    has_data: bool,
    event: String,
    /// The current event exceeded the limit: skip to the blank line that ends it.
    skipping: bool,
    skipped_bytes: usize,
    /// The previous chunk ended in `\r`: a `\n` that starts the next one belongs to it.
    after_cr: bool,
    /// Nothing seen yet: a leading byte-order mark is dropped.
    at_start: bool,
}

impl SseParser {
    pub fn new(max_event_bytes: usize) -> Self {
        SseParser {
            max_event_bytes,
            line: Vec::new(),
            line_too_long: false,
            data: Vec::new(),
            has_data: false,
            event: String::new(),
            skipping: false,
            skipped_bytes: 0,
            after_cr: false,
            at_start: true,
        }
    }

    /// Feeds bytes as they arrive; complete events are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseItem>) {
        if self.at_start && !chunk.is_empty() {
            self.at_start = false;
            if let Some(rest) = chunk.strip_prefix(b"\xEF\xBB\xBF") {
                chunk = rest;
            }
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.extend_line(chunk);
                    return;
                }
                Some(end) => {
                    self.extend_line(&chunk[..end]);
                    let crlf = chunk[end] == b'\r';
                    chunk = &chunk[end + 1..];
                    if crlf {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            None => self.after_cr = true,
                            Some(_) => {}
                        }
                    }
                    self.end_line(out);
                }
            }
        }
    }

    fn extend_line(&mut self, bytes: &[u8]) {
        if self.line_too_long {
            self.skipped_bytes += bytes.len();
            return;
        }
        if self.line.len() + bytes.len() > self.max_event_bytes + FIELD_SLACK {
            self.line_too_long = true;
            self.skipped_bytes += self.line.len() + bytes.len() + self.data.len();
            self.line = Vec::new();
            self.data = Vec::new();
            self.skipping = true;
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, out: &mut Vec<SseItem>) {
        if self.line_too_long {
            self.line_too_long = false;
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // a comment (keep-alive)
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &b""[..]),
        };
        match field {
            b"data" => {
                if self.skipping {
                    self.skipped_bytes += value.len() + 1;
                    return;
                }
                if self.data.len() + value.len() + 1 > self.max_event_bytes {
                    self.skipping = true;
                    self.skipped_bytes += self.data.len() + value.len() + 1;
                    self.data = Vec::new();
                    return;
                }
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
                self.has_data = true;
            }
            b"event" => {
                let name = String::from_utf8_lossy(value);
                self.event = name.chars().take(MAX_EVENT_NAME).collect();
            }
            // `id` and `retry` matter only for resuming a stream, which airlock does not do.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseItem>) {
        let event = std::mem::take(&mut self.event);
        if self.skipping {
            out.push(SseItem::Oversized {
                bytes: self.skipped_bytes,
            });
            self.skipping = false;
            self.skipped_bytes = 0;
            self.data = Vec::new();
            self.has_data = false;
            return;
        }
        if !self.has_data {
            return;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.last() == Some(&b'\n') {
            data.pop();
        }
        out.push(SseItem::Event {
            event: if event.is_empty() {
                "message".into()
            } else {
                event
            },
            data: String::from_utf8_lossy(&data).into_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]], max: usize) -> Vec<SseItem> {
        let mut parser = SseParser::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        out
    }

    fn event(event: &str, data: &str) -> SseItem {
        SseItem::Event {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn events_with_and_without_names() {
        let items = parse_all(
            &[b"event: endpoint\ndata: /message?sessionId=1\n\ndata: {\"a\":1}\n\n"],
            1024,
        );
        assert_eq!(
            items,
            vec![
                event("endpoint", "/message?sessionId=1"),
                event("message", "{\"a\":1}")
            ]
        );
    }

    #[test]
    fn multi_line_data_comments_ids_and_every_line_ending() {
        let items = parse_all(
            &[b": keep-alive\r\nid: 7\r\ndata: one\rdata:two\r\n\r\nretry: 5\n\n"],
            1024,
        );
        assert_eq!(items, vec![event("message", "one\ntwo")]);
    }

    #[test]
    fn split_anywhere_including_between_cr_and_lf() {
        let text = b"\xEF\xBB\xBFevent: message\r\ndata: {\"x\": \"y\"}\r\n\r\ndata: z\r\n\r\n";
        let whole = parse_all(&[text], 1024);
        assert_eq!(
            whole,
            vec![event("message", "{\"x\": \"y\"}"), event("message", "z")]
        );
        for split in 0..text.len() {
            let (a, b) = text.split_at(split);
            assert_eq!(parse_all(&[a, b], 1024), whole, "split at {split}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(parse_all(&bytes, 1024), whole);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        assert_eq!(
            parse_all(&[b"event: ping\n\n: only a comment\n\n"], 64),
            vec![]
        );
    }

    #[test]
    fn oversized_events_are_skipped_and_reported_then_parsing_goes_on() {
        let big = format!("data: {}\n\ndata: ok\n\n", "x".repeat(200));
        let items = parse_all(&[big.as_bytes()], 100);
        assert!(matches!(items[0], SseItem::Oversized { bytes } if bytes > 100));
        assert_eq!(items[1], event("message", "ok"));

        // Many short data lines adding up past the limit.
        let many = format!("{}\ndata: ok\n\n", "data: 0123456789\n".repeat(20));
        let items = parse_all(&[many.as_bytes()], 100);
        assert!(matches!(items[0], SseItem::Oversized { .. }), "{items:?}");
        assert_eq!(items[1], event("message", "ok"));
    }

    #[test]
    fn a_line_that_never_ends_costs_bounded_memory() {
        let mut parser = SseParser::new(1000);
        let mut out = Vec::new();
        let chunk = vec![b'a'; 4096];
        for _ in 0..1000 {
            parser.feed(&chunk, &mut out);
        }
        assert!(parser.line.capacity() <= 1000 + FIELD_SLACK + 4096);
        parser.feed(b"\n\ndata: after\n\n", &mut out);
        assert!(matches!(out[0], SseItem::Oversized { bytes } if bytes >= 4_096_000));
        assert_eq!(out[1], event("message", "after"));
    }
}
