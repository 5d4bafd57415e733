//! The listener's limits and the request-rate bucket. Pure: time is a parameter.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Bounds on what one client may make the gateway hold or do (`[http]` in airlock.toml).
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Largest POST body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Open sessions over all clients.
    pub max_sessions: usize,
    /// Open sessions of one client (its identity, else its address).
    pub sessions_per_client: usize,
    /// A session with no request and no open stream for this long is ended (404 afterwards).
    pub session_idle: Duration,
    /// Requests per second one client may make on average; 0 turns the limit off.
    pub rate_per_second: u32,
    /// Requests one client may make at once above the average.
    pub rate_burst: u32,
    /// Events kept per session for `Last-Event-ID` resumption.
    pub replay_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_sessions: 1024,
            sessions_per_client: 128,
            session_idle: Duration::from_secs(30 * 60),
            rate_per_second: 100,
            rate_burst: 200,
            replay_events: 256,
        }
    }
}

/// A token bucket per client: `rate_per_second` on average, up to `rate_burst` at once.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: HashMap<String, Bucket>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets kept before full (idle) ones are forgotten.
const PRUNE_AT: usize = 4096;

impl RateLimiter {
    pub fn new(limits: &Limits) -> RateLimiter {
        RateLimiter {
            rate: f64::from(limits.rate_per_second),
            burst: f64::from(limits.rate_burst.max(1)),
            buckets: HashMap::new(),
        }
    }

    /// Takes one request from `client`'s bucket; `Err(wait)` when it is empty.
    pub fn admit(&mut self, client: &str, now: Instant) -> Result<(), Duration> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        if self.buckets.len() >= PRUNE_AT && !self.buckets.contains_key(client) {
            self.prune(now);
        }
        let (rate, burst) = (self.rate, self.burst);
        let bucket = self.buckets.entry(client.to_string()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }

    /// Forgets buckets that have refilled: they hold no information.
    fn prune(&mut self, now: Instant) {
        let (rate, burst) = (self.rate, self.burst);
        self.buckets.retain(|_, b| {
            b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rate: u32, burst: u32) -> RateLimiter {
        RateLimiter::new(&Limits {
            rate_per_second: rate,
            rate_burst: burst,
            ..Limits::default()
        })
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let mut limiter = limiter(10, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.admit("a", t0), Ok(()));
        }
        let wait = limiter.admit("a", t0).unwrap_err();
        assert!(wait <= Duration::from_millis(100) && wait > Duration::ZERO);
        assert_eq!(limiter.admit("a", t0 + Duration::from_millis(100)), Ok(()));
        // Another client has its own bucket.
        assert_eq!(limiter.admit("b", t0), Ok(()));
    }

    #[test]
    fn zero_rate_is_no_limit() {
        let mut limiter = limiter(0, 1);
        let t0 = Instant::now();
        for _ in 0..10_000 {
            assert_eq!(limiter.admit("a", t0), Ok(()));
        }
    }

    #[test]
    fn full_buckets_are_forgotten() {
        let mut limiter = limiter(1000, 1);
        let t0 = Instant::now();
        for n in 0..PRUNE_AT {
            limiter.admit(&n.to_string(), t0).unwrap();
        }
        limiter.admit("late", t0 + Duration::from_secs(5)).unwrap();
        assert_eq!(limiter.buckets.len(), 1);
    }
}
