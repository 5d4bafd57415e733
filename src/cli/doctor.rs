//! `airlock doctor`: what this kernel offers, what the active policy will enforce by what, and
//! anything that would run less confined than the policy asks. A `require = [...]` the host does
//! not meet is a refusal (exit 2), exactly as it is when a server starts.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::CliError;
use crate::policy::SandboxPolicy;
use crate::sandbox::{
    AirlockDirs, HostFacts, NetMode, PlanError, PlanRequest, ResolvedPaths, SandboxPlan,
};

#[derive(Debug, Args)]
#[command(
    after_help = "Exit status: 0 when the host meets the policy's `require` list; 2 when it does not, or when the kernel refuses what every server's sandbox needs (its own /proc)."
)]
pub struct DoctorArgs {
    /// User policy file or preset (default: $XDG_CONFIG_HOME/airlock/policy.toml).
    #[arg(long)]
    pub policy: Option<String>,
    /// Server config (airlock.toml or an mcpServers JSON file): also say what each of its
    /// servers can reach on the network.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(args: DoctorArgs) -> Result<ExitCode, CliError> {
    let config = args
        .config
        .as_deref()
        .map(crate::config::load_file)
        .transpose()?;
    let policy = super::active_policy::load_active(args.policy, config.as_ref())?;
    let host = HostFacts::detect();
    let parent_env: Vec<(String, String)> = crate::paths::EnvVars::from_process().into_pairs();
    let mut dirs = AirlockDirs::from_env(&parent_env, host.is_root);
    dirs.policy_files = policy
        .sources
        .iter()
        .map(|(_, path)| path.clone())
        .collect();
    let own_proc = OwnProc::try_here();
    let report = render(&host, &policy.sandbox, &dirs, &parent_env, &own_proc);
    print!("{}", report.text);
    if let Some(config) = &config {
        print!("{}", render_reach(config, &policy));
    }
    match report.unmet {
        Some(err) => Err(CliError::Refused(err)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// What each server of `config` can reach on the network, as its launch would be planned.
fn render_reach(config: &crate::config::Config, policy: &crate::policy::Policy) -> String {
    use crate::process::launch::{self, LaunchContext};
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nwhat each server can reach ({})",
        config.path.display()
    );
    // An unexpandable audit.path is `check`'s and `run`'s error to report; here it only stops
    // the audit log from being listed among the protected paths of this what-if.
    let audit_path = super::session::policy_audit_path(policy).ok().flatten();
    let context = LaunchContext::detect_for(policy, audit_path.as_deref(), config);
    for server in config.servers.iter().filter(|s| s.enabled) {
        let name = &server.name;
        if server.transport != crate::config::Transport::Stdio {
            let url = server.url.as_deref().unwrap_or("its URL");
            let _ = writeln!(
                out,
                "  {name}: remote, no sandbox: airlock connects to {url}"
            );
            continue;
        }
        let prepared = match launch::prepare(server, policy, &context) {
            Ok(prepared) => prepared,
            Err(err) => {
                let _ = writeln!(out, "  {name}: would not start: {err}");
                continue;
            }
        };
        match &prepared.plan.network {
            NetMode::None => {
                let _ = writeln!(out, "  {name}: nothing (network none)");
            }
            NetMode::Host => {
                let _ = writeln!(out, "  {name}: anything the host reaches (network host)");
            }
            NetMode::Egress(egress) => {
                let _ = writeln!(out, "  {name}: only its allow list");
                for entry in &egress.allow.entries {
                    let _ = writeln!(out, "    reaches {} ({})", entry.rule.reach(), entry.origin);
                }
            }
        }
        if let Some(fetch) = &prepared.fetch {
            let _ = writeln!(out, "    install: {}", super::check::install_line(fetch));
        }
    }
    out
}

pub struct Report {
    pub text: String,
    pub unmet: Option<String>,
}

/// What the kernel said when airlock tried the server's own procfs here, for the report.
pub enum OwnProc {
    Mounted,
    /// Refused: the kernel's error and the cause and fix in words.
    Refused {
        error: String,
        cause: String,
    },
    /// User namespaces could not be made, so nothing was tried (the plan says what runs instead).
    Untried,
}

impl OwnProc {
    /// Tries the mount for real (`sandbox::confine::try_own_proc`) and, when it is refused,
    /// reads which mounts cover parts of this `/proc`.
    pub fn try_here() -> Self {
        use crate::sandbox::confine::{ProcProbe, try_own_proc};
        match try_own_proc() {
            ProcProbe::Mounted => OwnProc::Mounted,
            ProcProbe::Untried => OwnProc::Untried,
            ProcProbe::Refused(err) => {
                let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
                let covering = crate::sandbox::procfs::covering_mounts(&mountinfo, "/proc");
                OwnProc::Refused {
                    error: err.to_string(),
                    cause: crate::sandbox::procfs::refusal_cause(&covering),
                }
            }
        }
    }
}

/// Renders the report; pure given its inputs.
pub fn render(
    host: &HostFacts,
    sandbox: &SandboxPolicy,
    dirs: &AirlockDirs,
    parent_env: &[(String, String)],
    own_proc: &OwnProc,
) -> Report {
    let mut out = String::new();
    let _ = writeln!(out, "host");
    for line in host.to_string().lines() {
        let _ = writeln!(out, "  {line}");
    }
    // A representative server: the plan's rules do not depend on the command beyond its prefix.
    let request = PlanRequest {
        server: "example".to_string(),
        program: PathBuf::from("/usr/bin/node"),
        args: Vec::new(),
        env: Vec::new(),
        cwd: None,
        sandbox: sandbox.clone(),
        dirs: dirs.clone(),
        parent_env: parent_env.to_vec(),
        resolved: ResolvedPaths::default(),

        fetches_packages: false,
    };
    let _ = writeln!(out, "\nthe active policy, as this host enforces it");
    let unmet = match crate::sandbox::plan(&request, host) {
        Ok(plan) => {
            render_plan(&mut out, &plan, host, dirs);
            render_verdict(&mut out, &plan, own_proc)
        }
        Err(err @ PlanError::Unmet { .. }) => {
            let _ = writeln!(out, "  REFUSED: {err}");
            Some(err.to_string())
        }
        Err(err) => {
            let _ = writeln!(out, "  the policy cannot be planned: {err}");
            Some(err.to_string())
        }
    };
    Report { text: out, unmet }
}

/// What the active policy's plan enforces on this host, one mechanism a line.
fn render_plan(out: &mut String, plan: &SandboxPlan, host: &HostFacts, dirs: &AirlockDirs) {
    let view = if plan.root.is_some() {
        "its own root (tmpfs + pivot_root: only what the plan grants, each at its own path; its own /proc)"
    } else {
        "the host's filesystem (NO mount namespace: landlock alone)"
    };
    let _ = writeln!(out, "  filesystem view ............. {view}");
    let fs_by = if plan.landlock.abi > 0 {
        format!("landlock ABI {}", plan.landlock.abi)
    } else {
        "NOTHING (no landlock)".into()
    };
    let _ = writeln!(out, "  filesystem allowlist ........ {fs_by}");
    render_network(out, plan);
    let limits: Vec<String> = plan
        .rlimits
        .iter()
        .map(|l| format!("{}={}", l.kind.name(), l.value))
        .collect();
    let _ = writeln!(
        out,
        "  limits ...................... rlimits {}",
        limits.join(" ")
    );
    let _ = writeln!(
        out,
        "  memory ...................... {}",
        plan.memory.describe()
    );
    let _ = writeln!(out, "  disk ........................ {}", plan.disk_text());
    let _ = writeln!(
        out,
        "  signals ..................... {}",
        match (plan.landlock.scopes, plan.namespaces.pid) {
            (true, true) =>
                "own pid namespace; landlock scope: init in an outer domain the server cannot signal",
            (false, true) =>
                "own pid namespace; NOT scoped (landlock < 6): the server can signal its init",
            _ => "NOT confined (no pid namespace, landlock < 6)",
        }
    );
    let _ = writeln!(
        out,
        "  no orphans .................. {}",
        if plan.namespaces.pid {
            "pid namespace (init exits, kernel kills the rest) + parent-death signal"
        } else {
            "process group + parent-death signal (a setsid descendant can escape)"
        }
    );
    let _ = writeln!(
        out,
        "  identity .................... {}",
        match plan.identity {
            Some(id) => format!("uid {} gid {}, no capabilities", id.uid, id.gid),
            None => format!("airlock's uid {}, no capabilities", host.uid),
        }
    );
    let _ = writeln!(
        out,
        "  private dirs ................ {}/<server>/{{home,tmp}}{}",
        dirs.servers_dir().display(),
        if plan.root.is_some() {
            " in the server's root, on its scratch disk (nothing on the host's disk)"
        } else {
            " on disk"
        }
    );
}

/// The server's own `/proc` as tried here, then the verdict: a root whose procfs the kernel
/// refuses starts no server at all (the helper exits 105), which is a refusal, not a weakening.
fn render_verdict(out: &mut String, plan: &SandboxPlan, own_proc: &OwnProc) -> Option<String> {
    if plan.root.is_some() {
        let line = match own_proc {
            OwnProc::Mounted => "mounted (tried here: a procfs for a new pid namespace)".into(),
            OwnProc::Untried => "NOT tried (no user namespace could be made)".into(),
            OwnProc::Refused { error, .. } => format!("REFUSED by the kernel: {error}"),
        };
        let _ = writeln!(out, "  its own /proc ............... {line}");
        if let OwnProc::Refused { error, cause } = own_proc {
            let refusal = format!(
                "no server can start here: the kernel refuses the server's own /proc ({error}): {cause}"
            );
            let _ = writeln!(out, "\n{refusal}");
            return Some(refusal);
        }
    }
    if plan.weaker_than_asked.is_empty() {
        let _ = writeln!(out, "\nnothing runs less confined than the policy asks");
    } else {
        let _ = writeln!(out, "\nless confined than asked:");
        for note in &plan.weaker_than_asked {
            let _ = writeln!(out, "  - {note}");
        }
    }
    None
}

fn render_network(out: &mut String, plan: &SandboxPlan) {
    let net_by = match (&plan.network, plan.namespaces.net, plan.landlock.net_rules) {
        (NetMode::Host, _, _) => "nothing: host network".to_string(),
        (NetMode::Egress(_), _, _) => {
            "private network namespace + airlock's resolver and connect hand-over".to_string()
        }
        (_, true, _) => "private network namespace + landlock TCP + seccomp UDP".to_string(),
        (_, false, true) => "landlock TCP rules + seccomp UDP".to_string(),
        (_, false, false) => "seccomp UDP only".to_string(),
    };
    let _ = writeln!(
        out,
        "  network ..................... {}: {net_by}",
        plan.network
    );
    let ipc = if plan.landlock.scopes {
        "landlock scopes (abstract unix sockets, signals)"
    } else {
        "NOT scoped (landlock < 6)"
    };
    let _ = writeln!(
        out,
        "  ipc ......................... {ipc}; pathname unix sockets: {}; SysV IPC and POSIX queues: {}",
        if plan.seccomp.deny_unix_sockets {
            "seccomp refuses socket(AF_UNIX)"
        } else {
            "allowed"
        },
        if plan.namespaces.ipc {
            "its own (IPC namespace)"
        } else {
            "the host's (no user namespaces)"
        }
    );
    let _ = writeln!(
        out,
        "  syscalls .................... {}",
        if plan.seccomp.enabled {
            "seccomp deny table (x86_64/aarch64; other arches killed)"
        } else {
            "NOTHING (no seccomp)"
        }
    );
}
