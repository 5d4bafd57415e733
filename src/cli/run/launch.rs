//! Starting the server for `airlock run`. Resolving, the launch allowlist and the sandbox plan are
//! `process::launch::prepare`, shared with `check` and `serve`; this holds the running child.
//! Never an unconfined exec.

use std::time::Duration;

use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::cli::CliError;
use crate::process::launch::Prepared;
use crate::process::{ConfinedChild, ExitSummary};

pub struct Server {
    child: ConfinedChild,
    kill_timeout: Duration,
}

pub async fn spawn(prepared: &Prepared) -> Result<Server, CliError> {
    let child = prepared
        .spawn()
        .await
        .map_err(|err| CliError::Failure(err.into()))?;
    Ok(Server {
        child,
        kill_timeout: Duration::from_secs(prepared.plan.kill_timeout_secs),
    })
}

impl Server {
    pub fn take_stdio(&mut self) -> Result<(ChildStdin, ChildStdout, ChildStderr), CliError> {
        match (
            self.child.stdin.take(),
            self.child.stdout.take(),
            self.child.stderr.take(),
        ) {
            (Some(stdin), Some(stdout), Some(stderr)) => Ok((stdin, stdout, stderr)),
            _ => Err(CliError::Failure(anyhow::anyhow!(
                "the server's stdio pipes are missing"
            ))),
        }
    }

    /// Waits `grace` for the server to exit by itself, then runs the kill sequence (which returns
    /// at once for a server that already exited, with the helper's failure step if any).
    pub async fn finish(&mut self, grace: Duration) -> ExitSummary {
        if !grace.is_zero() {
            let _ = tokio::time::timeout(grace, self.child.wait()).await;
        }
        self.child.shutdown(self.kill_timeout).await
    }
}
