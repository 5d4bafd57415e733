//! The connect hand-over: every `connect(2)` the server makes waits, by a seccomp user
//! notification, for airlock, which makes it on the server's behalf. An allowed connection to a
//! remote end is made from outside the sandbox and that socket is put in place of the server's
//! own (`SECCOMP_IOCTL_NOTIF_ADDFD`): the server then talks to the remote end directly, and no
//! byte passes through airlock. The design, and why each rule below holds, is in
//! `docs/network.md`, "The connect hand-over".
//!
//! The rules:
//! - airlock never lets the kernel run a server's `connect` ("continue"): between airlock's check
//!   and the kernel's own reading of the fd and the address, another thread could change either.
//!   airlock acts on the socket itself (fetched with `pidfd_getfd`) with the address bytes it read.
//! - A socket airlock handed over, or any socket outside the sandbox's network namespace, is never
//!   connected again, `AF_UNSPEC` included: a disconnected host socket could listen or
//!   Fast-Open-connect in the host's network (seccomp refuses `listen` and `MSG_FASTOPEN` as
//!   well).
//! - Only a socket whose connection is established (blocking socket) or under way (non-blocking)
//!   is handed over; a failed one is closed here.
//! - On the server's own socket airlock does only what cannot block (the server controls that
//!   socket's options and flags): a UDP association inside the namespace, a TCP disconnect. No TCP
//!   connect inside the namespace is made (nothing there but the resolver's UDP port), and every
//!   other kind of socket gets `EACCES` (airlock's credentials must never make a connect the
//!   server's could not).
//! - What one sandbox can make airlock hold is bounded: [`MAX_IN_FLIGHT`] notifications at a
//!   time, an abandoned connect is dropped within [`PENDING_CHECK`], the fd swap (which waits for
//!   the server's thread to run) is made on a blocking thread one at a time, and the sockets
//!   airlock is done with are closed on the sandbox's own closing thread, never lingering.
//!
//! [`classify`] is the decision, pure; the rest is its effectful shell.

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::{Semaphore, mpsc, watch};

use super::diag;
use super::event::{CloseEvent, ConnectEvent, Verdict};
use super::notify::{self, ConnectCall, Received};
use super::resolver::RefusalKind;
use super::route::{CONNECT_TIMEOUT, Egress, Refused, Resolve, Target};
use crate::fast_map::FastMap;
use socket::{Pending, again_on_handed_over, errno_of, facts, pending, register};

mod classify;
mod socket;

pub use classify::{Action, SocketFacts, SocketKind, classify, reachable};
pub use socket::netns_cookie;

/// One connection handed over, until the kernel reports its socket destroyed.
#[derive(Debug)]
struct Open {
    conn: u64,
    host: String,
    port: u16,
    started: Instant,
    /// Its `net_connect` was written: its end is a `net_close`. Otherwise (over the minute's
    /// budget, [`crate::net::budget`]) its end is counted.
    recorded: bool,
}

/// At most this many `connect`s of one sandbox are worked on at once; the others wait in the
/// kernel (their threads are blocked in `connect` anyway). Bounds the fds, lookups and tasks one
/// sandbox can make airlock hold.
pub const MAX_IN_FLIGHT: usize = 64;

/// While airlock waits for a blocking connect's remote end, it checks this often whether the
/// server still waits for it (a thread interrupted by a signal restarts its `connect`, which is
/// a new notification): an abandoned attempt is dropped.
pub const PENDING_CHECK: Duration = Duration::from_millis(100);

/// One sandbox's hand-over state: its namespace, the sockets it was handed (by cookie), the
/// bound on notifications in flight, and the thread that closes what airlock fetched.
#[derive(Debug)]
pub struct Handed {
    /// The netns cookie of the sandbox's network namespace.
    netns: u64,
    open: Mutex<FastMap<u64, Open>>,
    permits: Arc<Semaphore>,
    /// Held while a socket is put in the server's fd table (see [`Handed::replace_fd`]).
    swapping: tokio::sync::Mutex<()>,
    /// The server's sockets airlock fetched go here to be closed. airlock's copy may be the last
    /// (the server closed its fd meanwhile), and the last close of a TCP socket with `SO_LINGER`
    /// and unsent data waits up to the linger time the server chose: on this sandbox's own
    /// thread, never on the runtime's.
    closer: mpsc::Sender<Socket>,
}

impl Handed {
    /// The state for a sandbox whose network namespace has `netns` as its cookie; starts its
    /// closing thread, which ends when the state is dropped.
    pub fn new(netns: u64) -> std::io::Result<Handed> {
        let (closer, mut to_close) = mpsc::channel::<Socket>(MAX_IN_FLIGHT);
        std::thread::Builder::new()
            .name("airlock-net-close".into())
            .spawn(move || {
                while let Some(socket) = to_close.blocking_recv() {
                    drop(socket);
                }
            })?;
        Ok(Handed {
            netns,
            open: Mutex::default(),
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            swapping: tokio::sync::Mutex::new(()),
            closer,
        })
    }

    /// [`notify::replace_fd`], on a blocking thread and one at a time for this sandbox: the
    /// kernel returns only once the server's thread has run and taken the socket, and a server
    /// can keep its own thread from running (`SCHED_IDLE` under busy threads). Waiting here holds
    /// only this sandbox's next swap, never airlock's runtime, and at most one blocking thread.
    async fn replace_fd(
        &self,
        notifications: BorrowedFd<'_>,
        call: ConnectCall,
        socket: &Socket,
        cloexec: bool,
    ) -> std::io::Result<()> {
        let _one_at_a_time = self.swapping.lock().await;
        let listener = notifications.try_clone_to_owned()?;
        let socket = socket.try_clone()?;
        tokio::task::spawn_blocking(move || {
            notify::replace_fd(listener.as_fd(), call.id, socket.as_fd(), call.fd, cloexec)
        })
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the fd swap's thread failed")))
    }

    async fn close_later(&self, socket: Socket) {
        // If the thread is gone (it never ends first), the socket is closed here.
        let _ = self.closer.send(socket).await;
    }

    fn contains(&self, cookie: u64) -> bool {
        self.open
            .lock()
            .map(|open| open.contains_key(&cookie))
            // A poisoned lock cannot say: treat every socket as handed over (refused).
            .unwrap_or(true)
    }

    fn insert(&self, cookie: u64, open: Open) {
        if let Ok(mut map) = self.open.lock() {
            map.insert(cookie, open);
        }
    }

    fn remove(&self, cookie: u64) -> Option<Open> {
        self.open
            .lock()
            .ok()
            .and_then(|mut map| map.remove(&cookie))
    }

    fn drain(&self) -> Vec<Open> {
        self.open
            .lock()
            .map(|mut map| map.drain().map(|(_, open)| open).collect())
            .unwrap_or_default()
    }

    fn is_empty(&self) -> bool {
        self.open.lock().map(|map| map.is_empty()).unwrap_or(true)
    }
}

/// The server's `connect` being answered: the listener it waits on, the call, and its socket.
#[derive(Clone, Copy)]
struct Caller<'a> {
    notifications: BorrowedFd<'a>,
    call: ConnectCall,
    file: &'a Socket,
}

/// How one notification is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// `connect` returns 0, or fails with this errno (`EINPROGRESS` included).
    Errno(Option<i32>),
    /// The caller is gone (killed, or interrupted and restarting): nothing to answer.
    Gone,
}

/// Answers the notifications of one sandbox until every process under the filter is gone.
pub async fn serve<R: Resolve>(egress: Arc<Egress<R>>, handed: Arc<Handed>, listener: OwnedFd) {
    let listener = match register(listener, Interest::READABLE) {
        Ok(listener) => Arc::new(listener),
        Err(err) => {
            tracing::error!(server = %egress.server, "connect hand-over: {err}");
            return;
        }
    };
    loop {
        // Taken before a notification is received, so that past the bound the others wait in
        // the kernel, not here.
        let Ok(permit) = handed.permits.clone().acquire_owned().await else {
            return;
        };
        let mut ready = match listener.readable().await {
            Ok(ready) => ready,
            Err(err) => {
                tracing::error!(server = %egress.server, "connect hand-over: {err}");
                return;
            }
        };
        match pending(listener.get_ref().as_fd()) {
            Pending::Notification => {}
            Pending::Nothing => {
                ready.clear_ready();
                continue;
            }
            Pending::NoUsers => return,
        }
        match notify::receive(listener.get_ref().as_fd()) {
            Ok(Received::Connect(call)) => {
                let (egress, handed, listener) = (egress.clone(), handed.clone(), listener.clone());
                tokio::spawn(async move {
                    let mut closing = Vec::new();
                    let reply = egress
                        .connect_for(&handed, &listener, call, &mut closing)
                        .await;
                    if let Reply::Errno(errno) = reply {
                        // ENOENT: the caller went away meanwhile; nothing waits for the answer.
                        let _ = notify::answer(listener.get_ref().as_fd(), call.id, errno);
                    }
                    // After the answer, and with the permit given back: the server's thread does
                    // not wait for airlock's closes, nor do its next connects.
                    drop(permit);
                    for socket in closing {
                        handed.close_later(socket).await;
                    }
                });
            }
            Ok(Received::Other { id }) => {
                let _ = notify::answer(listener.get_ref().as_fd(), id, Some(libc::ENOSYS));
            }
            Err(err) if matches!(err.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => {}
            Err(err) => {
                tracing::error!(server = %egress.server, "connect hand-over: {err}");
                return;
            }
        }
    }
}

impl<R: Resolve> Egress<R> {
    /// One `connect` of the server, from reading its arguments to the answer. The sockets airlock
    /// is done with go to `closing` (closed after the answer, on the sandbox's closing thread).
    async fn connect_for(
        &self,
        handed: &Handed,
        listener: &AsyncFd<OwnedFd>,
        call: ConnectCall,
        closing: &mut Vec<Socket>,
    ) -> Reply {
        let notifications = listener.get_ref().as_fd();
        let addr = match notify::read_address(call.tid, call.addr, call.addr_len) {
            Ok(addr) => addr,
            Err(err) => return Reply::Errno(Some(errno_of(&err))),
        };
        let file = match notify::fetch_fd(call.tid, call.fd) {
            Ok(file) => Socket::from(file),
            Err(err) => return Reply::Errno(Some(errno_of(&err))),
        };
        let reply = self
            .connect_fetched(handed, notifications, call, &file, &addr, closing)
            .await;
        if netns_cookie(file.as_fd()).ok() != Some(handed.netns) {
            // A socket of the host's network (one airlock handed over: the server connected it
            // again). airlock's copy may be its last reference, and the last close of a
            // connected socket with SO_LINGER waits for its unsent data, as long as the server
            // chose: switched off, the close returns at once and the kernel still sends the
            // data. The server's own close, if it comes later, no longer waits either.
            let _ = file.set_linger(None);
        }
        closing.push(file);
        reply
    }

    async fn connect_fetched(
        &self,
        handed: &Handed,
        notifications: BorrowedFd<'_>,
        call: ConnectCall,
        file: &Socket,
        addr: &[u8],
        closing: &mut Vec<Socket>,
    ) -> Reply {
        // The memory read and the fd fetched were the caller's only if its notification is
        // still pending now (a pid can be reused once its thread is gone).
        if !notify::still_pending(notifications, call.id) {
            return Reply::Gone;
        }
        let facts = match facts(file, handed) {
            Ok(facts) => facts,
            Err(libc::ENOTSOCK) | Err(libc::EBADF) => return Reply::Errno(Some(libc::ENOTSOCK)),
            Err(errno) => return Reply::Errno(Some(errno)),
        };
        let listed = |port| self.allow.ports().contains(&port);
        match classify(facts, addr, listed) {
            Action::Refuse(libc::EISCONN) if facts.handed_over => {
                Reply::Errno(Some(again_on_handed_over(file)))
            }
            Action::Refuse(errno) => Reply::Errno(Some(errno)),
            // A UDP association or a TCP disconnect: neither waits, whatever the socket's flags.
            Action::InNamespace => Reply::Errno(notify::connect_raw(file.as_fd(), addr)),
            Action::Outside(dialled) => {
                let ipv6 = matches!(facts.kind, SocketKind::Tcp { ipv6: true });
                let caller = Caller {
                    notifications,
                    call,
                    file,
                };
                self.connect_outside(handed, caller, ipv6, dialled, closing)
                    .await
            }
        }
    }

    async fn connect_outside(
        &self,
        handed: &Handed,
        caller: Caller<'_>,
        ipv6: bool,
        dialled: SocketAddr,
        closing: &mut Vec<Socket>,
    ) -> Reply {
        let Caller {
            notifications,
            call,
            file,
        } = caller;
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
        let target = self.target(dialled).await;
        let v6only = ipv6 && file.only_v6().unwrap_or(false);
        let addresses = match &target {
            Ok(target) => reachable(&target.ips, port, ipv6, v6only),
            Err(_) => Vec::new(),
        };
        let Target {
            host,
            ips: _,
            entry,
        } = match (target, addresses.is_empty()) {
            (Ok(target), false) => target,
            (refused, _) => {
                let (Refused { host, reason }, errno) = match refused {
                    Err(refused) => (refused, libc::ECONNREFUSED),
                    Ok(target) => {
                        let ips: Vec<String> = target.ips.iter().map(|ip| ip.to_string()).collect();
                        let (has, socket) = if ipv6 {
                            ("IPv4", "IPv6-only")
                        } else {
                            ("IPv6", "IPv4")
                        };
                        let reason = format!(
                            "{} has only {has} addresses and the server's socket is {socket}: {}",
                            target.host,
                            ips.join(", ")
                        );
                        let host = target.host;
                        (Refused { host, reason }, libc::ENETUNREACH)
                    }
                };
                if let Some(suppressed) = self
                    .should_audit_refusal(RefusalKind::Connection, &format!("{host} port {port}"))
                {
                    let reason = Self::with_suppressed(reason, suppressed);
                    self.record(connect_event(&host, Verdict::Refused { reason }), true)
                        .await;
                }
                return Reply::Errno(Some(errno));
            }
        };
        let (nonblocking, cloexec) = match (
            notify::is_nonblocking(file.as_fd()),
            notify::is_cloexec(call.tid, call.fd),
        ) {
            (Ok(nonblocking), Ok(cloexec)) => (nonblocking, cloexec),
            (Err(err), _) | (_, Err(err)) => return Reply::Errno(Some(errno_of(&err))),
        };
        // Past the minute's budget the connection is counted, not recorded one by one.
        let recorded = self.admit_connection(&host, port).await;
        let verdict = |upstream: Option<String>| Verdict::Allowed {
            rule: entry.rule.to_string(),
            origin: entry.origin.clone(),
            upstream,
        };
        let close = |error: Option<String>| {
            CloseEvent {
                conn,
                host: host.clone(),
                port,
                bytes_up: 0,
                bytes_down: 0,
                duration: started.elapsed(),
                error,
            }
            .event(&self.server)
        };
        let still_waiting = || notify::still_pending(notifications, call.id);
        let (upstream, address, established) =
            match open_upstream(file, &addresses, nonblocking, still_waiting).await {
                Ok(opened) => opened,
                Err(Failed {
                    errors,
                    errno,
                    gone,
                }) => {
                    if recorded {
                        self.record(connect_event(&host, verdict(None)), false)
                            .await;
                        self.record(close(Some(errors.join("; "))), false).await;
                    } else {
                        self.count_unrecorded_end(&host, port, (0, 0), true).await;
                    }
                    return if gone {
                        Reply::Gone
                    } else {
                        Reply::Errno(Some(errno))
                    };
                }
            };
        let cookie = match upstream.cookie() {
            Ok(cookie) => cookie,
            Err(err) => {
                closing.push(upstream);
                return Reply::Errno(Some(errno_of(&err)));
            }
        };
        if recorded {
            self.record(
                connect_event(&host, verdict(Some(address.to_string()))),
                true,
            )
            .await;
        }
        // Known as handed over before the server can name it: a connect on it is refused.
        handed.insert(
            cookie,
            Open {
                conn,
                host: host.clone(),
                port,
                started,
                recorded,
            },
        );
        let replaced = handed
            .replace_fd(notifications, call, &upstream, cloexec)
            .await;
        if let Err(err) = replaced {
            handed.remove(cookie);
            closing.push(upstream);
            // The caller may still wait (its fd table refused the socket: EMFILE, an fd above
            // its limit): it gets the error. Otherwise it is gone.
            let waiting = notify::still_pending(notifications, call.id);
            let why = if waiting {
                format!("the socket could not be put in the server's fd table: {err}")
            } else {
                format!("the server's connect ended before the hand-over: {err}")
            };
            if recorded {
                self.record(close(Some(why)), false).await;
            } else {
                self.count_unrecorded_end(&host, port, (0, 0), true).await;
            }
            return if waiting {
                Reply::Errno(Some(errno_of(&err)))
            } else {
                Reply::Gone
            };
        }
        // The server holds the socket now; airlock's copy closes on the sandbox's closing thread,
        // never lingering (the server could set SO_LINGER and close its fd first).
        let _ = upstream.set_linger(None);
        closing.push(upstream);
        Reply::Errno((!established).then_some(libc::EINPROGRESS))
    }

    /// Writes a `net_close` for every connection whose socket the kernel reported destroyed,
    /// until `stopped` turns true (the sandbox is gone) and every connection is accounted for,
    /// or [`CLOSE_GRACE`] after that.
    pub async fn account_closes(&self, handed: &Handed, mut stopped: watch::Receiver<bool>) {
        let socket = match diag::open().and_then(|fd| register(fd, Interest::READABLE)) {
            Ok(socket) => socket,
            Err(err) => {
                tracing::warn!(
                    server = %self.server,
                    "connections handed over will have no byte counts: sock_diag: {err}"
                );
                return;
            }
        };
        let mut buf = vec![0u8; 64 * 1024];
        let mut deadline: Option<tokio::time::Instant> = None;
        let mut _finishing = None;
        loop {
            if deadline.is_some() && handed.is_empty() {
                self.record_unrecorded_refusals().await;
                self.record_unrecorded_connections(true).await;
                return;
            }
            let grace = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            // Counts over the budget go to the log once their minute is over, whatever comes.
            let counts_due = self.unrecorded_connections_due_at();
            let counts = async {
                match counts_due {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ready = socket.readable() => {
                    let Ok(mut ready) = ready else { return };
                    match ready.try_io(|inner| recv(inner.get_ref().as_fd(), &mut buf)) {
                        Ok(Ok(len)) => {
                            for destroyed in diag::parse(&buf[..len]) {
                                if let Some(open) = handed.remove(destroyed.cookie) {
                                    self.record_close(open, Some(diag::payload(&destroyed)), None)
                                        .await;
                                }
                            }
                        }
                        Ok(Err(err)) => tracing::warn!(server = %self.server, "sock_diag: {err}"),
                        Err(_would_block) => {}
                    }
                }
                changed = stopped.changed(), if deadline.is_none() => {
                    if changed.is_err() || *stopped.borrow() {
                        deadline = Some(tokio::time::Instant::now() + CLOSE_GRACE);
                        _finishing = Some(Finishing::start());
                        // Said at once: the ends of the last connections may come after
                        // airlock is gone (the counts hold every connection since it was
                        // made), and a server's refused attempts past the budget are no less
                        // its doing for a connection of its that outlives it.
                        self.record_unrecorded_refusals().await;
                        self.record_unrecorded_connections(true).await;
                    }
                }
                () = counts => self.record_unrecorded_connections(false).await,
                () = grace => {
                    for open in handed.drain() {
                        let why = "its end was not seen before the sandbox was gone";
                        self.record_close(open, None, Some(why.into())).await;
                    }
                    self.record_unrecorded_refusals().await;
                    self.record_unrecorded_connections(true).await;
                    return;
                }
            }
        }
    }

    async fn record_close(&self, open: Open, bytes: Option<(u64, u64)>, error: Option<String>) {
        let (bytes_up, bytes_down) = bytes.unwrap_or((0, 0));
        if !open.recorded {
            let failed = error.is_some();
            self.count_unrecorded_end(&open.host, open.port, (bytes_up, bytes_down), failed)
                .await;
            return;
        }
        let event = CloseEvent {
            conn: open.conn,
            host: open.host,
            port: open.port,
            bytes_up,
            bytes_down,
            duration: open.started.elapsed(),
            error,
        }
        .event(&self.server);
        self.record(event, false).await;
    }
}

/// How long the byte accounting waits, after the sandbox is gone, for its last sockets' ends.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Byte accountings whose sandbox is gone and that still wait for the ends of its connections
/// (at most [`CLOSE_GRACE`]): the session's shutdown waits for them, or their last records
/// (a connection whose end was never seen) would be lost with the process.
static FINISHING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether any byte accounting of this process is still finishing (see [`FINISHING`]).
pub fn accounting_finishing() -> bool {
    FINISHING.load(std::sync::atomic::Ordering::Acquire) > 0
}

/// Counts one accounting as finishing while it lives.
struct Finishing;

impl Finishing {
    fn start() -> Finishing {
        FINISHING.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Finishing
    }
}

impl Drop for Finishing {
    fn drop(&mut self) {
        FINISHING.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

fn recv(socket: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: recv writes at most buf.len() bytes into buf.
    let n = unsafe { libc::recv(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// No address of the target accepted: each with why, and the errno the server gets; or the
/// server stopped waiting (`gone`).
struct Failed {
    errors: Vec<String>,
    errno: i32,
    gone: bool,
}

/// Opens airlock's socket to the first address that takes it, with the server's socket options.
/// For a non-blocking server socket, once the connect is under way (`established` false);
/// otherwise once it is established, giving up when `still_waiting` says the server no longer
/// waits.
async fn open_upstream(
    model: &Socket,
    addresses: &[SocketAddr],
    nonblocking: bool,
    still_waiting: impl Fn() -> bool,
) -> Result<(Socket, SocketAddr, bool), Failed> {
    let mut errors = Vec::new();
    let mut errno = libc::ECONNREFUSED;
    for &address in addresses {
        match start_connect(model, address) {
            Ok((socket, true)) => return finish(socket, address, nonblocking, true),
            Ok((socket, false)) if nonblocking => return Ok((socket, address, false)),
            Ok((socket, false)) => match wait_connected(socket, &still_waiting).await {
                Ok(socket) => return finish(socket, address, nonblocking, true),
                Err(Waited::Gone) => {
                    errors.push(format!("{address}: the server stopped waiting"));
                    return Err(Failed {
                        errors,
                        errno,
                        gone: true,
                    });
                }
                Err(Waited::Failed(err)) => {
                    errno = errno_of(&err);
                    errors.push(format!("{address}: {err}"));
                }
            },
            Err(err) => {
                errno = errno_of(&err);
                errors.push(format!("{address}: {err}"));
            }
        }
    }
    Err(Failed {
        errors,
        errno,
        gone: false,
    })
}

fn finish(
    socket: Socket,
    address: SocketAddr,
    nonblocking: bool,
    established: bool,
) -> Result<(Socket, SocketAddr, bool), Failed> {
    match socket.set_nonblocking(nonblocking) {
        Ok(()) => Ok((socket, address, established)),
        Err(err) => Err(Failed {
            errors: vec![format!("{address}: {err}")],
            errno: errno_of(&err),
            gone: false,
        }),
    }
}

/// A new socket of the server's family, with its options, connecting (non-blocking) to
/// `address`: `true` if already established.
fn start_connect(model: &Socket, address: SocketAddr) -> std::io::Result<(Socket, bool)> {
    let domain = Domain::for_address(address);
    let socket = Socket::new(domain, Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    copy_options(model, &socket);
    socket.set_nonblocking(true)?;
    match socket.connect(&address.into()) {
        Ok(()) => Ok((socket, true)),
        Err(err) if err.raw_os_error() == Some(libc::EINPROGRESS) => Ok((socket, false)),
        Err(err) => Err(err),
    }
}

enum Waited {
    Failed(std::io::Error),
    Gone,
}

/// Waits for a connect under way: up to [`CONNECT_TIMEOUT`], looking every [`PENDING_CHECK`]
/// whether the server still waits.
async fn wait_connected(
    socket: Socket,
    still_waiting: impl Fn() -> bool,
) -> Result<Socket, Waited> {
    let socket = register(socket, Interest::WRITABLE).map_err(Waited::Failed)?;
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    loop {
        match tokio::time::timeout(PENDING_CHECK, socket.writable()).await {
            Ok(Ok(mut ready)) => {
                ready.clear_ready();
                break;
            }
            Ok(Err(err)) => return Err(Waited::Failed(err)),
            Err(_) if !still_waiting() => return Err(Waited::Gone),
            Err(_) if tokio::time::Instant::now() >= deadline => {
                return Err(Waited::Failed(std::io::Error::from_raw_os_error(
                    libc::ETIMEDOUT,
                )));
            }
            Err(_) => {}
        }
    }
    let socket = socket.into_inner();
    match socket.take_error() {
        Ok(Some(err)) | Err(err) => Err(Waited::Failed(err)),
        Ok(None) => Ok(socket),
    }
}

/// The options a client commonly sets before `connect` (Nagle off, keep-alive, timeouts),
/// copied from the server's socket to the one it gets instead. Best effort: a copy that fails
/// leaves the default. Not `SO_LINGER`: airlock may close its copy last, and a lingering close
/// waits.
fn copy_options(from: &Socket, to: &Socket) {
    if let Ok(true) = from.tcp_nodelay() {
        let _ = to.set_tcp_nodelay(true);
    }
    if let Ok(Some(timeout)) = from.read_timeout() {
        let _ = to.set_read_timeout(Some(timeout));
    }
    if let Ok(Some(timeout)) = from.write_timeout() {
        let _ = to.set_write_timeout(Some(timeout));
    }
    if let Ok(Some(timeout)) = from.tcp_user_timeout() {
        let _ = to.set_tcp_user_timeout(Some(timeout));
    }
    if let Ok(true) = from.keepalive() {
        let mut keepalive = socket2::TcpKeepalive::new();
        if let Ok(time) = from.tcp_keepalive_time() {
            keepalive = keepalive.with_time(time);
        }
        if let Ok(interval) = from.tcp_keepalive_interval() {
            keepalive = keepalive.with_interval(interval);
        }
        if let Ok(retries) = from.tcp_keepalive_retries() {
            keepalive = keepalive.with_retries(retries);
        }
        let _ = to.set_tcp_keepalive(&keepalive);
    }
}

#[cfg(test)]
mod tests;
