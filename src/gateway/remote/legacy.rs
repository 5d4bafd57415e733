//! MCP's legacy HTTP+SSE transport (2024-11-05), client side.
//!
//! airlock GETs the SSE URL; the first `endpoint` event names the URL to POST messages to
//! (relative to the SSE URL); every server message arrives as a `message` event on the stream.
//! The stream *is* the connection: when it ends, the server is gone.
//!
//! The endpoint must share the SSE URL's origin: the configured headers (tokens) go with every
//! POST, and a server, or whoever controls its stream, must not be able to send them elsewhere.

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Url};
use tokio::sync::{mpsc, oneshot};

use super::LinkError;
use super::sse::{SseItem, SseParser};
use super::{
    Emit, Outgoing, POST_TIMEOUT, RemoteError, RemoteEvent, RemoteTarget, answer_error, chain,
    content_type, display_url, handle_items, read_events, status_error,
};

/// A legacy SSE server whose stream is open and whose endpoint is known.
pub struct Session {
    target: RemoteTarget,
    stream: reqwest::Response,
    parser: SseParser,
    /// Events that arrived with the endpoint, before `run` started reading.
    early: Vec<SseItem>,
    post_url: Url,
}

/// Opens the stream and waits (at most `startup_timeout`) for the `endpoint` event.
pub async fn connect(target: RemoteTarget) -> Result<Session, RemoteError> {
    match tokio::time::timeout(target.connect_timeout, open(&target)).await {
        Ok(Ok((stream, parser, early, post_url))) => Ok(Session {
            target,
            stream,
            parser,
            early,
            post_url,
        }),
        Ok(Err(reason)) => Err(target.connect_error(reason)),
        Err(_) => {
            Err(target.connect_error(LinkError::EndpointTimeout(target.connect_timeout.as_secs())))
        }
    }
}

type Opened = (reqwest::Response, SseParser, Vec<SseItem>, Url);

async fn open(target: &RemoteTarget) -> Result<Opened, LinkError> {
    let accept = [(ACCEPT, HeaderValue::from_static("text/event-stream"))];
    let mut stream = target
        .request(Method::GET, target.url.clone(), &accept)
        .send()
        .await
        .map_err(|err| LinkError::Http(chain(&err)))?;
    if !stream.status().is_success() {
        return Err(status_error(target, stream).await);
    }
    let kind = content_type(&stream);
    if kind != "text/event-stream" {
        return Err(LinkError::NotAnEventStream(kind));
    }
    let mut parser = SseParser::new(target.max_message_bytes);
    let mut items = Vec::new();
    loop {
        let chunk = match stream.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Err(LinkError::NoEndpoint),
            Err(err) => return Err(LinkError::Http(chain(&err))),
        };
        parser.feed(&chunk, &mut items);
        let found = items
            .iter()
            .position(|item| matches!(item, SseItem::Event { event, .. } if event == "endpoint"));
        if let Some(at) = found {
            let Some(SseItem::Event { data, .. }) = items.get(at) else {
                continue;
            };
            let post_url = endpoint(&target.url, data)?;
            let early = items.split_off(at + 1);
            return Ok((stream, parser, early, post_url));
        }
        // Messages before the endpoint cannot be meaningful (nothing was sent yet); a bound on
        // what is kept meanwhile still matters against a hostile stream.
        items.clear();
    }
}

/// Resolves the endpoint against the SSE URL and checks it stays on the same origin.
fn endpoint(base: &Url, data: &str) -> Result<Url, LinkError> {
    let url = base
        .join(data.trim())
        .map_err(|err| LinkError::EndpointNotUrl(err.to_string()))?;
    if url.scheme() != base.scheme()
        || url.host_str() != base.host_str()
        || url.port_or_known_default() != base.port_or_known_default()
    {
        return Err(LinkError::OtherOrigin(display_url(&url)));
    }
    Ok(url)
}

impl Session {
    pub async fn run(
        self,
        mut outgoing: mpsc::Receiver<Vec<u8>>,
        mut stop: oneshot::Receiver<()>,
        emit: Emit,
    ) {
        let Session {
            target,
            mut stream,
            mut parser,
            early,
            post_url,
        } = self;
        let (fatal_tx, mut fatal_rx) = mpsc::channel::<LinkError>(2);
        let reader = {
            let emit = emit.clone();
            tokio::spawn(async move {
                handle_items(early.into_iter(), &emit, &mut |_| {});
                let reason = match read_events(&mut stream, &mut parser, &emit, |_| {}).await {
                    Ok(()) => LinkError::EventStreamClosed,
                    Err(reason) => LinkError::EventStream(Box::new(reason)),
                };
                let _ = fatal_tx.try_send(reason);
            })
        };
        let stopped = LinkError::Stopped;
        let (reason, was_stopped) = loop {
            let message = tokio::select! {
                _ = &mut stop => break (stopped, true),
                Some(reason) = fatal_rx.recv() => break (reason, false),
                message = outgoing.recv() => message,
            };
            let Some(bytes) = message else {
                break (stopped, true);
            };
            let Some(out) = Outgoing::parse(bytes) else {
                continue;
            };
            let result = tokio::select! {
                result = post(&target, &post_url, out, &emit) => result,
                _ = &mut stop => break (stopped, true),
            };
            if let Err(reason) = result {
                break (reason, false);
            }
        };
        reader.abort();
        emit(RemoteEvent::Ended {
            reason: target.scrub(&reason.to_string()),
            stopped: was_stopped,
        });
    }
}

/// POSTs one message; its answer comes on the stream. Messages are posted one after another
/// (order matters: `initialize` before everything else), and such servers answer `202` at once.
async fn post(
    target: &RemoteTarget,
    url: &Url,
    out: Outgoing,
    emit: &Emit,
) -> Result<(), LinkError> {
    let headers = [(CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    let sent = target
        .request(Method::POST, url.clone(), &headers)
        .body(out.body)
        .send();
    let response = match tokio::time::timeout(POST_TIMEOUT, sent).await {
        Err(_) => return Err(LinkError::NotAccepted(POST_TIMEOUT.as_secs())),
        Ok(Err(err)) => return Err(LinkError::Lost(chain(&err))),
        Ok(Ok(response)) => response,
    };
    if !response.status().is_success() {
        let text = status_error(target, response).await;
        match (&out.id, out.method.is_some()) {
            (Some(id), true) => answer_error(
                emit,
                id,
                &format!("remote server `{}`: {text}", target.server),
            ),
            _ => {
                tracing::warn!(server = %target.server, "the remote server refused a message: {text}")
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_relative_to_the_sse_url_and_stay_on_its_origin() {
        let base = Url::parse("http://127.0.0.1:3001/sse").expect("url");
        assert_eq!(
            endpoint(&base, "/message?sessionId=abc")
                .expect("ok")
                .as_str(),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        assert_eq!(
            endpoint(&base, "messages/?session_id=1")
                .expect("ok")
                .as_str(),
            "http://127.0.0.1:3001/messages/?session_id=1"
        );
        assert!(endpoint(&base, "http://127.0.0.1:3001/m").is_ok());
        for elsewhere in [
            "http://evil.example/steal",
            "https://127.0.0.1:3001/m",
            "http://127.0.0.1:3002/m",
            "//evil.example/m",
        ] {
            let err = endpoint(&base, elsewhere).expect_err(elsewhere);
            assert!(matches!(err, LinkError::OtherOrigin(_)), "{err}");
            assert!(err.to_string().contains("another origin"));
        }
    }
}
