//! The decision on one `connect` of the server, pure: what its socket is and the address bytes
//! it passed in, to refuse, connect inside the namespace, or connect outside by the allow list.

use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::net::addr::canonical;
use crate::net::allow::DNS_PORT;

/// What the server's socket is, as far as the decision needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketFacts {
    pub kind: SocketKind,
    /// airlock handed this socket over (its cookie is one airlock made).
    pub handed_over: bool,
    /// The socket belongs to the sandbox's network namespace (its netns cookie).
    pub in_sandbox: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    Tcp {
        ipv6: bool,
    },
    Udp,
    /// Any other family, type or protocol.
    Other,
}

/// What airlock does with one `connect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Fail it with this errno.
    Refuse(i32),
    /// Connect the server's own socket, inside its network namespace: only a UDP association or a
    /// TCP disconnect (`AF_UNSPEC`), which never wait.
    InNamespace,
    /// Decide by the allow list, then connect from outside and hand the socket over.
    Outside(SocketAddr),
}

/// Decides one `connect(socket, addr)`. `listed_port`: whether any entry of the allow list names
/// that port (a port none names is refused as landlock did before: `EACCES`, not audited).
pub fn classify(socket: SocketFacts, addr: &[u8], listed_port: impl Fn(u16) -> bool) -> Action {
    if socket.handed_over {
        return Action::Refuse(libc::EISCONN);
    }
    if !socket.in_sandbox {
        // Not made by airlock, yet outside the namespace: nothing the server should hold.
        return Action::Refuse(libc::EACCES);
    }
    let ipv6 = match socket.kind {
        SocketKind::Udp => return Action::InNamespace,
        SocketKind::Other => return Action::Refuse(libc::EACCES),
        SocketKind::Tcp { ipv6 } => ipv6,
    };
    let dialled = match socket_address(addr, ipv6) {
        Ok(Some(dialled)) => dialled,
        // AF_UNSPEC: disconnecting a socket of the namespace.
        Ok(None) => return Action::InNamespace,
        Err(errno) => return Action::Refuse(errno),
    };
    if dialled.port() == DNS_PORT {
        // DNS over TCP is not served: the resolver's UDP answers are never truncated.
        return Action::Refuse(libc::ECONNREFUSED);
    }
    if !listed_port(dialled.port()) {
        return Action::Refuse(libc::EACCES);
    }
    Action::Outside(dialled)
}

/// The address a TCP socket of that family dials, read as the kernel reads a `sockaddr`
/// (`Ok(None)`: `AF_UNSPEC`), or the kernel's errno for it (`inet_stream_connect`, then
/// `tcp_v4_connect` or `tcp_v6_connect`: the length is checked before the family).
fn socket_address(addr: &[u8], ipv6: bool) -> Result<Option<SocketAddr>, i32> {
    let (Some(&low), Some(&high)) = (addr.first(), addr.get(1)) else {
        return Err(libc::EINVAL);
    };
    let family = i32::from(u16::from_ne_bytes([low, high]));
    if family == libc::AF_UNSPEC {
        return Ok(None);
    }
    let (needed, expected) = if ipv6 {
        (24, libc::AF_INET6)
    } else {
        (16, libc::AF_INET)
    };
    if addr.len() < needed {
        return Err(libc::EINVAL);
    }
    if family != expected {
        return Err(libc::EAFNOSUPPORT);
    }
    let port = u16::from_be_bytes([addr[2], addr[3]]);
    let ip = if ipv6 {
        let mut ip = [0u8; 16];
        ip.copy_from_slice(&addr[8..24]);
        canonical(IpAddr::from(ip))
    } else {
        IpAddr::from([addr[4], addr[5], addr[6], addr[7]])
    };
    Ok(Some(SocketAddr::new(ip, port)))
}

/// The addresses a socket of the server's family can be connected to (an IPv4 address as
/// IPv4-mapped on an IPv6 socket unless it is `IPV6_V6ONLY`; an IPv6 address never on an IPv4
/// socket).
pub fn reachable(ips: &[IpAddr], port: u16, ipv6_socket: bool, v6only: bool) -> Vec<SocketAddr> {
    ips.iter()
        .filter_map(|&ip| match (ip, ipv6_socket) {
            (IpAddr::V4(v4), false) => Some(SocketAddr::V4(SocketAddrV4::new(v4, port))),
            (IpAddr::V4(_), true) if v6only => None,
            (IpAddr::V4(v4), true) => Some(SocketAddr::V6(SocketAddrV6::new(
                v4.to_ipv6_mapped(),
                port,
                0,
                0,
            ))),
            (IpAddr::V6(v6), true) => Some(SocketAddr::V6(SocketAddrV6::new(v6, port, 0, 0))),
            (IpAddr::V6(_), false) => None,
        })
        .collect()
}
