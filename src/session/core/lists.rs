//! List aggregation (gateway): `tools/list` from each server's gated cache, the other lists
//! fetched live from every server that offers them, all pages of each, named for the host and
//! served in airlock's own pages.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Aggregation, Core, Origin, era};
use crate::gateway::lifecycle::{Demand, Phase};
use crate::mcp::Field;
use crate::mcp::message::{code, error_response, notification, result_response};

/// Most items in one page of an aggregated list (hosts that ignore `nextCursor` still see all of
/// a normal setup).
pub const PAGE_SIZE: usize = 1000;
/// Extra time an aggregated list waits for a Ready server's pages.
const LIST_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
    /// Tasks (2025-11-25), each named for the server that made it ([`super::tasks`]).
    Tasks,
}

/// How much of one server's listing a host's list request reads, at most: a server answering
/// every page with more items and a next cursor would otherwise grow the gateway until the
/// aggregation's deadline. Past either bound the listing is cut there (and counts as partial).
const MAX_LISTING_ITEMS: usize = 10_000;
const MAX_LISTING_BYTES: usize = 16 * 1024 * 1024;
/// The same bounds for airlock's own listing of a server's tools.
pub(super) const LISTING_BOUNDS: (usize, usize) = (MAX_LISTING_ITEMS, MAX_LISTING_BYTES);

/// Templates of one server that route reads, at most, and their length at most (a server
/// cannot make every read scan a list without end); a server past either is taken to cover
/// every URI.
const MAX_ROUTED_TEMPLATES: usize = 1_000;
const MAX_ROUTED_TEMPLATE_BYTES: usize = 2 * 1024;

impl ListKind {
    pub fn from_method(method: &str) -> Option<ListKind> {
        Some(match method {
            "tools/list" => ListKind::Tools,
            "prompts/list" => ListKind::Prompts,
            "resources/list" => ListKind::Resources,
            "resources/templates/list" => ListKind::ResourceTemplates,
            "tasks/list" => ListKind::Tasks,
            _ => return None,
        })
    }

    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::ResourceTemplates => "resources/templates/list",
            ListKind::Tasks => "tasks/list",
        }
    }

    fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::ResourceTemplates => "resourceTemplates",
            ListKind::Tasks => "tasks",
        }
    }

    /// The kind of definition this list carries that pins cover.
    pub fn pinned(self) -> Option<crate::pins::Kind> {
        match self {
            ListKind::Tools => Some(crate::pins::Kind::Tool),
            ListKind::Prompts => Some(crate::pins::Kind::Prompt),
            ListKind::ResourceTemplates => Some(crate::pins::Kind::ResourceTemplate),
            ListKind::Resources | ListKind::Tasks => None,
        }
    }

    pub fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::ResourceTemplates => "resources",
            ListKind::Tasks => "tasks",
        }
    }
}

/// The `nextCursor` of a page, when it names a next page.
fn next_cursor(result: &Value) -> Option<Value> {
    crate::mcp::next_cursor(result).map(|cursor| Value::String(cursor.to_string()))
}

impl Core {
    pub(super) fn host_list(&mut self, kind: ListKind, message: Value, id: Value, now: Instant) {
        if kind == ListKind::Tools {
            self.host.listed_tools = true;
            // A definition approved since a server's tools were cached: list them again (the
            // host hears list_changed when they arrive).
            for index in 0..self.servers.len() {
                if self.servers[index].gate.pins_changed_outside() {
                    self.relist_tools(index, now);
                }
            }
        }
        if let Some(cursor) = message.at(&["params", "cursor"]).and_then(Value::as_str) {
            let stateless = era::stateless(&self.host);
            self.answer_page(kind, id, cursor, stateless);
            return;
        }
        let mut waiting = BTreeSet::new();
        for index in 0..self.servers.len() {
            let server = &self.servers[index];
            let cached = kind == ListKind::Tools && server.tools.is_some();
            if server.retiring
                || cached && server.life.phase() != Phase::Failed
                || server.has_capability(kind.capability()) == Some(false)
            {
                continue;
            }
            match self.servers[index].life.demand(now, false) {
                Demand::Ready | Demand::Wait => {
                    waiting.insert(index);
                }
                Demand::Start => {
                    waiting.insert(index);
                    self.start(index, now);
                }
                Demand::Unavailable(_) => {}
            }
        }
        self.next_aggregation += 1;
        let longest_start = waiting
            .iter()
            .map(|&i| self.servers[i].life.start_budget())
            .max()
            .unwrap_or_default();
        self.aggregations.push(Aggregation {
            id: self.next_aggregation,
            host_id: id,
            kind,
            waiting: waiting.clone(),
            stateless: era::stateless(&self.host),
            items: BTreeMap::new(),
            bytes: BTreeMap::new(),
            complete: BTreeSet::new(),
            deadline: now + longest_start + LIST_GRACE,
        });
        if kind != ListKind::Tools {
            for index in waiting {
                if self.servers[index].life.is_ready() {
                    self.request_list_page(index, kind, self.next_aggregation, None, now);
                }
            }
        }
        self.settle_aggregations(now);
    }

    pub(super) fn request_list_page(
        &mut self,
        index: usize,
        kind: ListKind,
        aggregation: u64,
        cursor: Option<Value>,
        now: Instant,
    ) {
        let params = match cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let origin = Origin::List { aggregation };
        self.internal_request(index, kind.method(), params, origin, now);
    }

    /// A page of a host list being aggregated.
    pub(super) fn list_page(
        &mut self,
        index: usize,
        aggregation: u64,
        error: Option<Value>,
        result: Value,
        now: Instant,
    ) {
        let Some(position) = self.aggregations.iter().position(|a| a.id == aggregation) else {
            return;
        };
        let kind = self.aggregations[position].kind;
        let mut result = result;
        if error.is_none() {
            if let Some(pinned) = kind.pinned() {
                let mut fx = crate::gate::Effects::default();
                self.servers[index]
                    .gate
                    .filter_listing(pinned, &mut result, &mut fx);
                self.apply_gate(index, fx, now);
            }
            let mut page = result
                .get(kind.key())
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            // Named now, for the process that listed them: were the server to die and start
            // again before the other servers answer, its next start could make tasks of the
            // same ids, and these are not those.
            if kind == ListKind::Tasks {
                for task in &mut page {
                    super::tasks::name_listed(task, self.task_maker(index));
                }
            }
            let listing = &mut self.aggregations[position];
            let bytes = listing.bytes.entry(index).or_default();
            let page_bytes: usize = page.iter().map(crate::mcp::encoded_len).sum();
            *bytes = bytes.saturating_add(page_bytes);
            let items = listing.items.entry(index).or_default();
            let room = MAX_LISTING_ITEMS.saturating_sub(items.len());
            let within = *bytes <= MAX_LISTING_BYTES && page.len() <= room;
            if *bytes <= MAX_LISTING_BYTES {
                items.extend(page.into_iter().take(room));
            }
            match next_cursor(&result) {
                Some(cursor) if within => {
                    self.request_list_page(index, kind, aggregation, Some(cursor), now);
                    return;
                }
                None if within => {
                    listing.complete.insert(index);
                }
                // Cut: what was read is shown, and counts as a listing that did not arrive
                // whole (its claims are added to the server's, none given up).
                _ => tracing::warn!(
                    server = %self.servers[index].name,
                    "{} cut after {} items: a server's listing is read up to {MAX_LISTING_ITEMS} items and {} MiB",
                    kind.method(),
                    items.len(),
                    MAX_LISTING_BYTES >> 20
                ),
            }
        }
        self.aggregations[position].waiting.remove(&index);
        self.settle_aggregations(now);
    }

    /// A page of airlock's own `tools/list` of a server.
    pub(super) fn tools_page(
        &mut self,
        index: usize,
        error: Option<Value>,
        mut result: Value,
        now: Instant,
    ) {
        let error = error.or_else(|| self.servers[index].listing_past_bounds(&result));
        if let Some(error) = error {
            let text = error
                .field("message")
                .and_then(Value::as_str)
                .unwrap_or("error");
            tracing::warn!(server = %self.servers[index].name, "tools/list failed: {text}");
            self.servers[index].life.last_error = Some(format!("tools/list failed: {text}"));
            let mut fx = crate::gate::Effects::default();
            let why = format!("tools/list failed: {text}");
            self.servers[index]
                .gate
                .tools_listing_failed(&why, now, &mut fx);
            self.apply_gate(index, fx, now);
            self.servers[index].listing = None;
            let previous = self.servers[index].tools.clone().unwrap_or_default();
            self.tools_listed(index, previous, now);
            return;
        }
        let mut fx = crate::gate::Effects::default();
        self.servers[index]
            .gate
            .filter_listing(crate::pins::Kind::Tool, &mut result, &mut fx);
        self.apply_gate(index, fx, now);
        let page = result
            .field("tools")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let listing = self.servers[index].listing.get_or_insert_with(Vec::new);
        listing.extend(page);
        match next_cursor(&result) {
            Some(cursor) => {
                let params = json!({"cursor": cursor});
                self.internal_request(index, "tools/list", params, Origin::ToolsList, now);
            }
            None => {
                let tools = self.servers[index].listing.take().unwrap_or_default();
                self.tools_listed(index, tools, now);
            }
        }
    }

    /// A complete (gated) tool list from the server: rename, cache, become Ready, tell the host
    /// if the tools it knows changed.
    pub(super) fn tools_listed(&mut self, index: usize, tools: Vec<Value>, now: Instant) {
        let name = self.servers[index].name.clone();
        let tools: Vec<Value> = tools
            .into_iter()
            .filter(|t| t.field("name").and_then(Value::as_str).is_some())
            .collect();
        let originals: Vec<&str> = tools
            .iter()
            .filter_map(|t| t.field("name").and_then(Value::as_str))
            .collect();
        let separator = self.separator().to_string();
        let (_, changed) = self.tools.set_server(index, &name, &separator, &originals);
        log_changed(&name, "tool", &changed);
        let previous = self.servers[index].tools.replace(tools.clone());
        let differs = previous.as_ref() != Some(&tools);
        if differs && previous.is_some() {
            self.list_changed(ListKind::Tools);
        }
        if self.servers[index].life.is_starting() {
            self.become_ready(index, now);
        }
        if std::mem::take(&mut self.servers[index].relist_after) {
            self.relist_tools(index, now);
        }
    }

    /// A call waits for a listing of its server's tools (none read yet, or the server said its
    /// list changed). A gateway reads them as it does at start (starting the server if it is
    /// not running); in `Single` airlock lists for the gate alone, the host sees nothing of it.
    pub(super) fn list_for_gate(&mut self, index: usize, now: Instant) {
        if self.single() {
            if !self.host_has_an_era() {
                // A handshake-era request before `initialize`: the server has no session to
                // list in, and a listing of airlock's own would open one in the handshake era
                // before the host chose (a server speaking both eras keeps to the first).
                let text = "tools/call before the session's handshake: send initialize first, or a 2026-07-28 request (its protocol version and client capabilities in params._meta)";
                let error = json!({"code": code::INVALID_REQUEST, "message": text});
                let mut fx = crate::gate::Effects::default();
                self.servers[index]
                    .gate
                    .tools_listing_refused(&error, |_| true, now, &mut fx);
                self.apply_gate(index, fx, now);
                return;
            }
            if self.servers[index].listing.is_none() {
                self.servers[index].start_listing();
                // The envelope airlock's own request carries (see `own_request`).
                self.servers[index].listed_in = era::stateless(&self.host)
                    .then(|| self.host.version.clone())
                    .flatten();
                let origin = Origin::GateList;
                self.internal_request_queued(index, "tools/list", json!({}), origin, now);
            }
            return;
        }
        match self.servers[index].life.demand(now, true) {
            Demand::Ready => self.relist_tools(index, now),
            // Its start lists the tools.
            Demand::Wait => {}
            Demand::Start => self.start(index, now),
            Demand::Unavailable(why) => {
                let mut fx = crate::gate::Effects::default();
                self.servers[index]
                    .gate
                    .tools_listing_failed(&why, now, &mut fx);
                self.apply_gate(index, fx, now);
            }
        }
    }

    /// A page of airlock's listing for the gate (`Single`): read by the gate, then dropped.
    pub(super) fn gate_list_page(
        &mut self,
        index: usize,
        error: Option<Value>,
        mut result: Value,
        now: Instant,
    ) {
        let mut fx = crate::gate::Effects::default();
        let error = error.or_else(|| self.servers[index].listing_past_bounds(&result));
        // The version the listing's envelope named when it was sent: the calls that name it too
        // get the server's refusal of it as their own answer.
        let listed_in = self.servers[index].listed_in.clone();
        let gate = &mut self.servers[index].gate;
        if let Some(error) = error {
            let code = error.field("code").and_then(Value::as_i64);
            if code == Some(code::UNSUPPORTED_PROTOCOL_VERSION) {
                let refused = error
                    .at(&["data", "requested"])
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or(listed_in);
                let theirs = |call: &Value| {
                    let named = crate::mcp::version::request_version(call.field("params"));
                    named.is_some() && named == refused.as_deref()
                };
                gate.tools_listing_refused(&error, theirs, now, &mut fx);
            } else {
                let text = error
                    .field("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                gate.tools_listing_failed(&format!("tools/list failed: {text}"), now, &mut fx);
            }
            self.servers[index].listing = None;
        } else {
            gate.filter_listing(crate::pins::Kind::Tool, &mut result, &mut fx);
            match next_cursor(&result) {
                Some(cursor) => {
                    let params = json!({"cursor": cursor});
                    self.internal_request(index, "tools/list", params, Origin::GateList, now);
                }
                None => self.servers[index].listing = None,
            }
        }
        self.apply_gate(index, fx, now);
    }

    /// Reads a server's tools again (a `list_changed` from it, or its pins changed), unless a
    /// listing is already under way or it is not running.
    pub(super) fn relist_tools(&mut self, index: usize, now: Instant) {
        let server = &mut self.servers[index];
        if server.listing.is_some() {
            server.relist_after = true;
        } else if server.life.is_ready() {
            server.start_listing();
            self.internal_request(index, "tools/list", json!({}), Origin::ToolsList, now);
        }
    }

    /// A definition of `kind` was approved while the host holds a listing without it: a gateway
    /// reads its tools again (and tells the host when they differ); otherwise the host is told
    /// its list changed, and lists again through the gate.
    pub(super) fn relist_after_approval(
        &mut self,
        index: usize,
        kind: crate::pins::Kind,
        now: Instant,
    ) {
        if kind == crate::pins::Kind::Tool && !self.single() {
            self.relist_tools(index, now);
        } else if (self.host.initialized || self.single())
            && let Some(notification) = crate::gate::list_changed_notification(kind)
        {
            self.send_host(notification);
        }
    }

    /// Tells the host that a list it may have cached changed (handshake era: the plain
    /// notification, once the host has seen the list).
    pub(super) fn list_changed(&mut self, kind: ListKind) {
        self.notify_listens(kind);
        // A stateless host hears only what it subscribed to, except through the HTTP face's
        // mux, which passes the plain notification to its handshake-era sessions only.
        if era::stateless(&self.host) && !self.trust_identity {
            return;
        }
        let listed = kind != ListKind::Tools || self.host.listed_tools;
        if listed && self.host.initialized {
            let method = format!("notifications/{}/list_changed", kind.capability());
            self.send_host(notification(&method, json!({})));
        }
    }

    /// Answers every aggregation nothing is waiting for (or whose time is up).
    pub(super) fn settle_aggregations(&mut self, now: Instant) {
        let (done, open): (Vec<Aggregation>, Vec<Aggregation>) =
            std::mem::take(&mut self.aggregations)
                .into_iter()
                .partition(|a| a.waiting.is_empty() || a.deadline <= now);
        self.aggregations = open;
        for aggregation in done {
            for index in &aggregation.waiting {
                tracing::warn!(
                    server = %self.servers[*index].name,
                    "{} answered without this server: it did not answer in time",
                    aggregation.kind.method()
                );
            }
            let items = self.collect(aggregation.kind, aggregation.items, &aggregation.complete);
            self.snapshot_generation += 1;
            self.snapshots
                .insert(aggregation.kind, (self.snapshot_generation, items));
            self.answer_page(
                aggregation.kind,
                aggregation.host_id,
                "",
                aggregation.stateless,
            );
        }
        if let Some((_, waiting, deadline)) = &self.pending_initialize
            && (waiting.is_empty() || *deadline <= now)
            && let Some((id, _, _)) = self.pending_initialize.take()
        {
            self.answer_initialize(id);
        }
    }

    /// The aggregated items of one list, in server order, named for the host.
    fn collect(
        &mut self,
        kind: ListKind,
        mut items: BTreeMap<usize, Vec<Value>>,
        complete: &BTreeSet<usize>,
    ) -> Vec<Value> {
        let separator = self.separator().to_string();
        let mut all = Vec::new();
        for index in 0..self.servers.len() {
            if self.servers[index].retiring {
                continue;
            }
            match kind {
                ListKind::Tools => {
                    if self.servers[index].life.phase() == Phase::Failed {
                        continue;
                    }
                    for tool in self.servers[index].tools.iter().flatten() {
                        let original = tool.field("name").and_then(Value::as_str).unwrap_or("");
                        let Some(name) = self.tools.name_of(index, original) else {
                            continue;
                        };
                        let mut tool = tool.clone();
                        tool["name"] = Value::String(name.to_string());
                        all.push(tool);
                    }
                }
                ListKind::Prompts => {
                    let prompts = items.remove(&index).unwrap_or_default();
                    let originals: Vec<&str> = prompts
                        .iter()
                        .map(|p| p.field("name").and_then(Value::as_str).unwrap_or(""))
                        .collect();
                    let name = self.servers[index].name.clone();
                    let (names, changed) = self
                        .prompts
                        .set_server(index, &name, &separator, &originals);
                    log_changed(&name, "prompt", &changed);
                    for (mut prompt, name) in prompts.into_iter().zip(names) {
                        prompt["name"] = Value::String(name);
                        all.push(prompt);
                    }
                }
                ListKind::Resources => {
                    let resources = items.remove(&index).unwrap_or_default();
                    // A listing that did not arrive whole (an error or the deadline part-way,
                    // past the bounds) is shown as it came, and adds to what the server
                    // claimed: a partial listing never gives up the rest of its URIs.
                    let uris = resources
                        .iter()
                        .filter_map(|resource| resource.field("uri").and_then(Value::as_str));
                    if complete.contains(&index) {
                        self.resources.relist(index, uris);
                    } else {
                        self.resources.add_listed(index, uris);
                    }
                    all.extend(resources);
                }
                ListKind::ResourceTemplates => {
                    let templates = items.remove(&index).unwrap_or_default();
                    if !complete.contains(&index) {
                        all.extend(templates);
                        continue;
                    }
                    self.templates.retain(|(_, _, owner)| *owner != index);
                    let uris: Vec<&str> = templates
                        .iter()
                        .filter_map(|t| t.field("uriTemplate").and_then(Value::as_str))
                        .collect();
                    let within = uris.len() <= MAX_ROUTED_TEMPLATES
                        && uris
                            .iter()
                            .all(|uri| uri.len() <= MAX_ROUTED_TEMPLATE_BYTES);
                    if within {
                        for uri in uris {
                            let prefix = uri.split('{').next().unwrap_or(uri).to_string();
                            self.templates.push((uri.to_string(), prefix, index));
                        }
                    } else {
                        // Past the bounds its templates are not noted one by one: it is taken to
                        // cover every URI, so no other server's template or link gets one of
                        // its URIs alone (they are refused as ambiguous instead).
                        self.templates.push((String::new(), String::new(), index));
                    }
                    all.extend(templates);
                }
                // Named as they came ([`Core::list_page`]).
                ListKind::Tasks => all.extend(items.remove(&index).unwrap_or_default()),
            }
        }
        all
    }

    /// One page of the last aggregated list. airlock's cursor is `<generation>.<offset>`; a
    /// cursor from an older list is refused (the host lists again from the start).
    /// `stateless`: the era of the host's request (the answer may come after others were handled).
    fn answer_page(&mut self, kind: ListKind, id: Value, cursor: &str, stateless: bool) {
        let Some((generation, items)) = self.snapshots.get(&kind) else {
            let answer = error_response(id, code::INVALID_PARAMS, "invalid cursor", None);
            self.send_host_in(answer, stateless);
            return;
        };
        let offset = if cursor.is_empty() {
            Some(0)
        } else {
            cursor
                .split_once('.')
                .filter(|(g, _)| g.parse::<u64>().ok() == Some(*generation))
                .and_then(|(_, o)| o.parse::<usize>().ok())
                .filter(|o| *o <= items.len())
        };
        let Some(offset) = offset else {
            let text = "invalid or stale cursor: list again without a cursor";
            let answer = error_response(id, code::INVALID_PARAMS, text, None);
            self.send_host_in(answer, stateless);
            return;
        };
        let end = (offset + PAGE_SIZE).min(items.len());
        let page = &items[offset..end];
        let page: Vec<Value> = if stateless && kind == ListKind::Tools {
            page.iter().filter_map(era::tool_for_stateless).collect()
        } else {
            page.to_vec()
        };
        let mut result = Map::new();
        result.insert(kind.key().into(), Value::Array(page));
        if end < items.len() {
            let next = format!("{generation}.{end}");
            result.insert("nextCursor".into(), Value::String(next));
        }
        if stateless {
            era::add_cache_hints(&mut result);
        }
        self.send_host_in(result_response(id, Value::Object(result)), stateless);
    }
}

fn log_changed(server: &str, what: &str, changed: &[(String, String)]) {
    for (original, name) in changed {
        tracing::info!(server = %server, "{what} {original:?} is named {name:?} (shortened or sanitised for hosts)");
    }
}
