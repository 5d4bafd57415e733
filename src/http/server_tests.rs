//! The listener end to end over loopback, with a stand-in gateway: sessions, JSON and SSE
//! answers, the GET stream, resumption, DELETE, limits, Host/Origin, authentication and the
//! 2026-07-28 flow.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Client, RequestBuilder, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::hub::Hub;
use super::listen::ListenAddr;
use super::server::{Bound, Service, serve};
use super::settings::HttpSettings;
use super::testing::FakeGateway;

struct Running {
    url: String,
    gateway: Arc<FakeGateway>,
    client: Client,
    _stop: watch::Sender<bool>,
}

async fn start(configure: impl FnOnce(&mut HttpSettings)) -> Running {
    let bound = Bound::bind(&ListenAddr::parse("127.0.0.1:0").unwrap())
        .await
        .unwrap();
    let addr = bound.local_addr().unwrap();
    let mut settings = HttpSettings::new(ListenAddr::Tcp(addr));
    configure(&mut settings);
    let gateway = Arc::new(FakeGateway::default());
    let hub = Arc::new(Hub::new(Arc::new(gateway.clone()), settings.limits.clone()));
    let service = Arc::new(Service::new(settings, hub, None));
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(serve(bound, service, stopped));
    Running {
        url: format!("http://{addr}/mcp"),
        gateway,
        client: Client::new(),
        _stop: stop,
    }
}

fn initialize(version: &str) -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
}

fn call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{},"_meta":{"progressToken":id}}})
}

impl Running {
    fn post(&self, body: &Value) -> RequestBuilder {
        self.client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string())
    }

    async fn session(&self, version: &str) -> String {
        let response = self.post(&initialize(version)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let answer: Value = response
            .text()
            .await
            .map(|t| serde_json::from_str::<Value>(&t).unwrap())
            .unwrap();
        assert_eq!(answer["result"]["protocolVersion"], version);
        id
    }
}

async fn events(mut response: Response, count: usize) -> Vec<String> {
    let mut text = String::new();
    while text.matches("\n\n").count() < count {
        match tokio::time::timeout(Duration::from_secs(5), response.chunk()).await {
            Ok(Ok(Some(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
            _ => break,
        }
    }
    text.split_terminator("\n\n").map(String::from).collect()
}

#[tokio::test]
async fn a_session_answers_in_json_and_ends_with_delete() {
    let server = start(|_| {}).await;
    let id = server.session("2025-06-18").await;
    let response = server
        .post(&call(1, "echo"))
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let answer: Value = response
        .text()
        .await
        .map(|t| serde_json::from_str::<Value>(&t).unwrap())
        .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "ok");
    // A notification: 202, no body.
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    let response = server
        .post(&note)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    // No session id: 400; an unknown one: 404.
    assert_eq!(
        server.post(&call(2, "echo")).send().await.unwrap().status(),
        400
    );
    let unknown = server
        .post(&call(2, "echo"))
        .header("mcp-session-id", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let deleted = server
        .client
        .delete(&server.url)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let after = server
        .post(&call(3, "echo"))
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 404);
    assert!(
        server
            .gateway
            .log()
            .iter()
            .any(|line| line.ends_with(" close"))
    );
}

#[tokio::test]
async fn progress_makes_an_sse_stream_with_priming_and_ids() {
    let server = start(|_| {}).await;
    let id = server.session("2025-11-25").await;
    let response = server
        .post(&call(5, "slow"))
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let got = events(response, 5).await;
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(
        got[0].starts_with("id: ") && got[0].ends_with("data: "),
        "priming: {:?}",
        got[0]
    );
    assert!(got[1].contains("notifications/progress") && got[1].contains("\"progress\":1"));
    assert!(got[4].contains("\"id\":5") && got[4].contains("done"));
}

#[tokio::test]
async fn the_get_stream_carries_server_messages_and_resumes() {
    let server = start(|_| {}).await;
    let id = server.session("2025-06-18").await;
    let get = || {
        server
            .client
            .get(&server.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &id)
    };
    let stream = get().send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(
        get().send().await.unwrap().status(),
        409,
        "one GET stream at a time"
    );
    let changed = json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"});
    server.gateway.broadcast(&changed);
    let got = events(stream, 1).await;
    assert!(
        got[0].starts_with("id: 0-1\n") && got[0].contains("list_changed"),
        "{got:?}"
    );
    // The connection is gone; two more messages arrive meanwhile; a resumption replays them.
    server.gateway.broadcast(&changed);
    server.gateway.broadcast(&changed);
    let resumed = get().header("last-event-id", "0-1").send().await.unwrap();
    let got = events(resumed, 2).await;
    assert!(
        got[0].starts_with("id: 0-2\n") && got[1].starts_with("id: 0-3\n"),
        "{got:?}"
    );
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let server = start(|_| {}).await;
    let foreign_origin = server
        .post(&initialize("2025-06-18"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_origin.status(), 403);
    let body: Value = foreign_origin
        .text()
        .await
        .map(|t| serde_json::from_str::<Value>(&t).unwrap())
        .unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DNS rebinding")
    );
    let foreign_host = server
        .post(&initialize("2025-06-18"))
        .header("host", "evil.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_host.status(), 403);
    let local_origin = server
        .post(&initialize("2025-06-18"))
        .header("origin", "http://localhost:6274")
        .send()
        .await
        .unwrap();
    assert_eq!(local_origin.status(), 200);
    assert_eq!(
        local_origin.headers()["access-control-allow-origin"],
        "http://localhost:6274"
    );
}

#[tokio::test]
async fn limits_answer_with_clear_errors() {
    let server = start(|s| {
        s.limits.max_body_bytes = 1024;
        s.limits.sessions_per_client = 2;
    })
    .await;
    let big =
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"x".repeat(2000)}});
    let response = server.post(&big).send().await.unwrap();
    assert_eq!(response.status(), 413);
    assert!(response.text().await.unwrap().contains("max_body_bytes"));
    server.session("2025-06-18").await;
    server.session("2025-06-18").await;
    let third = server.post(&initialize("2025-06-18")).send().await.unwrap();
    assert_eq!(third.status(), 429);
    assert!(third.text().await.unwrap().contains("sessions_per_client"));

    let limited = start(|s| {
        s.limits.rate_per_second = 1;
        s.limits.rate_burst = 2;
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(
            limited
                .post(&initialize("2025-06-18"))
                .send()
                .await
                .unwrap(),
        );
    }
    let last = statuses.pop().unwrap();
    assert_eq!(last.status(), 429);
    assert!(last.headers().contains_key("retry-after"));
}

fn stateless_call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}})
}

#[tokio::test]
async fn the_stateless_flow_checks_headers_and_maps_statuses() {
    let server = start(|_| {}).await;
    let send = |body: Value, name: &str| {
        server
            .post(&body)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .send()
    };
    let ok = send(stateless_call(1, "echo"), "echo").await.unwrap();
    assert_eq!(ok.status(), 200);
    assert!(!ok.headers().contains_key("mcp-session-id"));
    let mismatch = send(stateless_call(2, "echo"), "other").await.unwrap();
    assert_eq!(mismatch.status(), 400);
    let body: Value = mismatch
        .text()
        .await
        .map(|t| serde_json::from_str::<Value>(&t).unwrap())
        .unwrap();
    assert_eq!(
        (body["error"]["code"].as_i64(), body["id"].as_i64()),
        (Some(-32020), Some(2))
    );
    let unknown = send(stateless_call(3, "unknown"), "unknown").await.unwrap();
    assert_eq!(unknown.status(), 404);
    let get = server
        .client
        .get(&server.url)
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    // Each request was a session of its own, closed with its answer.
    let log = server.gateway.log();
    assert_eq!(
        log.iter().filter(|l| l.ends_with(" close")).count(),
        2,
        "{log:?}"
    );
}

#[tokio::test]
async fn closing_a_stateless_stream_cancels_the_request() {
    let server = start(|_| {}).await;
    let mut body = stateless_call(9, "slow");
    body["params"]["_meta"]["progressToken"] = json!("t");
    let response = server
        .post(&body)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "slow")
        .send()
        .await
        .unwrap();
    let first = events(response, 1).await; // the progress notification, then we hang up
    assert!(first[0].contains("notifications/progress") && !first[0].contains("id: "));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = server.gateway.log();
    assert!(
        log.iter().any(|l| l.ends_with("notifications/cancelled")),
        "{log:?}"
    );
}

#[tokio::test]
async fn authentication_guards_every_request_and_sessions_stay_with_their_owner() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tokens.json");
    let alice = super::auth::tokens::create(&store, "alice", std::time::SystemTime::now()).unwrap();
    let bob = super::auth::tokens::create(&store, "bob", std::time::SystemTime::now()).unwrap();
    let server = start(|s| s.auth.tokens = Some(store.clone())).await;
    let missing = server.post(&initialize("2025-06-18")).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    let challenge = missing.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    let metadata_url = server
        .url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    let doc: Value = server
        .client
        .get(&metadata_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .map(|t| serde_json::from_str::<Value>(&t).unwrap())
        .unwrap();
    assert_eq!(doc["resource"], server.url.as_str());
    let wrong = server
        .post(&initialize("2025-06-18"))
        .bearer_auth("airlock_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let ok = server
        .post(&initialize("2025-06-18"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let id = ok.headers()["mcp-session-id"].to_str().unwrap().to_string();
    assert_eq!(
        *server.gateway.identities.lock().unwrap(),
        [Some("alice".to_string())]
    );
    // Bob cannot use Alice's session: it does not exist for him.
    let stolen = server
        .post(&call(1, "echo"))
        .header("mcp-session-id", &id)
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(stolen.status(), 404);
    super::auth::tokens::revoke(&store, "alice").unwrap();
    let revoked = server
        .post(&call(2, "echo"))
        .header("mcp-session-id", &id)
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 401);
}
