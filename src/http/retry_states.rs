//! The `requestState` tokens the gateway handed out (2026-07-28 multi round-trip requests), and
//! whose each is. A token stands for a server's running request and the questions it asked one
//! client: a retry carrying it answers those questions and receives that request's result. So
//! only the owner it was handed to may retry with it (the same session, or for a stateless
//! client the same identity, as for tasks); anyone else's retry is refused here, before the core
//! sees it, as a token never issued would be.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::tasks::Owner;
use crate::mcp::Field;

/// How many handed-out tokens are remembered. A token is forgotten when its owner retries with
/// it (the core mints a new one if it asks again); one never used stays until this many newer
/// ones push it out, and its retry is then refused: the client sends its request again without it.
const MAX_REMEMBERED: usize = 4096;

#[derive(Debug, Default)]
pub struct RetryStates {
    owners: HashMap<String, Owner>,
    /// Tokens in the order they were handed out (some may be forgotten already).
    order: VecDeque<String>,
}

/// The token of an `InputRequiredResult` answer.
pub fn handed_out(answer: &Value) -> Option<&str> {
    let result = answer.field("result")?;
    (result.field("resultType")?.as_str()? == "input_required")
        .then(|| result.field("requestState")?.as_str())
        .flatten()
}

/// The token a client's request carries to retry.
pub fn carried(request: &Value) -> Option<&Value> {
    request.at(&["params", "requestState"])
}

impl RetryStates {
    /// Notes the token of `answer`, about to go to `owner`.
    pub fn note(&mut self, owner: Owner, answer: &Value) {
        // Only airlock mints the tokens (the core takes a server's out of its results); one of
        // another shape is never anyone's.
        let Some(token) = handed_out(answer)
            .filter(|token| token.starts_with(crate::session::core::STATE_PREFIX))
        else {
            return;
        };
        if self.owners.insert(token.to_string(), owner).is_none() {
            self.order.push_back(token.to_string());
        }
        while self.owners.len() > MAX_REMEMBERED {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.owners.remove(&oldest);
                }
                None => break,
            }
        }
        if self.order.len() > 2 * MAX_REMEMBERED {
            let owners = &self.owners;
            self.order.retain(|token| owners.contains_key(token));
        }
    }

    /// Whether `owner` may retry with `token`; if so, the token is used up.
    pub fn take(&mut self, owner: &Owner, token: &Value) -> bool {
        let Some(token) = token.as_str() else {
            return false;
        };
        if self.owners.get(token) != Some(owner) {
            return false;
        }
        self.owners.remove(token);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input_required(token: &str) -> Value {
        json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{},"requestState":token}})
    }

    #[test]
    fn a_token_is_its_owners_once_and_nobody_elses() {
        let mut states = RetryStates::default();
        let alice = Owner::Stateless(Some("alice".into()));
        let mallory = Owner::Stateless(Some("mallory".into()));
        states.note(alice.clone(), &input_required("airlock-mrtr-t1"));
        states.note(
            alice.clone(),
            &json!({"jsonrpc":"2.0","id":2,"result":{"content":[]}}),
        );
        assert!(!states.take(&mallory, &json!("airlock-mrtr-t1")));
        assert!(!states.take(&Owner::Session(3), &json!("airlock-mrtr-t1")));
        assert!(!states.take(&alice, &json!("never handed out")));
        states.note(alice.clone(), &input_required("a-servers-own"));
        assert!(
            !states.take(&alice, &json!("a-servers-own")),
            "not airlock's"
        );
        assert!(!states.take(&alice, &json!(["airlock-mrtr-t1"])));
        assert!(states.take(&alice, &json!("airlock-mrtr-t1")));
        assert!(!states.take(&alice, &json!("airlock-mrtr-t1")), "used up");
    }

    #[test]
    fn past_the_bound_the_oldest_tokens_are_forgotten() {
        let mut states = RetryStates::default();
        let owner = Owner::Session(1);
        for n in 0..MAX_REMEMBERED + 10 {
            states.note(
                owner.clone(),
                &input_required(&format!("airlock-mrtr-t{n}")),
            );
        }
        assert!(!states.take(&owner, &json!("airlock-mrtr-t9")));
        assert!(states.take(&owner, &json!("airlock-mrtr-t10")));
        assert!(states.take(
            &owner,
            &json!(format!("airlock-mrtr-t{}", MAX_REMEMBERED + 9))
        ));
        assert!(states.owners.len() <= MAX_REMEMBERED);
    }
}
