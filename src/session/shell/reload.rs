//! Reloading a gateway in place (SIGHUP, `airlock reload`): the reloader re-reads the files; a
//! bad file keeps the running state and says why on stderr (and to `airlock reload`); a good one
//! goes to the core, which replaces servers without dropping calls. Both are audited.

use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Loop, ShellError};
use crate::audit::rotate::Rotation;
use crate::audit::{Event, EventKind};

impl<HR, HW> Loop<HR, HW>
where
    HR: AsyncRead + Unpin,
    HW: AsyncWrite + Unpin,
{
    pub(super) fn reload(&mut self) -> Result<(), ShellError> {
        self.reload_answer().map(|_| ())
    }

    /// Reloads and returns what `airlock reload` shows.
    pub(super) fn reload_answer(&mut self) -> Result<Value, ShellError> {
        if self.shutting_down {
            return Ok(json!({"reloaded": false, "error": "the gateway is shutting down"}));
        }
        let Some(reloader) = self.reloader.as_mut() else {
            // `airlock run` has no config file to re-read: `airlock reload` passes it by.
            let error = "an `airlock run` session has nothing to reload";
            return Ok(json!({"reloaded": false, "skipped": true, "error": error}));
        };
        let running: Vec<_> = self
            .core
            .server_names()
            .into_iter()
            .enumerate()
            .filter(|(index, name)| self.core.server_index(name) == Some(*index))
            .map(|(index, name)| (name, self.launches[index].clone()))
            .collect();
        let plan = match reloader.reload(&running) {
            Ok(plan) => plan,
            Err(err) => {
                crate::session::stderr_queue::say(format_args!(
                    "airlock: reload failed, keeping the running config: {err}"
                ));
                let mut event = Event::new(EventKind::Policy, "gateway");
                event.reason = Some(format!("reload failed, running config kept: {err}"));
                self.audit.record(event)?;
                return Ok(json!({
                    "reloaded": false,
                    "error": err.to_string(),
                    "config": self.config_path.display().to_string(),
                }));
            }
        };
        self.audit.record(plan.policy_event)?;
        // The log stays where it is (the reloader refuses a policy that moves it); how large
        // its files grow and how many are kept follow the reloaded policy.
        let audit = &plan.policy.audit;
        self.audit.rotate_at(Rotation::from_policy(
            audit.rotate_mb.value,
            audit.keep_rotated.value,
        ));
        self.kill_timeout = self.kill_timeout.max(plan.kill_timeout);
        let summary = self
            .core
            .reload(plan.servers, plan.policy, plan.redactor, Instant::now());
        for (index, name) in &summary.added {
            let launch = plan
                .launches
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, launch)| launch.clone());
            self.launches.push(launch);
            self.links.push(None);
            self.exits.push(None);
            self.names.push(name.clone());
            debug_assert_eq!(self.launches.len(), index + 1);
        }
        let added: Vec<&str> = summary.added.iter().map(|(_, n)| n.as_str()).collect();
        let retired: Vec<&str> = summary
            .retired
            .iter()
            .map(|i| self.names[*i].as_str())
            .collect();
        tracing::info!(
            "reloaded: started {added:?}, retiring {retired:?}, unchanged {:?}",
            summary.unchanged
        );
        let answer = json!({
            "reloaded": true,
            "config": self.config_path.display().to_string(),
            "started": added,
            "retiring": retired,
            "unchanged": summary.unchanged,
        });
        self.carry_out()?;
        Ok(answer)
    }
}
