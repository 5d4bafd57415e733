//! Which tool calls are in flight, per server, as the audit log itself records them: a call
//! enters with its `decision` (allow) or `elicitation` (allow) event and leaves with its
//! `outcome` event. A `net_connect` event staged while exactly one call of its server is in
//! flight gets that call's `request_id`, so the log shows which call tried to reach what.
//!
//! Kept in the audit log, not in the gate: the log sees every decision and outcome of both `run`
//! and `serve` in the order they are written, and a connection is attributed at the moment its
//! event is written, with no state shared across tasks.

use std::collections::HashMap;

use serde_json::Value;

use super::event::{Event, EventKind};

#[derive(Debug, Default)]
pub struct CallsInFlight {
    by_server: HashMap<String, Vec<Value>>,
}

impl CallsInFlight {
    /// Updates the calls in flight from `event`, or attributes a connection event.
    pub fn observe(&mut self, event: &mut Event) {
        let allowed = event.decision.as_deref() == Some("allow");
        match event.event {
            EventKind::Decision | EventKind::Elicitation if allowed => {
                if let Some(id) = &event.request_id {
                    self.by_server
                        .entry(event.server.clone())
                        .or_default()
                        .push(id.clone());
                }
            }
            EventKind::Outcome => {
                if let (Some(id), Some(calls)) =
                    (&event.request_id, self.by_server.get_mut(&event.server))
                    && let Some(at) = calls.iter().position(|call| call == id)
                {
                    calls.swap_remove(at);
                }
            }
            // Counts of refusals or connections over a budget span a minute: no one call's.
            EventKind::NetConnect
                if event.request_id.is_none()
                    && event
                        .detail
                        .as_ref()
                        .is_none_or(|detail| detail.get("unrecorded").is_none()) =>
            {
                if let Some([only]) = self.by_server.get(&event.server).map(Vec::as_slice) {
                    event.request_id = Some(only.clone());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: EventKind, server: &str, decision: Option<&str>, id: Option<Value>) -> Event {
        let mut event = Event::new(kind, server);
        event.decision = decision.map(String::from);
        event.request_id = id;
        event
    }

    fn connect(calls: &mut CallsInFlight, server: &str) -> Option<Value> {
        let mut net = event(EventKind::NetConnect, server, Some("allow"), None);
        calls.observe(&mut net);
        net.request_id
    }

    #[test]
    fn a_connection_gets_the_id_of_the_only_call_in_flight() {
        let mut calls = CallsInFlight::default();
        assert_eq!(connect(&mut calls, "gh"), None);
        calls.observe(&mut event(
            EventKind::Decision,
            "gh",
            Some("allow"),
            Some(json!(7)),
        ));
        assert_eq!(connect(&mut calls, "gh"), Some(json!(7)));
        assert_eq!(connect(&mut calls, "other"), None, "another server's call");
        calls.observe(&mut event(
            EventKind::Decision,
            "gh",
            Some("allow"),
            Some(json!("b")),
        ));
        assert_eq!(connect(&mut calls, "gh"), None, "two calls: ambiguous");
        calls.observe(&mut event(EventKind::Outcome, "gh", None, Some(json!(7))));
        assert_eq!(connect(&mut calls, "gh"), Some(json!("b")));
        calls.observe(&mut event(EventKind::Outcome, "gh", None, Some(json!("b"))));
        assert_eq!(connect(&mut calls, "gh"), None);
    }

    #[test]
    fn denied_and_held_calls_are_not_in_flight() {
        let mut calls = CallsInFlight::default();
        calls.observe(&mut event(
            EventKind::Decision,
            "gh",
            Some("deny"),
            Some(json!(1)),
        ));
        calls.observe(&mut event(
            EventKind::Decision,
            "gh",
            Some("ask"),
            Some(json!(2)),
        ));
        assert_eq!(connect(&mut calls, "gh"), None);
        calls.observe(&mut event(
            EventKind::Elicitation,
            "gh",
            Some("allow"),
            Some(json!(2)),
        ));
        assert_eq!(connect(&mut calls, "gh"), Some(json!(2)));
    }
}
