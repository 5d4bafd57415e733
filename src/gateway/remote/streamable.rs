//! MCP Streamable HTTP (2025-03-26 and later), client side.
//!
//! Every message is POSTed to the endpoint. The answer is `application/json` (one message), or an
//! SSE stream carrying the response and whatever the server sends first (its own requests,
//! notifications), or `202 Accepted` for notifications and responses. `initialize` is sent alone
//! and waited for, because its answer carries the `Mcp-Session-Id` (and the negotiated version)
//! that every later request must send; after that, requests run concurrently (a long tool call
//! must not hold up others), bounded by [`MAX_CONCURRENT_REQUESTS`], while notifications and
//! responses are posted in order. After `notifications/initialized` airlock opens the optional
//! GET stream for server-initiated messages (405: the server has none). At a stop the session is
//! DELETEd, best effort.

use std::sync::Arc;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;

use super::LinkError;
use super::sse::SseParser;
use super::{
    Emit, GOODBYE_TIMEOUT, Outgoing, POST_TIMEOUT, RemoteEvent, RemoteTarget, answer_error, chain,
    content_type, deliver_json, read_body_bounded, read_events, status_error,
};

/// Requests in flight at once; more wait in the gateway's bounded queue for this server.
const MAX_CONCURRENT_REQUESTS: usize = 64;
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// A Streamable HTTP server, ready to run.
pub struct Session {
    shared: Arc<Shared>,
}

/// What every request of a session needs; replaced once `initialize` is answered.
struct Shared {
    target: RemoteTarget,
    session_id: Option<HeaderValue>,
    protocol: Option<HeaderValue>,
}

/// How reading one response ended, when it did not end well.
enum Trouble {
    /// The connection broke: the server is gone (or the network is).
    Broken(LinkError),
    /// The server sent something unusable for this request; the session itself is fine.
    Unusable(LinkError),
}

impl Shared {
    fn session_headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = Vec::with_capacity(4);
        if let Some(id) = &self.session_id {
            headers.push((HeaderName::from_static(SESSION_HEADER), id.clone()));
        }
        if let Some(version) = &self.protocol {
            headers.push((HeaderName::from_static(VERSION_HEADER), version.clone()));
        }
        headers
    }

    async fn post(&self, body: Vec<u8>) -> Result<reqwest::Response, reqwest::Error> {
        let mut headers = self.session_headers();
        headers.push((
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        ));
        headers.push((CONTENT_TYPE, HeaderValue::from_static("application/json")));
        self.target
            .request(Method::POST, self.target.url.clone(), &headers)
            .body(body)
            .send()
            .await
    }

    /// The session is gone on the server's side: a 404 to a request that carried its id.
    fn session_lost(&self, status: StatusCode) -> bool {
        status == StatusCode::NOT_FOUND && self.session_id.is_some()
    }

    /// Delivers a successful response's message(s), whatever its form.
    async fn deliver(
        &self,
        mut response: reqwest::Response,
        emit: &Emit,
        mut on_message: impl FnMut(&Value),
    ) -> Result<(), Trouble> {
        let max = self.target.max_message_bytes;
        match content_type(&response).as_str() {
            "text/event-stream" => {
                let mut parser = SseParser::new(max);
                read_events(&mut response, &mut parser, emit, on_message)
                    .await
                    .map_err(Trouble::Broken)
            }
            "application/json" => {
                let body =
                    read_body_bounded(&mut response, max)
                        .await
                        .map_err(|err| match err {
                            LinkError::TooLarge(_) => {
                                emit(RemoteEvent::Dropped {
                                    reason: err.to_string(),
                                    bytes: max,
                                });
                                Trouble::Unusable(err)
                            }
                            other => Trouble::Broken(other),
                        })?;
                deliver_json(&body, emit, &mut on_message);
                Ok(())
            }
            // 202 Accepted, or an empty 200: nothing to deliver.
            _ => Ok(()),
        }
    }
}

impl Session {
    pub fn new(target: RemoteTarget) -> Self {
        Session {
            shared: Arc::new(Shared {
                target,
                session_id: None,
                protocol: None,
            }),
        }
    }

    pub async fn run(
        mut self,
        mut outgoing: mpsc::Receiver<Vec<u8>>,
        mut stop: oneshot::Receiver<()>,
        emit: Emit,
    ) {
        // Any task that finds the server gone reports here; the first report ends the link.
        let (fatal_tx, mut fatal_rx) = mpsc::channel::<LinkError>(4);
        let mut tasks = JoinSet::new();
        let limit = Arc::new(Semaphore::new(MAX_CONCURRENT_REQUESTS));
        let mut listening = false;
        let stopped = LinkError::Stopped;
        let (reason, was_stopped) = loop {
            let message = tokio::select! {
                _ = &mut stop => break (stopped, true),
                Some(reason) = fatal_rx.recv() => break (reason, false),
                Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
                message = outgoing.recv() => message,
            };
            let Some(bytes) = message else {
                break (stopped, true);
            };
            let Some(out) = Outgoing::parse(bytes) else {
                continue;
            };
            if out.method.as_deref() == Some("initialize") {
                let result = tokio::select! {
                    result = self.initialize(out, &emit) => result,
                    _ = &mut stop => break (stopped, true),
                };
                match result {
                    Ok(shared) => self.shared = Arc::new(shared),
                    Err(reason) => break (reason, false),
                }
            } else if out.is_request() {
                let permit = tokio::select! {
                    permit = limit.clone().acquire_owned() => permit,
                    _ = &mut stop => break (stopped, true),
                };
                let Ok(permit) = permit else {
                    continue;
                };
                tasks.spawn(request(
                    self.shared.clone(),
                    out,
                    emit.clone(),
                    fatal_tx.clone(),
                    permit,
                ));
            } else {
                let opens_stream = !listening
                    && out.method.as_deref() == Some("notifications/initialized")
                    && self.shared.session_id.is_some();
                let result = tokio::select! {
                    result = self.post_in_order(out, &emit, &mut tasks, &fatal_tx) => result,
                    _ = &mut stop => break (stopped, true),
                };
                if let Err(reason) = result {
                    break (reason, false);
                }
                if opens_stream {
                    listening = true;
                    tasks.spawn(listen(self.shared.clone(), emit.clone(), fatal_tx.clone()));
                }
            }
        };
        tasks.abort_all();
        if was_stopped {
            self.goodbye().await;
        }
        let reason = self.shared.target.scrub(&reason.to_string());
        emit(RemoteEvent::Ended {
            reason,
            stopped: was_stopped,
        });
    }

    /// Sends `initialize` and waits for its answer: the session id and version come with it.
    async fn initialize(&self, out: Outgoing, emit: &Emit) -> Result<Shared, LinkError> {
        let shared = &self.shared;
        let id = out.id.clone();
        let response = shared
            .post(out.body)
            .await
            .map_err(|err| LinkError::Unreachable(chain(&err)))?;
        if !response.status().is_success() {
            let status = status_error(&shared.target, response).await;
            return Err(LinkError::InitializeRefused(status.to_string()));
        }
        // A session id must be visible ASCII (the spec); anything else is not sent back.
        let session_id = response
            .headers()
            .get(SESSION_HEADER)
            .filter(|v| v.to_str().is_ok_and(|s| !s.is_empty()))
            .cloned();
        let mut protocol = None;
        let mut answered = false;
        shared
            .deliver(response, emit, |message| {
                if message.get("id") == id.as_ref() && message.get("method").is_none() {
                    answered = true;
                    protocol = message
                        .pointer("/result/protocolVersion")
                        .and_then(Value::as_str)
                        .and_then(|v| HeaderValue::from_str(v).ok());
                }
            })
            .await
            .map_err(|trouble| match trouble {
                Trouble::Broken(reason) | Trouble::Unusable(reason) => {
                    LinkError::InitializeBroke(Box::new(reason))
                }
            })?;
        if !answered {
            return Err(LinkError::NoInitializeAnswer);
        }
        Ok(Shared {
            target: shared.target.clone(),
            session_id,
            protocol,
        })
    }

    /// A notification or a response: posted in order, normally answered `202` at once.
    async fn post_in_order(
        &self,
        out: Outgoing,
        emit: &Emit,
        tasks: &mut JoinSet<()>,
        fatal: &mpsc::Sender<LinkError>,
    ) -> Result<(), LinkError> {
        let shared = &self.shared;
        let response = match tokio::time::timeout(POST_TIMEOUT, shared.post(out.body)).await {
            Err(_) => {
                tracing::warn!(server = %shared.target.server, "a notification to the remote server timed out");
                return Ok(());
            }
            Ok(Err(err)) => return Err(LinkError::Lost(chain(&err))),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if shared.session_lost(status) {
            return Err(LinkError::SessionEnded);
        }
        if !status.is_success() {
            let text = status_error(&shared.target, response).await;
            tracing::warn!(server = %shared.target.server, "the remote server refused a notification: {text}");
            return Ok(());
        }
        if status != StatusCode::ACCEPTED {
            // A server may answer a notification with a stream of its own messages.
            let (shared, emit, fatal) = (self.shared.clone(), emit.clone(), fatal.clone());
            tasks.spawn(async move {
                if let Err(Trouble::Broken(reason)) = shared.deliver(response, &emit, |_| {}).await
                {
                    let _ = fatal.try_send(LinkError::ResponseStream(Box::new(reason)));
                }
            });
        }
        Ok(())
    }

    /// DELETE the session, best effort and briefly: the server may already be gone.
    async fn goodbye(&self) {
        let shared = &self.shared;
        if shared.session_id.is_none() {
            return;
        }
        let request = shared
            .target
            .request(
                Method::DELETE,
                shared.target.url.clone(),
                &shared.session_headers(),
            )
            .send();
        let _ = tokio::time::timeout(GOODBYE_TIMEOUT, request).await;
    }
}

/// One request: POST it, deliver what comes back; a request left unanswered gets an error.
async fn request(
    shared: Arc<Shared>,
    out: Outgoing,
    emit: Emit,
    fatal: mpsc::Sender<LinkError>,
    _permit: OwnedSemaphorePermit,
) {
    let Some(id) = out.id.clone() else {
        return;
    };
    let server = shared.target.server.clone();
    let response = match shared.post(out.body).await {
        Ok(response) => response,
        Err(err) => {
            let _ = fatal.try_send(LinkError::Lost(chain(&err)));
            return;
        }
    };
    let status = response.status();
    if shared.session_lost(status) {
        let _ = fatal.try_send(LinkError::SessionEnded);
        return;
    }
    if !status.is_success() {
        let text = status_error(&shared.target, response).await;
        answer_error(&emit, &id, &format!("remote server `{server}`: {text}"));
        return;
    }
    let mut answered = false;
    let delivered = shared
        .deliver(response, &emit, |message| {
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                answered = true;
            }
        })
        .await;
    match delivered {
        Err(Trouble::Broken(reason)) => {
            let _ = fatal.try_send(LinkError::ResponseStream(Box::new(reason)));
        }
        Err(Trouble::Unusable(reason)) if !answered => {
            answer_error(&emit, &id, &format!("remote server `{server}`: {reason}"));
        }
        Ok(()) if !answered => {
            // Resuming a stream (Last-Event-ID) is not implemented: say so rather than hang.
            answer_error(
                &emit,
                &id,
                &format!("remote server `{server}` closed the response without answering"),
            );
        }
        _ => {}
    }
}

/// The optional GET stream for messages the server sends on its own.
async fn listen(shared: Arc<Shared>, emit: Emit, fatal: mpsc::Sender<LinkError>) {
    let mut headers = shared.session_headers();
    headers.push((ACCEPT, HeaderValue::from_static("text/event-stream")));
    let sent = shared
        .target
        .request(Method::GET, shared.target.url.clone(), &headers)
        .send()
        .await;
    let mut response = match sent {
        Ok(response) => response,
        Err(err) => {
            let _ = fatal.try_send(LinkError::Lost(chain(&err)));
            return;
        }
    };
    let server = &shared.target.server;
    if !response.status().is_success() || content_type(&response) != "text/event-stream" {
        // 405: the server offers no such stream, which the spec allows.
        tracing::debug!(%server, status = %response.status(), "no server-initiated event stream");
        return;
    }
    let mut parser = SseParser::new(shared.target.max_message_bytes);
    match read_events(&mut response, &mut parser, &emit, |_| {}).await {
        Ok(()) => tracing::info!(%server, "the server closed its event stream"),
        Err(reason) => {
            let _ = fatal.try_send(LinkError::ServerStream(Box::new(reason)));
        }
    }
}
