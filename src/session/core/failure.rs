//! Failure bookkeeping and time: a server that fails to start, crashes, exits or is stopped
//! leaves no request unanswered (its gate answers each, and records each call's outcome); calls
//! end at their `tool_timeout`; the lifecycle's timers start, stop and restart servers.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Action, Core, Origin};
use crate::gate::Effects;
use crate::gateway::lifecycle::{Demand, Due, Phase, State};
use crate::mcp::Field;
use crate::mcp::message::id_key;

/// How long answers are awaited after the host closed its input when no server has a tool
/// timeout (the default `tool_timeout`).
const HOST_EOF_WAIT: Duration = Duration::from_secs(180);

impl Core {
    pub fn on_spawn_failed(
        &mut self,
        index: usize,
        generation: u64,
        reason: String,
        permanent: bool,
        now: Instant,
    ) {
        if self.servers.get(index).map(|s| s.life.generation) != Some(generation) {
            return;
        }
        self.server_failed(index, reason, permanent, false, now);
    }

    /// The server's stdout closed (it exited or crashed): the kill sequence makes sure.
    pub fn on_server_closed(&mut self, index: usize, generation: u64, now: Instant) {
        let Some(server) = self.servers.get(index) else {
            return;
        };
        if server.life.generation != generation || !server.alive {
            return;
        }
        match server.life.phase() {
            Phase::Starting | Phase::Ready => {
                let reason = if server.life.is_ready() {
                    "it exited (its output closed)"
                } else {
                    "it exited during startup (its output closed)"
                };
                self.server_failed(index, reason.into(), false, true, now);
            }
            Phase::Stopping | Phase::Idle => {
                let why = format!("server `{}`: it was stopped", server.name);
                self.fail_in_flight(index, &why, now);
            }
            _ => {}
        }
    }

    /// The process of `generation` is gone (the shell ran the kill sequence).
    pub fn on_exited(&mut self, index: usize, generation: u64, detail: &str, now: Instant) {
        let Some(server) = self.servers.get(index) else {
            return;
        };
        if server.life.generation != generation {
            return;
        }
        let (phase, alive) = (server.life.phase(), server.alive);
        match phase {
            Phase::Stopping | Phase::Idle => {
                self.servers[index].alive = false;
                let why = format!("server `{}`: it was stopped", self.servers[index].name);
                self.fail_in_flight(index, &why, now);
                let restart = self.servers[index].life.stopped();
                let wanted = restart || !self.servers[index].queue.is_empty();
                let retiring = self.servers[index].retiring;
                if wanted
                    && !retiring
                    && !self.shutting_down
                    && self.servers[index].life.demand(now, true) == Demand::Start
                {
                    self.start(index, now);
                }
            }
            Phase::Starting | Phase::Ready if alive => {
                // The detail may quote the server's stderr, which reaches the host's answers
                // too: redacted as anything quoted there is.
                let reason = format!("it exited ({})", self.redactor.loggable_text(detail));
                self.server_failed(index, reason, false, false, now);
            }
            _ => self.servers[index].alive = false,
        }
    }

    /// A start failed or a running server died. Every request sent to it is answered; requests
    /// queued for a start that failed are answered too (the next request tries again, after the
    /// backoff). `Single` never restarts: its one server failing ends the session.
    pub(super) fn server_failed(
        &mut self,
        index: usize,
        reason: String,
        permanent: bool,
        stop: bool,
        now: Instant,
    ) {
        let was_ready = self.servers[index].life.is_ready();
        let single = self.single();
        let permanent = permanent || single || self.servers[index].retiring;
        let server = &mut self.servers[index];
        let generation = server.life.generation;
        let gave_up = server.life.failed(reason.clone(), permanent, now);
        let was_alive = std::mem::replace(&mut server.alive, false);
        let giving_up = if gave_up && !single {
            "; giving up on this server"
        } else {
            ""
        };
        tracing::warn!(server = %server.name, "{reason}{giving_up}");
        if !single {
            // A gateway's host lists the other servers' tools as if this one did not exist:
            // its log is where the user looks for why. airlock's own words only: the reason may
            // quote the server (its error message, its stderr), which must not speak as airlock.
            let what = if gave_up {
                "failed and is given up"
            } else {
                "failed"
            };
            let text = format!(
                "server `{}` {what}: its tools are missing until it starts; airlock's stderr and `airlock status` say why",
                server.name
            );
            self.log_to_host("error", &text);
        }
        if stop && was_alive {
            self.out.push(Action::Stop {
                server: index,
                generation,
                reason: reason.clone(),
            });
        }
        let why = format!("server `{}`: {reason}", self.servers[index].name);
        if was_ready {
            self.fail_in_flight(index, &why, now);
        } else {
            self.fail_all(index, &why, now);
        }
        self.servers[index].listing = None;
        self.drop_from_aggregations(index, now);
    }

    fn drop_from_aggregations(&mut self, index: usize, now: Instant) {
        for aggregation in &mut self.aggregations {
            aggregation.waiting.remove(&index);
        }
        if let Some((_, waiting, _)) = &mut self.pending_initialize {
            waiting.remove(&index);
        }
        self.settle_aggregations(now);
    }

    /// Everything sent to the server and not answered gets its answer from the gate; requests
    /// still queued for the next start stay.
    fn fail_in_flight(&mut self, index: usize, why: &str, now: Instant) {
        let queued: BTreeSet<String> = self.servers[index]
            .queue
            .iter()
            .filter_map(|m| m.field("id").map(id_key))
            .collect();
        self.forget(index, &|down_key| !queued.contains(down_key), why, now);
    }

    /// Everything sent or queued gets its answer from the gate.
    fn fail_all(&mut self, index: usize, why: &str, now: Instant) {
        self.servers[index].queue.clear();
        self.forget(index, &|_| true, why, now);
    }

    /// Drops the requests of a server whose downstream key `gone` selects (their gate answers
    /// them), the server's requests to the host, and its progress tokens.
    fn forget(&mut self, index: usize, gone: &dyn Fn(&str) -> bool, why: &str, now: Instant) {
        let server = &mut self.servers[index];
        let mut kept_hosts = BTreeSet::new();
        let mut kept_tokens = BTreeSet::new();
        let keys: Vec<String> = server.outbound.keys().cloned().collect();
        for down_key in keys {
            if !gone(&down_key) {
                if let Some(Origin::Host {
                    host_id, progress, ..
                }) = server.outbound.get(&down_key)
                {
                    kept_hosts.insert(id_key(host_id));
                    kept_tokens.extend(progress.clone());
                }
                continue;
            }
            if let Some(Origin::Host { host_id, .. }) = server.outbound.remove(&down_key) {
                self.host_requests.remove(&id_key(&host_id));
            }
        }
        let mut fx = Effects::default();
        let keep = |host_key: &str| kept_hosts.contains(host_key);
        self.servers[index]
            .gate
            .on_server_gone(why, now, &mut fx, &keep);
        self.apply_gate(index, fx, now);
        let server = &mut self.servers[index];
        server
            .progress
            .retain(|token, _| kept_tokens.contains(token));
        self.inbound.retain(|_, (owner, _, _)| *owner != index);
    }

    /// The host closed its input. Nothing more comes from it, but what it asked before is still
    /// answered (it may still be reading): a confirmation it was asked for can no longer come,
    /// so those calls are refused now; a server's request to it is answered with an error
    /// (`Gateway`; in `Single` the server's input closes, as it would without airlock). In
    /// `Single` the server's input closes at once (after the requests the host sent before it,
    /// even if the server is still starting), so a server that exits on EOF ends with its own
    /// status. The session ends once nothing the host asked is in flight
    /// ([`Core::host_finished`]), or at the latest when the longest tool timeout has passed.
    pub fn host_closed(&mut self, now: Instant) {
        if self.host_gone {
            return;
        }
        self.host_gone = true;
        let wait = self
            .servers
            .iter()
            .filter_map(|s| s.spec.tool_timeout)
            .max()
            .unwrap_or(HOST_EOF_WAIT);
        // A timeout too large for the clock leaves the wait to the answers themselves.
        self.answers_due_by = now.checked_add(wait);
        for index in 0..self.servers.len() {
            let mut fx = Effects::default();
            self.servers[index].gate.host_closed(now, &mut fx);
            if !fx.is_empty() {
                self.apply_gate(index, fx, now);
            }
        }
        if self.single() {
            self.close_server_input();
            return;
        }
        let unanswerable: Vec<(usize, u64, Value)> =
            self.inbound.drain().map(|(_, request)| request).collect();
        for (index, generation, id) in unanswerable {
            let server = &self.servers[index];
            if server.alive && server.life.generation == generation {
                self.tell_host_gone(index, id, now);
            }
        }
    }

    /// The host closed its input and nothing it asked is still in flight (or the wait for it
    /// is over): the session may end.
    pub fn host_finished(&self, now: Instant) -> bool {
        // Asked after every step: nothing but a flag while the host is there.
        if !self.host_gone {
            return false;
        }
        let waiting = !self.aggregations.is_empty()
            || self.pending_initialize.is_some()
            || self.servers.iter().any(|s| s.gate.in_flight() > 0);
        !waiting || self.answers_due_by.is_some_and(|due| now >= due)
    }

    /// `Single`, once the host is gone and the server Ready: its input closes, after what is
    /// queued and after the calls waiting for a tool listing went on.
    pub(super) fn close_server_input(&mut self) {
        let server = &mut self.servers[0];
        let waiting = server.gate.awaits_listing();
        if self.host_gone
            && !self.server_input_closed
            && server.alive
            && server.life.is_ready()
            && !waiting
        {
            self.server_input_closed = true;
            self.out.push(Action::CloseInput {
                server: 0,
                generation: server.life.generation,
            });
        }
    }

    /// Stops every server (host gone, or a signal), `reason` being why (each server's exit
    /// event says it). Nothing starts afterwards.
    /// Every call in flight, at every server, gets its answer (an error naming `why`) and its
    /// outcome record now, not when its server ends: for a stop nobody waits on (a signal, a
    /// host that stopped reading), which the host may end with SIGKILL before the kill sequence
    /// is through. A server's answer that comes later is dropped as an answer to nothing.
    pub fn abandon_in_flight(&mut self, why: &str, now: Instant) {
        for index in 0..self.servers.len() {
            self.fail_all(index, why, now);
        }
    }

    pub fn shutdown(&mut self, reason: &str) {
        self.shutting_down = true;
        self.close_listens();
        for (index, server) in self.servers.iter_mut().enumerate() {
            let running = server.alive || server.life.is_starting();
            if running {
                server.life.stopping(false);
                self.out.push(Action::Stop {
                    server: index,
                    generation: server.life.generation,
                    reason: reason.to_string(),
                });
            }
        }
    }

    /// The next instant [`Core::on_tick`] has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        let servers = self
            .servers
            .iter()
            .flat_map(|s| [s.life.next_deadline(s.busy()), s.gate.next_deadline()]);
        let aggregations = self.aggregations.iter().map(|a| Some(a.deadline));
        let initialize = self.pending_initialize.iter().map(|(_, _, d)| Some(*d));
        servers
            .chain(aggregations)
            .chain(initialize)
            .chain([self.parked_deadline(), self.answers_due_by])
            .flatten()
            .min()
    }

    pub fn on_tick(&mut self, now: Instant) {
        for index in 0..self.servers.len() {
            let mut fx = Effects::default();
            self.servers[index].gate.on_tick(now, &mut fx);
            if !fx.is_empty() {
                self.apply_gate(index, fx, now);
            }
            self.lifecycle_tick(index, now);
        }
        self.expire_parked(now, None);
        self.settle_aggregations(now);
    }

    fn lifecycle_tick(&mut self, index: usize, now: Instant) {
        let server = &mut self.servers[index];
        let busy = server.busy();
        let wanted = !server.queue.is_empty() || server.gate.awaits_listing();
        match server.life.tick(now, busy, wanted) {
            Due::Nothing => {}
            Due::StartupTimedOut => {
                if server.alive && !server.handshake_sent {
                    // Still waiting for the host to connect: not the server's fault.
                    server.life.state = State::Starting {
                        deadline: now + server.life.startup_timeout,
                    };
                    return;
                }
                let reason = if server.life.install_allowance.is_zero() {
                    format!(
                        "it did not complete the MCP handshake within startup_timeout ({}s)",
                        server.life.startup_timeout.as_secs()
                    )
                } else {
                    format!(
                        "it did not start within startup_timeout ({}s) plus {}s to install its package",
                        server.life.startup_timeout.as_secs(),
                        server.life.install_allowance.as_secs()
                    )
                };
                let alive = server.alive;
                let generation = server.life.generation;
                self.server_failed(index, reason.clone(), false, true, now);
                if !alive {
                    // Still spawning: the shell stops it when the spawn reports.
                    self.out.push(Action::Stop {
                        server: index,
                        generation,
                        reason,
                    });
                }
            }
            Due::IdleStop => {
                let generation = server.life.generation;
                let idle = server.life.idle_timeout.unwrap_or_default().as_secs();
                tracing::info!(server = %server.name, "idle for {idle}s: stopping it");
                self.out.push(Action::Stop {
                    server: index,
                    generation,
                    reason: format!("idle for {idle}s"),
                });
            }
            Due::Restart => self.start(index, now),
        }
    }
}
