//! Addresses: ranges written in an allow list ([`IpNet`]), the stand-in range, and the ranges a
//! *name* may never lead to ([`non_public_reason`]).
//!
//! Why names may not lead to private ranges: a server allowed `api.example.com` must not be able
//! to reach the cloud metadata service, the LAN or the user's loopback services by pointing a
//! name at them (a DNS record it controls, or a rebinding attack). Those addresses are reached
//! only when an allow list names them as addresses.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// The range stand-in addresses come from (RFC 2544's benchmarking range, also what fake-IP
/// resolvers use): never routed on the internet, and inside the sandbox's network namespace every
/// address is local anyway. An allow list may not name addresses inside it.
pub const STAND_IN_NET: IpNet = IpNet {
    addr: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)),
    prefix: 15,
};

/// An address with a prefix length: `10.0.0.0/8`, `10.1.2.3` (= `/32`), `::1` (= `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetParseError {
    #[error("{0:?} is not an IP address")]
    NotAnAddress(String),
    #[error("prefix length in {0:?} is out of range")]
    BadPrefix(String),
    #[error("{text:?} has bits set below its prefix length; write {canonical}")]
    HostBits { text: String, canonical: String },
}

impl IpNet {
    /// Parses `addr` or `addr/len`. The address must be the range's first address.
    pub fn parse(text: &str) -> Result<IpNet, NetParseError> {
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| NetParseError::NotAnAddress(text.to_string()))?;
        let max = max_prefix(addr);
        let prefix = match prefix_text {
            None => max,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| NetParseError::BadPrefix(text.to_string()))?,
        };
        let net = IpNet {
            addr: mask(addr, prefix),
            prefix,
        };
        if net.addr != addr {
            return Err(NetParseError::HostBits {
                text: text.to_string(),
                canonical: net.to_string(),
            });
        }
        Ok(net)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        same_family(self.addr, ip) && mask(ip, self.prefix) == self.addr
    }

    /// True when every address of `other` is in `self`.
    pub fn contains_net(&self, other: &IpNet) -> bool {
        same_family(self.addr, other.addr)
            && self.prefix <= other.prefix
            && self.contains(other.addr)
    }

    pub fn overlaps(&self, other: &IpNet) -> bool {
        self.contains_net(other) || other.contains_net(self)
    }

    pub fn is_single_address(&self) -> bool {
        self.prefix == max_prefix(self.addr)
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_single_address() {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

fn max_prefix(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let kept = if prefix == 0 {
                0
            } else {
                bits & (u32::MAX << (32 - u32::from(prefix)))
            };
            IpAddr::V4(Ipv4Addr::from(kept))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let kept = if prefix == 0 {
                0
            } else {
                bits & (u128::MAX << (128 - u32::from(prefix)))
            };
            IpAddr::V6(Ipv6Addr::from(kept))
        }
    }
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`, what a dual-stack socket reports) is that
/// IPv4 address: every decision sees one spelling.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Why a name may not lead to `ip`, or `None` for a public address.
///
/// The ranges: loopback, link-local (the cloud metadata address 169.254.169.254 among them),
/// private (RFC 1918, IPv6 unique-local), shared address space (100.64.0.0/10, where some clouds
/// put their metadata service), "this network", IANA's protocol assignments (192.0.0.0/24),
/// benchmarking, discard-only and segment-routing ranges, the 6to4 relay anycast, Azure's
/// platform endpoint, multicast, broadcast, the stand-in range, and IPv6 spellings that embed an
/// IPv4 address (mapped, translated, NAT64, 6to4), which are judged by that address; the rest of
/// NAT64's `64:ff9b::/32` (local-use, RFC 8215) and Teredo (`2001::/32`), which could lead
/// anywhere, are refused outright. Documentation ranges (TEST-NETs, `2001:db8::/32`) are judged
/// as public addresses: networks do put real services there (an egress proxy that package
/// registries resolve to), as a local route can put one at any address.
pub fn non_public_reason(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(v4: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = v4.octets();
    if v4.is_loopback() {
        Some("loopback")
    } else if v4.is_link_local() {
        Some("link-local")
    } else if v4.is_private() {
        Some("private")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared address space (carrier-grade NAT)")
    } else if a == 0 {
        Some("\"this network\"")
    } else if (a, b, c) == (192, 0, 0) {
        // IANA's special-purpose block: DS-Lite's tunnel ends (192.0.0.0/29) sit on the user's
        // own router, NAT64 discovery and the like; none is a place on the internet.
        Some("IETF protocol assignments (192.0.0.0/24)")
    } else if (a, b, c) == (192, 88, 99) {
        Some("6to4 relay anycast (deprecated)")
    } else if v4 == Ipv4Addr::new(168, 63, 129, 16) {
        // Azure's platform endpoint: like a metadata service, reached from inside its VMs.
        Some("a cloud platform's endpoint (Azure's 168.63.129.16)")
    } else if v4.is_multicast() || v4.is_broadcast() || a >= 240 {
        Some("multicast, broadcast or reserved")
    } else if STAND_IN_NET.contains(IpAddr::V4(v4)) {
        Some("airlock's stand-in range")
    } else {
        None
    }
}

fn v6_reason(v6: Ipv6Addr) -> Option<&'static str> {
    let segments = v6.segments();
    let embedded_v4 = |high: u16, low: u16| {
        Ipv4Addr::new(
            (high >> 8) as u8,
            (high & 0xff) as u8,
            (low >> 8) as u8,
            (low & 0xff) as u8,
        )
    };
    if v6.is_loopback() {
        Some("loopback")
    } else if v6.is_unspecified() {
        Some("unspecified")
    } else if (segments[0] & 0xffc0) == 0xfe80 {
        Some("link-local")
    } else if (segments[0] & 0xfe00) == 0xfc00 {
        Some("private (unique local)")
    } else if (segments[0] & 0xffc0) == 0xfec0 {
        Some("site-local")
    } else if v6.is_multicast() {
        Some("multicast")
    } else if segments[..6] == [0, 0, 0, 0, 0xffff, 0] {
        // IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765): a stateless translator would connect
        // to the embedded IPv4 address.
        v4_reason(embedded_v4(segments[6], segments[7]))
    } else if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64's well-known prefix: the gateway would connect to the embedded IPv4 address.
        v4_reason(embedded_v4(segments[6], segments[7]))
    } else if segments[..2] == [0x64, 0xff9b] {
        // The rest of NAT64's /32: its local-use prefix (RFC 8215, where the operator chooses
        // where the IPv4 address sits) and what is not assigned yet.
        Some("local-use NAT64 (RFC 8215)")
    } else if segments[0] == 0x2002 {
        // 6to4: the relay router delivers to the embedded IPv4 address.
        v4_reason(embedded_v4(segments[1], segments[2]))
    } else if segments[..2] == [0x2001, 0] {
        // Teredo: a tunnel whose far end (an IPv4 address, obfuscated in the low bits) may be
        // anywhere, this host's LAN included.
        Some("Teredo tunnel")
    } else if segments[..6] == [0, 0, 0, 0, 0, 0] {
        Some("IPv4-compatible (deprecated)")
    } else if segments[..4] == [0x100, 0, 0, 0] {
        Some("discard-only (100::/64)")
    } else if segments[..3] == [0x2001, 2, 0] {
        Some("benchmarking (2001:2::/48)")
    } else if segments[0] == 0x5f00 {
        Some("segment routing (5f00::/16)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn parses_addresses_and_ranges() {
        assert_eq!(IpNet::parse("10.1.2.3").unwrap().to_string(), "10.1.2.3");
        assert_eq!(
            IpNet::parse("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(IpNet::parse("::1").unwrap().to_string(), "::1");
        assert_eq!(
            IpNet::parse("2001:db8::/32").unwrap().to_string(),
            "2001:db8::/32"
        );
        assert!(matches!(
            IpNet::parse("10.1.2.3/8"),
            Err(NetParseError::HostBits { canonical, .. }) if canonical == "10.0.0.0/8"
        ));
        assert!(IpNet::parse("10.0.0.0/33").is_err());
        assert!(IpNet::parse("example.org").is_err());
        assert!(IpNet::parse("10.1.2").is_err());
        assert_eq!(IpNet::parse("0.0.0.0/0").unwrap().prefix, 0);
    }

    #[test]
    fn containment() {
        let net = IpNet::parse("10.0.0.0/8").unwrap();
        assert!(net.contains(ip("10.255.0.1")));
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(net.contains(ip("::ffff:10.0.0.1")), "mapped spelling");
        assert!(!net.contains(ip("::1")));
        assert!(net.contains_net(&IpNet::parse("10.1.0.0/16").unwrap()));
        assert!(!IpNet::parse("10.1.0.0/16").unwrap().contains_net(&net));
        assert!(net.overlaps(&IpNet::parse("10.1.0.0/16").unwrap()));
        assert!(!net.overlaps(&IpNet::parse("192.168.0.0/16").unwrap()));
    }

    #[test]
    fn names_never_lead_to_private_loopback_or_link_local() {
        for refused in [
            "127.0.0.1",
            "127.8.9.10",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "198.18.0.7",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fc00::2",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:c0a8:0101::1",
            "::7f00:1",
            "64:ff9b:1::a9fe:a9fe",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "192.0.0.1",
            "192.0.0.170",
            "::ffff:0:10.0.0.1",
            "::ffff:0:169.254.169.254",
            "::ffff:0:127.0.0.1",
            "192.88.99.1",
            "168.63.129.16",
            "100::1",
            "2001:2::1",
            "5f00::1",
            "64:ff9b::1:0:a9fe:a9fe",
        ] {
            assert!(non_public_reason(ip(refused)).is_some(), "{refused}");
        }
        for public in [
            "8.8.8.8",
            "168.63.129.17",
            "2a00:1450:4001::1",
            // Documentation ranges are not on the internet, but a network may put real services
            // there as it can anywhere (an egress proxy the package registries resolve to): they
            // are judged as public addresses are.
            "203.0.113.80",
            "192.0.2.1",
            "2001:db8::1",
            "172.32.0.1",
            "100.128.0.1",
            "2001:4860:4860::8888",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
            "192.0.1.1",
            "::ffff:0:8.8.8.8",
        ] {
            assert_eq!(non_public_reason(ip(public)), None, "{public}");
        }
    }
}
