//! One turn of the loop: wait for something to do, then do it.

use std::future::poll_fn;
use std::task::{Context, Poll};
use std::time::Instant;

use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};

use super::link::{Connected, Input, attach, attach_remote};
use super::spin::{Awaiting, Spin};
use super::{EndReason, Loop, ShellError, backpressure};
use crate::audit::{Event, EventKind};
use crate::gateway::lifecycle::Phase;
use crate::gateway::remote::Launch;
use crate::mcp::Frame;
use crate::mcp::message::{Unreadable, unreadable_line_reply};
use crate::process::EndedBy;
use crate::session::exit::{ended_by, exit_detail};

/// Messages taken from one reader in one step before the others get a turn.
const BATCH_LINES: usize = 512;

/// What one turn of the loop found.
pub(super) enum Wake {
    Host(Frame),
    HostEof,
    HostGone,
    Server { server: usize, frame: Frame },
    ServerEof { server: usize },
    Input(Input),
    Tick,
    Signal(&'static str),
}

impl<HR, HW> Loop<HR, HW>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
{
    /// Waits for the next thing to do when nothing is ready: polls a moment first when the last
    /// such wait was that short (see [`spin`]), then sleeps.
    pub(super) async fn idle(&mut self, spin: &mut Spin) -> Wake {
        let in_flight = self.core.host_requests_at_servers(2);
        let Some(awaiting) = Awaiting::with_requests_at_servers(in_flight) else {
            return poll_fn(|cx| self.poll_wake(cx)).await;
        };
        let budget = spin.budget(awaiting);
        if !budget.is_zero() {
            let started = Instant::now();
            loop {
                // Lets the runtime look at every pipe without waiting (an `epoll_wait` with no
                // timeout) before this task runs again.
                tokio::task::yield_now().await;
                if let Poll::Ready(wake) = poll_fn(|cx| Poll::Ready(self.poll_wake(cx))).await {
                    spin.polled(awaiting, true);
                    return wake;
                }
                if started.elapsed() >= budget {
                    break;
                }
            }
            spin.polled(awaiting, false);
        }
        poll_fn(|cx| self.poll_wake(cx)).await
    }

    /// Waits for the next thing to do: a signal, a helper's report, a line from the host or a
    /// server, the timer. Pipes with a backlog are drained on the way.
    pub(super) fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<Wake> {
        if let Poll::Ready(Some(input)) = self.inputs_rx.poll_recv(cx) {
            return Poll::Ready(match input {
                Input::Signal(name) => Wake::Signal(name),
                Input::HostGone => Wake::HostGone,
                input => Wake::Input(input),
            });
        }
        self.drain_outlets(cx);
        if self.host_out.has_failed() && !self.shutting_down {
            return Poll::Ready(Wake::HostGone);
        }
        if let Poll::Ready(wake) = self.poll_readers(cx) {
            return Poll::Ready(wake);
        }
        if self.armed.is_some() && self.timer.as_mut().poll(cx).is_ready() {
            self.armed = None;
            return Poll::Ready(Wake::Tick);
        }
        Poll::Pending
    }

    fn drain_outlets(&mut self, cx: &mut Context<'_>) {
        if self.host_out.busy()
            && let Poll::Ready(Err(err)) = self.host_out.poll_drain(cx)
        {
            tracing::debug!("writing to the host failed: {err}");
        }
        for (server, link) in self.links.iter_mut().enumerate() {
            let Some(link) = link.as_mut() else {
                continue;
            };
            let Some(writer) = link.writer.as_mut().filter(|w| w.busy()) else {
                continue;
            };
            match writer.poll_drain(cx) {
                // Shut down after its last bytes: dropping it closes the server's stdin.
                Poll::Ready(Ok(true)) => link.writer = None,
                Poll::Ready(Err(err)) => {
                    tracing::debug!(server = %self.names[server], "writing to the server failed: {err}");
                }
                _ => {}
            }
        }
    }

    /// Polls the readers backpressure allows, round robin.
    fn poll_readers(&mut self, cx: &mut Context<'_>) -> Poll<Wake> {
        let queued = self.host_out.queued();
        let host_allowed = backpressure::read_host(queued, &self.limits);
        let servers_allowed = backpressure::read_servers(queued, &self.limits);
        let readers = 1 + self.links.len();
        for step in 0..readers {
            let index = (self.next_reader + step) % readers;
            let wake = if index == 0 {
                let Some(host) = self.host_in.as_mut().filter(|_| host_allowed) else {
                    continue;
                };
                match host.poll_frame(cx) {
                    Poll::Pending => continue,
                    Poll::Ready(Ok(Some(frame))) => Wake::Host(frame),
                    Poll::Ready(Ok(None)) => Wake::HostEof,
                    Poll::Ready(Err(err)) => {
                        tracing::warn!(
                            "reading from the host failed: {err}; treating it as closed"
                        );
                        Wake::HostEof
                    }
                }
            } else {
                let server = index - 1;
                let Some(link) = self.links[server].as_mut().filter(|_| servers_allowed) else {
                    continue;
                };
                let Some(reader) = link.reader.as_mut() else {
                    continue;
                };
                match reader.poll_frame(cx) {
                    Poll::Pending => continue,
                    Poll::Ready(Ok(Some(frame))) => Wake::Server { server, frame },
                    Poll::Ready(Ok(None) | Err(_)) => Wake::ServerEof { server },
                }
            };
            if matches!(wake, Wake::HostEof) {
                self.host_in = None;
            }
            if let Wake::ServerEof { server } = wake
                && let Some(link) = self.links[server].as_mut()
            {
                link.reader = None;
            }
            self.next_reader = index + 1;
            return Poll::Ready(wake);
        }
        Poll::Pending
    }

    /// One step; `Some` when the session must end.
    pub(super) fn handle(&mut self, wake: Wake) -> Result<Option<EndReason>, ShellError> {
        let now = Instant::now();
        let mut end = None;
        match wake {
            Wake::Signal("SIGHUP") if !self.single => self.reload()?,
            Wake::Signal(name) => end = Some(EndReason::Signal(name)),
            Wake::HostEof => {
                let waiting = if self.single {
                    "closing the server's input; answers still due are relayed"
                } else {
                    "answers still due are relayed before the servers stop"
                };
                tracing::info!("the host closed its input; {waiting}");
                if self.host_is_stdout {
                    super::signals::watch_output_after_eof(self.inputs.clone());
                }
                self.core.host_closed(now);
            }
            Wake::HostGone => end = Some(EndReason::HostOutputClosed),
            Wake::Host(frame) => {
                self.host_frame(frame, now);
                while let Some(frame) = self.more_from_host() {
                    self.host_frame(frame, now);
                }
            }
            Wake::Server { server, frame } => {
                self.server_frame(server, frame, now)?;
                let mut taken = 1;
                while taken < BATCH_LINES
                    && let Some(frame) = self.links[server]
                        .as_mut()
                        .and_then(|l| l.reader.as_mut())
                        .and_then(|r| r.buffered())
                {
                    self.server_frame(server, frame, now)?;
                    taken += 1;
                }
            }
            Wake::ServerEof { server } => self.server_eof(server)?,
            Wake::Tick => self.core.on_tick(now),
            Wake::Input(input) => end = self.input(input, now)?,
        }
        self.carry_out()?;
        if end.is_none() && self.core.host_finished(now) {
            end = Some(EndReason::HostClosed);
        }
        Ok(end.filter(|_| !self.shutting_down))
    }

    fn more_from_host(&mut self) -> Option<Frame> {
        self.host_in.as_mut().and_then(|r| r.buffered())
    }

    fn host_frame(&mut self, frame: Frame, now: Instant) {
        if self.shutting_down {
            return;
        }
        // The line itself goes to the core: in `run` a request it forwards unchanged goes on as
        // these bytes (the fast path, `core/fast.rs`).
        let read = match frame {
            Frame::Oversized { bytes } => Err(Unreadable::Oversized {
                bytes,
                limit: self.max_line_bytes,
            }),
            Frame::Line(line) => self
                .core
                .on_host_line(line, now)
                .map_err(Unreadable::NotJson),
        };
        if let Err(problem) = read {
            tracing::warn!("unreadable message from the host: {problem}");
            self.queue_host(&unreadable_line_reply(&problem));
        }
    }

    /// One line from a server: a message for the core, or junk (oversized, not UTF-8, not JSON)
    /// that is dropped and counted.
    fn server_frame(
        &mut self,
        server: usize,
        frame: Frame,
        now: Instant,
    ) -> Result<(), ShellError> {
        let Some(generation) = self.links[server].as_ref().map(|l| l.generation) else {
            return Ok(());
        };
        let line = match frame {
            Frame::Oversized { bytes } => {
                let max = self.max_line_bytes;
                let reason = format!("line of {bytes} bytes exceeds the limit of {max} bytes");
                let detail = json!({"bytes": bytes, "limit": max});
                return self.junk(server, reason, detail, None);
            }
            Frame::Line(line) => line,
        };
        let mut line = line;
        if let Err(err) = std::str::from_utf8(&line) {
            let reason = format!("not UTF-8: {err}");
            return self.junk(server, reason, json!({"bytes": line.len()}), Some(&line));
        }
        if let Err(err) = self.core.on_server_line(server, generation, &mut line, now) {
            let reason = format!("not JSON: {err}");
            self.junk(server, reason, json!({"bytes": line.len()}), Some(&line))?;
        }
        Ok(())
    }

    fn server_eof(&mut self, server: usize) -> Result<(), ShellError> {
        let Some((generation, unrecorded)) = self.links[server]
            .as_ref()
            .map(|l| (l.generation, l.junk.unrecorded()))
        else {
            return Ok(());
        };
        if unrecorded > 0 {
            let mut event = Event::new(EventKind::Dropped, &self.names[server]);
            event.reason = Some(format!(
                "{unrecorded} more lines on stdout were not MCP messages (not recorded one by one)"
            ));
            event.detail = Some(json!({"lines": unrecorded}));
            self.audit.stage(event)?;
        }
        // The exit report usually follows at once and says why; only without one is the core
        // told that the output closed (`Input::OutputClosed`).
        let inputs = self.inputs.clone();
        tokio::spawn(async move {
            tokio::time::sleep(super::link::EXIT_REPORT_WAIT).await;
            let _ = inputs.send(Input::OutputClosed { server, generation });
        });
        Ok(())
    }

    fn input(&mut self, input: Input, now: Instant) -> Result<Option<EndReason>, ShellError> {
        match input {
            Input::Spawned {
                server,
                generation,
                result,
            } => return self.spawned(server, generation, result, now),
            Input::Exited {
                server,
                generation,
                summary,
                stopped,
            } => {
                let link = self.links[server]
                    .as_ref()
                    .filter(|link| link.generation == generation);
                let stopped_while_output_open =
                    link.is_some_and(|link| link.stopped_while_output_open);
                let stopped_because = link.and_then(|link| link.stopped_because.clone());
                let mut summary = summary;
                summary.ended_by = ended_by(summary.ended_by, stopped_while_output_open);
                let (mut detail, mut text) = exit_detail(&summary);
                if let Some(why) = stopped_because {
                    detail["stopped_because"] = json!(why);
                }
                if !stopped && summary.code.is_some_and(|code| code != 0) {
                    if let Some(words) = &summary.last_words {
                        text = format!("{text}; its last line on stderr: {words}");
                    }
                    if let Some(hint) = self.unfetched_hint(server) {
                        text = format!("{text}; {hint}");
                    }
                }
                let signalled = matches!(summary.ended_by, EndedBy::Sigterm | EndedBy::Sigkill);
                // Its input closing (the host's EOF passed on, or airlock's first step of
                // stopping it) is not "on its own": `detail.stopped_because` may say why.
                let reason = if stopped && signalled {
                    "stopped by airlock"
                } else if summary.ended_by == EndedBy::StdinClosed {
                    "ended when its input closed"
                } else {
                    "exited on its own"
                };
                self.record(EventKind::Exit, server, detail, Some(reason.into()))?;
                self.exits[server] = Some(summary);
                self.unlink(server, generation);
                self.core.on_exited(server, generation, &text, now);
                if self.single {
                    return Ok(Some(EndReason::ServerEnded));
                }
            }
            Input::Remote {
                server,
                generation,
                message,
            } => self.core.on_server(server, generation, message, now),
            Input::RemoteDropped { server, reason } => {
                self.junk(server, reason, json!({}), None)?;
            }
            Input::RemoteEnded {
                server,
                generation,
                reason,
                stopped,
            } => self.remote_ended(server, generation, reason, stopped, now)?,
            Input::OutputClosed { server, generation } => {
                self.core.on_server_closed(server, generation, now);
            }
            Input::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Input::Reload(reply) => {
                let answer = self.reload_answer()?;
                let _ = reply.send(answer);
            }
            Input::Net(net) => {
                let crate::net::route::NetAudit { event, written } = *net;
                self.audit.record(event)?;
                if let Some(written) = written {
                    let _ = written.send(());
                }
            }
            // `poll_wake` hands these on as `Wake::Signal` and `Wake::HostGone`.
            Input::Signal(_) | Input::HostGone => {}
        }
        Ok(None)
    }

    /// How to fill the cache of a `bunx`/`deno npm:` server airlock did not fetch for, told with
    /// its failure.
    fn unfetched_hint(&self, server: usize) -> Option<String> {
        match self.launches.get(server)? {
            Some(Launch::Local(prepared)) if prepared.fetch.is_none() => {
                crate::fetch::unfetched_hint(
                    &prepared.plan.program,
                    prepared.plan.argv.get(1..).unwrap_or_default(),
                )
            }
            _ => None,
        }
    }

    fn spawned(
        &mut self,
        server: usize,
        generation: u64,
        result: Result<Connected, crate::process::launch::LaunchError>,
        now: Instant,
    ) -> Result<Option<EndReason>, ShellError> {
        self.spawning -= 1;
        let child = match result {
            Ok(child) => child,
            Err(err) => {
                let permanent = err.is_permanent();
                let detail = json!({"failed": true});
                // The core's warning says why (once); `run` ends with its own summary line.
                self.record(EventKind::Spawn, server, detail, Some(err.to_string()))?;
                self.core
                    .on_spawn_failed(server, generation, err.to_string(), permanent, now);
                return Ok(self.single.then_some(EndReason::ServerEnded));
            }
        };
        let detail = self.launches[server]
            .as_ref()
            .map(Launch::spawn_detail)
            .unwrap_or_default();
        self.record(EventKind::Spawn, server, detail, None)?;
        let link = match child {
            Connected::Local(child) => attach(
                *child,
                server,
                generation,
                self.names[server].clone(),
                self.max_line_bytes,
                self.limits.server_input,
                self.inputs.clone(),
            ),
            Connected::Remote(session) => {
                attach_remote(session, server, generation, 1024, self.inputs.clone())
            }
        };
        self.links[server] = Some(link);
        if !self.shutting_down {
            self.core.on_spawned(server, generation, now);
        }
        if !self.core.wants(server, generation) {
            self.stop(server, generation, "no longer wanted once started".into());
        }
        Ok(None)
    }

    fn remote_ended(
        &mut self,
        server: usize,
        generation: u64,
        reason: String,
        stopped: bool,
        now: Instant,
    ) -> Result<(), ShellError> {
        let detail = json!({"ended_by": if stopped { "stop" } else { "remote" }});
        self.record(EventKind::Exit, server, detail, Some(reason.clone()))?;
        self.unlink(server, generation);
        // A link that breaks before the handshake completes never started: report it as a
        // failed start with the remote's reason (refused, 401, ...), not as an exit.
        if !stopped && self.core.phase(server) == Some(Phase::Starting) {
            self.core
                .on_spawn_failed(server, generation, reason, false, now);
        } else {
            let detail = format!("the connection ended: {reason}");
            self.core.on_exited(server, generation, &detail, now);
        }
        Ok(())
    }

    fn unlink(&mut self, server: usize, generation: u64) {
        if self.links[server]
            .as_ref()
            .is_some_and(|l| l.generation == generation)
        {
            self.links[server] = None;
        }
    }
}
