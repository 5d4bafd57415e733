//! The pure pin decisions: given a server's pins (or none yet), the policy, and what the server
//! lists or what the host asks to use, what is shown, what is hidden, what is pinned on first
//! use and what waits for approval. No I/O: the store and the gate do that around these.

use std::collections::BTreeMap;

use super::definition::{Definition, Kind};
use super::record::{APPROVED_BY, Approval, Change, ServerPins};
use crate::policy::{NewServers, PinningMode};

/// The policy's `[pins]` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub pinning: PinningMode,
    pub new_servers: NewServers,
}

impl Settings {
    /// The policy's `[pins]` section.
    pub fn from_policy(pins: &crate::policy::PinsPolicy) -> Settings {
        Settings {
            pinning: pins.pinning.value,
            new_servers: pins.new_servers.value,
        }
    }

    /// True when airlock keeps no pins and lets every server in: nothing to read or write.
    pub fn is_inactive(self) -> bool {
        self.pinning == PinningMode::Off && self.new_servers == NewServers::Trust
    }
}

/// Why a definition is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Its definition differs from the one pinned at `pinned_at`.
    Changed { pinned_at: String },
    /// Not pinned, and seen after the server's first complete listing.
    New,
    /// The server was never approved on this machine, and the policy quarantines such servers.
    Quarantined,
    /// Never listed by the server, so there is nothing to compare with its pin.
    Unlisted,
    /// The server's pins cannot be read (the text says why and how to fix it): nothing is trusted.
    Unreadable(String),
    /// Past what one server's pins may hold ([`MAX_DEFINITIONS_PER_KIND`],
    /// [`MAX_DEFINITION_BYTES`]): not recorded, so never trusted.
    OverLimit,
    /// Listed more than once in one page: a host may show or call any of the copies, so none
    /// is compared with the pin, recorded, or trusted.
    ListedTwice,
}

/// The most definitions of one kind a server's pins record (pinned and waiting together), and
/// the largest definition they record. Both come from the server: a server that answers every
/// page with new definitions and a next cursor would otherwise grow its pin file (rewritten
/// whole at each page) until the disk is full. So one kind takes at most 32 MiB; a real server
/// lists tens of tools of a few KiB each.
pub const MAX_DEFINITIONS_PER_KIND: usize = 500;
pub const MAX_DEFINITION_BYTES: usize = 64 * 1024;

/// What to do with one definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Show,
    /// `pinning = "warn"`: shown and usable, with a warning.
    Warn(Reason),
    Hide(Reason),
}

impl Verdict {
    pub fn is_hidden(&self) -> bool {
        matches!(self, Verdict::Hide(_))
    }
}

/// Something worth a line in the audit log and on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinEvent {
    pub kind: Kind,
    pub name: String,
    pub what: PinEventKind,
    pub sha256: String,
    /// The pinned hash it differs from (`Changed`).
    pub pinned_sha256: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinEventKind {
    /// Pinned on first use.
    Pinned,
    /// Newly waiting for approval, and hidden (`enforce`) or only warned about (`warn`).
    Changed {
        hidden: bool,
    },
    New {
        hidden: bool,
    },
    /// Waiting, because the server is quarantined.
    Quarantined,
}

/// The result of looking at one listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The record to store (`None` when pins are inactive and nothing is kept).
    pub record: Option<ServerPins>,
    /// Whether `record` differs from what was read (so the store must write it).
    pub changed: bool,
    /// Per listed name: show, warn or hide.
    pub verdicts: BTreeMap<String, Verdict>,
    pub events: Vec<PinEvent>,
}

fn quarantined(record: Option<&ServerPins>, settings: Settings) -> bool {
    settings.new_servers == NewServers::Quarantine && record.is_none_or(|r| r.approved.is_none())
}

/// Hidden under `enforce`, warned about under `warn`.
fn untrusted(settings: Settings, reason: Reason) -> Verdict {
    match settings.pinning {
        PinningMode::Enforce => Verdict::Hide(reason),
        _ => Verdict::Warn(reason),
    }
}

/// Looks at one page of a listing of `kind` (`complete`: it is the last page). Definitions seen
/// for the first time are pinned (unless the server is quarantined); changed and new ones wait
/// for approval and are hidden (`enforce`) or warned about (`warn`).
pub fn observe_listing(
    existing: Option<&ServerPins>,
    server: &str,
    kind: Kind,
    listed: &[Definition],
    complete: bool,
    settings: Settings,
    now: &str,
) -> Observation {
    let mut verdicts = BTreeMap::new();
    if settings.is_inactive() {
        for definition in listed {
            verdicts.insert(definition.name.clone(), Verdict::Show);
        }
        return Observation {
            record: existing.cloned(),
            changed: false,
            verdicts,
            events: Vec::new(),
        };
    }
    let mut record = existing
        .cloned()
        .unwrap_or_else(|| ServerPins::new(server, None));
    if record.approved.is_none() && settings.new_servers == NewServers::Trust {
        record.approved = Some(Approval {
            at: now.to_string(),
            by: "first use".to_string(),
        });
    }
    let quarantine = record.approved.is_none();
    let mut events = Vec::new();
    let twice = names_listed_twice(listed);
    for definition in listed {
        let verdict =
            if twice.contains(definition.name.as_str()) && settings.pinning != PinningMode::Off {
                untrusted(settings, Reason::ListedTwice)
            } else if settings.pinning == PinningMode::Off {
                let (kind, name, sha256) = (definition.kind, &definition.name, &definition.sha256);
                if quarantine && !record.approved_by_person(kind, name, sha256) {
                    Verdict::Hide(Reason::Quarantined)
                } else {
                    Verdict::Show
                }
            } else {
                judge(
                    &mut record,
                    definition,
                    quarantine,
                    settings,
                    now,
                    &mut events,
                )
            };
        verdicts.insert(definition.name.clone(), verdict);
    }
    if complete && settings.pinning != PinningMode::Off {
        record.listed.insert(kind);
    }
    let changed = existing != Some(&record);
    Observation {
        record: Some(record),
        changed,
        verdicts,
        events,
    }
}

/// One listed definition against the record (which it updates).
fn judge(
    record: &mut ServerPins,
    definition: &Definition,
    quarantine: bool,
    settings: Settings,
    now: &str,
    events: &mut Vec<PinEvent>,
) -> Verdict {
    let (kind, name) = (definition.kind, definition.name.as_str());
    let event = |what, pinned_sha256: Option<String>| PinEvent {
        kind,
        name: name.to_string(),
        what,
        sha256: definition.sha256.clone(),
        pinned_sha256,
    };
    let hidden = settings.pinning == PinningMode::Enforce || quarantine;
    match record.pin(kind, name).cloned() {
        Some(pin) if pin.sha256 == definition.sha256 => {
            // Back to what was pinned (a change that was reverted): nothing waits any more.
            record.clear_pending(kind, name);
            // A quarantined server exposes only what a person approved by name.
            if quarantine && pin.by != APPROVED_BY {
                Verdict::Hide(Reason::Quarantined)
            } else {
                Verdict::Show
            }
        }
        Some(_) | None if over_limit(record, definition) => untrusted(settings, Reason::OverLimit),
        Some(pin) => {
            if record.set_pending(definition, Change::Changed, now) {
                events.push(event(PinEventKind::Changed { hidden }, Some(pin.sha256)));
            }
            if quarantine {
                Verdict::Hide(Reason::Quarantined)
            } else {
                untrusted(
                    settings,
                    Reason::Changed {
                        pinned_at: pin.pinned_at,
                    },
                )
            }
        }
        None => {
            let forgotten = record.repin.get(&kind).is_some_and(|r| r.contains(name));
            let first_sight = !record.listed.contains(&kind) || forgotten;
            if first_sight && !quarantine {
                record.set_pin(definition, now, "first use");
                if let Some(repin) = record.repin.get_mut(&kind) {
                    repin.remove(name);
                }
                record.repin.retain(|_, names| !names.is_empty());
                events.push(event(PinEventKind::Pinned, None));
                return Verdict::Show;
            }
            if record.set_pending(definition, Change::New, now) {
                let what = if quarantine {
                    PinEventKind::Quarantined
                } else {
                    PinEventKind::New { hidden }
                };
                events.push(event(what, None));
            }
            if quarantine {
                Verdict::Hide(Reason::Quarantined)
            } else {
                untrusted(settings, Reason::New)
            }
        }
    }
}

/// The names `listed` holds more than once.
pub fn names_listed_twice(listed: &[Definition]) -> std::collections::BTreeSet<&str> {
    let mut once = std::collections::BTreeSet::new();
    listed
        .iter()
        .map(|definition| definition.name.as_str())
        .filter(|name| !once.insert(*name))
        .collect()
}

/// Whether recording `definition` (not pinned as it is) would take the server's pins past
/// their bounds: over the size bound whatever waits under its name (a waiting entry is replaced
/// by the next version), or a name more than the count allows.
fn over_limit(record: &ServerPins, definition: &Definition) -> bool {
    if definition.bytes > MAX_DEFINITION_BYTES {
        return true;
    }
    let (kind, name) = (definition.kind, definition.name.as_str());
    if record.pin(kind, name).is_some() || record.pending_for(kind, name).is_some() {
        return false;
    }
    let recorded = record.pinned.get(&kind).map_or(0, BTreeMap::len)
        + record.pending.get(&kind).map_or(0, BTreeMap::len);
    recorded >= MAX_DEFINITIONS_PER_KIND
}

/// May the host use (call, get, read) the definition `name` of `kind`? `seen` is the hash this
/// session last listed for it, if it listed it at all.
pub fn decide_use(
    record: Option<&ServerPins>,
    kind: Kind,
    name: &str,
    seen: Option<&str>,
    settings: Settings,
) -> Verdict {
    if settings.is_inactive() {
        return Verdict::Show;
    }
    if quarantined(record, settings) {
        return match record {
            Some(record) if person_approved_use(record, kind, name, seen) => Verdict::Show,
            _ => Verdict::Hide(Reason::Quarantined),
        };
    }
    if settings.pinning == PinningMode::Off {
        return Verdict::Show;
    }
    let pin = record.and_then(|r| r.pin(kind, name));
    let changed = |pinned_at: &str| {
        untrusted(
            settings,
            Reason::Changed {
                pinned_at: pinned_at.to_string(),
            },
        )
    };
    match (seen, pin) {
        (Some(seen), Some(pin)) if seen == pin.sha256 => Verdict::Show,
        (Some(_), Some(pin)) => changed(&pin.pinned_at),
        (Some(_), None) => untrusted(settings, Reason::New),
        // Not listed in this session: what the store knows (another session may have seen it
        // change).
        (None, Some(pin)) => match record.and_then(|r| r.pending_for(kind, name)) {
            Some(_) => changed(&pin.pinned_at),
            None => Verdict::Show,
        },
        (None, None) => {
            let first_use = record.is_none_or(|r| !r.listed.contains(&kind));
            if first_use {
                Verdict::Show
            } else if record.is_some_and(|r| r.pending_for(kind, name).is_some()) {
                untrusted(settings, Reason::New)
            } else {
                untrusted(settings, Reason::Unlisted)
            }
        }
    }
}

/// Whether a quarantined server may use `name`: a person approved it by name (`airlock pins
/// approve SERVER NAME`), and it is unchanged: as this session listed it, or, unlisted here, with
/// no change waiting.
fn person_approved_use(record: &ServerPins, kind: Kind, name: &str, seen: Option<&str>) -> bool {
    match (seen, record.pin(kind, name)) {
        (Some(seen), _) => record.approved_by_person(kind, name, seen),
        (None, Some(pin)) => pin.by == APPROVED_BY && record.pending_for(kind, name).is_none(),
        (None, None) => false,
    }
}

/// What the host is told when airlock refuses to use a definition, with the way out.
pub fn refusal_text(server: &str, kind: Kind, name: &str, reason: &Reason) -> String {
    let what = format!(
        "airlock refused {} \"{name}\" of server \"{server}\"",
        kind.noun()
    );
    let review = format!(
        "Review it with `airlock pins diff {server} {name}`, then approve it with `airlock pins approve {server} {name}` in a terminal (elsewhere, run the `--hash` line that diff prints)."
    );
    match reason {
        Reason::Changed { pinned_at } => format!(
            "{what}: its definition changed since it was pinned ({pinned_at}), so it is hidden until a person approves the change. {review}"
        ),
        Reason::New => format!(
            "{what}: it is new since the server's definitions were pinned, so it is hidden until a person approves it. {review}"
        ),
        Reason::Quarantined => format!(
            "{what}: server \"{server}\" has never been approved on this machine, and the policy quarantines new servers (pins.new_servers = \"quarantine\"). Review it with `airlock pins diff {server}`, then approve it with `airlock pins approve {server}`."
        ),
        Reason::Unlisted => format!(
            "{what}: the server has not listed it in this session, and it is not pinned, so its definition cannot be checked. List the server's {}s first; if it is new, `airlock pins diff {server} {name}` shows it.",
            kind.noun()
        ),
        Reason::Unreadable(why) => format!("{what}: {why}"),
        Reason::ListedTwice => format!(
            "{what}: the server lists it more than once, so airlock cannot tell which definition a host would show or use; none of them is trusted. A server lists each name once."
        ),
        Reason::OverLimit => format!(
            "{what}: the server lists more than {MAX_DEFINITIONS_PER_KIND} {}s, or this definition is over {} KiB, so airlock does not record it and it stays hidden (a server's pins are bounded).",
            kind.noun(),
            MAX_DEFINITION_BYTES / 1024
        ),
    }
}

/// Whether `uri` can be produced by the RFC 6570 `template` (every `{...}` expression matches
/// any run of characters; literal parts must match exactly). Used to refuse reads through a
/// hidden resource template.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut pattern = String::from("^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        pattern.push_str(&regex::escape(&rest[..open]));
        match rest[open..].find('}') {
            Some(close) => {
                pattern.push_str(".*");
                rest = &rest[open + close + 1..];
            }
            None => {
                rest = &rest[open..];
                break;
            }
        }
    }
    pattern.push_str(&regex::escape(rest));
    pattern.push('$');
    regex::Regex::new(&pattern).is_ok_and(|regex| regex.is_match(uri))
}

#[cfg(test)]
mod tests;
