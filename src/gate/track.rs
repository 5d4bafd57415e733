//! What the gate remembers about requests in flight.

use std::collections::VecDeque;

use crate::fast_map::FastSet;
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
        /// Task-augmented (`params.task`): a failure is answered as a JSON-RPC error.
        task: bool,
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
    set: FastSet<String>,
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

/// Calls of a name not listed yet, waiting for a listing, in arrival order. A host may send
/// thousands of calls before the first listing returns, and every request the host sends asks
/// whether its id is one of them: so their id keys are kept in a set beside the queue.
#[derive(Debug, Default)]
pub(super) struct Awaiting {
    calls: VecDeque<Held>,
    keys: FastSet<String>,
}

impl Awaiting {
    pub fn push(&mut self, held: Held) {
        self.keys.insert(crate::mcp::message::id_key(&held.id));
        self.calls.push_back(held);
    }

    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    /// Takes the call of host id key `key` out (the host cancelled it).
    pub fn take(&mut self, key: &str) -> Option<Held> {
        if !self.keys.remove(key) {
            return None;
        }
        let position = self
            .calls
            .iter()
            .position(|held| crate::mcp::message::has_id_key(&held.id, key))?;
        self.calls.remove(position)
    }

    /// Takes every call out, in arrival order.
    pub fn take_all(&mut self) -> Vec<Held> {
        self.keys.clear();
        self.calls.drain(..).collect()
    }

    /// Takes out the calls whose deadline has passed.
    pub fn take_expired(&mut self, now: Instant) -> Vec<Held> {
        let mut expired = Vec::new();
        for held in std::mem::take(&mut self.calls) {
            if held.deadline.is_some_and(|deadline| deadline <= now) {
                self.keys.remove(&crate::mcp::message::id_key(&held.id));
                expired.push(held);
            } else {
                self.calls.push_back(held);
            }
        }
        expired
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.calls.iter().filter_map(|held| held.deadline).min()
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}
