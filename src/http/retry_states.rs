//! The `requestState` tokens the gateway handed out (2026-07-28 multi round-trip requests), and
//! whose each is. A token stands for a server's running request and the questions it asked one
//! client: a retry carrying it answers those questions and receives that request's result. So
//! only the owner it was handed to may retry with it (the same session, or for a stateless
//! client the same identity, as for tasks); anyone else's retry is refused here, before the core
//! sees it, as a token never issued would be.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::tasks::Owner;
use crate::mcp::Field;

/// How many handed-out tokens are remembered. A token is forgotten when its owner retries with
/// it (the core mints a new one if it asks again); one never used stays until this many newer
/// ones push it out, and its retry is then refused: the client sends its request again without it.
const MAX_REMEMBERED: usize = 4096;
/// Of them, one owner's: past it that owner's oldest goes (never another's).
const MAX_PER_OWNER: usize = 256;
/// How long a token counts as a request of its owner still running on its server (the core
/// keeps the translation as long, without a `tool_timeout`): a server's question meanwhile may be
/// about it, so it makes that server's questions ambiguous for other clients.
const RUNNING_FOR: Duration = Duration::from_secs(180);

#[derive(Debug)]
struct Handed {
    owner: Owner,
    /// The server the carrying request named (`None`: any).
    server: Option<String>,
    until: Instant,
}

#[derive(Debug, Default)]
pub struct RetryStates {
    owners: HashMap<String, Handed>,
    /// Requests their clients gave up (cancelled, or their session ended) that may still run on
    /// their server: a server that ignores the cancellation and asks then may ask about them.
    given_up: VecDeque<Handed>,
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
    /// Notes the token of `answer`, about to go to `owner`, carried by a request on `server`.
    pub fn note(&mut self, owner: Owner, server: Option<String>, answer: &Value, now: Instant) {
        // Only airlock mints the tokens (the core takes a server's out of its results); one of
        // another shape is never anyone's.
        let Some(token) = handed_out(answer)
            .filter(|token| token.starts_with(crate::session::core::STATE_PREFIX))
        else {
            return;
        };
        let mine = self.owners.values().filter(|h| h.owner == owner).count();
        if mine >= MAX_PER_OWNER
            && let Some(oldest) = self
                .order
                .iter()
                .find(|t| self.owners.get(*t).is_some_and(|h| h.owner == owner))
                .cloned()
        {
            self.owners.remove(&oldest);
        }
        let handed = Handed {
            owner,
            server,
            until: now + RUNNING_FOR,
        };
        if self.owners.insert(token.to_string(), handed).is_none() {
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
        if self.owners.get(token).map(|h| &h.owner) != Some(owner) {
            return false;
        }
        self.owners.remove(token);
        true
    }
}

impl RetryStates {
    /// Notes a request `owner` gave up, on `server`, as still running there for a while.
    pub fn note_given_up(&mut self, owner: Owner, server: Option<String>, now: Instant) {
        while self.given_up.front().is_some_and(|h| h.until <= now) {
            self.given_up.pop_front();
        }
        if self.given_up.len() >= MAX_REMEMBERED {
            self.given_up.pop_front();
        }
        self.given_up.push_back(Handed {
            owner,
            server,
            until: now + RUNNING_FOR,
        });
    }

    /// Whether an owner other than `owner` holds a token (or gave up a request) whose request
    /// may still run on `server` (`None`: a request whose server is not known, which may be on
    /// any).
    pub fn another_on(&self, server: Option<&str>, owner: &Owner, now: Instant) -> bool {
        self.owners.values().chain(self.given_up.iter()).any(|h| {
            h.owner != *owner
                && h.until > now
                && match (server, h.server.as_deref()) {
                    (Some(asked), Some(held)) => asked == held,
                    _ => true,
                }
        })
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
        states.note(
            alice.clone(),
            None,
            &input_required("airlock-mrtr-t1"),
            Instant::now(),
        );
        states.note(
            alice.clone(),
            None,
            &json!({"jsonrpc":"2.0","id":2,"result":{"content":[]}}),
            Instant::now(),
        );
        assert!(!states.take(&mallory, &json!("airlock-mrtr-t1")));
        assert!(!states.take(&Owner::Session(3), &json!("airlock-mrtr-t1")));
        assert!(!states.take(&alice, &json!("never handed out")));
        states.note(
            alice.clone(),
            None,
            &input_required("a-servers-own"),
            Instant::now(),
        );
        assert!(
            !states.take(&alice, &json!("a-servers-own")),
            "not airlock's"
        );
        assert!(!states.take(&alice, &json!(["airlock-mrtr-t1"])));
        assert!(states.take(&alice, &json!("airlock-mrtr-t1")));
        assert!(!states.take(&alice, &json!("airlock-mrtr-t1")), "used up");
    }

    #[test]
    fn past_the_bounds_the_oldest_tokens_go_and_one_owner_never_pushes_out_anothers() {
        let (mut states, now) = (RetryStates::default(), Instant::now());
        let owner = |n: usize| Owner::Session((n % 64) as u64);
        for n in 0..MAX_REMEMBERED + 10 {
            states.note(
                owner(n),
                None,
                &input_required(&format!("airlock-mrtr-t{n}")),
                now,
            );
        }
        assert!(!states.take(&owner(9), &json!("airlock-mrtr-t9")));
        assert!(states.take(&owner(10), &json!("airlock-mrtr-t10")));
        assert!(states.owners.len() <= MAX_REMEMBERED);
        // Mallory's flood takes her own oldest, never Alice's.
        let mut states = RetryStates::default();
        let (alice, mallory) = (Owner::Session(1), Owner::Session(2));
        states.note(
            alice.clone(),
            None,
            &input_required("airlock-mrtr-alice"),
            now,
        );
        for n in 0..MAX_PER_OWNER + 100 {
            let token = format!("airlock-mrtr-m{n}");
            states.note(mallory.clone(), None, &input_required(&token), now);
        }
        assert!(states.take(&alice, &json!("airlock-mrtr-alice")));
        assert!(!states.take(&mallory, &json!("airlock-mrtr-m0")));
    }

    #[test]
    fn a_token_held_makes_its_server_anothers_until_it_is_used_or_its_time_is_over() {
        let (mut states, now) = (RetryStates::default(), Instant::now());
        let (alice, bob) = (Owner::Session(1), Owner::Session(2));
        states.note(
            alice.clone(),
            Some("notes".into()),
            &input_required("airlock-mrtr-a"),
            now,
        );
        assert!(states.another_on(Some("notes"), &bob, now));
        assert!(states.another_on(None, &bob, now));
        assert!(!states.another_on(Some("jobs"), &bob, now));
        assert!(!states.another_on(Some("notes"), &alice, now), "her own");
        assert!(!states.another_on(Some("notes"), &bob, now + RUNNING_FOR));
        assert!(states.take(&alice, &json!("airlock-mrtr-a")));
        assert!(!states.another_on(Some("notes"), &bob, now));
    }
}
