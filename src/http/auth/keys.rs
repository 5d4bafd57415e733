//! The issuer's key set for [`JwtValidator`]: fetched on demand, cached, refreshed.
//!
//! - Every 10 minutes the set is refreshed in the background; tokens keep being checked against
//!   the cached set meanwhile.
//! - A token that names a key the set does not hold (a rotated key) may trigger a fetch, but at
//!   most one fetch starts every 30 s, successful or not: tokens with made-up key ids cannot make
//!   the gateway hammer the issuer, and a failed fetch is remembered, not retried per token.
//! - One fetch at a time (single flight): requests that need it wait for the one in flight.
//! - No lock is held across I/O: the fetch runs in its own task, the cache's lock is held only to
//!   read or record its state, so a slow or hanging issuer never stalls a token the cached keys
//!   can verify.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use tokio::sync::watch;

use super::jwt::{JwtFailure, JwtSettings, KeySource, Verified, verify};

const REFRESH_EVERY: Duration = Duration::from_secs(600);
/// At most one fetch starts in this time, whatever its outcome.
const MIN_BETWEEN_FETCHES: Duration = Duration::from_secs(30);
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request waits for the fetch in flight (the fetch itself gives up after 5 s).
const WAIT_FOR_FETCH: Duration = Duration::from_secs(10);
/// A JWKS document larger than this is refused.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// What the cache knows; only ever touched under its lock, never across an `await`.
#[derive(Debug, Default)]
struct KeyCache {
    keys: Option<Arc<JwkSet>>,
    /// When the cached set was fetched.
    fetched_at: Option<Instant>,
    /// When the last fetch started (successful or not).
    attempted_at: Option<Instant>,
    /// Why the last fetch failed, when it did.
    failure: Option<JwtFailure>,
    fetching: bool,
}

/// What a request that needs keys the cache does not hold does next.
#[derive(Debug, PartialEq, Eq)]
enum Missing {
    /// Start a fetch and wait for it.
    Fetch,
    /// Wait for the fetch in flight.
    Wait,
    /// A fetch started less than 30 s ago: answer with what the cache has.
    GiveUp,
}

impl KeyCache {
    fn may_fetch(&self, now: Instant) -> bool {
        !self.fetching
            && self
                .attempted_at
                .is_none_or(|at| now.saturating_duration_since(at) >= MIN_BETWEEN_FETCHES)
    }

    fn on_missing(&self, now: Instant) -> Missing {
        if self.fetching {
            Missing::Wait
        } else if self.may_fetch(now) {
            Missing::Fetch
        } else {
            Missing::GiveUp
        }
    }

    /// A background refresh is due: the set is older than 10 minutes (and none started lately).
    fn refresh_due(&self, now: Instant) -> bool {
        self.keys.is_some()
            && self
                .fetched_at
                .is_none_or(|at| now.saturating_duration_since(at) >= REFRESH_EVERY)
            && self.may_fetch(now)
    }

    /// The answer when there is no key set to check a token against.
    fn unavailable(&self) -> JwtFailure {
        self.failure
            .clone()
            .unwrap_or_else(|| JwtFailure::Keys("no key set".into()))
    }

    fn record(&mut self, outcome: Result<JwkSet, JwtFailure>, now: Instant) {
        self.fetching = false;
        match outcome {
            Ok(keys) => {
                self.keys = Some(Arc::new(keys));
                self.fetched_at = Some(now);
                self.failure = None;
            }
            Err(failure) => {
                tracing::warn!(
                    "the issuer's keys could not be fetched (next try in 30 s at the earliest; cached keys stay in use): {failure}"
                );
                self.failure = Some(failure);
            }
        }
    }
}

/// Loads the key set from its source.
struct Loader {
    source: KeySource,
    client: reqwest::Client,
}

impl Loader {
    async fn load(&self) -> Result<JwkSet, JwtFailure> {
        let bytes = match &self.source {
            // A small local file: read in place (the task is the fetch's own, nothing waits on it).
            KeySource::File(path) => std::fs::read(path)
                .map_err(|err| JwtFailure::Keys(format!("{}: {err}", path.display())))?,
            KeySource::Url(url) => self.fetch(url).await?,
        };
        if bytes.len() > MAX_JWKS_BYTES {
            return Err(JwtFailure::Keys("the JWKS document is over 1 MiB".into()));
        }
        serde_json::from_slice(&bytes)
            .map_err(|err| JwtFailure::Keys(format!("not a JWKS document: {err}")))
    }

    async fn fetch(&self, url: &str) -> Result<Vec<u8>, JwtFailure> {
        let failed = |err: reqwest::Error| JwtFailure::Keys(format!("{url}: {err}"));
        let response = self.client.get(url).send().await.map_err(failed)?;
        if !response.status().is_success() {
            return Err(JwtFailure::Keys(format!(
                "{url}: HTTP {}",
                response.status()
            )));
        }
        Ok(response.bytes().await.map_err(failed)?.to_vec())
    }
}

/// Verifies access tokens against the issuer's key set, cached as the module says.
pub struct JwtValidator {
    settings: JwtSettings,
    loader: Arc<Loader>,
    cache: Arc<Mutex<KeyCache>>,
    /// Bumped each time a fetch ends; requests waiting for it watch this.
    fetched: Arc<watch::Sender<u64>>,
}

impl JwtValidator {
    pub fn new(settings: JwtSettings) -> JwtValidator {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        JwtValidator {
            loader: Arc::new(Loader {
                source: settings.keys.clone(),
                client,
            }),
            settings,
            cache: Arc::new(Mutex::new(KeyCache::default())),
            fetched: Arc::new(watch::Sender::new(0)),
        }
    }

    pub fn settings(&self) -> &JwtSettings {
        &self.settings
    }

    /// Verifies a token, loading the keys first if there are none yet.
    pub async fn authenticate(&self, token: &str) -> Result<Verified, JwtFailure> {
        let keys = match self.cached_keys() {
            Some(keys) => keys,
            None => self.keys_after_fetch(None).await?,
        };
        match verify(&self.settings, &keys, token) {
            Err(JwtFailure::UnknownKey) => match self.keys_after_fetch(Some(&keys)).await {
                Ok(newer) if !Arc::ptr_eq(&newer, &keys) => verify(&self.settings, &newer, token),
                _ => Err(JwtFailure::UnknownKey),
            },
            verdict => verdict,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeyCache> {
        // The cache's state is a few plain fields written in one step: still sound after a panic.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached set, starting a background refresh when one is due.
    fn cached_keys(&self) -> Option<Arc<JwkSet>> {
        let mut cache = self.lock();
        let now = Instant::now();
        if cache.refresh_due(now) {
            self.start_fetch(&mut cache, now);
        }
        cache.keys.clone()
    }

    /// Keys newer than `stale` (or any, when there were none): the set another request fetched
    /// meanwhile, else the outcome of the fetch in flight or of one started now, when allowed.
    async fn keys_after_fetch(
        &self,
        stale: Option<&Arc<JwkSet>>,
    ) -> Result<Arc<JwkSet>, JwtFailure> {
        let mut fetched = {
            let mut cache = self.lock();
            if let Some(keys) = &cache.keys
                && stale.is_none_or(|stale| !Arc::ptr_eq(stale, keys))
            {
                return Ok(keys.clone());
            }
            match cache.on_missing(Instant::now()) {
                Missing::GiveUp => return cache.keys.clone().ok_or_else(|| cache.unavailable()),
                Missing::Wait => {}
                Missing::Fetch => self.start_fetch(&mut cache, Instant::now()),
            }
            // Subscribed under the lock: the fetch records its outcome under it before it bumps.
            self.fetched.subscribe()
        };
        let _ = tokio::time::timeout(WAIT_FOR_FETCH, fetched.changed()).await;
        let cache = self.lock();
        cache.keys.clone().ok_or_else(|| cache.unavailable())
    }

    /// Marks a fetch in flight and runs it in its own task, which records the outcome.
    fn start_fetch(&self, cache: &mut KeyCache, now: Instant) {
        cache.fetching = true;
        cache.attempted_at = Some(now);
        let loader = Arc::clone(&self.loader);
        let shared = Arc::clone(&self.cache);
        let fetched = Arc::clone(&self.fetched);
        tokio::spawn(async move {
            let outcome = loader.load().await;
            shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .record(outcome, Instant::now());
            fetched.send_modify(|generation| *generation = generation.wrapping_add(1));
        });
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
