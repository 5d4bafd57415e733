//! `airlock test --url URL`: a real client session with a listening gateway (`serve --listen`,
//! `http://...` or `unix:PATH`): initialize, tools/list, DELETE. Prints what it found, or why it could not (exit 1).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use super::CliError;

/// The JSON-RPC message of a response body: plain JSON, or the `data:` of an SSE event.
fn message_of(body: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return Some(value);
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|m| m.get("id").is_some())
}

struct Client {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    session: Option<String>,
}

impl Client {
    async fn post(&self, message: &Value) -> anyhow::Result<(Option<String>, Option<Value>)> {
        let mut request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(message.to_string());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        let response = request
            .send()
            .await
            .map_err(|err| anyhow::anyhow!("cannot reach it: {err}"))?;
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let challenge = response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let body = response.text().await.unwrap_or_default();
        if status.as_u16() == 401 || status.as_u16() == 403 {
            let hint = if self.token.is_some() {
                "the token was refused"
            } else {
                "set AIRLOCK_TOKEN (or --token)"
            };
            anyhow::bail!("HTTP {status}: {hint} ({})", challenge.unwrap_or_default());
        }
        if !status.is_success() {
            anyhow::bail!("HTTP {status}: {}", body.trim());
        }
        Ok((session, message_of(&body)))
    }
}

pub fn run(url: &str, token: Option<String>, timeout: Duration) -> Result<ExitCode, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| CliError::Failure(err.into()))?;
    let outcome = runtime.block_on(async {
        tokio::time::timeout(timeout, session(url, token))
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {} s", timeout.as_secs())))
    });
    match outcome {
        Ok(report) => {
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("airlock test: gateway {url}: {why:#}");
            Ok(ExitCode::from(super::EXIT_FAILURE))
        }
    }
}

/// The endpoint `unix:PATH` serves `[http] path` on (its default; a gateway that changed it is
/// reached by that path over TCP only).
const UNIX_ENDPOINT: &str = "http://localhost/mcp";

/// The client and endpoint URL for `url`: an `http(s)://` URL as it is, or `unix:/PATH`, the
/// socket of `serve --listen unix:PATH` (as `airlock status` shows it), spoken to at `/mcp`.
fn connect_to(url: &str) -> anyhow::Result<(reqwest::Client, String)> {
    let Some(path) = url.strip_prefix("unix:") else {
        return Ok((reqwest::Client::new(), url.to_string()));
    };
    if !path.starts_with('/') {
        anyhow::bail!("`unix:` needs an absolute path, e.g. unix:/run/airlock/mcp.sock");
    }
    let client = reqwest::Client::builder()
        .unix_socket(path)
        .build()
        .context("building an HTTP client for a unix socket")?;
    Ok((client, UNIX_ENDPOINT.to_string()))
}

async fn session(url: &str, token: Option<String>) -> anyhow::Result<String> {
    let started = Instant::now();
    let (http, endpoint) = connect_to(url)?;
    let mut client = Client {
        http,
        url: endpoint.clone(),
        token,
        session: None,
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"airlock-test","version":env!("CARGO_PKG_VERSION")}}});
    let (session, answer) = client.post(&init).await?;
    let answer = answer.context("the answer to initialize is not JSON-RPC")?;
    if let Some(error) = answer.get("error") {
        anyhow::bail!("initialize failed: {error}");
    }
    let ready_ms = started.elapsed().as_secs_f64() * 1000.0;
    client.session = session;
    client
        .post(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .await?;
    let (_, listed) = client
        .post(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await?;
    let listed = listed.context("the answer to tools/list is not JSON-RPC")?;
    let tools: Vec<String> = listed
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    if let Some(id) = &client.session {
        let mut request = client.http.delete(&endpoint).header("mcp-session-id", id);
        if let Some(token) = &client.token {
            request = request.bearer_auth(token);
        }
        let _ = request.send().await;
    }
    let result = &answer["result"];
    Ok(format!(
        "gateway {url}: ready in {ready_ms:.1} ms (protocol {}, {} {})\n  {} tools: {}\n  session: {}\n",
        result["protocolVersion"].as_str().unwrap_or("?"),
        result
            .pointer("/serverInfo/name")
            .and_then(Value::as_str)
            .unwrap_or("?"),
        result
            .pointer("/serverInfo/version")
            .and_then(Value::as_str)
            .unwrap_or(""),
        tools.len(),
        tools.join(", "),
        if client.session.is_some() {
            "opened and ended (DELETE)"
        } else {
            "none (stateless)"
        },
    ))
}
