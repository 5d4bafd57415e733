//! A stand-in gateway for the listener's own tests: answers `initialize` and a few tools, sends
//! server-initiated messages on cue, and records what it was told.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::hub::{Backend, Outbox, SessionInfo, SessionKey};

#[derive(Default)]
pub struct FakeGateway {
    pub log: Mutex<Vec<String>>,
    outboxes: Mutex<HashMap<SessionKey, Outbox>>,
    pub identities: Mutex<Vec<Option<String>>>,
}

impl FakeGateway {
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Sends a server-initiated message to every session.
    pub fn broadcast(&self, message: &Value) {
        for outbox in self.outboxes.lock().unwrap().values() {
            outbox.send(message, None);
        }
    }
}

impl Backend for Arc<FakeGateway> {
    fn open(&self, info: &SessionInfo, outbox: Outbox) {
        self.identities
            .lock()
            .unwrap()
            .push(info.identity.as_ref().map(|i| i.name.clone()));
        self.outboxes.lock().unwrap().insert(info.key, outbox);
    }

    fn message(&self, key: SessionKey, message: Value) {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.log.lock().unwrap().push(format!("{key} {method}"));
        let Some(outbox) = self.outboxes.lock().unwrap().get(&key).cloned() else {
            return;
        };
        let Some(id) = message.get("id").cloned() else {
            return;
        };
        let answer_id = id.clone();
        let answer = move |result: Value| json!({"jsonrpc":"2.0","id":answer_id,"result":result});
        match method.as_str() {
            "initialize" => {
                let version = message.pointer("/params/protocolVersion").cloned().unwrap_or(json!("2025-06-18"));
                outbox.send(&answer(json!({"protocolVersion": version, "capabilities": {}, "serverInfo": {"name":"fake","version":"1"}})), None);
            }
            "tools/call" => match message.pointer("/params/name").and_then(Value::as_str) {
                Some("slow") => {
                    let token = message.pointer("/params/_meta/progressToken").cloned();
                    tokio::spawn(async move {
                        for step in 1..=3 {
                            if let Some(token) = &token {
                                outbox.send(&json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":step}}), None);
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        outbox.send(&answer(json!({"content":[{"type":"text","text":"done"}]})), None);
                    });
                }
                Some("hang") => {}
                Some("unknown") => outbox.send(&json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"Method not found"}}), None),
                _ => outbox.send(&answer(json!({"content":[{"type":"text","text":"ok"}]})), None),
            },
            _ => outbox.send(&answer(json!({})), None),
        }
    }

    fn close(&self, key: SessionKey) {
        self.log.lock().unwrap().push(format!("{key} close"));
        self.outboxes.lock().unwrap().remove(&key);
    }
}
