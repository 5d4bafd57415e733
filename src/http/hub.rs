//! The session table and the seam to the gateway.
//!
//! Many HTTP sessions share one gateway: the [`Backend`] is told when a session opens (with its
//! identity), gets every client message tagged with the session's key, and answers through the
//! session's [`Outbox`]. The hub owns the HTTP side: secret session ids, which identity a session
//! belongs to, limits per client, idle expiry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::Value;

use super::auth::Identity;
use super::limits::Limits;
use super::session::SessionState;

/// A session's number inside airlock (the id clients hold is a separate secret).
pub type SessionKey = u64;

/// What the gateway learns about a session when it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub key: SessionKey,
    /// `None` when the listener has no authentication configured.
    pub identity: Option<Identity>,
    /// Whom sessions and request rates are counted by: the identity, else the peer address.
    pub client: String,
    /// A 2026-07-28 request: the session lives for that one request.
    pub stateless: bool,
}

/// The gateway behind the listener.
pub trait Backend: Send + Sync + 'static {
    /// A session begins; answers and server-initiated messages for it go to `outbox`.
    fn open(&self, info: &SessionInfo, outbox: Outbox);
    /// A message from the session's client (request, notification or response), untouched.
    fn message(&self, key: SessionKey, message: Value);
    /// The session ended (DELETE, idle expiry, a stateless request done or abandoned): forget
    /// it and cancel whatever it still has in flight.
    fn close(&self, key: SessionKey);
}

/// One session: its secret id, who owns it, and its streams.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    pub info: SessionInfo,
    state: Mutex<SessionState>,
}

impl Session {
    pub fn state(&self) -> MutexGuard<'_, SessionState> {
        // A panic while holding the lock cannot leave the routing tables half-written in a way
        // that matters more than refusing every later request would: keep going.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The request carries the identity this session was opened with (or none when neither has).
    pub fn owned_by(&self, identity: Option<&Identity>) -> bool {
        match (&self.info.identity, identity) {
            (None, None) => true,
            (Some(owner), Some(caller)) => {
                owner.name == caller.name && owner.method == caller.method
            }
            _ => false,
        }
    }
}

/// Where the gateway sends a session's messages.
#[derive(Debug, Clone)]
pub struct Outbox {
    session: Arc<Session>,
}

impl Outbox {
    /// `related`: the id of the client request this message belongs to, when the gateway knows.
    pub fn send(&self, message: &Value, related: Option<&Value>) {
        if let Some(why) = self.session.state().deliver(message, related) {
            tracing::debug!(session = self.session.info.key, "message dropped: {why}");
        }
    }

    pub fn key(&self) -> SessionKey {
        self.session.info.key
    }
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "too many open sessions for this client ({0}, [http] sessions_per_client): end one with DELETE, or wait for idle ones to expire"
    )]
    ClientLimit(usize),
    #[error("too many open sessions ({0}, [http] max_sessions): try again later")]
    TotalLimit(usize),
    #[error("cannot make a session id: {0}")]
    Random(std::io::Error),
}

#[derive(Debug, Default)]
struct Table {
    by_id: HashMap<String, Arc<Session>>,
    per_client: HashMap<String, usize>,
}

pub struct Hub {
    backend: Arc<dyn Backend>,
    limits: Limits,
    table: Mutex<Table>,
    next_key: AtomicU64,
}

/// Replay bytes kept per session (events are also bounded by count: `Limits::replay_events`).
const REPLAY_BYTES: usize = 256 * 1024;

impl Hub {
    pub fn new(backend: Arc<dyn Backend>, limits: Limits) -> Hub {
        Hub {
            backend,
            limits,
            table: Mutex::new(Table::default()),
            next_key: AtomicU64::new(1),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn make(
        &self,
        identity: Option<Identity>,
        client: String,
        stateless: bool,
        id: String,
    ) -> Arc<Session> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut state = SessionState::new(Instant::now(), self.limits.replay_events, REPLAY_BYTES);
        state.stateless = stateless;
        Arc::new(Session {
            id,
            info: SessionInfo {
                key,
                identity,
                client,
                stateless,
            },
            state: Mutex::new(state),
        })
    }

    /// A new stateful session (an `initialize` without a session id).
    pub fn open(
        &self,
        identity: Option<Identity>,
        client: String,
    ) -> Result<Arc<Session>, OpenError> {
        let id = crate::random::hex_id::<16>().map_err(OpenError::Random)?;
        let session = {
            let mut table = self.table();
            if table.by_id.len() >= self.limits.max_sessions {
                return Err(OpenError::TotalLimit(self.limits.max_sessions));
            }
            let count = table.per_client.entry(client.clone()).or_default();
            if *count >= self.limits.sessions_per_client {
                return Err(OpenError::ClientLimit(self.limits.sessions_per_client));
            }
            *count += 1;
            let session = self.make(identity, client, false, id);
            table.by_id.insert(session.id.clone(), session.clone());
            session
        };
        self.backend.open(
            &session.info,
            Outbox {
                session: session.clone(),
            },
        );
        Ok(session)
    }

    /// A session for one 2026-07-28 request: not in the table, ended with its answer.
    pub fn open_stateless(&self, identity: Option<Identity>, client: String) -> Arc<Session> {
        let session = self.make(identity, client, true, String::new());
        self.backend.open(
            &session.info,
            Outbox {
                session: session.clone(),
            },
        );
        session
    }

    /// The session a client names, if it exists and belongs to the caller. A session of someone
    /// else is "not found": its existence is not revealed.
    pub fn find(&self, id: &str, identity: Option<&Identity>) -> Option<Arc<Session>> {
        let session = self.table().by_id.get(id).cloned()?;
        session.owned_by(identity).then_some(session)
    }

    /// Ends a session: its connections end, the gateway forgets it, its id answers 404.
    pub fn end(&self, session: &Session) {
        if !session.info.stateless {
            let mut table = self.table();
            if table.by_id.remove(&session.id).is_none() {
                return; // already ended
            }
            if let Some(count) = table.per_client.get_mut(&session.info.client) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    table.per_client.remove(&session.info.client);
                }
            }
        }
        session.state().close();
        self.backend.close(session.info.key);
    }

    /// Ends every session idle for longer than the limit; returns how many.
    pub fn reap(&self, now: Instant) -> usize {
        let idle: Vec<Arc<Session>> = self
            .table()
            .by_id
            .values()
            .filter(|session| {
                let state = session.state();
                state.idle()
                    && now.saturating_duration_since(state.last_active) >= self.limits.session_idle
            })
            .cloned()
            .collect();
        for session in &idle {
            tracing::info!(
                session = session.info.key,
                "session expired after being idle"
            );
            self.end(session);
        }
        idle.len()
    }

    /// Open stateful sessions.
    pub fn count(&self) -> usize {
        self.table().by_id.len()
    }

    /// Ends every session (shutdown).
    pub fn end_all(&self) {
        let all: Vec<Arc<Session>> = self.table().by_id.values().cloned().collect();
        for session in &all {
            self.end(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::auth::AuthMethod;
    use std::time::Duration;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl Backend for Recorder {
        fn open(&self, info: &SessionInfo, _outbox: Outbox) {
            self.0.lock().unwrap().push(format!("open {}", info.key));
        }
        fn message(&self, key: SessionKey, _message: Value) {
            self.0.lock().unwrap().push(format!("message {key}"));
        }
        fn close(&self, key: SessionKey) {
            self.0.lock().unwrap().push(format!("close {key}"));
        }
    }

    fn identity(name: &str) -> Option<Identity> {
        Some(Identity {
            name: name.into(),
            method: AuthMethod::Token,
            scopes: vec![],
        })
    }

    fn hub(limits: Limits) -> (Arc<Recorder>, Hub) {
        let recorder = Arc::new(Recorder::default());
        (recorder.clone(), Hub::new(recorder, limits))
    }

    #[test]
    fn sessions_belong_to_their_identity() {
        let (recorder, hub) = hub(Limits::default());
        let session = hub.open(identity("alice"), "alice".into()).unwrap();
        assert_eq!(session.id.len(), 32);
        assert!(hub.find(&session.id, identity("alice").as_ref()).is_some());
        assert!(hub.find(&session.id, identity("bob").as_ref()).is_none());
        assert!(hub.find(&session.id, None).is_none());
        assert!(hub.find("nope", identity("alice").as_ref()).is_none());
        hub.end(&session);
        hub.end(&session);
        assert!(hub.find(&session.id, identity("alice").as_ref()).is_none());
        assert_eq!(*recorder.0.lock().unwrap(), ["open 1", "close 1"]);
    }

    #[test]
    fn sessions_are_limited_per_client_and_in_total() {
        let (_, hub) = hub(Limits {
            sessions_per_client: 2,
            max_sessions: 3,
            ..Limits::default()
        });
        let a1 = hub.open(None, "a".into()).unwrap();
        hub.open(None, "a".into()).unwrap();
        assert!(matches!(
            hub.open(None, "a".into()),
            Err(OpenError::ClientLimit(2))
        ));
        hub.open(None, "b".into()).unwrap();
        assert!(matches!(
            hub.open(None, "c".into()),
            Err(OpenError::TotalLimit(3))
        ));
        hub.end(&a1);
        hub.open(None, "a".into()).unwrap();
        // Stateless requests are not sessions a client holds.
        hub.open_stateless(None, "a".into());
        assert_eq!(hub.count(), 3);
    }

    #[test]
    fn idle_sessions_expire() {
        let (recorder, hub) = hub(Limits {
            session_idle: Duration::from_secs(60),
            ..Limits::default()
        });
        let session = hub.open(None, "a".into()).unwrap();
        let now = Instant::now();
        assert_eq!(hub.reap(now), 0);
        assert_eq!(hub.reap(now + Duration::from_secs(61)), 1);
        assert!(hub.find(&session.id, None).is_none());
        assert!(recorder.0.lock().unwrap().contains(&"close 1".to_string()));
    }
}
