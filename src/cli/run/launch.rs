//! Starting the server for `airlock run`: resolve the command once, check the launch allowlist,
//! plan the sandbox, and spawn through the confine helper. Never an unconfined exec.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::cli::CliError;
use crate::policy::Policy;
use crate::process::{ConfinedChild, ExitSummary, spawn_confined};
use crate::sandbox::{AirlockDirs, HostFacts, PlanRequest, ResolvedPaths, SandboxPlan, plan};

pub struct Prepared {
    plan: SandboxPlan,
}

impl Prepared {
    /// The spawn event's detail: the resolved argv and the sandbox summary.
    pub fn spawn_detail(&self) -> Value {
        json!({
            "argv": self.plan.argv,
            "sandbox": self.plan.audit_summary(),
            "weaker_than_asked": self.plan.weaker_than_asked,
        })
    }

    pub fn summary(&self) -> String {
        format!(
            "{} ({})",
            self.plan.program.display(),
            self.plan.short_summary()
        )
    }
}

/// Resolves, checks and plans; every refusal names the server, the resolved path and the fix.
pub fn prepare(
    name: &str,
    command: &[String],
    policy: &Policy,
    audit_path: Option<&Path>,
) -> Result<Prepared, CliError> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| CliError::Refused("no server command after `--`".into()))?;
    let cwd = std::env::current_dir().map_err(|err| {
        CliError::Failure(anyhow::anyhow!("cannot read the working directory: {err}"))
    })?;
    let path_var = std::env::var_os("PATH");
    let resolved =
        crate::config::resolve_command(program, path_var.as_deref(), &cwd).map_err(|err| {
            CliError::Refused(format!(
                "server `{name}`: {err}. Fix: install it, or give its absolute path"
            ))
        })?;
    if !policy.launch.allows_command(&resolved) {
        let base = resolved
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(CliError::Refused(format!(
            "refusing to start server `{name}`: {} is not in launch.allow_commands. Fix: add \"{base}\" (or \"{}\") to \
             allow_commands under [launch] in your policy ($XDG_CONFIG_HOME/airlock/policy.toml or --policy FILE)",
            resolved.display(),
            resolved.display()
        )));
    }
    let parent_env: Vec<(String, String)> = std::env::vars().collect();
    let host = HostFacts::detect();
    let mut dirs = AirlockDirs::from_env(&parent_env, host.is_root);
    dirs.audit_path = audit_path.map(Path::to_path_buf);
    dirs.policy_files = policy
        .sources
        .iter()
        .map(|(_, path)| path.clone())
        .collect::<Vec<PathBuf>>();
    let home = dirs.home.clone();
    let request = PlanRequest {
        server: name.to_string(),
        resolved: ResolvedPaths::inspect(&resolved, args, Some(&cwd), home.as_deref()),
        program: resolved,
        args: args.to_vec(),
        env: Vec::new(),
        cwd: Some(cwd),
        sandbox: policy.sandbox_for(name).clone(),
        dirs,
        parent_env,
    };
    let plan = plan(&request, &host)
        .map_err(|err| CliError::Refused(format!("server `{name}`: {err}")))?;
    for weaker in &plan.weaker_than_asked {
        tracing::warn!(server = %name, "sandbox weaker than the policy asks: {weaker}");
    }
    Ok(Prepared { plan })
}

pub struct Server {
    child: ConfinedChild,
    kill_timeout: Duration,
}

pub async fn spawn(prepared: &Prepared) -> Result<Server, CliError> {
    let child = spawn_confined(&prepared.plan).await.map_err(|err| {
        CliError::Failure(anyhow::anyhow!(
            "cannot start server `{}` confined: {err}",
            prepared.plan.server
        ))
    })?;
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
