//! Byte counts of connections airlock handed over (`super::handover`), which it no longer sees:
//! the kernel's sock_diag broadcasts, for every TCP socket of airlock's network namespace when it
//! is destroyed, its cookie and its `tcp_info` (`SKNLGRP_INET_TCP_DESTROY`, joined without
//! privilege). The socket's cookie, taken when airlock made it, says which connection ended.
//!
//! `tcp_info` counts sequence space: `bytes_acked` includes the SYN and, once acknowledged, the
//! FIN; `bytes_received` includes the peer's FIN once received. [`payload`] takes them off.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// sock_diag multicast groups (linux/sock_diag.h): TCP sockets destroyed, IPv4 and IPv6.
const SKNLGRP_INET_TCP_DESTROY: u32 = 1;
const SKNLGRP_INET6_TCP_DESTROY: u32 = 3;
/// The message type of a socket description (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// The `tcp_info` attribute of an inet_diag message (linux/inet_diag.h).
const INET_DIAG_INFO: u16 = 2;
/// `struct inet_diag_msg`: family, state, timer, retrans, then `inet_diag_sockid` (ports,
/// addresses, interface, cookie at offset 44), then five u32.
const INET_DIAG_MSG_LEN: usize = 72;
const COOKIE_OFFSET: usize = 44;
/// `struct tcp_info`: `tcpi_bytes_acked` and `tcpi_bytes_received` (Linux 4.1+).
const BYTES_ACKED_OFFSET: usize = 120;
const BYTES_RECEIVED_OFFSET: usize = 128;
const NLMSG_HEADER_LEN: usize = 16;

/// One destroyed TCP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destroyed {
    pub cookie: u64,
    /// Sequence space acknowledged by the peer and received from it (see the module's note).
    pub acked: u64,
    pub received: u64,
}

/// The payload bytes of a connection from its sequence-space counts: the SYN is always in
/// `acked` (the connection was established) and a FIN is at most one more on each side. A
/// connection that closed normally carries both FINs; one reset may lack them, and may then be
/// shown one byte short.
pub fn payload(destroyed: &Destroyed) -> (u64, u64) {
    (
        destroyed.acked.saturating_sub(2),
        destroyed.received.saturating_sub(1),
    )
}

/// Opens a non-blocking netlink socket joined to the TCP-destroyed groups of airlock's network
/// namespace.
pub fn open() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the result is a new fd.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new fd, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_nl is valid.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = (1 << (SKNLGRP_INET_TCP_DESTROY - 1)) | (1 << (SKNLGRP_INET6_TCP_DESTROY - 1));
    // SAFETY: bind reads one sockaddr_nl from the live local.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // A busy host destroys many sockets; a bigger buffer loses fewer when airlock lags. Beyond
    // `net.core.rmem_max` only with CAP_NET_ADMIN (SO_RCVBUFFORCE); otherwise up to that cap.
    let size: libc::c_int = 4 << 20;
    for option in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt reads one c_int from the live local.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
    }
    Ok(fd)
}

/// Every destroyed socket described in one datagram of the group.
pub fn parse(datagram: &[u8]) -> Vec<Destroyed> {
    let mut found = Vec::new();
    let mut rest = datagram;
    while rest.len() >= NLMSG_HEADER_LEN {
        let len = u32_at(rest, 0) as usize;
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        if len < NLMSG_HEADER_LEN || len > rest.len() {
            break;
        }
        if kind == SOCK_DIAG_BY_FAMILY
            && let Some(destroyed) = describe(&rest[NLMSG_HEADER_LEN..len])
        {
            found.push(destroyed);
        }
        rest = &rest[align4(len).min(rest.len())..];
    }
    found
}

fn describe(message: &[u8]) -> Option<Destroyed> {
    if message.len() < INET_DIAG_MSG_LEN {
        return None;
    }
    let cookie = u64::from(u32_at(message, COOKIE_OFFSET))
        | (u64::from(u32_at(message, COOKIE_OFFSET + 4)) << 32);
    let mut attrs = &message[INET_DIAG_MSG_LEN..];
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]);
        if len < 4 || len > attrs.len() {
            break;
        }
        let data = &attrs[4..len];
        if kind == INET_DIAG_INFO && data.len() >= BYTES_RECEIVED_OFFSET + 8 {
            return Some(Destroyed {
                cookie,
                acked: u64_at(data, BYTES_ACKED_OFFSET),
                received: u64_at(data, BYTES_RECEIVED_OFFSET),
            });
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    None
}

fn align4(len: usize) -> usize {
    (len + 3) & !3
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_ne_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A real connection: its cookie and byte counts arrive when both ends are closed.
    #[test]
    fn a_closed_connection_is_reported_with_its_cookie_and_bytes() {
        let listener = open().unwrap();
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        client
            .connect(&server.local_addr().unwrap().into())
            .unwrap();
        let cookie = client.cookie().unwrap();
        let mut client = std::net::TcpStream::from(client);
        let (mut peer, _) = server.accept().unwrap();
        client.write_all(&[1u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        peer.read_exact(&mut got).unwrap();
        peer.write_all(&[2u8; 3_000]).unwrap();
        let mut back = vec![0u8; 3_000];
        client.read_exact(&mut back).unwrap();
        drop(client);
        drop(peer);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut buf = vec![0u8; 65536];
        loop {
            assert!(std::time::Instant::now() < deadline, "no destroy event");
            // SAFETY: recv writes at most buf.len() bytes into buf.
            let n =
                unsafe { libc::recv(listener.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            if let Some(ours) = parse(&buf[..n as usize])
                .into_iter()
                .find(|d| d.cookie == cookie)
            {
                assert_eq!(payload(&ours), (100_000, 3_000), "{ours:?}");
                return;
            }
        }
    }

    #[test]
    fn truncated_messages_give_nothing() {
        assert!(parse(&[0u8; 10]).is_empty());
        let mut header = vec![0u8; 16];
        header[0..4].copy_from_slice(&200u32.to_ne_bytes());
        assert!(parse(&header).is_empty());
    }
}
