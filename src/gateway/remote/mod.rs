//! Remote servers: the client side of MCP's Streamable HTTP transport ([`streamable`]) and of the
//! legacy HTTP+SSE transport ([`legacy`]).
//!
//! A remote server has no process and no sandbox, but it sits behind the same per-server seam as
//! a stdio child: airlock writes JSON-RPC messages into a bounded queue and receives the server's
//! messages as [`RemoteEvent`]s, so the router, the gate and the audit treat both alike. The
//! link's end ([`RemoteEvent::Ended`]) plays the part of a process exit: a dropped connection is
//! a crash (pending calls are answered with errors, the next call restarts it after the backoff).
//!
//! Secrets: configured header values are marked sensitive for the HTTP stack, never formatted
//! into a log line or an error, and every reason text is scrubbed of them anyway (a server may
//! echo a request); URLs are shown without their query and user info.

pub mod legacy;
pub mod sse;
pub mod streamable;

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::config::{ServerConfig, Transport};
use crate::mcp::message::{code, error_response};
use crate::process::launch::Prepared;
use sse::{SseItem, SseParser};

/// How the gateway reaches one server.
// One per configured server, made once at start or reload: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Launch {
    /// A stdio child, confined.
    Local(Prepared),
    /// A remote server over HTTP: no process, no sandbox.
    Remote(RemoteTarget),
}

impl Launch {
    /// The spawn (or connect) audit event's detail.
    pub fn spawn_detail(&self) -> Value {
        match self {
            Launch::Local(prepared) => prepared.spawn_detail(),
            Launch::Remote(target) => target.spawn_detail(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The declaration cannot work (a header that is not valid HTTP, a URL that does not parse).
    #[error("server `{server}`: {reason}")]
    Invalid { server: String, reason: String },
    /// Connecting failed; trying later may help.
    #[error("server `{server}` at {url}: {reason}")]
    Connect {
        server: String,
        url: String,
        reason: String,
    },
}

/// Why a link to a remote server could not be opened, or broke. The texts are what the host,
/// `airlock status` and the audit log show (scrubbed of configured header values on the way).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LinkError {
    /// The HTTP stack failed (connecting, sending, reading): its error chain.
    #[error("{0}")]
    Http(String),
    #[error("cannot reach the server: {0}")]
    Unreachable(String),
    #[error("the connection was lost: {0}")]
    Lost(String),
    #[error("the server did not accept a message within {0} s")]
    NotAccepted(u64),
    #[error("a response body exceeds the limit of {0} bytes")]
    TooLarge(usize),
    /// An HTTP error status, with the JSON-RPC error message of its body if any.
    #[error("{0}")]
    Status(String),
    #[error("initialize was refused: {0}")]
    InitializeRefused(String),
    #[error("the answer to initialize broke off: {0}")]
    InitializeBroke(Box<LinkError>),
    #[error("the server did not answer initialize")]
    NoInitializeAnswer,
    #[error("the server ended the session (HTTP 404)")]
    SessionEnded,
    #[error("a response stream broke: {0}")]
    ResponseStream(Box<LinkError>),
    #[error("the server's event stream broke: {0}")]
    ServerStream(Box<LinkError>),
    #[error("the event stream broke: {0}")]
    EventStream(Box<LinkError>),
    #[error("the server closed its event stream")]
    EventStreamClosed,
    #[error(
        "the URL answered {0:?}, not an event stream; if it is a Streamable HTTP server, set transport = \"http\""
    )]
    NotAnEventStream(String),
    #[error("the event stream closed before the `endpoint` event")]
    NoEndpoint,
    #[error("no `endpoint` event within {0} s (startup_timeout)")]
    EndpointTimeout(u64),
    #[error("the `endpoint` event is not a URL: {0}")]
    EndpointNotUrl(String),
    #[error(
        "the `endpoint` event points to another origin ({0}); airlock does not send the configured headers there"
    )]
    OtherOrigin(String),
    #[error("stopped by airlock")]
    Stopped,
}

/// A remote server as configured: where, how, with which headers.
#[derive(Clone)]
pub struct RemoteTarget {
    pub server: String,
    pub transport: Transport,
    pub url: reqwest::Url,
    headers: HeaderMap,
    header_names: Vec<String>,
    /// Configured header values, scrubbed from every text airlock shows.
    secrets: Arc<Vec<String>>,
    client: reqwest::Client,
    pub connect_timeout: Duration,
    pub max_message_bytes: usize,
}

impl std::fmt::Debug for RemoteTarget {
    // Hand-written so that a `{:?}` anywhere can never print a header value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTarget")
            .field("server", &self.server)
            .field("transport", &self.transport)
            .field("url", &self.display_url())
            .field("headers", &self.header_names)
            .finish_non_exhaustive()
    }
}

/// What a remote link reports to the gateway.
#[derive(Debug)]
pub enum RemoteEvent {
    /// A JSON-RPC message from the server.
    Message(Value),
    /// Something the server sent that is not a usable message (too big, not JSON).
    Dropped { reason: String, bytes: usize },
    /// The link is gone; nothing follows. `stopped`: airlock asked for it (else it broke).
    Ended { reason: String, stopped: bool },
}

/// Where a link's events go; called from several tasks. Returns false once nobody listens.
pub type Emit = Arc<dyn Fn(RemoteEvent) -> bool + Send + Sync>;

/// The shortest header value scrubbed from texts: shorter ones would mangle ordinary words.
const MIN_SCRUBBED: usize = 4;
/// How long the best-effort goodbye (DELETE of the session) may take at shutdown.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a POST of a notification or response may take before airlock moves on.
const POST_TIMEOUT: Duration = Duration::from_secs(30);

impl RemoteTarget {
    /// Builds the target of a remote server declaration; `max_message_bytes` bounds every
    /// message and SSE event, as `--max-line-bytes` bounds a stdio server's lines.
    pub fn new(server: &ServerConfig, max_message_bytes: usize) -> Result<Self, RemoteError> {
        let invalid = |reason: String| RemoteError::Invalid {
            server: server.name.clone(),
            reason,
        };
        let raw = server.url.as_deref().unwrap_or_default();
        let url = reqwest::Url::parse(raw)
            .map_err(|err| invalid(format!("`url` is not a valid URL: {err}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("`url` must be http:// or https://".into()));
        }
        let mut headers = HeaderMap::new();
        let mut secrets = Vec::new();
        for (name, value) in &server.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("header name {name:?} is not valid in HTTP")))?;
            // Never show the value, even in this error: it is probably a token.
            let mut header_value = HeaderValue::from_str(&value.value).map_err(|_| {
                invalid(format!(
                    "the value of header {name:?} is not valid in HTTP (control characters?)"
                ))
            })?;
            header_value.set_sensitive(true);
            headers.insert(header, header_value);
            if value.value.len() >= MIN_SCRUBBED {
                secrets.push(value.value.clone());
            }
        }
        // Also scrub a URL's query and user info: tokens end up there too.
        for part in [url.query(), url.password()].into_iter().flatten() {
            if part.len() >= MIN_SCRUBBED {
                secrets.push(part.to_string());
            }
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("airlock/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(server.startup_timeout)
            // A redirect could carry configured headers (tokens) to another host: none followed.
            .redirect(reqwest::redirect::Policy::none());
        if is_loopback(&url) {
            // An HTTP(S)_PROXY from the environment cannot reach this machine's loopback.
            builder = builder.no_proxy();
        }
        let client = builder
            .build()
            .map_err(|err| invalid(format!("cannot set up the HTTP client: {}", chain(&err))))?;
        Ok(RemoteTarget {
            server: server.name.clone(),
            transport: server.transport,
            url,
            headers,
            header_names: server.headers.keys().cloned().collect(),
            secrets: Arc::new(secrets),
            client,
            connect_timeout: server.startup_timeout,
            max_message_bytes,
        })
    }

    /// The URL as it may be shown: scheme, host, port and path (no query, no user info).
    pub fn display_url(&self) -> String {
        display_url(&self.url)
    }

    /// Removes every configured secret from a text meant for a log, an error or the audit.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in self.secrets.iter() {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), "****");
            }
        }
        text
    }

    pub fn spawn_detail(&self) -> Value {
        json!({
            "transport": self.transport.to_string(),
            "url": self.display_url(),
            "headers": self.header_names,
            "sandbox": "none (remote server)",
        })
    }

    /// One line for humans: `airlock test`, logs.
    pub fn summary(&self) -> String {
        format!("{} {}", self.transport_name(), self.display_url())
    }

    fn transport_name(&self) -> &'static str {
        match self.transport {
            Transport::Sse => "legacy HTTP+SSE",
            _ => "Streamable HTTP",
        }
    }

    fn connect_error(&self, reason: LinkError) -> RemoteError {
        RemoteError::Connect {
            server: self.server.clone(),
            url: self.display_url(),
            reason: self.scrub(&reason.to_string()),
        }
    }

    /// A request with the configured headers, then airlock's own (which win: `Accept`,
    /// `Content-Type` and the session headers must be right for the protocol to work).
    fn request(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        ours: &[(HeaderName, HeaderValue)],
    ) -> reqwest::RequestBuilder {
        let mut headers = self.headers.clone();
        for (name, value) in ours {
            headers.insert(name.clone(), value.clone());
        }
        // `headers()` replaces what the builder has, unlike `header()`, which appends.
        self.client.request(method, url).headers(headers)
    }
}

/// Connects to a remote server: for legacy SSE, opens the stream and waits for the endpoint; for
/// Streamable HTTP there is nothing to open before the first POST (the router's `initialize`),
/// whose failure then counts as a failed start.
pub async fn connect(target: &RemoteTarget) -> Result<RemoteSession, RemoteError> {
    match target.transport {
        Transport::Sse => Ok(RemoteSession::Legacy(Box::new(
            legacy::connect(target.clone()).await?,
        ))),
        _ => Ok(RemoteSession::Streamable(streamable::Session::new(
            target.clone(),
        ))),
    }
}

/// A connected remote server, ready to [`RemoteSession::run`].
pub enum RemoteSession {
    Streamable(streamable::Session),
    Legacy(Box<legacy::Session>),
}

impl RemoteSession {
    /// Carries messages until `stop` fires or `outgoing` closes (airlock stops it), or the
    /// connection breaks; then reports [`RemoteEvent::Ended`] exactly once.
    pub async fn run(
        self,
        outgoing: mpsc::Receiver<Vec<u8>>,
        stop: oneshot::Receiver<()>,
        emit: Emit,
    ) {
        match self {
            RemoteSession::Streamable(session) => session.run(outgoing, stop, emit).await,
            RemoteSession::Legacy(session) => session.run(outgoing, stop, emit).await,
        }
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// `scheme://host[:port]/path`, never user info or query (see [`crate::secret::display_url`]).
pub fn display_url(url: &reqwest::Url) -> String {
    crate::secret::display_url(url.as_str())
}

/// An HTTP client error as text: the cause chain without the URL (which may hold a token).
fn chain(err: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = if err.is_timeout() {
        "timed out".to_string()
    } else if err.is_connect() {
        "cannot connect".to_string()
    } else if err.is_body() || err.is_decode() {
        "the response broke off".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut source = err.source();
    let mut last = String::new();
    while let Some(cause) = source {
        let piece = cause.to_string();
        // hyper and reqwest repeat their parent's words; keep the chain readable.
        if !piece.is_empty() && !last.contains(&piece) {
            text.push_str(": ");
            text.push_str(&piece);
        }
        last = piece;
        source = cause.source();
    }
    text
}

/// A JSON-RPC message as airlock queued it (JSON plus a newline), with what routing needs.
struct Outgoing {
    body: Vec<u8>,
    id: Option<Value>,
    method: Option<String>,
}

impl Outgoing {
    fn parse(mut body: Vec<u8>) -> Option<Outgoing> {
        while body.last().is_some_and(u8::is_ascii_whitespace) {
            body.pop();
        }
        let value: Value = serde_json::from_slice(&body).ok()?;
        Some(Outgoing {
            id: value.get("id").cloned(),
            method: value
                .get("method")
                .and_then(Value::as_str)
                .map(String::from),
            body,
        })
    }

    /// A request (expects an answer), as opposed to a notification or a response.
    fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }
}

/// Answers a request the server will never answer (an HTTP error for its POST).
fn answer_error(emit: &Emit, id: &Value, text: &str) {
    emit(RemoteEvent::Message(error_response(
        id.clone(),
        code::SERVER_EXITED,
        text,
        None,
    )));
}

/// Reads an SSE body to its end, emitting each `message` event's JSON (anything else goes to
/// `other`). Bounded: an event over the limit is dropped and reported.
async fn read_events(
    response: &mut reqwest::Response,
    parser: &mut SseParser,
    emit: &Emit,
    mut on_message: impl FnMut(&Value),
) -> Result<(), LinkError> {
    let mut items = Vec::new();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Ok(()),
            Err(err) => return Err(LinkError::Http(chain(&err))),
        };
        parser.feed(&chunk, &mut items);
        handle_items(items.drain(..), emit, &mut on_message);
    }
}

/// Emits the messages among SSE items; other event types (a repeated `endpoint`) are ignored.
fn handle_items(
    items: impl Iterator<Item = SseItem>,
    emit: &Emit,
    on_message: &mut impl FnMut(&Value),
) {
    for item in items {
        match item {
            SseItem::Oversized { bytes } => {
                emit(RemoteEvent::Dropped {
                    reason: format!("an SSE event of {bytes}+ bytes exceeds the limit"),
                    bytes,
                });
            }
            SseItem::Event { event, data } if event == "message" => {
                deliver_json(data.as_bytes(), emit, on_message);
            }
            SseItem::Event { .. } => {}
        }
    }
}

/// Emits the message(s) of one JSON text: a message, or a batch (2025-03-26 allowed them).
fn deliver_json(bytes: &[u8], emit: &Emit, on_message: &mut impl FnMut(&Value)) {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Array(batch)) => {
            for message in batch {
                on_message(&message);
                emit(RemoteEvent::Message(message));
            }
        }
        Ok(message) => {
            on_message(&message);
            emit(RemoteEvent::Message(message));
        }
        Err(err) => {
            emit(RemoteEvent::Dropped {
                reason: format!("not JSON: {err}"),
                bytes: bytes.len(),
            });
        }
    }
}

/// Reads a whole (non-streamed) body, at most `max` bytes.
async fn read_body_bounded(
    response: &mut reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, LinkError> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(LinkError::TooLarge(max));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(err) => return Err(LinkError::Http(chain(&err))),
        }
    }
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// `HTTP 401 Unauthorized` plus the JSON-RPC error message the body carries, if any.
async fn status_error(target: &RemoteTarget, mut response: reqwest::Response) -> LinkError {
    let status = response.status();
    let mut text = format!("HTTP {status}");
    if let Ok(body) = read_body_bounded(&mut response, 64 * 1024).await
        && let Ok(value) = serde_json::from_slice::<Value>(&body)
        && let Some(message) = value
            .pointer("/error/message")
            .or_else(|| value.get("error"))
            .and_then(Value::as_str)
    {
        let message: String = message.chars().take(200).collect();
        text.push_str(&format!(": {message}"));
    }
    if matches!(status.as_u16(), 401 | 403) {
        text.push_str(" (check the server's `headers` in the config)");
    }
    if status.is_redirection() {
        text.push_str(" (airlock does not follow redirects: put the final URL in the config)");
    }
    LinkError::Status(target.scrub(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigValue;
    use std::collections::BTreeMap;

    fn server(url: &str, headers: &[(&str, &str)]) -> ServerConfig {
        let text = format!("[servers.r]\nurl = {url:?}\n");
        let config =
            crate::config::parse(std::path::Path::new("a.toml"), text, &|_| None).expect("config");
        let mut server = config.servers[0].clone();
        server.headers = headers
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    ConfigValue {
                        value: v.to_string(),
                        secret: true,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>();
        server
    }

    #[test]
    fn urls_are_shown_without_query_or_user_info() {
        let target = RemoteTarget::new(
            &server(
                "https://user:hunter22@example.com:8443/mcp?token=abcdef",
                &[],
            ),
            1024,
        )
        .expect("target");
        assert_eq!(target.display_url(), "https://example.com:8443/mcp?****");
        assert_eq!(
            target.scrub("sent token=abcdef with hunter22"),
            "sent **** with ****"
        );
    }

    #[test]
    fn header_values_never_show_in_debug_errors_or_scrubbed_text() {
        let target = RemoteTarget::new(
            &server(
                "http://127.0.0.1:1/mcp",
                &[("Authorization", "Bearer sk-secret-value")],
            ),
            1024,
        )
        .expect("target");
        let debug = format!("{target:?}");
        assert!(debug.contains("Authorization"), "{debug}");
        assert!(!debug.contains("sk-secret-value"), "{debug}");
        assert_eq!(
            target.scrub("server said: Bearer sk-secret-value is wrong"),
            "server said: **** is wrong"
        );

        let bad = RemoteTarget::new(
            &server("http://127.0.0.1:1/mcp", &[("X-Key", "line\nbreak-secret")]),
            1024,
        )
        .expect_err("invalid value");
        assert!(!bad.to_string().contains("break-secret"), "{bad}");
        assert!(bad.to_string().contains("X-Key"), "{bad}");
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for (url, loopback) in [
            ("http://127.0.0.1:1/mcp", true),
            ("http://127.9.9.9/mcp", true),
            ("http://[::1]:8080/mcp", true),
            ("http://LocalHost/mcp", true),
            ("https://example.com/mcp", false),
            ("http://10.0.0.1/mcp", false),
        ] {
            let parsed = reqwest::Url::parse(url).expect("url");
            assert_eq!(is_loopback(&parsed), loopback, "{url}");
        }
    }

    #[test]
    fn outgoing_messages_are_classified() {
        let request =
            Outgoing::parse(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\n".to_vec())
                .expect("parse");
        assert!(request.is_request());
        assert_eq!(request.body.last(), Some(&b'}'));
        let note =
            Outgoing::parse(b"{\"jsonrpc\":\"2.0\",\"method\":\"n\"}".to_vec()).expect("parse");
        assert!(!note.is_request());
        let response =
            Outgoing::parse(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}".to_vec()).expect("p");
        assert!(!response.is_request());
    }
}
