//! Where a connection may go: the pure decisions, and [`Egress::target`] driven with a stub
//! resolver: a name that resolves to a private, loopback or link-local address is refused before
//! any connection is attempted (no packet is ever sent).

use std::net::Ipv4Addr;

use std::sync::Arc;

use super::*;

fn allow(entries: &[&str]) -> AllowList {
    AllowList::of(entries, "user policy.toml:3")
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn decides_by_stand_in_name_and_port_or_listed_address() {
    let list = allow(&["api.github.com", "example.org:8443", "127.0.0.1:5432"]);
    let mut table = StandIns::default();
    let now = Instant::now();
    let gh = IpAddr::V4(table.assign("api.github.com", now).unwrap());
    let ex = IpAddr::V4(table.assign("example.org", now).unwrap());
    assert!(matches!(
        decide(SocketAddr::new(gh, 443), &list, &mut table, now),
        Decision::Name { name, .. } if name == "api.github.com"
    ));
    assert!(matches!(
        decide(SocketAddr::new(gh, 22), &list, &mut table, now),
        Decision::Refuse { host, reason } if host == "api.github.com" && reason.contains("port 22")
    ));
    assert!(matches!(
        decide(SocketAddr::new(ex, 443), &list, &mut table, now),
        Decision::Refuse { .. }
    ));
    assert!(matches!(
        decide(SocketAddr::new(ex, 8443), &list, &mut table, now),
        Decision::Name { .. }
    ));
    assert!(matches!(
        decide(SocketAddr::new(ip("198.18.9.9"), 443), &list, &mut table, now),
        Decision::Refuse { reason, .. } if reason.contains("did not hand out")
    ));
    assert!(matches!(
        decide(SocketAddr::new(ip("::ffff:127.0.0.1"), 5432), &list, &mut table, now),
        Decision::Address { ip, .. } if ip == IpAddr::V4(Ipv4Addr::LOCALHOST)
    ));
    assert!(matches!(
        decide(
            SocketAddr::new(ip("127.0.0.1"), 443),
            &list,
            &mut table,
            now
        ),
        Decision::Refuse { .. }
    ));
    assert!(matches!(
        decide(SocketAddr::new(ip("8.8.8.8"), 443), &list, &mut table, now),
        Decision::Refuse { .. }
    ));
}

#[test]
fn names_lead_only_to_public_addresses_unless_listed() {
    let list = allow(&["internal.example", "10.1.2.3:443"]);
    let public = usable_addresses("a", 443, &[ip("93.184.215.14"), ip("10.0.0.1")], &[], &list);
    assert_eq!(public, Ok(vec![ip("93.184.215.14")]));
    let listed = usable_addresses("internal.example", 443, &[ip("10.1.2.3")], &[], &list);
    assert_eq!(listed, Ok(vec![ip("10.1.2.3")]));
    let other_port = usable_addresses("internal.example", 80, &[ip("10.1.2.3")], &[], &list);
    assert!(other_port.is_err());
    let err =
        usable_addresses("a", 443, &[ip("169.254.169.254"), ip("::1")], &[], &list).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a resolves only to addresses a name may not lead to: 169.254.169.254 (link-local), \
         ::1 (loopback); list the address itself to allow it"
    );
    assert_eq!(
        usable_addresses("a", 443, &[], &[], &list),
        Err(NoUsableAddress::None { name: "a".into() })
    );
    // The host's own public address (a service on 0.0.0.0 answers there): only when listed.
    let own = [ip("9.9.9.9")];
    let err = usable_addresses("a", 443, &[ip("9.9.9.9")], &own, &list).unwrap_err();
    assert!(
        err.to_string().contains("9.9.9.9 (this host's own)"),
        "{err}"
    );
    let listed_own = allow(&["9.9.9.9:443"]);
    assert_eq!(
        usable_addresses("a", 443, &[ip("9.9.9.9")], &own, &listed_own),
        Ok(vec![ip("9.9.9.9")])
    );
}

/// The real interface list: loopback is always among this host's own addresses.
#[test]
fn own_addresses_include_loopback() {
    let own = crate::net::sys::own_addresses().unwrap();
    assert!(own.contains(&ip("127.0.0.1")), "{own:?}");
}

/// Answers every name with fixed addresses, and counts the lookups.
#[derive(Default)]
struct StubResolver {
    answers: Vec<IpAddr>,
    asked: Mutex<Vec<String>>,
}

impl Resolve for Arc<StubResolver> {
    async fn resolve(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        self.asked.lock().unwrap().push(name.to_string());
        Ok(self.answers.clone())
    }
}

fn egress(
    entries: &[&str],
    resolves_to: &[&str],
) -> (Egress<Arc<StubResolver>>, Arc<StubResolver>) {
    let resolver = Arc::new(StubResolver {
        answers: resolves_to.iter().map(|t| ip(t)).collect(),
        asked: Mutex::default(),
    });
    let (tx, _events) = mpsc::channel(64);
    let egress = Egress::new("gh", allow(entries), tx, resolver.clone());
    (egress, resolver)
}

fn stand_in_for(egress: &Egress<Arc<StubResolver>>, name: &str) -> Ipv4Addr {
    egress
        .table
        .lock()
        .unwrap()
        .assign(name, Instant::now())
        .unwrap()
}

/// A name whose only addresses are private, loopback or link-local is refused, with the
/// addresses and why, before anything connects: `target` is the only way to an address, and
/// the hand-over opens a socket only for what it returns.
#[tokio::test]
async fn a_name_resolving_to_a_non_public_address_is_refused_without_a_packet() {
    for private in [
        "169.254.169.254",
        "127.0.0.1",
        "10.0.0.5",
        "192.168.1.1",
        "fe80::1",
        "::1",
    ] {
        let (egress, resolver) = egress(&["metadata.example"], &[private]);
        let stand_in = stand_in_for(&egress, "metadata.example");
        let refused = egress
            .target(SocketAddr::new(IpAddr::V4(stand_in), 443))
            .await
            .unwrap_err();
        assert_eq!(refused.host, "metadata.example");
        assert!(refused.reason.contains(private), "{}", refused.reason);
        assert_eq!(*resolver.asked.lock().unwrap(), ["metadata.example"]);
    }
}

#[tokio::test]
async fn an_allowed_name_leads_to_its_public_addresses_with_its_entry() {
    let (egress, _) = egress(&["api.github.com"], &["93.184.215.15", "10.0.0.1"]);
    let stand_in = stand_in_for(&egress, "api.github.com");
    let target = egress
        .target(SocketAddr::new(IpAddr::V4(stand_in), 443))
        .await
        .unwrap();
    assert_eq!(target.host, "api.github.com");
    assert_eq!(target.ips, vec![ip("93.184.215.15")]);
    assert_eq!(target.entry.rule.to_string(), "api.github.com");
}

#[tokio::test]
async fn unlisted_addresses_and_ports_are_refused_without_a_lookup() {
    let (egress, resolver) = egress(&["api.github.com", "127.0.0.1:5432"], &["93.184.215.15"]);
    for dialled in [
        "127.0.0.1:443",
        "8.8.8.8:443",
        "169.254.169.254:80",
        "198.18.0.99:443",
    ] {
        assert!(
            egress.target(dialled.parse().unwrap()).await.is_err(),
            "{dialled}"
        );
    }
    let stand_in = stand_in_for(&egress, "api.github.com");
    let refused = egress
        .target(SocketAddr::new(IpAddr::V4(stand_in), 5432))
        .await
        .unwrap_err();
    assert!(refused.reason.contains("port 5432"), "{}", refused.reason);
    let listed = egress
        .target("127.0.0.1:5432".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(listed.ips, vec![ip("127.0.0.1")]);
    assert!(resolver.asked.lock().unwrap().is_empty());
}
