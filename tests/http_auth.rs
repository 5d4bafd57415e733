//! Authentication of `airlock serve --listen`: `airlock token` bearer tokens, JWTs from a test
//! issuer whose keys the test generates (its JWKS served on loopback), and identities in policy
//! and audit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod http_support;

use std::io::{Read, Write};
use std::net::TcpListener;

use base64::Engine;
use http_support::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

fn challenge(reply: &Reply) -> String {
    reply
        .header("www-authenticate")
        .unwrap_or_else(|| panic!("no challenge: {reply:?}"))
}

fn tokens_config() -> String {
    format!("{}\n[http.auth]\ntokens = true\n", fixture_server())
}

#[test]
fn missing_wrong_and_revoked_tokens_get_401_pointing_at_the_metadata() {
    let world = World::new();
    let alice = world.token("alice");
    let stored = std::fs::read_to_string(world.token_store()).unwrap();
    assert!(!stored.contains(&alice), "only the hash is stored");
    let gateway = world.listen(&tokens_config(), &[]);
    let metadata_url = gateway
        .url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");

    let missing = post(&gateway.url, &[], &initialize("2025-06-18"));
    assert_eq!(missing.status, 401);
    assert_eq!(
        challenge(&missing),
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    let metadata = exchange(reqwest::Method::GET, &metadata_url, &[], None).json();
    assert_eq!(metadata["resource"], gateway.url.as_str());
    assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));

    let wrong = post(
        &gateway.url,
        &[("authorization", "Bearer airlock_not-a-real-token")],
        &initialize("2025-06-18"),
    );
    assert_eq!(wrong.status, 401);
    assert!(challenge(&wrong).contains("error=\"invalid_token\""));
    assert!(challenge(&wrong).contains(&metadata_url));

    let bearer = format!("Bearer {alice}");
    let auth = [("authorization", bearer.as_str())];
    let id = session(&gateway.url, &auth);
    let headers = [
        ("authorization", bearer.as_str()),
        ("mcp-session-id", id.as_str()),
    ];
    let reply = post(
        &gateway.url,
        &headers,
        &call(1, "fixture__echo", json!({"text": "hi"})),
    );
    assert_eq!(text_of(&reply.json()), "fixture: hi");

    let listed = world
        .command(&["token", "list", "--json"])
        .output()
        .unwrap();
    let records: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(records[0]["name"], "alice");
    let revoked = world
        .command(&["token", "revoke", "alice"])
        .output()
        .unwrap();
    assert!(revoked.status.success());
    let after = post(
        &gateway.url,
        &headers,
        &call(2, "fixture__echo", json!({"text": "again"})),
    );
    assert_eq!(
        after.status, 401,
        "revoked: refused from the next request on"
    );
    assert!(challenge(&after).contains("invalid_token"));
    let again = world
        .command(&["token", "revoke", "alice"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));

    // Each refusal (missing, wrong, revoked) left a record: who tried and why, never the token.
    let refusals = || -> Vec<Value> {
        world
            .audit()
            .into_iter()
            .filter(|e| e["event"] == "auth")
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while refusals().len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let refused = refusals();
    assert_eq!(refused.len(), 3, "{refused:?}");
    for event in &refused {
        assert_eq!(event["server"], "gateway");
        assert_eq!(event["detail"]["client"], "ip:127.0.0.1");
        assert_eq!(event["detail"]["status"], 401);
    }
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("authentication required")
    );
    let log = std::fs::read_to_string(world.path("state/airlock/audit.jsonl")).unwrap();
    assert!(!log.contains(&alice), "the token never reaches the log");
    assert!(!log.contains("airlock_not-a-real-token"), "nor a wrong one");
}

#[test]
fn a_denied_identity_is_refused_and_audited_with_its_name() {
    let world = World::new();
    world.policy(
        "[tools]\ndefault = \"allow\"\n\n[identities.bob]\ndeny = [\"mcp:fixture__echo\"]\n",
    );
    let (alice, bob) = (world.token("alice"), world.token("bob"));
    let mut gateway = world.listen(&tokens_config(), &[]);
    let ask = |token: &str, id: i64| {
        let bearer = format!("Bearer {token}");
        let session = session(&gateway.url, &[("authorization", bearer.as_str())]);
        let headers = [
            ("authorization", bearer.as_str()),
            ("mcp-session-id", session.as_str()),
        ];
        post(
            &gateway.url,
            &headers,
            &call(id, "fixture__echo", json!({"text": "who"})),
        )
        .json()
    };
    let allowed = ask(&alice, 1);
    assert_eq!(text_of(&allowed), "fixture: who");
    let denied = ask(&bob, 2);
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        text_of(&denied).contains("identities.\"bob\".deny"),
        "{denied}"
    );
    gateway.stop();
    let audit = world.audit();
    let decision = |who: &str| {
        audit
            .iter()
            .find(|e| e["event"] == "decision" && e["identity"] == who)
            .cloned()
            .unwrap_or_else(|| panic!("no decision by {who}: {audit:#?}"))
    };
    assert_eq!(decision("alice")["decision"], "allow");
    assert_eq!(decision("bob")["decision"], "deny");
    let bob_outcome = audit
        .iter()
        .find(|e| e["event"] == "outcome" && e["identity"] == "bob")
        .unwrap();
    assert_eq!(bob_outcome["outcome"], "denied");
    // `airlock audit --identity` filters on it.
    let out = world
        .command(&["audit", "--identity", "bob", "--json"])
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(lines, 2, "bob's decision and outcome");
}

/// A test issuer: a P-256 key generated here, its JWKS served on a loopback port.
struct Issuer {
    key: EncodingKey,
    jwks_url: String,
    /// Requests its JWKS endpoint has had.
    fetches: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn issuer() -> Issuer {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref().to_vec();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let jwks = json!({"keys": [{"kty":"EC","crv":"P-256","kid":"test-1","alg":"ES256","use":"sig",
        "x": b64(&point[1..33]), "y": b64(&point[33..65])}]})
    .to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let jwks_url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let fetches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = fetches.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{jwks}",
                jwks.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    Issuer {
        key: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwks_url,
        fetches,
    }
}

impl Issuer {
    fn token(&self, claims: Value) -> String {
        self.token_with_kid("test-1", claims)
    }

    fn token_with_kid(&self, kid: &str, claims: Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims, &self.key).unwrap()
    }

    fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn jwt_config(issuer: &Issuer) -> String {
    format!(
        "{}\n[http]\npublic_url = \"http://127.0.0.1/mcp\"\nallowed_hosts = [\"127.0.0.1\"]\n\n[http.auth.jwt]\nissuer = \"https://issuer.test\"\njwks_url = \"{}\"\nscopes = [\"mcp\"]\n",
        fixture_server(),
        issuer.jwks_url
    )
}

#[test]
fn wrong_issuer_and_unknown_key_jwts_are_refused_without_hammering_the_issuer() {
    let world = World::new();
    let issuer = issuer();
    let gateway = world.listen(&jwt_config(&issuer), &[]);
    let now = jsonwebtoken::get_current_timestamp() as i64;
    let claims = |iss: &str| json!({"iss": iss, "aud": "http://127.0.0.1/mcp", "sub": "frank", "exp": now + 300, "scope": "mcp"});
    let try_token = |token: String| {
        let bearer = format!("Bearer {token}");
        post(
            &gateway.url,
            &[("authorization", bearer.as_str())],
            &initialize("2025-06-18"),
        )
    };
    let good = try_token(issuer.token(claims("https://issuer.test")));
    assert_eq!(good.status, 200, "{}", good.body);
    assert_eq!(issuer.fetches(), 1);

    // Signed with the issuer's own key, but naming another issuer.
    let foreign = try_token(issuer.token(claims("https://evil.example")));
    assert_eq!(foreign.status, 401, "{}", foreign.body);
    assert!(
        challenge(&foreign).contains("invalid_token")
            && challenge(&foreign).contains("another issuer"),
        "{}",
        challenge(&foreign)
    );

    // Made-up key ids: each refused at once from the cached set, and the issuer is not asked
    // again for each (at most one fetch every 30 s; the first one was just now).
    let started = std::time::Instant::now();
    for n in 0..20 {
        let unknown = try_token(
            issuer.token_with_kid(&format!("made-up-{n}"), claims("https://issuer.test")),
        );
        assert_eq!(unknown.status, 401, "{}", unknown.body);
        assert!(
            challenge(&unknown).contains("a key the issuer does not publish"),
            "{}",
            challenge(&unknown)
        );
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "20 unknown key ids took {:?}",
        started.elapsed()
    );
    assert_eq!(issuer.fetches(), 1, "no fetch per unknown key id");
    let still = try_token(issuer.token(claims("https://issuer.test")));
    assert_eq!(still.status, 200, "{}", still.body);
}

#[test]
fn jwts_are_checked_for_audience_expiry_and_scope() {
    let world = World::new();
    let issuer = issuer();
    let config = jwt_config(&issuer);
    let gateway = world.listen(&config, &[]);
    let now = jsonwebtoken::get_current_timestamp() as i64;
    let claims = |aud: &str, exp: i64, scope: &str| json!({"iss": "https://issuer.test", "aud": aud, "sub": "carol@example.com", "exp": exp, "scope": scope});
    let try_token = |token: String| {
        let bearer = format!("Bearer {token}");
        post(
            &gateway.url,
            &[("authorization", bearer.as_str())],
            &initialize("2025-06-18"),
        )
    };
    let good = try_token(issuer.token(claims("http://127.0.0.1/mcp", now + 300, "mcp")));
    assert_eq!(good.status, 200, "{}", good.body);

    let expired = try_token(issuer.token(claims("http://127.0.0.1/mcp", now - 3600, "mcp")));
    assert_eq!(expired.status, 401);
    assert!(
        challenge(&expired).contains("expired"),
        "{}",
        challenge(&expired)
    );
    assert!(challenge(&expired).contains(
        "resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\""
    ));

    let elsewhere = try_token(issuer.token(claims("https://other.example/mcp", now + 300, "mcp")));
    assert_eq!(elsewhere.status, 401);
    assert!(
        challenge(&elsewhere).contains("audience"),
        "{}",
        challenge(&elsewhere)
    );

    let unscoped = try_token(issuer.token(claims("http://127.0.0.1/mcp", now + 300, "other")));
    assert_eq!(unscoped.status, 403);
    assert!(
        challenge(&unscoped).contains("insufficient_scope")
            && challenge(&unscoped).contains("scope=\"mcp\"")
    );

    let metadata = exchange(
        reqwest::Method::GET,
        &gateway
            .url
            .replace("/mcp", "/.well-known/oauth-protected-resource"),
        &[],
        None,
    )
    .json();
    assert_eq!(
        metadata["authorization_servers"],
        json!(["https://issuer.test"])
    );
    assert_eq!(metadata["scopes_supported"], json!(["mcp"]));
}

/// A config that names its own token store: `airlock token create --config` writes there (the
/// store the gateway reads), and the gateway accepts the token. A store that exists but is not
/// one is refused at load by `serve` and `check` alike, with the line and the fix.
#[test]
fn the_token_store_the_config_names_is_the_one_token_create_writes() {
    let world = World::new();
    let config = format!(
        "{}\n[http.auth]\ntokens = \"team-tokens.json\"\n",
        fixture_server()
    );
    let config_path = world.config(&config);
    let printed = |out: std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{err}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let carol = printed(
        world
            .command(&["token", "create", "carol", "--config"])
            .arg(&config_path)
            .output()
            .unwrap(),
    );
    assert!(
        world.path("team-tokens.json").is_file(),
        "written where the config says"
    );
    assert!(!world.token_store().exists(), "not in the default store");
    // Run where the config is, naming it relatively: the same store.
    let dave = printed(
        world
            .command(&["token", "create", "dave", "--config", "airlock.toml"])
            .current_dir(world.path(""))
            .output()
            .unwrap(),
    );
    let gateway = world.listen(&config, &[]);
    let bearer = format!("Bearer {carol}");
    session(&gateway.url, &[("authorization", bearer.as_str())]);
    let bearer = format!("Bearer {dave}");
    session(&gateway.url, &[("authorization", bearer.as_str())]);
    drop(gateway);

    std::fs::write(world.path("team-tokens.json"), "not a token store").unwrap();
    for args in [
        vec!["check", "--config"],
        vec!["serve", "--listen", "127.0.0.1:0", "--config"],
    ] {
        let out = world
            .command(&args)
            .arg(&config_path)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let at = format!("{}:{}:10:", config_path.display(), config.lines().count());
        assert!(stderr.contains(&at), "{args:?}: {stderr}");
        assert!(stderr.contains("token store cannot be used"), "{stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}
