//! The relay's decisions, and the relay itself driven with a stub resolver and a recording
//! connector: a name that resolves to a private, loopback or link-local address is refused
//! before any connection is attempted (no packet is ever sent; the connector records every try).

use std::net::Ipv4Addr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;
use crate::net::allow::NetRule;

fn allow(entries: &[&str]) -> AllowList {
    AllowList {
        entries: entries
            .iter()
            .map(|text| AllowEntry {
                rule: NetRule::parse(text).unwrap(),
                origin: "user policy.toml:3".into(),
            })
            .collect(),
    }
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
    let public = usable_addresses("a", 443, &[ip("203.0.113.5"), ip("10.0.0.1")], &[], &list);
    assert_eq!(public, Ok(vec![ip("203.0.113.5")]));
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
    let own = [ip("198.51.100.7")];
    let err = usable_addresses("a", 443, &[ip("198.51.100.7")], &own, &list).unwrap_err();
    assert!(
        err.to_string().contains("198.51.100.7 (this host's own)"),
        "{err}"
    );
    let listed_own = allow(&["198.51.100.7:443"]);
    assert_eq!(
        usable_addresses("a", 443, &[ip("198.51.100.7")], &own, &listed_own),
        Ok(vec![ip("198.51.100.7")])
    );
}

/// The real interface list: loopback is always among this host's own addresses.
#[test]
fn own_addresses_include_loopback() {
    let own = crate::net::sys::own_addresses().unwrap();
    assert!(own.contains(&ip("127.0.0.1")), "{own:?}");
}

/// Answers every name with fixed addresses.
struct StubResolver(Vec<IpAddr>);

impl Resolve for StubResolver {
    async fn resolve(&self, _name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        Ok(self.0.clone())
    }
}

/// Records every connection attempt; hands out one end of an in-memory pipe whose other end
/// echoes in upper case.
#[derive(Default)]
struct RecordingConnector {
    tried: Mutex<Vec<SocketAddr>>,
}

impl Connect for Arc<RecordingConnector> {
    type Stream = DuplexStream;
    async fn connect(&self, to: SocketAddr) -> io::Result<DuplexStream> {
        self.tried.lock().unwrap().push(to);
        let (ours, mut remote) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while let Ok(n) = remote.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let upper: Vec<u8> = buf[..n].to_ascii_uppercase();
                if remote.write_all(&upper).await.is_err() {
                    break;
                }
            }
        });
        Ok(ours)
    }
}

struct Harness {
    egress: Arc<Egress<StubResolver, Arc<RecordingConnector>>>,
    connector: Arc<RecordingConnector>,
    events: mpsc::Receiver<NetAudit>,
}

fn harness(entries: &[&str], resolves_to: &[&str]) -> Harness {
    let connector = Arc::new(RecordingConnector::default());
    let (tx, events) = mpsc::channel(64);
    let egress = Egress::new(
        "gh",
        allow(entries),
        tx,
        StubResolver(resolves_to.iter().map(|t| ip(t)).collect()),
        connector.clone(),
    );
    Harness {
        egress: Arc::new(egress),
        connector,
        events,
    }
}

/// Acknowledges events as written and collects them as JSON.
fn drain(mut events: mpsc::Receiver<NetAudit>) -> tokio::task::JoinHandle<Vec<Value>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(NetAudit { event, written }) = events.recv().await {
            seen.push(serde_json::to_value(&event).unwrap());
            if let Some(written) = written {
                let _ = written.send(());
            }
        }
        seen
    })
}

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
        let Harness {
            egress,
            connector,
            events,
        } = harness(&["metadata.example"], &[private]);
        let collected = drain(events);
        let stand_in = egress
            .table
            .lock()
            .unwrap()
            .assign("metadata.example", Instant::now())
            .unwrap();
        let (client, _server_side) = tokio::io::duplex(64);
        egress
            .handle_dialled(client, SocketAddr::new(IpAddr::V4(stand_in), 443))
            .await;
        drop(egress);
        let events = collected.await.unwrap();
        assert!(
            connector.tried.lock().unwrap().is_empty(),
            "{private}: a connection was attempted"
        );
        assert_eq!(events.len(), 1, "{private}: {events:?}");
        assert_eq!(events[0]["event"], "net_connect");
        assert_eq!(events[0]["decision"], "deny");
        assert_eq!(events[0]["detail"]["host"], "metadata.example");
        assert!(
            events[0]["reason"].as_str().unwrap().contains(private),
            "{events:?}"
        );
    }
}

#[tokio::test]
async fn an_allowed_name_is_relayed_and_audited_with_bytes() {
    let Harness {
        egress,
        connector,
        events,
    } = harness(&["api.github.com"], &["203.0.113.7"]);
    let collected = drain(events);
    let stand_in = egress
        .table
        .lock()
        .unwrap()
        .assign("api.github.com", Instant::now())
        .unwrap();
    let (client, mut server_side) = tokio::io::duplex(1024);
    let relay = {
        let egress = egress.clone();
        tokio::spawn(async move {
            egress
                .handle_dialled(client, SocketAddr::new(IpAddr::V4(stand_in), 443))
                .await
        })
    };
    server_side.write_all(b"hello").await.unwrap();
    let mut answer = [0u8; 5];
    server_side.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HELLO");
    server_side.shutdown().await.unwrap();
    drop(server_side);
    relay.await.unwrap();
    drop(egress);
    let events = collected.await.unwrap();
    assert_eq!(
        *connector.tried.lock().unwrap(),
        vec![SocketAddr::new(ip("203.0.113.7"), 443)]
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["decision"], "allow");
    assert_eq!(events[0]["detail"]["upstream"], "203.0.113.7:443");
    assert_eq!(
        events[0]["rule"],
        "sandbox.network allow \"api.github.com\""
    );
    assert_eq!(events[1]["event"], "net_close");
    assert_eq!(events[1]["detail"]["bytes_up"], 5);
    assert_eq!(events[1]["detail"]["bytes_down"], 5);
    assert_eq!(events[0]["detail"]["conn"], events[1]["detail"]["conn"]);
}

#[tokio::test]
async fn unlisted_addresses_and_ports_are_refused_without_a_packet() {
    let Harness {
        egress,
        connector,
        events,
    } = harness(&["api.github.com", "127.0.0.1:5432"], &["203.0.113.7"]);
    let collected = drain(events);
    for dialled in [
        "127.0.0.1:443",
        "8.8.8.8:443",
        "169.254.169.254:80",
        "198.18.0.99:443",
    ] {
        let (client, _keep) = tokio::io::duplex(64);
        egress
            .handle_dialled(client, dialled.parse().unwrap())
            .await;
    }
    // The server's side closes at once, so the allowed connection ends after its decision.
    let (client, closed) = tokio::io::duplex(64);
    drop(closed);
    egress
        .handle_dialled(client, "127.0.0.1:5432".parse().unwrap())
        .await;
    drop(egress);
    let events = collected.await.unwrap();
    let decisions: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "net_connect")
        .map(|e| e["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["deny", "deny", "deny", "deny", "allow"]);
    assert_eq!(
        *connector.tried.lock().unwrap(),
        vec!["127.0.0.1:5432".parse::<SocketAddr>().unwrap()],
        "only the listed address was connected to"
    );
}
