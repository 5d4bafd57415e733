//! The audit events of the network: one `net_connect` per connection or refused name lookup
//! (allowed or refused, and why), one `net_close` per allowed connection (bytes each way,
//! duration, how it ended). Built here, pure; written by whoever owns the audit log.

use std::time::Duration;

use serde_json::{Value, json};

use super::budget::{ConnectionBudget, Unrecorded};
use crate::audit::event::millis;
use crate::audit::{Event, EventKind, Outcome};

/// What one `net_connect` event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectEvent {
    /// Connection number within the server's session (`net_close` repeats it).
    pub conn: u64,
    /// The name the server asked for, or the address it dialled.
    pub host: String,
    /// `None` for a name lookup.
    pub port: Option<u16>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed by this entry (its text and where it was written).
    Allowed {
        rule: String,
        origin: String,
        /// The address airlock connects to (`None` until resolved).
        upstream: Option<String>,
    },
    Refused {
        reason: String,
    },
}

impl ConnectEvent {
    pub fn event(&self, server: &str) -> Event {
        let mut event = Event::new(EventKind::NetConnect, server);
        let mut detail = json!({
            "conn": self.conn,
            "host": self.host,
            "kind": if self.port.is_some() { "connection" } else { "lookup" },
        });
        if let Some(port) = self.port {
            detail["port"] = json!(port);
        }
        match &self.verdict {
            Verdict::Allowed {
                rule,
                origin,
                upstream,
            } => {
                event.decision = Some("allow".into());
                event.rule = Some(format!("sandbox.network allow {rule:?}"));
                event.source = Some(origin.clone());
                if let Some(upstream) = upstream {
                    detail["upstream"] = json!(upstream);
                }
            }
            Verdict::Refused { reason } => {
                event.decision = Some("deny".into());
                event.reason = Some(reason.clone());
            }
        }
        event.detail = Some(detail);
        event
    }
}

/// What one `net_close` event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseEvent {
    pub conn: u64,
    pub host: String,
    pub port: u16,
    /// Bytes from the server to the remote end.
    pub bytes_up: u64,
    /// Bytes from the remote end to the server.
    pub bytes_down: u64,
    pub duration: Duration,
    /// `None`: both sides closed cleanly; otherwise what went wrong (connect, resolve, reset).
    pub error: Option<String>,
}

impl CloseEvent {
    pub fn event(&self, server: &str) -> Event {
        let mut event = Event::new(EventKind::NetClose, server);
        event.duration_ms = Some(millis(self.duration));
        event.outcome = Some(if self.error.is_some() {
            Outcome::Error
        } else {
            Outcome::Ok
        });
        event.reason = self.error.clone();
        event.detail = Some(json!({
            "conn": self.conn,
            "host": self.host,
            "port": self.port,
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
        }));
        event
    }
}

/// The `net_connect` that stands for allowed connections not recorded one by one (over the
/// minute's budget, [`crate::net::budget`]): how many, and per destination how many failed and
/// the bytes each way. `detail.unrecorded` marks it (it is attributed to no tool call).
pub fn unrecorded_connections(server: &str, due: &Unrecorded) -> Event {
    let mut event = Event::new(EventKind::NetConnect, server);
    let connections = due.connections();
    event.decision = Some("allow".into());
    event.reason = Some(if connections == 0 {
        format!(
            "the ends of allowed connections counted in an earlier record (over {} a minute): their bytes by destination",
            ConnectionBudget::BUDGET
        )
    } else {
        format!(
            "{connections} allowed connections were not recorded one by one (over {} a minute): counted by destination",
            ConnectionBudget::BUDGET
        )
    });
    let destinations: Vec<Value> = due
        .destinations
        .iter()
        .map(|(host, port, tally)| {
            let mut entry = json!({"host": host, "port": port});
            if let (Some(entry), Ok(Value::Object(tally))) =
                (entry.as_object_mut(), serde_json::to_value(tally))
            {
                entry.extend(tally);
            }
            entry
        })
        .collect();
    let mut unrecorded = json!({"connections": connections, "destinations": destinations});
    if due.elsewhere.connections > 0 {
        unrecorded["elsewhere"] = serde_json::to_value(&due.elsewhere).unwrap_or_default();
    }
    event.detail = Some(json!({ "unrecorded": unrecorded }));
    event
}

/// The detail field of an event, for tests that read the log.
pub fn detail_field<'a>(event: &'a Value, key: &str) -> Option<&'a Value> {
    event.get("detail").and_then(|detail| detail.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_events_say_what_and_why() {
        let allowed = ConnectEvent {
            conn: 3,
            host: "api.github.com".into(),
            port: Some(443),
            verdict: Verdict::Allowed {
                rule: "api.github.com".into(),
                origin: "user policy.toml:4".into(),
                upstream: Some("140.82.112.6:443".into()),
            },
        }
        .event("gh");
        let value = serde_json::to_value(&allowed).unwrap();
        assert_eq!(value["event"], "net_connect");
        assert_eq!(value["decision"], "allow");
        assert_eq!(value["rule"], "sandbox.network allow \"api.github.com\"");
        assert_eq!(value["detail"]["port"], 443);
        assert_eq!(value["detail"]["kind"], "connection");
        let lookup = ConnectEvent {
            conn: 4,
            host: "evil.example".into(),
            port: None,
            verdict: Verdict::Refused {
                reason: "not on the allow list".into(),
            },
        }
        .event("gh");
        let value = serde_json::to_value(&lookup).unwrap();
        assert_eq!(value["decision"], "deny");
        assert_eq!(value["detail"]["kind"], "lookup");
        assert!(value["detail"].get("port").is_none());
    }

    #[test]
    fn close_events_carry_bytes_and_duration() {
        let close = CloseEvent {
            conn: 3,
            host: "api.github.com".into(),
            port: 443,
            bytes_up: 517,
            bytes_down: 4096,
            duration: Duration::from_millis(12),
            error: None,
        }
        .event("gh");
        let value = serde_json::to_value(&close).unwrap();
        assert_eq!(value["event"], "net_close");
        assert_eq!(value["outcome"], "ok");
        assert_eq!(value["duration_ms"], 12.0);
        assert_eq!(detail_field(&value, "bytes_down").unwrap(), 4096);
    }
}
