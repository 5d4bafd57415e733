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
//! with their path fds, the binds of the server's root resolved on the host, idmapped clones,
//! the memory cgroup, argv/env), then clones `init` into new user+pid+mount+ipc+uts(+net) namespaces,
//! moves it into the memory cgroup, writes its id maps and supervises it: it forwards
//! SIGTERM/SIGINT/SIGHUP and exits with its status. `init` builds the server's root and enters it
//! (`build.rs`), drops everything (rlimits, caps, uid), enters the working directory, restricts
//! itself into an outer landlock domain (scopes only), installs seccomp (the server inherits it),
//! then forks the server, which restricts itself into its own nested domain (the plan's rules)
//! and `execve`s; init reaps. When the server exits, `init` exits, and the kernel kills every process left in the
//! namespace. If airlock dies, the helper gets SIGKILL (parent-death signal); if the helper dies,
//! `init` does, and with it the namespace. Nothing survives.
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

use ::landlock::RulesetCreated;

use super::{MemoryLimit, SandboxPlan, seccomp};

mod build;
mod cgroup;
mod creds;
mod domains;
mod egress;
mod idmap;
mod overlay;
mod probe;
mod root;
mod signals;
mod sys;
mod tree;

pub use probe::{ProcProbe, try_own_proc};

/// The steps of the helper; each failure exits with its own code (documented in
/// `docs/sandbox.md`). Codes sit in 90..=106, away from shell (126/127) and signal (128+n) codes.
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
    /// The copy-on-write cache overlays (npm, uv).
    Overlay = 104,
    /// Building the server's root: resolving and binding, tmpfs, procfs, `pivot_root`.
    Root = 105,
    /// The memory cgroup (creating it, its limits, moving the sandbox in), the cgroup namespace.
    Memory = 106,
    /// Egress by name: the hand-over channel, the network namespace's routes and sockets.
    Network = 107,
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
            Step::Root => "server root",
            Step::Memory => "memory limit",
            Step::Network => "network egress",
        }
    }

    /// What to change when this step fails and the helper's message names no fix of its own.
    /// Written for every failure site of the step (each names the path or call that failed).
    pub fn fix(self) -> &'static str {
        match self {
            Step::Plan => {
                "the helper is a different airlock binary than the one that started it; reinstall airlock and start the server again"
            }
            Step::Prepare => {
                "make the path named above readable by airlock's user (airlock's state directory must be writable), then start the server again"
            }
            Step::Setsid | Step::ParentDeath | Step::Supervise | Step::CloseFds => {
                "nothing in the policy causes this: airlock stopped while the server was starting, or the system is out of processes; start the server again"
            }
            Step::Rlimits => {
                "lower sandbox.limits (processes, open_files, file_size_mb) in the policy to what this system allows (`ulimit -Ha`)"
            }
            Step::Namespaces => {
                "this system refused the sandbox's user namespace: `airlock doctor` shows whether user namespaces are allowed (sysctl kernel.unprivileged_userns_clone, AppArmor's userns restriction)"
            }
            Step::Capabilities | Step::Identity | Step::NoNewPrivs | Step::Seccomp => {
                "the kernel refused a step it normally allows; `airlock doctor` shows what it enforces, and the error above is the kernel's"
            }
            Step::Landlock => {
                "the kernel did not enforce the landlock rules it reports (`airlock doctor`); a grant named above may be on a filesystem landlock cannot handle: grant another directory"
            }
            Step::Exec => {
                "the program (and the interpreter its first line names) must be inside the granted paths and readable by the uid the server runs as; `airlock check` lists the grants"
            }
            Step::Overlay => {
                "check that the package cache named above is a readable directory; to run without it, point the runtime at another cache (npm_config_cache, UV_CACHE_DIR)"
            }
            Step::Root => {
                "remove or narrow the grant named above (policy read/write, or the path on the server's command line)"
            }
            Step::Memory => {
                "airlock could not give the server its memory cgroup; `airlock doctor` shows where it may create one (or lower sandbox.limits.memory_mb)"
            }
            Step::Network => {
                "the server's network allow list could not be set up in its namespace; `airlock doctor` shows what this kernel allows (or set sandbox.network = \"none\")"
            }
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
            Root,
            Memory,
            Network,
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
    home: CString,
    bpf: Vec<seccompiler::BpfProgram>,
    /// The server's landlock domain (host-path rules; init adds the root's own).
    ruleset: Option<RulesetCreated>,
    /// init's outer domain (scopes only).
    init_ruleset: Option<RulesetCreated>,
    /// The server's root, resolved; `None` without a mount namespace.
    root: Option<root::Prepared>,
    overlays: Vec<overlay::Prepared>,
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
    let bpf = if plan.seccomp.enabled {
        seccomp::compile(&plan.seccomp).unwrap_or_else(|err| fail(Step::Prepare, err))
    } else {
        Vec::new()
    };
    if plan.root.is_none() {
        // No root of its own: the private dirs are on disk, under airlock's state dir.
        for dir in [&plan.private_home, &plan.private_tmp] {
            make_private_dir(plan, dir);
        }
    }
    let root = plan.root.as_ref().map(|root| root::prepare(plan, root));
    let overlays = overlay::prepare(plan);
    let (ruleset, init_ruleset) = if plan.landlock.abi > 0 {
        (
            Some(domains::server_ruleset(plan)),
            domains::init_ruleset(plan),
        )
    } else {
        (None, None)
    };
    Prepared {
        program,
        argv,
        envp,
        cwd: cstring(Step::Prepare, plan.cwd.as_os_str().as_bytes()),
        home: cstring(Step::Prepare, plan.private_home.as_os_str().as_bytes()),
        bpf,
        ruleset,
        init_ruleset,
        root,
        overlays,
    }
}

/// A private directory on disk (only without a root of the server's own).
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

fn write_proc(pid: libc::pid_t, file: &str, text: &str) {
    let path = format!("/proc/{pid}/{file}");
    if let Err(err) = std::fs::write(&path, text) {
        fail(
            Step::Namespaces,
            format!("writing {path} ({text:?}): {err}"),
        );
    }
}

fn clone_flags(plan: &SandboxPlan) -> libc::c_ulong {
    let ns = plan.namespaces;
    let mut flags: libc::c_ulong = libc::SIGCHLD as libc::c_ulong;
    for (wanted, flag) in [
        (ns.user, libc::CLONE_NEWUSER),
        (ns.pid, libc::CLONE_NEWPID),
        (ns.net, libc::CLONE_NEWNET),
        // Created together with the user namespace, so init holds CAP_SYS_ADMIN over it and may
        // build the server's root; the mounts exist only inside the sandbox.
        (ns.mount, libc::CLONE_NEWNS),
        (ns.ipc, libc::CLONE_NEWIPC),
        (ns.uts, libc::CLONE_NEWUTS),
    ] {
        if wanted {
            flags |= flag as libc::c_ulong;
        }
    }
    flags
}

/// Entry point of `airlock __confine`. Never returns.
pub fn main() -> ! {
    close_inherited_fds();
    let plan = read_plan();
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
    let prepared = prepare(&plan);
    // The server's transparent-huge-page setting is what airlock inherited, not airlock's own
    // opt-out (see `process::huge_pages`); set before the clone, so init and the server inherit it.
    crate::process::huge_pages::set_disabled(plan.launcher_thp_disabled);
    let egress_channel = egress::connect(&plan);
    // Before the clone: a cgroup that cannot be made starts nothing.
    let memory = match &plan.memory {
        MemoryLimit::Cgroup { cgroup, bytes } => Some(cgroup::create(cgroup, &plan.server, *bytes)),
        MemoryLimit::RlimitData { .. } => None,
    };

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

    // SAFETY: clone without CLONE_VM and with a null stack behaves like fork(2): the child gets a
    // copy of this single-threaded process. Only the raw syscall can combine fork with namespaces.
    let child = unsafe {
        libc::syscall(
            libc::SYS_clone,
            clone_flags(&plan),
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    check(Step::Namespaces, "clone(new namespaces)", child);
    if child > 0 {
        let child = child as libc::pid_t;
        drop(release_r);
        drop(egress_channel);
        // Into the memory cgroup before it runs anything: every process of the sandbox is born
        // inside.
        if let Some(memory) = &memory {
            memory.add(child);
        }
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
        signals::kill_sandbox_on_parent_death(child, plan.launcher_pid);
        supervise(child, plan.namespaces.pid, release_w, memory);
    }
    drop(release_w);
    init(&plan, prepared, release_r, egress_channel)
}

/// The helper after the clone: forwards signals to init and exits with its status.
fn supervise(
    child: libc::pid_t,
    pid_namespace: bool,
    release_w: OwnedFd,
    memory: Option<cgroup::Lease>,
) -> ! {
    // Without a pid namespace init runs the server in its own process group; signal the group.
    signals::install_forwarding(if pid_namespace { child } else { -child });
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
    let status = signals::wait_for(child, false);
    drop(release_w);
    // init is gone, and with it (pid namespace) every process of the sandbox.
    if let Some(memory) = memory {
        memory.finish();
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

/// Arguments of `argv` (after the program) that read as relative paths, at most three: not an
/// option, absolute path, URL (it may carry a token) or scoped npm package (`@scope/name`), nor
/// text with spaces in it (a `sh -c` script or a sentence).
fn relative_paths(argv: &[String]) -> Vec<&str> {
    argv.iter()
        .skip(1)
        .map(String::as_str)
        .filter(|arg| {
            !arg.starts_with(['-', '/', '@'])
                && arg.contains('/')
                && !arg.contains("://")
                && !arg.contains(char::is_whitespace)
        })
        .take(3)
        .collect()
}

/// The working directory, as the server's uid: the planned one, or, when the server cannot use
/// it (not in its root, or not enterable by its uid), its private home, with one notice.
fn enter_working_dir(plan: &SandboxPlan, prepared: &Prepared) {
    // SAFETY: chdir reads a valid C string.
    if unsafe { libc::chdir(prepared.cwd.as_ptr()) } == 0 {
        return;
    }
    let error = std::io::Error::last_os_error();
    // ENOENT here means "not in the server's root": nothing granted holds it (the directory
    // exists on the host, so the OS's words alone would mislead).
    let why = match error.raw_os_error() {
        Some(libc::ENOENT) => "it is not granted to the server".to_string(),
        Some(libc::EACCES) => "the server's uid may not enter it".to_string(),
        _ => error.to_string(),
    };
    // A relative path on the command line (`python3 ../tools/server.py`) meant the working
    // directory the server does not get: say so, or the server's own error is a riddle.
    let relative = relative_paths(&plan.argv);
    let hint = if relative.is_empty() {
        String::new()
    } else {
        format!(
            "; relative paths on its command line ({}) now resolve from there: give them as absolute paths",
            relative.join(", ")
        )
    };
    eprintln!(
        "airlock-confine: note: the server cannot use the working directory {} ({why}); it starts in its private home {}{hint}",
        plan.cwd.display(),
        plan.private_home.display()
    );
    // SAFETY: chdir reads a valid C string.
    check(
        Step::Prepare,
        &format!("chdir {}", plan.private_home.display()),
        unsafe { libc::chdir(prepared.home.as_ptr()) }.into(),
    );
}

/// Pid 1 of the sandbox (or a plain child without a pid namespace): builds the server's root,
/// confines itself, then forks the server and reaps until it exits.
fn init(
    plan: &SandboxPlan,
    mut prepared: Prepared,
    release_r: OwnedFd,
    egress_channel: Option<OwnedFd>,
) -> ! {
    wait_release(&release_r);
    if plan.namespaces.cgroup {
        // Rooted at the memory cgroup the helper moved us into, or without one where airlock is.
        if let Err(err) = sys::new_cgroup_namespace() {
            fail(Step::Prepare, format!("unshare(CLONE_NEWCGROUP): {err}"));
        }
    }
    if plan.namespaces.uts {
        const NAME: &[u8] = b"airlock";
        // SAFETY: sethostname reads NAME.len() bytes of a static buffer.
        check(
            Step::Prepare,
            "sethostname",
            unsafe { libc::sethostname(NAME.as_ptr().cast(), NAME.len()) }.into(),
        );
    }
    // While init still holds every capability of its user namespace (and before landlock and
    // seccomp, which forbid mounting).
    let overlays = std::mem::take(&mut prepared.overlays);
    let overlay_roots = match prepared.root.take() {
        Some(root) => build::build(root, overlays),
        None => Vec::new(),
    };
    // Egress by name, with CAP_NET_ADMIN and CAP_NET_BIND_SERVICE still held in the namespace:
    // loopback, local routes, the resolver's sockets (handed over below, see `egress`).
    let egress = egress::set_up(plan, egress_channel);
    creds::apply_rlimits(plan);
    creds::drop_capabilities_keep_setid();
    creds::leave_root(plan);
    creds::clear_capabilities();
    // Changing credentials cleared the parent-death signal: set it again, then check the helper
    // did not die in between (its end of the release pipe would be closed).
    set_parent_death_signal();
    if !parent_alive(&release_r) {
        fail(Step::ParentDeath, "the helper died during setup");
    }
    enter_working_dir(plan, &prepared);
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    check(
        Step::NoNewPrivs,
        "prctl(PR_SET_NO_NEW_PRIVS)",
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into(),
    );
    let server_rules = prepared
        .ruleset
        .take()
        .map(|rules| domains::add_constructed(plan, rules, overlay_roots));
    if let Some(outer) = prepared.init_ruleset.take() {
        domains::restrict(domains::allow_reparenting(plan, outer));
    }
    drop(release_r);
    let pid_namespace = plan.namespaces.pid;
    if pid_namespace {
        // As pid 1, SIGTERM from outside is ignored unless handled: forward it to every process of
        // the namespace (kill(-1) from init never reaches outside it).
        signals::install_forwarding(-1);
    }
    // seccomp before the fork: the server inherits init's filters, so it does not stack a second
    // copy of the same programs (each filter runs on every syscall, for the server's whole life,
    // and each costs a BPF JIT compile at spawn). Nothing init or the server does from here on
    // (fork, landlock, close_range, execve, waiting, kill) is in the table.
    if !prepared.bpf.is_empty()
        && let Err(err) = seccomp::install(&prepared.bpf)
    {
        fail(Step::Seccomp, err);
    }
    egress::hand_over(egress);
    // SAFETY: fork in a single-threaded process.
    let server = unsafe { libc::fork() };
    check(Step::Supervise, "fork", server.into());
    if server == 0 {
        run_server(&prepared, server_rules, pid_namespace);
    }
    drop(server_rules);
    close_inherited_fds();
    if !pid_namespace {
        // SAFETY: see run_server; racing with the child's own setpgid is harmless.
        unsafe { libc::setpgid(server, server) };
        // Without a pid namespace nothing reaps for us; hand the server our place.
        std::process::exit(signals::wait_for(server, false))
    }
    let status = signals::wait_for(server, true);
    // Leaving pid 1 makes the kernel SIGKILL every process still in the namespace.
    std::process::exit(status)
}

/// The server, forked by init (whose seccomp filters it inherits): its own landlock domain
/// (nested in init's), no fds but 0-2, then `execve`.
fn run_server(prepared: &Prepared, rules: Option<RulesetCreated>, pid_namespace: bool) -> ! {
    if !pid_namespace {
        // SAFETY: own process group, so the helper can signal the server's whole group.
        unsafe { libc::setpgid(0, 0) };
    }
    signals::reset_signals();
    if let Some(rules) = rules {
        domains::restrict(rules);
    }
    close_inherited_fds();
    exec(prepared)
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

/// The step's name for a helper exit code (used by doctor and the exit summaries).
pub fn describe_exit(code: i32) -> Option<&'static str> {
    Step::from_code(code).map(Step::name)
}

#[cfg(test)]
mod tests {
    use super::relative_paths;

    #[test]
    fn only_arguments_that_read_as_relative_paths_are_named() {
        let argv: Vec<String> = [
            "python3",
            "../tools/server.py",
            "-m",
            "/abs/path",
            "@scope/pkg",
            "https://example.com/x",
            "cat /x >&2; echo done",
            "data/in.json",
            "plain",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            relative_paths(&argv),
            ["../tools/server.py", "data/in.json"]
        );
    }
}
