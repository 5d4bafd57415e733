//! Signals and waiting: the helper forwards SIGTERM/SIGINT/SIGHUP to init, init to every process
//! of the sandbox; both reap.

use std::sync::atomic::{AtomicI32, Ordering};

use super::{Step, fail, os_error};

static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::SeqCst);
    if target != 0 {
        // SAFETY: kill is async-signal-safe. target is a child pid, or -1 inside our own pid
        // namespace (init: every process of the sandbox).
        unsafe { libc::kill(target, sig) };
    }
}

pub(super) fn install_forwarding(target: libc::pid_t) {
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

static KILL_ON_PARENT_DEATH: AtomicI32 = AtomicI32::new(0);

extern "C" fn kill_sandbox(_sig: libc::c_int) {
    let init = KILL_ON_PARENT_DEATH.load(Ordering::SeqCst);
    if init > 0 {
        // SAFETY: kill is async-signal-safe; init is our unreaped child.
        unsafe { libc::kill(init, libc::SIGKILL) };
    }
}

/// The helper, once it supervises `init`: when airlock dies, SIGKILL init (and with it the whole
/// sandbox) and carry on, so the helper can still reap and clean up (the memory cgroup) before it
/// exits, instead of being killed outright. `launcher` is airlock's pid: if it is already gone,
/// the same happens at once.
pub(super) fn kill_sandbox_on_parent_death(init: libc::pid_t, launcher: Option<u32>) {
    KILL_ON_PARENT_DEATH.store(init, Ordering::SeqCst);
    // SAFETY: installs an async-signal-safe handler (it only calls kill); prctl takes integers.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = kill_sandbox as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut()) != 0 {
            fail(Step::Supervise, format!("sigaction: {}", os_error()));
        }
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGUSR2 as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            fail(
                Step::ParentDeath,
                format!("prctl(PR_SET_PDEATHSIG): {}", os_error()),
            );
        }
        // SAFETY: getppid cannot fail.
        let parent = libc::getppid();
        if launcher.is_some_and(|launcher| parent as u32 != launcher) {
            kill_sandbox(libc::SIGUSR2);
        }
    }
}

pub(super) fn reset_signals() {
    // SAFETY: restores default dispositions and an empty mask in a child about to exec.
    unsafe {
        for sig in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGPIPE,
            libc::SIGUSR2,
        ] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Waits for `child`, reaping every other process that gets reparented to us, and returns the
/// shell-style status: the exit code, or 128 + the signal.
pub(super) fn wait_for(child: libc::pid_t, reap_all: bool) -> i32 {
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
