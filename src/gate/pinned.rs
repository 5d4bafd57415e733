//! Where the gate applies the server's pins ([`crate::pins`]): each listing of tools, prompts
//! and resource templates is filtered before the host (or the gateway's aggregation) sees it, and
//! a `tools/call`, `prompts/get` or `resources/read` of something hidden is answered here, never
//! forwarded. The pin store is the one thing the gate reads and writes outside memory: small
//! files, touched on listings and before a refusal, never on an allowed call's path.

use serde_json::{Value, json};

use super::{Effects, Gate};
use crate::audit::{Event, EventKind, Outcome};
use crate::mcp::lenient::drop_other_spellings;
use crate::mcp::message::{code, error_response, notification};
use crate::pins::decide::refusal_text;
use crate::pins::{Kind, PinGuard, Reason, Settings, Verdict};
use crate::policy::Action;

/// What a pin check says about a request.
pub(super) enum PinCheck {
    /// Go on (to the policy, for a call).
    Pass,
    /// Go on, with this warning for the decision's audit record (`pinning = "warn"`).
    Warned(String),
    Refused(Refusal),
}

/// A refusal: the text for the host, and whether it is a quarantine (`pins.new_servers`) rather
/// than a changed definition (`pins.pinning`).
pub(super) struct Refusal {
    pub text: String,
    pub quarantine: bool,
}

impl Gate {
    /// The server's pins, checked from now on.
    pub fn set_pins(&mut self, guard: PinGuard) {
        self.pins = Some(guard);
    }

    /// Keeps the pin settings in step with a reloaded policy.
    pub(super) fn refresh_pin_settings(&mut self) {
        let settings = Settings::from_policy(&self.policy.pins);
        if let Some(guard) = &mut self.pins {
            guard.set_settings(settings);
        }
    }

    /// Re-reads the server's pins; true when they changed outside this session (an approval),
    /// so the server's listings are stale.
    pub fn pins_changed_outside(&mut self) -> bool {
        self.pins.as_mut().is_some_and(PinGuard::refresh)
    }

    /// Filters one page of this server's listing of `kind` in place: pins first (they see every
    /// definition the server offers), then, for tools, the policy (unless `--show-denied`).
    /// Pin events go to the audit log. Returns how many items were removed.
    pub fn filter_listing(&mut self, kind: Kind, result: &mut Value, fx: &mut Effects) -> usize {
        if kind == Kind::Instructions {
            return self.filter_instructions(result, fx);
        }
        self.keep_exact_spellings(kind, result);
        if kind == Kind::Tool {
            // The names as the server spelled them, before pins or the policy hide any.
            self.learn_tools(result, fx);
        }
        let mut removed = 0;
        if let Some(guard) = &mut self.pins {
            let now = crate::audit::event::rfc3339(std::time::SystemTime::now());
            let filtered = guard.filter_listing(kind, result, &now);
            for warning in &filtered.warnings {
                tracing::warn!(server = %self.config.server, "{warning}");
            }
            fx.audit.extend(filtered.events);
            removed += filtered.hidden;
        }
        if kind == Kind::Tool {
            removed += self.filter_tools(result);
        }
        removed
    }

    /// The server's `initialize` answer: its `instructions` (which many hosts put in the model's
    /// system prompt, so a rug pull can live there as well as in a tool's description) and the
    /// title and description of its server info go through the pins as a one-item listing of
    /// [`Kind::Instructions`]. Text that is not trusted (changed since it was pinned, or new
    /// under quarantine) is taken out of the answer; the host starts as with a server that sends
    /// none. Other spellings a lenient host would read as those keys are taken out first.
    fn filter_instructions(&mut self, result: &mut Value, fx: &mut Effects) -> usize {
        let Some(object) = result.as_object_mut() else {
            return 0;
        };
        let mut removed = drop_other_spellings(object, &["instructions", "serverInfo"]);
        if let Some(info) = object.get_mut("serverInfo").and_then(Value::as_object_mut) {
            removed.extend(drop_other_spellings(info, &["title", "description"]));
        }
        if let Some(first) = removed.first() {
            tracing::warn!(server = %self.config.server, "took {first:?} out of the initialize answer: a lenient host would read it as the server's own text");
        }
        let Some(guard) = &mut self.pins else {
            return 0;
        };
        let items: Vec<Value> = crate::pins::definition::server_text_item(object)
            .into_iter()
            .collect();
        let mut listing = json!({ "instructions": items });
        let now = crate::audit::event::rfc3339(std::time::SystemTime::now());
        let filtered = guard.filter_listing(Kind::Instructions, &mut listing, &now);
        for warning in &filtered.warnings {
            tracing::warn!(server = %self.config.server, "{warning}");
        }
        fx.audit.extend(filtered.events);
        if filtered.hidden > 0 {
            crate::pins::definition::remove_server_text(object);
        }
        filtered.hidden
    }

    /// Takes out of a listing what a lenient host would read otherwise than airlock does
    /// ([`crate::mcp::lenient`]): other spellings of the list's key and of `nextCursor`, and of
    /// each definition's pinned fields. Without this, a `"Description"` that no pin covers, or a
    /// `"Tools"` list that nothing filtered, would reach a Go host in place of what was checked.
    fn keep_exact_spellings(&self, kind: Kind, result: &mut Value) {
        let (_, list_key) = kind.list_method();
        let Some(object) = result.as_object_mut() else {
            return;
        };
        let mut removed = drop_other_spellings(object, &[list_key, "nextCursor"]);
        if let Some(Value::Array(items)) = object.get_mut(list_key) {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                removed.extend(drop_other_spellings(item, kind.pinned_fields()));
            }
        }
        if let Some(first) = removed.first() {
            tracing::warn!(
                server = %self.config.server,
                "took {} key(s) out of a {kind} listing that a lenient host would read as others, e.g. {first:?}",
                removed.len()
            );
        }
    }

    /// The pin check of one use of definition `name` of `kind`. An approval noticed here (the
    /// definition was hidden and is approved now) asks the core to read the listing again.
    pub(super) fn check_pin(&mut self, kind: Kind, name: &str, fx: &mut Effects) -> PinCheck {
        let Some(guard) = &mut self.pins else {
            return PinCheck::Pass;
        };
        let (verdict, approved_since) = guard.check_use_noting_approval(kind, name);
        if approved_since {
            fx.relist = Some(kind);
        }
        let server = &self.config.server;
        match verdict {
            Verdict::Show => PinCheck::Pass,
            Verdict::Warn(reason) => PinCheck::Warned(format!(
                "pins.pinning = \"warn\": {}",
                refusal_text(server, kind, name, &reason)
            )),
            Verdict::Hide(reason) => PinCheck::Refused(Refusal {
                text: refusal_text(server, kind, name, &reason),
                quarantine: reason == Reason::Quarantined,
            }),
        }
    }

    /// Where the pin rule comes from, for the decision record of a refused call.
    fn pin_rule(&self, quarantine: bool) -> (String, String, String) {
        let origin = if quarantine {
            &self.policy.pins.new_servers.origin
        } else {
            &self.policy.pins.pinning.origin
        };
        let source = match origin.line {
            Some(line) => format!("{}:{line}", origin.file.display()),
            None => origin.file.display().to_string(),
        };
        ("pins".to_string(), origin.layer.to_string(), source)
    }

    /// A `tools/call` of a hidden tool: the decision (deny, rule `pins`) and the refusal.
    #[allow(clippy::too_many_arguments)] // the call's parts, the refusal and the time
    pub(super) fn refuse_pinned_call(
        &mut self,
        tool: &str,
        id: Value,
        task: bool,
        arguments: Option<&Value>,
        refusal: Refusal,
        now: std::time::Instant,
        fx: &mut Effects,
    ) {
        let Refusal { text, quarantine } = refusal;
        let (rule, layer, source) = self.pin_rule(quarantine);
        let mut event = Event::new(EventKind::Decision, &self.config.server);
        event.identity = self.caller(&id).map(String::from);
        event.request_id = Some(id.clone());
        event.tool = Some(tool.to_string());
        event.args = arguments.map(|args| self.redactor.redact(args));
        event.decision = Some(Action::Deny.to_string());
        event.rule = Some(rule);
        event.layer = Some(layer);
        event.source = Some(source);
        event.reason = Some(text.clone());
        fx.audit.push(event);
        self.refuse(tool, id, task, text, now, now, fx);
    }

    /// A `prompts/get` or `resources/read` that pins refuse: answered here with an error, and
    /// recorded as a `pin` event. `None` when it may go on.
    pub(super) fn check_pinned_request(
        &mut self,
        method: &str,
        params: Option<&Value>,
        id: &Value,
        fx: &mut Effects,
    ) -> Option<()> {
        let field = |key: &str| params.and_then(|p| p.get(key)).and_then(Value::as_str);
        let (kind, name, text) = match method {
            "prompts/get" => {
                let name = field("name")?.to_string();
                match self.check_pin(Kind::Prompt, &name, fx) {
                    PinCheck::Refused(refusal) => (Kind::Prompt, name, refusal.text),
                    _ => return None,
                }
            }
            "resources/read" => {
                let uri = field("uri")?;
                let guard = self.pins.as_mut()?;
                let (template, verdict) = guard.check_read(uri)?;
                let Verdict::Hide(reason) = verdict else {
                    return None;
                };
                let text = format!(
                    "{} (the only templates that produce {uri:?})",
                    refusal_text(
                        &self.config.server,
                        Kind::ResourceTemplate,
                        &template,
                        &reason
                    )
                );
                (Kind::ResourceTemplate, template, text)
            }
            _ => return None,
        };
        let mut event = Event::new(EventKind::Pin, &self.config.server);
        event.tool = Some(name);
        event.request_id = Some(id.clone());
        event.outcome = Some(Outcome::Denied);
        event.reason = Some(text.clone());
        event.detail = Some(json!({"kind": kind, "change": "refused", "method": method}));
        fx.audit.push(event);
        fx.to_host.push(error_response(
            id.clone(),
            code::INVALID_PARAMS,
            &text,
            None,
        ));
        self.answered_here.insert(crate::mcp::message::id_key(id));
        Some(())
    }
}

/// The notification that tells a host a list it holds changed; none for the server's
/// instructions, which a host reads once, at `initialize` (approved, they reach the host's next
/// session).
pub fn list_changed_notification(kind: Kind) -> Option<Value> {
    let capability = match kind {
        Kind::Tool => "tools",
        Kind::Prompt => "prompts",
        Kind::ResourceTemplate => "resources",
        Kind::Instructions => return None,
    };
    Some(notification(
        &format!("notifications/{capability}/list_changed"),
        json!({}),
    ))
}
