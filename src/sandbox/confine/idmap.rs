//! Idmapped mounts (airlock root, the server not): a mount can show files with other owners than
//! the filesystem says. The mapping is a user namespace; [`owner_as`] makes one in which the
//! owner `uid`/`gid` appear as the server's `id`, so the server reaches what airlock (root) could,
//! as the owner, and what it creates is the owner's on disk.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{Step, check, fail};
use crate::sandbox::Identity;

/// A user namespace mapping `uid`/`gid` (inside) to the server's ids (outside), as an fd. A
/// short-lived child creates it and waits until the maps are written and the namespace is opened.
pub(super) fn owner_as(uid: u32, gid: u32, id: Identity) -> OwnedFd {
    let uid_map = format!("{uid} {} 1", id.uid);
    let gid_map = format!("{gid} {} 1", id.gid);
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into our array.
    check(
        Step::Root,
        "pipe2",
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into(),
    );
    // SAFETY: both fds were just created by pipe2 and are owned here.
    let (hold_r, hold_w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: fork-like clone (no CLONE_VM, null stack) of this single-threaded process.
    let child = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    check(Step::Root, "clone(CLONE_NEWUSER) for an id mapping", child);
    if child == 0 {
        drop(hold_w);
        let mut byte = [0u8; 1];
        // SAFETY: blocks until the parent closes its end (EOF), then leaves without destructors.
        unsafe {
            libc::read(hold_r.as_raw_fd(), byte.as_mut_ptr().cast(), 1);
            libc::_exit(0)
        }
    }
    drop(hold_r);
    let child = child as libc::pid_t;
    let write = |file: &str, text: &str| {
        let path = format!("/proc/{child}/{file}");
        if let Err(err) = std::fs::write(&path, text) {
            fail(Step::Root, format!("writing {path} ({text:?}): {err}"));
        }
    };
    write("uid_map", &uid_map);
    write("gid_map", &gid_map);
    let ns = std::fs::File::open(format!("/proc/{child}/ns/user"))
        .unwrap_or_else(|err| fail(Step::Root, format!("opening the mapping namespace: {err}")));
    drop(hold_w);
    let mut status = 0;
    // SAFETY: reaps our own child; status is a local.
    unsafe { libc::waitpid(child, &mut status, 0) };
    OwnedFd::from(ns)
}
