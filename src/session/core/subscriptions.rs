//! `subscriptions/listen` (gateway, 2026-07-28): how a stateless host hears that a list changed
//! or a resource was updated. The host opts in to kinds of notification; airlock acknowledges at
//! once, tags every notification of the stream with its `subscriptionId`, subscribes the owning
//! servers to the resources named, and answers the request (a graceful end) at shutdown. A
//! handshake-era host gets the plain `list_changed` notifications instead.

use std::time::Instant;

use serde_json::{Value, json};

use super::lists::ListKind;
use super::{Core, Origin, era};
use crate::mcp::Field;
use crate::mcp::message::{has_id_key, id_key, notification, result_response};

/// `_meta` key tagging a notification with the subscription it belongs to.
const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

/// One open `subscriptions/listen` of the host.
#[derive(Debug)]
pub(super) struct Listen {
    id: Value,
    kinds: Vec<ListKind>,
    uris: Vec<String>,
}

impl Core {
    pub(super) fn host_listen(&mut self, message: &Value, id: Value, now: Instant) {
        let wanted = message
            .at(&["params", "notifications"])
            .cloned()
            .unwrap_or_default();
        let flag = |key: &str| wanted.get(key).and_then(Value::as_bool) == Some(true);
        let mut kinds = Vec::new();
        for (key, kind) in [
            ("toolsListChanged", ListKind::Tools),
            ("promptsListChanged", ListKind::Prompts),
            ("resourcesListChanged", ListKind::Resources),
        ] {
            if flag(key) {
                kinds.push(kind);
            }
        }
        let mut uris = Vec::new();
        let requested = wanted
            .field("resourceSubscriptions")
            .and_then(Value::as_array);
        for uri in requested.into_iter().flatten().filter_map(Value::as_str) {
            let Ok(index) = self.resource_server(uri) else {
                continue;
            };
            let subscribable = self.servers[index]
                .capabilities
                .as_ref()
                .and_then(|c| c.at(&["resources", "subscribe"]))
                .and_then(Value::as_bool)
                == Some(true);
            if subscribable && self.servers[index].life.is_ready() {
                let params = json!({"uri": uri});
                self.internal_request(index, "resources/subscribe", params, Origin::Ignore, now);
                uris.push(uri.to_string());
            }
        }
        let offered = self.capabilities();
        kinds.retain(|kind| offered.get(kind.capability()).is_some());
        let honored = honored(&kinds, wanted.field("resourceSubscriptions").map(|_| &uris));
        let params = json!({"_meta": {META_SUBSCRIPTION: id.clone()}, "notifications": honored});
        self.send_host(notification(
            "notifications/subscriptions/acknowledged",
            params,
        ));
        self.listens.push(Listen { id, kinds, uris });
    }

    /// Whether a host request id is an open subscription.
    pub(super) fn is_listen(&self, key: &str) -> bool {
        self.listens.iter().any(|l| has_id_key(&l.id, key))
    }

    /// The host cancelled a subscription: it ends (no answer, as for any cancelled request).
    pub(super) fn end_listen(&mut self, key: &str) -> bool {
        let before = self.listens.len();
        self.listens.retain(|l| id_key(&l.id) != key);
        before != self.listens.len()
    }

    /// A list changed: each subscription that asked for it hears it (they exist only for
    /// stateless requests, whatever era the host's latest request spoke: the HTTP face serves
    /// both eras to one core).
    pub(super) fn notify_listens(&mut self, kind: ListKind) {
        let method = format!("notifications/{}/list_changed", kind.capability());
        let ids: Vec<Value> = self
            .listens
            .iter()
            .filter(|l| l.kinds.contains(&kind))
            .map(|l| l.id.clone())
            .collect();
        for id in ids {
            let params = json!({"_meta": {META_SUBSCRIPTION: id}});
            self.send_host(notification(&method, params));
        }
    }

    /// A server's `notifications/resources/updated`: to the subscriptions naming that resource
    /// (stateless host), else on as it came. False when it is to be dropped: only the server
    /// the host's reads of that URI go to may say it changed, never another in its name.
    pub(super) fn resource_updated(&mut self, index: usize, message: &mut Value) -> bool {
        let uri = message
            .at(&["params", "uri"])
            .and_then(Value::as_str)
            .unwrap_or_default();
        if self.resource_server(uri) != Ok(index) {
            let reason = format!(
                "notifications/resources/updated for {uri:?}, a resource the host's reads do not send to this server"
            );
            self.out.push(super::Action::Dropped {
                server: index,
                reason,
            });
            return false;
        }
        // The HTTP face serves both eras: a handshake session subscribed with
        // `resources/subscribe` hears it as it came (the face routes it to the sessions
        // subscribed), a 2026-07-28 one through its subscription.
        if !era::stateless(&self.host) && !self.trust_identity {
            return true;
        }
        let ids: Vec<Value> = self
            .listens
            .iter()
            .filter(|l| l.uris.iter().any(|u| u == uri))
            .map(|l| l.id.clone())
            .collect();
        for id in ids {
            let mut tagged = message.clone();
            tagged["params"]["_meta"] = json!({META_SUBSCRIPTION: id});
            self.send_host(tagged);
        }
        self.trust_identity
    }

    /// At shutdown every subscription gets its graceful end.
    pub(super) fn close_listens(&mut self) {
        for listen in std::mem::take(&mut self.listens) {
            let result = json!({"_meta": {META_SUBSCRIPTION: listen.id.clone()}});
            self.send_host(result_response(listen.id, result));
        }
    }
}

/// The acknowledged filter: the subset airlock honors (the kinds asked for that the gateway
/// offers, the resources it subscribed), with nothing it does not honor named.
fn honored(kinds: &[ListKind], uris: Option<&Vec<String>>) -> Value {
    let mut honored = serde_json::Map::new();
    for (key, kind) in [
        ("toolsListChanged", ListKind::Tools),
        ("promptsListChanged", ListKind::Prompts),
        ("resourcesListChanged", ListKind::Resources),
    ] {
        if kinds.contains(&kind) {
            honored.insert(key.into(), Value::Bool(true));
        }
    }
    if let Some(uris) = uris {
        honored.insert("resourceSubscriptions".into(), json!(uris));
    }
    Value::Object(honored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acknowledged_filter_names_only_what_is_honored() {
        assert_eq!(
            honored(&[ListKind::Tools], None),
            json!({"toolsListChanged": true})
        );
        assert_eq!(
            honored(&[ListKind::Prompts], Some(&vec!["file:///a".into()])),
            json!({"promptsListChanged": true, "resourceSubscriptions": ["file:///a"]})
        );
        assert_eq!(honored(&[], None), json!({}));
    }
}
