//! Asking a 2026-07-28 host for input on behalf of a handshake-era server (gateway).
//!
//! A gateway speaks the handshake era to its servers, so a server asks the client for input with
//! a request of its own (`sampling/createMessage`, `elicitation/create`, `roots/list`). A
//! 2026-07-28 host takes no server→client requests: it is asked through the result of one of its
//! own requests (multi round-trip requests). airlock translates:
//!
//! - a server request that arrives while a host `tools/call`, `prompts/get` or `resources/read`
//!   is in flight to that server (the most recently sent, when there are several) answers that
//!   request with an `InputRequiredResult` (the server's request as an input request, and an
//!   airlock-minted `requestState`); the server's own request keeps running;
//! - one that arrives while such a translation waits for the host's retry is asked in the next
//!   round, on that retry;
//! - one that arrives with no host request to carry it (a server asking for roots right after
//!   its handshake) gets an error, as from a host without the capability: the server asks again
//!   when a request of the host needs it;
//! - the host's retry (a new id, the same request, `inputResponses`, the echoed `requestState`)
//!   answers the server's requests with the host's responses, and the server's running request
//!   continues: its final answer goes to the retry.
//!
//! The retry is a request like any other: a `tools/call` retry is decided and audited again.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Core, Origin, era};
use crate::mcp::Field;
use crate::mcp::message::{code, error_response, id_key, notification, result_response};

/// Prefix of airlock's `requestState` tokens.
pub const STATE_PREFIX: &str = "airlock-mrtr-";
/// How long airlock keeps a translation waiting for the host's retry when the server has no
/// `tool_timeout`.
pub(super) const DEFAULT_WAIT: Duration = Duration::from_secs(180);
/// A server's requests for input that wait for the host's next round (while a translation of
/// its waits for the host's retry) are at most this many and this large in all: past either, a
/// further one gets an error, so a server cannot fill the gateway's memory with requests the
/// host has not even been asked yet.
pub(super) const MAX_WAITING_INPUTS: usize = 16;
pub(super) const MAX_WAITING_INPUT_BYTES: usize = 4 * 1024 * 1024;
/// The server requests a 2026-07-28 host is asked through input requests.
pub const INPUT_METHODS: [&str; 3] = ["sampling/createMessage", "elicitation/create", "roots/list"];

/// A host request in flight to a server that a question of that server could be put on.
struct Carrier<'a> {
    /// The order it was sent in (the server's own id airlock gave it).
    order: u64,
    down_key: &'a str,
    host_id: &'a Value,
    declared: Option<&'a Value>,
    stateless: bool,
}

/// A translation waiting for the host's retry.
#[derive(Debug)]
pub(super) struct Parked {
    server: usize,
    generation: u64,
    /// The server's start then (see [`Downstream::start`](super::Downstream)): a task its final
    /// answer creates is that process's, even if the server has started again since.
    start: u64,
    /// Input key → the server's own request id.
    asks: Vec<(String, Value)>,
    /// The server's request (downstream key) that continues once the host answers, if any.
    continuing: Option<String>,
    /// Its final answer, if it came before the host's retry.
    answer: Option<Value>,
    deadline: Instant,
}

/// What a server asked that no host request could carry yet.
#[derive(Debug)]
pub(super) struct Waiting {
    pub generation: u64,
    pub id: Value,
    pub request: Value,
    /// The request's encoded size.
    pub bytes: usize,
}

/// Whether a host request may be answered with an `InputRequiredResult`.
pub fn carries_input(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

/// The `requestState` of a retry, if airlock minted it.
fn retry_state(message: &Value) -> Option<String> {
    let state = message.at(&["params", "requestState"])?.as_str()?;
    state.starts_with(STATE_PREFIX).then(|| state.to_string())
}

/// The client capability a server's request for input needs, when `declared` lacks it.
fn undeclared(method: &str, declared: &Value) -> Option<&'static str> {
    let needed = match method {
        "sampling/createMessage" => "sampling",
        "elicitation/create" => "elicitation",
        "roots/list" => "roots",
        _ => return None,
    };
    declared.get(needed).is_none().then_some(needed)
}

/// The input request a server's request becomes.
fn input_request(message: &Value) -> Value {
    let mut request = Map::new();
    request.insert("method".into(), message["method"].clone());
    if let Some(params) = message.field("params") {
        request.insert("params".into(), params.clone());
    }
    Value::Object(request)
}

impl Core {
    /// Whether a server's request for client input is asked through a result (2026-07-28)
    /// rather than passed on as a request: its latest request of the host that could carry a
    /// question spoke that era, or, with none in flight, a translation of that server's waits
    /// for its retry, or the host's latest request spoke it. The HTTP face serves sessions of
    /// both eras through one core: the question goes the way its call understands. A question
    /// about a task (`related-task`) is never put on a call: it is its task creator's, whoever
    /// else has a call there, and goes on as a request (behind the HTTP face, to the creator's
    /// session; refused when that cannot be told).
    pub(super) fn asks_through_results(&self, index: usize, question: &Value) -> bool {
        if !self.single()
            && self.trust_identity
            && question
                .at(&["params", "_meta", crate::mcp::RELATED_TASK])
                .is_some()
        {
            return false;
        }
        let latest_carrier = self
            .carriers(index)
            .max_by_key(|carrier| carrier.order)
            .map(|carrier| carrier.stateless);
        match latest_carrier {
            Some(stateless) => stateless,
            None => self.parked.values().any(|p| p.server == index) || era::stateless(&self.host),
        }
    }

    /// The host requests in flight to server `index` that could carry a question of it.
    fn carriers(&self, index: usize) -> impl Iterator<Item = Carrier<'_>> {
        self.servers[index]
            .outbound
            .iter()
            .filter_map(|(key, origin)| match origin {
                Origin::Host {
                    host_id,
                    input_carrier: true,
                    stateless,
                    declared,
                    ..
                } if self.host_requests.contains_key(&id_key(host_id)) => Some(Carrier {
                    order: parse_down_id(key).as_u64().unwrap_or(0),
                    down_key: key,
                    host_id,
                    declared: declared.as_ref(),
                    stateless: *stateless,
                }),
                _ => None,
            })
    }

    /// A server's request for client input, for a 2026-07-28 host.
    pub(super) fn ask_host_for_input(
        &mut self,
        index: usize,
        id: Value,
        message: Value,
        now: Instant,
    ) {
        let generation = self.servers[index].life.generation;
        let carrier = self
            .carriers(index)
            .filter(|carrier| carrier.stateless)
            .max_by_key(|carrier| carrier.order)
            .map(|carrier| {
                let Carrier {
                    order,
                    down_key,
                    host_id,
                    declared,
                    ..
                } = carrier;
                (
                    order,
                    down_key.to_string(),
                    host_id.clone(),
                    declared.cloned(),
                )
            });
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let method = method.as_str();
        if let Some((_, down_key, host_id, Some(declared))) = &carrier
            && let Some(missing) = undeclared(method, declared)
        {
            self.refuse_undeclared(index, id, (down_key, host_id.clone()), missing, now);
            return;
        }
        let carrier = carrier.map(|(order, key, host_id, _)| (order, key, host_id));
        let translating = self.parked.values().any(|p| p.server == index);
        if carrier.is_none() && !translating {
            let text = "airlock: no request of the host is in flight to carry this request (protocol 2026-07-28 has no server-to-client requests)";
            let answer = error_response(id, code::METHOD_NOT_FOUND, text, None);
            self.send_raw(index, answer, now);
            return;
        }
        // Marked as a handshake-era host's request is: every line names the server, and no
        // `_meta` key of airlock's own is the server's to set.
        let mut message = message;
        let name = self.servers[index].name.clone();
        super::upstream::name_the_server(&mut message, method, &name);
        let request = input_request(&message);
        let bytes = crate::mcp::encoded_len(&request);
        let queued = self.waiting_input.get(&index).map_or((0, 0), |waiting| {
            (
                waiting.len(),
                waiting.iter().map(|w| w.bytes).sum::<usize>(),
            )
        });
        // One request alone always waits, however large (a line is bounded already).
        let over_bytes = queued.0 > 0 && queued.1.saturating_add(bytes) > MAX_WAITING_INPUT_BYTES;
        if queued.0 >= MAX_WAITING_INPUTS || over_bytes {
            let text = format!(
                "airlock: {} requests for input ({} bytes) already wait for the host; ask again once they are answered",
                queued.0, queued.1
            );
            let answer = error_response(id, code::INTERNAL_ERROR, &text, None);
            self.send_raw(index, answer, now);
            return;
        }
        let waiting = Waiting {
            generation,
            id,
            request,
            bytes,
        };
        self.waiting_input.entry(index).or_default().push(waiting);
        if let Some((_, down_key, host_id)) = carrier {
            self.host_requests.remove(&id_key(&host_id));
            self.park(index, host_id, Some(down_key), now);
        }
    }

    /// The host request that would carry a server's input request did not declare the
    /// capability it needs: the server's request gets the error a client without it gives, the
    /// server's running request is cancelled, and the host gets
    /// `MissingRequiredClientCapabilityError` naming the capability (an `InputRequiredResult`
    /// may hold only inputs the client declared).
    fn refuse_undeclared(
        &mut self,
        index: usize,
        asked: Value,
        (down_key, host_id): (&str, Value),
        missing: &'static str,
        now: Instant,
    ) {
        let text = format!("airlock: the client did not declare the `{missing}` capability");
        self.send_raw(
            index,
            error_response(asked, code::METHOD_NOT_FOUND, &text, None),
            now,
        );
        if self.servers[index].outbound.remove(down_key).is_some() {
            let why = "airlock: the client lacks a capability this request needs";
            let params = json!({"requestId": parse_down_id(down_key), "reason": why});
            self.send_raw(index, notification("notifications/cancelled", params), now);
        }
        self.host_requests.remove(&id_key(&host_id));
        let text = format!(
            "this request needs the `{missing}` client capability, which it did not declare"
        );
        let data = json!({"requiredCapabilities": {missing: {}}});
        let answer = error_response(host_id, code::MISSING_CLIENT_CAPABILITY, &text, Some(data));
        self.answer_through_gate(index, answer, now);
    }

    /// Answers host request `host_id` with an `InputRequiredResult` carrying every input the
    /// server waits for. `continuing`: the server's request that goes on meanwhile.
    fn park(&mut self, index: usize, host_id: Value, continuing: Option<String>, now: Instant) {
        let waiting = self.waiting_input.remove(&index).unwrap_or_default();
        let generation = self.servers[index].life.generation;
        self.next_state += 1;
        let token = new_state_token(self.next_state);
        let mut requests = Map::new();
        let mut asks = Vec::new();
        for (n, ask) in waiting
            .into_iter()
            .filter(|w| w.generation == generation)
            .enumerate()
        {
            let key = format!("airlock-{}-{n}", self.next_state);
            requests.insert(key.clone(), ask.request);
            asks.push((key, ask.id));
        }
        let wait = self.servers[index]
            .spec
            .tool_timeout
            .unwrap_or(DEFAULT_WAIT);
        self.parked.insert(
            token.clone(),
            Parked {
                server: index,
                generation,
                start: self.servers[index].start,
                asks,
                continuing,
                answer: None,
                deadline: now + wait,
            },
        );
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": token,
        });
        self.answer_through_gate(index, result_response(host_id, result), now);
    }

    /// A host request for `index` about to be sent: the retry of a translation resumes it.
    /// Returns the message when it is to be sent as usual.
    pub(super) fn before_sending(
        &mut self,
        index: usize,
        message: Value,
        host_id: &Value,
        now: Instant,
    ) -> Option<Value> {
        if self.single() || !era::stateless(&self.host) {
            return Some(message);
        }
        match retry_state(&message) {
            Some(token) => {
                let message = self.resume(index, message, host_id, &token, now);
                self.answer_stranded_inputs(now);
                message
            }
            None => Some(message),
        }
    }

    /// The host's retry: the server's requests get the host's responses, then the server's
    /// running request continues (its answer goes to the retry), or the retry is sent fresh.
    fn resume(
        &mut self,
        index: usize,
        mut message: Value,
        host_id: &Value,
        token: &str,
        now: Instant,
    ) -> Option<Value> {
        // Only this server's own translation: another's (a retry that reached another server,
        // or the replacement of a reloaded one) stays for its own retry or its expiry.
        let owned = self.parked.get(token).is_some_and(|p| p.server == index);
        let Some(parked) = owned.then(|| self.parked.remove(token)).flatten() else {
            let why = "the requestState is unknown or expired: send the request again without it";
            let answer = error_response(host_id.clone(), code::INVALID_PARAMS, why, None);
            self.answer_through_gate(index, answer, now);
            return None;
        };
        let responses = message
            .at(&["params", "inputResponses"])
            .cloned()
            .unwrap_or_default();
        if let Some(params) = message.field_mut("params").and_then(Value::as_object_mut) {
            params.remove("inputResponses");
            params.remove("requestState");
        }
        let alive = self.servers[index].life.generation == parked.generation;
        for (key, server_id) in &parked.asks {
            let answer = match responses.get(key) {
                Some(response) => {
                    let mut answer = result_response(server_id.clone(), response.clone());
                    super::tasks::unname_in_host_answer(&mut answer, self.task_maker(index));
                    answer
                }
                None => {
                    let text = "airlock: the host gave no response to this input request";
                    error_response(server_id.clone(), code::INTERNAL_ERROR, text, None)
                }
            };
            if alive {
                self.note_offered_roots(index, &answer);
                self.send_raw(index, answer, now);
            }
        }
        let Some(down_key) = parked.continuing else {
            return Some(message);
        };
        if let Some(mut answer) = parked.answer {
            answer["id"] = host_id.clone();
            let maker = super::tasks::Maker {
                start: parked.start,
                ..self.task_maker(index)
            };
            super::tasks::name_in_answer(&mut answer, false, maker);
            self.answer_through_gate(index, answer, now);
            return None;
        }
        let token = message.at(&["params", "_meta", "progressToken"]).cloned();
        self.continue_as(index, &down_key, host_id.clone(), token);
        if self
            .waiting_input
            .get(&index)
            .is_some_and(|w| !w.is_empty())
        {
            self.host_requests.remove(&id_key(host_id));
            self.park(index, host_id.clone(), Some(down_key), now);
        }
        None
    }

    /// The server's running request now answers `host_id` (and reports progress to the
    /// retry's progress token).
    fn continue_as(&mut self, index: usize, down_key: &str, host_id: Value, token: Option<Value>) {
        let server = &mut self.servers[index];
        let Some(Origin::Host {
            host_id: answers,
            progress,
            ..
        }) = server.outbound.get_mut(down_key)
        else {
            return;
        };
        *answers = host_id.clone();
        if let (Some(down_token), Some(token)) = (progress.as_ref(), token) {
            server.progress.insert(down_token.clone(), token);
        }
        let down_id = parse_down_id(down_key);
        self.host_requests
            .insert(id_key(&host_id), (index, down_id));
    }

    /// The final answer to a server request whose host request was answered with input
    /// requests: kept for the host's retry. True when it was one.
    pub(super) fn parked_answer(&mut self, index: usize, down_key: &str, message: &Value) -> bool {
        let parked = self
            .parked
            .values_mut()
            .find(|p| p.server == index && p.continuing.as_deref() == Some(down_key));
        match parked {
            Some(parked) => {
                parked.answer = Some(message.clone());
                true
            }
            None => false,
        }
    }

    /// Translations whose retry never came: the server's requests get an error, its running
    /// request is cancelled. Also everything of a server that is gone (`gone`).
    pub(super) fn expire_parked(&mut self, now: Instant, gone: Option<usize>) {
        let expired: Vec<String> = self
            .parked
            .iter()
            .filter(|(_, p)| p.deadline <= now || gone == Some(p.server))
            .map(|(token, _)| token.clone())
            .collect();
        for token in expired {
            let Some(parked) = self.parked.remove(&token) else {
                continue;
            };
            if gone == Some(parked.server) {
                continue;
            }
            let index = parked.server;
            for (_, server_id) in parked.asks {
                let text = "airlock: the host did not answer the input request in time";
                let answer = error_response(server_id, code::INTERNAL_ERROR, text, None);
                self.send_raw(index, answer, now);
            }
            if let Some(down_key) = parked.continuing
                && self.servers[index].outbound.remove(&down_key).is_some()
            {
                let params = json!({"requestId": parse_down_id(&down_key), "reason": "airlock: the host did not retry"});
                self.send_raw(index, notification("notifications/cancelled", params), now);
            }
        }
        if let Some(index) = gone {
            self.waiting_input.remove(&index);
        }
        self.answer_stranded_inputs(now);
    }

    /// Answers what waits for a round that no translation of its server can bring any more
    /// (what waits is asked on a retry of one; a new translation asks what waits then anew).
    fn answer_stranded_inputs(&mut self, now: Instant) {
        let stranded: Vec<usize> = self
            .waiting_input
            .keys()
            .copied()
            .filter(|index| !self.parked.values().any(|p| p.server == *index))
            .collect();
        for index in stranded {
            for waiting in self.waiting_input.remove(&index).unwrap_or_default() {
                let text = "airlock: the host did not answer the input request in time";
                let answer = error_response(waiting.id, code::INTERNAL_ERROR, text, None);
                self.send_raw(index, answer, now);
            }
        }
    }

    /// The earliest deadline of a translation waiting for its retry.
    pub(super) fn parked_deadline(&self) -> Option<Instant> {
        self.parked.values().map(|p| p.deadline).min()
    }
}

/// A downstream id back from its key (`n:7` → 7, `s:x` → "x").
/// A `requestState` token: 128 random bits, so that no client can guess another's (over HTTP the
/// gateway also gives each token to its owner only, `crate::http::retry_states`). Without an
/// entropy source (a very old kernel) the process id and a counter keep tokens unique, and the
/// owner check still holds.
fn new_state_token(counter: u64) -> String {
    let mut bytes = [0u8; 16];
    match crate::random::fill(&mut bytes) {
        Ok(()) => format!("{STATE_PREFIX}{}", crate::hash::hex(&bytes)),
        Err(_) => format!("{STATE_PREFIX}{}-{counter}", std::process::id()),
    }
}

fn parse_down_id(key: &str) -> Value {
    match key.split_once(':') {
        Some(("n", number)) => serde_json::from_str(number).unwrap_or(Value::Null),
        Some((_, text)) => Value::String(text.to_string()),
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_inputs_and_keys() {
        let retry = json!({"params": {"requestState": "airlock-mrtr-1-2", "inputResponses": {}}});
        assert_eq!(retry_state(&retry).as_deref(), Some("airlock-mrtr-1-2"));
        assert_eq!(
            retry_state(&json!({"params": {"requestState": "theirs"}})),
            None
        );
        let asked = json!({"jsonrpc":"2.0","id":4,"method":"roots/list"});
        assert_eq!(input_request(&asked), json!({"method": "roots/list"}));
        assert_eq!(parse_down_id("n:7"), json!(7));
        assert_eq!(parse_down_id("s:x"), json!("x"));
        assert!(carries_input("tools/call") && !carries_input("tools/list"));
        let declared = json!({"elicitation": {}});
        assert_eq!(
            undeclared("sampling/createMessage", &declared),
            Some("sampling")
        );
        assert_eq!(undeclared("roots/list", &declared), Some("roots"));
        assert_eq!(undeclared("elicitation/create", &declared), None);
        assert_eq!(undeclared("ping", &json!({})), None);
    }
}
