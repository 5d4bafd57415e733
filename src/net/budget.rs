//! How many allowed connections of one sandbox are recorded one by one: at most
//! [`ConnectionBudget::BUDGET`] a minute. Each allowed connection is a `net_connect` and a
//! `net_close` in the audit log, and a server that opens connection after connection to an
//! allowed destination wrote about 1.6 MB of audit a second (a review's test), with no bound on
//! the log. Past the budget, a connection is counted per destination when it is made, and its
//! end (bytes, failure) when it ends; the counts go to the log as one event once the minute that
//! holds them is over, and when the sandbox is gone: nothing a server did is left unsaid, and
//! what it can make airlock write is bounded. Pure: the caller passes the time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

/// A budget of so many a minute: the refusals a sandbox's resolver audits one by one
/// ([`super::resolver::RefusalThrottle`]) and the connections it records ([`ConnectionBudget`]).
#[derive(Debug, Default)]
pub struct PerMinute {
    window_start: Option<Instant>,
    used: u32,
}

impl PerMinute {
    pub const WINDOW: Duration = Duration::from_secs(60);

    /// Takes one of `limit` in the minute that holds `now` (a minute starts at the first take
    /// after the last one ended); false when they are all taken.
    pub fn take(&mut self, limit: u32, now: Instant) -> bool {
        match self.window_start {
            Some(start) if now.saturating_duration_since(start) < Self::WINDOW => {}
            _ => {
                self.window_start = Some(now);
                self.used = 0;
            }
        }
        if self.used >= limit {
            return false;
        }
        self.used += 1;
        true
    }
}

/// The allowed connections of one sandbox recorded one by one, and the counts of the others.
#[derive(Debug, Default)]
pub struct ConnectionBudget {
    recorded: PerMinute,
    /// Connections not recorded one by one, by destination, since `counting_since`.
    unrecorded: BTreeMap<(String, u16), Tally>,
    /// The connections to destinations past [`ConnectionBudget::MAX_DESTINATIONS`], together.
    elsewhere: Tally,
    counting_since: Option<Instant>,
}

/// Connections to one destination that were not recorded one by one.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub connections: u64,
    /// Of those, the ones that did not get through (no address answered, or the server gave up).
    pub failed: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

/// The counts due for the log: by destination, and the rest together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unrecorded {
    pub destinations: Vec<(String, u16, Tally)>,
    pub elsewhere: Tally,
}

impl Unrecorded {
    /// Connections counted in all.
    pub fn connections(&self) -> u64 {
        self.destinations
            .iter()
            .map(|(_, _, tally)| tally.connections)
            .sum::<u64>()
            + self.elsewhere.connections
    }
}

impl ConnectionBudget {
    pub const WINDOW: Duration = PerMinute::WINDOW;
    pub const BUDGET: u32 = 600;
    /// Destinations counted one by one; the rest are counted together (the map stays bounded).
    pub const MAX_DESTINATIONS: usize = 256;

    /// Whether a new allowed connection to `host` and `port` is recorded one by one (within this
    /// minute's budget); if not, it is counted now, and its end later ([`Self::count_end`]).
    pub fn admit(&mut self, host: &str, port: u16, now: Instant) -> bool {
        if self.recorded.take(Self::BUDGET, now) {
            return true;
        }
        self.tally(host, port, now).connections += 1;
        false
    }

    /// Counts the end of a connection that [`ConnectionBudget::admit`] did not admit: its bytes,
    /// and whether it failed.
    pub fn count_end(
        &mut self,
        host: &str,
        port: u16,
        bytes: (u64, u64),
        failed: bool,
        now: Instant,
    ) {
        let tally = self.tally(host, port, now);
        tally.failed += u64::from(failed);
        tally.bytes_up = tally.bytes_up.saturating_add(bytes.0);
        tally.bytes_down = tally.bytes_down.saturating_add(bytes.1);
    }

    /// When the counts held now are due ([`Self::due`] without `ending`).
    pub fn due_at(&self) -> Option<Instant> {
        self.counting_since.map(|since| since + Self::WINDOW)
    }

    fn tally(&mut self, host: &str, port: u16, now: Instant) -> &mut Tally {
        self.counting_since.get_or_insert(now);
        let key = (host.to_string(), port);
        if self.unrecorded.contains_key(&key) || self.unrecorded.len() < Self::MAX_DESTINATIONS {
            self.unrecorded.entry(key).or_default()
        } else {
            &mut self.elsewhere
        }
    }

    /// The counts to record now, taken: once a minute has passed since the first of them was
    /// counted, or at once when the sandbox is gone (`ending`). `None` when nothing is due.
    pub fn due(&mut self, now: Instant, ending: bool) -> Option<Unrecorded> {
        let since = self.counting_since?;
        if !ending && now.saturating_duration_since(since) < Self::WINDOW {
            return None;
        }
        self.counting_since = None;
        let destinations = std::mem::take(&mut self.unrecorded)
            .into_iter()
            .map(|((host, port), tally)| (host, port, tally))
            .collect();
        Some(Unrecorded {
            destinations,
            elsewhere: std::mem::take(&mut self.elsewhere),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_records_the_budget_and_counts_the_rest_by_destination() {
        let start = Instant::now();
        let mut budget = ConnectionBudget::default();
        for _ in 0..ConnectionBudget::BUDGET {
            assert!(budget.admit("a.example", 443, start));
        }
        assert_eq!(budget.due_at(), None, "nothing counted yet");
        assert!(!budget.admit("a.example", 443, start));
        assert!(!budget.admit("a.example", 443, start));
        assert!(!budget.admit("b.example", 80, start));
        budget.count_end("a.example", 443, (10, 20), false, start);
        budget.count_end("a.example", 443, (1, 2), true, start);
        assert_eq!(budget.due_at(), Some(start + ConnectionBudget::WINDOW));
        assert_eq!(budget.due(start + Duration::from_secs(59), false), None);
        let due = budget.due(start + ConnectionBudget::WINDOW, false).unwrap();
        assert_eq!(due.connections(), 3);
        assert_eq!(
            due.destinations[0],
            (
                "a.example".to_string(),
                443,
                Tally {
                    connections: 2,
                    failed: 1,
                    bytes_up: 11,
                    bytes_down: 22
                }
            )
        );
        assert_eq!(due.destinations[1].0, "b.example");
        // Taken: nothing is said twice.
        assert_eq!(budget.due(start + ConnectionBudget::WINDOW * 2, true), None);
        // A new minute has a new budget.
        assert!(budget.admit("a.example", 443, start + ConnectionBudget::WINDOW));
    }

    #[test]
    fn counts_left_at_the_end_are_due_at_once_and_destinations_stay_bounded() {
        let start = Instant::now();
        let mut budget = ConnectionBudget::default();
        for _ in 0..ConnectionBudget::BUDGET {
            budget.admit("a.example", 443, start);
        }
        for n in 0..ConnectionBudget::MAX_DESTINATIONS + 10 {
            // Counted when made: one still open at the end is in the counts.
            assert!(!budget.admit(&format!("h{n}.example"), 443, start));
        }
        let due = budget.due(start, true).unwrap();
        assert_eq!(due.destinations.len(), ConnectionBudget::MAX_DESTINATIONS);
        assert_eq!(due.elsewhere.connections, 10);
        assert_eq!(
            due.connections(),
            ConnectionBudget::MAX_DESTINATIONS as u64 + 10
        );
    }
}
