//! GET (the stream of server-initiated messages, or the resumption of any stream with
//! `Last-Event-ID`) and DELETE (end the session) on the MCP endpoint. Neither exists in the
//! 2026-07-28 flow: those clients get 405.

use http::{Request, Response, header};
use hyper::body::Incoming;
use serde_json::Value;

use super::body::{self, HttpBody, SseBody};
use super::hub::Session;
use super::server::{Caller, Service, header_str};
use super::sse::EventId;
use super::wire;
use crate::mcp::message::code;
use crate::mcp::version::STATELESS_VERSION;

/// The session a GET or DELETE names, or the response that says why there is none.
fn session_of(
    service: &Service,
    request: &Request<Incoming>,
    caller: &Caller,
) -> Result<std::sync::Arc<Session>, Box<Response<HttpBody>>> {
    let headers = request.headers();
    if header_str(headers, wire::VERSION_HEADER).map(str::trim) == Some(STATELESS_VERSION) {
        let mut response = body::error(
            405,
            Value::Null,
            code::INVALID_REQUEST,
            "Method Not Allowed: 2026-07-28 has no sessions and no GET stream",
        );
        response
            .headers_mut()
            .insert(header::ALLOW, http::HeaderValue::from_static("POST"));
        return Err(Box::new(response));
    }
    let Some(id) = header_str(headers, wire::SESSION_HEADER) else {
        return Err(Box::new(body::error(
            400,
            Value::Null,
            code::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        )));
    };
    service
        .hub
        .find(id.trim(), caller.identity.as_ref())
        .ok_or_else(|| {
            Box::new(body::error(
                404,
                Value::Null,
                -32001,
                "Session not found: it ended or expired; send initialize again without Mcp-Session-Id",
            ))
        })
}

pub fn get(service: &Service, request: &Request<Incoming>, caller: &Caller) -> Response<HttpBody> {
    let session = match session_of(service, request, caller) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    let accept = header_str(request.headers(), header::ACCEPT.as_str());
    if !wire::accepts(accept, "text/event-stream") {
        return body::error(
            406,
            Value::Null,
            code::INVALID_REQUEST,
            "Not Acceptable: the client must accept text/event-stream",
        );
    }
    let after = header_str(request.headers(), "last-event-id").and_then(EventId::parse);
    let (tx, rx) = super::sink::sink();
    if session
        .state()
        .attach(tx, after, std::time::Instant::now())
        .is_err()
    {
        return body::error(
            409,
            Value::Null,
            code::INVALID_REQUEST,
            "Conflict: this session already has an open GET stream",
        );
    }
    body::sse(SseBody::new(None, rx, None), None)
}

pub fn delete(
    service: &Service,
    request: &Request<Incoming>,
    caller: &Caller,
) -> Response<HttpBody> {
    match session_of(service, request, caller) {
        Ok(session) => {
            service.hub.end(&session);
            body::empty(200)
        }
        Err(response) => *response,
    }
}
