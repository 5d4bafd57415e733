//! Reading an audit log for people (`airlock audit`): which records a filter keeps, how a record
//! reads on one line, and the per-server summary. Pure: records come in as parsed JSON.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::event::parse_rfc3339;
use crate::policy::pattern::Glob;

/// Which records to show. Every field that is set must match; a record that lacks the field a
/// filter looks at does not match it.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub server: Option<Glob>,
    pub tool: Option<Glob>,
    pub decision: Option<String>,
    pub outcome: Option<String>,
    pub identity: Option<Glob>,
    /// A prefix of the session id (ids are long; a few characters are enough).
    pub session: Option<String>,
    pub event: Option<String>,
    /// Microseconds since the epoch, inclusive.
    pub since: Option<i64>,
    /// Microseconds since the epoch, exclusive.
    pub until: Option<i64>,
}

fn text<'a>(record: &'a Value, key: &str) -> Option<&'a str> {
    record.get(key).and_then(Value::as_str)
}

impl Filter {
    pub fn matches(&self, record: &Value) -> bool {
        let glob = |filter: &Option<Glob>, key: &str| {
            filter
                .as_ref()
                .is_none_or(|glob| text(record, key).is_some_and(|v| glob.matches(v)))
        };
        let exact = |filter: &Option<String>, key: &str| {
            filter
                .as_ref()
                .is_none_or(|want| text(record, key) == Some(want.as_str()))
        };
        let in_time = || {
            if self.since.is_none() && self.until.is_none() {
                return true;
            }
            let Some(ts) = text(record, "ts").and_then(parse_rfc3339) else {
                return false;
            };
            self.since.is_none_or(|since| ts >= since) && self.until.is_none_or(|until| ts < until)
        };
        glob(&self.server, "server")
            && glob(&self.tool, "tool")
            && glob(&self.identity, "identity")
            && exact(&self.decision, "decision")
            && exact(&self.outcome, "outcome")
            && exact(&self.event, "event")
            && self.session.as_ref().is_none_or(|prefix| {
                text(record, "session").is_some_and(|s| s.starts_with(prefix.as_str()))
            })
            && in_time()
    }
}

/// A time given on the command line: RFC 3339, a date, or an age (`30s`, `15m`, `2h`, `7d`)
/// counted back from `now` (microseconds since the epoch).
pub fn parse_time(text: &str, now: i64) -> Option<i64> {
    if let Some(at) = parse_rfc3339(text) {
        return Some(at);
    }
    let text = text.trim();
    let unit = text.chars().last()?;
    let amount: i64 = text[..text.len() - unit.len_utf8()].parse().ok()?;
    let seconds = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return None,
    };
    Some(now - amount.checked_mul(seconds)?.checked_mul(1_000_000)?)
}

/// One record on one line: time, session/seq, event, server, then what the event says.
pub fn format_record(record: &Value) -> String {
    let get = |key: &str| text(record, key).unwrap_or("");
    let ts = get("ts")
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_string();
    let session: String = get("session").chars().take(8).collect();
    let seq = record.get("seq").map(Value::to_string).unwrap_or_default();
    let mut line = format!(
        "{ts}  {session}#{seq:<4} {:<11} {}",
        get("event"),
        get("server")
    );
    let mut push = |part: String| {
        if !part.is_empty() {
            line.push_str("  ");
            line.push_str(&part);
        }
    };
    push(get("tool").to_string());
    push(get("decision").to_string());
    push(get("outcome").to_string());
    if let Some(ms) = record.get("duration_ms").and_then(Value::as_f64) {
        push(format!("{ms:.3} ms"));
    }
    if let Some(rule) = text(record, "rule") {
        // airlock's own rules (a tool that was never listed) belong to no policy layer.
        match get("layer") {
            "" => push(rule.to_string()),
            layer => push(format!("{rule} ({layer})")),
        }
    }
    if let Some(identity) = text(record, "identity") {
        push(format!("by {identity}"));
    }
    // The call a record belongs to: a decision, its outcome and the connections made during it
    // share it.
    if let Some(id) = record.get("request_id").filter(|id| !id.is_null()) {
        push(format!("call {id}"));
    }
    if let Some(args) = record.get("args") {
        push(format!("args={args}"));
    }
    if let Some(reason) = text(record, "reason") {
        // One record, one line: a reason of several lines (an error and its fix) is joined.
        let lines: Vec<&str> = reason
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        push(format!("reason: {}", lines.join(" | ")));
    }
    if let Some(detail) = record.get("detail") {
        push(detail_summary(get("event"), detail));
    }
    line
}

fn detail_summary(event: &str, detail: &Value) -> String {
    match event {
        "spawn" => detail
            .get("argv")
            .and_then(Value::as_array)
            .map(|argv| {
                let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
                words.join(" ")
            })
            .unwrap_or_default(),
        "policy" => format!(
            "digest {}",
            text(detail, "digest")
                .unwrap_or("")
                .chars()
                .take(12)
                .collect::<String>()
        ),
        _ => detail.to_string(),
    }
}

/// What `airlock audit summary` reports for one server.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerSummary {
    /// `tools/call` requests (decision records).
    pub calls: u64,
    pub denied: u64,
    /// Calls that ended in an error or a timeout.
    pub errors: u64,
    /// Milliseconds, over calls that were forwarded and answered (denials excluded).
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    /// Times the server was started, or a remote one connected to (spawn records).
    pub starts: u64,
    /// Network connections the server made through airlock's egress (`net_connect` records),
    /// allowed and refused (a refused name lookup counts as a refused connection).
    pub net_allowed: u64,
    pub net_refused: u64,
    /// Connections of its install step (first use), which reaches the package registry
    /// whatever the server's own network rule (`detail.step = "install"`).
    pub install_net: u64,
    #[serde(skip)]
    durations: Vec<f64>,
}

/// Per-server figures over the records given to [`Summary::add`].
#[derive(Debug, Clone, Default)]
pub struct Summary {
    servers: BTreeMap<String, ServerSummary>,
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], percent: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((percent / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl Summary {
    pub fn add(&mut self, record: &Value) {
        let Some(server) = text(record, "server") else {
            return;
        };
        let event = text(record, "event");
        // Only what a row counts makes a row (a gateway's own `policy` records do not).
        if !matches!(
            event,
            Some("decision" | "outcome" | "spawn" | "net_connect")
        ) {
            return;
        }
        let entry = self.servers.entry(server.to_string()).or_default();
        match event {
            Some("decision") => {
                entry.calls += 1;
                if text(record, "decision") == Some("deny") {
                    entry.denied += 1;
                }
            }
            Some("outcome") => {
                let outcome = text(record, "outcome");
                if matches!(outcome, Some("error" | "timeout")) {
                    entry.errors += 1;
                }
                if outcome != Some("denied")
                    && let Some(ms) = record.get("duration_ms").and_then(Value::as_f64)
                {
                    entry.durations.push(ms);
                }
            }
            Some("spawn") => entry.starts += 1,
            Some("net_connect") => {
                let detail = record.get("detail");
                let step = detail.and_then(|d| text(d, "step"));
                // A count of what went over a budget (`detail.unrecorded`) stands for that many.
                let many = detail.and_then(|d| d.get("unrecorded")).map(|unrecorded| {
                    ["connections", "lookups"]
                        .iter()
                        .filter_map(|key| unrecorded.get(key).and_then(Value::as_u64))
                        .sum::<u64>()
                });
                let count = many.unwrap_or(1);
                if step == Some("install") {
                    entry.install_net += count;
                } else if text(record, "decision") == Some("allow") {
                    entry.net_allowed += count;
                } else {
                    entry.net_refused += count;
                }
            }
            _ => {}
        }
    }

    /// Every server seen, by name, with its percentiles computed.
    pub fn finish(mut self) -> BTreeMap<String, ServerSummary> {
        for entry in self.servers.values_mut() {
            entry.durations.sort_by(f64::total_cmp);
            entry.p50_ms = percentile(&entry.durations, 50.0);
            entry.p95_ms = percentile(&entry.durations, 95.0);
        }
        self.servers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decision(server: &str, tool: &str, decision: &str, ts: &str) -> Value {
        json!({"ts": ts, "session": "abcdef0123456789", "seq": 1, "event": "decision",
               "server": server, "tool": tool, "decision": decision})
    }

    #[test]
    fn filters_match_every_given_field() {
        let record = decision("fs", "write_file", "deny", "2026-03-01T12:00:00.000000Z");
        let mut filter = Filter::default();
        assert!(filter.matches(&record));
        filter.server = Some(Glob::parse("f*"));
        filter.tool = Some(Glob::parse("write_*"));
        filter.decision = Some("deny".into());
        filter.session = Some("abc".into());
        filter.since = parse_rfc3339("2026-03-01");
        filter.until = parse_rfc3339("2026-03-02");
        assert!(filter.matches(&record));
        for change in 0..5 {
            let mut narrower = filter.clone();
            match change {
                0 => narrower.server = Some(Glob::parse("git*")),
                1 => narrower.decision = Some("allow".into()),
                2 => narrower.session = Some("abd".into()),
                3 => narrower.until = parse_rfc3339("2026-03-01T12:00:00Z"),
                _ => narrower.identity = Some(Glob::parse("*")),
            }
            assert!(!narrower.matches(&record), "change {change}");
        }
        let mut with_identity = record.clone();
        with_identity["identity"] = json!("alice");
        let by_alice = Filter {
            identity: Some(Glob::parse("alice")),
            ..Filter::default()
        };
        assert!(by_alice.matches(&with_identity) && !by_alice.matches(&record));
    }

    #[test]
    fn times_are_absolute_or_ages() {
        let now = parse_rfc3339("2026-03-02T00:00:00Z").unwrap();
        assert_eq!(parse_time("1d", now), parse_rfc3339("2026-03-01"));
        assert_eq!(
            parse_time("90m", now),
            parse_rfc3339("2026-03-01T22:30:00Z")
        );
        assert_eq!(parse_time("2026-03-01", now), parse_rfc3339("2026-03-01"));
        assert_eq!(parse_time("soon", now), None);
        assert_eq!(parse_time("5x", now), None);
    }

    #[test]
    fn summary_counts_calls_denials_errors_durations_starts_and_network_connections() {
        let mut summary = Summary::default();
        summary.add(&json!({"event": "spawn", "server": "fs"}));
        summary.add(&json!({"event": "spawn", "server": "fs"}));
        summary.add(&json!({"event": "net_connect", "server": "fs", "decision": "allow"}));
        summary.add(&json!({"event": "net_connect", "server": "fs", "decision": "deny"}));
        summary.add(&json!({"event": "net_connect", "server": "fs", "decision": "deny"}));
        // Counts over a budget stand for that many connections and lookups.
        summary.add(
            &json!({"event": "net_connect", "server": "fs", "decision": "allow",
                            "detail": {"unrecorded": {"connections": 50, "destinations": []}}}),
        );
        summary.add(
            &json!({"event": "net_connect", "server": "fs", "decision": "deny",
                            "detail": {"unrecorded": {"lookups": 7, "connections": 3}}}),
        );
        summary.add(
            &json!({"event": "net_connect", "server": "fs", "decision": "allow",
                            "detail": {"host": "registry", "step": "install"}}),
        );
        for (n, outcome) in ["ok", "ok", "error", "timeout", "denied"]
            .iter()
            .enumerate()
        {
            let verdict = if *outcome == "denied" {
                "deny"
            } else {
                "allow"
            };
            summary.add(&decision("fs", "t", verdict, ""));
            summary.add(
                &json!({"event": "outcome", "server": "fs", "outcome": outcome,
                                "duration_ms": (n + 1) as f64}),
            );
        }
        summary.add(&decision("git", "log", "allow", ""));
        // A gateway's own records (its policy) make no row.
        summary.add(&json!({"event": "policy", "server": "gateway", "digest": "x"}));
        let servers = summary.finish();
        assert!(!servers.contains_key("gateway"), "{servers:?}");
        let fs = &servers["fs"];
        assert_eq!((fs.calls, fs.denied, fs.errors, fs.starts), (5, 1, 2, 2));
        assert_eq!(
            (fs.net_allowed, fs.net_refused, fs.install_net),
            (51, 12, 1)
        );
        assert_eq!((fs.p50_ms, fs.p95_ms), (Some(2.0), Some(4.0)));
        assert_eq!(servers["git"].calls, 1);
        assert_eq!(servers["git"].p50_ms, None);
    }

    #[test]
    fn a_record_reads_on_one_line() {
        let mut record = decision("fs", "write_file", "deny", "2026-03-01T12:00:00.000120Z");
        record["rule"] = json!("tools.deny \"mcp:fs__write_*\"");
        record["layer"] = json!("org");
        record["args"] = json!({"path": "/etc/x"});
        let line = format_record(&record);
        assert!(
            line.starts_with("2026-03-01 12:00:00.000120  abcdef01#1    decision    fs"),
            "{line}"
        );
        let connect = json!({"ts": "2026-03-01T12:00:00Z", "session": "abcdef0123456789",
            "seq": 2, "event": "net_connect", "server": "fs", "decision": "allow",
            "request_id": 7, "detail": {"host": "example.org", "port": 443}});
        let connect = format_record(&connect);
        assert!(connect.contains("  allow  call 7  {"), "{connect}");
        let failed = json!({"ts": "2026-03-01T12:00:00Z", "event": "policy", "server": "gateway",
            "reason": "reload failed: a.toml:1:2: bad\n  fix: correct it"});
        let failed = format_record(&failed);
        assert!(
            failed.ends_with("reason: reload failed: a.toml:1:2: bad | fix: correct it"),
            "{failed}"
        );
        assert!(
            line.contains(
                "write_file  deny  tools.deny \"mcp:fs__write_*\" (org)  args={\"path\":\"/etc/x\"}"
            ),
            "{line}"
        );
        assert!(!line.contains('\n'));
        // airlock's own rule has no layer: no empty parentheses.
        record["rule"] = json!("airlock: not a listed tool");
        record.as_object_mut().unwrap().remove("layer");
        let line = format_record(&record);
        assert!(
            line.contains("deny  airlock: not a listed tool  args="),
            "{line}"
        );
    }
}
