//! The lifecycle of one downstream server, pure: Declared → Starting (bounded by
//! `startup_timeout`) → Ready → (no call for `idle_timeout`) Stopped; the next request starts it
//! again. A crash or a failed start counts as a failure: the server waits a growing delay before
//! the next start, and after [`MAX_FAILURES`] consecutive failures it is Failed for good (until
//! the gateway restarts). A refusal (command not allowed, sandbox cannot be planned) is Failed at
//! once: retrying cannot help.

use std::time::{Duration, Instant};

use serde::Serialize;

/// Consecutive failures (failed starts or crashes) before a server is given up.
pub const MAX_FAILURES: u32 = 5;
/// A server that stayed Ready this long before it crashed starts a fresh failure count.
pub const STABLE_AFTER: Duration = Duration::from_secs(30);
const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// The delay before the start that follows the `failures`-th consecutive failure.
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (BACKOFF_BASE * 2u32.pow(doublings)).min(BACKOFF_CAP)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Declared,
    Starting,
    Ready,
    /// Ready, and no call for `idle_timeout`: being stopped.
    Idle,
    Stopping,
    Stopped,
    /// Crashed or failed to start; waits before the next start.
    Backoff,
    Failed,
}

#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Declared,
    Starting {
        deadline: Instant,
    },
    Ready {
        since: Instant,
    },
    /// The kill sequence is running; `then_start` when a request arrived meanwhile.
    Stopping {
        idle: bool,
        then_start: bool,
    },
    Stopped,
    Backoff {
        until: Instant,
    },
    Failed {
        permanent: bool,
    },
}

/// What a request that needs the server gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Demand {
    /// Send it now.
    Ready,
    /// Queue it: the server is starting (or will start after its backoff or stop).
    Wait,
    /// Queue it and start the server now.
    Start,
    /// Answer with an error: the server is given up.
    Unavailable(String),
}

/// What the shell must do after a timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    Nothing,
    /// Startup took longer than `startup_timeout`: stop it and count a failure.
    StartupTimedOut,
    /// No call for `idle_timeout`: stop it (not a failure).
    IdleStop,
    /// The backoff is over and something waits for the server: start it.
    Restart,
}

#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub state: State,
    pub startup_timeout: Duration,
    /// Extra time the next start gets to install the server's package first (first use); zero
    /// once a start got as far as a running process.
    pub install_allowance: Duration,
    pub idle_timeout: Option<Duration>,
    pub eager: bool,
    pub consecutive_failures: u32,
    pub restarts: u32,
    pub last_error: Option<String>,
    /// Last request sent or answer received: the idle clock.
    pub last_activity: Instant,
    /// How many starts there have been (a start's generation).
    pub generation: u64,
}

impl Lifecycle {
    pub fn new(
        startup_timeout: Duration,
        idle_timeout: Option<Duration>,
        eager: bool,
        now: Instant,
    ) -> Self {
        Lifecycle {
            state: State::Declared,
            startup_timeout,
            install_allowance: Duration::ZERO,
            idle_timeout,
            eager,
            consecutive_failures: 0,
            restarts: 0,
            last_error: None,
            last_activity: now,
            generation: 0,
        }
    }

    pub fn phase(&self) -> Phase {
        match self.state {
            State::Declared => Phase::Declared,
            State::Starting { .. } => Phase::Starting,
            State::Ready { .. } => Phase::Ready,
            State::Stopping { idle: true, .. } => Phase::Idle,
            State::Stopping { .. } => Phase::Stopping,
            State::Stopped => Phase::Stopped,
            State::Backoff { .. } => Phase::Backoff,
            State::Failed { .. } => Phase::Failed,
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready { .. })
    }

    pub fn is_starting(&self) -> bool {
        matches!(self.state, State::Starting { .. })
    }

    /// The kill sequence airlock started is running.
    pub fn is_stopping(&self) -> bool {
        matches!(self.state, State::Stopping { .. })
    }

    /// How long a start may take from spawn to the end of the handshake: `startup_timeout`,
    /// plus the install allowance while the package may still have to be installed.
    pub fn start_budget(&self) -> Duration {
        self.startup_timeout + self.install_allowance
    }

    /// Enters Starting with a new generation; returns it.
    pub fn begin_start(&mut self, now: Instant) -> u64 {
        if self.generation > 0 {
            self.restarts += 1;
        }
        self.generation += 1;
        self.state = State::Starting {
            deadline: now + self.start_budget(),
        };
        self.last_activity = now;
        self.generation
    }

    /// A request needs the server. `patient`: a call waits out a backoff; a list does not.
    pub fn demand(&mut self, now: Instant, patient: bool) -> Demand {
        self.last_activity = now;
        match &mut self.state {
            State::Ready { .. } => Demand::Ready,
            State::Starting { .. } => Demand::Wait,
            State::Stopping { then_start, .. } => {
                if patient {
                    *then_start = true;
                    Demand::Wait
                } else {
                    Demand::Unavailable("it is stopping".into())
                }
            }
            State::Declared | State::Stopped => Demand::Start,
            State::Backoff { until } => {
                if *until <= now {
                    Demand::Start
                } else if patient {
                    Demand::Wait
                } else {
                    Demand::Unavailable(format!(
                        "it is restarting after a failure ({})",
                        self.last_error.as_deref().unwrap_or("unknown error")
                    ))
                }
            }
            State::Failed { .. } => Demand::Unavailable(format!(
                "it failed: {}",
                self.last_error.as_deref().unwrap_or("unknown error")
            )),
        }
    }

    pub fn ready(&mut self, now: Instant) {
        self.state = State::Ready { since: now };
        self.last_activity = now;
    }

    /// The start failed or the server died on its own. Returns true when it is now given up.
    pub fn failed(&mut self, reason: String, permanent: bool, now: Instant) -> bool {
        if let State::Ready { since } = self.state
            && now.saturating_duration_since(since) >= STABLE_AFTER
        {
            self.consecutive_failures = 0;
        }
        self.consecutive_failures += 1;
        self.last_error = Some(reason);
        if permanent || self.consecutive_failures >= MAX_FAILURES {
            self.state = State::Failed { permanent };
            true
        } else {
            self.state = State::Backoff {
                until: now + backoff(self.consecutive_failures),
            };
            false
        }
    }

    /// airlock decided to stop it (idle, or a startup timeout before [`Self::failed`]).
    pub fn stopping(&mut self, idle: bool) {
        self.state = State::Stopping {
            idle,
            then_start: false,
        };
    }

    /// The kill sequence airlock started has ended. Returns true when it must start again.
    pub fn stopped(&mut self) -> bool {
        match self.state {
            State::Stopping { then_start, .. } => {
                self.state = State::Stopped;
                then_start
            }
            _ => false,
        }
    }

    /// The next instant [`Self::tick`] has something to do.
    pub fn next_deadline(&self, busy: bool) -> Option<Instant> {
        match self.state {
            State::Starting { deadline } => Some(deadline),
            State::Ready { .. } if !busy => self.idle_timeout.map(|t| self.last_activity + t),
            State::Backoff { until } => Some(until),
            _ => None,
        }
    }

    /// `busy`: requests in flight (never idle then); `wanted`: requests wait for this server.
    pub fn tick(&mut self, now: Instant, busy: bool, wanted: bool) -> Due {
        match self.state {
            State::Starting { deadline } if deadline <= now => Due::StartupTimedOut,
            State::Ready { .. } if !busy => match self.idle_timeout {
                Some(idle) if self.last_activity + idle <= now => {
                    self.stopping(true);
                    Due::IdleStop
                }
                _ => Due::Nothing,
            },
            State::Backoff { until } if until <= now => {
                if wanted || self.eager {
                    Due::Restart
                } else {
                    self.state = State::Stopped;
                    Due::Nothing
                }
            }
            _ => Due::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn declared_starts_on_demand_then_idles_and_restarts() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(secs(30), Some(secs(60)), false, t0);
        assert_eq!(life.phase(), Phase::Declared);
        assert_eq!(life.demand(t0, true), Demand::Start);
        assert_eq!(life.begin_start(t0), 1);
        assert_eq!(life.demand(t0, true), Demand::Wait);
        life.ready(t0 + secs(1));
        assert_eq!(life.demand(t0 + secs(2), true), Demand::Ready);
        assert_eq!(life.next_deadline(false), Some(t0 + secs(62)));
        assert_eq!(
            life.next_deadline(true),
            None,
            "never idle with a call in flight"
        );
        assert_eq!(life.tick(t0 + secs(61), false, false), Due::Nothing);
        assert_eq!(life.tick(t0 + secs(100), true, false), Due::Nothing);
        assert_eq!(life.tick(t0 + secs(62), false, false), Due::IdleStop);
        assert_eq!(life.phase(), Phase::Idle);
        // A call during the stop waits and restarts it afterwards.
        assert_eq!(life.demand(t0 + secs(63), true), Demand::Wait);
        assert!(life.stopped());
        assert_eq!(life.phase(), Phase::Stopped);
        assert_eq!(life.demand(t0 + secs(64), true), Demand::Start);
        assert_eq!(life.begin_start(t0 + secs(64)), 2);
        assert_eq!(life.restarts, 1);
    }

    #[test]
    fn idle_timeout_none_never_stops() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(secs(30), None, false, t0);
        life.begin_start(t0);
        life.ready(t0);
        assert_eq!(life.next_deadline(false), None);
        assert_eq!(life.tick(t0 + secs(1_000_000), false, false), Due::Nothing);
    }

    #[test]
    fn startup_timeout_is_due_at_the_deadline() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(secs(5), None, false, t0);
        life.begin_start(t0);
        assert_eq!(life.next_deadline(false), Some(t0 + secs(5)));
        assert_eq!(life.tick(t0 + secs(4), false, true), Due::Nothing);
        assert_eq!(life.tick(t0 + secs(5), false, true), Due::StartupTimedOut);
    }

    #[test]
    fn failures_back_off_and_are_bounded() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(secs(5), None, false, t0);
        let mut now = t0;
        for n in 1..MAX_FAILURES {
            life.begin_start(now);
            assert!(!life.failed(format!("boom {n}"), false, now));
            assert_eq!(life.phase(), Phase::Backoff);
            // Lists do not wait for a backing-off server; calls do.
            assert!(matches!(life.demand(now, false), Demand::Unavailable(_)));
            assert_eq!(life.demand(now, true), Demand::Wait);
            assert_eq!(life.next_deadline(false), Some(now + backoff(n)));
            now += backoff(n);
            assert_eq!(life.tick(now, false, true), Due::Restart);
        }
        life.begin_start(now);
        assert!(life.failed("last".into(), false, now));
        assert_eq!(life.phase(), Phase::Failed);
        assert!(
            matches!(life.demand(now, true), Demand::Unavailable(reason) if reason.contains("last"))
        );
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(3), Duration::from_secs(1));
        assert_eq!(backoff(40), BACKOFF_CAP);
    }

    #[test]
    fn refusals_fail_at_once_and_stable_servers_forget_old_failures() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(secs(5), None, false, t0);
        life.begin_start(t0);
        assert!(life.failed("not allowed".into(), true, t0));
        assert_eq!(life.state, State::Failed { permanent: true });

        let mut life = Lifecycle::new(secs(5), None, false, t0);
        for _ in 0..MAX_FAILURES - 1 {
            life.begin_start(t0);
            life.failed("x".into(), false, t0);
        }
        life.begin_start(t0);
        life.ready(t0);
        assert!(!life.failed("crash".into(), false, t0 + STABLE_AFTER));
        assert_eq!(life.consecutive_failures, 1);
    }

    #[test]
    fn backoff_without_demand_settles_to_stopped_unless_eager() {
        let t0 = Instant::now();
        let mut lazy = Lifecycle::new(secs(5), None, false, t0);
        lazy.begin_start(t0);
        lazy.failed("x".into(), false, t0);
        assert_eq!(lazy.tick(t0 + secs(1), false, false), Due::Nothing);
        assert_eq!(lazy.phase(), Phase::Stopped);
        let mut eager = Lifecycle::new(secs(5), None, true, t0);
        eager.begin_start(t0);
        eager.failed("x".into(), false, t0);
        assert_eq!(eager.tick(t0 + secs(1), false, false), Due::Restart);
    }
}
