//! The listener: accepts connections (TCP or a unix socket), speaks HTTP/1.1 through hyper, and
//! runs every request through the same gate in order: `Host`/`Origin`, authentication, the rate
//! limit, then the MCP endpoint's POST, GET or DELETE. The resource metadata document is public.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, header};
use http_body_util::Limited;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Semaphore, mpsc, watch};

use super::auth::{AuthFailure, Authenticator, Identity, challenge, metadata};
use super::body::{self, HttpBody};
use super::hub::Hub;
use super::limits::RateLimiter;
use super::listen::ListenAddr;
use super::origin::HostGuard;
use super::settings::HttpSettings;
use super::{post, streams};
use crate::audit::{Event, EventKind};
use crate::net::route::NetAudit;

/// Connections served at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 4096;
/// Connections served at once from one address (before any authentication: one client, or
/// anyone who can reach the listener, must not take every connection). Past it a connection is
/// closed as soon as it is accepted. Loopback and a unix socket are one address each, so there
/// it bounds a local client only against the others of its host.
const MAX_CONNECTIONS_PER_ADDRESS: usize = 512;
/// A client must send its request headers within this time (slow-loris protection).
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// What every request handler shares.
pub struct Service {
    pub settings: HttpSettings,
    pub hub: Arc<Hub>,
    auth: Authenticator,
    guard: HostGuard,
    rates: Mutex<RateLimiter>,
    metadata_url: String,
    metadata_paths: Vec<String>,
    metadata_doc: Bytes,
    challenge_scopes: Vec<String>,
    /// Where refused authentications are audited (the session's audit log), if anywhere.
    refusals: Option<mpsc::Sender<NetAudit>>,
    /// How many refusals were recorded one by one in the current minute, and how many not.
    refusal_window: Mutex<RefusalWindow>,
}

/// Refused authentications recorded one by one each minute, across all clients: past that they
/// are counted, and the count is recorded with the next refusal after the minute ends. Many
/// source addresses (an IPv6 /64, `rate_limit = 0`) must not turn into an unbounded log.
const REFUSALS_RECORDED_PER_MINUTE: u32 = 60;
const REFUSAL_WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct RefusalWindow {
    started: Instant,
    recorded: u32,
    suppressed: u64,
}

impl RefusalWindow {
    /// For one more refusal at `now`: whether to record it, and the count of the last window's
    /// unrecorded ones to record first (once, when a new window begins). Pure.
    fn admit(&mut self, now: Instant) -> (bool, Option<u64>) {
        let mut carried = None;
        if now.saturating_duration_since(self.started) >= REFUSAL_WINDOW {
            carried = (self.suppressed > 0).then_some(self.suppressed);
            *self = RefusalWindow {
                started: now,
                recorded: 0,
                suppressed: 0,
            };
        }
        if self.recorded < REFUSALS_RECORDED_PER_MINUTE {
            self.recorded += 1;
            (true, carried)
        } else {
            self.suppressed += 1;
            (false, carried)
        }
    }
}

/// Who is on the other end of a connection, before authentication.
#[derive(Debug, Clone)]
pub enum Peer {
    Tcp(SocketAddr),
    Unix,
}

impl Peer {
    fn client_key(&self) -> String {
        match self {
            Peer::Tcp(addr) => format!("ip:{}", addr.ip()),
            Peer::Unix => "unix".to_string(),
        }
    }
}

/// The request's headers as the handlers need them.
pub struct Caller {
    pub identity: Option<Identity>,
    /// Sessions and rates are counted by this.
    pub client: String,
}

impl Service {
    pub fn new(
        settings: HttpSettings,
        hub: Arc<Hub>,
        refusals: Option<mpsc::Sender<NetAudit>>,
    ) -> Service {
        let resource = settings.resource();
        let scopes = settings
            .auth
            .jwt
            .as_ref()
            .map(|jwt| jwt.required_scopes.clone())
            .unwrap_or_default();
        let issuer = settings.auth.jwt.as_ref().map(|jwt| jwt.issuer.as_str());
        let doc = metadata::document(&resource, issuer, &scopes);
        Service {
            auth: Authenticator::new(&settings.auth),
            guard: settings.guard(),
            rates: Mutex::new(RateLimiter::new(&settings.limits)),
            metadata_url: metadata::url_for(&resource).unwrap_or_default(),
            metadata_paths: metadata::paths_for(&resource),
            metadata_doc: Bytes::from(doc.to_string()),
            challenge_scopes: scopes,
            hub,
            settings,
            refusals,
            refusal_window: Mutex::new(RefusalWindow {
                started: Instant::now(),
                recorded: 0,
                suppressed: 0,
            }),
        }
    }

    /// One HTTP request, start to finish.
    pub async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        peer: Peer,
    ) -> Response<HttpBody> {
        let path = request.uri().path().to_string();
        let origin = header_str(request.headers(), header::ORIGIN.as_str()).map(String::from);
        if request.method() == Method::GET && self.metadata_paths.contains(&path) {
            let mut response = body::json(200, self.metadata_doc.clone(), None);
            response.headers_mut().insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
            return answer_unread(request, response).await;
        }
        if path != self.settings.path {
            let response = body::error(
                404,
                serde_json::Value::Null,
                -32000,
                "not found: the MCP endpoint is elsewhere",
            );
            return answer_unread(request, response).await;
        }
        let repeated = [header::HOST, header::ORIGIN, header::CONTENT_TYPE]
            .into_iter()
            .find(|name| request.headers().get_all(name).iter().count() > 1);
        if let Some(name) = repeated {
            // Which one a proxy in front (or the body's reader) took is anybody's guess
            // (RFC 9112, 3.2: a 400).
            let response = body::error(
                400,
                serde_json::Value::Null,
                -32000,
                &format!("bad request: more than one {name} header"),
            );
            return answer_unread(request, response).await;
        }
        // A request in absolute form (`POST http://name/mcp`) names its host in the target,
        // which takes the place of the Host header (RFC 9112, 3.2.2), and HTTP/2 has it there too:
        // that name is the one to judge.
        let authority = request.uri().authority().map(|a| a.as_str().to_string());
        let host = authority
            .as_deref()
            .or_else(|| header_str(request.headers(), header::HOST.as_str()));
        if let Err(refusal) = self.guard.check(host, origin.as_deref()) {
            tracing::warn!("refused a request: {refusal}");
            let response = body::error(403, serde_json::Value::Null, -32000, &refusal.to_string());
            return answer_unread(request, response).await;
        }
        let mut response = if request.method() == Method::OPTIONS {
            answer_unread(request, preflight()).await
        } else {
            self.authorized(request, peer).await
        };
        if let Some(origin) = origin.and_then(|o| HeaderValue::from_str(&o).ok()) {
            allow_origin(response.headers_mut(), origin);
        }
        response
    }

    async fn authorized(&self, request: Request<Incoming>, peer: Peer) -> Response<HttpBody> {
        let authorization = header_str(request.headers(), header::AUTHORIZATION.as_str());
        let identity = match self.auth.authenticate(authorization).await {
            Ok(identity) => identity,
            Err(failure) => {
                // Failed attempts count against the address, so guessing is rate-limited too.
                let client = peer.client_key();
                let response = match self.admit(&client) {
                    Err(wait) => too_many(wait),
                    Ok(()) => {
                        self.record_refusal(&client, &failure);
                        self.unauthorized(&failure)
                    }
                };
                return answer_unread(request, response).await;
            }
        };
        let client = identity
            .as_ref()
            .map_or_else(|| peer.client_key(), |id| format!("id:{}", id.name));
        if let Err(wait) = self.admit(&client) {
            return answer_unread(request, too_many(wait)).await;
        }
        let caller = Caller { identity, client };
        match *request.method() {
            Method::POST => post::handle(self, request, caller).await,
            Method::GET => streams::get(self, &request, &caller),
            Method::DELETE => streams::delete(self, &request, &caller),
            _ => {
                let mut response =
                    body::error(405, serde_json::Value::Null, -32000, "method not allowed");
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                answer_unread(request, response).await
            }
        }
    }

    fn admit(&self, client: &str) -> Result<(), Duration> {
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        rates.admit(client, Instant::now())
    }

    /// A refused authentication, on stderr and in the audit log: a guessed or stolen token
    /// must leave a trace. Only attempts within the rate limit get here, and past
    /// [`REFUSALS_RECORDED_PER_MINUTE`] they are counted instead (see [`RefusalWindow`]). The
    /// failure's text is airlock's own: it never quotes the credential.
    fn record_refusal(&self, client: &str, failure: &AuthFailure) {
        let (record, carried) = self
            .refusal_window
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(Instant::now());
        if let Some(count) = carried {
            tracing::warn!(
                "{count} more refused requests in the last minute were not logged one by one"
            );
            let mut event = Event::new(EventKind::Auth, "gateway");
            event.reason = Some(format!(
                "{count} more refused authentications in the previous minute (not recorded one by one)"
            ));
            event.detail = Some(serde_json::json!({"suppressed": count}));
            self.audit_refusal(event);
        }
        if !record {
            return;
        }
        tracing::warn!("refused a request from {client}: {failure}");
        let mut event = Event::new(EventKind::Auth, "gateway");
        event.reason = Some(failure.to_string());
        event.detail = Some(serde_json::json!({"client": client, "status": failure.status()}));
        self.audit_refusal(event);
    }

    fn audit_refusal(&self, event: Event) {
        if let Some(refusals) = &self.refusals {
            // Never waits: a full queue drops the record, and stderr still has the line.
            let _ = refusals.try_send(NetAudit {
                event,
                written: None,
            });
        }
    }

    fn unauthorized(&self, failure: &AuthFailure) -> Response<HttpBody> {
        let mut response = body::error(
            failure.status(),
            serde_json::Value::Null,
            -32001,
            &failure.to_string(),
        );
        let value = challenge(failure, &self.metadata_url, &self.challenge_scopes);
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// A request body this small that has arrived is read and dropped before an answer that does not
/// need it; anything larger closes the connection instead of costing more than the answer.
const DRAIN_LIMIT: u64 = 64 * 1024;
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// `response`, to a request whose body the answer does not need (a refusal: 429, 401, 403...).
/// A body left unread on a keep-alive connection makes hyper close the connection after the
/// answer, without a word to the client, which then sends its next request into a closed socket
/// and gets no answer at all. So a small body is read (and dropped) and the connection stays
/// usable; a large or slow one gets `Connection: close` on the answer, so the client knows.
pub(super) async fn answer_unread(
    request: Request<Incoming>,
    response: Response<HttpBody>,
) -> Response<HttpBody> {
    use http_body_util::BodyExt;
    use hyper::body::Body;
    let body = request.into_body();
    if body.is_end_stream() {
        return response;
    }
    let small = body.size_hint().upper().is_some_and(|n| n <= DRAIN_LIMIT);
    let drained = small
        && matches!(
            tokio::time::timeout(
                DRAIN_WAIT,
                Limited::new(body, DRAIN_LIMIT as usize).collect()
            )
            .await,
            Ok(Ok(_))
        );
    if drained {
        response
    } else {
        close_after(response)
    }
}

/// `response` with `Connection: close`: the request's body was not read to its end, so the
/// connection cannot carry another request (hyper closes it; the header says so to the client).
pub(super) fn close_after(mut response: Response<HttpBody>) -> Response<HttpBody> {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn too_many(wait: Duration) -> Response<HttpBody> {
    let seconds = wait.as_secs() + 1;
    let mut response = body::error(
        429,
        serde_json::Value::Null,
        -32000,
        &format!("too many requests ([http] rate_limit): retry in {seconds} s"),
    );
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn preflight() -> Response<HttpBody> {
    let mut response = body::empty(204);
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version, mcp-method, mcp-name",
        ),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

/// CORS for an origin that passed the guard.
fn allow_origin(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("mcp-session-id, www-authenticate"),
    );
}

pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// A bound listening socket.
pub enum Bound {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Bound {
    /// Binds `addr`. At a unix path, only a socket no gateway answers on (left by one that is
    /// gone) is replaced: a socket that answers is in use, and anything else (a file, a directory,
    /// a symbolic link) is never removed. The socket is owner-only (0600).
    pub async fn bind(addr: &ListenAddr) -> io::Result<Bound> {
        match addr {
            ListenAddr::Tcp(addr) => Ok(Bound::Tcp(TcpListener::bind(addr).await?)),
            ListenAddr::Unix(path) => {
                match std::fs::symlink_metadata(path) {
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                    Ok(meta) => {
                        if let Some(what) = not_a_socket(meta.file_type()) {
                            return Err(io::Error::new(
                                io::ErrorKind::AlreadyExists,
                                format!(
                                    "{} is {what}, not a socket; airlock replaces only a socket no gateway answers on. Fix: listen on another path, or move that file away",
                                    path.display()
                                ),
                            ));
                        }
                        if tokio::net::UnixStream::connect(path).await.is_ok() {
                            return Err(io::Error::new(
                                io::ErrorKind::AddrInUse,
                                format!("{} is in use by a running gateway", path.display()),
                            ));
                        }
                        std::fs::remove_file(path)?;
                    }
                }
                let listener = UnixListener::bind(path)?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
                Ok(Bound::Unix(listener, path.clone()))
            }
        }
    }

    /// The address bound (the port the kernel chose for `:0`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Bound::Tcp(listener) => listener.local_addr().ok(),
            Bound::Unix(..) => None,
        }
    }
}

/// What a file that is not a socket is, in words; `None` for a socket.
fn not_a_socket(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_socket() {
        None
    } else if file_type.is_file() {
        Some("a regular file")
    } else if file_type.is_dir() {
        Some("a directory")
    } else if file_type.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("a device or a FIFO")
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if let Bound::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Serves until `stop` turns true. Idle sessions are reaped on the way.
pub async fn serve(bound: Bound, service: Arc<Service>, mut stop: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let per_address = PerAddress::default();
    let reap_every = (service.hub.limits().session_idle / 4)
        .clamp(Duration::from_secs(1), Duration::from_secs(30));
    let mut reaper = tokio::time::interval(reap_every);
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => break,
            _ = reaper.tick() => {
                service.hub.reap(Instant::now());
                continue;
            }
            accepted = accept(&bound) => accepted,
        };
        let (io, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(from_address) = per_address.admit(&peer) else {
            tracing::debug!(
                "a connection refused: {MAX_CONNECTIONS_PER_ADDRESS} already open from its address"
            );
            continue;
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let service = service.clone();
        tokio::spawn(async move {
            let handler = service_fn(move |request| {
                let (service, peer) = (service.clone(), peer.clone());
                async move { Ok::<_, Infallible>(service.handle(request, peer).await) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true)
                .serve_connection(io, handler)
                .await;
            if let Err(err) = served {
                tracing::debug!("connection ended: {err}");
            }
            drop((permit, from_address));
        });
    }
    service.hub.end_all();
}

/// Connections open per peer address.
#[derive(Clone, Default)]
struct PerAddress(
    Arc<std::sync::Mutex<std::collections::HashMap<Option<std::net::IpAddr>, usize>>>,
);

/// One open connection of an address, given back when dropped.
struct AddressSlot {
    table: PerAddress,
    address: Option<std::net::IpAddr>,
}

impl PerAddress {
    fn admit(&self, peer: &Peer) -> Option<AddressSlot> {
        let address = match peer {
            Peer::Tcp(addr) => Some(addr.ip()),
            Peer::Unix => None,
        };
        let mut open = self.0.lock().ok()?;
        let count = open.entry(address).or_insert(0);
        if *count >= MAX_CONNECTIONS_PER_ADDRESS {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            table: self.clone(),
            address,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.table.0.lock()
            && let Some(count) = open.get_mut(&self.address)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

type Io = TokioIo<Box<dyn Stream>>;

/// A connection's byte stream, TCP or unix.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Stream for T {}

async fn accept(bound: &Bound) -> io::Result<(Io, Peer)> {
    match bound {
        Bound::Tcp(listener) => {
            let (stream, addr) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok((TokioIo::new(Box::new(stream)), Peer::Tcp(addr)))
        }
        Bound::Unix(listener, _) => {
            let (stream, _) = listener.accept().await?;
            Ok((TokioIo::new(Box::new(stream)), Peer::Unix))
        }
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn refusals_past_the_minutes_allowance_are_counted_and_the_count_recorded_once() {
        let start = Instant::now();
        let mut window = RefusalWindow {
            started: start,
            recorded: 0,
            suppressed: 0,
        };
        for _ in 0..REFUSALS_RECORDED_PER_MINUTE {
            assert_eq!(window.admit(start), (true, None));
        }
        for _ in 0..1000 {
            assert_eq!(window.admit(start + Duration::from_secs(30)), (false, None));
        }
        let next = start + REFUSAL_WINDOW;
        assert_eq!(window.admit(next), (true, Some(1000)));
        assert_eq!(
            window.admit(next),
            (true, None),
            "the count is carried once"
        );
    }
}

#[cfg(test)]
mod per_address_tests {
    use super::*;

    #[test]
    fn one_address_holds_at_most_its_share_of_connections_and_gives_them_back() {
        let table = PerAddress::default();
        let one = Peer::Tcp("192.0.2.1:1000".parse().unwrap());
        let other = Peer::Tcp("192.0.2.2:1000".parse().unwrap());
        let held: Vec<AddressSlot> = (0..MAX_CONNECTIONS_PER_ADDRESS)
            .map(|_| table.admit(&one).expect("within the share"))
            .collect();
        assert!(table.admit(&one).is_none());
        assert!(
            table.admit(&other).is_some(),
            "another address is not held up"
        );
        drop(held);
        assert!(table.admit(&one).is_some());
        assert!(
            table.0.lock().unwrap().len() <= 1,
            "emptied entries are forgotten"
        );
    }
}
