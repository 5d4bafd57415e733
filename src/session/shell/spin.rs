//! Polling a moment before going to sleep, when the peer the loop waits for has lately answered
//! within that moment.
//!
//! Why: on a virtual machine a thread that sleeps and is woken pays a wake-up (a scheduler pass,
//! and often a halted vCPU to bring back) that costs more than a fast peer takes to answer.
//! Measured on the project's 2-vCPU VM with the native echo server behind `run`: the loop that
//! slept before every event took 4 to 6 µs longer a round trip than the one that polls first,
//! and used more CPU a call, not less (docs/run.md, "One commit a call, and polling before
//! sleeping").
//!
//! Polling is only worth it while the wait is short and a CPU is free, so it is adaptive and
//! bounded:
//! - only while one of the host's requests or none is in flight at the servers (airlock's own do
//!   not count: some are never answered): with several, the peers have work queued and want the
//!   CPUs (a build that polled then made 64-in-flight calls 15 % slower). Slow or remote calls
//!   count too, and the servers share one record of misses: a simple rule that may skip a poll
//!   that would have paid, never one that burns a CPU;
//! - for at most [`POLL_AT_MOST`], and only when the last poll for the same kind of wait (a
//!   server's answer, the host's next message) caught its event; after a miss the loop sleeps at
//!   once, and polls again every [`PROBE_EVERY`]th wait of that kind. A host that sends a call
//!   every few seconds, or a server that takes milliseconds, costs one poll of at most
//!   [`POLL_AT_MOST`] in [`PROBE_EVERY`] waits; an idle session has no waits to count, and sleeps;
//! - never with one CPU: the peer the loop waits for would need that CPU to answer;
//! - never on a multi-thread runtime (`serve --listen`): there a yield only puts the task back in
//!   a queue, and the pipes are looked at by whichever worker holds the I/O driver, so the loop
//!   would spin without seeing an event any sooner. On the current-thread runtime of `run` and
//!   stdio `serve`, a yield makes the runtime look at every pipe first (an `epoll_wait` with no
//!   timeout).
//!
//! Pure bookkeeping: the loop measures, this decides.

use std::time::Duration;

/// The longest the loop polls before it sleeps.
pub const POLL_AT_MOST: Duration = Duration::from_micros(20);

/// After a missed poll, every this many waits of the same kind poll again (a peer may have become
/// fast, or the miss was a one-off).
pub const PROBE_EVERY: u32 = 16;

/// What the loop is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaiting {
    /// The answer to the one request in flight at a server.
    Server,
    /// The host's next message (no request is in flight at a server).
    Host,
}

impl Awaiting {
    /// What the loop waits for with `requests` in flight at the servers, if a poll may be worth
    /// it: not with several, since then the servers have work queued and a poll would take a
    /// CPU they (and the host, still sending) can use; the next answer is not one step away.
    pub fn with_requests_at_servers(requests: usize) -> Option<Awaiting> {
        match requests {
            0 => Some(Awaiting::Host),
            1 => Some(Awaiting::Server),
            _ => None,
        }
    }
}

/// The record of one kind of wait.
#[derive(Debug, Clone, Copy, Default)]
struct Kind {
    /// The last poll missed its event.
    missed: bool,
    /// Waits since that miss.
    since_miss: u32,
}

/// When to poll before sleeping, learnt from how the last polls went.
#[derive(Debug)]
pub struct Spin {
    /// More than one CPU to run on (else polling only takes time from the peer), and a runtime
    /// whose yield looks at the pipes.
    worth_it: bool,
    server: Kind,
    host: Kind,
}

impl Spin {
    /// For a loop in a process that may run on `cpus` CPUs at once; `yield_polls_pipes`: whether
    /// a yield of its task makes the runtime look at the pipes (a current-thread runtime).
    pub fn new(cpus: usize, yield_polls_pipes: bool) -> Spin {
        Spin {
            worth_it: cpus > 1 && yield_polls_pipes,
            server: Kind::default(),
            host: Kind::default(),
        }
    }

    fn kind(&mut self, awaiting: Awaiting) -> &mut Kind {
        match awaiting {
            Awaiting::Server => &mut self.server,
            Awaiting::Host => &mut self.host,
        }
    }

    /// How long to poll for this wait before sleeping (zero: sleep at once). Counts the wait.
    pub fn budget(&mut self, awaiting: Awaiting) -> Duration {
        if !self.worth_it {
            return Duration::ZERO;
        }
        let kind = self.kind(awaiting);
        if !kind.missed {
            return POLL_AT_MOST;
        }
        kind.since_miss += 1;
        if kind.since_miss >= PROBE_EVERY {
            kind.since_miss = 0;
            return POLL_AT_MOST;
        }
        Duration::ZERO
    }

    /// How the poll of a wait went: whether its event came while polling.
    pub fn polled(&mut self, awaiting: Awaiting, caught: bool) {
        let kind = self.kind(awaiting);
        kind.missed = !caught;
        kind.since_miss = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_session_polls_and_keeps_polling_while_polls_catch() {
        let mut spin = Spin::new(2, true);
        for _ in 0..100 {
            assert_eq!(spin.budget(Awaiting::Server), POLL_AT_MOST);
            spin.polled(Awaiting::Server, true);
        }
    }

    #[test]
    fn after_a_miss_it_sleeps_at_once_and_probes_every_so_often() {
        let mut spin = Spin::new(2, true);
        assert_eq!(spin.budget(Awaiting::Server), POLL_AT_MOST);
        spin.polled(Awaiting::Server, false);
        let budgets: Vec<Duration> = (0..PROBE_EVERY * 2)
            .map(|_| spin.budget(Awaiting::Server))
            .collect();
        let polls: Vec<usize> = budgets
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_zero())
            .map(|(i, _)| i)
            .collect();
        // Nothing learnt from the probes here (no `polled`): one probe in every PROBE_EVERY.
        let every = PROBE_EVERY as usize;
        assert_eq!(polls, [every - 1, 2 * every - 1]);
    }

    #[test]
    fn a_probe_that_catches_its_event_brings_polling_back() {
        let mut spin = Spin::new(2, true);
        spin.polled(Awaiting::Server, false);
        while spin.budget(Awaiting::Server).is_zero() {}
        spin.polled(Awaiting::Server, true);
        assert_eq!(spin.budget(Awaiting::Server), POLL_AT_MOST);
        assert_eq!(spin.budget(Awaiting::Server), POLL_AT_MOST);
    }

    #[test]
    fn with_several_requests_at_the_servers_it_does_not_poll() {
        assert_eq!(Awaiting::with_requests_at_servers(0), Some(Awaiting::Host));
        assert_eq!(
            Awaiting::with_requests_at_servers(1),
            Some(Awaiting::Server)
        );
        assert_eq!(Awaiting::with_requests_at_servers(2), None);
        assert_eq!(Awaiting::with_requests_at_servers(64), None);
    }

    /// Over two probe periods, whatever the polls would have caught.
    fn never_polls(mut spin: Spin) -> bool {
        (0..PROBE_EVERY * 2).all(|_| {
            let zero = [Awaiting::Host, Awaiting::Server].map(|a| spin.budget(a).is_zero());
            spin.polled(Awaiting::Host, true);
            zero == [true, true]
        })
    }

    #[test]
    fn with_one_cpu_or_a_runtime_whose_yield_does_not_look_at_the_pipes_it_never_polls() {
        assert!(never_polls(Spin::new(1, true)), "one CPU");
        assert!(never_polls(Spin::new(2, false)), "a multi-thread runtime");
        assert!(!never_polls(Spin::new(2, true)), "the helper can tell");
    }

    #[test]
    fn the_two_kinds_of_wait_are_learnt_apart() {
        // A slow server's misses do not stop the loop polling for a fast host.
        let mut spin = Spin::new(2, true);
        spin.budget(Awaiting::Server);
        spin.polled(Awaiting::Server, false);
        assert_eq!(spin.budget(Awaiting::Server), Duration::ZERO);
        assert_eq!(spin.budget(Awaiting::Host), POLL_AT_MOST);
    }
}
