//! `airlock serve --listen`: the gateway's session loop with the HTTP face as its host (and,
//! with `--stdio`, the stdio host beside it). See `docs/http.md`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::CliError;
use super::session::host_stdio;
use crate::http::ListenAddr;
use crate::http::face::{self, MuxBackend, StdioOut};
use crate::http::hub::Hub;
use crate::http::server::{Bound, Service, serve};
use crate::http::settings::HttpSettings;
use crate::session::Session;
use crate::session::shell::{self, Ended, ShellError};
use crate::session::stderr_queue::say;

/// The in-memory pipe between the mux and the core holds this much before the writer waits.
const PIPE_BYTES: usize = 4 * 1024 * 1024;
/// Refused authentications waiting for the audit log; more are dropped (stderr has each).
const REFUSALS_QUEUE: usize = 1024;
/// The stdio host's session number (HTTP sessions count from 1).
const STDIO_SESSION: u64 = 0;

/// Binds first (so a taken port is an error before any server starts), then runs the session
/// loop, the mux and the listener until the loop ends (SIGTERM, SIGINT).
pub fn run(
    mut session: Session,
    settings: HttpSettings,
    separator: String,
    with_stdio: bool,
) -> Result<Ended, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| {
            CliError::Failure(anyhow::anyhow!("cannot start the async runtime: {err}"))
        })?;
    let max_line_bytes = session.max_line_bytes;
    let ended = runtime.block_on(async move {
        let mut settings = settings;
        let bound = Bound::bind(&settings.listen).await.map_err(|err| {
            CliError::Refused(format!("cannot listen on {}: {err}", settings.listen))
        })?;
        if let Some(addr) = bound.local_addr() {
            // `:0` asked the kernel for a port: the resource URL names the one it gave.
            settings.listen = ListenAddr::Tcp(addr);
        }
        let shown = match &settings.listen {
            ListenAddr::Tcp(addr) => format!("http://{addr}{}", settings.path),
            ListenAddr::Unix(_) => settings.listen.to_string(),
        };
        say(format_args!(
            "airlock: serving MCP over Streamable HTTP at {shown}"
        ));
        let all_interfaces =
            matches!(&settings.listen, ListenAddr::Tcp(addr) if addr.ip().is_unspecified());
        if all_interfaces && settings.public_url.is_none() {
            // 0.0.0.0 is no address a client can use, and the resource URL (the audience a
            // JWT must name, the metadata's `resource`) would carry it.
            say(format_args!(
                "airlock: listening on every interface; clients reach this machine by its own name or address: set [http] public_url to the URL they use (it is the resource tokens are for)"
            ));
        }
        if settings.public_url.is_some() {
            say(format_args!(
                "airlock: clients know this gateway as {}",
                settings.resource()
            ));
        }
        let (backend, inputs) = MuxBackend::new();
        let hub = Arc::new(Hub::new(Arc::new(backend.clone()), settings.limits.clone()));
        let status_hub = hub.clone();
        let status_url = shown.clone();
        session.status_extra = Some(Arc::new(
            move || json!({"url": status_url, "sessions": status_hub.count()}),
        ));
        let (core_in, mux_out) = tokio::io::duplex(PIPE_BYTES);
        let (mux_in, core_out) = tokio::io::duplex(PIPE_BYTES);
        let mux = tokio::spawn(async move {
            face::run(&separator, inputs, mux_out, mux_in, max_line_bytes).await;
        });
        let (refusals, refused) = mpsc::channel(REFUSALS_QUEUE);
        session.outside_audit = Some(refused);
        let service = Arc::new(Service::new(settings, hub, Some(refusals)));
        let (stop, stopped) = watch::channel(false);
        let listener = tokio::spawn(serve(bound, service, stopped));
        if with_stdio {
            stdio_face(&backend, max_line_bytes);
        }
        let ended: Result<Ended, ShellError> = shell::run(session, core_in, core_out).await;
        let _ = stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(1), listener).await;
        mux.abort();
        ended.map_err(|err| CliError::Failure(err.into()))
    });
    drop(runtime);
    ended
}

/// The stdio host as one more session of the mux: its messages in, its answers to stdout.
fn stdio_face(backend: &MuxBackend, max_line_bytes: usize) {
    let (host_in, mut host_out) = host_stdio();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    backend.open_stdio(STDIO_SESSION, StdioOut(tx));
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if host_out.write_all(&line).await.is_err() {
                break;
            }
            let _ = host_out.flush().await;
        }
    });
    let backend = backend.clone();
    tokio::spawn(face::stdio_session(
        STDIO_SESSION,
        BufReader::new(host_in),
        max_line_bytes,
        backend,
    ));
}
