//! The pins of one server, as stored in `<state dir>/pins/<server>.json`, and the changes a
//! person makes to them (`airlock pins approve|reset`). Pure: the store reads and writes it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::definition::{Definition, Kind};

pub const RECORD_VERSION: u32 = 1;

/// Who approved the server, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub at: String,
    /// `first use` (trusted on first sight) or `airlock pins approve`.
    pub by: String,
}

/// A definition airlock trusts: what it looked like when it was pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub sha256: String,
    pub definition: Value,
    pub pinned_at: String,
    /// `first use` or `airlock pins approve`.
    pub by: String,
}

/// Why a seen definition is not trusted yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Pinned before, and now different.
    Changed,
    /// Not pinned: new since the server's first listing, or the server is not approved yet.
    New,
}

/// A definition seen but not trusted: waits for `airlock pins approve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub sha256: String,
    pub definition: Value,
    pub seen_at: String,
    pub change: Change,
}

/// Everything airlock remembers about one server's definitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPins {
    pub version: u32,
    pub server: String,
    /// `None`: never approved on this machine (quarantined when the policy says so).
    pub approved: Option<Approval>,
    #[serde(default)]
    pub pinned: BTreeMap<Kind, BTreeMap<String, Pin>>,
    #[serde(default)]
    pub pending: BTreeMap<Kind, BTreeMap<String, Pending>>,
    /// Kinds of which a complete listing has been seen: from then on a definition that is not
    /// pinned is new, not first use.
    #[serde(default)]
    pub listed: BTreeSet<Kind>,
    /// Definitions forgotten by `airlock pins reset SERVER NAME`: pinned again on next sight.
    #[serde(default)]
    pub repin: BTreeMap<Kind, BTreeSet<String>>,
}

impl ServerPins {
    pub fn new(server: &str, approved: Option<Approval>) -> ServerPins {
        ServerPins {
            version: RECORD_VERSION,
            server: server.to_string(),
            approved,
            pinned: BTreeMap::new(),
            pending: BTreeMap::new(),
            listed: BTreeSet::new(),
            repin: BTreeMap::new(),
        }
    }

    pub fn pin(&self, kind: Kind, name: &str) -> Option<&Pin> {
        self.pinned.get(&kind)?.get(name)
    }

    pub fn pending_for(&self, kind: Kind, name: &str) -> Option<&Pending> {
        self.pending.get(&kind)?.get(name)
    }

    pub fn pending_count(&self) -> usize {
        self.pending.values().map(BTreeMap::len).sum()
    }

    pub fn pinned_count(&self) -> usize {
        self.pinned.values().map(BTreeMap::len).sum()
    }

    pub(crate) fn set_pin(&mut self, definition: &Definition, now: &str, by: &str) {
        self.pinned.entry(definition.kind).or_default().insert(
            definition.name.clone(),
            Pin {
                sha256: definition.sha256.clone(),
                definition: definition.canonical.clone(),
                pinned_at: now.to_string(),
                by: by.to_string(),
            },
        );
        self.clear_pending(definition.kind, &definition.name);
    }

    pub(crate) fn clear_pending(&mut self, kind: Kind, name: &str) {
        if let Some(pending) = self.pending.get_mut(&kind) {
            pending.remove(name);
            if pending.is_empty() {
                self.pending.remove(&kind);
            }
        }
    }

    /// Records `definition` as waiting for approval. Returns false when exactly this was already
    /// waiting (nothing to write, nothing new to report).
    pub(crate) fn set_pending(
        &mut self,
        definition: &Definition,
        change: Change,
        now: &str,
    ) -> bool {
        let slot = self.pending.entry(definition.kind).or_default();
        if slot
            .get(&definition.name)
            .is_some_and(|have| have.sha256 == definition.sha256 && have.change == change)
        {
            return false;
        }
        slot.insert(
            definition.name.clone(),
            Pending {
                sha256: definition.sha256.clone(),
                definition: definition.canonical.clone(),
                seen_at: now.to_string(),
                change,
            },
        );
        true
    }

    /// `airlock pins approve SERVER [NAME]`: the server is approved, and what waits (all of it,
    /// or the definitions called `name` of any kind) becomes pinned. Returns what was approved.
    pub fn approve(&mut self, name: Option<&str>, now: &str) -> Vec<(Kind, String)> {
        if self.approved.is_none() {
            self.approved = Some(Approval {
                at: now.to_string(),
                by: "airlock pins approve".to_string(),
            });
        }
        let mut approved = Vec::new();
        for (kind, pending) in std::mem::take(&mut self.pending) {
            for (pending_name, waiting) in pending {
                if name.is_some_and(|wanted| wanted != pending_name) {
                    self.pending
                        .entry(kind)
                        .or_default()
                        .insert(pending_name, waiting);
                    continue;
                }
                self.pinned.entry(kind).or_default().insert(
                    pending_name.clone(),
                    Pin {
                        sha256: waiting.sha256,
                        definition: waiting.definition,
                        pinned_at: now.to_string(),
                        by: "airlock pins approve".to_string(),
                    },
                );
                approved.push((kind, pending_name));
            }
        }
        approved
    }

    /// `airlock pins reset SERVER NAME`: forgets the definitions called `name` (pinned and
    /// waiting); they are pinned afresh the next time they are seen. Returns what was forgotten.
    pub fn reset(&mut self, name: &str) -> Vec<Kind> {
        let mut forgotten = Vec::new();
        for kind in Kind::ALL {
            let pinned = self
                .pinned
                .get_mut(&kind)
                .is_some_and(|pins| pins.remove(name).is_some());
            let waiting = self.pending_for(kind, name).is_some();
            self.clear_pending(kind, name);
            if pinned || waiting {
                self.repin.entry(kind).or_default().insert(name.to_string());
                forgotten.push(kind);
            }
        }
        self.pinned.retain(|_, pins| !pins.is_empty());
        forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition(name: &str, description: &str) -> Definition {
        Definition::from_listed(
            Kind::Tool,
            &json!({"name": name, "description": description}),
        )
        .unwrap()
    }

    #[test]
    fn approve_moves_waiting_definitions_to_pins_one_or_all() {
        let mut record = ServerPins::new("fx", None);
        assert!(record.set_pending(&definition("a", "new a"), Change::Changed, "t1"));
        assert!(!record.set_pending(&definition("a", "new a"), Change::Changed, "t2"));
        record.set_pending(&definition("b", "b"), Change::New, "t1");
        assert_eq!(
            record.approve(Some("a"), "t3"),
            vec![(Kind::Tool, "a".to_string())]
        );
        assert_eq!(record.approved.as_ref().unwrap().by, "airlock pins approve");
        assert_eq!(
            record.pin(Kind::Tool, "a").unwrap().sha256,
            definition("a", "new a").sha256
        );
        assert!(record.pending_for(Kind::Tool, "b").is_some());
        assert_eq!(record.approve(None, "t4").len(), 1);
        assert_eq!(record.pending_count(), 0);
        assert!(record.pending.is_empty());
    }

    #[test]
    fn reset_forgets_a_definition_and_marks_it_for_pinning_on_next_sight() {
        let mut record = ServerPins::new("fx", None);
        record.set_pin(&definition("a", "a"), "t1", "first use");
        record.set_pending(&definition("a", "a2"), Change::Changed, "t2");
        assert_eq!(record.reset("a"), vec![Kind::Tool]);
        assert!(record.pin(Kind::Tool, "a").is_none() && record.pending_count() == 0);
        assert!(record.repin[&Kind::Tool].contains("a"));
        assert!(record.reset("nothing").is_empty());
    }

    #[test]
    fn the_record_round_trips_through_json() {
        let mut record = ServerPins::new("fx", None);
        record.set_pin(&definition("a", "a"), "t1", "first use");
        record.listed.insert(Kind::Tool);
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains("\"tool\":{\"a\""), "{text}");
        assert_eq!(serde_json::from_str::<ServerPins>(&text).unwrap(), record);
    }
}
