//! Launching one *configured* server confined: resolve its command once, check the launch
//! allowlist (with the server's `trust`), plan the sandbox, spawn through the confine helper.
//! Never an unconfined exec. Used by `airlock serve` and `airlock test`; every refusal names the
//! server, the resolved path and the fix.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::{Config, ServerConfig, Transport};
use crate::policy::{LaunchVerdict, Policy};
use crate::process::refusal::{self, DeclaredIn, PathKind};
use crate::process::{ConfinedChild, SpawnError, spawn_confined_with};
use crate::sandbox::{AirlockDirs, HostFacts, PlanRequest, ResolvedPaths, SandboxPlan, plan};

/// Why a server cannot be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Permanent until the config or policy changes: retrying would fail the same way.
    #[error("{0}")]
    Refused(String),
    /// The helper could not be started (may be transient: resources, a racing uninstall).
    #[error("cannot start server `{server}` confined: {source}")]
    Spawn { server: String, source: SpawnError },
    /// A remote server could not be reached (may be transient: it may come up later).
    #[error("{0}")]
    Remote(String),
    /// Its install step failed (may be transient: the registry may come back).
    #[error("{0}")]
    Fetch(#[from] crate::fetch::FetchError),
}

impl LaunchError {
    /// Whether trying again later could help.
    pub fn is_permanent(&self) -> bool {
        matches!(self, LaunchError::Refused(_))
    }
}

/// What does not change between launches of the servers of one gateway.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    pub host: HostFacts,
    pub parent_env: Vec<(String, String)>,
    pub dirs: AirlockDirs,
    /// Relative commands and a server without `cwd` resolve here (the config file's directory).
    pub base_dir: PathBuf,
    /// Where the servers were declared: the refusals' fixes say where to change them.
    pub declared_in: DeclaredIn,
}

impl LaunchContext {
    /// Reads the host's facts and airlock's environment once.
    pub fn detect(policy: &Policy, audit_path: Option<&Path>, config_path: &Path) -> Self {
        let parent_env: Vec<(String, String)> = crate::paths::EnvVars::from_process().into_pairs();
        let host = HostFacts::detect();
        let mut dirs = AirlockDirs::from_env(&parent_env, host.is_root);
        dirs.audit_path = audit_path.map(Path::to_path_buf);
        dirs.policy_files = policy
            .sources
            .iter()
            .map(|(_, path)| path.clone())
            .collect();
        if config_path.is_file() {
            let absolute = std::path::absolute(config_path).unwrap_or(config_path.to_path_buf());
            dirs.config_files.push(absolute);
        }
        let base_dir = config_path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        let base_dir = std::fs::canonicalize(&base_dir).unwrap_or(base_dir);
        LaunchContext {
            host,
            parent_env,
            dirs,
            base_dir,
            declared_in: DeclaredIn::Config(
                config_path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "the config".into()),
            ),
        }
    }

    /// [`LaunchContext::detect`] for the servers of `config`: the file, and the link it was
    /// named by, are never granted.
    pub fn detect_for(policy: &Policy, audit_path: Option<&Path>, config: &Config) -> Self {
        let mut context = LaunchContext::detect(policy, audit_path, &config.path);
        context.dirs.config_files.extend(config.named.clone());
        context
    }

    /// For a server given on the `airlock run` command line: relative commands resolve against
    /// the working directory, and the trust opt-in is the `--trust` flag.
    pub fn for_command_line(policy: &Policy, audit_path: Option<&Path>) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let mut context = LaunchContext::detect(policy, audit_path, &cwd.join("airlock-run"));
        // No config file: the name above only places the base directory.
        context.dirs.config_files.clear();
        context.base_dir = cwd;
        context.declared_in = DeclaredIn::CommandLine;
        context
    }
}

/// A server whose sandbox is planned: spawn it as often as needed.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub plan: SandboxPlan,
    /// Why the launch allowlist let it through.
    pub allowed_because: String,
    /// Where the audit events of the server's connections go (needed when its network is an
    /// allow list, or it has an install step; set by the session that owns the audit log).
    pub net_audit: Option<tokio::sync::mpsc::Sender<crate::net::route::NetAudit>>,
    /// The install step that fetches the server's package first, when it is `npx`/`uvx` and
    /// the package may not be cached (see `crate::fetch`).
    pub fetch: Option<Box<crate::fetch::FetchPlan>>,
    /// The real home of the user airlock runs for (a rule's `~`).
    pub user_home: Option<PathBuf>,
}

/// Whether the server's uid may enter its planned working directory, when it runs as another
/// uid than airlock (root running it as `nobody`): a directory its root shows may still be one
/// that uid cannot enter (`/root/project`), and the helper then starts it in its private home
/// (`confine::enter_working_dir`, the final word). Run as airlock's own uid, it is taken to
/// get in. ACLs are not read: a directory only an ACL opens counts as closed, which makes the
/// gate read a relative path against both directories, the careful side.
fn server_may_enter_cwd(plan: &SandboxPlan) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(id) = plan.identity else {
        return true;
    };
    plan.dirs_deciding_entry().into_iter().all(|dir| {
        std::fs::metadata(dir).is_ok_and(|meta| {
            crate::sandbox::root::may_search(meta.mode(), meta.uid(), meta.gid(), id)
        })
    })
}

impl Prepared {
    /// The HOME and working directory the server sees: the gate reads its path arguments
    /// (`~`, relative paths) against them, as the server will.
    /// Every path the server's sandbox shows it (see `ServerSpec::shown_paths`).
    pub fn shown_paths(&self) -> Vec<PathBuf> {
        self.plan
            .mounted_paths()
            .into_iter()
            .map(Path::to_path_buf)
            .collect()
    }

    pub fn path_context(&self) -> crate::policy::reading::PathContext {
        let home = self
            .plan
            .env
            .iter()
            .find(|(name, _)| name == "HOME")
            .map_or_else(|| self.plan.private_home.clone(), |(_, home)| home.into());
        let bases = self
            .plan
            .arguments
            .iter()
            .map(|grant| grant.path.clone())
            .filter(|path| path.is_absolute() && path.is_dir())
            .collect();
        crate::policy::reading::PathContext {
            home: Some(home),
            cwd: Some(self.plan.cwd.clone()),
            fallback_cwd: (self.plan.starting_dir() != self.plan.cwd
                || !server_may_enter_cwd(&self.plan))
            .then(|| self.plan.private_home.clone()),
            bases,
            user_homes: user_homes(self.user_home.as_deref()),
        }
    }

    /// The spawn audit event's detail: the resolved argv (credentials in it masked, as
    /// `install --dry-run` masks them: a host's entry often carries its password in `args`) and
    /// the sandbox summary.
    pub fn spawn_detail(&self) -> Value {
        json!({
            "argv": crate::secret::mask_argv(&self.plan.argv),
            "sandbox": self.plan.audit_summary(),
            "weaker_than_asked": self.plan.weaker_than_asked,
            "not_granted": self.plan.not_granted,
            "grants": self.plan.arguments,
            "allowed": self.allowed_because,
        })
    }

    pub fn summary(&self) -> String {
        format!(
            "{} ({})",
            self.plan.program.display(),
            self.plan.short_summary()
        )
    }

    /// Whether starting it will run the install step first (its package is not cached yet): the
    /// start may then take up to [`crate::fetch::step::FETCH_TIMEOUT`] longer.
    pub fn needs_fetch(&self) -> bool {
        self.fetch.as_ref().is_some_and(|fetch| !fetch.is_cached())
    }

    /// Starts the server in its sandbox, after its install step when its package is not cached.
    /// Call from an async task (see [`crate::process`]).
    pub async fn spawn(&self) -> Result<ConfinedChild, LaunchError> {
        if let (Some(fetch), Some(events)) = (&self.fetch, &self.net_audit) {
            crate::fetch::ensure(fetch, crate::fetch::Sink::Session(events)).await?;
        }
        spawn_confined_with(&self.plan, self.net_audit.as_ref())
            .await
            .map_err(|source| LaunchError::Spawn {
                server: self.plan.server.clone(),
                source,
            })
    }
}

/// The user's home as written and, when it is reached through a link, as resolved: a rule's
/// `~` prefix holds for either spelling of a path under it.
pub fn user_homes(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home else {
        return Vec::new();
    };
    let mut homes = vec![home.to_path_buf()];
    if let Ok(resolved) = std::fs::canonicalize(home)
        && resolved != home
    {
        homes.push(resolved);
    }
    homes
}

/// Resolves, checks and plans one configured stdio server.
pub fn prepare(
    server: &ServerConfig,
    policy: &Policy,
    context: &LaunchContext,
) -> Result<Prepared, LaunchError> {
    let name = &server.name;
    if server.transport != Transport::Stdio {
        return Err(LaunchError::Refused(format!(
            "server `{name}` is a remote ({}) server: it has no process to launch",
            server.transport
        )));
    }
    let command = server.command.as_deref().unwrap_or_default();
    let cwd = server
        .cwd
        .clone()
        .unwrap_or_else(|| context.base_dir.clone());
    let path_var = context
        .parent_env
        .iter()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| std::ffi::OsString::from(value));
    let resolved = crate::paths::resolve_command(command, path_var.as_deref(), &cwd)
        .map_err(|err| LaunchError::Refused(unresolved(name, &err, context, path_var.clone())))?;
    let trust_fix = context.declared_in.trust_fix(name);
    let allowed_because = match policy
        .launch
        .verdict(name, &resolved, server.trust, &trust_fix)
    {
        LaunchVerdict::Allowed(why) => why,
        LaunchVerdict::Refused { message, fix } => {
            return Err(LaunchError::Refused(format!("{message}. Fix: {fix}")));
        }
    };
    let resolved = unshim(name, resolved, context, &cwd, path_var.as_deref())?;
    let home = context.dirs.home.clone();
    let request = PlanRequest {
        server: name.clone(),
        resolved: ResolvedPaths::inspect(
            &resolved,
            &server.args,
            Some(&cwd),
            &context.parent_env,
            home.as_deref(),
        ),
        program: resolved,
        args: server.args.clone(),
        env: server
            .env
            .iter()
            .map(|(key, value)| (key.clone(), value.value.clone()))
            .collect(),
        cwd: Some(cwd),
        sandbox: policy.sandbox_for(name).clone(),
        dirs: context.dirs.clone(),
        parent_env: context.parent_env.clone(),

        fetches_packages: false,
    };
    let plan = plan(&request, &context.host)
        .map_err(|err| LaunchError::Refused(format!("server `{name}`: {err}")))?;
    for weaker in &plan.weaker_than_asked {
        tracing::warn!(server = %name, "sandbox weaker than the policy asks: {weaker}");
    }
    for skipped in &plan.not_granted {
        tracing::warn!(server = %name, "not granted: {skipped}");
    }
    for argument in plan.arguments.iter().filter(|a| a.access.is_none()) {
        // The source of a refused argument reads "not granted: why" already.
        let why = argument.source.strip_prefix("not granted: ");
        tracing::warn!(
            server = %name,
            "{} on the server's command line is not granted: {}",
            argument.argument,
            why.unwrap_or(&argument.source)
        );
    }
    for missing in crate::sandbox::host::missing_policy_grants(&plan) {
        let path = missing.path.display();
        tracing::warn!(
            server = %name,
            "{path} is granted ({}) but does not exist on this host, so the server cannot reach it. Fix: create it first (`mkdir -p {path}` for a directory), or correct the grant",
            missing.reason
        );
    }
    let ungranted = crate::sandbox::ungranted_env_paths(&plan);
    if !ungranted.is_empty() {
        tracing::warn!(
            server = %name,
            "its environment names a path it is not granted ({}): a server that keeps its data there cannot reach it. Fix: add `--allow-write=DIR` (or `--allow-read=FILE`) for it, or the same in its `sandbox` block",
            ungranted.join(", ")
        );
    }
    let fetch = fetch_plan(&request, &plan, &context.host);
    Ok(Prepared {
        plan,
        allowed_because,
        net_audit: None,
        fetch,
        user_home: home,
    })
}

/// The install step of an `npx`/`uvx`/`bunx`/`deno npm:` server whose cache the sandbox shows through an overlay.
fn fetch_plan(
    request: &PlanRequest,
    plan: &SandboxPlan,
    host: &HostFacts,
) -> Option<Box<crate::fetch::FetchPlan>> {
    let runner = crate::fetch::detect(
        &request.program,
        request.resolved.program_canonical.as_deref(),
        &request.args,
    )?;
    let overlay = plan
        .cache_overlays
        .iter()
        .find(|overlay| overlay.name == runner.cache() && overlay.mount)?;
    Some(Box::new(crate::fetch::FetchPlan {
        real_cache: overlay.lower.clone(),
        uid: plan
            .identity
            .as_ref()
            .map_or(plan.airlock_uid, |identity| identity.uid),
        runner,
        request: request.clone(),
        host: host.clone(),
    }))
}

/// The refusal for a command that does not resolve, with the facts its fix depends on.
fn unresolved(
    server: &str,
    err: &crate::paths::ResolveError,
    context: &LaunchContext,
    path_var: Option<std::ffi::OsString>,
) -> String {
    use crate::paths::ResolveError;
    let path_var = path_var.map(|p| p.to_string_lossy().into_owned());
    let elsewhere: Vec<PathBuf> = match err {
        ResolveError::NotFound(name) => refusal::usual_bin_dirs(context.dirs.home.as_deref())
            .into_iter()
            .map(|dir| dir.join(name))
            .filter(|candidate| candidate.is_file())
            .collect(),
        _ => Vec::new(),
    };
    let kind = match err {
        ResolveError::NotExecutable(path) => PathKind::of(path),
        _ => PathKind::Missing,
    };
    refusal::unresolved_command(
        server,
        err,
        &context.declared_in,
        path_var.as_deref().unwrap_or("unset"),
        &elsewhere,
        kind,
    )
}

/// A version manager's shim (pyenv, rbenv, nodenv) is replaced by the program it would run here:
/// in the sandbox the manager's own scripts are not there, and the server is granted exactly that
/// version's install (see `crate::paths::resolve_shim`).
fn unshim(
    name: &str,
    program: PathBuf,
    context: &LaunchContext,
    cwd: &Path,
    path_var: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, LaunchError> {
    use crate::paths::{RealDisk, Shim, resolve_shim};
    let path_var = path_var.map(|p| p.to_string_lossy().into_owned());
    match resolve_shim(
        &program,
        &context.parent_env,
        cwd,
        path_var.as_deref(),
        &RealDisk,
    ) {
        Shim::NotAShim => Ok(program),
        Shim::Resolved {
            tool,
            program: real,
            chosen_by,
        } => {
            tracing::info!(
                server = %name,
                "{} is a {tool} shim: starting {} ({chosen_by})",
                program.display(),
                real.display()
            );
            Ok(real)
        }
        Shim::Unresolved { reason, fix } => Err(LaunchError::Refused(format!(
            "server `{name}`: {reason}. Fix: {fix}"
        ))),
    }
}
