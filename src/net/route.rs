//! Where a connection of the server may go: the server dialled an address in its namespace
//! (through `super::handover`, which holds every `connect`); airlock decides ([`decide`], pure) and
//! finds the addresses to connect to from outside the sandbox:
//!
//! - a stand-in address → the name it stands for, if an entry allows that name on that port; the
//!   name is resolved with the host's resolver and only public addresses are used, unless an entry
//!   lists the address itself ([`usable_addresses`], pure);
//! - any other address → only if an entry lists it (address or range) on that port.
//!
//! [`Egress`] is the state one server's resolver and hand-over share: the stand-in table, the
//! allow list, the audit sender.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::addr::{canonical, non_public_reason};
use super::allow::{AllowEntry, AllowList};
use super::budget::ConnectionBudget;
use super::event::unrecorded_connections;
use super::resolver::{RefusalKind, RefusalThrottle};
use super::standin::StandIns;
use crate::audit::{Event, EventKind};

/// How long airlock tries to reach the remote end of a blocking `connect`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// What airlock does with one connection.
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

/// Why a name leads to no address airlock may connect to. The text is the refusal's reason in
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

/// The addresses of `name` airlock may connect to: public ones, and non-public ones (this
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

/// The host's resolver (getaddrinfo, on tokio's blocking pool). airlock asks it through
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

/// An audit event on its way to the owner of the audit log; `written` is answered once it is.
#[derive(Debug)]
pub struct NetAudit {
    pub event: Event,
    pub written: Option<oneshot::Sender<()>>,
}

/// A sender whose events are written to `log` (each acknowledged once written, as a session
/// does), for a command that has no session of its own (`airlock test`); the count of records
/// written grows as they are. A record that cannot be written is shown on stderr with why (the
/// connection goes on: the command is a person's probe, not a session to stop). Must be called
/// inside a tokio runtime.
pub fn audit_to_log(
    mut log: crate::audit::AuditLog,
) -> (
    mpsc::Sender<NetAudit>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let (tx, mut rx) = mpsc::channel::<NetAudit>(64);
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = written.clone();
    tokio::spawn(async move {
        while let Some(NetAudit { event, written }) = rx.recv().await {
            let shown = crate::audit::query::format_record(&serde_json::json!(&event));
            match log.record(event) {
                Ok(()) => {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(err) => eprintln!("network: {shown} (not in the audit log: {err})"),
            }
            if let Some(written) = written {
                let _ = written.send(());
            }
        }
    });
    (tx, written)
}

/// A sender whose events are written to stderr as `airlock audit` shows records (and
/// acknowledged): for a command with no session whose audit log is stderr (`airlock test`
/// under such a policy), read by a person. Must be called inside a tokio runtime.
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

/// The resolver's and the hand-over's shared state for one running server.
pub struct Egress<R: Resolve = HostResolver> {
    pub server: String,
    pub allow: AllowList,
    pub(super) table: Mutex<StandIns>,
    pub(super) throttle: Mutex<RefusalThrottle>,
    /// Allowed connections recorded one by one, and the counts of the rest.
    pub(super) connections: Mutex<ConnectionBudget>,
    next_conn: AtomicU64,
    audit: mpsc::Sender<NetAudit>,
    resolver: R,
}

impl<R: Resolve> Egress<R> {
    pub fn new(
        server: &str,
        allow: AllowList,
        audit: mpsc::Sender<NetAudit>,
        resolver: R,
    ) -> Egress<R> {
        Egress {
            server: server.to_string(),
            allow,
            table: Mutex::new(StandIns::default()),
            throttle: Mutex::new(RefusalThrottle::default()),
            connections: Mutex::new(ConnectionBudget::default()),
            next_conn: AtomicU64::new(1),
            audit,
            resolver,
        }
    }

    /// This host's addresses, read at each connection (interfaces come and go). When they
    /// cannot be read the connection is refused: a name could lead back to the host.
    fn own_addresses(&self) -> Result<Vec<IpAddr>, String> {
        super::sys::own_addresses().map_err(|err| {
            format!("this host's own addresses cannot be read ({err}), so no name is reached")
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

    /// Whether a refusal of `key` (a name, or `host port N` for a connection) goes to the audit
    /// log: at most once a minute per key ([`RefusalThrottle`]), so a server that loops over a
    /// refused connect cannot flood the log.
    pub(super) fn should_audit_refusal(&self, kind: RefusalKind, key: &str) -> Option<u64> {
        self.throttle
            .lock()
            .map(|mut throttle| throttle.should_audit(kind, key, Instant::now()))
            .unwrap_or(Some(0))
    }

    /// Records how many refusals were not recorded one by one since the last that was (over
    /// the budget), if any: when the sandbox is gone, so nothing a server did is left unsaid.
    pub(super) async fn record_unrecorded_refusals(&self) {
        let Ok((lookups, connections)) = self
            .throttle
            .lock()
            .map(|mut throttle| throttle.take_unrecorded())
        else {
            return;
        };
        if lookups + connections == 0 {
            return;
        }
        let mut event = Event::new(EventKind::NetConnect, &self.server);
        event.decision = Some("deny".into());
        event.reason = Some(format!(
            "{lookups} refused lookups and {connections} refused connections were not recorded one by one (over {} of each a minute)",
            RefusalThrottle::BUDGET
        ));
        event.detail = Some(serde_json::json!({
            "unrecorded": {"lookups": lookups, "connections": connections}
        }));
        self.record(event, false).await;
    }

    /// Whether a new allowed connection is recorded one by one ([`ConnectionBudget`]); first
    /// records the counts of earlier ones when they are due.
    pub(super) async fn admit_connection(&self, host: &str, port: u16) -> bool {
        let now = Instant::now();
        let (admitted, due) = match self.connections.lock() {
            Ok(mut budget) => (budget.admit(host, port, now), budget.due(now, false)),
            // Not expected (a panic while the lock was held): record everything.
            Err(_) => (true, None),
        };
        if let Some(due) = due {
            self.record(unrecorded_connections(&self.server, &due), false)
                .await;
        }
        admitted
    }

    /// Counts the end of a connection that was not recorded one by one, and records the counts
    /// when they are due.
    pub(super) async fn count_unrecorded_end(
        &self,
        host: &str,
        port: u16,
        bytes: (u64, u64),
        failed: bool,
    ) {
        let now = Instant::now();
        let due = self.connections.lock().ok().and_then(|mut budget| {
            budget.count_end(host, port, bytes, failed, now);
            budget.due(now, false)
        });
        if let Some(due) = due {
            self.record(unrecorded_connections(&self.server, &due), false)
                .await;
        }
    }

    /// When the counts of connections not recorded one by one are due, if any are held.
    pub(super) fn unrecorded_connections_due_at(&self) -> Option<Instant> {
        self.connections
            .lock()
            .ok()
            .and_then(|budget| budget.due_at())
    }

    /// Records the counts of connections not recorded one by one: when due, or all that are
    /// left (`ending`: the sandbox is gone).
    pub(super) async fn record_unrecorded_connections(&self, ending: bool) {
        let due = self
            .connections
            .lock()
            .ok()
            .and_then(|mut budget| budget.due(Instant::now(), ending));
        if let Some(due) = due {
            self.record(unrecorded_connections(&self.server, &due), false)
                .await;
        }
    }

    /// A refusal's reason, saying how many refusals before it were not audited (over the budget).
    pub(super) fn with_suppressed(reason: String, suppressed: u64) -> String {
        if suppressed == 0 {
            reason
        } else {
            format!(
                "{reason} ({suppressed} refusals before this one were not recorded: over {} a minute)",
                RefusalThrottle::BUDGET
            )
        }
    }

    /// Where a connection the server made to `dialled` may go: the decision ([`decide`]), then
    /// for a name its usable addresses ([`usable_addresses`]), resolved outside the sandbox.
    pub(super) async fn target(&self, dialled: SocketAddr) -> Result<Target, Refused> {
        let port = dialled.port();
        match self.decide_now(dialled) {
            Decision::Refuse { host, reason } => Err(Refused { host, reason }),
            Decision::Address { ip, entry } => Ok(Target {
                host: ip.to_string(),
                ips: vec![ip],
                entry,
            }),
            Decision::Name { name, entry } => {
                let resolved = match self.resolver.resolve(&name, port).await {
                    Ok(resolved) => self.own_addresses().and_then(|own| {
                        usable_addresses(&name, port, &resolved, &own, &self.allow)
                            .map_err(|err| err.to_string())
                    }),
                    Err(err) => Err(format!(
                        "{name} does not resolve outside the sandbox: {err}"
                    )),
                };
                match resolved {
                    Ok(ips) => Ok(Target {
                        host: name,
                        ips,
                        entry,
                    }),
                    Err(reason) => Err(Refused { host: name, reason }),
                }
            }
        }
    }
}

/// Where an allowed connection goes: the name or address the server asked for (as audited),
/// the addresses to try in order, and the entry that allowed it.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub host: String,
    pub ips: Vec<IpAddr>,
    pub entry: AllowEntry,
}

/// A refused connection: what the server asked for, and why not.
#[derive(Debug, Clone)]
pub(super) struct Refused {
    pub host: String,
    pub reason: String,
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
