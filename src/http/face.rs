//! The HTTP face of a gateway: the listener's sessions reach the session core through the
//! [`Mux`], which the core sees as its one host on an in-memory pipe (newline-delimited JSON,
//! exactly what a stdio host sends). The core, its shell, its servers, gate and audit are the
//! ones `airlock serve` runs on stdio; nothing there knows about HTTP. A stdio host can be served
//! at the same time as one more session of the mux.

use std::collections::HashMap;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::hub::{Backend, Outbox, SessionInfo, SessionKey};
use super::mux::{Mux, Out};
use crate::mcp::{Frame, LineReader};

/// What the listener tells the mux task.
#[derive(Debug)]
pub enum Input {
    Open(SessionInfo, Box<dyn Deliver>),
    Message(SessionKey, Value),
    Close(SessionKey),
}

/// The [`Backend`] the hub calls: every call becomes an [`Input`] for the mux task.
#[derive(Clone)]
pub struct MuxBackend {
    inputs: mpsc::UnboundedSender<Input>,
}

impl MuxBackend {
    pub fn new() -> (MuxBackend, mpsc::UnboundedReceiver<Input>) {
        let (inputs, rx) = mpsc::unbounded_channel();
        (MuxBackend { inputs }, rx)
    }
}

impl Backend for MuxBackend {
    fn open(&self, info: &SessionInfo, outbox: Outbox) {
        let _ = self
            .inputs
            .send(Input::Open(info.clone(), Box::new(outbox)));
    }

    fn message(&self, key: SessionKey, message: Value) {
        let _ = self.inputs.send(Input::Message(key, message));
    }

    fn close(&self, key: SessionKey) {
        let _ = self.inputs.send(Input::Close(key));
    }
}

/// Where a session's messages go: the listener's outbox, or the stdio host.
pub trait Deliver: Send + std::fmt::Debug {
    fn deliver(&mut self, message: &Value, related: Option<&Value>);
}

impl Deliver for Outbox {
    fn deliver(&mut self, message: &Value, related: Option<&Value>) {
        self.send(message, related);
    }
}

/// Messages the mux task takes from its inputs before writing to the core.
const BATCH: usize = 256;

/// Runs the mux between the listener (`inputs`) and the core's host pipe (`to_core`,
/// `from_core`) until the core's side closes (the gateway shut down). `stdio`: a stdio host
/// served as one more session, as (its frames, where its answers go).
pub async fn run<W, R>(
    separator: &str,
    mut inputs: mpsc::UnboundedReceiver<Input>,
    mut to_core: W,
    from_core: R,
    max_line_bytes: usize,
) where
    W: AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
{
    let mut mux = Mux::new(separator);
    let mut sessions: HashMap<SessionKey, Box<dyn Deliver>> = HashMap::new();
    let mut reader = LineReader::new(
        BufReader::with_capacity(64 * 1024, from_core),
        max_line_bytes,
    );
    let mut bytes = Vec::with_capacity(64 * 1024);
    loop {
        tokio::select! {
            input = inputs.recv() => {
                let Some(input) = input else { break };
                let mut outs = apply(&mut mux, &mut sessions, input);
                for _ in 0..BATCH {
                    match inputs.try_recv() {
                        Ok(input) => outs.extend(apply(&mut mux, &mut sessions, input)),
                        Err(_) => break,
                    }
                }
                route(outs, &mut sessions, &mut bytes);
                if !bytes.is_empty() {
                    if to_core.write_all(&bytes).await.is_err() {
                        break;
                    }
                    bytes.clear();
                }
            }
            frame = reader.next_frame() => {
                let Some(outs) = from_core_frame(&mut mux, frame) else { break };
                let mut outs = outs;
                while let Some(Ok(Some(frame))) = reader.try_next_frame() {
                    outs.extend(from_core_frame(&mut mux, Ok(Some(frame))).unwrap_or_default());
                }
                route(outs, &mut sessions, &mut bytes);
                if !bytes.is_empty() {
                    if to_core.write_all(&bytes).await.is_err() {
                        break;
                    }
                    bytes.clear();
                }
            }
        }
    }
    let _ = to_core.shutdown().await;
}

/// One frame from the core; `None` when its side closed.
fn from_core_frame(mux: &mut Mux, frame: std::io::Result<Option<Frame>>) -> Option<Vec<Out>> {
    match frame {
        Ok(Some(Frame::Line(line))) => match serde_json::from_slice::<Value>(&line) {
            Ok(message) => Some(mux.from_core(message)),
            Err(err) => {
                tracing::warn!("unreadable message from the gateway core: {err}");
                Some(Vec::new())
            }
        },
        Ok(Some(Frame::Oversized { bytes })) => {
            tracing::warn!(
                "dropped a {bytes}-byte message from the gateway core (over the line limit)"
            );
            Some(Vec::new())
        }
        Ok(None) | Err(_) => None,
    }
}

fn apply(
    mux: &mut Mux,
    sessions: &mut HashMap<SessionKey, Box<dyn Deliver>>,
    input: Input,
) -> Vec<Out> {
    match input {
        Input::Open(info, deliver) => {
            let identity = info.identity.as_ref().map(|i| i.name.clone());
            mux.open(info.key, identity, info.stateless);
            if info.client == STDIO_CLIENT {
                mux.keep_ids(info.key);
            }
            sessions.insert(info.key, deliver);
            Vec::new()
        }
        Input::Message(key, message) => mux.from_client(key, message),
        Input::Close(key) => {
            sessions.remove(&key);
            mux.close(key)
        }
    }
}

fn route(
    outs: Vec<Out>,
    sessions: &mut HashMap<SessionKey, Box<dyn Deliver>>,
    bytes: &mut Vec<u8>,
) {
    for out in outs {
        match out {
            Out::ToCore(message) => {
                if serde_json::to_writer(&mut *bytes, &message).is_ok() {
                    bytes.push(b'\n');
                }
            }
            Out::ToSession {
                key,
                message,
                related,
            } => {
                if let Some(session) = sessions.get_mut(&key) {
                    session.deliver(&message, related.as_ref());
                }
            }
        }
    }
}

/// The `client` of the stdio host's session (HTTP sessions are counted by identity or address,
/// which never take this form).
const STDIO_CLIENT: &str = "stdio host";

/// A stdio host's answers: queued for the task that writes stdout.
#[derive(Debug)]
pub struct StdioOut(pub mpsc::UnboundedSender<Vec<u8>>);

impl Deliver for StdioOut {
    fn deliver(&mut self, message: &Value, _related: Option<&Value>) {
        if let Ok(mut line) = serde_json::to_vec(message) {
            line.push(b'\n');
            let _ = self.0.send(line);
        }
    }
}

impl MuxBackend {
    /// Opens the stdio host as session `key` (no identity: it is the local user).
    pub fn open_stdio(&self, key: SessionKey, out: StdioOut) {
        let info = SessionInfo {
            key,
            identity: None,
            client: STDIO_CLIENT.into(),
            stateless: false,
        };
        let _ = self.inputs.send(Input::Open(info, Box::new(out)));
    }
}

/// Reads a stdio host's frames and feeds them to the mux as session `key`; its end ends only
/// that session (the listener keeps serving).
pub async fn stdio_session<R>(key: SessionKey, input: R, max_line_bytes: usize, backend: MuxBackend)
where
    R: AsyncBufRead + Unpin,
{
    let mut reader = LineReader::new(input, max_line_bytes);
    while let Ok(Some(frame)) = reader.next_frame().await {
        if let Frame::Line(line) = frame
            && let Ok(message) = serde_json::from_slice::<Value>(&line)
        {
            backend.message(key, message);
        }
    }
    backend.close(key);
}
