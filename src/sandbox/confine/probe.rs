//! `airlock doctor`'s real attempt at what the helper does with procfs: a user, mount and pid
//! namespace, then the server's own procfs in it. Sysctls and mount tables do not tell whether
//! the kernel will allow the mount (see `sandbox::procfs`); trying it does.

use super::build::own_proc;

/// What the attempt found.
#[derive(Debug)]
pub enum ProcProbe {
    /// The kernel mounted a procfs for a new pid namespace, as it will for every server.
    Mounted,
    /// The namespaces were made, and the procfs mount was refused with this error.
    Refused(std::io::Error),
    /// The namespaces themselves could not be made (user namespaces unavailable): nothing tried.
    Untried,
}

/// Exit code of the probe child when `unshare` failed; any other non-zero code is the errno of
/// the refused mount (errnos are below 134).
const UNSHARE_FAILED: i32 = 255;

/// Forks a child that unshares user, mount and pid namespaces and forks pid 1 of the new pid
/// namespace, which mounts the server's procfs (detached) exactly as init does.
pub fn try_own_proc() -> ProcProbe {
    // SAFETY: the children call only async-signal-safe functions (unshare, fork, the fsopen
    // family through raw syscalls that allocate nothing on success or on an OS error, waitpid,
    // _exit), so forking a possibly multi-threaded process is sound; the parent reaps its child.
    let status = unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return ProcProbe::Untried;
        }
        if pid == 0 {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID) != 0 {
                libc::_exit(UNSHARE_FAILED);
            }
            let init = libc::fork();
            if init < 0 {
                libc::_exit(UNSHARE_FAILED);
            }
            if init == 0 {
                let code = match own_proc() {
                    Ok(_) => 0,
                    Err(err) => err.raw_os_error().unwrap_or(libc::EPERM),
                };
                libc::_exit(code);
            }
            libc::_exit(wait_exit_code(init).unwrap_or(UNSHARE_FAILED));
        }
        wait_exit_code(pid)
    };
    match status {
        Some(0) => ProcProbe::Mounted,
        Some(UNSHARE_FAILED) | None => ProcProbe::Untried,
        Some(errno) => ProcProbe::Refused(std::io::Error::from_raw_os_error(errno)),
    }
}

/// The exit code of child `pid`, retrying an interrupted wait; `None` when it did not exit.
fn wait_exit_code(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into a local we own.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
    libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status))
}
