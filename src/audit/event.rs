//! One audit event. The sink stamps each record with `ts`, `session` and `seq` in front and the
//! chain link `prev` at the end when it writes it, so the code that builds events (the gate)
//! stays pure.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The merged policy this session runs under (digest and files).
    Policy,
    /// The server was started (resolved argv, sandbox summary).
    Spawn,
    /// A `tools/call` was decided. Exactly one per `tools/call` received.
    Decision,
    /// The host answered airlock's confirmation request for an `ask` call.
    Elicitation,
    /// How a decided call ended.
    Outcome,
    /// A server line that was not forwarded (oversized or not JSON).
    Dropped,
    /// The server exited.
    Exit,
    /// A connection (or a name lookup) from the server's sandbox, allowed or refused by the
    /// network allow list; written before the server's `connect` is answered.
    NetConnect,
    /// An allowed connection ended: bytes each way, duration, how it ended.
    NetClose,
    /// A definition was pinned on first use, or changed or appeared and waits for approval.
    Pin,
    /// An install step fetched a server's package (or failed to): runner, packages, version,
    /// integrity, registry, the layer it wrote.
    Install,
    /// The HTTP face refused a request's authentication (401, 403, 503): the client's address
    /// and why, never the credential.
    Auth,
    /// The last line of a log file that was rotated: the log goes on in a new file at the same
    /// path (`detail.renamed_to`: this file's name from then on).
    Rotated,
    /// The first line of the file that replaced a rotated one: `prev` links to that file's last
    /// line (`detail.continues`: its name).
    Continued,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// A JSON-RPC error, a tool result with `isError: true`, or the server died first.
    Error,
    Denied,
    Timeout,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub event: EventKind,
    pub server: String,
    /// Who made the call, when the front end knows (an authenticated HTTP client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// `file:line` of the rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Why: a deny's explanation, an error message, a drop's cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Event-specific extras (spawn argv and sandbox, exit status, policy digest, dropped size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

impl Event {
    pub fn new(event: EventKind, server: &str) -> Event {
        Event {
            event,
            server: server.to_string(),
            identity: None,
            tool: None,
            decision: None,
            rule: None,
            layer: None,
            source: None,
            request_id: None,
            duration_ms: None,
            outcome: None,
            args: None,
            reason: None,
            detail: None,
        }
    }
}

impl EventKind {
    /// The name written in the record, as serde writes it.
    fn name(self) -> &'static str {
        match self {
            EventKind::Policy => "policy",
            EventKind::Spawn => "spawn",
            EventKind::Decision => "decision",
            EventKind::Elicitation => "elicitation",
            EventKind::Outcome => "outcome",
            EventKind::Dropped => "dropped",
            EventKind::Exit => "exit",
            EventKind::NetConnect => "net_connect",
            EventKind::NetClose => "net_close",
            EventKind::Pin => "pin",
            EventKind::Install => "install",
            EventKind::Auth => "auth",
            EventKind::Rotated => "rotated",
            EventKind::Continued => "continued",
        }
    }
}

impl Outcome {
    /// The name written in the record, as serde writes it.
    fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Denied => "denied",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
        }
    }
}

impl Event {
    /// Appends the event's JSON, byte for byte what `serde_json::to_writer` writes for it (the
    /// test below holds the two together), without its generic machinery: the field names are
    /// written as they are and a value string is copied when nothing in it needs an escape.
    /// Every `tools/call` encodes a decision before it is forwarded, so this is on its path.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        out.extend_from_slice(b"{\"event\":\"");
        out.extend_from_slice(self.event.name().as_bytes());
        out.extend_from_slice(b"\",\"server\":");
        write_str(out, &self.server)?;
        let texts = [
            ("identity", &self.identity),
            ("tool", &self.tool),
            ("decision", &self.decision),
            ("rule", &self.rule),
            ("layer", &self.layer),
            ("source", &self.source),
        ];
        for (key, text) in texts {
            if let Some(text) = text {
                write_key(out, key);
                write_str(out, text)?;
            }
        }
        if let Some(id) = &self.request_id {
            write_key(out, "request_id");
            serde_json::to_writer(&mut *out, id)?;
        }
        if let Some(duration) = self.duration_ms {
            write_key(out, "duration_ms");
            serde_json::to_writer(&mut *out, &duration)?;
        }
        if let Some(outcome) = self.outcome {
            write_key(out, "outcome");
            out.push(b'"');
            out.extend_from_slice(outcome.name().as_bytes());
            out.push(b'"');
        }
        if let Some(args) = &self.args {
            write_key(out, "args");
            serde_json::to_writer(&mut *out, args)?;
        }
        if let Some(reason) = &self.reason {
            write_key(out, "reason");
            write_str(out, reason)?;
        }
        if let Some(detail) = &self.detail {
            write_key(out, "detail");
            serde_json::to_writer(&mut *out, detail)?;
        }
        out.push(b'}');
        Ok(())
    }
}

/// `,"key":` for a field name that needs no escape.
fn write_key(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

/// A JSON string: copied between quotes when no byte needs an escape, serde's encoding otherwise.
fn write_str(out: &mut Vec<u8>, text: &str) -> Result<(), serde_json::Error> {
    if text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        return serde_json::to_writer(&mut *out, text);
    }
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
    Ok(())
}

/// Milliseconds with microsecond precision: fast calls would all read 0 otherwise.
pub fn millis(duration: Duration) -> f64 {
    (duration.as_micros() as f64) / 1000.0
}

/// RFC 3339 UTC with microseconds, e.g. `2026-03-01T12:00:00.123456Z`.
///
/// Formatted by hand into a fixed buffer: it runs for every audit event, and `format!` with
/// padded fields cost more than the rest of the event's encoding.
pub fn rfc3339(time: SystemTime) -> String {
    let mut text = Vec::with_capacity(27);
    write_rfc3339(&mut text, time);
    // Only ASCII digits and separators were written.
    String::from_utf8(text).unwrap_or_default()
}

/// [`rfc3339`], appended to `out` (the audit sink stamps every record with it).
pub fn write_rfc3339(out: &mut Vec<u8>, time: SystemTime) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    // Years outside 0..=9999 cannot come from a SystemTime after 1970 for a long while; keep the
    // general path for them rather than printing a wrong date.
    if !(0..=9999).contains(&year) {
        let text = format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60,
            since.subsec_micros()
        );
        out.extend_from_slice(text.as_bytes());
        return;
    }
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    put_digits(&mut text[0..4], year as u64);
    put_digits(&mut text[5..7], u64::from(month));
    put_digits(&mut text[8..10], u64::from(day));
    put_digits(&mut text[11..13], rem / 3600);
    put_digits(&mut text[14..16], (rem % 3600) / 60);
    put_digits(&mut text[17..19], rem % 60);
    put_digits(&mut text[20..26], u64::from(since.subsec_micros()));
    out.extend_from_slice(&text);
}

/// Writes `value` as zero-padded decimal filling `out` (the value always fits).
fn put_digits(out: &mut [u8], mut value: u64) {
    for slot in out.iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// Microseconds since the epoch of an RFC 3339 time (`2026-03-01T12:00:00Z`, fraction and
/// `+HH:MM` offset optional, `T` or a space between date and time) or a bare date
/// (`2026-03-01`, midnight UTC). `None` when it is neither.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let text = text.trim();
    let number = |part: &str| -> Option<i64> {
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let mut fields = date.splitn(3, '-');
    let (year, month, day) = (
        number(fields.next()?)?,
        number(fields.next()?)?,
        number(fields.next()?)?,
    );
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month as u32, day as u32);
    let Some(time) = time else {
        return Some(days * 86_400_000_000);
    };
    let (clock, offset_secs) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else if let Some(at) = time.rfind(['+', '-']) {
        let (clock, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = zone[1..].split_once(':')?;
        (
            clock,
            sign * (number(hours)? * 3600 + number(minutes)? * 60),
        )
    } else {
        (time, 0)
    };
    let (clock, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = clock.split(':');
    let hour = number(parts.next()?)?;
    let minute = number(parts.next()?)?;
    let second = parts.next().map_or(Some(0), number)?;
    if parts.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let micros = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().chain("000000".chars()).take(6).collect();
        number(&digits)?
    };
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(secs * 1_000_000 + micros)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of `civil_from_days`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let t = UNIX_EPOCH + Duration::from_micros(1_709_294_400_123_456); // 2024-03-01T12:00:00
        assert_eq!(rfc3339(t), "2024-03-01T12:00:00.123456Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000000Z");
        let late = UNIX_EPOCH + Duration::new(253_402_300_799, 999_999_000); // 9999-12-31T23:59:59
        assert_eq!(rfc3339(late), "9999-12-31T23:59:59.999999Z");
        let beyond = UNIX_EPOCH + Duration::from_secs(253_402_300_800);
        assert_eq!(rfc3339(beyond), "10000-01-01T00:00:00.000000Z");
    }

    #[test]
    fn parses_what_it_formats_and_common_spellings() {
        let t = UNIX_EPOCH + Duration::from_micros(1_709_294_400_123_456);
        assert_eq!(parse_rfc3339(&rfc3339(t)), Some(1_709_294_400_123_456));
        assert_eq!(parse_rfc3339("2024-03-01"), Some(1_709_251_200_000_000));
        assert_eq!(
            parse_rfc3339("2024-03-01T13:00:00+01:00"),
            Some(1_709_294_400_000_000)
        );
        assert_eq!(
            parse_rfc3339("2024-03-01 12:00"),
            Some(1_709_294_400_000_000)
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T00:00:00.5Z"),
            Some(951_782_400_500_000)
        );
        for bad in [
            "",
            "yesterday",
            "2024-13-01",
            "2024-03-01T25:00Z",
            "2024-03-01T12",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_hand_encoding_is_serdes_byte_for_byte() {
        let kinds = [
            EventKind::Policy,
            EventKind::Spawn,
            EventKind::Decision,
            EventKind::Elicitation,
            EventKind::Outcome,
            EventKind::Dropped,
            EventKind::Exit,
            EventKind::NetConnect,
            EventKind::NetClose,
            EventKind::Pin,
            EventKind::Install,
            EventKind::Auth,
            EventKind::Rotated,
            EventKind::Continued,
        ];
        let outcomes = [
            Outcome::Ok,
            Outcome::Error,
            Outcome::Denied,
            Outcome::Timeout,
            Outcome::Cancelled,
        ];
        let texts = [
            "fs",
            "",
            "quote \" and \\ back",
            "tab\tnew\nline\u{1}",
            "é ∑ 😀",
            "</script>",
        ];
        let mut events = Vec::new();
        for (i, kind) in kinds.iter().enumerate() {
            let text = texts[i % texts.len()];
            // Only the kind and server.
            events.push(Event::new(*kind, text));
            // Every field present.
            let mut full = Event::new(*kind, texts[(i + 1) % texts.len()]);
            full.identity = Some(text.into());
            full.tool = Some(texts[(i + 2) % texts.len()].into());
            full.decision = Some("allow".into());
            full.rule = Some(text.into());
            full.layer = Some("user".into());
            full.source = Some("/p/policy.toml:3".into());
            full.request_id = Some(if i % 2 == 0 {
                serde_json::json!(i)
            } else {
                serde_json::json!(text)
            });
            full.duration_ms = Some([0.0, 1.5, 0.046, 1e21, f64::NAN, -0.0][i % 6]);
            full.outcome = Some(outcomes[i % outcomes.len()]);
            full.args = Some(serde_json::json!({"path": text, "n": [1, 2.5, null, {"k": true}]}));
            full.reason = Some(texts[(i + 3) % texts.len()].into());
            full.detail = Some(serde_json::json!({"code": -1, "why": text}));
            events.push(full.clone());
            // Some present, some not.
            full.identity = None;
            full.rule = None;
            full.duration_ms = None;
            full.args = None;
            events.push(full);
        }
        for event in events {
            let mut hand = Vec::new();
            event.encode_into(&mut hand).unwrap();
            let serde = serde_json::to_vec(&event).unwrap();
            assert_eq!(
                String::from_utf8(hand).unwrap(),
                String::from_utf8(serde).unwrap()
            );
        }
    }

    #[test]
    fn serializes_only_present_fields_in_schema_order() {
        let mut event = Event::new(EventKind::Outcome, "fs");
        event.outcome = Some(Outcome::Timeout);
        event.duration_ms = Some(millis(Duration::from_micros(1500)));
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(
            text,
            r#"{"event":"outcome","server":"fs","duration_ms":1.5,"outcome":"timeout"}"#
        );
    }
}
