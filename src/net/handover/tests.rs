use super::*;
use std::net::IpAddr;

fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
    // SAFETY: an all-zero sockaddr_in is valid.
    let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = port.to_be();
    sin.sin_addr.s_addr = u32::from_ne_bytes(ip);
    // SAFETY: reads the bytes of a plain C struct.
    unsafe {
        std::slice::from_raw_parts(
            (&sin as *const libc::sockaddr_in).cast::<u8>(),
            std::mem::size_of::<libc::sockaddr_in>(),
        )
    }
    .to_vec()
}

fn v6(ip: std::net::Ipv6Addr, port: u16) -> Vec<u8> {
    // SAFETY: an all-zero sockaddr_in6 is valid.
    let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sin6.sin6_port = port.to_be();
    sin6.sin6_addr.s6_addr = ip.octets();
    // SAFETY: reads the bytes of a plain C struct.
    unsafe {
        std::slice::from_raw_parts(
            (&sin6 as *const libc::sockaddr_in6).cast::<u8>(),
            std::mem::size_of::<libc::sockaddr_in6>(),
        )
    }
    .to_vec()
}

const TCP4: SocketFacts = SocketFacts {
    kind: SocketKind::Tcp { ipv6: false },
    handed_over: false,
    in_sandbox: true,
};
const TCP6: SocketFacts = SocketFacts {
    kind: SocketKind::Tcp { ipv6: true },
    ..TCP4
};
const UDP: SocketFacts = SocketFacts {
    kind: SocketKind::Udp,
    ..TCP4
};
fn only_443(port: u16) -> bool {
    port == 443
}

#[test]
fn a_handed_over_socket_or_one_of_the_host_is_never_connected_again() {
    let handed = SocketFacts {
        handed_over: true,
        ..TCP4
    };
    let unspec = [0u8; 16];
    for addr in [&unspec[..], &v4([198, 18, 0, 1], 443)] {
        assert_eq!(
            classify(handed, addr, only_443),
            Action::Refuse(libc::EISCONN)
        );
    }
    // A socket of the host's network airlock did not hand over (one accepted from a
    // listener, had the server one): refused whatever it dials, UDP too.
    for kind in [TCP4, UDP] {
        let foreign = SocketFacts {
            in_sandbox: false,
            ..kind
        };
        for addr in [&unspec[..], &v4([127, 0, 0, 1], 53)] {
            assert_eq!(
                classify(foreign, addr, only_443),
                Action::Refuse(libc::EACCES)
            );
        }
    }
}

#[test]
fn listed_ports_go_outside_udp_stays_inside_others_are_refused() {
    assert_eq!(
        classify(TCP4, &v4([198, 18, 0, 1], 443), only_443),
        Action::Outside("198.18.0.1:443".parse().unwrap())
    );
    // DNS over TCP is not served; TCP is never connected inside the namespace.
    assert_eq!(
        classify(TCP4, &v4([1, 2, 3, 4], 53), only_443),
        Action::Refuse(libc::ECONNREFUSED)
    );
    assert_eq!(
        classify(TCP4, &v4([198, 18, 0, 1], 22), only_443),
        Action::Refuse(libc::EACCES)
    );
    assert_eq!(
        classify(UDP, &v4([8, 8, 8, 8], 443), only_443),
        Action::InNamespace
    );
    let other = SocketFacts {
        kind: SocketKind::Other,
        ..TCP4
    };
    assert_eq!(
        classify(other, &v4([198, 18, 0, 1], 443), only_443),
        Action::Refuse(libc::EACCES)
    );
}

#[test]
fn addresses_are_read_as_the_kernel_reads_them() {
    let mapped = std::net::Ipv4Addr::new(198, 18, 0, 1).to_ipv6_mapped();
    assert_eq!(
        classify(TCP6, &v6(mapped, 443), only_443),
        Action::Outside("198.18.0.1:443".parse().unwrap())
    );
    // AF_UNSPEC disconnects a socket of the namespace (it never waits).
    assert_eq!(classify(TCP4, &[0u8; 16], only_443), Action::InNamespace);
    assert_eq!(classify(TCP4, &[0u8; 2], only_443), Action::InNamespace);
    // The length first, then the family, as tcp_v4_connect and tcp_v6_connect check.
    assert_eq!(
        classify(TCP4, &v6(mapped, 443), only_443),
        Action::Refuse(libc::EAFNOSUPPORT)
    );
    assert_eq!(
        classify(TCP6, &v4([198, 18, 0, 1], 443), only_443),
        Action::Refuse(libc::EINVAL)
    );
    let mut v4_padded = v4([198, 18, 0, 1], 443);
    v4_padded.resize(28, 0);
    assert_eq!(
        classify(TCP6, &v4_padded, only_443),
        Action::Refuse(libc::EAFNOSUPPORT)
    );
    assert_eq!(
        classify(TCP4, &v4([198, 18, 0, 1], 443)[..8], only_443),
        Action::Refuse(libc::EINVAL)
    );
    assert_eq!(classify(TCP4, &[], only_443), Action::Refuse(libc::EINVAL));
}

/// A second connect on a handed-over socket answers as the kernel would: `EISCONN` once
/// connected, the connection's error once it failed (a port nobody listens on resets it).
#[test]
fn a_second_connect_is_answered_by_the_connection_state() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let connected = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    connected
        .connect(&listener.local_addr().unwrap().into())
        .unwrap();
    assert_eq!(again_on_handed_over(&connected), libc::EISCONN);
    let closed_port = listener.local_addr().unwrap();
    drop(listener);
    let refused = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    refused.set_nonblocking(true).unwrap();
    let _ = refused.connect(&closed_port.into());
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(again_on_handed_over(&refused), libc::ECONNREFUSED);
    // The error is read once, as the kernel reads it.
    assert_eq!(again_on_handed_over(&refused), libc::ECONNABORTED);
}

#[test]
fn reachable_addresses_follow_the_socket_family() {
    let ips: Vec<IpAddr> = vec!["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()];
    assert_eq!(
        reachable(&ips, 443, false, false),
        vec!["192.0.2.1:443".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(
        reachable(&ips, 443, true, false),
        vec![
            "[::ffff:192.0.2.1]:443".parse::<SocketAddr>().unwrap(),
            "[2001:db8::1]:443".parse().unwrap()
        ]
    );
    assert_eq!(
        reachable(&ips, 443, true, true),
        vec!["[2001:db8::1]:443".parse::<SocketAddr>().unwrap()]
    );
}
