//! The confine helper: `airlock __confine`, a fresh single-threaded process that applies a
//! [`SandboxPlan`] and `execve`s the server. It never returns and never runs anything unconfined:
//! every failure prints `airlock-confine: <step>: <why>` on stderr and exits with the step's code.
//!
//! Processes (with a pid namespace, the normal case):
//!
//! ```text
//! airlock ── helper (this binary, outside) ── init (pid 1 of the new namespaces) ── server
//! ```
//!
//! The helper reads the plan, prepares everything that can fail (BPF programs, landlock rules
//! with their path fds, private dirs, argv/env), then clones `init` into new user+pid(+net)
//! namespaces, writes its id maps and supervises it: it forwards SIGTERM/SIGINT/SIGHUP and exits
//! with its status. `init` drops everything (rlimits, caps, uid, no_new_privs, landlock, seccomp),
//! then forks the server and reaps; when the server exits, `init` exits, and the kernel kills every
//! process left in the namespace. If airlock dies, the helper gets SIGKILL (parent-death signal);
//! if the helper dies, `init` does, and with it the namespace. Nothing survives.
//!
//! Order deviations from the design, and why: inherited fds are closed first (before anything is
//! opened, so the helper's own fds are never at risk), and again after landlock; rlimits are set
//! after the user namespace exists, because RLIMIT_NPROC counts per user namespace: set inside,
//! it counts only the sandbox's processes, not the user's whole session.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{FsAccess, NetMode, RlimitKind, SandboxPlan, seccomp};

mod overlay;

/// The steps of the helper; each failure exits with its own code (documented in
/// `docs/sandbox.md`). Codes sit in 90..=104, away from shell (126/127) and signal (128+n) codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Reading or parsing the plan from stdin.
    Plan = 90,
    /// Building BPF, opening landlock paths, creating private dirs, chdir, argv/env.
    Prepare = 91,
    Setsid = 92,
    /// Parent-death signal, or the parent is already gone.
    ParentDeath = 93,
    Rlimits = 94,
    Namespaces = 95,
    CloseFds = 96,
    Capabilities = 97,
    /// Leaving root (setgroups/setgid/setuid).
    Identity = 98,
    NoNewPrivs = 99,
    Landlock = 100,
    Seccomp = 101,
    Exec = 102,
    /// fork/wait in the supervisor or init.
    Supervise = 103,
    /// The private mount namespace and the copy-on-write cache overlays (npm, uv).
    Overlay = 104,
}

impl Step {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn name(self) -> &'static str {
        match self {
            Step::Plan => "read plan",
            Step::Prepare => "prepare",
            Step::Setsid => "setsid",
            Step::ParentDeath => "parent-death signal",
            Step::Rlimits => "rlimits",
            Step::Namespaces => "namespaces",
            Step::CloseFds => "close inherited fds",
            Step::Capabilities => "drop capabilities",
            Step::Identity => "leave root",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
            Step::Exec => "execve",
            Step::Supervise => "supervise",
            Step::Overlay => "cache overlay",
        }
    }

    pub fn from_code(code: i32) -> Option<Step> {
        use Step::*;
        [
            Plan,
            Prepare,
            Setsid,
            ParentDeath,
            Rlimits,
            Namespaces,
            CloseFds,
            Capabilities,
            Identity,
            NoNewPrivs,
            Landlock,
            Seccomp,
            Exec,
            Supervise,
            Overlay,
        ]
        .into_iter()
        .find(|step| step.code() == code)
    }
}

/// The largest plan the helper accepts (a plan is a few KiB).
const MAX_PLAN_BYTES: u64 = 16 * 1024 * 1024;

fn fail(step: Step, why: impl std::fmt::Display) -> ! {
    eprintln!("airlock-confine: {}: {why}", step.name());
    // SAFETY: _exit ends the process without running destructors or atexit handlers, which is
    // what a forked child must do; it cannot fail.
    unsafe { libc::_exit(step.code()) }
}

fn os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn check(step: Step, what: &str, rc: libc::c_long) {
    if rc < 0 {
        fail(step, format!("{what}: {}", os_error()));
    }
}

/// Writes the plan the way the helper reads it: 8-byte little-endian length, then JSON.
pub fn encode_plan(plan: &SandboxPlan) -> Result<Vec<u8>, serde_json::Error> {
    let json = serde_json::to_vec(plan)?;
    let mut frame = (json.len() as u64).to_le_bytes().to_vec();
    frame.extend_from_slice(&json);
    Ok(frame)
}

/// Reads exactly one frame from fd 0 without buffering past it: what follows on stdin is the
/// server's MCP traffic.
fn read_plan() -> SandboxPlan {
    // SAFETY: fd 0 is open (the launcher passes a pipe); ManuallyDrop keeps it open afterwards.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    let mut len = [0u8; 8];
    if let Err(err) = stdin.read_exact(&mut len) {
        fail(
            Step::Plan,
            format!("reading the plan length from stdin: {err}"),
        );
    }
    let len = u64::from_le_bytes(len);
    if len > MAX_PLAN_BYTES {
        fail(
            Step::Plan,
            format!("plan of {len} bytes is larger than {MAX_PLAN_BYTES}"),
        );
    }
    let mut json = vec![0u8; len as usize];
    if let Err(err) = stdin.read_exact(&mut json) {
        fail(Step::Plan, format!("reading the plan from stdin: {err}"));
    }
    serde_json::from_slice(&json)
        .unwrap_or_else(|err| fail(Step::Plan, format!("invalid plan: {err}")))
}

fn close_inherited_fds() {
    // SAFETY: closes fds >= 3 of this process; nothing in the helper holds one yet (or holds one it
    // still needs: the second call runs after landlock consumed its fds).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    check(Step::CloseFds, "close_range(3, ~0)", rc);
}

fn set_parent_death_signal() {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number, no pointers.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    check(Step::ParentDeath, "prctl(PR_SET_PDEATHSIG)", rc.into());
}

/// Everything prepared before the point of no return.
struct Prepared {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    bpf: Vec<seccompiler::BpfProgram>,
    ruleset: Option<RulesetCreated>,
    overlays: Vec<overlay::Prepared>,
    /// The locks that make each overlay's upper/work this instance's alone; the supervisor keeps
    /// them (see `overlay`).
    leases: Vec<overlay::Lease>,
}

fn cstring(step: Step, text: &[u8]) -> CString {
    CString::new(text)
        .unwrap_or_else(|_| fail(step, "an argument or environment entry contains a NUL byte"))
}

fn prepare(plan: &SandboxPlan) -> Prepared {
    let program = cstring(Step::Prepare, plan.program.as_os_str().as_bytes());
    let argv = plan
        .argv
        .iter()
        .map(|a| cstring(Step::Prepare, a.as_bytes()))
        .collect();
    let envp = plan
        .env
        .iter()
        .map(|(k, v)| cstring(Step::Prepare, format!("{k}={v}").as_bytes()))
        .collect();
    let cwd = cstring(Step::Prepare, plan.cwd.as_os_str().as_bytes());
    let bpf = if plan.seccomp.enabled {
        seccomp::compile(&plan.seccomp).unwrap_or_else(|err| fail(Step::Prepare, err))
    } else {
        Vec::new()
    };
    for dir in [&plan.private_home, &plan.private_tmp] {
        make_private_dir(plan, dir);
    }
    let (overlays, leases) = overlay::prepare(plan);
    let ruleset = (plan.landlock.abi > 0).then(|| build_ruleset(plan));
    Prepared {
        program,
        argv,
        envp,
        cwd,
        bpf,
        ruleset,
        overlays,
        leases,
    }
}

pub(super) fn make_private_dir(plan: &SandboxPlan, dir: &Path) {
    use std::os::unix::fs::{PermissionsExt, chown};
    if let Err(err) = std::fs::create_dir_all(dir) {
        fail(Step::Prepare, format!("creating {}: {err}", dir.display()));
    }
    if let Some(id) = plan.identity
        && let Err(err) = chown(dir, Some(id.uid), Some(id.gid))
    {
        fail(
            Step::Prepare,
            format!("chown {} to {}: {err}", dir.display(), id.uid),
        );
    }
    if let Err(err) = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
        fail(Step::Prepare, format!("chmod 700 {}: {err}", dir.display()));
    }
}

fn build_ruleset(plan: &SandboxPlan) -> RulesetCreated {
    // The ABI the host reported, as a hard requirement: the kernel enforces exactly what the plan
    // (and `airlock check`) promised, or the helper stops.
    let abi = ABI::from(plan.landlock.abi.min(8) as i32);
    let fail_ll = |what: &str, err: &dyn std::fmt::Display| -> ! {
        fail(Step::Prepare, format!("landlock {what}: {err}"))
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .unwrap_or_else(|e| fail_ll("handle fs", &e));
    if plan.landlock.net_rules {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .unwrap_or_else(|e| fail_ll("handle net", &e));
    }
    if plan.landlock.scopes {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .unwrap_or_else(|e| fail_ll("scope", &e));
    }
    let mut created = ruleset.create().unwrap_or_else(|e| fail_ll("create", &e));
    for rule in &plan.fs {
        let fd = match PathFd::new(&rule.path) {
            Ok(fd) => fd,
            // Missing optional paths (`/lib32`, a cache the user never filled) are simply absent.
            Err(_) if !rule.path.exists() => continue,
            Err(err) => fail_ll(&format!("open {}", rule.path.display()), &err),
        };
        let mut access = match rule.access {
            FsAccess::ReadExec => AccessFs::from_read(abi),
            FsAccess::ReadWrite => AccessFs::from_all(abi),
        };
        if !rule.path.is_dir() {
            access &= AccessFs::from_file(abi);
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .unwrap_or_else(|e| fail_ll(&format!("rule for {}", rule.path.display()), &e));
    }
    if let (true, NetMode::TcpConnect(ports)) = (plan.landlock.net_rules, &plan.network) {
        for port in ports {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .unwrap_or_else(|e| fail_ll(&format!("rule for port {port}"), &e));
        }
    }
    created
}

/// Read-write beneath each overlay mounted over a real cache path, on the overlay's root (see
/// `overlay::mount_all`): only now, with the overlay in place, so the grant never reaches the real
/// cache. Without landlock there are no rules to add (and nothing else is confined by path).
fn grant_mounted_overlays(
    plan: &SandboxPlan,
    prepared: &mut Prepared,
    mounted: Vec<(std::path::PathBuf, OwnedFd)>,
) {
    let Some(mut ruleset) = prepared.ruleset.take() else {
        return;
    };
    let abi = ABI::from(plan.landlock.abi.min(8) as i32);
    for (path, fd) in mounted {
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
            .unwrap_or_else(|err| {
                fail(
                    Step::Overlay,
                    format!("landlock rule for the overlay at {}: {err}", path.display()),
                )
            });
    }
    prepared.ruleset = Some(ruleset);
}

fn rlimit_resource(kind: RlimitKind) -> libc::__rlimit_resource_t {
    match kind {
        RlimitKind::Processes => libc::RLIMIT_NPROC,
        RlimitKind::AddressSpace => libc::RLIMIT_AS,
        RlimitKind::OpenFiles => libc::RLIMIT_NOFILE,
        RlimitKind::FileSize => libc::RLIMIT_FSIZE,
        RlimitKind::Core => libc::RLIMIT_CORE,
        RlimitKind::Cpu => libc::RLIMIT_CPU,
    }
}

fn apply_rlimits(plan: &SandboxPlan) {
    for limit in &plan.rlimits {
        let value = limit.value as libc::rlim_t;
        let rlim = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct we own.
        let rc = unsafe { libc::setrlimit(rlimit_resource(limit.kind), &rlim) };
        check(
            Step::Rlimits,
            &format!("setrlimit({}, {value})", limit.kind.name()),
            rc.into(),
        );
    }
}

fn write_proc(pid: libc::pid_t, file: &str, text: &str) {
    let path = format!("/proc/{pid}/{file}");
    if let Err(err) = std::fs::write(&path, text) {
        fail(
            Step::Namespaces,
            format!("writing {path} ({text:?}): {err}"),
        );
    }
}

fn drop_capabilities_keep_setid() {
    use caps::CapSet;
    // Without CAP_SETPCAP (airlock unprivileged, no user namespace) the bounding set cannot be
    // changed, and there is nothing in it to gain: no_new_privs blocks file capabilities.
    let can_drop_bounding =
        caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false);
    for cap in caps::all().into_iter().filter(|_| can_drop_bounding) {
        if let Err(err) = caps::drop(None, CapSet::Bounding, cap) {
            fail(
                Step::Capabilities,
                format!("dropping {cap} from the bounding set: {err}"),
            );
        }
    }
    for set in [CapSet::Ambient, CapSet::Inheritable] {
        if let Err(err) = caps::clear(None, set) {
            fail(Step::Capabilities, format!("clearing {set:?}: {err}"));
        }
    }
}

fn clear_capabilities() {
    use caps::CapSet;
    for set in [CapSet::Effective, CapSet::Permitted] {
        if let Err(err) = caps::clear(None, set) {
            fail(Step::Capabilities, format!("clearing {set:?}: {err}"));
        }
    }
    match caps::read(None, CapSet::Permitted) {
        Ok(left) if left.is_empty() => {}
        Ok(left) => fail(
            Step::Capabilities,
            format!("capabilities left after dropping: {left:?}"),
        ),
        Err(err) => fail(Step::Capabilities, format!("reading capabilities: {err}")),
    }
}

fn leave_root(plan: &SandboxPlan) {
    let Some(id) = plan.identity else { return };
    // SAFETY: plain id syscalls with integer arguments; setgroups(0, NULL) clears the list.
    unsafe {
        check(
            Step::Identity,
            "setgroups([])",
            libc::setgroups(0, std::ptr::null()).into(),
        );
        check(
            Step::Identity,
            "setresgid",
            libc::setresgid(id.gid, id.gid, id.gid).into(),
        );
        check(
            Step::Identity,
            "setresuid",
            libc::setresuid(id.uid, id.uid, id.uid).into(),
        );
        if libc::getuid() != id.uid || libc::geteuid() != id.uid || libc::getegid() != id.gid {
            fail(Step::Identity, "the uid/gid did not change");
        }
    }
}

static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::SeqCst);
    if target != 0 {
        // SAFETY: kill is async-signal-safe. target is a child pid, or -1 inside our own pid
        // namespace (init: every process of the sandbox).
        unsafe { libc::kill(target, sig) };
    }
}

fn install_forwarding(target: libc::pid_t) {
    FORWARD_TO.store(target, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: installs an async-signal-safe handler (it only calls kill).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = forward_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(sig, &action, std::ptr::null_mut()) != 0 {
                fail(Step::Supervise, format!("sigaction: {}", os_error()));
            }
        }
    }
}

fn reset_signals() {
    // SAFETY: restores default dispositions and an empty mask in a child about to exec.
    unsafe {
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Waits for `child`, reaping every other process that gets reparented to us, and returns the
/// shell-style status: the exit code, or 128 + the signal.
fn wait_for(child: libc::pid_t, reap_all: bool) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into our local.
        let pid = unsafe { libc::waitpid(if reap_all { -1 } else { child }, &mut status, 0) };
        if pid < 0 {
            let err = os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            fail(Step::Supervise, format!("waitpid: {err}"));
        }
        if pid == child {
            if libc::WIFEXITED(status) {
                return libc::WEXITSTATUS(status);
            }
            if libc::WIFSIGNALED(status) {
                return 128 + libc::WTERMSIG(status);
            }
        }
    }
}

/// Entry point of `airlock __confine`. Never returns.
pub fn main() -> ! {
    close_inherited_fds();
    let mut plan = read_plan();
    // SAFETY: setsid has no arguments; it fails only if we already lead a group.
    check(Step::Setsid, "setsid", unsafe { libc::setsid() }.into());
    set_parent_death_signal();
    if let Some(launcher) = plan.launcher_pid {
        // SAFETY: getppid cannot fail.
        let parent = unsafe { libc::getppid() };
        if parent as u32 != launcher {
            fail(
                Step::ParentDeath,
                format!("launcher {launcher} is gone (parent is now {parent})"),
            );
        }
    }
    let mut prepared = prepare(&plan);
    let leases = std::mem::take(&mut prepared.leases);

    // The release pipe: init waits for its maps before going on, and sees EOF on it if the helper dies.
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into our array.
    check(
        Step::Namespaces,
        "pipe2",
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into(),
    );
    // SAFETY: both fds were just created by pipe2 and are owned here.
    let (release_r, release_w) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };

    let ns = plan.namespaces;
    let mut flags: libc::c_ulong = libc::SIGCHLD as libc::c_ulong;
    if ns.user {
        flags |= libc::CLONE_NEWUSER as libc::c_ulong;
    }
    if ns.pid {
        flags |= libc::CLONE_NEWPID as libc::c_ulong;
    }
    if ns.net {
        flags |= libc::CLONE_NEWNET as libc::c_ulong;
    }
    if ns.mount {
        // Created together with the user namespace, so init holds CAP_SYS_ADMIN over it and may
        // mount the cache overlays; the mounts exist only inside the sandbox.
        flags |= libc::CLONE_NEWNS as libc::c_ulong;
    }
    // SAFETY: clone without CLONE_VM and with a null stack behaves like fork(2): the child gets a
    // copy of this single-threaded process. Only the raw syscall can combine fork with namespaces.
    let child = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    check(Step::Namespaces, "clone(new namespaces)", child);
    if child > 0 {
        let child = child as libc::pid_t;
        drop(release_r);
        if let Some(maps) = &plan.id_maps {
            if maps.deny_setgroups {
                write_proc(child, "setgroups", "deny");
            }
            write_proc(child, "uid_map", &maps.uid_map);
            write_proc(child, "gid_map", &maps.gid_map);
        }
        // SAFETY: writes one byte from a local buffer to our pipe.
        let wrote = unsafe { libc::write(release_w.as_raw_fd(), b"go".as_ptr().cast(), 1) };
        check(Step::Namespaces, "releasing init", wrote as libc::c_long);
        supervise(child, ns.pid, release_w, leases);
    }
    drop(release_w);
    // init's copies of the lock fds: the helper's copies keep the locks, and the server must never
    // inherit them (they are CLOEXEC and init closes every fd before the fork anyway).
    drop(leases);
    init(&mut plan, prepared, release_r)
}

/// The helper after the clone: forwards signals to init and exits with its status.
fn supervise(
    child: libc::pid_t,
    pid_namespace: bool,
    release_w: OwnedFd,
    leases: Vec<overlay::Lease>,
) -> ! {
    // Without a pid namespace init runs the server in its own process group; signal the group.
    install_forwarding(if pid_namespace { child } else { -child });
    // The helper's stdin/stdout belong to the server now; holding them would delay EOF.
    // SAFETY: open/dup2 on fds this process owns; /dev/null is a valid C string.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
    let status = wait_for(child, false);
    drop(release_w);
    // init is gone, and with it (pid namespace: every process of the sandbox; no pid namespace:
    // no mount namespace, no overlay) the mounts over the layers: the pairs are free again.
    for lease in leases {
        lease.finish();
    }
    std::process::exit(status)
}

fn wait_release(release_r: &OwnedFd) {
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: reads into a local buffer from our pipe.
        let n = unsafe { libc::read(release_r.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
        if n == 1 {
            return;
        }
        if n < 0 && os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        fail(Step::ParentDeath, "the helper died before releasing init");
    }
}

fn parent_alive(release_r: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: release_r.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one pollfd we own, without waiting.
    let rc = unsafe { libc::poll(&mut poll, 1, 0) };
    rc >= 0 && (poll.revents & libc::POLLHUP) == 0
}

/// Pid 1 of the sandbox (or a plain child without a pid namespace): confines itself, then forks
/// the server and reaps until it exits.
fn init(plan: &mut SandboxPlan, mut prepared: Prepared, release_r: OwnedFd) -> ! {
    wait_release(&release_r);
    // While init still holds every capability of its user namespace (and before landlock and
    // seccomp, which forbid mounting).
    if plan.namespaces.mount {
        let mounted = overlay::mount_all(std::mem::take(&mut prepared.overlays));
        grant_mounted_overlays(plan, &mut prepared, mounted);
    }
    apply_rlimits(plan);
    drop_capabilities_keep_setid();
    leave_root(plan);
    clear_capabilities();
    // Changing credentials cleared the parent-death signal: set it again, then check the helper
    // did not die in between (its end of the release pipe would be closed).
    set_parent_death_signal();
    if !parent_alive(&release_r) {
        fail(Step::ParentDeath, "the helper died during setup");
    }
    // SAFETY: chdir reads a valid C string.
    check(
        Step::Prepare,
        &format!("chdir {}", plan.cwd.display()),
        unsafe { libc::chdir(prepared.cwd.as_ptr()) }.into(),
    );
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    check(
        Step::NoNewPrivs,
        "prctl(PR_SET_NO_NEW_PRIVS)",
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into(),
    );
    if let Some(ruleset) = prepared.ruleset.take() {
        match ruleset.restrict_self() {
            Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => {}
            Ok(status) => fail(
                Step::Landlock,
                format!("not fully enforced: {:?}", status.ruleset),
            ),
            Err(err) => fail(Step::Landlock, err),
        }
    }
    drop(release_r);
    close_inherited_fds();
    if !prepared.bpf.is_empty()
        && let Err(err) = seccomp::install(&prepared.bpf)
    {
        fail(Step::Seccomp, err);
    }
    let pid_namespace = plan.namespaces.pid;
    if pid_namespace {
        // As pid 1, SIGTERM from outside is ignored unless handled: forward it to every process of
        // the namespace (kill(-1) from init never reaches outside it).
        install_forwarding(-1);
    }
    // SAFETY: fork in a single-threaded process.
    let server = unsafe { libc::fork() };
    check(Step::Supervise, "fork", server.into());
    if server == 0 {
        if !pid_namespace {
            // SAFETY: own process group, so the helper can signal the server's whole group.
            unsafe { libc::setpgid(0, 0) };
        }
        reset_signals();
        exec(&prepared);
    }
    if !pid_namespace {
        // SAFETY: see above; racing with the child's own setpgid is harmless.
        unsafe { libc::setpgid(server, server) };
        // Without a pid namespace nothing reaps for us; hand the server our place.
        let status = wait_for(server, false);
        std::process::exit(status)
    }
    let status = wait_for(server, true);
    // Leaving pid 1 makes the kernel SIGKILL every process still in the namespace.
    std::process::exit(status)
}

fn exec(prepared: &Prepared) -> ! {
    let mut argv: Vec<*const libc::c_char> = prepared.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = prepared.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: program, argv and envp are NUL-terminated C strings kept alive by `prepared`, and
    // both arrays end with a null pointer.
    unsafe { libc::execve(prepared.program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    let err = os_error();
    let hint = if err.raw_os_error() == Some(libc::EACCES) {
        " (is the program inside the granted paths, and readable by the uid the server runs as?)"
    } else {
        ""
    };
    fail(
        Step::Exec,
        format!("{}: {err}{hint}", prepared.program.to_string_lossy()),
    )
}

/// Whether `path` is the kind of thing the helper will refuse to start from (used by doctor).
pub fn describe_exit(code: i32) -> Option<&'static str> {
    Step::from_code(code).map(Step::name)
}
