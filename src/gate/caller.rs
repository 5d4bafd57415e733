//! Who makes a call: the HTTP face's mux names each call's authenticated identity in
//! `_meta["airlock/identity"]`; the gate takes it out (servers never see it), decides with it
//! and records it on the call's decision and outcome. A stdio host's value is removed and
//! ignored: only a core told so ([`Gate::trust_identity_meta`]) believes it.

use serde_json::Value;

use super::{Effects, Gate};
use crate::audit::EventKind;
use crate::mcp::Field;
use crate::mcp::message::{at_mut, id_key};

/// `_meta` key carrying the caller's identity from the HTTP face (see `crate::http::mux`).
pub const META_IDENTITY: &str = "airlock/identity";
/// `_meta` key on airlock's own confirmation request: the call it is about.
pub const META_REQUEST: &str = "airlock/request";

impl Gate {
    /// Calls carry their caller's identity in `_meta` (only the HTTP face's own host does this).
    pub fn trust_identity_meta(&mut self) {
        self.trust_identity = true;
    }

    /// Removes the identity from a host message (servers never see it); returns it when trusted.
    pub(super) fn take_identity(&self, message: &mut Value) -> Option<String> {
        let meta = at_mut(message, &["params", "_meta"]).and_then(Value::as_object_mut)?;
        let identity = meta.remove(META_IDENTITY)?;
        if meta.is_empty()
            && let Some(params) = message.field_mut("params").and_then(Value::as_object_mut)
        {
            params.remove("_meta");
        }
        match identity {
            Value::String(name) if self.trust_identity => Some(name),
            _ => None,
        }
    }

    pub(super) fn caller(&self, id: &Value) -> Option<&str> {
        // Most gates never see an identity: no key to build then.
        if self.callers.is_empty() {
            return None;
        }
        self.callers.get(&id_key(id)).map(String::as_str)
    }

    /// A call's outcome is recorded: its caller is no longer needed.
    pub(super) fn forget_finished(&mut self, fx: &Effects) {
        if self.callers.is_empty() {
            return;
        }
        for event in &fx.audit {
            if event.event == EventKind::Outcome
                && let Some(id) = &event.request_id
            {
                self.callers.remove(&id_key(id));
            }
        }
    }
}
