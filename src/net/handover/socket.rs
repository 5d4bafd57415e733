//! The system calls the hand-over makes on the server's sockets and its listener: what a socket
//! is (for [`super::classify`]), what a second `connect` on a handed-over socket returns, and the
//! network namespace a socket belongs to.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::Handed;
use super::classify::{SocketFacts, SocketKind};

pub(super) enum Pending {
    Notification,
    Nothing,
    NoUsers,
}

/// Polls the listener without waiting: receiving blocks unless a notification is pending.
pub(super) fn pending(listener: BorrowedFd<'_>) -> Pending {
    let mut poll = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one live pollfd, without waiting.
    let rc = unsafe { libc::poll(&mut poll, 1, 0) };
    if rc <= 0 {
        Pending::Nothing
    } else if poll.revents & libc::POLLIN != 0 {
        Pending::Notification
    } else if poll.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
        Pending::NoUsers
    } else {
        Pending::Nothing
    }
}

pub(super) fn register<T: AsRawFd>(inner: T, interest: Interest) -> std::io::Result<AsyncFd<T>> {
    // SAFETY: every caller passes a value that owns its fd (OwnedFd, Socket), so the fd stays
    // open and the same for the AsyncFd's whole life.
    unsafe { AsyncFd::register_with_interest(inner, interest) }.map_err(|err| err.into_parts().1)
}

pub(super) fn errno_of(err: &std::io::Error) -> i32 {
    err.raw_os_error().unwrap_or(libc::EIO)
}

pub(super) fn facts(socket: &Socket, handed: &Handed) -> Result<SocketFacts, i32> {
    let domain = socket.domain().map_err(|err| errno_of(&err))?;
    let kind = match (domain, socket.r#type(), socket.protocol()) {
        (Domain::IPV4 | Domain::IPV6, Ok(Type::STREAM), Ok(Some(Protocol::TCP) | None)) => {
            SocketKind::Tcp {
                ipv6: domain == Domain::IPV6,
            }
        }
        (Domain::IPV4 | Domain::IPV6, Ok(Type::DGRAM), Ok(Some(Protocol::UDP) | None)) => {
            SocketKind::Udp
        }
        _ => SocketKind::Other,
    };
    let cookie = socket.cookie().map_err(|err| errno_of(&err))?;
    Ok(SocketFacts {
        kind,
        handed_over: handed.contains(cookie),
        in_sandbox: netns_cookie(socket.as_fd()).map_err(|err| errno_of(&err))? == handed.netns,
    })
}

/// What a second `connect` on a socket airlock handed over returns, as the kernel would say it
/// (`inet_stream_connect`) without ever connecting it again: `EALREADY` while the connection is
/// being made, the connection's error once it failed (read, and so cleared, as the kernel reads
/// it; `ECONNABORTED` if none), `EISCONN` once it is made. Clients that poll a non-blocking
/// connect by calling `connect` again read these.
pub(super) fn again_on_handed_over(socket: &Socket) -> i32 {
    const TCP_SYN_SENT: u8 = 2;
    const TCP_SYN_RECV: u8 = 3;
    const TCP_CLOSE: u8 = 7;
    // `struct tcp_info` starts with `tcpi_state`.
    let mut info = [0u8; 8];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live local buffer.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc < 0 || len < 1 {
        return libc::EISCONN;
    }
    match info[0] {
        TCP_SYN_SENT | TCP_SYN_RECV => libc::EALREADY,
        TCP_CLOSE => match socket.take_error() {
            Ok(Some(err)) => errno_of(&err),
            _ => libc::ECONNABORTED,
        },
        _ => libc::EISCONN,
    }
}

/// The cookie of the network namespace a socket belongs to (`SO_NETNS_COOKIE`, Linux 5.14).
pub fn netns_cookie(socket: BorrowedFd<'_>) -> std::io::Result<u64> {
    let mut cookie = 0u64;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live local.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cookie)
}
