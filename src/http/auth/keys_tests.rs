//! The key cache against a real JWKS server on loopback that answers its first request and then
//! hangs (accepts, reads, never answers), as an overloaded or broken issuer does.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;
use crate::http::auth::jwt::tests::{claims, issuer, settings, sign};

/// Serves `first` (a JWKS document) to the first request when given; every other request is
/// held open unanswered. Returns the URL and the number of requests so far.
fn jwks_server(first: Option<String>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let n = counted.fetch_add(1, Ordering::SeqCst);
            match (&first, n) {
                (Some(jwks), 0) => {
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{jwks}",
                        jwks.len()
                    );
                    let _ = stream.write_all(reply.as_bytes());
                }
                _ => held.push(stream),
            }
        }
    });
    (url, hits)
}

fn validator(url: String) -> Arc<JwtValidator> {
    Arc::new(JwtValidator::new(JwtSettings {
        keys: KeySource::Url(url),
        ..settings()
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn made_up_key_ids_cause_one_fetch_and_never_stall_a_valid_token() {
    let real = issuer("k1");
    let (url, hits) = jwks_server(Some(json!({"keys": [real.jwk.clone()]}).to_string()));
    let validator = validator(url);
    let good = sign(&real, Some("k1"), &claims());
    assert_eq!(
        validator.authenticate(&good).await.unwrap().subject,
        "alice"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // Within 30 s of that fetch a made-up kid is refused from the cache, without a fetch.
    let forged = issuer("made-up");
    let unknown = sign(&forged, Some("made-up"), &claims());
    assert_eq!(
        validator.authenticate(&unknown).await,
        Err(JwtFailure::UnknownKey)
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // 31 s later (the cache aged by hand) a burst of made-up kids starts exactly one fetch, which
    // hangs; a valid token is verified from the cache meanwhile, at once.
    {
        let mut cache = validator.lock();
        let earlier = Instant::now() - Duration::from_secs(31);
        cache.attempted_at = Some(earlier);
        cache.fetched_at = Some(earlier);
    }
    let burst: Vec<_> = (0..20)
        .map(|_| {
            let validator = Arc::clone(&validator);
            let unknown = unknown.clone();
            tokio::spawn(async move { validator.authenticate(&unknown).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "one fetch for the whole burst"
    );
    let started = Instant::now();
    assert_eq!(
        validator.authenticate(&good).await.unwrap().subject,
        "alice"
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "a valid token waited {:?} for the hanging fetch",
        started.elapsed()
    );
    for verdict in burst {
        assert_eq!(verdict.await.unwrap(), Err(JwtFailure::UnknownKey));
    }

    // The failed fetch is remembered: the next made-up kid is refused at once, with no fetch.
    let started = Instant::now();
    assert_eq!(
        validator.authenticate(&unknown).await,
        Err(JwtFailure::UnknownKey)
    );
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(
        validator.authenticate(&good).await.unwrap().subject,
        "alice"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_keys_one_hanging_fetch_answers_everyone_and_its_failure_is_remembered() {
    let real = issuer("k1");
    let (url, hits) = jwks_server(None);
    let validator = validator(url);
    let good = sign(&real, Some("k1"), &claims());
    let waiting: Vec<_> = (0..10)
        .map(|_| {
            let validator = Arc::clone(&validator);
            let good = good.clone();
            tokio::spawn(async move { validator.authenticate(&good).await })
        })
        .collect();
    for verdict in waiting {
        assert!(matches!(verdict.await.unwrap(), Err(JwtFailure::Keys(_))));
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1, "one fetch for all ten");
    let started = Instant::now();
    let again = validator.authenticate(&good).await;
    assert!(
        matches!(&again, Err(JwtFailure::Keys(reason)) if reason.contains("jwks.json")),
        "{again:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[test]
fn the_cache_decides_fetches_from_its_state() {
    let now = Instant::now();
    let mut cache = KeyCache::default();
    assert_eq!(cache.on_missing(now), Missing::Fetch);
    assert!(
        !cache.refresh_due(now),
        "nothing to refresh before a first set"
    );
    cache.fetching = true;
    cache.attempted_at = Some(now);
    assert_eq!(cache.on_missing(now), Missing::Wait);
    cache.record(Err(JwtFailure::Keys("down".into())), now);
    assert_eq!(
        cache.on_missing(now + Duration::from_secs(29)),
        Missing::GiveUp
    );
    assert_eq!(cache.unavailable(), JwtFailure::Keys("down".into()));
    assert_eq!(
        cache.on_missing(now + Duration::from_secs(30)),
        Missing::Fetch
    );
    cache.record(Ok(JwkSet { keys: Vec::new() }), now);
    assert!(cache.failure.is_none());
    assert!(!cache.refresh_due(now + Duration::from_secs(599)));
    assert!(cache.refresh_due(now + Duration::from_secs(600)));
}
