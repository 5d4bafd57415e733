//! What the gate remembers about requests in flight.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use serde_json::Value;

/// How many self-answered ids are remembered for dropping their cancellations.
const REMEMBERED_IDS: usize = 4096;

#[derive(Debug, Clone)]
pub(super) enum Tracked {
    /// A listing whose result the gate filters (tools, prompts, resource templates).
    Listing(crate::pins::Kind),
    ToolsCall {
        tool: String,
    },
    Other,
}

#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub id: Value,
    pub what: Tracked,
    pub started: Instant,
    pub deadline: Option<Instant>,
}

impl Pending {
    pub fn new(id: Value, what: Tracked, started: Instant, deadline: Option<Instant>) -> Self {
        Pending {
            id,
            what,
            started,
            deadline,
        }
    }
}

/// A call waiting for the host's answer to airlock's confirmation request.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub call: Value,
    pub id: Value,
    pub tool: String,
    pub started: Instant,
    pub deadline: Option<Instant>,
}

impl Held {
    pub fn new(
        call: Value,
        id: Value,
        tool: String,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Self {
        Held {
            call,
            id,
            tool,
            started,
            deadline,
        }
    }
}

/// A bounded set that forgets its oldest entries.
#[derive(Debug, Default)]
pub(super) struct RecentIds {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl RecentIds {
    pub fn insert(&mut self, key: String) {
        if self.set.insert(key.clone()) {
            self.order.push_back(key);
            if self.order.len() > REMEMBERED_IDS
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> bool {
        // The order queue keeps a stale entry; harmless, it only bounds memory.
        self.set.remove(key)
    }
}
