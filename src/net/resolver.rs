//! The sandbox's resolver: every DNS query the server sends (to any address, port 53, UDP or TCP:
//! inside its network namespace every address is local and airlock holds port 53) is answered
//! here, in airlock, from the allow list. Nothing is forwarded: a query never leaves the sandbox,
//! so DNS is no channel out.
//!
//! - an allowed name (any entry names it, whatever the port): A → its stand-in address; AAAA and
//!   other types → no data (so clients use IPv4, which airlock connects);
//! - any other name: NXDOMAIN, and an A/AAAA lookup is audited as a refused connection (at most
//!   once a minute per name, see [`RefusalThrottle`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::allow::AllowList;
use super::budget::PerMinute;
use super::dns::{self, Answer, Malformed, Rcode};
use super::standin::{ANSWER_TTL_SECS, StandIns};

/// What to send back, and the name to audit as refused (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub packet: Vec<u8>,
    pub refused: Option<String>,
}

/// Answers one query packet; `None` for a packet that gets no answer (not a query).
pub fn respond(
    packet: &[u8],
    allow: &AllowList,
    table: &mut StandIns,
    now: Instant,
) -> Option<Reply> {
    let query = match dns::parse_query(packet) {
        Ok(query) => query,
        Err(Malformed::Drop) => return None,
        Err(Malformed::Answer { id, flags, rcode }) => {
            return Some(Reply {
                packet: dns::encode_error(id, flags, rcode),
                refused: None,
            });
        }
    };
    let address_lookup = matches!(query.qtype, dns::TYPE_A | dns::TYPE_AAAA);
    let (answer, refused) = if query.qclass != dns::CLASS_IN {
        (Answer::Error(Rcode::Refused), None)
    } else if !query.plain || !allow.resolves(&query.name) {
        let audited = address_lookup.then(|| query.name.clone());
        (Answer::Error(Rcode::NxDomain), audited)
    } else if query.qtype == dns::TYPE_A {
        match table.assign(&query.name, now) {
            Some(ip) => (
                Answer::Address {
                    ip,
                    ttl: ANSWER_TTL_SECS,
                },
                None,
            ),
            None => (Answer::Error(Rcode::ServFail), None),
        }
    } else {
        (Answer::NoData, None)
    };
    Some(Reply {
        packet: dns::encode_answer(&query, answer),
        refused,
    })
}

/// Audits a refused name (or address and port) at most once per [`RefusalThrottle::WINDOW`]: a
/// client asks for A and AAAA, retries, and walks the search list; one event per name says all
/// of it, and a server that loops over lookups cannot flood the log. A server that varies the
/// name or address instead meets a budget: at most [`RefusalThrottle::BUDGET`] refusals of each
/// kind are audited per window, and the next one audited says how many were not. Lookups and
/// connections have a budget each, so junk lookups cannot hide a connection to a private
/// address; what is left unsaid when the server ends is said then ([`Self::take_unrecorded`]).
#[derive(Debug, Default)]
pub struct RefusalThrottle {
    last: HashMap<String, Instant>,
    budgets: [Budget; 2],
}

/// One kind's budget in the current window.
#[derive(Debug, Default)]
struct Budget {
    audited: PerMinute,
    suppressed: u64,
}

/// What was refused: a name's lookup, or a connection to an address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    Lookup = 0,
    Connection = 1,
}

impl RefusalThrottle {
    pub const WINDOW: Duration = Duration::from_secs(60);
    pub const BUDGET: u32 = 600;
    const MAX_NAMES: usize = 4096;

    /// Refusals not audited since the last one that was, by kind: lookups, connections. Taken
    /// (counted from zero again).
    pub fn take_unrecorded(&mut self) -> (u64, u64) {
        let [lookups, connections] = &mut self.budgets;
        (
            std::mem::take(&mut lookups.suppressed),
            std::mem::take(&mut connections.suppressed),
        )
    }

    /// Should this refusal be written to the audit log? `Some(n)`: yes, and `n` refusals of its
    /// kind before it were not (over the budget).
    pub fn should_audit(&mut self, kind: RefusalKind, name: &str, now: Instant) -> Option<u64> {
        if let Some(last) = self.last.get(name)
            && now.saturating_duration_since(*last) < Self::WINDOW
        {
            return None;
        }
        let budget = &mut self.budgets[kind as usize];
        if !budget.audited.take(Self::BUDGET, now) {
            budget.suppressed += 1;
            return None;
        }
        let suppressed = std::mem::take(&mut budget.suppressed);
        if self.last.len() >= Self::MAX_NAMES {
            self.last
                .retain(|_, last| now.saturating_duration_since(*last) < Self::WINDOW);
        }
        if self.last.len() < Self::MAX_NAMES {
            self.last.insert(name.to_string(), now);
        }
        // Else thousands of distinct refused names within a minute: keep auditing them (within
        // the budget), unthrottled names are the ones worth seeing.
        Some(suppressed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::dns::{TYPE_A, TYPE_AAAA, encode_query, parse_answer};

    fn allow(entries: &[&str]) -> AllowList {
        AllowList::of(entries, "test")
    }

    fn ask(
        name: &str,
        qtype: u16,
        list: &AllowList,
        table: &mut StandIns,
    ) -> (dns::ParsedAnswer, Option<String>) {
        let reply = respond(&encode_query(42, name, qtype), list, table, Instant::now()).unwrap();
        (parse_answer(&reply.packet).unwrap(), reply.refused)
    }

    #[test]
    fn allowed_names_get_stand_ins_and_others_nxdomain() {
        let list = allow(&[
            "api.github.com",
            "*.githubusercontent.com",
            "example.org:8443",
        ]);
        let mut table = StandIns::default();
        let (answer, refused) = ask("api.github.com", TYPE_A, &list, &mut table);
        assert_eq!(
            (answer.rcode, answer.addresses.len(), refused),
            (0, 1, None)
        );
        let ip = answer.addresses[0];
        assert_eq!(
            table
                .name_of(std::net::IpAddr::V4(ip), Instant::now())
                .as_deref(),
            Some("api.github.com")
        );
        let (answer, _) = ask("raw.githubusercontent.com", TYPE_A, &list, &mut table);
        assert_eq!(answer.addresses.len(), 1);
        let (answer, _) = ask("EXAMPLE.org", TYPE_A, &list, &mut table);
        assert_eq!(
            answer.addresses.len(),
            1,
            "any port's entry resolves the name"
        );
        let (answer, refused) = ask("api.github.com", TYPE_AAAA, &list, &mut table);
        assert_eq!(
            (answer.rcode, answer.addresses.len(), refused),
            (0, 0, None)
        );
        let (answer, refused) = ask("evil.example", TYPE_A, &list, &mut table);
        assert_eq!(answer.rcode, 3);
        assert_eq!(refused.as_deref(), Some("evil.example"));
        let (_, refused) = ask("githubusercontent.com", TYPE_AAAA, &list, &mut table);
        assert_eq!(refused.as_deref(), Some("githubusercontent.com"));
        let (answer, refused) = ask("evil.example", 16, &list, &mut table);
        assert_eq!(
            (answer.rcode, refused),
            (3, None),
            "TXT: refused, not audited"
        );
    }

    #[test]
    fn any_name_resolves_but_malformed_names_never() {
        let list = allow(&["*:443"]);
        let mut table = StandIns::default();
        assert_eq!(
            ask("whatever.example", TYPE_A, &list, &mut table)
                .0
                .addresses
                .len(),
            1
        );
        let mut packet = encode_query(1, "abc.example", TYPE_A);
        packet[13] = b'.';
        let reply = respond(&packet, &list, &mut table, Instant::now()).unwrap();
        assert_eq!(parse_answer(&reply.packet).unwrap().rcode, 3);
        assert_eq!(reply.refused.as_deref(), Some("\\.bc.example"));
        assert!(respond(&[0; 3], &list, &mut table, Instant::now()).is_none());
    }

    #[test]
    fn refusals_are_audited_once_a_minute_per_name() {
        let mut throttle = RefusalThrottle::default();
        let start = Instant::now();
        assert_eq!(
            throttle.should_audit(RefusalKind::Lookup, "a.example", start),
            Some(0)
        );
        assert_eq!(
            throttle.should_audit(
                RefusalKind::Lookup,
                "a.example",
                start + Duration::from_secs(1)
            ),
            None
        );
        assert_eq!(
            throttle.should_audit(
                RefusalKind::Lookup,
                "b.example",
                start + Duration::from_secs(1)
            ),
            Some(0)
        );
        assert_eq!(
            throttle.should_audit(
                RefusalKind::Lookup,
                "a.example",
                start + RefusalThrottle::WINDOW
            ),
            Some(0)
        );
    }

    #[test]
    fn varied_refusals_meet_a_budget_and_the_next_record_counts_the_rest() {
        let mut throttle = RefusalThrottle::default();
        let start = Instant::now();
        let audited = (0..1000)
            .filter(|i| {
                throttle
                    .should_audit(
                        RefusalKind::Connection,
                        &format!("10.0.{i}.1 port 443"),
                        start,
                    )
                    .is_some()
            })
            .count();
        assert_eq!(audited, RefusalThrottle::BUDGET as usize);
        let later = start + RefusalThrottle::WINDOW;
        assert_eq!(
            throttle.should_audit(RefusalKind::Connection, "10.9.9.9 port 443", later),
            Some(400)
        );
        assert_eq!(
            throttle.should_audit(RefusalKind::Connection, "10.9.9.8 port 443", later),
            Some(0)
        );
    }

    /// Junk lookups spend the lookups' budget only: a connection to a private address after
    /// them is recorded. What was left unsaid is there to say at the end.
    #[test]
    fn lookups_cannot_spend_the_connections_budget() {
        let mut throttle = RefusalThrottle::default();
        let start = Instant::now();
        for i in 0..605 {
            throttle.should_audit(RefusalKind::Lookup, &format!("junk{i}.example"), start);
        }
        assert_eq!(
            throttle.should_audit(RefusalKind::Connection, "169.254.169.254 port 80", start),
            Some(0)
        );
        assert_eq!(throttle.take_unrecorded(), (5, 0));
        assert_eq!(throttle.take_unrecorded(), (0, 0));
    }
}
