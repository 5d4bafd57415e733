//! Reload (gateway, SIGHUP or `airlock reload`): a new config and policy replace the running
//! ones without dropping a call. A changed or new server starts before the old one is dropped;
//! the old one takes no new requests and is stopped once its requests are answered. Servers no
//! longer configured retire the same way. Calls decided from now on use the new policy.

use std::sync::Arc;
use std::time::Instant;

use super::lists::ListKind;
use super::{Action, Core, ServerSpec};
use crate::audit::Redactor;
use crate::policy::Policy;

/// What a reload changed, by server slot (the shell keeps one launch per slot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// New slots, in order: each takes the launch of the matching new declaration.
    pub added: Vec<(usize, String)>,
    /// Slots retiring (replaced or no longer configured).
    pub retired: Vec<usize>,
    pub unchanged: Vec<String>,
}

/// One server of the reloaded config: its spec, and whether its launch (command, arguments,
/// environment, sandbox) differs from the running one's.
#[derive(Debug, Clone)]
pub struct Reloaded {
    pub spec: ServerSpec,
    pub launch_changed: bool,
}

impl Core {
    pub fn reload(
        &mut self,
        servers: Vec<Reloaded>,
        policy: Arc<Policy>,
        redactor: Arc<Redactor>,
        now: Instant,
    ) -> ReloadSummary {
        self.policy = policy.clone();
        self.redactor = redactor.clone();
        for server in &mut self.servers {
            server.gate.set_policy(policy.clone(), redactor.clone());
        }
        let mut summary = ReloadSummary::default();
        let wanted: Vec<String> = servers.iter().map(|s| s.spec.name.clone()).collect();
        for index in 0..self.servers.len() {
            let server = &self.servers[index];
            if !server.retiring && !wanted.contains(&server.name) {
                self.retire(index);
                summary.retired.push(index);
            }
        }
        for reloaded in servers {
            let current = self.server_index(&reloaded.spec.name);
            if let Some(index) = current
                && self.servers[index].spec.same_declaration(&reloaded.spec)
                && !reloaded.launch_changed
            {
                // Whether the next start installs the package is as the reload found the cache.
                let reloaded_name = reloaded.spec.name.clone();
                let server = &mut self.servers[index];
                server.life.install_allowance = reloaded.spec.install_allowance;
                server.spec = reloaded.spec;
                // Its cached tools were filtered by the old policy: a running server is asked
                // again, through the new one (its old list answers meanwhile, and the host
                // hears list_changed when the new one differs); one not running lists afresh
                // at its next start.
                if server.life.is_ready() {
                    self.relist_tools(index, now);
                } else {
                    server.tools = None;
                }
                summary.unchanged.push(reloaded_name);
                continue;
            }
            let was_running = current.is_some_and(|i| {
                let s = &self.servers[i];
                s.alive || s.life.is_starting()
            });
            let eager = reloaded.spec.eager || was_running;
            let name = reloaded.spec.name.clone();
            // The new one first, so a call arriving now already goes to it.
            let added = self.add_server(reloaded.spec, now);
            let facts = self.host_facts();
            self.servers[added].gate.set_host(facts);
            summary.added.push((added, name));
            if let Some(index) = current {
                // The replacement serves the same resources until it lists its own: the URIs
                // the host holds stay its, and no other server's template or link takes them
                // over meanwhile.
                self.resources.hand_over(index, added);
                for (_, _, owner) in self.templates.iter_mut().filter(|t| t.2 == index) {
                    *owner = added;
                }
                self.retire(index);
                summary.retired.push(index);
            }
            if eager {
                self.start(added, now);
            }
        }
        self.snapshots.clear();
        self.list_changed(ListKind::Tools);
        summary
    }

    fn retire(&mut self, index: usize) {
        let server = &mut self.servers[index];
        server.retiring = true;
        server.life.eager = false;
        self.tools.remove_server(index);
        self.prompts.remove_server(index);
        self.resources.forget(index);
        self.templates.retain(|(_, _, owner)| *owner != index);
    }

    /// Stops every retiring server whose requests are all answered. Runs whenever the shell
    /// takes the core's actions: the step that answers a retiring server's last request (an
    /// answer, a timeout, a crash) is what makes it finished, and no timer may be left to notice.
    pub(super) fn retire_finished(&mut self) {
        if !self.servers.iter().any(|server| server.retiring) {
            return;
        }
        for (index, server) in self.servers.iter_mut().enumerate() {
            let running = server.alive || server.life.is_starting();
            if server.retiring && running && !server.busy() && !server.life.is_stopping() {
                server.life.stopping(false);
                self.out.push(Action::Stop {
                    server: index,
                    generation: server.life.generation,
                    reason: "replaced by a reload".into(),
                });
            }
        }
    }
}
