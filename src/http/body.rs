//! Response bodies: one JSON document, or an SSE stream fed by a session's sink with a keep-alive
//! comment every 15 s (so dead connections are noticed and proxies keep the stream open).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::sink::SinkReceiver;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Body, Frame as BodyFrame, SizeHint};
use serde_json::Value;

use super::session::Frame;
use super::sse::KEEPALIVE;
use crate::mcp::message::error_response;

pub type HttpBody = BoxBody<Bytes, Infallible>;

const KEEPALIVE_EVERY: Duration = Duration::from_secs(15);

/// Dropped with the body: what must happen when the response is over, however it ends.
pub type Guard = Box<dyn Send + Sync>;

/// An SSE response body: frames from a session's sink until [`Frame::End`].
pub struct SseBody {
    first: Option<Bytes>,
    frames: SinkReceiver,
    keepalive: tokio::time::Interval,
    ended: bool,
    _guard: Option<Guard>,
}

impl SseBody {
    pub fn new(first: Option<Bytes>, frames: SinkReceiver, guard: Option<Guard>) -> SseBody {
        let mut keepalive = tokio::time::interval(KEEPALIVE_EVERY);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        keepalive.reset();
        SseBody {
            first,
            frames,
            keepalive,
            ended: false,
            _guard: guard,
        }
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, Infallible>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(BodyFrame::data(first))));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        match self.frames.poll_recv(cx) {
            Poll::Ready(Some(Frame::Sse(bytes) | Frame::Json { body: bytes, .. })) => {
                self.keepalive.reset();
                Poll::Ready(Some(Ok(BodyFrame::data(bytes))))
            }
            Poll::Ready(Some(Frame::End) | None) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => match self.keepalive.poll_tick(cx) {
                Poll::Ready(_) => {
                    Poll::Ready(Some(Ok(BodyFrame::data(Bytes::from_static(KEEPALIVE)))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.first.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// A 200 `text/event-stream` response.
pub fn sse(body: SseBody, session_id: Option<&str>) -> Response<HttpBody> {
    let mut response = Response::new(body.boxed());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    with_session(response, session_id)
}

/// A JSON response with `status`.
pub fn json(status: u16, body: Bytes, session_id: Option<&str>) -> Response<HttpBody> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    with_session(response, session_id)
}

/// An HTTP error whose body is a JSON-RPC error (id `null` unless the request's id is known).
pub fn error(status: u16, id: Value, code: i64, message: &str) -> Response<HttpBody> {
    let body = error_response(id, code, message, None);
    json(status, Bytes::from(body.to_string()), None)
}

/// An empty response (202 for notifications, 200 for DELETE, 204 for preflight).
pub fn empty(status: u16) -> Response<HttpBody> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    response
}

fn with_session(mut response: Response<HttpBody>, session_id: Option<&str>) -> Response<HttpBody> {
    if let Some(value) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        response
            .headers_mut()
            .insert(super::wire::SESSION_HEADER, value);
    }
    response
}
