//! The connect hand-over's host-side name lookups, shared and kept briefly.
//!
//! A package install opens dozens of connections to one registry at once, and each
//! connection needs the registry's addresses. Asking the host's resolver once per connection sent
//! dozens of identical queries together, and resolvers that drop queries under such bursts made
//! clients wait out their 5-second retry (a `bunx` install took 6 to 11 s through airlock against
//! 1.3 s without). Here concurrent lookups of one name share one query, and an answer is kept for
//! [`KEEP_FOR`]; a failure is not kept (the next connection asks again). airlock's address
//! checks (private, loopback, link-local ranges) apply to every connection as before: a kept
//! answer is judged each time it is used.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use super::route::Resolve;

/// How long an answer is kept: long enough for an install's burst, short enough that a moved
/// service is followed within a minute (getaddrinfo gives no TTL to honour).
pub const KEEP_FOR: Duration = Duration::from_secs(30);
/// Names kept at most; past it, expired entries are dropped first, then the oldest.
const MAX_NAMES: usize = 256;

type Answer = Result<Vec<IpAddr>, (io::ErrorKind, String)>;

struct Entry {
    answer: Arc<OnceCell<Answer>>,
    asked: Instant,
}

/// A [`Resolve`] that shares concurrent lookups of one name and keeps answers for [`KEEP_FOR`].
pub struct Cached<R> {
    inner: R,
    entries: Mutex<HashMap<String, Entry>>,
}

impl<R> Cached<R> {
    pub fn new(inner: R) -> Cached<R> {
        Cached {
            inner,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The shared answer cell for `name`: the kept one while it is fresh, else a new one.
    fn cell(&self, name: &str, now: Instant) -> Arc<OnceCell<Answer>> {
        let Ok(mut entries) = self.entries.lock() else {
            // A poisoned lock (a panic elsewhere): nothing is shared, nothing is lost.
            return Arc::new(OnceCell::new());
        };
        if let Some(entry) = entries.get(name)
            && now.duration_since(entry.asked) < KEEP_FOR
        {
            return entry.answer.clone();
        }
        if entries.len() >= MAX_NAMES {
            entries.retain(|_, entry| now.duration_since(entry.asked) < KEEP_FOR);
            if entries.len() >= MAX_NAMES
                && let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.asked)
                    .map(|(name, _)| name.clone())
            {
                entries.remove(&oldest);
            }
        }
        let answer = Arc::new(OnceCell::new());
        entries.insert(
            name.to_string(),
            Entry {
                answer: answer.clone(),
                asked: now,
            },
        );
        answer
    }

    /// Forgets a failed answer, if it is still the one kept for `name`.
    fn forget(&self, name: &str, answer: &Arc<OnceCell<Answer>>) {
        if let Ok(mut entries) = self.entries.lock()
            && entries
                .get(name)
                .is_some_and(|entry| Arc::ptr_eq(&entry.answer, answer))
        {
            entries.remove(name);
        }
    }
}

impl<R: Resolve> Resolve for Cached<R> {
    async fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let cell = self.cell(name, Instant::now());
        let answer = cell
            .get_or_init(|| async {
                self.inner
                    .resolve(name, port)
                    .await
                    .map_err(|err| (err.kind(), err.to_string()))
            })
            .await;
        match answer {
            Ok(addresses) => Ok(addresses.clone()),
            Err((kind, message)) => {
                self.forget(name, &cell);
                Err(io::Error::new(*kind, message.clone()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts lookups; answers after a pause (so concurrent lookups overlap); fails `bad.`.
    #[derive(Default)]
    struct Counting {
        asked: AtomicUsize,
    }

    impl Resolve for Counting {
        async fn resolve(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            if name.starts_with("bad.") {
                return Err(io::Error::other("no answer"));
            }
            Ok(vec![IpAddr::from([192, 0, 2, 7])])
        }
    }

    #[tokio::test]
    async fn concurrent_lookups_of_one_name_share_one_query_and_failures_are_not_kept() {
        let cached = Arc::new(Cached::new(Counting::default()));
        let lookups: Vec<_> = (0..50)
            .map(|_| {
                let cached = cached.clone();
                tokio::spawn(async move { cached.resolve("registry.example", 443).await })
            })
            .collect();
        for lookup in lookups {
            assert_eq!(
                lookup.await.unwrap().unwrap(),
                vec![IpAddr::from([192, 0, 2, 7])]
            );
        }
        assert_eq!(cached.inner.asked.load(Ordering::SeqCst), 1);
        // Kept: a later connection does not ask again.
        cached.resolve("registry.example", 443).await.unwrap();
        assert_eq!(cached.inner.asked.load(Ordering::SeqCst), 1);
        // A failure is shared by those waiting, then forgotten.
        assert!(cached.resolve("bad.example", 443).await.is_err());
        assert!(cached.resolve("bad.example", 443).await.is_err());
        assert_eq!(cached.inner.asked.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn answers_expire_and_the_table_stays_bounded() {
        let cached = Cached::new(Counting::default());
        let start = Instant::now();
        let first = cached.cell("a.example", start);
        assert!(Arc::ptr_eq(&first, &cached.cell("a.example", start)));
        let later = start + KEEP_FOR;
        assert!(!Arc::ptr_eq(&first, &cached.cell("a.example", later)));
        for n in 0..(MAX_NAMES * 2) {
            cached.cell(&format!("n{n}.example"), later);
        }
        assert!(cached.entries.lock().unwrap().len() <= MAX_NAMES);
    }
}
