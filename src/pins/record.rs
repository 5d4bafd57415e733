//! The pins of one server, as stored in `<state dir>/pins/<server>.json`, and the changes a
//! person makes to them (`airlock pins approve|reset`). Pure: the store reads and writes it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::definition::{Definition, Kind};

pub const RECORD_VERSION: u32 = 1;

/// Who pinned a definition or approved a server by hand (the other value is `first use`).
pub const APPROVED_BY: &str = "airlock pins approve";

/// What a person reviewed before approving: the hashes `airlock pins diff` showed (each a
/// definition's whole SHA-256, [`REVIEWED_HASH_DIGITS`] hex digits), or whatever waits now
/// (`--yes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review<'a> {
    Hashes(&'a [String]),
    Anything,
}

/// The hex digits of a hash `--hash` takes (what `airlock pins diff` prints): all of a SHA-256.
/// A prefix would not do: the server writes both definitions, and a pair sharing 48 bits of
/// hash (12 digits) is found in a minute on a laptop, so a person could approve one text and
/// get the other.
pub const REVIEWED_HASH_DIGITS: usize = 64;

impl Review<'_> {
    fn covers(&self, sha256: &str) -> bool {
        match self {
            Review::Anything => true,
            Review::Hashes(hashes) => hashes.iter().any(|hash| {
                hash.len() == REVIEWED_HASH_DIGITS && sha256 == hash.to_ascii_lowercase()
            }),
        }
    }
}

/// What an approval trusted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Approved {
    /// The server itself was approved (it was quarantined).
    pub server: bool,
    pub definitions: Vec<(Kind, String)>,
}

/// A waiting definition that is not what the person reviewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreviewed {
    pub kind: Kind,
    pub name: String,
    pub sha256: String,
}

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

    /// `airlock pins approve SERVER [NAME]`: what waits (all of it, or the definitions called
    /// `name` of any kind) becomes pinned, as long as each is what the person reviewed
    /// (`review`); otherwise nothing changes and the definitions that differ are returned.
    /// Without NAME the server itself is approved too (its quarantine lifted); with NAME only
    /// those definitions are trusted, and a quarantined server stays quarantined for the rest.
    pub fn approve(
        &mut self,
        name: Option<&str>,
        review: &Review<'_>,
        now: &str,
    ) -> Result<Approved, Vec<Unreviewed>> {
        let unreviewed: Vec<Unreviewed> = self
            .waiting(name)
            .filter(|(_, _, waiting)| !review.covers(&waiting.sha256))
            .map(|(kind, pending_name, waiting)| Unreviewed {
                kind,
                name: pending_name.to_string(),
                sha256: waiting.sha256.clone(),
            })
            .collect();
        if !unreviewed.is_empty() {
            return Err(unreviewed);
        }
        let server = name.is_none() && self.approved.is_none();
        if server {
            self.approved = Some(Approval {
                at: now.to_string(),
                by: APPROVED_BY.to_string(),
            });
        }
        let mut definitions = Vec::new();
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
                        by: APPROVED_BY.to_string(),
                    },
                );
                definitions.push((kind, pending_name));
            }
        }
        Ok(Approved {
            server,
            definitions,
        })
    }

    /// The definitions waiting for approval (those called `name`, or all).
    pub fn waiting<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> impl Iterator<Item = (Kind, &'a str, &'a Pending)> + 'a {
        self.pending.iter().flat_map(move |(kind, pending)| {
            pending
                .iter()
                .filter(move |(pending_name, _)| name.is_none_or(|wanted| wanted == *pending_name))
                .map(move |(pending_name, waiting)| (*kind, pending_name.as_str(), waiting))
        })
    }

    /// Whether `definition` is pinned, unchanged, by a person's approval: what a quarantined
    /// server may still expose.
    pub fn approved_by_person(&self, kind: Kind, name: &str, sha256: &str) -> bool {
        self.pin(kind, name)
            .is_some_and(|pin| pin.by == APPROVED_BY && pin.sha256 == sha256)
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
        let approved = record.approve(Some("a"), &Review::Anything, "t3").unwrap();
        assert_eq!(approved.definitions, vec![(Kind::Tool, "a".to_string())]);
        // NAME trusts that definition only, never the (quarantined) server.
        assert!(!approved.server && record.approved.is_none());
        assert_eq!(
            record.pin(Kind::Tool, "a").unwrap().sha256,
            definition("a", "new a").sha256
        );
        assert!(record.approved_by_person(Kind::Tool, "a", &definition("a", "new a").sha256));
        assert!(record.pending_for(Kind::Tool, "b").is_some());
        let all = record.approve(None, &Review::Anything, "t4").unwrap();
        assert!(all.server && all.definitions.len() == 1);
        assert_eq!(record.approved.as_ref().unwrap().by, "airlock pins approve");
        assert_eq!(record.pending_count(), 0);
        assert!(record.pending.is_empty());
    }

    #[test]
    fn approval_takes_only_what_was_reviewed() {
        let mut record = ServerPins::new("fx", None);
        let reviewed = definition("a", "v2");
        record.set_pending(&reviewed, Change::New, "t1");
        // Between the diff and the approval the server moved on to v3.
        let moved = definition("a", "v3");
        record.set_pending(&moved, Change::New, "t2");
        let shown = vec![reviewed.sha256.clone()];
        let before = record.clone();
        let refused = record.approve(Some("a"), &Review::Hashes(&shown), "t3");
        assert_eq!(
            refused,
            Err(vec![Unreviewed {
                kind: Kind::Tool,
                name: "a".into(),
                sha256: moved.sha256.clone()
            }])
        );
        assert_eq!(record, before, "a refused approval changes nothing");
        // A prefix reviews nothing (a server can make two texts share one); the whole hash, in
        // either case, does.
        for digits in [8, 12, 32, 63] {
            let prefix = vec![moved.sha256[..digits].to_string()];
            assert!(
                record
                    .approve(None, &Review::Hashes(&prefix), "t4")
                    .is_err()
            );
        }
        let current = vec![moved.sha256.to_ascii_uppercase()];
        let approved = record
            .approve(None, &Review::Hashes(&current), "t5")
            .unwrap();
        assert!(approved.server);
        assert_eq!(record.pin(Kind::Tool, "a").unwrap().sha256, moved.sha256);
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
