//! The session core, pure: one host, one or many servers, every message routed. The shell
//! ([`super::shell`]) feeds it inputs (host messages, server messages, spawn and exit reports,
//! the clock) and carries out the [`Action`]s it returns, in order.
//!
//! Both commands are this one machine: `run` is [`Topology::Single`] (the host's handshake passes
//! through to the server, nothing is renamed, ids pass unchanged) and `serve` is
//! [`Topology::Gateway`] (airlock answers the handshake, names are prefixed, lists aggregated).
//! Each rule below is written once and applies to both.
//!
//! | file | owns |
//! |---|---|
//! | [`host`] | host dispatch: classification, batches, duplicates, the host's era |
//! | [`routing`] | naming and routing: which server a request is for, under which name |
//! | [`forward`] | correlation: the gate, downstream ids, queueing, cancellation across the hop |
//! | [`upstream`] | server → host: answers back to the host's ids, server requests, notifications |
//! | [`handshake`] | the gateway's own handshake with the host and with each server |
//! | [`lists`] | list aggregation and airlock's own pages |
//! | [`failure`] | failure bookkeeping: crashes, exits, timeouts, lifecycle ticks |
//! | [`era`] | what each protocol version needs on the host side (2026-07-28 results) |
//! | [`mrtr`] | a handshake-era server's requests for input, asked of a 2026-07-28 host |
//! | [`subscriptions`] | `subscriptions/listen` (2026-07-28) |
//! | [`reload`] | a new config and policy without dropping a call |
//! | [`roots`] | roots the host offers that a server's sandbox does not show it |
//!
//! Id spaces: the gate of each server works in the **host's** id space (its audit events carry
//! the host's ids). A host request forwarded to a server gets a downstream id: the host's own in
//! `Single` (when free), a fresh integer of that server in `Gateway`; the answer is mapped back.
//! A server→client request gets a host-facing id (`airlock-gw-N` in `Gateway`; its own in
//! `Single` unless it collides with airlock's prefix); the host's answer is mapped back.

mod era;
mod failure;
mod fast;
mod forward;
mod handshake;
mod host;
mod lists;
mod mrtr;
pub use mrtr::STATE_PREFIX;
mod reload;
mod resource_claims;
mod roots;
mod routing;
mod subscriptions;
mod tasks;
mod upstream;

#[cfg(test)]
mod single_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::fast_map::FastMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::Value;

use crate::audit::{Event, Redactor};
use crate::gate::{Gate, GateConfig, HostFacts};
use crate::gateway::lifecycle::{Lifecycle, Phase};
use crate::gateway::names::NameTable;
use crate::mcp::message::{error_response, result_response};
use crate::policy::Policy;
use host::Batches;

pub use era::{Refusal, SessionEra, request_refusal};
pub use handshake::LATEST_HANDSHAKE;
pub use lists::{ListKind, PAGE_SIZE};
pub use reload::{ReloadSummary, Reloaded};
pub use tasks::make_plain;

/// How long the answer to the host's `initialize` waits for eager servers still starting.
pub const INITIALIZE_WAIT: Duration = Duration::from_secs(5);
/// `_meta` key naming the server a server→client request comes from.
pub const META_SERVER: &str = "airlock/server";

/// One server as the core knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    pub startup_timeout: Duration,
    /// Extra time a start gets because the server's package is installed first
    /// (`crate::fetch`). Not declared by the user, and gone once the package is cached: a reload
    /// does not count a change of it as a changed server ([`ServerSpec::same_declaration`]).
    pub install_allowance: Duration,
    pub tool_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub eager: bool,
    /// Known at load time never to start (a refused launch, an unsupported transport).
    pub refused: Option<String>,
    /// The server's HOME and working directory, as it sees them (path arguments are read
    /// against them); unknown for a remote server.
    pub paths: crate::policy::reading::PathContext,
    /// Every path the server's sandbox shows it (its grants, the system and runtime, its private
    /// dirs): a root the host offers outside them is one the server cannot use ([`roots`]).
    /// `None`: unknown (a remote server).
    pub shown_paths: Option<Vec<std::path::PathBuf>>,
}

impl ServerSpec {
    /// Whether `other` declares the same server: everything but the install allowance, which
    /// depends on whether the package was cached when the spec was made, not on the config.
    pub fn same_declaration(&self, other: &ServerSpec) -> bool {
        let ServerSpec {
            name,
            startup_timeout,
            install_allowance: _,
            tool_timeout,
            idle_timeout,
            eager,
            refused,
            paths,
            shown_paths,
        } = other;
        self.name == *name
            && self.startup_timeout == *startup_timeout
            && self.tool_timeout == *tool_timeout
            && self.idle_timeout == *idle_timeout
            && self.eager == *eager
            && self.refused == *refused
            && self.paths == *paths
            && self.shown_paths == *shown_paths
    }
}

/// The shape of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// `airlock run`: one server, started at once, never restarted; the host's handshake, names
    /// and ids pass through.
    Single,
    /// `airlock serve`: many servers; airlock answers the handshake and prefixes names with
    /// `<server><separator>`.
    Gateway { separator: String },
}

/// What the shell must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    ToHost(Value),
    /// A message for the host, as bytes (one line without its newline).
    ToHostBytes(Vec<u8>),
    /// Write to that server if its running process is of this generation (else drop).
    ToServer {
        server: usize,
        generation: u64,
        message: Value,
    },
    /// A host request for a server, as the bytes the host sent (one line without its newline).
    ToServerBytes {
        server: usize,
        generation: u64,
        bytes: Vec<u8>,
        /// Its id key (answered if the server cannot take it).
        request: Option<String>,
    },
    Audit(Box<Event>),
    /// A message from a server that is not forwarded (an answer to no request in flight): the
    /// shell counts it with the server's other junk.
    Dropped {
        server: usize,
        reason: String,
    },
    /// Spawn the server; report [`Core::on_spawned`] or [`Core::on_spawn_failed`].
    Start {
        server: usize,
        generation: u64,
    },
    /// Close that server's input after what is queued for it (`Single`, after the host's EOF).
    CloseInput {
        server: usize,
        generation: u64,
    },
    /// Run the kill sequence; report [`Core::on_exited`] when it is gone.
    Stop {
        server: usize,
        generation: u64,
        reason: String,
    },
}

/// Who is waiting for a server's answer.
#[derive(Debug, Clone)]
enum Origin {
    Host {
        host_id: Value,
        /// The downstream progress token, to forget with the request.
        progress: Option<String>,
        /// The host's `initialize` (`Single`): its answer names the negotiated version.
        initialize: bool,
        /// A result a 2026-07-28 host may cache (`resources/read`): it gets cache hints.
        cacheable: bool,
        /// A request a 2026-07-28 host may be asked for input through (see [`mrtr`]).
        input_carrier: bool,
        /// The client capabilities such a request declared in its `_meta`: the only inputs the
        /// host may be asked for through it.
        declared: Option<Value>,
        /// A gateway's `tasks/get`, `tasks/result` or `tasks/cancel`: the answer names the task
        /// for the host ([`tasks`]).
        about_task: bool,
        /// The request spoke the stateless era (2026-07-28): its answer is shaped for it, and a
        /// server's question during it is asked through its result.
        stateless: bool,
    },
    Initialize,
    /// airlock's own `tools/list` (at start, or after `list_changed`).
    ToolsList,
    /// A page of a listing only the gate reads (`Single`: a call came before the host listed).
    GateList,
    /// A page of a host list being aggregated.
    List {
        aggregation: u64,
    },
    /// An answer nobody needs (e.g. `logging/setLevel` replayed after a restart).
    Ignore,
}

struct Downstream {
    name: String,
    spec: ServerSpec,
    life: Lifecycle,
    gate: Gate,
    /// The process of the current generation is running (spawned, not yet gone).
    alive: bool,
    /// Replaced by a reload: takes no new requests, stops once its requests are answered.
    retiring: bool,
    /// airlock's `initialize` went out for the current generation.
    handshake_sent: bool,
    /// Which start of a server of this name the current generation is, counted over the
    /// session (reloads included): it names the server's tasks for the host ([`tasks`]).
    start: u64,
    next_id: u64,
    outbound: FastMap<String, Origin>,
    /// Downstream progress token key → the host's token.
    progress: FastMap<String, Value>,
    /// The server's task id → the downstream progress token key of the request that created it:
    /// a task's progress token stays valid until the task ends (2025-11-25).
    task_progress: FastMap<String, String>,
    /// Host requests waiting for Ready (already gated), with their downstream ids.
    queue: Vec<Value>,
    capabilities: Option<Value>,
    server_info: Option<Value>,
    /// Gate-filtered tools with their original names; kept while stopped (idle), so listing
    /// does not wake the server.
    tools: Option<Vec<Value>>,
    /// Pages of airlock's own `tools/list` in progress.
    listing: Option<Vec<Value>>,
    /// Items and encoded bytes that listing has read so far (bounded like a host's listing:
    /// `lists::MAX_LISTING_ITEMS`, `MAX_LISTING_BYTES`).
    listing_read: (usize, usize),
    /// The server said its tools changed while that listing was under way: list again once it
    /// ends (its pages may be from before the change).
    relist_after: bool,
    /// The protocol version the envelope of airlock's own listing for the gate named (`Single`,
    /// a 2026-07-28 host): whose calls a refusal of it answers.
    listed_in: Option<String>,
    last_call: Option<SystemTime>,
    calls: u64,
    /// Calls the gate refused (policy, a declined confirmation, a call without a tool name).
    denials: u64,
    /// Roots the host offered that the server cannot reach, already told ([`roots`]).
    roots_told: std::collections::BTreeSet<std::path::PathBuf>,
}

impl Downstream {
    /// Starts airlock's own listing of its tools.
    fn start_listing(&mut self) {
        self.listing = Some(Vec::new());
        self.listing_read = (0, 0);
    }

    /// Counts a page of airlock's own listing; the error to treat it as when the listing has
    /// gone past its bounds (a server answering every page with more tools and a next cursor
    /// would otherwise grow the session without end).
    fn listing_past_bounds(&mut self, result: &Value) -> Option<Value> {
        let tools = result.get("tools").and_then(Value::as_array);
        let items = tools.map_or(0, Vec::len);
        let bytes: usize = tools
            .into_iter()
            .flatten()
            .map(crate::mcp::encoded_len)
            .sum();
        let read = &mut self.listing_read;
        *read = (read.0.saturating_add(items), read.1.saturating_add(bytes));
        let (max_items, max_bytes) = lists::LISTING_BOUNDS;
        (read.0 > max_items || read.1 > max_bytes).then(|| {
            serde_json::json!({"message": format!(
                "the listing went past {max_items} tools or {} MiB; airlock stopped reading it",
                max_bytes >> 20
            )})
        })
    }

    /// Counts what `airlock status` shows from the gate's audit events: every `tools/call` gets
    /// exactly one decision event (in both topologies), a refused one a `denied` outcome.
    fn count(&mut self, event: &crate::audit::Event) {
        match event.event {
            crate::audit::EventKind::Decision => {
                self.calls += 1;
                self.last_call = Some(SystemTime::now());
            }
            crate::audit::EventKind::Outcome
                if event.outcome == Some(crate::audit::Outcome::Denied) =>
            {
                self.denials += 1;
            }
            _ => {}
        }
    }

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
    /// The host's request spoke the stateless era (its answer gets that era's shape).
    stateless: bool,
    items: BTreeMap<usize, Vec<Value>>,
    /// Encoded bytes of each server's pages so far (bounded: [`lists`]'s
    /// `MAX_LISTING_BYTES`).
    bytes: BTreeMap<usize, usize>,
    /// Servers whose listing arrived whole (its last page, no error, within the bounds): only
    /// those replace what they claimed before.
    complete: BTreeSet<usize>,
    deadline: Instant,
}

/// What the core knows about the host.
#[derive(Debug, Default)]
struct HostState {
    /// The host spoke (an `initialize`, or any first request in the stateless era).
    known: bool,
    initialized: bool,
    /// The host's `initialize` is at the server, not answered yet (`Single`; a gateway answers
    /// it itself, or keeps it in `pending_initialize`).
    initialize_forwarded: bool,
    capabilities: Value,
    client_info: Option<Value>,
    /// The era of the request being handled: each request's own (a 2026-07-28 request names
    /// its version in `_meta`; one that names none speaks the handshake era the host opened
    /// with). Answers that come later are shaped in their request's era, not this one: the
    /// HTTP face serves sessions of both eras through one core.
    version: Option<String>,
    /// The version the host's `initialize` opened with (the negotiated one in `Single`), if it
    /// sent one: what a request without a version of its own speaks.
    handshake_version: Option<String>,
    /// The capabilities that `initialize` declared: a request without a version of its own has
    /// them (a 2026-07-28 request declares its own in `_meta`).
    handshake_capabilities: Value,
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
    pub denials: u64,
    pub last_call: Option<String>,
    pub in_flight: usize,
}

/// The most host requests in flight whose era a gateway notes for their answers (a bound: a
/// host that never lets its requests be answered cannot grow the map without end).
const MAX_NOTED_ERAS: usize = 65_536;

pub struct Core {
    topology: Topology,
    servers: Vec<Downstream>,
    policy: Arc<Policy>,
    redactor: Arc<Redactor>,
    show_denied: bool,
    host: HostState,
    tools: NameTable,
    prompts: NameTable,
    /// Host-facing id key → (server, generation, the server's own id).
    inbound: FastMap<String, (usize, u64, Value)>,
    next_inbound: u64,
    /// Host request id key → (server, downstream id), for answers, cancellations, duplicates.
    host_requests: FastMap<String, (usize, Value)>,
    aggregations: Vec<Aggregation>,
    next_aggregation: u64,
    /// The host's `initialize` waiting for eager servers: (id, waiting, deadline).
    pending_initialize: Option<(Value, BTreeSet<usize>, Instant)>,
    /// Last aggregated list per kind, for airlock's own cursor: (generation, items).
    snapshots: FastMap<ListKind, (u64, Vec<Value>)>,
    snapshot_generation: u64,
    /// Which server each resource URI belongs to ([`resource_claims`]).
    resources: resource_claims::ResourceClaims,
    /// URI template (and its literal prefix) → server.
    templates: Vec<(String, String, usize)>,
    batches: Batches,
    /// Gateway: each host request in flight (by id key) and whether it spoke the stateless era,
    /// so that an answer given later is shaped for its own request (at most
    /// [`MAX_NOTED_ERAS`]; past that, an answer takes the latest request's era).
    stateless_requests: FastMap<String, bool>,
    /// Translations of server requests waiting for the host's retry, by `requestState`.
    parked: FastMap<String, mrtr::Parked>,
    /// Server requests for input waiting for a host request to carry them, per server.
    waiting_input: FastMap<usize, Vec<mrtr::Waiting>>,
    next_state: u64,
    /// The host's open `subscriptions/listen` (2026-07-28).
    listens: Vec<subscriptions::Listen>,
    /// Where the servers' pins live; `None`: no pins (the core's own tests).
    pins: Option<crate::pins::PinStore>,
    /// The host request being handled, as it came, when it may go on as its own bytes (see
    /// [`fast`]).
    host_line: Option<fast::HostLine>,
    /// Requests forwarded as the host's own bytes, whose parsed form is freed after the bytes
    /// are out ([`Core::free_spent`]) rather than on the call's way to its server.
    spent: Vec<Value>,
    /// The host closed its input (see [`Core::host_closed`]).
    host_gone: bool,
    /// When the host is gone: the latest its pending answers are awaited.
    answers_due_by: Option<Instant>,
    /// `Single`: the server's input was closed after the host's.
    server_input_closed: bool,
    /// How many times a server of each name has started in this session: a reload's new
    /// server of a name goes on counting (see [`Downstream::start`]).
    starts: FastMap<String, u64>,
    shutting_down: bool,
    /// See [`Core::trust_identity_meta`].
    trust_identity: bool,
    out: Vec<Action>,
}

impl Core {
    pub fn new(
        topology: Topology,
        specs: Vec<ServerSpec>,
        policy: Arc<Policy>,
        redactor: Arc<Redactor>,
        show_denied: bool,
        now: Instant,
    ) -> Core {
        let mut core = Core {
            topology,
            servers: Vec::new(),
            policy,
            redactor,
            show_denied,
            host: HostState {
                capabilities: Value::Object(Default::default()),
                ..HostState::default()
            },
            tools: NameTable::default(),
            prompts: NameTable::default(),
            inbound: FastMap::default(),
            next_inbound: 0,
            host_requests: FastMap::default(),
            aggregations: Vec::new(),
            next_aggregation: 0,
            pending_initialize: None,
            snapshots: FastMap::default(),
            snapshot_generation: 0,
            resources: resource_claims::ResourceClaims::default(),
            templates: Vec::new(),
            batches: Batches::default(),
            stateless_requests: FastMap::default(),
            parked: FastMap::default(),
            waiting_input: FastMap::default(),
            next_state: 0,
            listens: Vec::new(),
            pins: None,
            host_line: None,
            spent: Vec::new(),
            host_gone: false,
            answers_due_by: None,
            server_input_closed: false,
            starts: FastMap::default(),
            shutting_down: false,
            trust_identity: false,
            out: Vec::new(),
        };
        for spec in specs {
            core.add_server(spec, now);
        }
        core
    }

    /// The host is the HTTP face's mux: calls carry their caller's identity in `_meta`, for
    /// the policy's `[identities.NAME]` rules and the audit log.
    pub fn trust_identity_meta(&mut self) {
        self.trust_identity = true;
        for server in &mut self.servers {
            server.gate.trust_identity_meta();
        }
    }

    fn add_server(&mut self, spec: ServerSpec, now: Instant) -> usize {
        let mut gate = Gate::new(
            GateConfig {
                server: spec.name.clone(),
                show_denied: self.show_denied,
                tool_timeout: spec.tool_timeout,
                paths: spec.paths.clone(),
            },
            self.policy.clone(),
            self.redactor.clone(),
        );
        if let Some(store) = &self.pins {
            gate.set_pins(self.pin_guard(&spec.name, store.clone()));
        }
        if self.trust_identity {
            gate.trust_identity_meta();
        }
        let mut life = Lifecycle::new(spec.startup_timeout, spec.idle_timeout, spec.eager, now);
        life.install_allowance = spec.install_allowance;
        if let Some(reason) = &spec.refused {
            life.failed(reason.clone(), true, now);
        }
        self.servers.push(Downstream {
            name: spec.name.clone(),
            spec,
            life,
            gate,
            alive: false,
            retiring: false,
            handshake_sent: false,
            start: 0,
            next_id: 0,
            outbound: FastMap::default(),
            progress: FastMap::default(),
            task_progress: FastMap::default(),
            queue: Vec::new(),
            capabilities: None,
            server_info: None,
            tools: None,
            listing: None,
            listing_read: (0, 0),
            relist_after: false,
            listed_in: None,
            last_call: None,
            calls: 0,
            denials: 0,
            roots_told: Default::default(),
        });
        self.servers.len() - 1
    }

    fn single(&self) -> bool {
        self.topology == Topology::Single
    }

    /// Pins every server's tools, prompts and resource templates in `store` (see
    /// [`crate::pins`]): what changed since it was pinned is hidden and refused.
    pub fn enable_pins(&mut self, store: crate::pins::PinStore) {
        for index in 0..self.servers.len() {
            let guard = self.pin_guard(&self.servers[index].name, store.clone());
            self.servers[index].gate.set_pins(guard);
        }
        self.pins = Some(store);
    }

    fn pin_guard(&self, server: &str, store: crate::pins::PinStore) -> crate::pins::PinGuard {
        let settings = crate::pins::Settings::from_policy(&self.policy.pins);
        crate::pins::PinGuard::new(server, settings, store)
    }

    /// How many of the host's requests the servers have been sent and not answered yet, counted
    /// up to `at_most` (airlock's own requests do not count: some are never answered).
    pub fn host_requests_at_servers(&self, at_most: usize) -> usize {
        self.servers
            .iter()
            .flat_map(|server| server.outbound.values())
            .filter(|origin| matches!(origin, Origin::Host { .. }))
            .take(at_most)
            .count()
    }

    /// `airlock run`'s shape of session.
    pub fn is_single(&self) -> bool {
        self.single()
    }

    /// Who makes the tasks of server `index` now: its name and current start.
    fn task_maker(&self, index: usize) -> tasks::Maker<'_> {
        let server = &self.servers[index];
        tasks::Maker {
            server: &server.name,
            start: server.start,
            separator: self.separator(),
        }
    }

    /// The separator of namespaced names (a gateway's; `Single` renames nothing).
    fn separator(&self) -> &str {
        match &self.topology {
            Topology::Gateway { separator } => separator,
            Topology::Single => "__",
        }
    }

    /// The shell could not deliver a request (its server's input is full): it is answered here.
    pub fn on_undeliverable(&mut self, server: usize, down_key: &str, why: &str, now: Instant) {
        self.undeliverable(server, down_key, why, now);
    }

    pub fn take_actions(&mut self) -> Vec<Action> {
        self.retire_finished();
        std::mem::take(&mut self.out)
    }

    /// Moves the pending actions into `into` (emptied first). The two buffers swap, so neither
    /// is reallocated on every message.
    pub fn drain_actions(&mut self, into: &mut Vec<Action>) {
        self.retire_finished();
        into.clear();
        std::mem::swap(&mut self.out, into);
    }

    /// Every server slot's name (reloads add slots; retired ones keep theirs).
    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    /// The current (not retiring) server of that name.
    pub fn server_index(&self, name: &str) -> Option<usize> {
        self.servers
            .iter()
            .position(|s| s.name == name && !s.retiring)
    }

    pub fn phase(&self, server: usize) -> Option<Phase> {
        self.servers.get(server).map(|s| s.life.phase())
    }

    /// The snapshot `airlock status` shows (current servers only).
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .filter(|s| !s.retiring)
            .map(|s| ServerStatus {
                name: s.name.clone(),
                state: s.life.phase(),
                tools: s.tools.as_ref().map(Vec::len),
                last_error: s.life.last_error.clone(),
                restarts: s.life.restarts,
                consecutive_failures: s.life.consecutive_failures,
                calls: s.calls,
                denials: s.denials,
                last_call: s.last_call.map(crate::audit::event::rfc3339),
                in_flight: s.gate.in_flight(),
            })
            .collect()
    }

    /// Whether the process of `generation` is the one the core wants running (the shell stops
    /// a spawn that finished after its server was given up or shut down).
    pub fn wants(&self, index: usize, generation: u64) -> bool {
        self.servers
            .get(index)
            .is_some_and(|s| s.alive && s.life.generation == generation)
    }

    fn host_facts(&self) -> HostFacts {
        HostFacts {
            version: self.host.version.clone(),
            elicitation: crate::mcp::version::elicitation_form_supported(&self.host.capabilities),
        }
    }

    /// Tells every gate what the core learned about the host.
    fn share_host_facts(&mut self) {
        let facts = self.host_facts();
        for server in &mut self.servers {
            server.gate.set_host(facts.clone());
        }
    }

    // ------------------------------------------------------------------ answers to the host

    /// Every message to the host goes through here, so that the answers to a batch's requests
    /// leave together, and each with only the members of its kind (a server's `"ID"` beside its
    /// `"id"` never reaches a host that reads keys regardless of case).
    fn send_host(&mut self, message: Value) {
        // An answer airlock gives later (a refusal after the user's answer, an error when a
        // server died) is shaped for its own request's era, which a gateway noted.
        let noted = self
            .answered_request(&message)
            .and_then(|key| self.stateless_requests.get(&key).copied());
        let stateless = noted.unwrap_or_else(|| era::stateless(&self.host));
        self.send_host_in(message, stateless);
    }

    /// The id key of the host request `message` answers, in a gateway that notes eras.
    fn answered_request(&self, message: &Value) -> Option<String> {
        if self.stateless_requests.is_empty() || message.get("method").is_some() {
            return None;
        }
        message.get("id").map(crate::mcp::id_key)
    }

    /// Notes the era of host request `id` (gateway), for its answer.
    fn note_request_era(&mut self, id: &Value) {
        if matches!(self.topology, Topology::Gateway { .. })
            && self.stateless_requests.len() < MAX_NOTED_ERAS
        {
            let stateless = era::stateless(&self.host);
            self.stateless_requests
                .insert(crate::mcp::id_key(id), stateless);
        }
    }

    /// [`Core::send_host`] for an answer to a request of the given era (an answer that comes
    /// after other requests were handled: theirs may have spoken another).
    fn send_host_in(&mut self, mut message: Value, stateless: bool) {
        if let Some(key) = self.answered_request(&message) {
            self.stateless_requests.remove(&key);
        }
        crate::mcp::message::keep_envelope_members(&mut message);
        if !self.batches.member.is_empty()
            && let Some(key) = message.get("id").map(crate::mcp::id_key)
            && message.get("method").is_none()
            && let Some(batch) = self.batches.member.remove(&key)
            && let Some((remaining, answers)) = self.batches.open.get_mut(&batch)
        {
            answers.push(message);
            *remaining -= 1;
            if *remaining == 0
                && let Some((_, answers)) = self.batches.open.remove(&batch)
            {
                self.out.push(Action::ToHost(Value::Array(answers)));
            }
            return;
        }
        let message = era::shape_for_host(message, stateless);
        self.out.push(Action::ToHost(message));
    }

    fn reply(&mut self, id: Value, result: Value) {
        self.send_host(result_response(id, result));
    }

    fn reply_error(&mut self, id: Value, code: i64, text: &str) {
        self.send_host(error_response(id, code, text, None));
    }

    /// An answer airlock gives a host request its gate tracks (so the gate records it).
    fn answer_through_gate(&mut self, index: usize, answer: Value, now: Instant) {
        let mut fx = crate::gate::Effects::default();
        let verdict = self.servers[index].gate.on_server(answer, now, &mut fx);
        self.apply_gate(index, fx, now);
        if let crate::gate::Verdict::Forward(answer) = verdict {
            self.send_host(answer);
        }
    }

    /// Every event of the session leaves the core here, sealed: a tool name, request id or
    /// reason a host sent (or a refusal quoting one) is redacted and capped as arguments are.
    fn audit(&mut self, mut event: Event) {
        self.redactor.seal(&mut event);
        self.out.push(Action::Audit(Box::new(event)));
    }
}
