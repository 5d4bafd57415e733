//! The sandbox plan: everything the confine helper applies, decided up front by [`super::plan`]
//! and serialised to the helper as JSON.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::cgroup::{CgroupVersion, MemoryCgroup};
use super::root::RootPlan;
use crate::policy::Network;

/// Access granted on a path by landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsAccess {
    /// Read files, list directories, execute.
    ReadExec,
    /// Everything in `ReadExec` plus create, write, remove, rename, truncate.
    ReadWrite,
}

/// A landlock rule, and how its path appears in the server's constructed root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsRule {
    pub path: PathBuf,
    pub access: FsAccess,
    /// Why this path is granted (shown by `airlock check` / `doctor`).
    pub reason: String,
    #[serde(default)]
    pub shown: Shown,
    /// For an [`Shown::IdmappedBind`]: who owns the path on disk, as `airlock check` observed it
    /// (`sandbox::observe_owners`), to say whose files the server reaches. The helper looks
    /// again when it builds the bind; `None`: not looked at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// For a grant derived from a path with its symlinks resolved (the script's package, the
    /// program's install prefix): that path as written. The helper judges the links met on the
    /// way like a grant's own (`sandbox::root::planted_link`, `hidden_through_link`): a server
    /// that replaced its script with a link in its write grant must not steer what the next
    /// start grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_via: Option<PathBuf>,
    /// For a grant derived from a file's content (the interpreter a program's `#!` line names):
    /// that file. The helper judges it like a link lying where the file lies: a server that
    /// rewrote the line of a program in its write grant must not choose what the next start
    /// grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_by: Option<PathBuf>,
    /// The path did not exist when `airlock check` looked (`sandbox::host::observe_host`): the
    /// helper skips it, so the server cannot reach it. Shown, never acted on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// Who owns a path on disk. An idmapped bind shows these ids as the server's: the server reaches
/// the owner's files as their owner, and what it creates there is the owner's on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// How a granted path appears in the server's root (with a constructed root; without one every
/// rule is a landlock rule on the host path and `shown` is [`Shown::Bind`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shown {
    /// The host path, bound at its own path: read-only for [`FsAccess::ReadExec`], read-write for
    /// [`FsAccess::ReadWrite`]; nosuid, nodev.
    #[default]
    Bind,
    /// The same, through an idmapped bind: files of the path's owner on disk (root, or the user
    /// who owns a grant such as `/home/u/proj`) appear as the server's (airlock is root, the
    /// server is not), so a grant works for it read and write.
    IdmappedBind,
    /// A device node (`/dev/null`), bound with its device semantics.
    Device,
    /// Exists only in the constructed root (the private home and tmp on the scratch disk, the
    /// server's own `/proc`, its own cgroup): init adds the landlock rule on it by fd once the
    /// root is built, because a rule on a host inode would not cover it.
    Constructed,
}

/// Network reach, as the helper enforces it (mirrors [`Network`], which is not deserialisable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetMode {
    None,
    /// Only what the allow list names, through airlock's resolver and its connect hand-over (`crate::net`).
    Egress(EgressPlan),
    Host,
}

/// What the helper sets up for egress by name inside the server's network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressPlan {
    pub allow: crate::net::AllowList,
    /// The abstract unix socket on which airlock waits for the namespace's sockets. Set by
    /// `process::spawn_confined_with` (like `launcher_pid`), so the plan itself stays pure.
    #[serde(default)]
    pub channel: Option<String>,
}

impl From<&Network> for NetMode {
    fn from(network: &Network) -> Self {
        match network {
            Network::None => NetMode::None,
            Network::Host => NetMode::Host,
            Network::Allow(_) => match network.allow_list() {
                Some(allow) if !allow.is_empty() => NetMode::Egress(EgressPlan {
                    allow,
                    channel: None,
                }),
                _ => NetMode::None,
            },
        }
    }
}

impl NetMode {
    /// TCP ports landlock lets the server connect to (`None`: no rule, every port).
    pub fn connect_ports(&self) -> Option<Vec<u16>> {
        match self {
            NetMode::None => Some(Vec::new()),
            // airlock makes every connect of the server itself (`crate::net::handover`): the
            // server's own TCP connects would only be a way around it.
            NetMode::Egress(_) => Some(Vec::new()),
            NetMode::Host => None,
        }
    }
}

impl fmt::Display for NetMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetMode::None => f.write_str("none"),
            NetMode::Host => f.write_str("host"),
            NetMode::Egress(egress) => write!(f, "{}", egress.allow),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    pub user: bool,
    pub pid: bool,
    pub net: bool,
    /// A private mount namespace (propagation private): the constructed root and the cache
    /// overlays live in it.
    #[serde(default)]
    pub mount: bool,
    /// A cgroup namespace rooted at the server's own memory cgroup, or at airlock's cgroup when
    /// there is none (`/proc/self/cgroup` shows `/`, not the host's paths; with a v2 memory
    /// cgroup the server's own cgroup2 view shows only its subtree).
    #[serde(default)]
    pub cgroup: bool,
    /// Its own SysV IPC and POSIX message queue namespace: the server can neither reach the
    /// host's shared memory segments, semaphores and message queues (another user's X server's
    /// MIT-SHM segments, another sandbox's queues) nor leave any behind it: the kernel removes
    /// them with the namespace.
    #[serde(default)]
    pub ipc: bool,
    /// Its own host name (`airlock`): the host's name is not the server's to read or set.
    #[serde(default)]
    pub uts: bool,
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
    /// `RLIMIT_DATA`: the memory bound when no memory cgroup can be made (see [`MemoryLimit`]).
    Data,
    OpenFiles,
    FileSize,
    Core,
    Cpu,
}

impl RlimitKind {
    pub fn name(self) -> &'static str {
        match self {
            RlimitKind::Processes => "RLIMIT_NPROC",
            RlimitKind::Data => "RLIMIT_DATA",
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
    /// Shared memory `RLIMIT_DATA` cannot count refused (`MAP_SHARED|MAP_ANONYMOUS`,
    /// `memfd_create`, `shmget`): only when `RLIMIT_DATA` is the memory mechanism (a memory
    /// cgroup counts it, and runtimes may use it there).
    #[serde(default)]
    pub deny_uncounted_memory: bool,
    /// `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` refused: a Fast Open send connects
    /// without `connect(2)`, which is where airlock holds every connection (egress by name).
    #[serde(default)]
    pub deny_fast_open: bool,
    /// `listen` refused (egress by name): a socket of the host's network handed to the server
    /// must never listen there (a non-blocking connect's socket that the server shuts down
    /// before it is established is unconnected again), and inside the namespace nothing could
    /// reach a listener anyway (airlock makes every connect).
    #[serde(default)]
    pub deny_listen: bool,
}

/// A runtime cache shown to the server as a private copy-on-write overlayfs (see
/// [`super::profile::CacheOverlay`]). The helper mounts it inside the sandbox's own mount
/// namespace; the real cache (`lower`) is the read-only lower layer and is never written. The
/// upper layer and workdir are `layers/<name>/{upper,work}` on the server's scratch disk (a
/// size-limited tmpfs of this instance, see [`RootPlan::scratch_mb`]): what the server writes into
/// its cache view is bounded by `disk_mb` and gone when the instance ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheOverlayPlan {
    pub name: String,
    /// The user's real cache. Reached only through the overlay (no landlock grant).
    pub lower: PathBuf,
    /// The mount point: inside the private home (covered by its read-write landlock rule), or,
    /// with `at_real_path`, the real cache path itself (`lower`).
    pub target: PathBuf,
    /// The overlay is mounted over the real cache path (`target == lower`): for caches that refer
    /// to themselves by absolute path (uv). `target` is then in no `fs` rule: the helper grants
    /// read-write beneath it only after the overlay is mounted there, on the overlay's own root,
    /// so the grant cannot exist without the overlay.
    #[serde(default)]
    pub at_real_path: bool,
    /// `false` when no mount namespace can be made (no user namespaces): `target` is then a
    /// private, initially empty cache, and the plan says so in `weaker_than_asked`.
    pub mount: bool,
    /// airlock's private copy of this cache for this server (`crate::fetch::layers`): the
    /// directory whose finished install layers the helper stacks, newest first, above the real
    /// cache. Read when the server starts, so a restart sees what an install added.
    #[serde(default)]
    pub layers: Option<PathBuf>,
    /// The install step only: the upper layer on disk (its workdir beside it), which becomes a
    /// new layer when the install succeeds. `None`: the upper layer is on the scratch disk and
    /// gone when the server ends.
    #[serde(default)]
    pub upper_on_disk: Option<PathBuf>,
}

/// How the server's memory is bounded (`sandbox.limits.memory_mb`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryLimit {
    /// A memory cgroup of its own: resident memory (page cache and tmpfs pages it writes
    /// included), and swap when `cgroup.bounds_swap`. Over the limit, the kernel's OOM killer
    /// ends a process of the server.
    Cgroup { cgroup: MemoryCgroup, bytes: u64 },
    /// `RLIMIT_DATA`: the private writable mappings and heap of each process (not address space
    /// reserved without access, so V8 runs). Allocations over it fail with ENOMEM. It cannot
    /// count shared memory; `shared_refused`: seccomp refuses the shared memory a process could
    /// grow without a file (`MAP_SHARED|MAP_ANONYMOUS`, `memfd_create`, SysV `shmget`); `false`
    /// only without seccomp, and the plan then says so.
    RlimitData {
        bytes: u64,
        #[serde(default)]
        shared_refused: bool,
    },
}

impl MemoryLimit {
    pub fn bytes(&self) -> u64 {
        match self {
            MemoryLimit::Cgroup { bytes, .. } | MemoryLimit::RlimitData { bytes, .. } => *bytes,
        }
    }

    /// The mechanism in force, for `check`, `doctor` and the spawn audit event.
    pub fn describe(&self) -> String {
        let mib = self.bytes() >> 20;
        match self {
            MemoryLimit::Cgroup { cgroup, .. } => format!(
                "{mib} MiB resident, cgroup {} {} under {}{}",
                match cgroup.version {
                    CgroupVersion::V1 => "v1",
                    CgroupVersion::V2 => "v2",
                },
                match cgroup.version {
                    CgroupVersion::V1 => "memory.limit_in_bytes",
                    CgroupVersion::V2 => "memory.max",
                },
                cgroup.parent.display(),
                if cgroup.bounds_swap {
                    ", no swap"
                } else {
                    ", swap NOT bounded"
                }
            ),
            MemoryLimit::RlimitData { shared_refused, .. } => format!(
                "{mib} MiB of private memory per process, RLIMIT_DATA (no memory cgroup airlock may create); shared anonymous memory, memfd and SysV shm {}; tmpfs pages not counted",
                if *shared_refused {
                    "refused"
                } else {
                    "NOT bounded (no seccomp)"
                }
            ),
        }
    }
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
    /// Landlock rules, each saying how its path appears in the constructed root.
    pub fs: Vec<FsRule>,
    /// The server's own root (tmpfs + pivot_root in its mount namespace); `None` without user
    /// namespaces: the server then sees the host's filesystem, filtered by landlock alone.
    pub root: Option<Box<RootPlan>>,
    /// Runtime caches mounted copy-on-write (npm, uv).
    #[serde(default)]
    pub cache_overlays: Vec<CacheOverlayPlan>,
    pub network: NetMode,
    pub namespaces: Namespaces,
    pub id_maps: Option<IdMaps>,
    /// Who to become; `None` keeps airlock's own uid (airlock is not root, or `run_as = "root"`).
    pub identity: Option<Identity>,
    /// airlock's own uid (what the server runs as when `identity` is `None`), for the plan's text.
    #[serde(default)]
    pub airlock_uid: u32,
    pub landlock: LandlockPlan,
    pub seccomp: SeccompPlan,
    pub rlimits: Vec<Rlimit>,
    pub memory: MemoryLimit,
    pub kill_timeout_secs: u64,
    /// Where this plan is less confined than the policy asked, and why.
    pub weaker_than_asked: Vec<String>,
    /// What the server does not get that it would have had (a derived grant or a cache overlay
    /// skipped, and why): narrower than planned, never less confined.
    #[serde(default)]
    pub not_granted: Vec<String>,
    /// The paths on the server's own command line, and what each was granted (or why not).
    #[serde(default)]
    pub arguments: Vec<super::arguments::ArgumentGrant>,
    /// airlock's pid: the helper's parent check. Set by `process::spawn_confined`.
    pub launcher_pid: Option<u32>,
    /// Whether airlock was started with transparent huge pages disabled: the server gets that
    /// back (`process::huge_pages`). Set by `process::spawn_confined`.
    #[serde(default)]
    pub launcher_thp_disabled: bool,
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
    /// The server's filesystem view: `constructed root` or `host filesystem, landlock only`.
    pub root: &'static str,
    /// The memory mechanism in force ([`MemoryLimit::describe`]).
    pub memory: String,
    /// What bounds the server's own writes (home, tmp, cache layers).
    pub disk: String,
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
                None => format!("airlock's uid {}", self.airlock_uid),
            },
            root: if self.root.is_some() {
                "constructed root"
            } else {
                "host filesystem, landlock only"
            },
            memory: self.memory.describe(),
            disk: self.disk_text(),
        }
    }

    /// What bounds the server's own writes.
    pub fn disk_text(&self) -> String {
        match &self.root {
            Some(root) => format!(
                "{} MiB tmpfs for home, tmp and cache layers (gone when the server ends)",
                root.scratch_mb
            ),
            None => "home and tmp on disk, NOT bounded (no mount namespace)".to_string(),
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
        if self.namespaces.cgroup {
            names.push("cgroup");
        }
        if self.namespaces.ipc {
            names.push("ipc");
        }
        if self.namespaces.uts {
            names.push("uts");
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
