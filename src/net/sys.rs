//! The kernel side of egress: what the confine helper's `init` does inside the server's new
//! network namespace (while it still holds CAP_NET_ADMIN and CAP_NET_BIND_SERVICE there), and how
//! the sockets it makes reach airlock.
//!
//! In the namespace: loopback up, and a *local* route for every address (`local 0.0.0.0/0 dev lo`,
//! and `::/0` where IPv6 exists), so a connection to any address lands on a socket of this
//! namespace; then the resolver's sockets, UDP and TCP port 53. Nothing else exists in the
//! namespace: no interface leads out.
//!
//! Hand-over: airlock listens on an abstract unix socket (SOCK_SEQPACKET) whose random name is in
//! the plan; the helper connects to it before it clones `init` (abstract sockets belong to a
//! network namespace, and the helper is still in airlock's), `init` inherits the connection and,
//! once confined, sends every socket and the listener of its connect filter in one message
//! (SCM_RIGHTS) with a JSON header saying what each is. airlock
//! accepts only the connection whose peer (SO_PEERCRED) is the helper it started.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::allow::DNS_PORT;

/// What one handed-over socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Role {
    /// The resolver's UDP socket for IPv4 (port 53, IP_PKTINFO on).
    DnsUdp4,
    /// The resolver's UDP socket for IPv6 (port 53, IPV6_RECVPKTINFO on).
    DnsUdp6,
    /// The listener of the seccomp filter that hands every `connect` of the server to airlock
    /// (`super::handover`).
    ConnectNotify,
}

/// The sockets made inside the namespace.
#[derive(Debug)]
pub struct NamespaceSockets {
    pub sockets: Vec<(Role, OwnedFd)>,
}

// ---------------------------------------------------------------- inside the namespace (init)

/// Sets up the namespace and makes the sockets. Runs in `init`, before it drops privileges.
pub fn setup_namespace() -> io::Result<NamespaceSockets> {
    let lo = loopback_index()?;
    netlink_link_up(lo).map_err(|err| context(err, "bringing loopback up"))?;
    netlink_local_route(libc::AF_INET as u8, lo)
        .map_err(|err| context(err, "routing every IPv4 address to loopback"))?;
    // Without IPv6 in the kernel (or disabled) there is nothing to route: IPv6 connections fail
    // with "network unreachable", which is what an address not on the list deserves anyway.
    let ipv6 = netlink_local_route(libc::AF_INET6 as u8, lo).is_ok();
    let mut sockets = Vec::with_capacity(4);
    sockets.push((Role::DnsUdp4, udp_socket(false)?));
    if ipv6 {
        sockets.push((Role::DnsUdp6, udp_socket(true)?));
    }
    Ok(NamespaceSockets { sockets })
}

fn context(err: io::Error, what: &str) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
}

fn loopback_index() -> io::Result<u32> {
    // SAFETY: if_nametoindex reads a NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    if index == 0 {
        return Err(context(io::Error::last_os_error(), "finding loopback"));
    }
    Ok(index)
}

fn udp_socket(ipv6: bool) -> io::Result<OwnedFd> {
    let socket = if ipv6 {
        let socket = Socket::new(Domain::IPV6, Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
        socket.set_only_v6(true)?;
        set_int_option(&socket, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO)?;
        socket.bind(&SockAddr::from(SocketAddrV6::new(
            Ipv6Addr::UNSPECIFIED,
            DNS_PORT,
            0,
            0,
        )))?;
        socket
    } else {
        let socket = Socket::new(Domain::IPV4, Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
        set_int_option(&socket, libc::IPPROTO_IP, libc::IP_PKTINFO)?;
        socket.bind(&SockAddr::from(SocketAddrV4::new(
            Ipv4Addr::UNSPECIFIED,
            DNS_PORT,
        )))?;
        socket
    };
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

fn set_int_option(socket: &Socket, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads an int from a live local of the size given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One rtnetlink request, answered with an acknowledgement.
fn netlink_request(msg_type: u16, extra_flags: u16, payload: &[u8]) -> io::Result<()> {
    let socket = Socket::new(
        Domain::from(libc::AF_NETLINK),
        Type::RAW.cloexec(),
        Some(Protocol::from(libc::NETLINK_ROUTE)),
    )?;
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16 | extra_flags;
    let len = 16 + payload.len();
    let mut message = Vec::with_capacity(len);
    message.extend_from_slice(&(len as u32).to_ne_bytes());
    message.extend_from_slice(&msg_type.to_ne_bytes());
    message.extend_from_slice(&flags.to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes());
    message.extend_from_slice(&0u32.to_ne_bytes());
    message.extend_from_slice(payload);
    socket.send(&message)?;
    let mut answer = [MaybeUninit::<u8>::uninit(); 1024];
    let received = socket.recv(&mut answer)?;
    // SAFETY: recv initialised the first `received` bytes.
    let answer: Vec<u8> = answer[..received]
        .iter()
        .map(|byte| unsafe { byte.assume_init() })
        .collect();
    let kind = answer.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = answer
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (kind, code) {
        (Some(kind), Some(0)) if kind == libc::NLMSG_ERROR as u16 => Ok(()),
        (Some(kind), Some(code)) if kind == libc::NLMSG_ERROR as u16 => {
            Err(io::Error::from_raw_os_error(-code))
        }
        _ => Err(io::Error::other("unexpected rtnetlink answer")),
    }
}

fn netlink_link_up(index: u32) -> io::Result<()> {
    // struct ifinfomsg: family, pad, type, index, flags, change.
    let mut payload = vec![libc::AF_UNSPEC as u8, 0, 0, 0];
    payload.extend_from_slice(&(index as i32).to_ne_bytes());
    payload.extend_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
    payload.extend_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
    netlink_request(libc::RTM_NEWLINK, 0, &payload)
}

/// `ip route add local 0.0.0.0/0 dev lo` (or `::/0`).
fn netlink_local_route(family: u8, index: u32) -> io::Result<()> {
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
    let mut payload = vec![
        family,
        0,
        0,
        0,
        libc::RT_TABLE_MAIN,
        libc::RTPROT_BOOT,
        libc::RT_SCOPE_HOST,
        libc::RTN_LOCAL,
    ];
    payload.extend_from_slice(&0u32.to_ne_bytes());
    // RTA_OIF: struct rtattr (len, type) then the interface index.
    payload.extend_from_slice(&8u16.to_ne_bytes());
    payload.extend_from_slice(&libc::RTA_OIF.to_ne_bytes());
    payload.extend_from_slice(&index.to_ne_bytes());
    let flags = (libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    netlink_request(libc::RTM_NEWROUTE, flags, &payload)
}

// ---------------------------------------------------------------- the hand-over

/// The most sockets one hand-over carries (the kernel's SCM_MAX_FD is 253).
const MAX_FDS: usize = 240;

/// Sends the sockets over the channel, one message. Runs in `init`.
pub fn send_sockets(channel: &OwnedFd, sockets: &NamespaceSockets) -> io::Result<()> {
    if sockets.sockets.len() > MAX_FDS {
        return Err(io::Error::other("too many sockets for one hand-over"));
    }
    let roles: Vec<Role> = sockets.sockets.iter().map(|(role, _)| *role).collect();
    let header = serde_json::to_vec(&roles).map_err(io::Error::other)?;
    let fds: Vec<RawFd> = sockets
        .sockets
        .iter()
        .map(|(_, fd)| fd.as_raw_fd())
        .collect();
    let fd_bytes = std::mem::size_of_val(fds.as_slice());
    // SAFETY: CMSG_SPACE computes a size from an integer.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: header.as_ptr() as *mut libc::c_void,
        iov_len: header.len(),
    };
    // SAFETY: a zeroed msghdr is valid; every pointer set below points into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: msg_control points at `space` bytes, enough for one header and the fds
    // (CMSG_SPACE); CMSG_FIRSTHDR/CMSG_DATA stay inside that buffer.
    let rc = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
        libc::sendmsg(channel.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Connects the helper to airlock's channel (before `init` is cloned).
pub fn connect_channel(name: &str) -> io::Result<OwnedFd> {
    let socket = Socket::new(Domain::UNIX, Type::SEQPACKET.cloexec(), None)?;
    socket.connect(&abstract_address(name)?)?;
    Ok(socket.into())
}

fn abstract_address(name: &str) -> io::Result<SockAddr> {
    let mut path = vec![0u8];
    path.extend_from_slice(name.as_bytes());
    // An abstract name is the bytes after a leading NUL (unix(7)).
    SockAddr::unix(std::ffi::OsStr::from_bytes(&path))
}

use std::os::unix::ffi::OsStrExt;

/// airlock's end of the hand-over: a listening abstract socket with a random name.
#[derive(Debug)]
pub struct Channel {
    pub name: String,
    listener: Socket,
}

impl Channel {
    pub fn bind() -> io::Result<Channel> {
        let mut random = [0u8; 16];
        // SAFETY: getrandom writes at most the buffer's length into it.
        let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
        if got != random.len() as isize {
            return Err(io::Error::other("getrandom failed"));
        }
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let name = format!("airlock-egress-{}-{suffix}", std::process::id());
        let listener = Socket::new(Domain::UNIX, Type::SEQPACKET.cloexec(), None)?;
        listener.bind(&abstract_address(&name)?)?;
        listener.listen(8)?;
        listener.set_nonblocking(true)?;
        Ok(Channel { name, listener })
    }

    /// Waits for the helper `helper_pid` to connect and send the namespace's sockets. Other
    /// connections (anyone may connect to an abstract socket) are dropped.
    pub async fn receive(self, helper_pid: u32) -> io::Result<Vec<(Role, OwnedFd)>> {
        let listener = register(self.listener)?;
        let connection = loop {
            let mut ready = listener.readable().await?;
            match ready.try_io(|inner| inner.get_ref().accept()) {
                Ok(Ok((socket, _))) => {
                    if peer_pid(&socket)? == Some(helper_pid) {
                        break socket;
                    }
                    tracing::warn!("egress hand-over: dropped a connection from another process");
                }
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            }
        };
        connection.set_nonblocking(true)?;
        let connection = register(connection)?;
        loop {
            let mut ready = connection.readable().await?;
            match ready.try_io(|inner| receive_sockets(inner.get_ref().as_raw_fd())) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }
}

fn register(socket: Socket) -> io::Result<tokio::io::unix::AsyncFd<Socket>> {
    // SAFETY: a Socket owns its fd: it stays open and the same for the AsyncFd's whole life.
    unsafe { tokio::io::unix::AsyncFd::register(socket) }.map_err(|err| err.into_parts().1)
}

fn peer_pid(socket: &Socket) -> io::Result<Option<u32>> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live local `cred`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u32::try_from(cred.pid).ok())
}

fn receive_sockets(fd: RawFd) -> io::Result<Vec<(Role, OwnedFd)>> {
    let mut header = vec![0u8; 64 * 1024];
    // SAFETY: CMSG_SPACE computes a size from an integer.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) };
    let mut control = vec![0u8; space as usize];
    let mut iov = libc::iovec {
        iov_base: header.as_mut_ptr().cast(),
        iov_len: header.len(),
    };
    // SAFETY: a zeroed msghdr is valid; the pointers set below point into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len();
    // SAFETY: recvmsg writes into the buffers msg points at, within their lengths; CLOEXEC so
    // the fds never reach a child airlock starts.
    let received = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walks the control messages the kernel wrote, with the kernel's own lengths; each
    // SCM_RIGHTS fd is new in this process and owned by nobody else.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let bytes = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let raw = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(raw));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if received == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the sandbox closed the hand-over without sending its sockets",
        ));
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::other("the hand-over message was truncated"));
    }
    let roles: Vec<Role> =
        serde_json::from_slice(&header[..received as usize]).map_err(io::Error::other)?;
    if roles.len() != fds.len() {
        return Err(io::Error::other(format!(
            "the hand-over names {} sockets but carries {}",
            roles.len(),
            fds.len()
        )));
    }
    Ok(roles.into_iter().zip(fds).collect())
}

// ---------------------------------------------------------------- the resolver's UDP sockets

/// Receives one datagram: (length, sender, the address it was sent to).
pub fn recv_with_destination(
    fd: RawFd,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, std::net::IpAddr)> {
    // SAFETY: a zeroed sockaddr_storage is valid and large enough for any address.
    let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut control = [0u8; 128];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; the pointers set below point into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len();
    // SAFETY: recvmsg writes within the lengths msg gives.
    let received = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    let sender = socket_address(&from)
        .ok_or_else(|| io::Error::other("a datagram from a non-IP address"))?;
    let mut destination = None;
    // SAFETY: walks the control messages the kernel wrote, with its own lengths; the payloads
    // are the pktinfo structs the kernel documents for these types.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                    destination = Some(std::net::IpAddr::V4(Ipv4Addr::from(u32::from_be(
                        info.ipi_addr.s_addr,
                    ))));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                    destination =
                        Some(std::net::IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let destination =
        destination.ok_or_else(|| io::Error::other("a datagram without its destination"))?;
    Ok((received as usize, sender, destination))
}

fn socket_address(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let v4 =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::new(
                std::net::IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))),
                u16::from_be(v4.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let v6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(v6.sin6_addr.s6_addr),
                u16::from_be(v6.sin6_port),
                v6.sin6_flowinfo,
                v6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Sends `data` to `to` from the address `from` (the address the query was sent to, so the
/// client accepts the answer).
pub fn send_from(fd: RawFd, data: &[u8], to: SocketAddr, from: std::net::IpAddr) -> io::Result<()> {
    let to = SockAddr::from(to);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut control = [0u8; 128];
    // SAFETY: a zeroed msghdr is valid; the pointers set below point into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = to.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = to.len();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: the control buffer (128 bytes) holds one CMSG_SPACE of either pktinfo struct;
    // CMSG_FIRSTHDR/CMSG_DATA stay inside it.
    let rc = unsafe {
        match from {
            std::net::IpAddr::V4(v4) => {
                let size = std::mem::size_of::<libc::in_pktinfo>() as u32;
                msg.msg_controllen = libc::CMSG_SPACE(size) as usize;
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::IPPROTO_IP;
                (*cmsg).cmsg_type = libc::IP_PKTINFO;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size) as usize;
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from(v4).to_be(),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
            }
            std::net::IpAddr::V6(v6) => {
                let size = std::mem::size_of::<libc::in6_pktinfo>() as u32;
                msg.msg_controllen = libc::CMSG_SPACE(size) as usize;
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::IPPROTO_IPV6;
                (*cmsg).cmsg_type = libc::IPV6_PKTINFO;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size) as usize;
                let info = libc::in6_pktinfo {
                    ipi6_addr: libc::in6_addr {
                        s6_addr: v6.octets(),
                    },
                    ipi6_ifindex: 0,
                };
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
            }
        }
        libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The addresses of this host's own interfaces (in airlock's network namespace). A name must not
/// lead to one of them: a connection to the host's own public address arrives over loopback, at
/// every service bound to `0.0.0.0`.
pub fn own_addresses() -> io::Result<Vec<std::net::IpAddr>> {
    use std::net::IpAddr;
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a pointer to a list it allocates; it is freed below, once.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cursor = list;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, which is not freed yet.
        let entry = unsafe { &*cursor };
        let addr = entry.ifa_addr;
        if !addr.is_null() {
            // SAFETY: a non-null `ifa_addr` points to a sockaddr whose `sa_family` tells its
            // real type; each arm reads it as that type only.
            let ip = unsafe {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(addr as *const libc::sockaddr_in);
                        Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            sin.sin_addr.s_addr,
                        ))))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(addr as *const libc::sockaddr_in6);
                        Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
                    }
                    _ => None,
                }
            };
            if let Some(ip) = ip.filter(|ip| !out.contains(ip)) {
                out.push(ip);
            }
        }
        cursor = entry.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed exactly once; nothing points into it now.
    unsafe { libc::freeifaddrs(list) };
    Ok(out)
}
