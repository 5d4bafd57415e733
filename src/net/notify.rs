//! The kernel calls of the connect hand-over (`super::handover`): seccomp user notifications for
//! `connect(2)`, reading the server's `sockaddr` from its memory, fetching the socket it named,
//! and putting another socket in its place. Thin wrappers, one `unsafe` each; the decisions live
//! in `super::handover`.
//!
//! Every call here acts on a process of the server's sandbox, which airlock started: as root, and
//! as an ordinary user on a process in a user namespace that user owns, the kernel allows
//! `process_vm_readv`, `pidfd_getfd` and `SECCOMP_IOCTL_NOTIF_ADDFD` (ptrace access mode
//! "attach", which the sandbox's parent has over its descendants).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// The seccomp filter that turns every `connect(2)` into a notification for airlock. Installed by
/// the sandbox's `init` with [`install_connect_filter`]; another architecture's syscalls are left
/// to the base filters, which kill them.
pub fn connect_filter() -> Option<Vec<libc::sock_filter>> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let arch: u32 = match std::env::consts::ARCH {
        "x86_64" => 0xc000_003e,  // AUDIT_ARCH_X86_64
        "aarch64" => 0xc000_00b7, // AUDIT_ARCH_AARCH64
        _ => return None,
    };
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    Some(vec![
        op(LD_W_ABS, 0, 0, 4), // A = seccomp_data.arch
        op(JEQ_K, 0, 2, arch),
        op(LD_W_ABS, 0, 0, 0), // A = seccomp_data.nr
        op(JEQ_K, 1, 0, libc::SYS_connect as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        op(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
    ])
}

/// Installs `program` and returns its notification listener. Requires `no_new_privs`.
pub fn install_connect_filter(program: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(io::Error::other)?,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: seccomp(2) reads `prog`, which points at `program`, alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new fd, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// One `connect(fd, addr, len)` of the server, held by the kernel until answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectCall {
    /// The notification's id, for every answer.
    pub id: u64,
    /// The calling thread, in airlock's pid namespace.
    pub tid: u32,
    pub fd: RawFd,
    pub addr: u64,
    pub addr_len: u64,
}

/// A notification that is not a `connect` (the filter sends none): answered `ENOSYS`.
#[derive(Debug, Clone, Copy)]
pub enum Received {
    Connect(ConnectCall),
    Other { id: u64 },
}

/// Receives one notification. Blocks until one is pending: call it only when the listener polls
/// readable (a notification whose caller was interrupted in between gives `ENOENT`).
pub fn receive(listener: BorrowedFd<'_>) -> io::Result<Received> {
    // SAFETY: an all-zero seccomp_notif is valid, and the kernel requires it zeroed.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: NOTIF_RECV writes one seccomp_notif into the live local.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &mut notif as *mut libc::seccomp_notif,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if i64::from(notif.data.nr) != libc::SYS_connect {
        return Ok(Received::Other { id: notif.id });
    }
    Ok(Received::Connect(ConnectCall {
        id: notif.id,
        tid: notif.pid,
        // connect(2) takes an int: the low 32 bits are the fd, as the kernel reads them.
        fd: notif.data.args[0] as u32 as RawFd,
        addr: notif.data.args[1],
        addr_len: notif.data.args[2] & 0xffff_ffff,
    }))
}

/// Whether the notification `id` is still pending: after reading the caller's memory or opening
/// a pidfd by its pid, this proves the pid still named the caller (not a reused pid).
pub fn still_pending(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: NOTIF_ID_VALID reads one u64 from the live local.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id as *const u64,
        )
    };
    rc == 0
}

/// Answers the notification: the `connect` returns 0, or fails with `errno`. Never "continue":
/// the kernel would re-read the fd and the address, which the server may have changed since.
pub fn answer(listener: BorrowedFd<'_>, id: u64, errno: Option<i32>) -> io::Result<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: errno.map_or(0, |errno| -errno),
        flags: 0,
    };
    // SAFETY: NOTIF_SEND reads one seccomp_notif_resp from the live local.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts `socket` in place of the caller's fd `target` (as `dup2` would, in the caller's fd
/// table), close-on-exec if `cloexec`. The caller's `connect` is still pending afterwards.
pub fn replace_fd(
    listener: BorrowedFd<'_>,
    id: u64,
    socket: BorrowedFd<'_>,
    target: RawFd,
    cloexec: bool,
) -> io::Result<()> {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
        srcfd: socket.as_raw_fd() as u32,
        newfd: target as u32,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: NOTIF_ADDFD reads one seccomp_notif_addfd from the live local.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
            &addfd as *const libc::seccomp_notif_addfd,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The largest address `connect(2)` accepts (`sizeof(struct sockaddr_storage)`).
pub const MAX_ADDR_LEN: u64 = 128;

/// Reads the caller's `sockaddr` (at most [`MAX_ADDR_LEN`] bytes, as the kernel would).
pub fn read_address(tid: u32, addr: u64, len: u64) -> io::Result<Vec<u8>> {
    if len > MAX_ADDR_LEN {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut buf = vec![0u8; len as usize];
    if buf.is_empty() {
        return Ok(buf);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: writes at most buf.len() bytes into `buf`; the remote side is only read, in the
    // other process, by the kernel.
    let read = unsafe { libc::process_vm_readv(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if read < 0 {
        return Err(io::Error::last_os_error());
    }
    if read as usize != buf.len() {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(buf)
}

/// A duplicate of the caller's fd `fd`: the same open file (socket), so acting on it acts on the
/// server's socket, whatever the fd number names by then.
pub fn fetch_fd(tid: u32, fd: RawFd) -> io::Result<OwnedFd> {
    let pidfd = open_pidfd(tid)?;
    // SAFETY: pidfd_getfd takes two fds and flags 0; the result is a new fd (close-on-exec).
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new fd, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// A pidfd for the thread `tid` (PIDFD_THREAD, Linux 6.9), or for its process on older kernels.
fn open_pidfd(tid: u32) -> io::Result<OwnedFd> {
    let open = |pid: u32, flags: libc::c_uint| {
        // SAFETY: pidfd_open takes a pid and flags; the result is a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this new fd, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    };
    match open(tid, libc::PIDFD_THREAD) {
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => open(thread_group(tid)?, 0),
        other => other,
    }
}

fn thread_group(tid: u32) -> io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|tgid| tgid.trim().parse().ok())
        .ok_or_else(|| io::Error::other(format!("/proc/{tid}/status has no Tgid")))
}

/// Whether the caller's fd `fd` is close-on-exec (its fdinfo `flags`, in octal).
pub fn is_cloexec(tid: u32, fd: RawFd) -> io::Result<bool> {
    let info = std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}"))?;
    let flags = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .ok_or_else(|| io::Error::other("fdinfo without flags"))?;
    Ok(flags & libc::O_CLOEXEC as u32 != 0)
}

/// Whether the open file is non-blocking (`O_NONBLOCK`, shared by every fd of the file).
pub fn is_nonblocking(file: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: F_GETFL takes no argument and reads nothing from memory.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags & libc::O_NONBLOCK != 0)
}

/// `connect(2)` on `socket` with the caller's address bytes, as the caller would have made it:
/// for a socket of the sandbox's own network namespace (its resolver, a UDP association).
/// Returns the errno, if any.
pub fn connect_raw(socket: BorrowedFd<'_>, addr: &[u8]) -> Option<i32> {
    let mut storage: libc::sockaddr_storage =
        // SAFETY: an all-zero sockaddr_storage is valid.
        unsafe { std::mem::zeroed() };
    let len = addr
        .len()
        .min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: copies at most sizeof(sockaddr_storage) bytes into the local.
    unsafe {
        std::ptr::copy_nonoverlapping(
            addr.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            len,
        )
    };
    // SAFETY: connect reads `len` bytes of the local storage.
    let rc = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
        )
    };
    if rc < 0 {
        io::Error::last_os_error().raw_os_error()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_has_an_architecture_here() {
        let program = connect_filter().expect("x86_64 or aarch64");
        assert_eq!(program.len(), 6);
        assert_eq!(program[5].k, libc::SECCOMP_RET_USER_NOTIF);
    }

    #[test]
    fn an_address_longer_than_the_kernel_takes_is_refused_before_reading() {
        let err = read_address(std::process::id(), 0, MAX_ADDR_LEN + 1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn own_memory_and_fds_read_back() {
        let bytes = [7u8, 8, 9];
        let me = std::process::id();
        let read = read_address(me, bytes.as_ptr() as u64, 3).unwrap();
        assert_eq!(read, bytes);
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fetched = fetch_fd(me, socket.as_raw_fd()).unwrap();
        let fetched = std::net::UdpSocket::from(fetched);
        assert_eq!(fetched.local_addr().unwrap(), socket.local_addr().unwrap());
        assert!(is_cloexec(me, fetched.as_raw_fd()).unwrap());
    }
}
