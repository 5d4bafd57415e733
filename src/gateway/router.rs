//! The gateway's core, pure: one host, many servers, every message routed. The async shell
//! ([`super::shell`]) feeds it inputs (host messages, server messages, spawn and exit reports, the
//! clock) and carries out the [`Action`]s it returns, in order.
//!
//! Each server keeps its own [`Gate`] (the same one `airlock run` uses): the router speaks to the
//! gate in that server's own id space, and everything the gate says back (answers, its own
//! confirmation requests, denials) comes up the same path as the server's own messages.
//!
//! Id spaces: a host request forwarded to a server gets a fresh integer id of that server
//! ("downstream id"); the answer is mapped back. A server→client request gets a host-facing string
//! id `airlock-gw-N`; the host's answer is mapped back to the server and its original id.
//! Progress tokens are rewritten to `airlock-p-N` downstream and restored on the way up.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::lifecycle::{Demand, Due, Lifecycle, Phase};
use super::names::{NameTable, split};
use crate::audit::{Event, Redactor};
use crate::gate::{Effects, Gate, GateConfig, Verdict};
use crate::mcp::message::{code, error_response, id_key, notification, request, result_response};
use crate::mcp::version::{self, HANDSHAKE_VERSIONS};
use crate::mcp::{Class, classify};
use crate::policy::{Action as PolicyAction, Call, Policy};

/// The newest handshake-era version: what airlock offers servers and hosts that ask for another.
pub const LATEST_HANDSHAKE: &str = "2025-11-25";
/// Most items in one page of an aggregated list (hosts that ignore `nextCursor` still see all of
/// a normal setup).
pub const PAGE_SIZE: usize = 1000;
/// How long the answer to the host's `initialize` waits for eager servers still starting.
pub const INITIALIZE_WAIT: Duration = Duration::from_secs(5);
/// Extra time an aggregated list waits for a Ready server's pages.
const LIST_GRACE: Duration = Duration::from_secs(10);
/// `_meta` key naming the server a server→client request comes from.
pub const META_SERVER: &str = "airlock/server";
/// Prefix of host-facing ids of server→client requests.
const INBOUND_PREFIX: &str = "airlock-gw-";
/// JSON-RPC: method not found.
const METHOD_NOT_FOUND: i64 = -32601;
/// MCP: resource not found.
const RESOURCE_NOT_FOUND: i64 = -32002;

/// One server as the router knows it.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub name: String,
    pub startup_timeout: Duration,
    pub tool_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub eager: bool,
    /// Known at load time never to start (a refused launch, an unsupported transport).
    pub refused: Option<String>,
}

/// What the shell must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    ToHost(Value),
    /// Write to that server if its running process is of this generation (else drop).
    ToServer {
        server: usize,
        generation: u64,
        message: Value,
    },
    Audit(Box<Event>),
    /// Spawn the server; report [`Router::on_spawned`] or [`Router::on_spawn_failed`].
    Start {
        server: usize,
        generation: u64,
    },
    /// Run the kill sequence; report [`Router::on_exited`] when it is gone.
    Stop {
        server: usize,
        generation: u64,
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
}

impl ListKind {
    fn from_method(method: &str) -> Option<ListKind> {
        Some(match method {
            "tools/list" => ListKind::Tools,
            "prompts/list" => ListKind::Prompts,
            "resources/list" => ListKind::Resources,
            "resources/templates/list" => ListKind::ResourceTemplates,
            _ => return None,
        })
    }

    fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::ResourceTemplates => "resources/templates/list",
        }
    }

    fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::ResourceTemplates => "resourceTemplates",
        }
    }

    fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::ResourceTemplates => "resources",
        }
    }
}

/// Who is waiting for a server's answer.
#[derive(Debug, Clone)]
enum Origin {
    Host {
        host_id: Value,
        /// The downstream progress token, to forget with the request.
        progress: Option<String>,
        is_call: bool,
    },
    Initialize,
    /// airlock's own `tools/list` (at start, or after `list_changed`).
    ToolsList,
    /// A page of a host list being aggregated.
    List {
        aggregation: u64,
    },
    /// An answer nobody needs (e.g. `logging/setLevel` replayed after a restart).
    Ignore,
}

struct Downstream {
    name: String,
    life: Lifecycle,
    gate: Gate,
    /// The process of the current generation is running (spawned, not yet gone).
    alive: bool,
    /// airlock's `initialize` went out for the current generation.
    handshake_sent: bool,
    next_id: u64,
    outbound: HashMap<String, Origin>,
    /// Downstream progress token key → the host's token.
    progress: HashMap<String, Value>,
    /// Host messages waiting for Ready, not yet gated (the gate sees a call when it is sent).
    queue: Vec<Value>,
    capabilities: Option<Value>,
    server_info: Option<Value>,
    /// Gate-filtered tools with their original names; kept while stopped (idle), so listing
    /// does not wake the server.
    tools: Option<Vec<Value>>,
    /// Pages of airlock's own `tools/list` in progress.
    listing: Option<Vec<Value>>,
    last_call: Option<SystemTime>,
    calls: u64,
}

impl Downstream {
    fn has_capability(&self, name: &str) -> Option<bool> {
        self.capabilities
            .as_ref()
            .map(|caps| caps.get(name).is_some())
    }

    fn busy(&self) -> bool {
        !self.outbound.is_empty() || !self.queue.is_empty() || self.gate.in_flight() > 0
    }
}

struct Aggregation {
    id: u64,
    host_id: Value,
    kind: ListKind,
    waiting: BTreeSet<usize>,
    items: BTreeMap<usize, Vec<Value>>,
    deadline: Instant,
}

/// What the router knows about the host.
#[derive(Debug, Default)]
struct HostState {
    /// The host spoke (an `initialize`, or any first request in the stateless era).
    known: bool,
    initialized: bool,
    capabilities: Value,
    client_info: Option<Value>,
    version: Option<String>,
    listed_tools: bool,
    log_level: Option<Value>,
}

/// One server's line of `airlock status`.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    pub name: String,
    pub state: Phase,
    pub tools: Option<usize>,
    pub last_error: Option<String>,
    pub restarts: u32,
    pub consecutive_failures: u32,
    pub calls: u64,
    pub last_call: Option<String>,
    pub in_flight: usize,
}

pub struct Router {
    servers: Vec<Downstream>,
    separator: String,
    policy: Arc<Policy>,
    host: HostState,
    tools: NameTable,
    prompts: NameTable,
    /// Host-facing id key → (server, generation, the server's own id).
    inbound: HashMap<String, (usize, u64, Value)>,
    next_inbound: u64,
    /// Host request id key → (server, downstream id), for cancellations.
    host_requests: HashMap<String, (usize, Value)>,
    aggregations: Vec<Aggregation>,
    next_aggregation: u64,
    /// The host's `initialize` waiting for eager servers: (id, waiting, deadline).
    pending_initialize: Option<(Value, BTreeSet<usize>, Instant)>,
    /// Last aggregated list per kind, for airlock's own cursor: (generation, items).
    snapshots: HashMap<ListKind, (u64, Vec<Value>)>,
    snapshot_generation: u64,
    resource_owner: HashMap<String, usize>,
    /// URI template (and its literal prefix) → server.
    templates: Vec<(String, String, usize)>,
    shutting_down: bool,
    out: Vec<Action>,
}

fn object(value: &mut Value) -> Option<&mut Map<String, Value>> {
    value.as_object_mut()
}

/// A tool result that says what went wrong (hosts show it to the model, which can react).
fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

impl Router {
    pub fn new(
        specs: Vec<ServerSpec>,
        separator: &str,
        policy: Arc<Policy>,
        redactor: Arc<Redactor>,
        show_denied: bool,
        now: Instant,
    ) -> Router {
        let servers = specs
            .into_iter()
            .map(|spec| {
                let gate = Gate::new(
                    GateConfig {
                        server: spec.name.clone(),
                        show_denied,
                        tool_timeout: spec.tool_timeout,
                    },
                    policy.clone(),
                    redactor.clone(),
                );
                let mut life =
                    Lifecycle::new(spec.startup_timeout, spec.idle_timeout, spec.eager, now);
                if let Some(reason) = spec.refused {
                    life.failed(reason, true, now);
                }
                Downstream {
                    name: spec.name,
                    life,
                    gate,
                    alive: false,
                    handshake_sent: false,
                    next_id: 0,
                    outbound: HashMap::new(),
                    progress: HashMap::new(),
                    queue: Vec::new(),
                    capabilities: None,
                    server_info: None,
                    tools: None,
                    listing: None,
                    last_call: None,
                    calls: 0,
                }
            })
            .collect();
        Router {
            servers,
            separator: separator.to_string(),
            policy,
            host: HostState {
                capabilities: json!({}),
                ..HostState::default()
            },
            tools: NameTable::default(),
            prompts: NameTable::default(),
            inbound: HashMap::new(),
            next_inbound: 0,
            host_requests: HashMap::new(),
            aggregations: Vec::new(),
            next_aggregation: 0,
            pending_initialize: None,
            snapshots: HashMap::new(),
            snapshot_generation: 0,
            resource_owner: HashMap::new(),
            templates: Vec::new(),
            shutting_down: false,
            out: Vec::new(),
        }
    }

    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.out)
    }

    /// Moves the pending actions into `into` (emptied first). The two buffers swap, so neither
    /// is reallocated on every message.
    pub fn drain_actions(&mut self, into: &mut Vec<Action>) {
        into.clear();
        std::mem::swap(&mut self.out, into);
    }

    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    pub fn server_index(&self, name: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.name == name)
    }

    pub fn phase(&self, server: usize) -> Option<Phase> {
        self.servers.get(server).map(|s| s.life.phase())
    }

    /// The snapshot `airlock status` shows.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|s| ServerStatus {
                name: s.name.clone(),
                state: s.life.phase(),
                tools: s.tools.as_ref().map(Vec::len),
                last_error: s.life.last_error.clone(),
                restarts: s.life.restarts,
                consecutive_failures: s.life.consecutive_failures,
                calls: s.calls,
                last_call: s.last_call.map(crate::audit::event::rfc3339),
                in_flight: s.outbound.len() + s.queue.len(),
            })
            .collect()
    }

    /// Starts every eager server (at gateway start).
    pub fn start_eager(&mut self, now: Instant) {
        for index in 0..self.servers.len() {
            if self.servers[index].life.eager
                && self.servers[index].life.demand(now, false) == Demand::Start
            {
                self.start(index, now);
            }
        }
    }

    fn start(&mut self, index: usize, now: Instant) {
        if self.shutting_down {
            return;
        }
        let server = &mut self.servers[index];
        let generation = server.life.begin_start(now);
        server.alive = false;
        server.handshake_sent = false;
        self.out.push(Action::Start {
            server: index,
            generation,
        });
    }

    /// Stops every server (host gone, or a signal). Nothing starts afterwards.
    pub fn shutdown(&mut self) {
        self.shutting_down = true;
        for (index, server) in self.servers.iter_mut().enumerate() {
            let running = server.alive || server.life.is_starting();
            if running {
                server.life.stopping(false);
                self.out.push(Action::Stop {
                    server: index,
                    generation: server.life.generation,
                    reason: "airlock is shutting down".into(),
                });
            }
        }
    }

    // ------------------------------------------------------------------ host → servers

    /// One message from the host (already parsed as JSON).
    pub fn on_host(&mut self, message: Value, now: Instant) {
        let class = match classify(&message) {
            Err(invalid) => {
                let id = crate::mcp::salvage_id(&message);
                self.reply_error(
                    id,
                    code::INVALID_REQUEST,
                    &format!("invalid request: {invalid}"),
                );
                return;
            }
            Ok(class) => class,
        };
        match class {
            Class::Batch(_) => {
                // Batches existed only in 2025-03-26; no host in use sends them, and splitting a
                // batch across servers would break its all-in-one answer.
                self.reply_error(
                    Value::Null,
                    code::INVALID_REQUEST,
                    "airlock serve does not accept JSON-RPC batches",
                );
            }
            Class::Request { id, method } => {
                let (id, method) = (id.clone(), method.to_string());
                self.learn_host(&method, &message, now);
                self.host_request(message, id, &method, now);
            }
            Class::Notification { method } => {
                let method = method.to_string();
                self.host_notification(message, &method, now);
            }
            Class::Response { id } | Class::Error { id } => {
                let key = id_key(id);
                self.host_response(message, &key, now);
            }
        }
    }

    fn reply(&mut self, id: Value, result: Value) {
        self.out.push(Action::ToHost(result_response(id, result)));
    }

    fn reply_error(&mut self, id: Value, code: i64, text: &str) {
        self.out
            .push(Action::ToHost(error_response(id, code, text, None)));
    }

    /// The first request tells airlock who the host is: `initialize` in the handshake era, the
    /// request's `_meta` in the stateless era.
    fn learn_host(&mut self, method: &str, message: &Value, now: Instant) {
        let params = message.get("params");
        if method == "initialize" {
            let params = params.cloned().unwrap_or(Value::Null);
            self.host.capabilities = params.get("capabilities").cloned().unwrap_or(json!({}));
            self.host.client_info = params.get("clientInfo").cloned();
            self.host.version = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
        } else if !self.host.known {
            if let Some(caps) = version::request_capabilities(params) {
                self.host.capabilities = caps.clone();
            }
            self.host.version = version::request_version(params).map(str::to_string);
        } else {
            return;
        }
        if !self.host.known {
            self.host.known = true;
            // Eager servers spawned before the host spoke waited for its capabilities.
            for index in 0..self.servers.len() {
                if self.servers[index].alive && !self.servers[index].handshake_sent {
                    self.send_initialize(index, now);
                }
            }
        }
    }

    fn downstream_version(&self) -> &str {
        match self.host.version.as_deref() {
            Some(v) if HANDSHAKE_VERSIONS.contains(&v) => v,
            _ => LATEST_HANDSHAKE,
        }
    }

    fn host_request(&mut self, message: Value, id: Value, method: &str, now: Instant) {
        match method {
            "initialize" => self.host_initialize(id, now),
            "ping" => self.reply(id, json!({})),
            "server/discover" => {
                let mut versions: Vec<&str> = HANDSHAKE_VERSIONS.to_vec();
                versions.push(version::STATELESS_VERSION);
                let result = json!({
                    "supportedVersions": versions,
                    "capabilities": self.capabilities(),
                    "serverInfo": server_info(),
                });
                self.reply(id, result);
            }
            "logging/setLevel" => {
                let level = message.pointer("/params/level").cloned();
                self.host.log_level = level.clone();
                if let Some(level) = level {
                    for index in 0..self.servers.len() {
                        if self.servers[index].life.is_ready()
                            && self.servers[index].has_capability("logging") == Some(true)
                        {
                            self.internal_request(
                                index,
                                "logging/setLevel",
                                json!({"level": level}),
                                Origin::Ignore,
                                now,
                            );
                        }
                    }
                }
                self.reply(id, json!({}));
            }
            "tools/call" => self.host_call(message, id, now),
            "prompts/get" => self.host_prompt(message, id, now),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let uri = message
                    .pointer("/params/uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                match self.resource_server(&uri) {
                    Some(index) => self.forward(index, message, id, now),
                    None => self.reply_error(
                        id,
                        RESOURCE_NOT_FOUND,
                        &format!("Resource not found: no configured server owns {uri:?}"),
                    ),
                }
            }
            "completion/complete" => self.host_complete(message, id, now),
            other => match ListKind::from_method(other) {
                Some(kind) => self.host_list(kind, message, id, now),
                None => self.reply_error(
                    id,
                    METHOD_NOT_FOUND,
                    &format!("airlock serve cannot route method {other:?}"),
                ),
            },
        }
    }

    fn capabilities(&self) -> Value {
        let mut caps = json!({"tools": {"listChanged": true}});
        let known = self.servers.iter().filter_map(|s| s.capabilities.as_ref());
        for server_caps in known {
            if let Some(resources) = server_caps.get("resources") {
                let subscribe = resources.get("subscribe").and_then(Value::as_bool) == Some(true)
                    || caps
                        .pointer("/resources/subscribe")
                        .and_then(Value::as_bool)
                        == Some(true);
                caps["resources"] = json!({"listChanged": true, "subscribe": subscribe});
            }
            if server_caps.get("prompts").is_some() {
                caps["prompts"] = json!({"listChanged": true});
            }
            if server_caps.get("completions").is_some() {
                caps["completions"] = json!({});
            }
            if server_caps.get("logging").is_some() {
                caps["logging"] = json!({});
            }
        }
        caps
    }

    fn host_initialize(&mut self, id: Value, now: Instant) {
        let waiting: BTreeSet<usize> = (0..self.servers.len())
            .filter(|&i| self.servers[i].life.eager && self.servers[i].life.is_starting())
            .collect();
        if waiting.is_empty() {
            self.answer_initialize(id);
        } else {
            self.pending_initialize = Some((id, waiting, now + INITIALIZE_WAIT));
        }
    }

    fn answer_initialize(&mut self, id: Value) {
        let version = self.downstream_version().to_string();
        let names: Vec<String> = self.servers.iter().map(|s| s.name.clone()).collect();
        let result = json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": server_info(),
            "instructions": format!(
                "airlock gateway for MCP servers {}; their tools are named <server>{}<tool>.",
                names.join(", "),
                self.separator
            ),
        });
        self.host.initialized = true;
        self.reply(id, result);
    }

    fn host_notification(&mut self, message: Value, method: &str, now: Instant) {
        match method {
            // airlock did the handshake with each server itself.
            "notifications/initialized" => {}
            "notifications/cancelled" => {
                let Some(request_id) = message.pointer("/params/requestId") else {
                    return;
                };
                let key = id_key(request_id);
                self.aggregations.retain(|a| id_key(&a.host_id) != key);
                let Some((index, down_id)) = self.host_requests.remove(&key) else {
                    return;
                };
                let down_key = id_key(&down_id);
                let server = &mut self.servers[index];
                let before = server.queue.len();
                server
                    .queue
                    .retain(|queued| queued.get("id").map(id_key).as_deref() != Some(&down_key));
                let was_queued = server.queue.len() != before;
                server.outbound.remove(&down_key);
                if was_queued {
                    // Never reached the server (nor the gate): nothing to cancel downstream.
                    return;
                }
                let mut cancel = message;
                cancel["params"]["requestId"] = down_id;
                self.gate_to_server(index, cancel, now);
            }
            "notifications/roots/list_changed" => {
                for index in 0..self.servers.len() {
                    if self.servers[index].life.is_ready() {
                        self.gate_to_server(index, message.clone(), now);
                    }
                }
            }
            other => {
                tracing::debug!("not routing host notification {other}");
            }
        }
    }

    fn host_response(&mut self, message: Value, key: &str, now: Instant) {
        let Some((index, generation, original)) = self.inbound.remove(key) else {
            tracing::debug!("dropping a host answer to an unknown request {key}");
            return;
        };
        let server = &self.servers[index];
        if !server.alive || server.life.generation != generation {
            return;
        }
        let mut message = message;
        message["id"] = original;
        self.gate_to_server(index, message, now);
    }

    fn host_call(&mut self, message: Value, id: Value, now: Instant) {
        let Some(name) = message.pointer("/params/name").and_then(Value::as_str) else {
            self.reply_error(id, code::INVALID_PARAMS, "tools/call needs params.name");
            return;
        };
        let Some((index, original)) = self.route_name(&self.tools, name) else {
            self.reply_error(
                id,
                code::INVALID_PARAMS,
                &format!("Unknown tool: {name} (no configured server offers it; see tools/list)"),
            );
            return;
        };
        let mut message = message;
        message["params"]["name"] = Value::String(original);
        let server = &mut self.servers[index];
        server.calls += 1;
        server.last_call = Some(SystemTime::now());
        self.forward(index, message, id, now);
    }

    /// A namespaced name → (server, original): listed names first, then `server<sep>rest` for a
    /// server whose list airlock has not seen (so a host that remembers names can call at once).
    fn route_name(&self, table: &NameTable, name: &str) -> Option<(usize, String)> {
        if let Some((index, original)) = table.resolve(name) {
            return Some((index, original.to_string()));
        }
        let (server, rest) = split(name, &self.separator)?;
        let index = self.server_index(server)?;
        (!rest.is_empty()).then(|| (index, rest.to_string()))
    }

    fn host_prompt(&mut self, message: Value, id: Value, now: Instant) {
        let name = message
            .pointer("/params/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match self.route_name(&self.prompts, name) {
            Some((index, original)) => {
                let mut message = message;
                message["params"]["name"] = Value::String(original);
                self.forward(index, message, id, now);
            }
            None => self.reply_error(id, code::INVALID_PARAMS, &format!("Unknown prompt: {name}")),
        }
    }

    fn host_complete(&mut self, message: Value, id: Value, now: Instant) {
        let reference = message.pointer("/params/ref").cloned().unwrap_or_default();
        match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match self.route_name(&self.prompts, name) {
                    Some((index, original)) => {
                        let mut message = message;
                        message["params"]["ref"]["name"] = Value::String(original);
                        self.forward(index, message, id, now);
                    }
                    None => self.reply_error(
                        id,
                        code::INVALID_PARAMS,
                        &format!("Unknown prompt: {name}"),
                    ),
                }
            }
            Some("ref/resource") => {
                let uri = reference
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match self.resource_server(uri) {
                    Some(index) => self.forward(index, message, id, now),
                    None => self.reply_error(
                        id,
                        RESOURCE_NOT_FOUND,
                        &format!("Resource not found: no configured server owns {uri:?}"),
                    ),
                }
            }
            _ => self.reply_error(
                id,
                code::INVALID_PARAMS,
                "completion/complete needs params.ref of type ref/prompt or ref/resource",
            ),
        }
    }

    /// The server that owns `uri`: listed resources, then the longest matching template (or the
    /// template itself, for completions), then the only server that offers resources at all.
    fn resource_server(&self, uri: &str) -> Option<usize> {
        if let Some(&index) = self.resource_owner.get(uri) {
            return Some(index);
        }
        if let Some((_, _, index)) = self
            .templates
            .iter()
            .filter(|(template, prefix, _)| template == uri || uri.starts_with(prefix.as_str()))
            .max_by_key(|(_, prefix, _)| prefix.len())
        {
            return Some(*index);
        }
        let mut offering = self
            .servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.has_capability("resources") == Some(true))
            .map(|(i, _)| i);
        match (offering.next(), offering.next()) {
            (Some(index), None) => Some(index),
            _ => None,
        }
    }

    /// A host request for one server: a fresh downstream id, the progress token rewritten, then
    /// sent (through the gate) when the server is Ready, or queued and the server started.
    fn forward(&mut self, index: usize, message: Value, host_id: Value, now: Instant) {
        let is_call = message.get("method").and_then(Value::as_str) == Some("tools/call");
        let server = &mut self.servers[index];
        server.next_id += 1;
        let down_id = Value::from(server.next_id);
        let mut message = message;
        message["id"] = down_id.clone();
        let mut progress = None;
        if let Some(token) = message.pointer("/params/_meta/progressToken").cloned() {
            let down_token = Value::String(format!("airlock-p-{}", server.next_id));
            let key = id_key(&down_token);
            server.progress.insert(key.clone(), token);
            message["params"]["_meta"]["progressToken"] = down_token;
            progress = Some(key);
        }
        server.outbound.insert(
            id_key(&down_id),
            Origin::Host {
                host_id: host_id.clone(),
                progress,
                is_call,
            },
        );
        self.host_requests
            .insert(id_key(&host_id), (index, down_id));
        self.deliver(index, message, now);
    }

    /// Sends a host request to a server now, or queues it until the server is Ready (starting
    /// it if needed). A call the policy denies is answered at once, without starting anything.
    fn deliver(&mut self, index: usize, message: Value, now: Instant) {
        let denied_now = !self.servers[index].life.is_ready() && self.denied(index, &message);
        if denied_now {
            self.gate_to_server(index, message, now);
            return;
        }
        match self.servers[index].life.demand(now, true) {
            Demand::Ready => self.gate_to_server(index, message, now),
            Demand::Wait => self.servers[index].queue.push(message),
            Demand::Start => {
                self.servers[index].queue.push(message);
                self.start(index, now);
            }
            Demand::Unavailable(reason) => {
                self.servers[index].queue.push(message);
                let why = format!(
                    "server `{}` is unavailable: {reason}",
                    self.servers[index].name
                );
                self.fail_queued(index, &why, now);
            }
        }
    }

    fn denied(&self, index: usize, message: &Value) -> bool {
        if message.get("method").and_then(Value::as_str) != Some("tools/call") {
            return false;
        }
        let Some(tool) = message.pointer("/params/name").and_then(Value::as_str) else {
            return false;
        };
        let decision = self.policy.decide(&Call {
            server: &self.servers[index].name,
            tool,
            arguments: message.pointer("/params/arguments"),
        });
        decision.action == PolicyAction::Deny
    }

    /// Through the gate to the server; whatever the gate answers itself goes up to the host.
    fn gate_to_server(&mut self, index: usize, message: Value, now: Instant) {
        let mut fx = Effects::default();
        let verdict = self.servers[index]
            .gate
            .on_host(message.clone(), now, &mut fx);
        self.apply(index, fx, now);
        let message = match verdict {
            Verdict::Pass => message,
            Verdict::Replace(message) => message,
            Verdict::Drop => return,
        };
        self.send_raw(index, message, now);
    }

    fn send_raw(&mut self, index: usize, message: Value, now: Instant) {
        let server = &mut self.servers[index];
        if server.alive {
            server.life.last_activity = now;
            self.out.push(Action::ToServer {
                server: index,
                generation: server.life.generation,
                message,
            });
        }
    }

    /// The gate's own output: audit first, then answers (up the same path as the server's), then
    /// what it sends the server.
    fn apply(&mut self, index: usize, fx: Effects, now: Instant) {
        self.out
            .extend(fx.audit.into_iter().map(|e| Action::Audit(Box::new(e))));
        for message in fx.to_host {
            self.upstream(index, message, now);
        }
        // Cancellations and approved calls. A server that died meanwhile drops them: the gate
        // answers its pending calls when the death is reported (or at their tool_timeout).
        for message in fx.to_server {
            self.send_raw(index, message, now);
        }
    }

    fn internal_request(
        &mut self,
        index: usize,
        method: &str,
        params: Value,
        origin: Origin,
        now: Instant,
    ) {
        let server = &mut self.servers[index];
        server.next_id += 1;
        let id = Value::from(server.next_id);
        server.outbound.insert(id_key(&id), origin);
        self.gate_to_server(index, request(id, method, params), now);
    }

    fn host_list(&mut self, kind: ListKind, message: Value, id: Value, now: Instant) {
        if kind == ListKind::Tools {
            self.host.listed_tools = true;
        }
        if let Some(cursor) = message.pointer("/params/cursor").and_then(Value::as_str) {
            self.answer_page(kind, id, cursor);
            return;
        }
        let mut waiting = BTreeSet::new();
        for index in 0..self.servers.len() {
            let server = &self.servers[index];
            let cached = kind == ListKind::Tools && server.tools.is_some();
            if cached && server.life.phase() != Phase::Failed {
                continue;
            }
            if server.has_capability(kind.capability()) == Some(false) {
                continue;
            }
            match self.servers[index].life.demand(now, false) {
                Demand::Ready => {
                    waiting.insert(index);
                }
                Demand::Wait => {
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
            .map(|&i| self.servers[i].life.startup_timeout)
            .max()
            .unwrap_or_default();
        let aggregation = Aggregation {
            id: self.next_aggregation,
            host_id: id,
            kind,
            waiting: waiting.clone(),
            items: BTreeMap::new(),
            deadline: now + longest_start + LIST_GRACE,
        };
        self.aggregations.push(aggregation);
        if kind != ListKind::Tools {
            for index in waiting {
                if self.servers[index].life.is_ready() {
                    self.request_list_page(index, kind, self.next_aggregation, None, now);
                }
            }
        }
        self.settle_aggregations(now);
    }

    fn request_list_page(
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
        self.internal_request(
            index,
            kind.method(),
            params,
            Origin::List { aggregation },
            now,
        );
    }

    /// Answers every aggregation nothing is waiting for (or whose time is up).
    fn settle_aggregations(&mut self, now: Instant) {
        let mut done = Vec::new();
        self.aggregations.retain_mut(|a| {
            if a.waiting.is_empty() || a.deadline <= now {
                done.push(Aggregation {
                    id: a.id,
                    host_id: a.host_id.clone(),
                    kind: a.kind,
                    waiting: std::mem::take(&mut a.waiting),
                    items: std::mem::take(&mut a.items),
                    deadline: a.deadline,
                });
                false
            } else {
                true
            }
        });
        for aggregation in done {
            for index in &aggregation.waiting {
                tracing::warn!(
                    server = %self.servers[*index].name,
                    "{} answered without this server: it did not answer in time",
                    aggregation.kind.method()
                );
            }
            let items = self.collect(aggregation.kind, aggregation.items);
            self.snapshot_generation += 1;
            self.snapshots
                .insert(aggregation.kind, (self.snapshot_generation, items));
            self.answer_page(aggregation.kind, aggregation.host_id, "");
        }
        if let Some((_, waiting, deadline)) = &self.pending_initialize
            && (waiting.is_empty() || *deadline <= now)
            && let Some((id, _, _)) = self.pending_initialize.take()
        {
            self.answer_initialize(id);
        }
    }

    /// The aggregated items of one list, in server order, named for the host.
    fn collect(&mut self, kind: ListKind, mut items: BTreeMap<usize, Vec<Value>>) -> Vec<Value> {
        let mut all = Vec::new();
        for index in 0..self.servers.len() {
            match kind {
                ListKind::Tools => {
                    if self.servers[index].life.phase() == Phase::Failed {
                        continue;
                    }
                    for tool in self.servers[index].tools.iter().flatten() {
                        let original = tool.get("name").and_then(Value::as_str).unwrap_or("");
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
                    let originals: Vec<String> = prompts
                        .iter()
                        .map(|p| {
                            p.get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string()
                        })
                        .collect();
                    let refs: Vec<&str> = originals.iter().map(String::as_str).collect();
                    let name = self.servers[index].name.clone();
                    let (names, changed) =
                        self.prompts
                            .set_server(index, &name, &self.separator, &refs);
                    log_changed(&name, "prompt", &changed);
                    for (mut prompt, name) in prompts.into_iter().zip(names) {
                        prompt["name"] = Value::String(name);
                        all.push(prompt);
                    }
                }
                ListKind::Resources => {
                    for resource in items.remove(&index).unwrap_or_default() {
                        if let Some(uri) = resource.get("uri").and_then(Value::as_str) {
                            self.resource_owner.entry(uri.to_string()).or_insert(index);
                        }
                        all.push(resource);
                    }
                }
                ListKind::ResourceTemplates => {
                    self.templates.retain(|(_, _, owner)| *owner != index);
                    for template in items.remove(&index).unwrap_or_default() {
                        if let Some(uri) = template.get("uriTemplate").and_then(Value::as_str) {
                            let prefix = uri.split('{').next().unwrap_or(uri).to_string();
                            self.templates.push((uri.to_string(), prefix, index));
                        }
                        all.push(template);
                    }
                }
            }
        }
        all
    }

    /// One page of the last aggregated list. airlock's cursor is `<generation>.<offset>`; a
    /// cursor from an older list is refused (the host lists again from the start).
    fn answer_page(&mut self, kind: ListKind, id: Value, cursor: &str) {
        let Some((generation, items)) = self.snapshots.get(&kind) else {
            self.reply_error(id, code::INVALID_PARAMS, "invalid cursor");
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
            self.reply_error(
                id,
                code::INVALID_PARAMS,
                "invalid or stale cursor: list again without a cursor",
            );
            return;
        };
        let end = (offset + PAGE_SIZE).min(items.len());
        let mut result = Map::new();
        result.insert(kind.key().into(), Value::Array(items[offset..end].to_vec()));
        if end < items.len() {
            result.insert(
                "nextCursor".into(),
                Value::String(format!("{generation}.{end}")),
            );
        }
        self.reply(id, Value::Object(result));
    }

    // ------------------------------------------------------------------ servers → host

    /// The server of `generation` was spawned: shake hands (at once if the host has spoken).
    pub fn on_spawned(&mut self, index: usize, generation: u64, now: Instant) {
        let Some(server) = self.servers.get_mut(index) else {
            return;
        };
        if server.life.generation != generation || !server.life.is_starting() {
            return;
        }
        server.alive = true;
        // An eager server before the host connects waits for the host's capabilities, since a
        // server learns the client's capabilities only in `initialize`.
        if self.host.known {
            self.send_initialize(index, now);
        }
    }

    fn send_initialize(&mut self, index: usize, now: Instant) {
        let server = &mut self.servers[index];
        server.handshake_sent = true;
        // The startup timeout covers the handshake, not the wait for the host.
        server.life.state = super::lifecycle::State::Starting {
            deadline: now + server.life.startup_timeout,
        };
        let client_info =
            self.host.client_info.clone().unwrap_or_else(
                || json!({"name": "airlock", "version": env!("CARGO_PKG_VERSION")}),
            );
        let params = json!({
            "protocolVersion": self.downstream_version(),
            "capabilities": self.host.capabilities,
            "clientInfo": client_info,
        });
        self.internal_request(index, "initialize", params, Origin::Initialize, now);
    }

    pub fn on_spawn_failed(
        &mut self,
        index: usize,
        generation: u64,
        reason: String,
        permanent: bool,
        now: Instant,
    ) {
        if self.servers.get(index).map(|s| s.life.generation) != Some(generation) {
            return;
        }
        self.server_failed(index, reason, permanent, false, now);
    }

    /// The server's stdout closed (it exited or crashed): the kill sequence makes sure.
    pub fn on_server_closed(&mut self, index: usize, generation: u64, now: Instant) {
        let Some(server) = self.servers.get(index) else {
            return;
        };
        if server.life.generation != generation || !server.alive {
            return;
        }
        match server.life.phase() {
            Phase::Starting | Phase::Ready => {
                let reason = if server.life.is_ready() {
                    "it exited (its output closed)"
                } else {
                    "it exited during startup (its output closed)"
                };
                self.server_failed(index, reason.into(), false, true, now);
            }
            _ => {}
        }
    }

    /// The process of `generation` is gone (the shell ran the kill sequence).
    pub fn on_exited(&mut self, index: usize, generation: u64, detail: &str, now: Instant) {
        let Some(server) = self.servers.get(index) else {
            return;
        };
        if server.life.generation != generation {
            return;
        }
        let (phase, alive) = (server.life.phase(), server.alive);
        match phase {
            Phase::Stopping | Phase::Idle => {
                self.servers[index].alive = false;
                self.fail_in_flight(index, "it was stopped", now);
                let restart = self.servers[index].life.stopped();
                let wanted = restart || !self.servers[index].queue.is_empty();
                if wanted
                    && !self.shutting_down
                    && self.servers[index].life.demand(now, true) == Demand::Start
                {
                    self.start(index, now);
                }
            }
            Phase::Starting | Phase::Ready if alive => {
                let reason = format!("it exited ({detail})");
                self.server_failed(index, reason, false, false, now);
            }
            _ => self.servers[index].alive = false,
        }
    }

    /// Whether the process of `generation` is the one the router wants running (the shell stops
    /// a spawn that finished after its server was given up or shut down).
    pub fn wants(&self, index: usize, generation: u64) -> bool {
        self.servers
            .get(index)
            .is_some_and(|s| s.alive && s.life.generation == generation)
    }

    /// A start failed or a running server died. In-flight requests get errors; requests queued
    /// for a start that failed get errors too (the next request tries again, after the backoff).
    fn server_failed(
        &mut self,
        index: usize,
        reason: String,
        permanent: bool,
        stop: bool,
        now: Instant,
    ) {
        let was_ready = self.servers[index].life.is_ready();
        let server = &mut self.servers[index];
        let generation = server.life.generation;
        let gave_up = server.life.failed(reason.clone(), permanent, now);
        let was_alive = std::mem::replace(&mut server.alive, false);
        tracing::warn!(server = %server.name, "{reason}{}", if gave_up { "; giving up on this server" } else { "" });
        if stop && was_alive {
            self.out.push(Action::Stop {
                server: index,
                generation,
                reason: reason.clone(),
            });
        }
        let why = format!("server `{}`: {reason}", self.servers[index].name);
        self.fail_in_flight(index, &why, now);
        if !was_ready {
            self.fail_queued(index, &why, now);
        }
        self.servers[index].listing = None;
        self.drop_from_aggregations(index, now);
    }

    fn drop_from_aggregations(&mut self, index: usize, now: Instant) {
        for aggregation in &mut self.aggregations {
            aggregation.waiting.remove(&index);
        }
        if let Some((_, waiting, _)) = &mut self.pending_initialize {
            waiting.remove(&index);
        }
        self.settle_aggregations(now);
    }

    /// Everything sent to the server and not answered gets an error (through the gate, which
    /// records the outcome of each call).
    fn fail_in_flight(&mut self, index: usize, why: &str, now: Instant) {
        let mut fx = Effects::default();
        self.servers[index].gate.on_server_gone(why, now, &mut fx);
        self.apply_gone(index, fx);
        // Internal requests and anything the gate did not track.
        let server = &mut self.servers[index];
        let queued: BTreeSet<String> = server
            .queue
            .iter()
            .filter_map(|m| m.get("id").map(id_key))
            .collect();
        let orphans: Vec<(String, Origin)> = server
            .outbound
            .iter()
            .filter(|(key, _)| !queued.contains(*key))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        for (key, origin) in orphans {
            server.outbound.remove(&key);
            if let Origin::Host {
                host_id, is_call, ..
            } = origin
            {
                self.host_requests.remove(&id_key(&host_id));
                let text = format!("airlock: {why}");
                let answer = if is_call {
                    result_response(host_id, tool_error(&text))
                } else {
                    error_response(host_id, code::SERVER_EXITED, &text, None)
                };
                self.out.push(Action::ToHost(answer));
            }
        }
        let server = &mut self.servers[index];
        server.progress.clear();
        self.inbound.retain(|_, (owner, _, _)| *owner != index);
    }

    /// Queued host requests that will not be sent: through the gate (so each call has its
    /// decision and outcome recorded), then answered with the reason.
    fn fail_queued(&mut self, index: usize, why: &str, now: Instant) {
        let queued = std::mem::take(&mut self.servers[index].queue);
        if queued.is_empty() {
            return;
        }
        let mut fx = Effects::default();
        for message in queued {
            let mut step = Effects::default();
            let _ = self.servers[index].gate.on_host(message, now, &mut step);
            fx.audit.extend(step.audit);
            fx.to_host.extend(step.to_host);
        }
        self.servers[index].gate.on_server_gone(why, now, &mut fx);
        self.apply_gone(index, fx);
    }

    /// Gate effects for a server that is gone: answers go up, nothing goes down.
    fn apply_gone(&mut self, index: usize, fx: Effects) {
        self.out
            .extend(fx.audit.into_iter().map(|e| Action::Audit(Box::new(e))));
        for message in fx.to_host {
            let Some(key) = message.get("id").map(id_key) else {
                continue;
            };
            let Some(origin) = self.servers[index].outbound.remove(&key) else {
                continue;
            };
            if let Origin::Host {
                host_id, is_call, ..
            } = origin
            {
                self.host_requests.remove(&id_key(&host_id));
                let mut message = message;
                // A call that failed because its server did: a tool error the model can read,
                // like seed 003's "never propagates errors"; other requests keep the JSON-RPC error.
                if is_call
                    && let Some(text) = message.pointer("/error/message").and_then(Value::as_str)
                {
                    message = result_response(host_id, tool_error(text));
                } else {
                    message["id"] = host_id;
                }
                self.out.push(Action::ToHost(message));
            }
        }
    }

    /// One JSON message from the server of `generation`.
    pub fn on_server(&mut self, index: usize, generation: u64, message: Value, now: Instant) {
        let Some(server) = self.servers.get_mut(index) else {
            return;
        };
        if server.life.generation != generation || !server.alive {
            return;
        }
        let mut fx = Effects::default();
        let verdict = server.gate.on_server(message.clone(), now, &mut fx);
        self.apply(index, fx, now);
        match verdict {
            Verdict::Pass => self.upstream(index, message, now),
            Verdict::Replace(message) => self.upstream(index, message, now),
            Verdict::Drop => {}
        }
    }

    /// A message from the gated server (or from its gate) on its way to the host.
    fn upstream(&mut self, index: usize, message: Value, now: Instant) {
        let class = match classify(&message) {
            Ok(class) => class,
            Err(invalid) => {
                tracing::warn!(server = %self.servers[index].name, "dropping an invalid message: {invalid}");
                return;
            }
        };
        match class {
            Class::Batch(_) => {
                if let Value::Array(items) = message {
                    for item in items {
                        self.upstream(index, item, now);
                    }
                }
            }
            Class::Response { id } | Class::Error { id } => {
                let key = id_key(id);
                self.server_response(index, &key, message, now);
            }
            Class::Request { id, method } => {
                let (id, method) = (id.clone(), method.to_string());
                self.server_request(index, id, &method, message, now);
            }
            Class::Notification { method } => {
                let method = method.to_string();
                self.server_notification(index, &method, message, now);
            }
        }
    }

    fn server_response(&mut self, index: usize, key: &str, message: Value, now: Instant) {
        self.servers[index].life.last_activity = now;
        let Some(origin) = self.servers[index].outbound.remove(key) else {
            tracing::debug!(server = %self.servers[index].name, "dropping an answer to an unknown request {key}");
            return;
        };
        // An answer for the host goes up whole; only airlock's own requests look inside (taking
        // the parts rather than cloning them: a tool result can be megabytes).
        let mut message = message;
        let (error, result) = match origin {
            Origin::Host { .. } | Origin::Ignore => (None, Value::Null),
            _ => (
                message.get_mut("error").map(Value::take),
                message
                    .get_mut("result")
                    .map(Value::take)
                    .unwrap_or(Value::Null),
            ),
        };
        match origin {
            Origin::Host {
                host_id, progress, ..
            } => {
                self.host_requests.remove(&id_key(&host_id));
                if let Some(token) = progress {
                    self.servers[index].progress.remove(&token);
                }
                message["id"] = host_id;
                self.out.push(Action::ToHost(message));
            }
            Origin::Initialize => {
                if !self.servers[index].life.is_starting() {
                    return;
                }
                if let Some(error) = error {
                    let text = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    let reason = format!("initialize failed: {text}");
                    self.server_failed(index, reason, false, true, now);
                    return;
                }
                let server = &mut self.servers[index];
                server.capabilities =
                    Some(result.get("capabilities").cloned().unwrap_or(json!({})));
                server.server_info = result.get("serverInfo").cloned();
                let tools = server.has_capability("tools") == Some(true);
                let logging = server.has_capability("logging") == Some(true);
                self.gate_to_server(
                    index,
                    notification("notifications/initialized", json!({})),
                    now,
                );
                if logging && let Some(level) = self.host.log_level.clone() {
                    self.internal_request(
                        index,
                        "logging/setLevel",
                        json!({"level": level}),
                        Origin::Ignore,
                        now,
                    );
                }
                if tools {
                    self.servers[index].listing = Some(Vec::new());
                    self.internal_request(index, "tools/list", json!({}), Origin::ToolsList, now);
                } else {
                    self.tools_listed(index, Vec::new(), now);
                }
            }
            Origin::ToolsList => {
                if let Some(error) = error {
                    let text = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    tracing::warn!(server = %self.servers[index].name, "tools/list failed: {text}");
                    self.servers[index].life.last_error =
                        Some(format!("tools/list failed: {text}"));
                    self.servers[index].listing = None;
                    let previous = self.servers[index].tools.clone().unwrap_or_default();
                    self.tools_listed(index, previous, now);
                    return;
                }
                let page = result
                    .get("tools")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let listing = self.servers[index].listing.get_or_insert_with(Vec::new);
                listing.extend(page);
                match result
                    .get("nextCursor")
                    .filter(|c| c.as_str().is_some_and(|s| !s.is_empty()))
                {
                    Some(cursor) => {
                        let cursor = cursor.clone();
                        self.internal_request(
                            index,
                            "tools/list",
                            json!({"cursor": cursor}),
                            Origin::ToolsList,
                            now,
                        );
                    }
                    None => {
                        let tools = self.servers[index].listing.take().unwrap_or_default();
                        self.tools_listed(index, tools, now);
                    }
                }
            }
            Origin::List { aggregation } => {
                let Some(position) = self.aggregations.iter().position(|a| a.id == aggregation)
                else {
                    return;
                };
                let kind = self.aggregations[position].kind;
                if error.is_none() {
                    let page = result
                        .get(kind.key())
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    self.aggregations[position]
                        .items
                        .entry(index)
                        .or_default()
                        .extend(page);
                    if let Some(cursor) = result
                        .get("nextCursor")
                        .filter(|c| c.as_str().is_some_and(|s| !s.is_empty()))
                    {
                        let cursor = cursor.clone();
                        self.request_list_page(index, kind, aggregation, Some(cursor), now);
                        return;
                    }
                }
                self.aggregations[position].waiting.remove(&index);
                self.settle_aggregations(now);
            }
            Origin::Ignore => {}
        }
    }

    /// A complete tool list from the server: rename, cache, become Ready, tell the host if the
    /// tools it knows changed.
    fn tools_listed(&mut self, index: usize, tools: Vec<Value>, now: Instant) {
        let name = self.servers[index].name.clone();
        let originals: Vec<String> = tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        let tools: Vec<Value> = tools
            .into_iter()
            .filter(|t| t.get("name").and_then(Value::as_str).is_some())
            .collect();
        let refs: Vec<&str> = originals.iter().map(String::as_str).collect();
        let (_, changed) = self.tools.set_server(index, &name, &self.separator, &refs);
        log_changed(&name, "tool", &changed);
        let previous = self.servers[index].tools.replace(tools.clone());
        let differs = previous.as_ref() != Some(&tools);
        if differs && previous.is_some() && self.host.listed_tools && self.host.initialized {
            self.out.push(Action::ToHost(notification(
                "notifications/tools/list_changed",
                json!({}),
            )));
        }
        if self.servers[index].life.is_starting() {
            self.become_ready(index, now);
        }
    }

    fn become_ready(&mut self, index: usize, now: Instant) {
        self.servers[index].life.ready(now);
        let server = &self.servers[index];
        tracing::info!(server = %server.name, "ready with {} tools", server.tools.as_ref().map_or(0, Vec::len));
        let queued = std::mem::take(&mut self.servers[index].queue);
        for message in queued {
            self.gate_to_server(index, message, now);
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

    fn server_request(
        &mut self,
        index: usize,
        id: Value,
        method: &str,
        message: Value,
        now: Instant,
    ) {
        let caps = &self.host.capabilities;
        let declined = match method {
            "ping" => {
                self.gate_to_server(index, result_response(id, json!({})), now);
                return;
            }
            "roots/list" if caps.get("roots").is_none() => Some("the host does not offer roots"),
            "sampling/createMessage" if caps.get("sampling").is_none() => {
                Some("the host does not offer sampling")
            }
            "elicitation/create" if !version::elicitation_form_supported(caps) => {
                // Declining is an answer the server understands (seed 001: headless hosts decline).
                tracing::info!(server = %self.servers[index].name, "declined an elicitation: the host does not offer it");
                self.gate_to_server(
                    index,
                    result_response(id, json!({"action": "decline"})),
                    now,
                );
                return;
            }
            _ => None,
        };
        if let Some(why) = declined {
            let text = format!("airlock: {why}");
            self.gate_to_server(
                index,
                error_response(id, METHOD_NOT_FOUND, &text, None),
                now,
            );
            return;
        }
        let server = &self.servers[index];
        let generation = server.life.generation;
        let name = server.name.clone();
        self.next_inbound += 1;
        let host_id = Value::String(format!("{INBOUND_PREFIX}{}", self.next_inbound));
        self.inbound
            .insert(id_key(&host_id), (index, generation, id));
        let mut message = message;
        message["id"] = host_id;
        if let Some(params) = message.get_mut("params").and_then(object) {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(META_SERVER.into(), Value::String(name.clone()));
            }
            if method == "elicitation/create"
                && let Some(Value::String(text)) = params.get_mut("message")
            {
                *text = format!("[{name}] {text}");
            }
        } else {
            message["params"] = json!({"_meta": {META_SERVER: name}});
        }
        self.out.push(Action::ToHost(message));
    }

    fn server_notification(&mut self, index: usize, method: &str, message: Value, now: Instant) {
        let name = self.servers[index].name.clone();
        let mut message = message;
        match method {
            "notifications/progress" => {
                let Some(token) = message.pointer("/params/progressToken") else {
                    return;
                };
                let Some(host_token) = self.servers[index].progress.get(&id_key(token)).cloned()
                else {
                    return;
                };
                message["params"]["progressToken"] = host_token;
            }
            "notifications/cancelled" => {
                let Some(request_id) = message.pointer("/params/requestId") else {
                    return;
                };
                let generation = self.servers[index].life.generation;
                let found = self
                    .inbound
                    .iter()
                    .find(|(_, (owner, g, original))| {
                        *owner == index && *g == generation && original == request_id
                    })
                    .map(|(key, _)| key.clone());
                let Some(key) = found else {
                    return;
                };
                self.inbound.remove(&key);
                let host_id = key
                    .strip_prefix("s:")
                    .map(|s| Value::String(s.to_string()))
                    .unwrap_or(Value::Null);
                message["params"]["requestId"] = host_id;
            }
            "notifications/tools/list_changed" => {
                if self.servers[index].life.is_ready() && self.servers[index].listing.is_none() {
                    self.servers[index].listing = Some(Vec::new());
                    self.internal_request(index, "tools/list", json!({}), Origin::ToolsList, now);
                }
                return;
            }
            "notifications/message" => {
                if let Some(params) = message.get_mut("params").and_then(object) {
                    let logger = match params.get("logger").and_then(Value::as_str) {
                        Some(logger) => format!("{name}/{logger}"),
                        None => name.clone(),
                    };
                    params.insert("logger".into(), Value::String(logger));
                }
            }
            _ => {}
        }
        if self.host.initialized || self.host.known {
            self.out.push(Action::ToHost(message));
        }
    }

    // ------------------------------------------------------------------ time

    /// The next instant [`Router::on_tick`] has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        let servers = self
            .servers
            .iter()
            .flat_map(|s| [s.life.next_deadline(s.busy()), s.gate.next_deadline()]);
        let aggregations = self.aggregations.iter().map(|a| Some(a.deadline));
        let initialize = self.pending_initialize.iter().map(|(_, _, d)| Some(*d));
        servers
            .chain(aggregations)
            .chain(initialize)
            .flatten()
            .min()
    }

    pub fn on_tick(&mut self, now: Instant) {
        for index in 0..self.servers.len() {
            let mut fx = Effects::default();
            self.servers[index].gate.on_tick(now, &mut fx);
            if !fx.is_empty() {
                self.apply(index, fx, now);
            }
            let server = &mut self.servers[index];
            let busy = server.busy();
            let wanted = !server.queue.is_empty();
            match server.life.tick(now, busy, wanted) {
                Due::Nothing => {}
                Due::StartupTimedOut => {
                    if server.alive && !server.handshake_sent {
                        // Still waiting for the host to connect: not the server's fault.
                        server.life.state = super::lifecycle::State::Starting {
                            deadline: now + server.life.startup_timeout,
                        };
                        continue;
                    }
                    let reason = format!(
                        "it did not complete the MCP handshake within startup_timeout ({}s)",
                        server.life.startup_timeout.as_secs()
                    );
                    let alive = server.alive;
                    let generation = server.life.generation;
                    self.server_failed(index, reason.clone(), false, true, now);
                    if !alive {
                        // Still spawning: the shell stops it when the spawn reports.
                        self.out.push(Action::Stop {
                            server: index,
                            generation,
                            reason,
                        });
                    }
                }
                Due::IdleStop => {
                    let generation = server.life.generation;
                    let idle = server.life.idle_timeout.unwrap_or_default().as_secs();
                    tracing::info!(server = %server.name, "idle for {idle}s: stopping it");
                    self.out.push(Action::Stop {
                        server: index,
                        generation,
                        reason: format!("idle for {idle}s"),
                    });
                }
                Due::Restart => self.start(index, now),
            }
        }
        self.settle_aggregations(now);
    }
}

fn server_info() -> Value {
    json!({"name": "airlock", "version": env!("CARGO_PKG_VERSION")})
}

fn log_changed(server: &str, what: &str, changed: &[(String, String)]) {
    for (original, name) in changed {
        tracing::info!(server = %server, "{what} {original:?} is named {name:?} (shortened or sanitised for hosts)");
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
