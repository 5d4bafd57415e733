//! Handshakes. A gateway answers the host's `initialize` (or `server/discover`) itself and shakes
//! hands with each server on its own, passing on exactly the capabilities the host declared. In
//! `Single` the host's handshake passes through and the server is Ready as soon as it runs.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::lists::ListKind;
use super::{Core, INITIALIZE_WAIT, Origin, era};
use crate::gateway::lifecycle::{Demand, Phase, State};
use crate::mcp::Field;
use crate::mcp::message::{notification, result_response};
use crate::mcp::version::HANDSHAKE_VERSIONS;

/// The newest handshake-era version: what airlock offers servers and hosts that ask for another.
pub const LATEST_HANDSHAKE: &str = "2025-11-25";

impl Core {
    /// Starts every eager server (at session start). In `Single` the one server is eager.
    pub fn start_eager(&mut self, now: Instant) {
        for index in 0..self.servers.len() {
            let server = &mut self.servers[index];
            if server.life.eager
                && !server.retiring
                && server.life.demand(now, false) == Demand::Start
            {
                self.start(index, now);
            }
        }
    }

    /// The version airlock speaks with its servers: the host's, if a handshake-era version.
    pub(super) fn downstream_version(&self) -> &str {
        let version = self.host.handshake_version.as_deref();
        match version.or(self.host.version.as_deref()) {
            Some(v) if HANDSHAKE_VERSIONS.contains(&v) => v,
            _ => LATEST_HANDSHAKE,
        }
    }

    /// What the gateway offers the host: what its servers offer (tools always). A server that
    /// has not run yet (lazy) may offer anything, so its possible capabilities are offered too
    /// (a list no server fills is simply empty; a request no server takes gets the server-like
    /// error), rather than hiding features a host checks for before it asks.
    pub(super) fn capabilities(&self) -> Value {
        let mut caps = json!({"tools": {"listChanged": true}});
        let unknown = self
            .servers
            .iter()
            .any(|s| !s.retiring && s.capabilities.is_none() && s.life.phase() != Phase::Failed);
        if unknown {
            caps["prompts"] = json!({"listChanged": true});
            caps["resources"] = json!({"listChanged": true, "subscribe": true});
            caps["completions"] = json!({});
            caps["logging"] = json!({});
            // Tasks too, so that `start = "lazy"` and "eager" offer the host the same thing:
            // a server that turns out not to offer them runs a task-augmented call as a plain
            // one (receivers without the capability ignore the augmentation), and `tasks/list`
            // is empty.
            caps["tasks"] = optimistic_tasks();
        }
        let known = self
            .servers
            .iter()
            .filter(|s| !s.retiring)
            .filter_map(|s| s.capabilities.as_ref());
        for server_caps in known {
            if let Some(resources) = server_caps.field("resources") {
                let subscribe = resources.field("subscribe").and_then(Value::as_bool) == Some(true)
                    || caps
                        .at(&["resources", "subscribe"])
                        .and_then(Value::as_bool)
                        == Some(true);
                caps["resources"] = json!({"listChanged": true, "subscribe": subscribe});
            }
            if server_caps.field("prompts").is_some() {
                caps["prompts"] = json!({"listChanged": true});
            }
            for plain in ["completions", "logging"] {
                if server_caps.get(plain).is_some() {
                    caps[plain] = json!({});
                }
            }
            // Tasks (2025-11-25): offered when a server offers them, what each offers merged
            // (one server's `list` never takes away another's task-augmented calls); their
            // requests are the server's own (routed like any other).
            if let Some(tasks) = server_caps.field("tasks") {
                merge_into(&mut caps["tasks"], tasks);
            }
            if let Some(extensions) = server_caps.field("extensions").and_then(Value::as_object) {
                let merged = caps
                    .as_object_mut()
                    .and_then(|c| {
                        c.entry("extensions")
                            .or_insert_with(|| json!({}))
                            .as_object_mut()
                    })
                    .map(|m| m as &mut Map<String, Value>);
                if let Some(merged) = merged {
                    for (key, value) in extensions {
                        merged.entry(key.clone()).or_insert_with(|| value.clone());
                    }
                }
            }
        }
        caps
    }

    pub(super) fn host_initialize(&mut self, id: Value, now: Instant) {
        let waiting: BTreeSet<usize> = (0..self.servers.len())
            .filter(|&i| self.servers[i].life.eager && self.servers[i].life.is_starting())
            .collect();
        if waiting.is_empty() {
            self.answer_initialize(id);
        } else {
            self.pending_initialize = Some((id, waiting, now + INITIALIZE_WAIT));
        }
    }

    pub(super) fn answer_initialize(&mut self, id: Value) {
        let version = self.downstream_version().to_string();
        let mut capabilities = self.capabilities();
        // Tasks are offered only in the version that has them (2025-11-25). Behind the HTTP
        // face this answer is the mux's, which offers each session what its own version has.
        if !self.trust_identity
            && !crate::mcp::version::has_tasks(&version)
            && let Some(capabilities) = capabilities.as_object_mut()
        {
            capabilities.remove("tasks");
        }
        let result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": era::server_info(),
            "instructions": self.instructions(),
        });
        self.host.initialized = true;
        // An `initialize` is answered in the handshake era, whatever request came since.
        self.send_host_in(result_response(id, result), false);
    }

    fn instructions(&self) -> String {
        let names: Vec<&str> = self
            .servers
            .iter()
            .filter(|s| !s.retiring)
            .map(|s| s.name.as_str())
            .collect();
        let separator = self.separator();
        format!(
            "airlock gateway for MCP servers {}; their tools are named <server>{separator}<tool>.",
            names.join(", ")
        )
    }

    /// `server/discover` (2026-07-28): the versions airlock serves, the aggregated capabilities,
    /// and airlock's identity where the era puts it.
    pub(super) fn answer_discover(&mut self, id: Value) {
        let mut result = Map::new();
        result.insert("supportedVersions".into(), json!(era::supported_versions()));
        // 2026-07-28 has no `tasks` capability (tasks are an extension there, with methods of
        // their own), so its hosts are not offered the 2025-11-25 one.
        let mut capabilities = self.capabilities();
        if let Some(capabilities) = capabilities.as_object_mut() {
            capabilities.remove("tasks");
        }
        result.insert("capabilities".into(), capabilities);
        result.insert("instructions".into(), Value::String(self.instructions()));
        result.insert(
            "_meta".into(),
            json!({ era::META_SERVER_INFO: era::server_info() }),
        );
        era::add_cache_hints(&mut result);
        self.reply(id, Value::Object(result));
    }

    /// The server of `generation` was spawned: `Single` is Ready at once; a gateway shakes
    /// hands (at once if the host has spoken).
    pub fn on_spawned(&mut self, index: usize, generation: u64, now: Instant) {
        let Some(server) = self.servers.get_mut(index) else {
            return;
        };
        if server.life.generation != generation || !server.life.is_starting() {
            return;
        }
        server.alive = true;
        // The install step (if any) is behind it: the handshake, and every later start, get
        // the declared startup_timeout alone.
        server.life.install_allowance = Duration::ZERO;
        if self.single() {
            self.become_ready(index, now);
            return;
        }
        // An eager server before the host connects waits for the host's capabilities, since a
        // server learns the client's capabilities only in `initialize`.
        if self.host.known {
            self.send_initialize(index, now);
        }
    }

    pub(super) fn send_initialize(&mut self, index: usize, now: Instant) {
        let server = &mut self.servers[index];
        server.handshake_sent = true;
        // The startup timeout covers the handshake, not the wait for the host.
        server.life.state = State::Starting {
            deadline: now + server.life.startup_timeout,
        };
        let client_info = self
            .host
            .client_info
            .clone()
            .unwrap_or_else(era::server_info);
        // The host's tasks (run for servers' own requests) are not offered on: one server could
        // read another's through them (see `tasks`).
        let mut capabilities = self.host.capabilities.clone();
        if let Some(capabilities) = capabilities.as_object_mut() {
            capabilities.remove("tasks");
        }
        let params = json!({
            "protocolVersion": self.downstream_version(),
            "capabilities": capabilities,
            "clientInfo": client_info,
        });
        self.internal_request(index, "initialize", params, Origin::Initialize, now);
    }

    /// The server's answer to airlock's `initialize`.
    pub(super) fn server_initialized(
        &mut self,
        index: usize,
        error: Option<Value>,
        result: Value,
        now: Instant,
    ) {
        if !self.servers[index].life.is_starting() {
            return;
        }
        if let Some(error) = error {
            let text = error
                .field("message")
                .and_then(Value::as_str)
                .unwrap_or("error");
            let reason = format!("initialize failed: {text}");
            self.server_failed(index, reason, false, true, now);
            return;
        }
        let server = &mut self.servers[index];
        server.capabilities = Some(result.field("capabilities").cloned().unwrap_or(json!({})));
        server.server_info = result.field("serverInfo").cloned();
        let tools = server.has_capability("tools") == Some(true);
        let logging = server.has_capability("logging") == Some(true);
        let initialized = notification("notifications/initialized", json!({}));
        self.send_raw(index, initialized, now);
        if logging && let Some(level) = self.host.log_level.clone() {
            let params = json!({"level": level});
            self.internal_request(index, "logging/setLevel", params, Origin::Ignore, now);
        }
        if tools {
            self.servers[index].start_listing();
            self.internal_request(index, "tools/list", json!({}), Origin::ToolsList, now);
        } else {
            self.tools_listed(index, Vec::new(), now);
        }
    }

    pub(super) fn become_ready(&mut self, index: usize, now: Instant) {
        self.servers[index].life.ready(now);
        let server = &self.servers[index];
        match &server.tools {
            Some(tools) => {
                tracing::info!(server = %server.name, "ready with {} tools", tools.len())
            }
            // `Single` at spawn: the host's own handshake passes through; nothing is listed yet.
            None => tracing::info!(server = %server.name, "started"),
        }
        let queued = std::mem::take(&mut self.servers[index].queue);
        for message in queued {
            self.send_raw(index, message, now);
        }
        if self.single() {
            self.close_server_input();
            return;
        }
        let mut pages = Vec::new();
        for aggregation in &mut self.aggregations {
            if aggregation.waiting.contains(&index) {
                if aggregation.kind == ListKind::Tools {
                    aggregation.waiting.remove(&index);
                } else if self.servers[index].has_capability(aggregation.kind.capability())
                    == Some(true)
                {
                    pages.push((aggregation.kind, aggregation.id));
                } else {
                    aggregation.waiting.remove(&index);
                }
            }
        }
        for (kind, aggregation) in pages {
            self.request_list_page(index, kind, aggregation, None, now);
        }
        if let Some((_, waiting, _)) = &mut self.pending_initialize {
            waiting.remove(&index);
        }
        self.settle_aggregations(now);
    }
}

/// The `tasks` capability offered while a server's own is unknown: what a task-capable server
/// offers (listing, cancelling, task-augmented `tools/call`).
fn optimistic_tasks() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Merges `from` into `into`, objects member by member (an object is kept over a non-object).
fn merge_into(into: &mut Value, from: &Value) {
    match (into.as_object_mut(), from.as_object()) {
        (Some(into), Some(from)) => {
            for (key, value) in from {
                merge_into(into.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (Some(_), None) => {}
        (None, _) => *into = from.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_each_server_offers_of_tasks_is_merged() {
        let mut offered = Value::Null;
        merge_into(
            &mut offered,
            &json!({"cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
        merge_into(&mut offered, &json!({"list": {}, "requests": true}));
        assert_eq!(
            offered,
            json!({"cancel": {}, "requests": {"tools": {"call": {}}}, "list": {}})
        );
    }
}
