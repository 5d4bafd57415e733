//! One server's pins during a session: the thin effectful shell the gate holds. It filters each
//! listing (tools, prompts, resource templates) through [`observe_listing`], keeps the store up
//! to date, remembers what this session listed, and answers whether the host may use a
//! definition through [`decide_use`], re-reading the store before it refuses (a person may have
//! approved since).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::decide::{
    MAX_DEFINITION_BYTES, MAX_DEFINITIONS_PER_KIND, PinEvent, PinEventKind, Reason, Settings,
    Verdict, decide_use, observe_listing, template_matches,
};
use super::definition::{Definition, Kind};
use super::record::ServerPins;
use super::store::{PinError, PinStore};
use crate::audit::{Event, EventKind};

/// What filtering one listing did.
#[derive(Debug, Default)]
pub struct Filtered {
    /// Definitions removed from the listing.
    pub hidden: usize,
    /// Audit events (`pin`) to record, one per new fact.
    pub events: Vec<Event>,
    /// Lines for stderr (warnings about changes, store errors).
    pub warnings: Vec<String>,
}

#[derive(Debug)]
pub struct PinGuard {
    server: String,
    settings: Settings,
    store: PinStore,
    record: Option<ServerPins>,
    /// Set when the store cannot be read: then nothing is trusted (fail closed).
    broken: Option<String>,
    /// What this session last listed: hash per definition.
    seen: BTreeMap<(Kind, String), String>,
    /// `uriTemplate` of each resource template this session listed, and whether it is hidden.
    templates: BTreeMap<String, (String, bool)>,
}

/// What [`PinGuard`] notes as the definition of a name listed twice: no hash of one.
const LISTED_TWICE: &str = "listed more than once";

impl PinGuard {
    /// The guard for `server`, with what the store knows of it.
    pub fn new(server: &str, settings: Settings, store: PinStore) -> PinGuard {
        let mut guard = PinGuard {
            server: server.to_string(),
            settings,
            store,
            record: None,
            broken: None,
            seen: BTreeMap::new(),
            templates: BTreeMap::new(),
        };
        if !settings.is_inactive() {
            guard.reload();
        }
        guard
    }

    fn reload(&mut self) {
        match self.store.load(&self.server) {
            Ok(record) => {
                self.record = record;
                self.broken = None;
            }
            Err(err) => self.broken = Some(err.to_string()),
        }
    }

    /// Re-reads the store; true when the server's pins changed outside this session (an
    /// approval or reset), so its listings should be read again.
    pub fn refresh(&mut self) -> bool {
        if self.settings.is_inactive() {
            return false;
        }
        let before = self.record.clone();
        self.reload();
        self.record != before
    }

    /// A reloaded policy's `[pins]` keys.
    pub fn set_settings(&mut self, settings: Settings) {
        self.settings = settings;
    }

    /// Filters one page of a listing result of `kind` in place (the last page when
    /// [`crate::mcp::next_cursor`] names none), hiding what is not trusted, and records what it
    /// saw.
    pub fn filter_listing(&mut self, kind: Kind, result: &mut Value, now: &str) -> Filtered {
        let mut filtered = Filtered::default();
        if self.settings.is_inactive() {
            return filtered;
        }
        let complete = crate::mcp::next_cursor(result).is_none();
        let (_, key) = kind.list_method();
        let Some(items) = result.get_mut(key).and_then(Value::as_array_mut) else {
            return filtered;
        };
        let definitions: Vec<Definition> = items
            .iter()
            .filter_map(|item| Definition::from_listed(kind, item))
            .collect();
        let twice = crate::pins::decide::names_listed_twice(&definitions);
        for definition in &definitions {
            // A name listed twice has no one definition: a use of it is never the pinned one.
            let sha256 = match twice.contains(definition.name.as_str()) {
                true => LISTED_TWICE.to_string(),
                false => definition.sha256.clone(),
            };
            self.seen.insert((kind, definition.name.clone()), sha256);
        }
        for name in &twice {
            filtered.warnings.push(format!(
                "server {:?} lists the {} {name:?} more than once: every copy is hidden",
                self.server,
                kind.noun()
            ));
        }
        let verdicts = self.observe(kind, &definitions, complete, now, &mut filtered);
        let mut hidden_count = 0;
        items.retain(|item| {
            let name = item.get("name").and_then(Value::as_str);
            // Unnamed items cannot be used; the host rejects them.
            let hidden =
                name.is_some_and(|name| verdicts.get(name).is_some_and(Verdict::is_hidden));
            if kind == Kind::ResourceTemplate
                && let (Some(name), Some(template)) =
                    (name, item.get("uriTemplate").and_then(Value::as_str))
            {
                self.templates
                    .insert(name.to_string(), (template.to_string(), hidden));
            }
            hidden_count += usize::from(hidden);
            !hidden
        });
        filtered.hidden = hidden_count;
        filtered
    }

    /// Runs the pure observation against the store (or, when the store fails, against what is
    /// in memory) and turns its events into audit events and warnings.
    fn observe(
        &mut self,
        kind: Kind,
        definitions: &[Definition],
        complete: bool,
        now: &str,
        filtered: &mut Filtered,
    ) -> BTreeMap<String, Verdict> {
        if let Some(why) = &self.broken {
            filtered.warnings.push(format!(
                "server {:?}: {why}; nothing it lists is trusted",
                self.server
            ));
            return definitions
                .iter()
                .map(|d| {
                    (
                        d.name.clone(),
                        Verdict::Hide(Reason::Unreadable(why.clone())),
                    )
                })
                .collect();
        }
        let (server, settings) = (self.server.clone(), self.settings);
        let result = self.store.update(&server, |stored| {
            let seen = observe_listing(
                stored.as_ref(),
                &server,
                kind,
                definitions,
                complete,
                settings,
                now,
            );
            (seen.record.clone(), seen)
        });
        let seen = match result {
            Ok(seen) => seen,
            Err(err) => {
                // Decide on what is in memory, so nothing changed slips through; say the store
                // could not keep it.
                filtered.warnings.push(format!(
                    "server {:?}: the pins could not be saved ({err}); enforced for this session only",
                    self.server
                ));
                if let PinError::Corrupt { .. } = err {
                    self.broken = Some(err.to_string());
                }
                observe_listing(
                    self.record.as_ref(),
                    &server,
                    kind,
                    definitions,
                    complete,
                    settings,
                    now,
                )
            }
        };
        self.record = seen.record;
        for event in &seen.events {
            let (audit, warning) = self.report(event, &seen.verdicts);
            filtered.events.push(audit);
            if let Some(warning) = warning {
                filtered.warnings.push(warning);
            }
        }
        let over_limit = seen
            .verdicts
            .values()
            .filter(|v| {
                matches!(
                    v,
                    Verdict::Hide(Reason::OverLimit) | Verdict::Warn(Reason::OverLimit)
                )
            })
            .count();
        if over_limit > 0 {
            // One line a page, not one a definition: this is what an endless listing produces.
            filtered.warnings.push(format!(
                "server {:?}: {over_limit} {}(s) of this listing not pinned: past {MAX_DEFINITIONS_PER_KIND} of a kind or over {} KiB each (never trusted)",
                self.server,
                kind.noun(),
                MAX_DEFINITION_BYTES / 1024
            ));
        }
        seen.verdicts
    }

    /// The audit event (and stderr line, for changes) for one pin event.
    fn report(
        &self,
        event: &PinEvent,
        verdicts: &BTreeMap<String, Verdict>,
    ) -> (Event, Option<String>) {
        let (what, hidden) = match event.what {
            PinEventKind::Pinned => ("pinned", false),
            PinEventKind::Changed { hidden } => ("changed", hidden),
            PinEventKind::New { hidden } => ("new", hidden),
            PinEventKind::Quarantined => ("quarantined", true),
        };
        let mut audit = Event::new(EventKind::Pin, &self.server);
        audit.tool = Some(event.name.clone());
        audit.detail = Some(json!({
            "kind": event.kind,
            "change": what,
            "hidden": hidden,
            "sha256": event.sha256,
            "pinned_sha256": event.pinned_sha256,
        }));
        let reason = match verdicts.get(&event.name) {
            Some(Verdict::Hide(reason) | Verdict::Warn(reason)) => Some(
                super::decide::refusal_text(&self.server, event.kind, &event.name, reason),
            ),
            _ => None,
        };
        audit.reason = reason.clone();
        let warning = reason.map(|text| {
            if hidden {
                format!("{text} (hidden from the host)")
            } else {
                format!("{text} (pins.pinning = \"warn\": still shown)")
            }
        });
        (audit, warning)
    }

    /// May the host use definition `name` of `kind`? A refusal is re-checked against the store
    /// first, so an approval made while the session runs takes effect at once.
    pub fn check_use(&mut self, kind: Kind, name: &str) -> Verdict {
        self.check_use_noting_approval(kind, name).0
    }

    /// [`PinGuard::check_use`], and whether the answer turned from hidden to usable on
    /// re-reading the store (approved since: the host's listing is stale).
    pub fn check_use_noting_approval(&mut self, kind: Kind, name: &str) -> (Verdict, bool) {
        if self.settings.is_inactive() {
            return (Verdict::Show, false);
        }
        let verdict = self.decide(kind, name);
        if !verdict.is_hidden() {
            return (verdict, false);
        }
        self.reload();
        let now = self.decide(kind, name);
        let approved = !now.is_hidden();
        (now, approved)
    }

    fn decide(&self, kind: Kind, name: &str) -> Verdict {
        if let Some(why) = &self.broken {
            return Verdict::Hide(Reason::Unreadable(why.clone()));
        }
        let seen = self.seen.get(&(kind, name.to_string())).map(String::as_str);
        decide_use(self.record.as_ref(), kind, name, seen, self.settings)
    }

    /// May the host read `uri`? Refused when it can only have come from resource templates that
    /// are hidden (a changed template could point the model at a different resource). The
    /// verdict names the template.
    pub fn check_read(&mut self, uri: &str) -> Option<(String, Verdict)> {
        let matching: Vec<(&String, &(String, bool))> = self
            .templates
            .iter()
            .filter(|(_, (template, _))| template_matches(template, uri))
            .collect();
        if matching.is_empty() || matching.iter().any(|(_, (_, hidden))| !hidden) {
            return None;
        }
        let name = matching[0].0.clone();
        let verdict = self.check_use(Kind::ResourceTemplate, &name);
        verdict.is_hidden().then_some((name, verdict))
    }

    pub fn server(&self) -> &str {
        &self.server
    }
}

#[cfg(test)]
mod tests;
