//! The `tools/call` path of the gate: the name checked against the server's own listing, the
//! pins, the policy's decision, the arguments against the listed schema; a refusal answered here,
//! a confirmation asked of the host and its answer.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::listed::Listed;
use super::schema::SchemaCheck;
use super::track::{Held, Pending, Tracked};
use super::{CallVerdict, Effects, Gate, META_REQUEST, Verdict, describe, pinned};
use crate::audit::{Event, EventKind, Outcome};
use crate::mcp::Field;
use crate::mcp::message::{
    code, error_response, failed_call_answer, id_key, request, task_augmented,
};
use crate::mcp::version;
use crate::policy::{Action, Call, SchemaMode};
use crate::session::shell::stderr::shown;

/// Why airlock cannot ask the host to confirm a call (an `ask` is then a denial saying so).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum CannotAsk {
    #[error("the host speaks protocol 2026-07-28, where airlock cannot ask for confirmation yet")]
    Stateless,
    #[error(
        "the host did not declare the elicitation capability, so airlock cannot ask for confirmation"
    )]
    NoElicitation,
}

impl Gate {
    /// Decides one `tools/call` of `tool` with `arguments` (pure: no state changes). Returns
    /// the verdict and the decision event (request id `id`, the host's).
    pub fn decide_call(
        &self,
        tool: &str,
        arguments: Option<&Value>,
        params: Option<&Value>,
        id: &Value,
    ) -> (CallVerdict, Event) {
        let server = &self.config.server;
        let identity = self.caller(id);
        let call = Call {
            server,
            tool,
            arguments,
            identity,
        };
        let decision = self.policy.decide_in(&call, &self.config.paths);
        let mut event = self.event(EventKind::Decision);
        event.identity = identity.map(String::from);
        event.request_id = Some(id.clone());
        event.args = arguments.map(|args| self.redactor.redact(args));
        event.tool = Some(tool.to_string());
        event.layer = Some(decision.layer.as_str().to_string());
        let verdict = match decision.action {
            Action::Allow => CallVerdict::Allow,
            Action::Deny => CallVerdict::Deny(format!(
                "airlock denied the call to tool \"{tool}\" of server \"{server}\": {}{}.",
                describe(&decision),
                reading_note(&decision, &self.redactor)
            )),
            Action::Ask => match self.elicitation_available(params) {
                Err(why) => {
                    event.reason = Some(format!("ask: {why}"));
                    CallVerdict::Deny(format!(
                        "airlock denied the call to tool \"{tool}\" of server \"{server}\": {} asks for confirmation, but {why}.",
                        describe(&decision)
                    ))
                }
                Ok(()) => {
                    let arguments = arguments
                        .map(|a| self.redactor.redact(a))
                        .unwrap_or_default()
                        .to_string();
                    // The person deciding reads this: a tool name is the server's own text, and
                    // quotes, tabs, line breaks or a right-to-left override in it (or in the
                    // arguments) could make the question say another call than the one asked.
                    // Both are JSON (quotes and controls escaped), then shown as text.
                    let tool = serde_json::to_string(tool).unwrap_or_default();
                    let (tool, arguments) = (shown(&tool), shown(&arguments));
                    CallVerdict::Ask(format!(
                        "Allow server \"{server}\" to run tool {tool} with arguments {arguments}? ({})",
                        describe(&decision)
                    ))
                }
            },
        };
        let action = match verdict {
            CallVerdict::Allow => Action::Allow,
            CallVerdict::Deny(_) => Action::Deny,
            CallVerdict::Ask(_) => Action::Ask,
        };
        event.decision = Some(action.as_str().to_string());
        event.rule = Some(decision.rule);
        event.source = Some(decision.source);
        (verdict, event)
    }

    pub(super) fn elicitation_available(&self, params: Option<&Value>) -> Result<(), CannotAsk> {
        let stateless = self
            .host
            .version
            .as_deref()
            .is_some_and(|v| version::era_of(v) == version::Era::Stateless);
        if stateless || version::request_version(params).is_some() {
            // 2026-07-28 has no server→client requests; confirmation would need the in-band
            // (multi-round-trip) flow, which airlock does not speak yet.
            return Err(CannotAsk::Stateless);
        }
        if self.host.elicitation {
            Ok(())
        } else {
            Err(CannotAsk::NoElicitation)
        }
    }

    pub(super) fn host_call(
        &mut self,
        message: Value,
        id: Value,
        now: Instant,
        fx: &mut Effects,
    ) -> Verdict {
        let params = message.field("params");
        let Some(tool) = params.and_then(|p| p.field("name")).and_then(Value::as_str) else {
            let mut event = self.event(EventKind::Decision);
            event.request_id = Some(id.clone());
            event.decision = Some(Action::Deny.to_string());
            event.rule = Some("airlock: tools/call without a tool name".into());
            fx.audit.push(event);
            fx.audit
                .push(self.outcome_event("", &id, Outcome::Denied, Duration::ZERO, None));
            fx.to_host.push(error_response(
                id.clone(),
                code::INVALID_PARAMS,
                "tools/call needs params.name",
                None,
            ));
            self.answered_here.insert(id_key(&id));
            return Verdict::Drop;
        };
        let tool = tool.to_string();
        let task = task_augmented(&message);
        let arguments = params.and_then(|p| p.field("arguments"));
        // A timeout too large to add to the clock is no deadline at all.
        let deadline = self
            .config
            .tool_timeout
            .and_then(|timeout| now.checked_add(timeout));
        match self.listed.check(&tool) {
            Listed::Yes => {}
            Listed::No | Listed::PastBound => {
                self.refuse_unlisted(&tool, id, task, arguments, now, fx);
                return Verdict::Drop;
            }
            Listed::NotYet => {
                // A name the policy refuses whatever the listing holds is refused at once: no
                // server is started or listed for it.
                let (verdict, event) = self.decide_call(&tool, arguments, params, &id);
                if let CallVerdict::Deny(text) = verdict {
                    fx.audit.push(event);
                    self.refuse(&tool, id, task, text, now, now, fx);
                    return Verdict::Drop;
                }
                self.await_listing(Held::new(message, id, tool, now, deadline), fx);
                return Verdict::Drop;
            }
        }
        let warning = match self.check_pin(crate::pins::Kind::Tool, &tool, fx) {
            pinned::PinCheck::Pass => None,
            pinned::PinCheck::Warned(text) => Some(text),
            pinned::PinCheck::Refused(refusal) => {
                self.refuse_pinned_call(&tool, id, task, arguments, refusal, now, fx);
                return Verdict::Drop;
            }
        };
        let (verdict, mut event) = self.decide_call(&tool, arguments, params, &id);
        if let Some(warning) = warning {
            add_reason(&mut event, warning);
        }
        let verdict = self.check_schema(&tool, arguments, verdict, &mut event);
        fx.audit.push(event);
        match verdict {
            CallVerdict::Allow => {
                let what = Tracked::ToolsCall { tool, task };
                self.pending
                    .insert(id_key(&id), Pending::new(id, what, now, deadline));
                Verdict::Forward(message)
            }
            CallVerdict::Deny(text) => {
                self.refuse(&tool, id, task, text, now, now, fx);
                Verdict::Drop
            }
            CallVerdict::Ask(question) => {
                self.ask_host(
                    question,
                    Held::new(message, id, tool, now, deadline),
                    now,
                    fx,
                );
                Verdict::Drop
            }
        }
    }

    /// Holds a call and asks the host to confirm it (`elicitation/create`, a boolean `approve`).
    fn ask_host(&mut self, question: String, held: Held, now: Instant, fx: &mut Effects) {
        if self.host_gone {
            // Decided after the host closed its input (it waited for the spawn or a listing):
            // nobody can answer the question.
            self.refuse_unanswerable(held, now, fx);
            return;
        }
        let own_id = self.own_id("ask");
        fx.to_host.push(request(
            own_id.clone(),
            "elicitation/create",
            json!({
                "_meta": {META_REQUEST: held.id},
                "message": question,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"approve": {"type": "boolean", "title": "Allow this tool call", "default": true}},
                    "required": ["approve"]
                }
            }),
        ));
        let own_key = id_key(&own_id);
        self.held_by_call.insert(id_key(&held.id), own_key.clone());
        self.held.insert(own_key, held);
    }

    /// Answers a call here with an `isError` tool result (a JSON-RPC error when the call is
    /// `task`-augmented) and records the outcome.
    #[allow(clippy::too_many_arguments)] // the call's parts, its reason and its times
    pub(super) fn refuse(
        &mut self,
        tool: &str,
        id: Value,
        task: bool,
        text: String,
        started: Instant,
        now: Instant,
        fx: &mut Effects,
    ) {
        fx.audit.push(self.outcome_event(
            tool,
            &id,
            Outcome::Denied,
            now.saturating_duration_since(started),
            Some(text.clone()),
        ));
        self.answered_here.insert(id_key(&id));
        fx.to_host
            .push(failed_call_answer(id, &text, task, code::INVALID_PARAMS));
    }

    pub(super) fn resolve_held(
        &mut self,
        held: Held,
        answer: &Value,
        now: Instant,
        fx: &mut Effects,
    ) {
        let result = answer.field("result");
        // `Action` or `Content` beside `action` and `content`: a lenient reader could take either
        // for the answer; an answer that reads two ways is no yes.
        let spelled_twice = result.and_then(Value::as_object).is_some_and(|fields| {
            fields.keys().any(|key| {
                !matches!(key.as_str(), "action" | "content")
                    && crate::mcp::lenient::reads_as_one_of(key, &["action", "content"])
            })
        });
        let action = result
            .and_then(|r| r.field("action"))
            .and_then(Value::as_str)
            .unwrap_or("error");
        let (approved, answered) = if spelled_twice {
            (
                false,
                "not approved: `action` or `content` spelled otherwise",
            )
        } else {
            confirmation(action, result.and_then(|r| r.field("content")))
        };
        let reason = format!("host answered: {action} ({answered})");
        self.settle_held(held, approved, reason, answered, now, fx);
    }

    /// The host closed its input: a confirmation it was asked for can no longer come, so each
    /// call waiting for one is refused now, not at its timeout.
    pub fn host_closed(&mut self, now: Instant, fx: &mut Effects) {
        self.host_gone = true;
        let mut held: Vec<Held> = self.held.drain().map(|(_, h)| h).collect();
        held.sort_by_key(|h| h.started);
        self.held_by_call.clear();
        for call in held {
            self.refuse_unanswerable(call, now, fx);
        }
        self.forget_finished(fx);
    }

    fn refuse_unanswerable(&mut self, held: Held, now: Instant, fx: &mut Effects) {
        let answered = "could not answer (the host closed the connection)";
        let reason = "the host closed the connection before answering".to_string();
        self.settle_held(held, false, reason, answered, now, fx);
    }

    /// A confirmation settled: recorded, then the call goes on or is refused.
    fn settle_held(
        &mut self,
        held: Held,
        approved: bool,
        reason: String,
        answered: &str,
        now: Instant,
        fx: &mut Effects,
    ) {
        let mut event = self.event(EventKind::Elicitation);
        // The host's answer is not the call: the caller is the one who made the call held.
        event.identity = self.caller(&held.id).map(String::from);
        event.tool = Some(held.tool.clone());
        event.request_id = Some(held.id.clone());
        event.decision = Some(
            if approved {
                Action::Allow
            } else {
                Action::Deny
            }
            .to_string(),
        );
        event.reason = Some(reason);
        fx.audit.push(event);
        let task = task_augmented(&held.call);
        if approved {
            let what = Tracked::ToolsCall {
                tool: held.tool,
                task,
            };
            let pending = Pending::new(held.id.clone(), what, held.started, held.deadline);
            self.pending.insert(id_key(&held.id), pending);
            fx.to_server.push(held.call);
        } else {
            let text = format!(
                "airlock denied the call to tool \"{}\" of server \"{}\": the user {answered}.",
                held.tool, self.config.server
            );
            self.refuse(&held.tool, held.id, task, text, held.started, now, fx);
        }
    }

    /// `tools.gate_schema`: the arguments of a call the policy lets through (or asks about)
    /// against the tool's listed `inputSchema`. `warn` notes a mismatch on the decision and in
    /// the log; `enforce` turns the call into a refusal naming the validation errors (and
    /// refuses calls to a tool whose listed schema cannot be used).
    fn check_schema(
        &self,
        tool: &str,
        arguments: Option<&Value>,
        verdict: CallVerdict,
        event: &mut Event,
    ) -> CallVerdict {
        let mode = self.policy.gate_schema.value;
        if mode == SchemaMode::Off || matches!(verdict, CallVerdict::Deny(_)) {
            return verdict;
        }
        // The errors name where a value failed, never the value; a key the schema does not allow
        // is named, so the text is still redacted and capped as an argument would be.
        let problem =
            self.redactor
                .loggable_text(&match self.listed.check_arguments(tool, arguments) {
                    SchemaCheck::Valid | SchemaCheck::Unlisted => return verdict,
                    SchemaCheck::Invalid(errors) => format!(
                        "the arguments do not match the tool's listed inputSchema: {}",
                        errors.join("; ")
                    ),
                    SchemaCheck::Unusable(why) => {
                        format!("the tool's listed inputSchema cannot be used: {why}")
                    }
                });
        let server = &self.config.server;
        if mode == SchemaMode::Warn {
            let shown = self.redactor.loggable_name(tool);
            tracing::warn!(server = %server, tool = %shown, "tools.gate_schema = \"warn\": {problem}");
            add_reason(event, format!("tools.gate_schema = \"warn\": {problem}"));
            return verdict;
        }
        event.decision = Some(Action::Deny.to_string());
        event.rule = Some("tools.gate_schema = \"enforce\"".into());
        event.layer = Some(self.policy.gate_schema.origin.layer.to_string());
        event.source = Some(crate::policy::rules::location(
            &self.policy.gate_schema.origin,
        ));
        add_reason(event, problem.clone());
        CallVerdict::Deny(format!(
            "airlock refused the call to tool \"{tool}\" of server \"{server}\": {problem} (tools.gate_schema = \"enforce\")."
        ))
    }
}

/// How the argument that decided was read, for a refusal: `; path "../../etc/passwd" was read
/// as /etc/passwd`. The refusal is also the outcome's audited reason, so the value and its
/// reading are quoted as `args` logs them: redacted (all of it under a secret-looking key) and
/// capped.
fn reading_note(decision: &crate::policy::Decision, redactor: &crate::audit::Redactor) -> String {
    let Some(trace) = &decision.argument else {
        return String::new();
    };
    if let Some(note) = &trace.note {
        return format!("; {note}");
    }
    let deciding = trace.values.iter().find_map(|value| {
        let reading = value.readings.iter().find(|r| r.holds == Some(true))?;
        Some((value, reading))
    });
    let Some((value, reading)) = deciding else {
        return String::new();
    };
    let key = &trace.argument;
    let raw = redactor.loggable_value(key, &value.raw);
    match &reading.resolved {
        Some(path) => {
            let path = redactor.loggable_value(key, path);
            format!("; {key} {raw:?} was read as {path}")
        }
        None => format!(
            "; {key} {raw:?} cannot be read as one absolute path ({}), which never passes a rule",
            reading.how
        ),
    }
}

/// Adds `more` to an event's reason.
fn add_reason(event: &mut Event, more: String) {
    event.reason = Some(match event.reason.take() {
        Some(reason) => format!("{reason}; {more}"),
        None => more,
    });
}

/// Whether a host's answer to a confirmation approves the call, and what the user did, in words.
/// Only `accept` approves, and only with `approve` absent (a plain accept) or `true`: any other
/// value (`false`, `"false"`, `0`), a content that is not an object, or a key that reads as
/// `approve` in another spelling (`Approve`) is a "no": an answer airlock cannot read as a yes
/// refuses the call rather than run it (a review found `"false"` and `0` approved).
fn confirmation(action: &str, content: Option<&Value>) -> (bool, &'static str) {
    match action {
        "accept" => {}
        "decline" => return (false, "declined"),
        "cancel" => return (false, "cancelled the question"),
        _ => return (false, "gave no answer"),
    }
    let Some(content) = content else {
        return (true, "approved");
    };
    let Some(fields) = content.as_object() else {
        return (false, "not approved: content is not an object");
    };
    let other_spelling = fields
        .keys()
        .any(|key| key != "approve" && key.trim().eq_ignore_ascii_case("approve"));
    match fields.get("approve") {
        _ if other_spelling => (false, "not approved: `approve` spelled otherwise"),
        None | Some(Value::Bool(true)) => (true, "approved"),
        Some(Value::Bool(false)) => (false, "declined (approve: false)"),
        Some(_) => (false, "not approved: approve is not a boolean"),
    }
}

#[cfg(test)]
mod tests {
    use super::confirmation;
    use serde_json::json;

    #[test]
    fn only_an_accept_with_approve_absent_or_true_approves() {
        assert!(confirmation("accept", None).0);
        assert!(confirmation("accept", Some(&json!({}))).0);
        assert!(confirmation("accept", Some(&json!({"approve": true}))).0);
        for no in [
            json!({"approve": false}),
            json!({"approve": "false"}),
            json!({"approve": "true"}),
            json!({"approve": 0}),
            json!({"approve": 1}),
            json!({"approve": null}),
            json!({"Approve": false}),
            json!({"approve": true, " APPROVE": false}),
            json!("yes"),
        ] {
            assert!(!confirmation("accept", Some(&no)).0, "{no}");
        }
        for action in ["decline", "cancel", "Accept", "error"] {
            assert!(!confirmation(action, None).0, "{action}");
        }
    }
}
