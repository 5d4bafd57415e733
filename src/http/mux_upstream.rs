//! What comes back from the core for "the host", sorted out to the sessions: answers to the
//! session that asked, a server's requests to the one session they can be about (or refused),
//! and notifications to the sessions they belong to (see the rules in [`super`]).

use super::*;

impl Mux {
    /// A message from the core for "the host".
    pub fn from_core(&mut self, message: Value) -> Vec<Out> {
        match classify(&message) {
            Ok(Class::Response { id } | Class::Error { id }) => {
                let key = id_key(id);
                self.core_answer(message, &key)
            }
            Ok(Class::Request { id, method }) => {
                let (id, method) = (id.clone(), method.to_string());
                self.core_request(message, id, &method)
            }
            Ok(Class::Notification { method }) => {
                let method = method.to_string();
                self.core_notification(message, &method)
            }
            Ok(Class::Batch(items)) => {
                let items = items.to_vec();
                items
                    .into_iter()
                    .flat_map(|item| self.from_core(item))
                    .collect()
            }
            Err(_) => Vec::new(),
        }
    }

    fn core_answer(&mut self, mut message: Value, key: &str) -> Vec<Out> {
        if self.initialize_id.as_deref() == Some(key) {
            self.initialize_id = None;
            let result = message.get("result").cloned();
            let waiting = match std::mem::take(&mut self.handshake) {
                Handshake::Waiting(waiting) => waiting,
                _ => Vec::new(),
            };
            let Some(result) = result else {
                // The core refused: tell every waiting session, and let the next one try.
                return waiting
                    .into_iter()
                    .map(|(key, id, _)| {
                        let mut answer = message.clone();
                        answer["id"] = id;
                        to(key, answer, None)
                    })
                    .collect();
            };
            self.handshake = Handshake::Done(result.clone());
            return waiting
                .into_iter()
                .flat_map(|(key, id, requested)| {
                    self.answer_initialize(key, id, requested, result.clone())
                })
                .collect();
        }
        if self.own.remove(key) {
            return Vec::new();
        }
        let Some(request) = self.requests.remove(key) else {
            return Vec::new();
        };
        let owner = self.task_owner(request.key);
        if request.lists_tasks {
            self.tasks.keep_own(&owner, &mut message);
        }
        self.tasks
            .note_created(owner.clone(), request.server.clone(), &message);
        if let Some(token) = request.progress.clone() {
            self.tasks
                .keep_progress(key.to_string(), request.key, token, &message);
        }
        if retry_states::handed_out(&message).is_some() {
            self.hand_out_retry_state(&request, &owner, &mut message);
        }
        message["id"] = request.id;
        vec![to(request.key, message, None)]
    }

    /// An answer that asks the client for input (2026-07-28) carries a server's questions on the
    /// request the core chose to carry them: its newest in flight on that server. When requests of
    /// other owners may be on that server too, the questions may be about one of theirs, so the
    /// answer becomes an error instead (fail closed: the server's questions go unanswered when
    /// the retry never comes). Otherwise its `requestState` becomes `owner`'s alone.
    fn hand_out_retry_state(&mut self, request: &InFlight, owner: &Owner, message: &mut Value) {
        // A question about a task is its creator's only, whoever else's call carries it: put on
        // another client's call it handed that task's question, and the answer, to them.
        let about_anothers_task = message
            .pointer("/result/inputRequests")
            .and_then(Value::as_object)
            .is_some_and(|inputs| {
                inputs.values().any(|input| {
                    related_task(input).is_some_and(|task| !self.tasks.created_by(task, owner))
                })
            });
        if about_anothers_task {
            let why = "airlock: the server asked about a task this client did not create; only its creator is asked";
            *message = error_response(Value::Null, code::INTERNAL_ERROR, why, None);
            return;
        }
        let others = self.requests.values().any(|other| {
            let shares = match &request.server {
                Some(server) => other.may_be_on(server),
                None => !other.on_no_server,
            };
            shares && self.task_owner(other.key) != *owner
        });
        // A request of another owner answered with a question of its own may still run there
        // too, until its retry: a question now may be about it.
        let now = std::time::Instant::now();
        let others = others
            || self
                .retry_states
                .another_on(request.server.as_deref(), owner, now);
        if others {
            let why = "airlock: the server asked for input while requests of other clients were in flight on it, so airlock cannot tell whose question it is; send the request again";
            *message = error_response(Value::Null, code::INTERNAL_ERROR, why, None);
            return;
        }
        self.retry_states
            .note(owner.clone(), request.server.clone(), message, now);
    }

    /// Who session `key`'s tasks belong to: the session, or a stateless client's identity.
    pub(super) fn task_owner(&self, key: SessionKey) -> Owner {
        match self.clients.get(&key) {
            Some(client) if client.stateless => Owner::Stateless(client.identity.clone()),
            _ => Owner::Session(key),
        }
    }

    /// Sessions with a request in flight that may be on `server`: one that names it, and one
    /// whose server the mux cannot tell (a `resources/read`, `completion/complete`, a listing:
    /// the core routes them), which may be on any. Counting those too is what keeps an
    /// ambiguous case ambiguous: a server's question about one client's read must not reach
    /// another client because that one's call is the only one the mux can place.
    fn callers_on(&self, server: &str) -> BTreeSet<SessionKey> {
        self.requests
            .values()
            .filter(|r| r.may_be_on(server))
            .map(|r| r.key)
            .collect()
    }

    /// The one request `message` is about: airlock's own `ask` names it; a server's request is
    /// about the single session calling that server.
    fn owner(&self, message: &Value) -> Result<(SessionKey, Option<Value>), Unroutable> {
        let meta = message.pointer("/params/_meta");
        if let Some(call) = meta.and_then(|m| m.get(META_REQUEST)) {
            return match self.requests.get(&id_key(call)) {
                Some(request) => Ok((request.key, Some(request.id.clone()))),
                None => Err(Unroutable::CallEnded),
            };
        }
        // A task's question is its creator's, on the stream of the request naming the task; only
        // the server the task was created on may ask about it.
        if let Some(task) = related_task(message) {
            let server = meta
                .and_then(|m| m.get(META_SERVER))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let key = self
                .tasks
                .session_on(task, server)
                .ok_or(Unroutable::TaskNotHere)?;
            let related = self
                .requests
                .values()
                .find(|r| r.key == key && r.task.as_deref() == Some(task))
                .map(|r| r.id.clone());
            return Ok((key, related));
        }
        let Some(server) = meta
            .and_then(|m| m.get(META_SERVER))
            .and_then(Value::as_str)
        else {
            return Err(Unroutable::NoServer);
        };
        let callers = self.callers_on(server);
        match callers.len() {
            // One caller, but another owner's request answered with a question may still run
            // on that server until its retry: the question may be about that one.
            1 if callers.iter().any(|key| {
                let now = std::time::Instant::now();
                self.retry_states
                    .another_on(Some(server), &self.task_owner(*key), now)
            }) =>
            {
                Err(Unroutable::ManyCallers {
                    count: 2,
                    server: server.to_string(),
                })
            }
            1 => {
                let key = *callers.iter().next().unwrap_or(&0);
                let related = self
                    .requests
                    .values()
                    .find(|r| r.key == key && r.may_be_on(server))
                    .map(|r| r.id.clone());
                Ok((key, related))
            }
            0 => Err(Unroutable::NoCaller {
                server: server.to_string(),
            }),
            count => Err(Unroutable::ManyCallers {
                count,
                server: server.to_string(),
            }),
        }
    }

    fn core_request(&mut self, message: Value, id: Value, method: &str) -> Vec<Out> {
        let needed = match method {
            "sampling/createMessage" => Some("sampling"),
            "elicitation/create" => Some("elicitation"),
            "roots/list" => Some("roots"),
            _ => None,
        };
        let routed = self.owner(&message).and_then(|(key, related)| {
            let client = self.clients.get(&key).ok_or(Unroutable::SessionEnded)?;
            if let Some(capability) = needed
                && client.capabilities.get(capability).is_none()
            {
                return Err(Unroutable::Undeclared(capability));
            }
            Ok((key, related))
        });
        match routed {
            Ok((key, related)) => {
                self.inbound.insert(id_key(&id), (key, method.to_string()));
                vec![to(key, message, related)]
            }
            Err(why) => {
                tracing::info!("refusing {method} from the gateway: {why}");
                vec![Out::ToCore(refusal(id, method, &why.to_string()))]
            }
        }
    }

    fn core_notification(&mut self, mut message: Value, method: &str) -> Vec<Out> {
        // 2026-07-28: a notification of a `subscriptions/listen` stream names its request.
        let pointer = "/params/_meta/io.modelcontextprotocol~1subscriptionId";
        if let Some(listen) = message.pointer(pointer).map(id_key) {
            let Some(request) = self.requests.get(&listen) else {
                return Vec::new();
            };
            let (key, original) = (request.key, request.id.clone());
            if let Some(tag) = message.pointer_mut(pointer) {
                *tag = original.clone();
            }
            return vec![to(key, message, Some(original))];
        }
        match method {
            "notifications/progress" => {
                let Some(token) = message.pointer("/params/progressToken") else {
                    return Vec::new();
                };
                let token = id_key(token);
                let Some(request) = self.requests.get(&token) else {
                    // A task's, after the request that created it was answered.
                    let Some((key, own)) = self.tasks.progress(&token) else {
                        return Vec::new();
                    };
                    message["params"]["progressToken"] = own.clone();
                    return vec![to(key, message, None)];
                };
                let (key, related) = (request.key, request.id.clone());
                message["params"]["progressToken"] =
                    request.progress.clone().unwrap_or(Value::Null);
                vec![to(key, message, Some(related))]
            }
            "notifications/cancelled" => {
                let Some(id) = message.pointer("/params/requestId") else {
                    return Vec::new();
                };
                match self.inbound.remove(&id_key(id)) {
                    Some((key, _)) => vec![to(key, message, None)],
                    None => Vec::new(),
                }
            }
            // A task's status is its creator's to see.
            "notifications/tasks/status" => {
                self.tasks.status(&message);
                match named_task(&message).and_then(|task| self.tasks.session(task)) {
                    Some(key) => vec![to(key, message, None)],
                    None => Vec::new(),
                }
            }
            "notifications/resources/updated" => {
                let uri = message
                    .pointer("/params/uri")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let subscribers = self.subscriptions.get(uri).cloned().unwrap_or_default();
                subscribers
                    .into_iter()
                    .map(|key| to(key, message.clone(), None))
                    .collect()
            }
            "notifications/message" => {
                // A server's log may carry one client's data: it goes to that client only.
                let logger = message
                    .pointer("/params/logger")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let server = logger.split('/').next().unwrap_or("");
                let callers = self.callers_on(server);
                if callers.len() != 1 {
                    return Vec::new();
                }
                callers
                    .into_iter()
                    .map(|key| to(key, message.clone(), None))
                    .collect()
            }
            _ => {
                let keys: Vec<SessionKey> = self
                    .clients
                    .iter()
                    .filter(|(_, c)| !c.stateless)
                    .map(|(k, _)| *k)
                    .collect();
                keys.into_iter()
                    .map(|key| to(key, message.clone(), None))
                    .collect()
            }
        }
    }
}
