//! The `run` session end to end over in-memory pipes: a scripted fake server, a scripted host,
//! the real gate, policy and audit log in between.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock::audit::{AuditLog, Redactor};
use airlock::front::{EndedBy, SessionLimits, SessionOutcome, run_session};
use airlock::gate::{Gate, GateConfig};
use airlock::mcp::{Frame, LineReader};
use airlock::policy::{Layer, LayerSource, load};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader, DuplexStream, duplex, split};

const POLICY: &str = r#"
version = 1
[tools]
default = "allow"
deny = ["mcp:fake__delete_*"]
"#;

const LIMIT: usize = 4096;

fn gate(timeout: Option<Duration>) -> Gate {
    let source = LayerSource {
        layer: Layer::User,
        path: PathBuf::from("/t/policy.toml"),
        text: POLICY.into(),
    };
    let policy = Arc::new(load(&[source], &[]).unwrap());
    let config = GateConfig {
        server: "fake".into(),
        show_denied: false,
        tool_timeout: timeout,
    };
    Gate::new(config, policy, Arc::new(Redactor::new([]).unwrap()))
}

async fn send(writer: &mut (impl AsyncWriteExt + Unpin), value: &Value) {
    let mut bytes = serde_json::to_vec(value).unwrap();
    bytes.push(b'\n');
    writer.write_all(&bytes).await.unwrap();
}

async fn next(
    lines: &mut LineReader<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
) -> Option<Value> {
    match lines.next_frame().await.unwrap()? {
        Frame::Line(line) => Some(serde_json::from_slice(&line).unwrap()),
        Frame::Oversized { .. } => panic!("oversized"),
    }
}

/// A scripted server. Returns every message it received.
async fn fake_server(end: DuplexStream) -> Vec<Value> {
    let (read, mut write) = split(end);
    let mut lines = LineReader::new(BufReader::new(read), 1 << 20);
    let mut seen = Vec::new();
    while let Some(Frame::Line(line)) = lines.next_frame().await.unwrap() {
        let message: Value = serde_json::from_slice(&line).unwrap();
        seen.push(message.clone());
        let id = message["id"].clone();
        let reply = match message["method"].as_str() {
            Some("initialize") => {
                json!({"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})
            }
            Some("server/discover") => {
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})
            }
            Some("tools/list") if message["params"]["cursor"].is_null() => {
                json!({"tools": [{"name": "echo", "x-vendor": {"a": 1}}, {"name": "delete_file"}], "nextCursor": "2"})
            }
            Some("tools/list") => json!({"tools": [{"name": "delete_all"}, {"name": "slow"}]}),
            Some("tools/call") => {
                match message["params"]["name"].as_str() {
                    Some("echo") => {
                        json!({"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}], "_meta": message["params"]["_meta"]})
                    }
                    Some("slow") => continue,
                    Some("crash") => return seen,
                    Some("noisy") => {
                        write.write_all(b"this is not json\n").await.unwrap();
                        write.write_all(&vec![b'x'; LIMIT * 2]).await.unwrap();
                        write.write_all(b"\n").await.unwrap();
                        json!({"content": []})
                    }
                    Some("roots") => {
                        // A server→client request whose id looks like one of airlock's own.
                        send(&mut write, &json!({"jsonrpc": "2.0", "id": "airlock-ask-1", "method": "roots/list"})).await;
                        let Some(Frame::Line(answer)) = lines.next_frame().await.unwrap() else {
                            return seen;
                        };
                        let answer: Value = serde_json::from_slice(&answer).unwrap();
                        seen.push(answer.clone());
                        json!({"content": [{"type": "text", "text": answer.to_string()}]})
                    }
                    _ => json!({"content": [], "isError": true}),
                }
            }
            Some(_) if !id.is_null() => json!({"echo": message["params"]}),
            _ => continue,
        };
        send(
            &mut write,
            &json!({"jsonrpc": "2.0", "id": id, "result": reply}),
        )
        .await;
    }
    seen
}

struct Run {
    outcome: SessionOutcome,
    host_got: Vec<Value>,
    server_seen: Vec<Value>,
    audit: Vec<Value>,
}

/// Runs a session; `host` scripts the host side and returns what it collected.
async fn run<F, Fut>(timeout: Option<Duration>, host: F) -> Run
where
    F: FnOnce(
        tokio::io::WriteHalf<DuplexStream>,
        LineReader<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    ) -> Fut,
    Fut: std::future::Future<Output = Vec<Value>>,
{
    let (host_end, session_host) = duplex(1 << 16);
    let (server_end, session_server) = duplex(1 << 16);
    let (hr, hw) = split(session_host);
    let (sr, sw) = split(session_server);
    let audit = RefCell::new(AuditLog::memory());
    let (host_read, host_write) = split(host_end);
    let lines = LineReader::new(BufReader::new(host_read), 1 << 20);
    let session = run_session(
        gate(timeout),
        &audit,
        SessionLimits {
            max_line_bytes: LIMIT,
        },
        timeout,
        hr,
        hw,
        sr,
        sw,
        None,
    );
    let (outcome, server_seen, host_got) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(session, fake_server(server_end), host(host_write, lines))
    })
    .await
    .expect("session hung");
    let audit = audit.into_inner();
    let audit = String::from_utf8(audit.memory_contents().to_vec()).unwrap();
    let audit = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Run {
        outcome: outcome.unwrap(),
        host_got,
        server_seen,
        audit,
    }
}

fn events<'a>(audit: &'a [Value], kind: &str) -> Vec<&'a Value> {
    audit.iter().filter(|e| e["event"] == kind).collect()
}

fn init(version: &str) -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
}

#[tokio::test]
async fn passthrough_keeps_unknown_fields_and_filters_every_page() {
    let run = run(None, |mut w, mut r| async move {
        let mut got = Vec::new();
        send(&mut w, &init("2025-06-18")).await;
        got.push(next(&mut r).await.unwrap());
        send(&mut w, &json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await;
        send(&mut w, &json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}})).await;
        got.push(next(&mut r).await.unwrap());
        send(&mut w, &json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"2"}})).await;
        got.push(next(&mut r).await.unwrap());
        let call = json!({"jsonrpc":"2.0","id":"c1","method":"tools/call","x-top":true,"params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":7,"vendor/x":[1]}}});
        send(&mut w, &call).await;
        got.push(next(&mut r).await.unwrap());
        send(&mut w, &json!({"jsonrpc":"2.0","id":3,"method":"vendor/custom","params":{"deep":{"k":[1,2]}}})).await;
        got.push(next(&mut r).await.unwrap());
        w.shutdown().await.unwrap();
        while let Some(extra) = next(&mut r).await {
            got.push(extra);
        }
        got
    })
    .await;
    assert_eq!(run.outcome.ended_by, EndedBy::Host);
    let names = |v: &Value| {
        v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&run.host_got[1]), vec!["echo"]);
    assert_eq!(
        run.host_got[1]["result"]["tools"][0]["x-vendor"],
        json!({"a": 1})
    );
    assert_eq!(run.host_got[1]["result"]["nextCursor"], "2");
    assert_eq!(names(&run.host_got[2]), vec!["slow"]);
    assert_eq!(run.host_got[3]["result"]["content"][0]["text"], "hi");
    assert_eq!(
        run.host_got[3]["result"]["_meta"],
        json!({"progressToken":7,"vendor/x":[1]})
    );
    assert_eq!(
        run.host_got[4]["result"]["echo"],
        json!({"deep":{"k":[1,2]}})
    );
    assert_eq!(run.host_got.len(), 5);
    // The server saw the host's messages verbatim and in order.
    let methods: Vec<&str> = run
        .server_seen
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        vec![
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/list",
            "tools/call",
            "vendor/custom"
        ]
    );
    assert_eq!(run.server_seen[4]["x-top"], true);
    assert_eq!(events(&run.audit, "decision").len(), 1);
    assert_eq!(events(&run.audit, "outcome")[0]["outcome"], "ok");
}

#[tokio::test]
async fn denied_call_never_reaches_the_server_and_its_cancel_is_swallowed() {
    let run = run(None, |mut w, mut r| async move {
        send(&mut w, &init("2025-11-25")).await;
        let mut got = vec![next(&mut r).await.unwrap()];
        send(&mut w, &json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_file","arguments":{"password":"hunter2"}}})).await;
        got.push(next(&mut r).await.unwrap());
        send(&mut w, &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}})).await;
        w.shutdown().await.unwrap();
        while let Some(extra) = next(&mut r).await {
            got.push(extra);
        }
        got
    })
    .await;
    let denial = &run.host_got[1];
    assert_eq!(denial["id"], 5);
    assert_eq!(denial["result"]["isError"], true);
    assert!(
        denial["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("mcp:fake__delete_*")
    );
    assert!(
        run.server_seen
            .iter()
            .all(|m| m["method"] != "tools/call" && m["method"] != "notifications/cancelled")
    );
    let decisions = events(&run.audit, "decision");
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0]["decision"], "deny");
    assert_eq!(decisions[0]["layer"], "user");
    assert_eq!(decisions[0]["args"]["password"], "[REDACTED]");
    assert!(!run.audit.iter().any(|e| e.to_string().contains("hunter2")));
}

#[tokio::test]
async fn server_requests_reach_the_host_and_answers_come_back_with_the_original_id() {
    let run = run(None, |mut w, mut r| async move {
        send(&mut w, &init("2025-06-18")).await;
        let mut got = vec![next(&mut r).await.unwrap()];
        send(
            &mut w,
            &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"roots"}}),
        )
        .await;
        let request = next(&mut r).await.unwrap();
        assert_eq!(request["method"], "roots/list");
        send(
            &mut w,
            &json!({"jsonrpc":"2.0","id":request["id"],"result":{"roots":[{"uri":"file:///w"}]}}),
        )
        .await;
        got.push(request);
        got.push(next(&mut r).await.unwrap());
        w.shutdown().await.unwrap();
        got
    })
    .await;
    assert_ne!(
        run.host_got[1]["id"], "airlock-ask-1",
        "a colliding server id must be renumbered"
    );
    let answer = run
        .server_seen
        .iter()
        .find(|m| m.get("result").is_some())
        .unwrap();
    assert_eq!(answer["id"], "airlock-ask-1");
    assert!(
        run.host_got[2]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("file:///w")
    );
}

#[tokio::test]
async fn malformed_host_input_gets_errors_and_the_session_continues() {
    let run = run(None, |mut w, mut r| async move {
        w.write_all(b"{not json\n").await.unwrap();
        let mut got = vec![next(&mut r).await.unwrap()];
        w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4}\n")
            .await
            .unwrap();
        got.push(next(&mut r).await.unwrap());
        w.write_all(&[b' '; 10]).await.unwrap();
        w.write_all(&[b'['; LIMIT + 1]).await.unwrap();
        w.write_all(b"\n").await.unwrap();
        got.push(next(&mut r).await.unwrap());
        send(&mut w, &json!([{"jsonrpc":"2.0","id":9,"method":"ping"}])).await;
        got.push(next(&mut r).await.unwrap());
        send(&mut w, &json!({"jsonrpc":"2.0","id":10,"method":"ping"})).await;
        got.push(next(&mut r).await.unwrap());
        w.shutdown().await.unwrap();
        got
    })
    .await;
    assert_eq!(run.host_got[0]["error"]["code"], -32700);
    assert_eq!(run.host_got[1]["error"]["code"], -32600);
    assert_eq!(run.host_got[1]["id"], 4);
    assert_eq!(run.host_got[2]["error"]["code"], -32600);
    assert!(
        run.host_got[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds")
    );
    assert_eq!(
        run.host_got[3]["error"]["code"], -32600,
        "no batches outside 2025-03-26"
    );
    assert_eq!(run.host_got[4]["id"], 10);
}

#[tokio::test]
async fn bad_server_lines_are_dropped_with_an_audit_event() {
    let run = run(None, |mut w, mut r| async move {
        send(
            &mut w,
            &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"noisy"}}),
        )
        .await;
        let got = vec![next(&mut r).await.unwrap()];
        w.shutdown().await.unwrap();
        got
    })
    .await;
    assert_eq!(run.host_got[0]["id"], 1);
    assert_eq!(run.outcome.dropped_server_lines, 2);
    let dropped = events(&run.audit, "dropped");
    assert_eq!(dropped.len(), 2);
    assert!(
        dropped[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("not JSON")
    );
    assert_eq!(dropped[1]["detail"]["bytes"], LIMIT * 2);
}

#[tokio::test]
async fn server_crash_mid_call_answers_every_pending_request() {
    let run = run(None, |mut w, mut r| async move {
        send(
            &mut w,
            &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}),
        )
        .await;
        send(
            &mut w,
            &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash"}}),
        )
        .await;
        let mut got = Vec::new();
        while let Some(answer) = next(&mut r).await {
            got.push(answer);
        }
        got
    })
    .await;
    assert_eq!(run.outcome.ended_by, EndedBy::Server);
    let mut ids: Vec<i64> = run
        .host_got
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2]);
    assert!(run.host_got.iter().all(|m| m["error"]["code"] == -32000));
    assert_eq!(events(&run.audit, "decision").len(), 2);
    assert_eq!(events(&run.audit, "outcome").len(), 2);
}

#[tokio::test]
async fn timed_out_call_gets_an_error_and_the_server_a_cancellation() {
    let run = run(
        Some(Duration::from_millis(100)),
        |mut w, mut r| async move {
            send(
                &mut w,
                &json!({"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"slow"}}),
            )
            .await;
            let got = vec![next(&mut r).await.unwrap()];
            w.shutdown().await.unwrap();
            got
        },
    )
    .await;
    assert_eq!(run.host_got[0]["id"], "t");
    assert_eq!(run.host_got[0]["error"]["code"], -32001);
    let cancel = run
        .server_seen
        .iter()
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap();
    assert_eq!(cancel["params"]["requestId"], "t");
    assert_eq!(events(&run.audit, "outcome")[0]["outcome"], "timeout");
}

#[tokio::test]
async fn stateless_era_needs_no_initialize() {
    let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}});
    let run = run(None, |mut w, mut r| async move {
        send(&mut w, &json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":meta}})).await;
        let mut got = vec![next(&mut r).await.unwrap()];
        send(&mut w, &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"new"},"_meta":meta}})).await;
        got.push(next(&mut r).await.unwrap());
        send(&mut w, &json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":meta}})).await;
        got.push(next(&mut r).await.unwrap());
        w.shutdown().await.unwrap();
        got
    })
    .await;
    assert_eq!(
        run.host_got[0]["result"]["supportedVersions"][0],
        "2026-07-28"
    );
    assert_eq!(run.host_got[1]["result"]["content"][0]["text"], "new");
    assert_eq!(
        run.host_got[1]["result"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        run.host_got[2]["result"]["tools"].as_array().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn one_decision_per_call_under_load_even_when_the_server_dies() {
    const CALLS: i64 = 300;
    let run = run(None, |mut w, mut r| async move {
        for id in 0..CALLS {
            let name = if id == CALLS - 1 { "crash" } else if id % 3 == 0 { "delete_x" } else if id % 3 == 1 { "echo" } else { "slow" };
            send(&mut w, &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":{"text":"x"}}})).await;
        }
        let mut got = Vec::new();
        while let Some(answer) = next(&mut r).await {
            got.push(answer);
        }
        got
    })
    .await;
    assert_eq!(events(&run.audit, "decision").len(), CALLS as usize);
    assert_eq!(events(&run.audit, "outcome").len(), CALLS as usize);
    let mut ids: Vec<i64> = run
        .host_got
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        (0..CALLS).collect::<Vec<_>>(),
        "every call answered exactly once"
    );
    let seqs: Vec<u64> = run
        .audit
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}
