//! Many client sessions, one gateway: the session core serves one host, so the listener presents
//! every session to it as that one host, and sorts what comes back. Pure: messages in, [`Out`]s
//! out.
//!
//! - **Ids.** Each session's request ids are replaced by `airlock-h<session>-<n>` on the way in
//!   and restored on the way out, so two clients using id 1 never meet; progress tokens likewise.
//!   The stdio host beside the listener keeps its own ids ([`Mux::keep_ids`]), as on stdio alone.
//! - **Handshake.** The first session's `initialize` goes to the core, declaring every client
//!   capability (sampling, elicitation, roots), so servers may use them; every later session is
//!   answered from that result, at its own protocol version. Whether a session declared a
//!   capability is checked when a request for it comes (below).
//! - **Server-initiated requests** (sampling, elicitation, roots, airlock's own `ask`) go to the
//!   session whose request is in flight on that server (airlock's `ask` names its call). A
//!   request the mux cannot place (a `resources/read`, `completion/complete`, a listing: the core
//!   routes those) counts as in flight on every server. When no session or several have one there, or that session did not declare the capability, the
//!   request is refused here: elicitation declined, anything else an error. Only that session
//!   may answer it.
//! - **Notifications.** `list_changed` goes to every session; progress and cancellation to the
//!   session they belong to; `resources/updated` to the sessions subscribed to the resource;
//!   server log messages only to the one session with a request in flight on that server.
//! - **Subscriptions** are per session: the core sees the first `subscribe` and the last
//!   `unsubscribe` of a resource.
//! - **Identity.** Every request carries its session's authenticated identity to the core in
//!   `params._meta["airlock/identity"]`; a client's own value there is always removed first.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use super::hub::SessionKey;
use super::retry_states::{self, RetryStates};
use super::tasks::{Owner, TaskOwners, named_task, related_task};
use crate::mcp::message::{
    Class, classify, code, error_response, id_key, request, result_response,
};
use crate::mcp::version::HANDSHAKE_VERSIONS;
use crate::session::core::{LATEST_HANDSHAKE, META_SERVER, SessionEra, request_refusal};

/// Why a request of the gateway (sampling, elicitation, roots) cannot go to one client: the
/// text is the reason of the refusal the server gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Unroutable {
    #[error("the call it is about is no longer in flight")]
    CallEnded,
    #[error("the task it is about belongs to no session here (or to another server)")]
    TaskNotHere,
    #[error("it names no server")]
    NoServer,
    #[error("no client has a request in flight on server `{server}`")]
    NoCaller { server: String },
    #[error(
        "{count} clients have requests in flight on server `{server}`, so airlock cannot tell which one it is for"
    )]
    ManyCallers { count: usize, server: String },
    #[error("its session has ended")]
    SessionEnded,
    #[error("that client did not declare the `{0}` capability")]
    Undeclared(&'static str),
}

pub use crate::gate::{META_IDENTITY, META_REQUEST};

/// What the mux asks its shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// To the session core (the gateway's one host input).
    ToCore(Value),
    /// To one session; `related` is the client request it belongs to, when known.
    ToSession {
        key: SessionKey,
        message: Value,
        related: Option<Value>,
    },
}

#[derive(Debug)]
struct Client {
    identity: Option<String>,
    capabilities: Value,
    /// The version the session negotiated (handshake era).
    version: Option<String>,
    stateless: bool,
    initialized: bool,
    /// The local stdio host: its request ids reach the core (and the audit log) as it sent them.
    keeps_ids: bool,
    /// It sent a 2026-07-28 request (the stdio host: one connection speaks one era).
    spoke_stateless: bool,
}

/// A client request the core is working on.
#[derive(Debug, Clone)]
struct InFlight {
    key: SessionKey,
    id: Value,
    /// The server it is for, when the method names one (`tools/call`, `prompts/get`).
    server: Option<String>,
    /// A request no server works on (airlock answers it itself): it makes its session no
    /// caller on any server, though it names none.
    on_no_server: bool,
    /// A 2026-07-28 `subscriptions/listen`, open as long as its client listens.
    listen: bool,
    progress: Option<Value>,
    /// A `tasks/list`: its answer keeps only the session's own tasks.
    lists_tasks: bool,
    /// The task a `tasks/get`, `tasks/result` or `tasks/cancel` names: a server's request about
    /// that task goes on this request's stream.
    task: Option<String>,
}

impl InFlight {
    fn may_be_on(&self, server: &str) -> bool {
        !self.on_no_server && self.server.as_deref().is_none_or(|named| named == server)
    }
}

/// `subscriptions/listen` streams one client (owner, as for tasks) may keep open: each holds a
/// connection for as long as it listens, and connections are a shared resource.
const MAX_LISTENS: usize = 16;

#[derive(Debug, Default)]
enum Handshake {
    #[default]
    NotSent,
    /// The core is answering; these sessions wait: (session, id, requested version).
    Waiting(Vec<(SessionKey, Value, Option<String>)>),
    Done(Value),
}

#[derive(Debug, Default)]
pub struct Mux {
    separator: String,
    clients: HashMap<SessionKey, Client>,
    /// Rewritten id key → the request.
    requests: HashMap<String, InFlight>,
    next: u64,
    /// The core's requests to clients (id key) → the session that got it, and its method.
    inbound: HashMap<String, (SessionKey, String)>,
    handshake: Handshake,
    initialize_id: Option<String>,
    initialized_sent: bool,
    /// Resource URI → the sessions subscribed to it.
    subscriptions: HashMap<String, BTreeSet<SessionKey>>,
    /// Ids of requests the mux sent on its own behalf (answers are dropped).
    own: BTreeSet<String>,
    /// The `requestState` tokens handed out, and whose each is.
    retry_states: RetryStates,
    /// The session that created each task (`tasks.rs`).
    tasks: TaskOwners,
}

/// The client capabilities the core is told: all of them (see the module docs).
fn every_capability() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
}

impl Mux {
    pub fn new(separator: &str) -> Mux {
        Mux {
            separator: separator.to_string(),
            ..Mux::default()
        }
    }

    pub fn open(&mut self, key: SessionKey, identity: Option<String>, stateless: bool) {
        self.clients.insert(
            key,
            Client {
                identity,
                capabilities: json!({}),
                version: None,
                stateless,
                initialized: false,
                keeps_ids: false,
                spoke_stateless: false,
            },
        );
    }

    /// Session `key` (the stdio host beside the listener) keeps its own request ids: the audit
    /// log then has the ids that host used, as `airlock serve` on stdio alone does. Only an id
    /// that could be taken for one of the mux's own (`airlock-h...`) or that is in flight already
    /// is replaced.
    pub fn keep_ids(&mut self, key: SessionKey) {
        if let Some(client) = self.clients.get_mut(&key) {
            client.keeps_ids = true;
        }
    }

    /// The id session `key`'s request `id` has at the core.
    fn core_id(&mut self, key: SessionKey, id: &Value) -> Value {
        let keeps = self.clients.get(&key).is_some_and(|c| c.keeps_ids);
        let reserved = id
            .as_str()
            .is_some_and(|text| text.starts_with("airlock-h"));
        if keeps && !reserved && !self.requests.contains_key(&id_key(id)) {
            id.clone()
        } else {
            self.fresh_id(key)
        }
    }

    fn fresh_id(&mut self, key: SessionKey) -> Value {
        self.next += 1;
        Value::String(format!("airlock-h{key}-{}", self.next))
    }

    /// A message from session `key`'s client.
    pub fn from_client(&mut self, key: SessionKey, mut message: Value) -> Vec<Out> {
        strip_identity(&mut message);
        match classify(&message) {
            Ok(Class::Request { id, method }) => {
                let (id, method) = (id.clone(), method.to_string());
                self.client_request(key, message, id, &method)
            }
            Ok(Class::Notification { method }) => {
                let method = method.to_string();
                self.client_notification(key, message, &method)
            }
            Ok(Class::Response { id } | Class::Error { id }) => {
                // Only the session a request went to may answer it.
                let id_key = id_key(id);
                if self
                    .inbound
                    .get(&id_key)
                    .is_some_and(|(owner, _)| *owner == key)
                {
                    self.inbound.remove(&id_key);
                    vec![Out::ToCore(message)]
                } else {
                    Vec::new()
                }
            }
            Ok(Class::Batch(_)) | Err(_) => {
                let answer = error_response(
                    Value::Null,
                    code::INVALID_REQUEST,
                    "one JSON-RPC message at a time (batches are not supported here)",
                    None,
                );
                vec![to(key, answer, None)]
            }
        }
    }

    fn client_request(
        &mut self,
        key: SessionKey,
        mut message: Value,
        id: Value,
        method: &str,
    ) -> Vec<Out> {
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        if let Some((code, text, data)) = self.stdio_era_refusal(key, method, &params) {
            return vec![to(key, error_response(id, code, &text, data), None)];
        }
        // A session of a version without the 2025-11-25 tasks (it negotiated an earlier one) has
        // no `tasks/*`, and its requests run plain, as on stdio.
        let without_tasks = self
            .clients
            .get(&key)
            .and_then(|client| client.version.as_deref())
            .is_some_and(|version| !crate::mcp::version::has_tasks(version));
        if without_tasks {
            if matches!(
                method,
                "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/list"
            ) {
                let text = format!("Method not found: {method} (tasks are of protocol 2025-11-25)");
                return vec![to(
                    key,
                    error_response(id, code::METHOD_NOT_FOUND, &text, None),
                    None,
                )];
            }
            crate::session::core::make_plain(&mut message);
        }
        match method {
            // The handshake is forwarded with airlock's own capabilities written into its
            // params, which must be an object to take them (a `params: []` aborted the gateway).
            "initialize" if !(params.is_object() || params.is_null()) => {
                let answer = error_response(
                    id,
                    code::INVALID_PARAMS,
                    "initialize: params must be an object",
                    None,
                );
                return vec![to(key, answer, None)];
            }
            "initialize" => return self.initialize(key, message, id, &params),
            "resources/subscribe" | "resources/unsubscribe" => {
                if let Some(local) = self.subscription(key, method, &id, &params) {
                    return local;
                }
            }
            // Another's task is unknown to this client, as a server says of any task.
            "tasks/get" | "tasks/result" | "tasks/cancel"
                if named_task(&message).and_then(|task| self.tasks.owner(task))
                    != Some(&self.task_owner(key)) =>
            {
                let answer = error_response(id, code::INVALID_PARAMS, "Unknown task", None);
                return vec![to(key, answer, None)];
            }
            _ => {}
        }
        if method == "subscriptions/listen" {
            let owner = self.task_owner(key);
            let open = self
                .requests
                .values()
                .filter(|r| r.listen && self.task_owner(r.key) == owner)
                .count();
            if open >= MAX_LISTENS {
                let why = format!(
                    "this client has {open} subscriptions/listen streams open already; close one first"
                );
                let answer = error_response(id, code::INVALID_REQUEST, &why, None);
                return vec![to(key, answer, None)];
            }
        }
        if let Some(token) = retry_states::carried(&message)
            && !self.retry_states.take(&self.task_owner(key), token)
        {
            let why = "the requestState is unknown or expired: send the request again without it";
            let answer = error_response(id, code::INVALID_PARAMS, why, None);
            return vec![to(key, answer, None)];
        }
        let fresh = self.core_id(key, &id);
        let progress = params.pointer("/_meta/progressToken").cloned();
        if progress.is_some() {
            // Tokens are the request's own id, so they are as unique as the ids.
            set_meta(&mut message, "progressToken", fresh.clone());
        }
        if let Some(identity) = self.clients.get(&key).and_then(|c| c.identity.clone()) {
            set_meta(&mut message, META_IDENTITY, Value::String(identity));
        }
        message["id"] = fresh.clone();
        let server = self.server_of(method, &params);
        self.requests.insert(
            id_key(&fresh),
            InFlight {
                key,
                id,
                server,
                progress,
                lists_tasks: method == "tasks/list",
                // A 2026-07-28 listen stays open as long as the client listens.
                on_no_server: matches!(method, "subscriptions/listen" | "ping" | "server/discover"),
                listen: method == "subscriptions/listen",
                task: named_task(&message).map(str::to_string),
            },
        );
        vec![Out::ToCore(message)]
    }

    /// The stdio host beside the listener is one connection, held to one era as on stdio alone
    /// ([`request_refusal`]); an HTTP session's requests are checked by the transport. Notes a
    /// 2026-07-28 request the stdio host sends.
    fn stdio_era_refusal(
        &mut self,
        key: SessionKey,
        method: &str,
        params: &Value,
    ) -> Option<crate::session::core::Refusal> {
        let waiting = matches!(&self.handshake, Handshake::Waiting(waiting)
            if waiting.iter().any(|(waiting_key, _, _)| *waiting_key == key));
        let client = self
            .clients
            .get_mut(&key)
            .filter(|client| client.keeps_ids)?;
        let era = if client.version.is_some() || waiting {
            SessionEra::Handshake
        } else if client.spoke_stateless {
            SessionEra::Stateless
        } else {
            SessionEra::Fresh
        };
        let refusal = request_refusal(method, Some(params), era);
        if refusal.is_none()
            && crate::mcp::version::request_version(Some(params)).is_some_and(|v| {
                crate::mcp::version::era_of(v) == crate::mcp::version::Era::Stateless
            })
        {
            client.spoke_stateless = true;
        }
        refusal
    }

    fn server_of(&self, method: &str, params: &Value) -> Option<String> {
        let name = match method {
            "tools/call" | "prompts/get" => params.get("name")?.as_str()?,
            // A task is on the server it was created on: a long `tasks/result` poll is no
            // caller on every other server.
            "tasks/get" | "tasks/result" | "tasks/cancel" => {
                let task = params.get("taskId")?.as_str()?;
                return self.tasks.server_of(task).map(str::to_string);
            }
            _ => return None,
        };
        name.split_once(self.separator.as_str())
            .map(|(server, _)| server.to_string())
    }

    fn initialize(
        &mut self,
        key: SessionKey,
        mut message: Value,
        id: Value,
        params: &Value,
    ) -> Vec<Out> {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(String::from);
        // A session has one handshake, as on stdio: a second `initialize` (answered, or waiting
        // for the gateway's) would change the version and capabilities it was answered with.
        let answered = self
            .clients
            .get(&key)
            .is_some_and(|client| client.version.is_some());
        let waiting = matches!(&self.handshake, Handshake::Waiting(waiting)
            if waiting.iter().any(|(waiting_key, _, _)| *waiting_key == key));
        if answered || waiting {
            let text = "initialize: this session's handshake is under way or done, and a session has one (to change the protocol version, start a new session)";
            let refusal = crate::mcp::error_response(
                id,
                crate::mcp::message::code::INVALID_REQUEST,
                text,
                None,
            );
            return vec![to(key, refusal, None)];
        }
        if let Some(client) = self.clients.get_mut(&key) {
            client.capabilities = params.get("capabilities").cloned().unwrap_or(json!({}));
        }
        match &mut self.handshake {
            Handshake::Done(result) => {
                let result = result.clone();
                self.answer_initialize(key, id, requested, result)
            }
            Handshake::Waiting(waiting) => {
                waiting.push((key, id, requested));
                Vec::new()
            }
            Handshake::NotSent => {
                self.handshake = Handshake::Waiting(vec![(key, id, requested)]);
                let fresh = self.fresh_id(key);
                self.initialize_id = Some(id_key(&fresh));
                message["id"] = fresh;
                message["params"]["capabilities"] = every_capability();
                // The gateway's one handshake is in the latest version whichever session
                // opened first; each session is answered in its own (`answer_initialize`).
                message["params"]["protocolVersion"] = Value::String(LATEST_HANDSHAKE.to_string());
                vec![Out::ToCore(message)]
            }
        }
    }

    fn answer_initialize(
        &mut self,
        key: SessionKey,
        id: Value,
        requested: Option<String>,
        mut result: Value,
    ) -> Vec<Out> {
        let version = match requested {
            Some(v) if HANDSHAKE_VERSIONS.contains(&v.as_str()) => v,
            _ => LATEST_HANDSHAKE.to_string(),
        };
        result["protocolVersion"] = Value::String(version.clone());
        // Tasks are offered only to a session of the version that has them (2025-11-25).
        if !crate::mcp::version::has_tasks(&version)
            && let Some(capabilities) = result
                .get_mut("capabilities")
                .and_then(Value::as_object_mut)
        {
            capabilities.remove("tasks");
        }
        if let Some(client) = self.clients.get_mut(&key) {
            client.version = Some(version);
        }
        vec![to(key, result_response(id, result), None)]
    }

    /// `Some`: answered here (not the first subscriber, or not the last to leave).
    fn subscription(
        &mut self,
        key: SessionKey,
        method: &str,
        id: &Value,
        params: &Value,
    ) -> Option<Vec<Out>> {
        let uri = params.get("uri")?.as_str()?.to_string();
        let subscribers = self.subscriptions.entry(uri.clone()).or_default();
        let forward = if method == "resources/subscribe" {
            let first = subscribers.is_empty();
            subscribers.insert(key);
            first
        } else {
            let was = subscribers.remove(&key);
            let last = was && subscribers.is_empty();
            if subscribers.is_empty() {
                self.subscriptions.remove(&uri);
            }
            last
        };
        if forward {
            None
        } else {
            Some(vec![to(key, result_response(id.clone(), json!({})), None)])
        }
    }

    fn client_notification(
        &mut self,
        key: SessionKey,
        mut message: Value,
        method: &str,
    ) -> Vec<Out> {
        match method {
            "notifications/initialized" => {
                if let Some(client) = self.clients.get_mut(&key) {
                    client.initialized = true;
                }
                if std::mem::replace(&mut self.initialized_sent, true) {
                    return Vec::new();
                }
                vec![Out::ToCore(message)]
            }
            "notifications/cancelled" => {
                let Some(original) = message.pointer("/params/requestId").cloned() else {
                    return Vec::new();
                };
                let Some(fresh) = self.find_request(key, &original) else {
                    return Vec::new();
                };
                // The request is over for the client: its id is free, a late answer dropped.
                // Its server may go on with it (and ask about it) until it sees the cancel.
                if let Some(given_up) = self.requests.remove(&id_key(&fresh))
                    && !given_up.on_no_server
                {
                    let owner = self.task_owner(key);
                    self.retry_states.note_given_up(
                        owner,
                        given_up.server,
                        std::time::Instant::now(),
                    );
                }
                message["params"]["requestId"] = fresh;
                vec![Out::ToCore(message)]
            }
            _ => vec![Out::ToCore(message)],
        }
    }

    fn find_request(&self, key: SessionKey, original: &Value) -> Option<Value> {
        let wanted = id_key(original);
        self.requests
            .iter()
            .find(|(_, r)| r.key == key && id_key(&r.id) == wanted)
            .and_then(|(fresh, _)| original_id(fresh))
    }

    /// The session ended: its requests are cancelled, its subscriptions released, requests
    /// sent to it refused.
    pub fn close(&mut self, key: SessionKey) -> Vec<Out> {
        let owner = self.task_owner(key);
        self.clients.remove(&key);
        self.tasks.forget(key);
        let mut out = Vec::new();
        let mine: Vec<String> = self
            .requests
            .iter()
            .filter(|(_, r)| r.key == key)
            .map(|(fresh, _)| fresh.clone())
            .collect();
        let now = std::time::Instant::now();
        for fresh in mine {
            if let Some(given_up) = self.requests.remove(&fresh)
                && !given_up.on_no_server
            {
                self.retry_states
                    .note_given_up(owner.clone(), given_up.server, now);
            }
            if let Some(id) = fresh.strip_prefix("s:") {
                out.push(Out::ToCore(crate::mcp::message::notification(
                    "notifications/cancelled",
                    json!({"requestId": id, "reason": "the client's session ended"}),
                )));
            }
        }
        let inbound: Vec<(String, String)> = self
            .inbound
            .iter()
            .filter(|(_, (owner, _))| *owner == key)
            .map(|(id, (_, method))| (id.clone(), method.clone()))
            .collect();
        for (id_key, method) in inbound {
            self.inbound.remove(&id_key);
            if let Some(id) = original_id(&id_key) {
                out.push(Out::ToCore(refusal(
                    id,
                    &method,
                    "the client's session ended",
                )));
            }
        }
        let uris: Vec<String> = self.subscriptions.keys().cloned().collect();
        for uri in uris {
            let Some(subscribers) = self.subscriptions.get_mut(&uri) else {
                continue;
            };
            if subscribers.remove(&key) && subscribers.is_empty() {
                self.subscriptions.remove(&uri);
                let id = self.fresh_id(0);
                self.own.insert(id_key(&id));
                out.push(Out::ToCore(request(
                    id,
                    "resources/unsubscribe",
                    json!({"uri": uri}),
                )));
            }
        }
        out
    }

    /// Sessions the mux knows.
    pub fn sessions(&self) -> usize {
        self.clients.len()
    }
}

fn to(key: SessionKey, message: Value, related: Option<Value>) -> Out {
    Out::ToSession {
        key,
        message,
        related,
    }
}

/// The answer when a request from the gateway cannot go to a client (fail closed).
fn refusal(id: Value, method: &str, why: &str) -> Value {
    if method == "elicitation/create" {
        return result_response(id, json!({"action": "decline"}));
    }
    error_response(
        id,
        code::METHOD_NOT_FOUND,
        &format!("airlock cannot pass this request to a client: {why}"),
        None,
    )
}

/// The id an id key was made from (`s:` strings, `n:` numbers).
fn original_id(key: &str) -> Option<Value> {
    if let Some(text) = key.strip_prefix("s:") {
        return Some(Value::String(text.to_string()));
    }
    key.strip_prefix("n:")
        .and_then(|n| serde_json::from_str(n).ok())
}

fn strip_identity(message: &mut Value) {
    if let Some(meta) = message
        .pointer_mut("/params/_meta")
        .and_then(Value::as_object_mut)
    {
        meta.remove(META_IDENTITY);
    }
}

fn set_meta(message: &mut Value, key: &str, value: Value) {
    let Some(params) = message
        .as_object_mut()
        .map(|m| m.entry("params").or_insert_with(|| json!({})))
    else {
        return;
    };
    if !params.is_object() {
        return;
    }
    let meta = params.as_object_mut().map(|p| {
        p.entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()))
    });
    if let Some(Value::Object(meta)) = meta {
        meta.insert(key.to_string(), value);
    }
}

#[path = "mux_upstream.rs"]
mod upstream;

#[cfg(test)]
#[path = "mux_tests.rs"]
mod tests;
