//! POST to the MCP endpoint: one JSON-RPC message per request. A request is answered with JSON
//! or an SSE stream; a notification or a response with 202. Which session it belongs to:
//!
//! - `MCP-Protocol-Version: 2026-07-28` (or, without a session, that version in `_meta`): the
//!   stateless flow, a session of its own that ends with the answer; the client closing the
//!   stream cancels the request;
//! - `Mcp-Session-Id`: that session (404 when it ended, or belongs to another identity);
//! - neither, and the message is `initialize`: a new session, whose id comes back in the header.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::body::{self, HttpBody, SseBody};
use super::hub::{Hub, OpenError, Session};
use super::server::{Caller, Service, close_after, header_str};
use super::session::{Frame, RegisterError};
use super::wire::{self, StandardHeaders};
use crate::mcp::message::{Class, classify, code, notification};

/// How long a client has to send its body.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub async fn handle(
    service: &Service,
    request: Request<Incoming>,
    caller: Caller,
) -> Response<HttpBody> {
    let headers = request.headers().clone();
    let get = |name: &str| header_str(&headers, name);
    let accepts_json = match accepted(get(header::ACCEPT.as_str())) {
        Ok(accepts_json) => accepts_json,
        Err(response) => return super::server::answer_unread(request, *response).await,
    };
    if !wire::is_json_body(get(header::CONTENT_TYPE.as_str())) {
        let response = body::error(
            415,
            Value::Null,
            code::INVALID_REQUEST,
            "Unsupported Media Type: a message is POSTed as Content-Type: application/json",
        );
        return super::server::answer_unread(request, response).await;
    }
    let message = match read_message(service, request.into_body()).await {
        Ok(message) => message,
        Err(response) => return response,
    };
    let class = match classify_one(&message) {
        Ok(class) => class,
        Err(response) => return *response,
    };
    let version = get(wire::VERSION_HEADER).map(str::trim);
    let is_request = matches!(class, Class::Request { .. });
    if is_request && wire::is_stateless(version, &message) {
        let standard = StandardHeaders {
            version,
            method: get(wire::METHOD_HEADER),
            name: get(wire::NAME_HEADER),
        };
        if let Some(refused) = stateless_refusal(&standard, &message, &class) {
            return refused;
        }
        return stateless(service, message, caller, accepts_json).await;
    }
    if let Some(version) = version
        && !wire::is_supported(version)
    {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let answer = wire::unsupported_version(id, version);
        return body::json(400, Bytes::from(answer.to_string()), None);
    }
    let hub = &service.hub;
    let (session, created) = match session_for(hub, get(wire::SESSION_HEADER), &class, &caller) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    if !is_request {
        if message.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
            && let Some(id) = message.pointer("/params/requestId")
        {
            session.state().cancelled(id);
        }
        hub.backend().message(session.info.key, message);
        return body::empty(202);
    }
    answer(hub, &session, message, accepts_json, created).await
}

/// An answer sent in place of handling the message (boxed: it is large, and the rare path).
type Refusal = Box<Response<HttpBody>>;

/// Whether the client takes a JSON answer (else it takes only SSE); 406 when it takes neither.
fn accepted(accept: Option<&str>) -> Result<bool, Refusal> {
    let (accepts_json, accepts_sse) = (
        wire::accepts(accept, "application/json"),
        wire::accepts(accept, "text/event-stream"),
    );
    if !accepts_json && !accepts_sse {
        return Err(Box::new(body::error(
            406,
            Value::Null,
            code::INVALID_REQUEST,
            "Not Acceptable: the client must accept application/json and text/event-stream",
        )));
    }
    Ok(accepts_json)
}

/// The message's class; a batch or a malformed message is a 400.
fn classify_one(message: &Value) -> Result<Class<'_>, Refusal> {
    match classify(message) {
        Ok(Class::Batch(_)) => Err(Box::new(body::error(
            400,
            Value::Null,
            code::INVALID_REQUEST,
            "JSON-RPC batches are not supported: send one message per POST",
        ))),
        Ok(class) => Ok(class),
        Err(invalid) => Err(Box::new(body::error(
            400,
            Value::Null,
            code::INVALID_REQUEST,
            &invalid.to_string(),
        ))),
    }
}

/// Why a stateless request is refused before it reaches a session: its standard headers do not
/// match the body, or it calls a method the stateless protocol removed.
fn stateless_refusal(
    standard: &StandardHeaders<'_>,
    message: &Value,
    class: &Class<'_>,
) -> Option<Response<HttpBody>> {
    if let Err(answer) = wire::check_stateless_headers(standard, message) {
        return Some(body::json(400, Bytes::from(answer.to_string()), None));
    }
    if let Class::Request { id, method } = class
        && crate::mcp::version::removed_in_stateless(method)
    {
        let text = format!("Method not found: {method} does not exist in protocol 2026-07-28");
        return Some(body::error(
            404,
            (*id).clone(),
            wire::METHOD_NOT_FOUND,
            &text,
        ));
    }
    None
}

/// The session a stateful message belongs to: the one its `Mcp-Session-Id` names, or a new one
/// for `initialize` (then `true`).
fn session_for(
    hub: &Arc<Hub>,
    session_id: Option<&str>,
    class: &Class<'_>,
    caller: &Caller,
) -> Result<(Arc<Session>, bool), Refusal> {
    match session_id {
        Some(id) => match hub.find(id.trim(), caller.identity.as_ref()) {
            Some(session) => Ok((session, false)),
            None => Err(Box::new(session_not_found())),
        },
        None if matches!(
            class,
            Class::Request {
                method: "initialize",
                ..
            }
        ) =>
        {
            match hub.open(caller.identity.clone(), caller.client.clone()) {
                Ok(session) => Ok((session, true)),
                Err(err) => Err(Box::new(open_refused(&err))),
            }
        }
        None => Err(Box::new(body::error(
            400,
            Value::Null,
            code::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required (send initialize first to get one)",
        ))),
    }
}

/// Reads the body within the size limit and the time limit, and parses it.
async fn read_message(service: &Service, incoming: Incoming) -> Result<Value, Response<HttpBody>> {
    let limit = service.settings.limits.max_body_bytes;
    // Each refusal here leaves the body unread: the connection closes after it.
    let too_large = || {
        close_after(body::error(
            413,
            Value::Null,
            code::INVALID_REQUEST,
            &format!(
                "Payload Too Large: the request body is over {limit} bytes ([http] max_body_bytes)"
            ),
        ))
    };
    if hyper::body::Body::size_hint(&incoming).lower() > limit as u64 {
        return Err(too_large());
    }
    let collected =
        tokio::time::timeout(BODY_TIMEOUT, Limited::new(incoming, limit).collect()).await;
    let bytes = match collected {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Ok(Err(_)) => {
            return Err(close_after(body::error(
                400,
                Value::Null,
                code::INVALID_REQUEST,
                "the request body could not be read",
            )));
        }
        Err(_) => {
            return Err(close_after(body::error(
                408,
                Value::Null,
                code::INVALID_REQUEST,
                "the request body did not arrive in time",
            )));
        }
    };
    serde_json::from_slice(&bytes).map_err(|err| {
        body::error(
            400,
            Value::Null,
            code::PARSE_ERROR,
            &format!("Parse error: {err}"),
        )
    })
}

fn session_not_found() -> Response<HttpBody> {
    body::error(
        404,
        Value::Null,
        -32001,
        "Session not found: it ended or expired; send initialize again without Mcp-Session-Id",
    )
}

fn open_refused(err: &OpenError) -> Response<HttpBody> {
    let status = match err {
        OpenError::ClientLimit(_) => 429,
        OpenError::TotalLimit(_) | OpenError::Random(_) => 503,
    };
    body::error(status, Value::Null, -32000, &err.to_string())
}

/// Sends a request into the session and answers with its first frame: JSON, or an SSE stream.
async fn answer(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    message: Value,
    accepts_json: bool,
    created: bool,
) -> Response<HttpBody> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let (tx, mut rx) = super::sink::sink();
    let registered =
        session
            .state()
            .register(&message, accepts_json, tx, std::time::Instant::now());
    if let Err(err) = registered {
        return match err {
            RegisterError::Duplicate(_) => {
                body::error(409, id, code::INVALID_REQUEST, &err.to_string())
            }
            RegisterError::Closed => session_not_found(),
        };
    }
    hub.backend().message(session.info.key, message);
    let session_id = created.then_some(session.id.as_str());
    match rx.recv().await {
        Some(Frame::Json {
            body: bytes,
            status,
        }) => {
            if created && is_error(&bytes) {
                // A failed initialize opens no session.
                hub.end(session);
                return body::json(status, bytes, None);
            }
            body::json(status, bytes, session_id)
        }
        Some(Frame::Sse(first)) => body::sse(SseBody::new(Some(first), rx, None), session_id),
        Some(Frame::End) | None => session_not_found(),
    }
}

fn is_error(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|answer| answer.get("error").is_some())
}

/// Ends a stateless request's session however its response ends; a request still in flight
/// then (the client closed the stream) is cancelled first, as 2026-07-28 says.
struct StatelessEnd {
    hub: Arc<Hub>,
    session: Arc<Session>,
    stream: u32,
}

impl Drop for StatelessEnd {
    fn drop(&mut self) {
        let abandoned = self.session.state().abandon(self.stream);
        if let Some(id) = abandoned {
            let cancel = notification(
                "notifications/cancelled",
                json!({"requestId": id, "reason": "the client closed the response stream"}),
            );
            self.hub.backend().message(self.session.info.key, cancel);
        }
        self.hub.end(&self.session);
    }
}

async fn stateless(
    service: &Service,
    message: Value,
    caller: Caller,
    accepts_json: bool,
) -> Response<HttpBody> {
    let hub = &service.hub;
    let session = hub.open_stateless(caller.identity, caller.client);
    let (tx, mut rx) = super::sink::sink();
    let registered =
        session
            .state()
            .register(&message, accepts_json, tx, std::time::Instant::now());
    let stream = match registered {
        Ok(stream) => stream,
        Err(err) => {
            hub.end(&session);
            return body::error(500, Value::Null, code::INTERNAL_ERROR, &err.to_string());
        }
    };
    let end = StatelessEnd {
        hub: hub.clone(),
        session: session.clone(),
        stream,
    };
    hub.backend().message(session.info.key, message);
    match rx.recv().await {
        Some(Frame::Json {
            body: bytes,
            status,
        }) => body::json(status, bytes, None),
        Some(Frame::Sse(first)) => {
            body::sse(SseBody::new(Some(first), rx, Some(Box::new(end))), None)
        }
        Some(Frame::End) | None => body::error(
            500,
            Value::Null,
            code::INTERNAL_ERROR,
            "the request ended without an answer",
        ),
    }
}
