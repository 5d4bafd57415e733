//! Running the resolver and the connect hand-over for one server, on the sockets its sandbox handed over
//! ([`super::sys`]). Everything runs as tasks of airlock's runtime; the returned
//! [`EgressService`] stops them when dropped (the confined child holds it for its whole life).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::event::{ConnectEvent, Verdict};
use super::handover::{Handed, netns_cookie};
use super::resolver::{RefusalKind, respond};
use super::route::{Egress, Resolve};
use super::sys::{Role, recv_with_destination, send_from};

/// The running resolver and connect hand-over of one server.
#[derive(Debug)]
pub struct EgressService {
    tasks: Vec<JoinHandle<()>>,
    /// Tells the byte accounting of handed-over connections that the sandbox is gone: it writes
    /// their last `net_close` events on its own, then ends.
    stopped: watch::Sender<bool>,
}

impl Drop for EgressService {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        let _ = self.stopped.send(true);
    }
}

/// Starts serving every handed-over socket. Must run inside a tokio runtime.
pub fn start<R: Resolve>(
    egress: Arc<Egress<R>>,
    sockets: Vec<(Role, OwnedFd)>,
) -> io::Result<EgressService> {
    let mut tasks = Vec::with_capacity(sockets.len());
    let (stopped, stopped_rx) = watch::channel(false);
    // The resolver's sockets are the sandbox's own: their namespace is the sandbox's.
    let sandbox_namespace = sockets
        .iter()
        .find(|(role, _)| *role == Role::DnsUdp4)
        .map(|(_, fd)| netns_cookie(fd.as_fd()))
        .ok_or_else(|| io::Error::other("the hand-over carries no resolver socket"))??;
    let handed = Arc::new(Handed::new(sandbox_namespace)?);
    for (role, fd) in sockets {
        let task = match role {
            Role::ConnectNotify => {
                // Not kept in `tasks`: it outlives the service by a grace period (see above).
                let (accounting, accounted) = (egress.clone(), handed.clone());
                let stopped = stopped_rx.clone();
                tokio::spawn(async move { accounting.account_closes(&accounted, stopped).await });
                tokio::spawn(super::handover::serve(egress.clone(), handed.clone(), fd))
            }
            Role::DnsUdp4 | Role::DnsUdp6 => {
                let socket = std::net::UdpSocket::from(fd);
                socket.set_nonblocking(true)?;
                tokio::spawn(serve_dns_udp(egress.clone(), UdpSocket::from_std(socket)?))
            }
        };
        tasks.push(task);
    }
    Ok(EgressService { tasks, stopped })
}

impl<R: Resolve> Egress<R> {
    /// Answers one query; audits a refused name (throttled).
    async fn answer(&self, query: &[u8]) -> Option<Vec<u8>> {
        let now = Instant::now();
        let reply = {
            let mut table = self.table.lock().ok()?;
            respond(query, &self.allow, &mut table, now)?
        };
        if let Some(name) = &reply.refused
            && let Some(suppressed) = self.should_audit_refusal(RefusalKind::Lookup, name)
        {
            let reason =
                "the name is not on the network allow list (it does not resolve in the sandbox)";
            let event = ConnectEvent {
                conn: self.conn_number(),
                host: name.clone(),
                port: None,
                verdict: Verdict::Refused {
                    reason: Self::with_suppressed(reason.into(), suppressed),
                },
            };
            self.record(event.event(&self.server), false).await;
        }
        Some(reply.packet)
    }
}

async fn serve_dns_udp<R: Resolve>(egress: Arc<Egress<R>>, socket: UdpSocket) {
    use std::os::fd::AsRawFd;
    let fd = socket.as_raw_fd();
    let mut buf = vec![0u8; 4096];
    loop {
        let received = socket
            .async_io(Interest::READABLE, || recv_with_destination(fd, &mut buf))
            .await;
        let (len, sender, destination) = match received {
            Ok(found) => found,
            Err(err) => {
                tracing::debug!(server = %egress.server, "resolver: {err}");
                continue;
            }
        };
        if let Some(answer) = egress.answer(&buf[..len]).await {
            // A full socket buffer drops the answer; the client asks again.
            let _ = socket.try_io(Interest::WRITABLE, || {
                send_from(fd, &answer, sender, destination)
            });
        }
    }
}
