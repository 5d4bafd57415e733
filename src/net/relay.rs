//! The relay: every TCP connection the server opens inside its network namespace lands on one of
//! airlock's listening sockets there (every address is local in that namespace; the relay listens
//! on each port the allow list names). The relay reads the address the server dialled
//! (`getsockname`), decides ([`decide`], pure), and connects from outside the sandbox:
//!
//! - a stand-in address → the name it stands for, if an entry allows that name on that port; the
//!   name is resolved with the host's resolver and only public addresses are used, unless an entry
//!   lists the address itself ([`usable_addresses`], pure);
//! - any other address → only if an entry lists it (address or range) on that port.
//!
//! Refused connections are reset. Every connection is audited: `net_connect` before the first
//! byte is relayed (the relay waits until the event is written), `net_close` at the end.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use super::addr::{canonical, non_public_reason};
use super::allow::{AllowEntry, AllowList};
use super::event::{CloseEvent, ConnectEvent, Verdict};
use super::resolver::RefusalThrottle;
use super::standin::StandIns;
use crate::audit::Event;

/// How long the relay tries to reach the remote end.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Copy buffer per direction (the relay's memory per connection is twice this).
const COPY_BUFFER: usize = 32 * 1024;

/// What the relay does with one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Connect to this name (resolved outside the sandbox).
    Name {
        name: String,
        entry: AllowEntry,
    },
    /// Connect to this address, listed as such.
    Address {
        ip: IpAddr,
        entry: AllowEntry,
    },
    Refuse {
        host: String,
        reason: String,
    },
}

/// Decides a connection the server made to `dialled` (the accepted socket's local address).
pub fn decide(
    dialled: SocketAddr,
    allow: &AllowList,
    table: &mut StandIns,
    now: Instant,
) -> Decision {
    let ip = canonical(dialled.ip());
    let port = dialled.port();
    if StandIns::is_stand_in(ip) {
        let Some(name) = table.name_of(ip, now) else {
            return Decision::Refuse {
                host: ip.to_string(),
                reason: "a stand-in address the sandbox's resolver did not hand out".into(),
            };
        };
        return match allow.name_entry(&name, port) {
            Some(entry) => Decision::Name {
                name,
                entry: entry.clone(),
            },
            None => Decision::Refuse {
                reason: format!("port {port} is not allowed for {name}"),
                host: name,
            },
        };
    }
    match allow.address_entry(ip, port) {
        Some(entry) => Decision::Address {
            ip,
            entry: entry.clone(),
        },
        None => Decision::Refuse {
            host: ip.to_string(),
            reason: format!(
                "{ip} port {port} is not on the allow list (addresses are reached only when listed)"
            ),
        },
    }
}

/// Why a name leads to no address the relay may connect to. The text is the refusal's reason in
/// the audit log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoUsableAddress {
    #[error("{name} has no address")]
    None { name: String },
    /// Every address is non-public and unlisted: each with why (`10.0.0.1 (private)`).
    #[error(
        "{name} resolves only to addresses a name may not lead to: {}; list the address itself to allow it",
        refused.join(", ")
    )]
    OnlyNonPublic { name: String, refused: Vec<String> },
}

/// The addresses of `name` the relay may connect to: public ones, and non-public ones (this
/// host's own addresses among them, `own`) only when an entry lists that address on `port`.
/// Refuses (with the reason) when none is left.
pub fn usable_addresses(
    name: &str,
    port: u16,
    resolved: &[IpAddr],
    own: &[IpAddr],
    allow: &AllowList,
) -> Result<Vec<IpAddr>, NoUsableAddress> {
    let mut usable = Vec::new();
    let mut refused = Vec::new();
    for &ip in resolved {
        let ip = canonical(ip);
        let why = non_public_reason(ip).or_else(|| {
            own.iter()
                .any(|mine| canonical(*mine) == ip)
                .then_some("this host's own")
        });
        match why {
            Some(_) if allow.address_entry(ip, port).is_some() => usable.push(ip),
            Some(why) => refused.push(format!("{ip} ({why})")),
            None => usable.push(ip),
        }
    }
    let name = name.to_string();
    match (usable.is_empty(), refused.is_empty()) {
        (false, _) => Ok(usable),
        (true, true) => Err(NoUsableAddress::None { name }),
        (true, false) => Err(NoUsableAddress::OnlyNonPublic { name, refused }),
    }
}

/// Resolves names outside the sandbox (the real one asks the host's resolver).
pub trait Resolve: Send + Sync + 'static {
    fn resolve(
        &self,
        name: &str,
        port: u16,
    ) -> impl Future<Output = io::Result<Vec<IpAddr>>> + Send;
}

/// Opens the connection to the remote end.
pub trait Connect: Send + Sync + 'static {
    type Stream: ClientStream + 'static;
    fn connect(&self, to: SocketAddr) -> impl Future<Output = io::Result<Self::Stream>> + Send;
}

/// The host's resolver (getaddrinfo, on tokio's blocking pool). The relay asks it through
/// [`super::lookup_cache::Cached`], which shares concurrent lookups of one name.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostResolver;

impl Resolve for HostResolver {
    async fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let found = tokio::net::lookup_host((name, port)).await?;
        let mut ips: Vec<IpAddr> = Vec::new();
        for addr in found {
            if !ips.contains(&addr.ip()) {
                ips.push(addr.ip());
            }
        }
        Ok(ips)
    }
}

/// Plain TCP from airlock's own network namespace.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpConnector;

impl Connect for TcpConnector {
    type Stream = TcpStream;
    async fn connect(&self, to: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::connect(to).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

/// An audit event on its way to the owner of the audit log; `written` is answered once it is.
#[derive(Debug)]
pub struct NetAudit {
    pub event: Event,
    pub written: Option<oneshot::Sender<()>>,
}

/// A sender whose events are written to stderr as `airlock audit` shows records (and
/// acknowledged): for commands that keep no audit log (`airlock test`), whose output is read by
/// a person. Must be called inside a tokio runtime.
pub fn audit_to_stderr() -> mpsc::Sender<NetAudit> {
    let (tx, mut rx) = mpsc::channel::<NetAudit>(64);
    tokio::spawn(async move {
        // Stamped and chained as any record, then shown as one line of text.
        let mut log = crate::audit::AuditLog::memory();
        let mut shown = 0;
        while let Some(NetAudit { event, written }) = rx.recv().await {
            if log.record(event).is_ok() {
                let lines = log.memory_contents();
                if let Some(line) = lines[shown..].split(|b| *b == b'\n').next()
                    && let Ok(record) = serde_json::from_slice::<serde_json::Value>(line)
                {
                    eprintln!("network: {}", crate::audit::query::format_record(&record));
                }
                shown = lines.len();
            }
            if let Some(written) = written {
                let _ = written.send(());
            }
        }
    });
    tx
}

/// The resolver's and the relay's shared state for one running server.
pub struct Egress<R: Resolve = HostResolver, C: Connect = TcpConnector> {
    pub server: String,
    pub allow: AllowList,
    pub(super) table: Mutex<StandIns>,
    pub(super) throttle: Mutex<RefusalThrottle>,
    next_conn: AtomicU64,
    audit: mpsc::Sender<NetAudit>,
    resolver: R,
    connector: C,
}

impl<R: Resolve, C: Connect> Egress<R, C> {
    pub fn new(
        server: &str,
        allow: AllowList,
        audit: mpsc::Sender<NetAudit>,
        resolver: R,
        connector: C,
    ) -> Egress<R, C> {
        Egress {
            server: server.to_string(),
            allow,
            table: Mutex::new(StandIns::default()),
            throttle: Mutex::new(RefusalThrottle::default()),
            next_conn: AtomicU64::new(1),
            audit,
            resolver,
            connector,
        }
    }

    /// This host's addresses, read at each connection (interfaces come and go). When they
    /// cannot be read the connection is refused: a name could lead back to the host.
    fn own_addresses(&self) -> Result<Vec<IpAddr>, String> {
        super::sys::own_addresses().map_err(|err| {
            format!("this host's own addresses cannot be read ({err}), so no name is relayed")
        })
    }

    pub(super) fn conn_number(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Hands an event to the audit log's owner; with `wait`, returns once it is written (or the
    /// owner is gone). Blocks new connections while the log does not keep up (fail closed).
    pub(super) async fn record(&self, event: Event, wait: bool) {
        let (written, done) = if wait {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        if self.audit.send(NetAudit { event, written }).await.is_err() {
            return;
        }
        if let Some(done) = done {
            let _ = done.await;
        }
    }

    fn decide_now(&self, dialled: SocketAddr) -> Decision {
        match self.table.lock() {
            Ok(mut table) => decide(dialled, &self.allow, &mut table, Instant::now()),
            Err(_) => Decision::Refuse {
                host: dialled.ip().to_string(),
                reason: "internal error: the stand-in table is unusable".into(),
            },
        }
    }

    /// Accepts connections on one listening socket until the listener fails.
    pub async fn serve_listener(self: Arc<Self>, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((client, _)) => {
                    let egress = self.clone();
                    tokio::spawn(async move { egress.handle(client).await });
                }
                Err(err) if is_transient(&err) => {
                    tracing::warn!(server = %self.server, "relay accept: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(err) => {
                    tracing::error!(server = %self.server, "relay listener failed: {err}");
                    return;
                }
            }
        }
    }

    /// One connection from the sandbox, from decision to the last byte.
    pub async fn handle(&self, client: TcpStream) {
        if let Ok(dialled) = client.local_addr() {
            self.handle_dialled(client, dialled).await;
        }
    }

    /// [`Egress::handle`] for a connection made to `dialled`.
    pub async fn handle_dialled<S: ClientStream>(&self, client: S, dialled: SocketAddr) {
        let started = Instant::now();
        let conn = self.conn_number();
        let port = dialled.port();
        let connect_event = |host: &str, verdict| {
            ConnectEvent {
                conn,
                host: host.to_string(),
                port: Some(port),
                verdict,
            }
            .event(&self.server)
        };
        let (host, targets, entry) = match self.decide_now(dialled) {
            Decision::Refuse { host, reason } => {
                self.record(connect_event(&host, Verdict::Refused { reason }), true)
                    .await;
                client.reset();
                return;
            }
            Decision::Address { ip, entry } => (ip.to_string(), vec![ip], entry),
            Decision::Name { name, entry } => {
                let resolved = self.resolver.resolve(&name, port).await;
                let resolved = match resolved {
                    Ok(resolved) => self.own_addresses().and_then(|own| {
                        usable_addresses(&name, port, &resolved, &own, &self.allow)
                            .map_err(|err| err.to_string())
                    }),
                    Err(err) => Err(format!(
                        "{name} does not resolve outside the sandbox: {err}"
                    )),
                };
                match resolved {
                    Ok(ips) => (name, ips, entry),
                    Err(reason) => {
                        self.record(connect_event(&name, Verdict::Refused { reason }), true)
                            .await;
                        client.reset();
                        return;
                    }
                }
            }
        };
        let verdict = |upstream: Option<String>| Verdict::Allowed {
            rule: entry.rule.to_string(),
            origin: entry.origin.clone(),
            upstream,
        };
        let upstream = self.connect_first(&targets, port).await;
        let close = |bytes_up, bytes_down, error| {
            CloseEvent {
                conn,
                host: host.clone(),
                port,
                bytes_up,
                bytes_down,
                duration: started.elapsed(),
                error,
            }
            .event(&self.server)
        };
        let (upstream, address) = match upstream {
            Ok(found) => found,
            Err(err) => {
                self.record(connect_event(&host, verdict(None)), false)
                    .await;
                self.record(close(0, 0, Some(err.to_string())), false).await;
                client.reset();
                return;
            }
        };
        self.record(
            connect_event(&host, verdict(Some(address.to_string()))),
            true,
        )
        .await;
        // Two sockets: spliced, no byte through user space. Anything else (or no pipe): copied.
        let spliced = match (client.tcp(), upstream.tcp()) {
            (Some(from), Some(to)) => super::splice::relay_spliced(from, to).await,
            _ => None,
        };
        let (up, down, error) = match spliced {
            Some((up, down, error)) => (up, down, error.and_then(|err| failure(err, "relaying"))),
            None => relay_counted(client, upstream).await,
        };
        self.record(close(up, down, error), false).await;
    }

    async fn connect_first(
        &self,
        targets: &[IpAddr],
        port: u16,
    ) -> Result<(C::Stream, SocketAddr), ConnectFailed> {
        let mut errors = Vec::new();
        for &ip in targets {
            let to = SocketAddr::new(ip, port);
            match tokio::time::timeout(CONNECT_TIMEOUT, self.connector.connect(to)).await {
                Ok(Ok(stream)) => return Ok((stream, to)),
                Ok(Err(err)) => errors.push(format!("{to}: {err}")),
                Err(_) => errors.push(format!("{to}: no answer within {CONNECT_TIMEOUT:?}")),
            }
        }
        Err(ConnectFailed(errors))
    }
}

/// No address of a name accepted the connection: each address with why.
#[derive(Debug, thiserror::Error)]
#[error("connecting failed: {}", .0.join("; "))]
pub struct ConnectFailed(Vec<String>);

/// Copies both ways until both directions ended, passing each end-of-stream on as a half-close.
/// Returns the bytes each way (counted as they pass, so a reset still reports what went through)
/// and the first error.
pub async fn relay_counted<A, B>(client: A, upstream: B) -> (u64, u64, Option<String>)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (client_read, client_write) = tokio::io::split(client);
    let (upstream_read, upstream_write) = tokio::io::split(upstream);
    let ((up, up_error), (down, down_error)) = tokio::join!(
        copy_counted(client_read, upstream_write),
        copy_counted(upstream_read, client_write),
    );
    let error = up_error
        .and_then(|err| failure(err, "from the server"))
        .or(down_error.and_then(|err| failure(err, "to the server")));
    (up, down, error)
}

async fn copy_counted<R, W>(mut from: R, mut to: W) -> (u64, Option<io::Error>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; COPY_BUFFER];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) => {
                let _ = to.shutdown().await;
                return (total, Some(err));
            }
        };
        if let Err(err) = to.write_all(&buffer[..n]).await {
            return (total, Some(err));
        }
        total += n as u64;
    }
    let result = to.shutdown().await.err();
    (total, result)
}

/// A side that resets (a client that closes with unread data does) ended the connection; that is
/// not a failure of the relay.
fn failure(err: io::Error, side: &str) -> Option<String> {
    (!matches!(
        err.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    ))
    .then(|| format!("{side}: {err}"))
}

fn is_transient(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::ECONNABORTED)
    )
}

/// One side of a relayed connection.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send {
    /// Closes with a reset, so the server sees a refused connection at once.
    fn reset(self);

    /// The socket, when it is one (both sides sockets: the relay splices).
    fn tcp(&self) -> Option<&TcpStream> {
        None
    }
}

impl ClientStream for TcpStream {
    fn reset(self) {
        let _ = self.set_zero_linger();
        drop(self);
    }

    fn tcp(&self) -> Option<&TcpStream> {
        Some(self)
    }
}

impl ClientStream for tokio::io::DuplexStream {
    fn reset(self) {}
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
