//! The sandbox: [`plan`] decides (pure), [`confine`] applies (the confine helper).
//!
//! `plan(request, host) -> SandboxPlan` turns the merged [`SandboxPolicy`], the resolved command
//! and what the kernel offers ([`HostFacts`]) into every concrete rule: landlock paths and ports,
//! namespaces, the identity to run as, rlimits, seccomp switches and the exact environment. The plan
//! is serialisable: `process::spawn_confined` hands it to `airlock __confine`, which applies it in
//! a fresh single-threaded process and `execve`s the server (see [`confine`] for the order and the
//! exit codes). The rules are documented in `docs/sandbox.md`.

pub mod confine;
pub mod host;
pub mod paths;
pub mod profile;
pub mod seccomp;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::paths::{Var, VarSource, normalize_path};
use crate::policy::{Feature, Network, RunAs, SandboxPolicy};

pub use host::HostFacts;
pub use paths::{AirlockDirs, ResolvedPaths};
pub use profile::RuntimeProfile;

/// The uid/gid a server runs as when airlock is root and the policy says `run_as = "nobody"`.
pub const NOBODY: u32 = 65534;

/// Everything [`plan`] needs, gathered by the caller (the only effectful part is
/// [`ResolvedPaths::inspect`], which the caller runs first).
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub server: String,
    /// Resolved absolute path of the command (never resolved through a shell).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The server's own `env` entries, already interpolated.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub sandbox: SandboxPolicy,
    pub dirs: AirlockDirs,
    /// airlock's own environment: passthrough names and `${env:NAME}` are looked up here.
    pub parent_env: Vec<(String, String)>,
    /// Facts about the command's files (canonical path, venv, script, package root).
    pub resolved: ResolvedPaths,
}

/// Why a plan cannot be made. Each is bad input (the CLI maps it to exit 2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("program must be an absolute path, got {0}")]
    RelativeProgram(PathBuf),
    #[error(
        "the policy requires {unmet}, but this host has {have}; airlock refuses to run `{server}` less confined than the policy says (see `airlock doctor`)"
    )]
    Unmet {
        server: String,
        unmet: String,
        have: String,
    },
    #[error(
        "grant `{grant}` ({origin}) would expose {what} ({path}) to the server; grant a narrower directory"
    )]
    GrantsProtected {
        grant: String,
        origin: String,
        what: String,
        path: PathBuf,
    },
    #[error("grant `{grant}` ({origin}) is not an absolute path after expansion: {expanded}")]
    RelativeGrant {
        grant: String,
        origin: String,
        expanded: String,
    },
    #[error("invalid server name `{0}` (it names the server's private directory)")]
    BadServerName(String),
}

/// Access granted on a path by landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsAccess {
    /// Read files, list directories, execute.
    ReadExec,
    /// Everything in `ReadExec` plus create, write, remove, rename, truncate.
    ReadWrite,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsRule {
    pub path: PathBuf,
    pub access: FsAccess,
    /// Why this path is granted (shown by `airlock check` / `doctor`).
    pub reason: String,
}

/// Network reach, as the helper enforces it (mirrors [`Network`], which is not deserialisable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetMode {
    None,
    TcpConnect(Vec<u16>),
    Host,
}

impl From<&Network> for NetMode {
    fn from(network: &Network) -> Self {
        match network {
            Network::None => NetMode::None,
            Network::TcpConnect(ports) => NetMode::TcpConnect(ports.clone()),
            Network::Host => NetMode::Host,
        }
    }
}

impl fmt::Display for NetMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetMode::None => f.write_str("none"),
            NetMode::Host => f.write_str("host"),
            NetMode::TcpConnect(ports) => {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                write!(f, "tcp connect [{}]", ports.join(", "))
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    pub user: bool,
    pub pid: bool,
    pub net: bool,
    /// A private mount namespace (propagation private), created only when the plan mounts cache
    /// overlays.
    #[serde(default)]
    pub mount: bool,
}

/// The uid/gid maps the helper writes for the new user namespace (identity maps: the kernel
/// sees the same uids as outside, so file ownership and DAC work as usual).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdMaps {
    pub uid_map: String,
    pub gid_map: String,
    /// Unprivileged map writers must deny setgroups first (user_namespaces(7)).
    pub deny_setgroups: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RlimitKind {
    Processes,
    AddressSpace,
    OpenFiles,
    FileSize,
    Core,
    Cpu,
}

impl RlimitKind {
    pub fn name(self) -> &'static str {
        match self {
            RlimitKind::Processes => "RLIMIT_NPROC",
            RlimitKind::AddressSpace => "RLIMIT_AS",
            RlimitKind::OpenFiles => "RLIMIT_NOFILE",
            RlimitKind::FileSize => "RLIMIT_FSIZE",
            RlimitKind::Core => "RLIMIT_CORE",
            RlimitKind::Cpu => "RLIMIT_CPU",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimit {
    pub kind: RlimitKind,
    pub value: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPlan {
    /// The kernel's landlock ABI (0: none). The helper requests ABI 8 rights best-effort and
    /// fails if the kernel enforced less than this ABI promises.
    pub abi: u32,
    /// TCP bind/connect rules (ABI 4+).
    pub net_rules: bool,
    /// Abstract unix socket and signal scoping (ABI 6+).
    pub scopes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompPlan {
    pub enabled: bool,
    /// socket(AF_UNIX) refused: landlock below ABI 8 cannot stop a connect to a pathname socket
    /// outside the grants (docker.sock, the ssh agent). socketpair(2) stays allowed.
    pub deny_unix_sockets: bool,
    /// socket(AF_INET*, SOCK_DGRAM) refused: landlock has no UDP rules.
    pub deny_udp: bool,
}

/// A runtime cache shown to the server as a private copy-on-write overlayfs (see
/// [`profile::CacheOverlay`]). The helper mounts it inside the sandbox's own mount namespace; the
/// real cache (`lower`) is the read-only lower layer and is never written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheOverlayPlan {
    pub name: String,
    /// The user's real cache. Reached only through the overlay (no landlock grant).
    pub lower: PathBuf,
    /// The server's own layer: `servers/<server>/cache/<name>/upper` (outside every grant, so the
    /// server sees it only merged).
    pub upper: PathBuf,
    /// overlayfs' scratch dir, next to `upper` (same filesystem).
    pub work: PathBuf,
    /// `servers/<server>/cache/<name>/lock`: overlayfs must not share an upper/work pair between
    /// two mounts, and two instances of one server may run at once (two MCP hosts). The instance
    /// whose helper holds an exclusive `flock` on this file uses `upper`/`work` (kept between
    /// runs); any other gets an ephemeral pair under `instances` (below).
    pub lock: PathBuf,
    /// `servers/<server>/cache/<name>/instances`: `<helper pid>/{upper,work}` for an instance
    /// that found `lock` taken, removed when it ends (and swept at a later start if it could not
    /// be). Decided by the helper at start, so the plan stays pure.
    pub instances: PathBuf,
    /// The mount point: inside the private home (covered by its read-write landlock rule), or,
    /// with `at_real_path`, the real cache path itself (`lower`).
    pub target: PathBuf,
    /// The overlay is mounted over the real cache path (`target == lower`): for caches that refer
    /// to themselves by absolute path (uv). `target` is then in no `fs` rule: the helper grants
    /// read-write beneath it only after the overlay is mounted there, on the overlay's own root
    /// (a rule on the real directory would be a write grant on the real cache whenever the mount
    /// is missing, and landlock does not look at the covered directory once something is mounted
    /// on it), so the grant cannot exist without the overlay.
    #[serde(default)]
    pub at_real_path: bool,
    /// `false` when no mount namespace can be made (no user namespaces): `target` is then a
    /// private, initially empty cache, and the plan says so in `weaker_than_asked`.
    pub mount: bool,
}

/// Everything the confine helper applies, decided up front. Serialised to the helper as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPlan {
    pub server: String,
    pub program: PathBuf,
    /// The exact argv: `argv[0]` is the program path.
    pub argv: Vec<String>,
    /// The complete environment of the server.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub private_home: PathBuf,
    pub private_tmp: PathBuf,
    pub fs: Vec<FsRule>,
    /// Runtime caches mounted copy-on-write (npm, uv).
    #[serde(default)]
    pub cache_overlays: Vec<CacheOverlayPlan>,
    pub network: NetMode,
    pub namespaces: Namespaces,
    pub id_maps: Option<IdMaps>,
    /// Who to become; `None` keeps airlock's own uid (airlock is not root, or `run_as = "root"`).
    pub identity: Option<Identity>,
    pub landlock: LandlockPlan,
    pub seccomp: SeccompPlan,
    pub rlimits: Vec<Rlimit>,
    pub kill_timeout_secs: u64,
    /// Where this plan is less confined than the policy asked, and why.
    pub weaker_than_asked: Vec<String>,
    /// airlock's pid: the helper's parent check. Set by `process::spawn_confined`.
    pub launcher_pid: Option<u32>,
}

/// One line for the audit log's spawn event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditSummary {
    pub landlock_abi: u32,
    pub landlock: &'static str,
    pub seccomp: bool,
    pub network: String,
    pub namespaces: String,
    pub run_as: String,
}

impl SandboxPlan {
    pub fn audit_summary(&self) -> AuditSummary {
        AuditSummary {
            landlock_abi: self.landlock.abi,
            landlock: if self.landlock.abi == 0 {
                "unavailable"
            } else {
                "enforced"
            },
            seccomp: self.seccomp.enabled,
            network: self.network.to_string(),
            namespaces: self.namespaces_text(),
            run_as: match self.identity {
                Some(id) => format!("uid {} gid {}", id.uid, id.gid),
                None => "airlock's uid".to_string(),
            },
        }
    }

    fn namespaces_text(&self) -> String {
        let mut names = Vec::new();
        if self.namespaces.user {
            names.push("user");
        }
        if self.namespaces.pid {
            names.push("pid");
        }
        if self.namespaces.net {
            names.push("net");
        }
        if self.namespaces.mount {
            names.push("mount");
        }
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join("+")
        }
    }

    /// A short one-line summary: `landlock abi 7, seccomp on, network none, ns user+pid+net`.
    pub fn short_summary(&self) -> String {
        format!(
            "landlock abi {}{}, seccomp {}, network {}, namespaces {}",
            self.landlock.abi,
            if self.landlock.abi == 0 {
                " (unavailable)"
            } else {
                ""
            },
            if self.seccomp.enabled { "on" } else { "off" },
            self.network,
            self.namespaces_text()
        )
    }
}

impl fmt::Display for SandboxPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "sandbox for `{}`: {}", self.server, self.short_summary())?;
        writeln!(f, "  argv: {:?}", self.argv)?;
        writeln!(f, "  cwd: {}", self.cwd.display())?;
        match self.identity {
            Some(id) => writeln!(f, "  runs as: uid {} gid {}", id.uid, id.gid)?,
            None => writeln!(f, "  runs as: airlock's own uid, all capabilities dropped")?,
        }
        writeln!(f, "  filesystem (landlock; everything else denied):")?;
        for rule in &self.fs {
            let access = match rule.access {
                FsAccess::ReadExec => "read ",
                FsAccess::ReadWrite => "write",
            };
            writeln!(f, "    {access} {}  ({})", rule.path.display(), rule.reason)?;
        }
        for overlay in &self.cache_overlays {
            if overlay.at_real_path {
                writeln!(
                    f,
                    "    overlay {} mounted over itself (the real path, in the sandbox's own mount namespace; read-write beneath it only through the overlay; copy-on-write, the real cache is never written; writes go to {}, or to a temporary layer under {} while another instance of this server uses it)",
                    overlay.lower.display(),
                    overlay.upper.display(),
                    overlay.instances.display()
                )?;
            } else if overlay.mount {
                writeln!(
                    f,
                    "    overlay {} -> {} (copy-on-write; the real cache is never written; writes go to {}, or to a temporary layer under {} while another instance of this server uses it)",
                    overlay.lower.display(),
                    overlay.target.display(),
                    overlay.upper.display(),
                    overlay.instances.display()
                )?;
            } else {
                writeln!(
                    f,
                    "    cache {} (private and empty: no mount namespace for an overlay of {})",
                    overlay.target.display(),
                    overlay.lower.display()
                )?;
            }
        }
        let net_by = match (&self.network, self.namespaces.net) {
            (NetMode::Host, _) => "nothing (host network)".to_string(),
            (_, true) => {
                "private network namespace + landlock TCP rules + seccomp (UDP)".to_string()
            }
            (_, false) if self.landlock.net_rules => {
                "landlock TCP rules + seccomp (UDP)".to_string()
            }
            (_, false) => "seccomp only (no landlock TCP rules on this kernel)".to_string(),
        };
        writeln!(f, "  network: {} (enforced by {net_by})", self.network)?;
        writeln!(
            f,
            "  ipc: abstract unix sockets and signals {}; pathname unix sockets {}",
            if self.landlock.scopes {
                "scoped to the sandbox (landlock)"
            } else {
                "NOT scoped (landlock < 6)"
            },
            if self.seccomp.deny_unix_sockets {
                "refused (seccomp: socket(AF_UNIX))"
            } else {
                "allowed"
            }
        )?;
        let limits: Vec<String> = self
            .rlimits
            .iter()
            .map(|l| format!("{}={}", l.kind.name(), l.value))
            .collect();
        writeln!(f, "  limits: {}", limits.join(" "))?;
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        writeln!(f, "  environment names: {}", names.join(" "))?;
        writeln!(f, "  kill timeout: {}s", self.kill_timeout_secs)?;
        for note in &self.weaker_than_asked {
            writeln!(f, "  LESS CONFINED THAN ASKED: {note}")?;
        }
        Ok(())
    }
}

/// System paths every runtime needs, read+execute. Missing ones are skipped by the helper.
/// Deliberately file-by-file under `/etc`: `/etc/shadow`, `/etc/ssh`, `/etc/sudoers` stay closed.
const SYSTEM_READ: &[(&str, &str)] = &[
    ("/usr", "system programs and libraries"),
    ("/bin", "system programs"),
    ("/sbin", "system programs"),
    ("/lib", "system libraries"),
    ("/lib64", "system libraries"),
    ("/lib32", "system libraries"),
    ("/etc/ld.so.cache", "dynamic linker cache"),
    ("/etc/ld.so.conf", "dynamic linker config"),
    ("/etc/ld.so.conf.d", "dynamic linker config"),
    ("/etc/ssl", "TLS certificates"),
    ("/etc/ca-certificates", "TLS certificates"),
    ("/etc/pki", "TLS certificates"),
    ("/etc/resolv.conf", "name resolution"),
    ("/etc/hosts", "name resolution"),
    ("/etc/nsswitch.conf", "name resolution"),
    ("/etc/host.conf", "name resolution"),
    ("/etc/gai.conf", "name resolution"),
    ("/etc/localtime", "time zone"),
    ("/etc/timezone", "time zone"),
    (
        "/etc/passwd",
        "user names (no password hashes: those are in /etc/shadow, never granted)",
    ),
    ("/etc/group", "group names"),
    ("/etc/os-release", "OS identification"),
    ("/etc/mime.types", "MIME types"),
    ("/etc/alternatives", "Debian alternatives symlinks"),
    ("/etc/python3", "Debian Python site config"),
    ("/etc/python3.11", "Debian Python site config"),
    ("/etc/python3.12", "Debian Python site config"),
    ("/etc/python3.13", "Debian Python site config"),
    (
        "/proc",
        "runtimes read /proc/self; other processes are guarded by landlock's ptrace scoping",
    ),
    ("/sys/devices/system/cpu", "CPU count for thread pools"),
    ("/sys/fs/cgroup", "memory limits for heap sizing"),
    ("/dev/zero", "device"),
    ("/dev/urandom", "randomness"),
    ("/dev/random", "randomness"),
];

const SYSTEM_WRITE: &[(&str, &str)] = &[("/dev/null", "device"), ("/dev/full", "device")];

/// Decides the sandbox for one server. Pure: same request and host, same plan.
pub fn plan(request: &PlanRequest, host: &HostFacts) -> Result<SandboxPlan, PlanError> {
    let policy = &request.sandbox;
    if !request.program.is_absolute() {
        return Err(PlanError::RelativeProgram(request.program.clone()));
    }
    check_server_name(&request.server)?;
    check_requirements(request, host)?;

    let vars = Vars::new(request);
    let private_home = vars.private_home.clone();
    let private_tmp = vars.private_tmp.clone();
    let protected = protected_paths(&request.dirs);
    let mut notes = Vec::new();
    let mut fs = FsRules::default();

    for (path, reason) in SYSTEM_READ {
        fs.push(PathBuf::from(path), FsAccess::ReadExec, reason);
    }
    for (path, reason) in SYSTEM_WRITE {
        fs.push(PathBuf::from(path), FsAccess::ReadWrite, reason);
    }

    // The command's own install prefix and the files it will load, read-only. Derived grants that
    // would cover a protected path (the home itself, airlock's config) are narrowed or dropped.
    for (path, reason) in derived_read_grants(request) {
        match narrow_derived(&path, &protected, request.dirs.home.as_deref()) {
            Some(narrowed) => fs.push(narrowed, FsAccess::ReadExec, &reason),
            None => notes.push(format!(
                "not granting {} ({reason}): it would expose a protected path",
                path.display()
            )),
        }
    }

    let profile = profile::for_program(
        &request.program,
        request.resolved.program_canonical.as_deref(),
    );
    if let Some(profile) = profile {
        for template in &profile.read {
            if let Some(path) = vars.expand_path(template) {
                let reason = format!("{} runtime cache (read-only)", profile.name);
                match narrow_derived(&path, &protected, request.dirs.home.as_deref()) {
                    Some(path) => fs.push(path, FsAccess::ReadExec, &reason),
                    None => notes.push(format!(
                        "not granting {}: it would expose a protected path",
                        path.display()
                    )),
                }
            }
        }
        for template in &profile.write {
            if let Some(path) = vars.expand_path(template) {
                fs.push(
                    path,
                    FsAccess::ReadWrite,
                    &format!("{} runtime", profile.name),
                );
            }
        }
    }

    let cache_overlays = match profile {
        Some(profile) => plan_cache_overlays(request, host, &vars, profile, &protected, &mut notes),
        None => Vec::new(),
    };

    fs.push(
        private_home.clone(),
        FsAccess::ReadWrite,
        "private home (HOME)",
    );
    fs.push(
        private_tmp.clone(),
        FsAccess::ReadWrite,
        "private tmp (TMPDIR)",
    );

    for (grants, access) in [
        (&policy.read, FsAccess::ReadExec),
        (&policy.write, FsAccess::ReadWrite),
    ] {
        for grant in grants {
            let origin = grant.origin.to_string();
            let Some(expanded) = vars.expand(&grant.value) else {
                notes.push(format!(
                    "grant `{}` ({origin}) skipped: a variable it names is not set",
                    grant.value
                ));
                continue;
            };
            let path = PathBuf::from(&expanded);
            if !path.is_absolute() {
                return Err(PlanError::RelativeGrant {
                    grant: grant.value.clone(),
                    origin,
                    expanded,
                });
            }
            let path = normalize_path(&path);
            if let Some((what, protected_path)) = covers_protected(&path, &protected) {
                return Err(PlanError::GrantsProtected {
                    grant: grant.value.clone(),
                    origin,
                    what,
                    path: protected_path,
                });
            }
            fs.push(path, access, &format!("policy grant ({origin})"));
        }
    }

    let network = NetMode::from(&policy.network.value);
    let namespaces = Namespaces {
        user: host.user_namespaces,
        pid: host.user_namespaces,
        net: host.user_namespaces && network == NetMode::None,
        mount: cache_overlays.iter().any(|overlay| overlay.mount),
    };
    if !namespaces.pid {
        notes.push("no pid namespace (user namespaces unavailable): the kill sequence signals the process group, and a descendant that calls setsid can escape it".to_string());
    }
    if network == NetMode::None && !namespaces.net && host.landlock_abi < 4 {
        notes.push("network `none` without a network namespace or landlock TCP rules: only seccomp (UDP) applies".to_string());
    }
    if host.landlock_abi == 0 {
        notes.push("landlock unavailable: no filesystem confinement".to_string());
    } else if host.landlock_abi < 6 {
        notes.push(format!(
            "landlock ABI {} < 6: abstract unix sockets and signals are not scoped",
            host.landlock_abi
        ));
    }
    if !host.seccomp {
        notes.push("seccomp unavailable: no syscall filter".to_string());
    }
    if network == NetMode::Host {
        notes.push(
            "network = host: pathname unix sockets outside the grants are reachable".to_string(),
        );
    }

    let identity = match (host.is_root, policy.run_as.value) {
        (false, _) | (true, RunAs::Root) => None,
        (true, RunAs::Nobody) => Some(Identity {
            uid: NOBODY,
            gid: NOBODY,
        }),
        (true, RunAs::Uid(uid)) => Some(Identity { uid, gid: uid }),
    };
    if !host.is_root && !matches!(policy.run_as.value, RunAs::Nobody) {
        notes.push(format!(
            "run_as = {} needs airlock to run as root; runs as airlock's uid {}",
            policy.run_as.value, host.uid
        ));
    }
    let id_maps = namespaces.user.then(|| id_maps(host, identity));

    let limits = &policy.limits;
    let mib = |value: u64| value.saturating_mul(1024 * 1024);
    let mut rlimits = vec![
        Rlimit {
            kind: RlimitKind::Processes,
            value: limits.processes.value,
        },
        Rlimit {
            kind: RlimitKind::AddressSpace,
            value: mib(limits.memory_mb.value),
        },
        Rlimit {
            kind: RlimitKind::OpenFiles,
            value: limits.open_files.value,
        },
        Rlimit {
            kind: RlimitKind::FileSize,
            value: mib(limits.file_size_mb.value),
        },
        Rlimit {
            kind: RlimitKind::Core,
            value: 0,
        },
    ];
    if let Some(cpu) = &limits.cpu_seconds {
        rlimits.push(Rlimit {
            kind: RlimitKind::Cpu,
            value: cpu.value,
        });
    }

    let env = build_env(request, &vars, profile, &network, &cache_overlays);
    let mut argv = Vec::with_capacity(request.args.len() + 1);
    argv.push(request.program.to_string_lossy().into_owned());
    argv.extend(request.args.iter().cloned());

    Ok(SandboxPlan {
        server: request.server.clone(),
        program: request.program.clone(),
        argv,
        env,
        cwd: request.cwd.clone().unwrap_or_else(|| private_home.clone()),
        private_home,
        private_tmp,
        fs: fs.into_rules(),
        cache_overlays,
        network: network.clone(),
        namespaces,
        id_maps,
        identity,
        landlock: LandlockPlan {
            abi: host.landlock_abi,
            net_rules: host.landlock_abi >= 4 && network != NetMode::Host,
            scopes: host.landlock_abi >= 6,
        },
        seccomp: SeccompPlan {
            enabled: host.seccomp,
            deny_unix_sockets: network != NetMode::Host,
            deny_udp: network != NetMode::Host,
        },
        rlimits,
        kill_timeout_secs: policy.kill_timeout.value,
        weaker_than_asked: notes,
        launcher_pid: None,
    })
}

/// The profile's cache overlays, expanded. A cache that would expose a protected path, or whose
/// mount point is not inside the private home, is left out (and noted); a cache the user does not
/// have is still planned (the helper then mounts nothing and the mount point is an empty cache).
fn plan_cache_overlays(
    request: &PlanRequest,
    host: &HostFacts,
    vars: &Vars<'_>,
    profile: &RuntimeProfile,
    protected: &[(String, PathBuf)],
    notes: &mut Vec<String>,
) -> Vec<CacheOverlayPlan> {
    let mut out: Vec<CacheOverlayPlan> = Vec::new();
    let cache_dir = request
        .dirs
        .servers_dir()
        .join(&request.server)
        .join("cache");
    for overlay in &profile.cache_overlays {
        let (Some(lower), Some(target)) = (
            vars.expand_path(&overlay.lower),
            vars.expand_path(&overlay.at),
        ) else {
            notes.push(format!(
                "{} cache overlay skipped: a variable it names is not set",
                overlay.name
            ));
            continue;
        };
        // Over the real path only when the server runs as airlock's own uid (who can traverse the
        // real home) and a mount namespace exists (otherwise there is nothing to mount), and never
        // over or inside airlock's own dirs (the private home, the layers).
        let server_dir = request.dirs.servers_dir().join(&request.server);
        let at_real_path = overlay.mount_at_real_path
            && !host.is_root
            && host.user_namespaces
            && !vars.private_home.starts_with(&lower)
            && !lower.starts_with(&vars.private_home)
            && !server_dir.starts_with(&lower)
            && !lower.starts_with(&server_dir);
        let target = if at_real_path { lower.clone() } else { target };
        // The name is a directory name under the state dir; the mount point must stay inside the
        // private home, which the server may write anyway (no new grant, no mount over real
        // paths), unless it is the real cache itself (checked against the protected paths below).
        let name_ok = check_server_name(&overlay.name).is_ok();
        let inside_home = target != vars.private_home && target.starts_with(&vars.private_home);
        if !name_ok || !(inside_home || at_real_path) {
            notes.push(format!(
                "{} cache overlay skipped: its name or mount point {} is not a directory inside the private home",
                overlay.name,
                target.display()
            ));
            continue;
        }
        if out
            .iter()
            .any(|o| o.name == overlay.name || o.target == target)
        {
            continue;
        }
        if narrow_derived(&lower, protected, request.dirs.home.as_deref()).is_none() {
            notes.push(format!(
                "{} cache overlay skipped: {} would expose a protected path",
                overlay.name,
                lower.display()
            ));
            continue;
        }
        let mount = host.user_namespaces;
        if !mount {
            notes.push(format!(
                "no user namespaces: the {} cache is a private empty cache at {} (no overlay of {})",
                overlay.name,
                target.display(),
                lower.display()
            ));
        }
        out.push(CacheOverlayPlan {
            name: overlay.name.clone(),
            upper: cache_dir.join(&overlay.name).join("upper"),
            work: cache_dir.join(&overlay.name).join("work"),
            lock: cache_dir.join(&overlay.name).join("lock"),
            instances: cache_dir.join(&overlay.name).join("instances"),
            lower,
            target,
            mount,
            at_real_path,
        });
    }
    out
}

fn check_server_name(name: &str) -> Result<(), PlanError> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    if ok {
        Ok(())
    } else {
        Err(PlanError::BadServerName(name.to_string()))
    }
}

fn check_requirements(request: &PlanRequest, host: &HostFacts) -> Result<(), PlanError> {
    let mut unmet = Vec::new();
    for requirement in &request.sandbox.require {
        let req = &requirement.value;
        let met = match req.feature {
            Feature::Landlock => host.landlock_abi >= req.min_version.unwrap_or(1).max(1),
            Feature::Seccomp => host.seccomp,
            Feature::UserNamespaces => host.user_namespaces,
        };
        if !met {
            unmet.push(format!("`{}` ({})", req.text, requirement.origin));
        }
    }
    if unmet.is_empty() {
        return Ok(());
    }
    Err(PlanError::Unmet {
        server: request.server.clone(),
        unmet: unmet.join(", "),
        have: host.short(),
    })
}

fn id_maps(host: &HostFacts, identity: Option<Identity>) -> IdMaps {
    if host.is_root {
        // Root may map several ids: itself (so the helper can still chown and set up as root inside)
        // and the target identity it switches to before exec.
        let mut uids = vec![format!("0 0 1")];
        let mut gids = vec![format!("0 0 1")];
        if let Some(id) = identity.filter(|id| id.uid != 0) {
            uids.push(format!("{0} {0} 1", id.uid));
            gids.push(format!("{0} {0} 1", id.gid));
        }
        IdMaps {
            uid_map: uids.join("\n"),
            gid_map: gids.join("\n"),
            deny_setgroups: false,
        }
    } else {
        IdMaps {
            uid_map: format!("{0} {0} 1", host.uid),
            gid_map: format!("{0} {0} 1", host.gid),
            deny_setgroups: true,
        }
    }
}

/// Paths no grant may contain: the real home itself, airlock's config dir, state dir (other than
/// this server's own private dirs, granted separately) and audit log.
fn protected_paths(dirs: &AirlockDirs) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    if let Some(home) = &dirs.home {
        out.push(("the home directory".to_string(), home.clone()));
    }
    if let Some(config) = &dirs.config_dir {
        out.push(("airlock's config directory".to_string(), config.clone()));
    }
    out.push((
        "airlock's state directory".to_string(),
        dirs.state_dir.clone(),
    ));
    if let Some(audit) = &dirs.audit_path {
        out.push(("the audit log".to_string(), audit.clone()));
    }
    for policy in &dirs.policy_files {
        out.push(("a policy file".to_string(), policy.clone()));
    }
    out
}

/// The protected path that `grant` equals or contains, if any.
fn covers_protected(grant: &Path, protected: &[(String, PathBuf)]) -> Option<(String, PathBuf)> {
    protected
        .iter()
        .find(|(_, path)| path.starts_with(grant))
        .map(|(what, path)| (what.clone(), path.clone()))
}

/// A derived grant (install prefix, script package) that would cover a protected path is refused;
/// `/` and the home itself are never granted.
fn narrow_derived(
    path: &Path,
    protected: &[(String, PathBuf)],
    _home: Option<&Path>,
) -> Option<PathBuf> {
    if path.parent().is_none() || covers_protected(path, protected).is_some() {
        return None;
    }
    Some(path.to_path_buf())
}

/// `prefix(/x/versions/3.11/bin/python3.11) = /x/versions/3.11`; otherwise the containing dir.
pub fn install_prefix(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    if dir.file_name().is_some_and(|name| name == "bin") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

fn derived_read_grants(request: &PlanRequest) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let resolved = &request.resolved;
    let mut programs = vec![request.program.clone()];
    programs.extend(resolved.program_canonical.clone());
    // A program under a system dir is covered by the system grants already.
    let in_system = |path: &Path| SYSTEM_READ.iter().any(|(dir, _)| path.starts_with(dir));
    for program in programs.into_iter().filter(|p| !in_system(p)) {
        if let Some(prefix) = install_prefix(&program) {
            out.push((prefix, format!("install prefix of {}", program.display())));
        }
    }
    if let Some(venv) = &resolved.venv_root {
        out.push((
            venv.clone(),
            "the virtualenv of the interpreter".to_string(),
        ));
    }
    if let Some(base) = &resolved.venv_base
        && let Some(prefix) = install_prefix(&base.join("python"))
    {
        out.push((
            prefix,
            "the base interpreter the virtualenv links to".to_string(),
        ));
    }
    if let Some(root) = &resolved.script_root {
        out.push((
            root.clone(),
            "the script's package and the node_modules it loads from".to_string(),
        ));
    }
    out
}

/// Template variables for grants and profile env values.
struct Vars<'a> {
    home: Option<&'a Path>,
    private_home: PathBuf,
    private_tmp: PathBuf,
    parent_env: &'a [(String, String)],
}

impl<'a> Vars<'a> {
    fn new(request: &'a PlanRequest) -> Self {
        let base = request.dirs.servers_dir().join(&request.server);
        Vars {
            home: request.dirs.home.as_deref(),
            private_home: base.join("home"),
            private_tmp: base.join("tmp"),
            parent_env: &request.parent_env,
        }
    }

    /// Expands `~`, `${private_home}`, `${private_tmp}`, `${env:NAME}` and `${env:NAME|fallback}`.
    /// `None` when a variable without fallback is unset (or `~` with no home), or the template
    /// is malformed.
    fn expand(&self, template: &str) -> Option<String> {
        let lookup = |var: Var<'_>| match var {
            Var::Plain("private_home") => Some(self.private_home.to_string_lossy().into_owned()),
            Var::Plain("private_tmp") => Some(self.private_tmp.to_string_lossy().into_owned()),
            Var::Plain(_) => None,
            Var::Env(name) => self.parent_env.var(name).map(str::to_string),
        };
        let expanded = crate::paths::expand_path(template, self.home, &lookup).ok()?;
        expanded.unset.is_empty().then_some(expanded.value)
    }

    fn expand_path(&self, template: &str) -> Option<PathBuf> {
        let expanded = self.expand(template)?;
        let path = PathBuf::from(expanded);
        path.is_absolute().then(|| normalize_path(&path))
    }
}

fn build_env(
    request: &PlanRequest,
    vars: &Vars<'_>,
    profile: Option<&RuntimeProfile>,
    network: &NetMode,
    cache_overlays: &[CacheOverlayPlan],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: &str, value: String| {
        env.retain(|(key, _)| key != name);
        env.push((name.to_string(), value));
    };
    for (name, value) in &request.parent_env {
        let passed = request
            .sandbox
            .env
            .iter()
            .any(|pattern| env_name_matches(&pattern.value, name));
        // HOME and TMPDIR always point at the private dirs, whatever the policy passes.
        if passed && name != "HOME" && name != "TMPDIR" {
            set(&mut env, name, value.clone());
        }
    }
    set(
        &mut env,
        "HOME",
        vars.private_home.to_string_lossy().into_owned(),
    );
    set(
        &mut env,
        "TMPDIR",
        vars.private_tmp.to_string_lossy().into_owned(),
    );
    if let Some(profile) = profile {
        let offline = *network == NetMode::None;
        for (name, template) in profile
            .env_pairs()
            .chain(profile.network_env_pairs(offline))
        {
            if let Some(value) = vars.expand(template) {
                set(&mut env, name, value);
            }
        }
        // The cache variable names the server's view (the overlay), never the real cache.
        for planned in cache_overlays {
            let var = profile
                .cache_overlays
                .iter()
                .find(|overlay| overlay.name == planned.name)
                .and_then(|overlay| overlay.env.as_deref());
            if let Some(var) = var {
                set(&mut env, var, planned.target.to_string_lossy().into_owned());
            }
        }
    }
    for (name, value) in &request.env {
        set(&mut env, name, value.clone());
    }
    env
}

/// `LC_*` matches `LC_ALL`; anything else is an exact name.
pub fn env_name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Deduplicated landlock rules: a path granted twice keeps the widest access.
#[derive(Default)]
struct FsRules {
    rules: Vec<FsRule>,
    seen: BTreeSet<PathBuf>,
}

impl FsRules {
    fn push(&mut self, path: PathBuf, access: FsAccess, reason: &str) {
        let path = if path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            normalize_path(&path)
        } else {
            path
        };
        if self.seen.contains(&path) {
            if let Some(rule) = self.rules.iter_mut().find(|rule| rule.path == path) {
                rule.access = rule.access.max(access);
            }
            return;
        }
        self.seen.insert(path.clone());
        self.rules.push(FsRule {
            path,
            access,
            reason: reason.to_string(),
        });
    }

    fn into_rules(self) -> Vec<FsRule> {
        self.rules
    }
}

#[cfg(test)]
mod tests;
