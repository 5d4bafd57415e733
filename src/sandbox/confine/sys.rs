//! The mount and path syscalls the confine helper needs, each behind a name that says what it
//! does, returning `io::Result`. The only `unsafe` of the root construction lives here.
//!
//! Mounts are made the fd way (the kernel's "new mount API", Linux >= 5.2): a filesystem or a
//! clone of a host tree is first a *detached* mount held by an fd, gets its attributes
//! (read-only, nosuid, nodev, idmapped), and is then attached at a mount point that is itself an
//! fd. No path string is interpreted twice, so where a mount lands never depends on the current
//! root or on symlinks met on the way.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

pub(super) fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn result(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 { Err(last_error()) } else { Ok(()) }
}

fn fd_result(rc: libc::c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(last_error());
    }
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::other("fd out of range"))?;
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes every mount of this (private) mount namespace private, recursively: nothing mounted
/// here reaches the host, nothing of the host's later mounts reaches here.
pub(super) fn make_mounts_private() -> io::Result<()> {
    // SAFETY: mount(2) with a valid C string target and null source/type/data.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    result(rc.into())
}

/// A detached clone of the mount tree at `path` (with its submounts: a tree that has locked
/// submounts, as every host tree in a user namespace has, may only be cloned whole).
///
/// `path` is resolved with no symlink in any component (`openat2` `RESOLVE_NO_SYMLINKS`, ELOOP
/// otherwise): the paths bound are resolved beforehand, and a server still running from an
/// earlier start could swap a directory on the way for a link between that resolution and this
/// bind (`AT_SYMLINK_NOFOLLOW` guards the last component only).
pub(super) fn clone_tree(dirfd: RawFd, path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: open_how is plain integers; all-zero is its documented "no options" value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: openat2 reads a valid C string and an open_how of the size passed; it returns a
    // new fd or -1.
    let opened = fd_result(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    })?;
    let flags = libc::OPEN_TREE_CLONE
        | libc::OPEN_TREE_CLOEXEC
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: open_tree on an fd we own with an empty path; returns a new fd or -1.
    fd_result(unsafe {
        libc::syscall(libc::SYS_open_tree, opened.as_raw_fd(), c"".as_ptr(), flags)
    })
}

/// Sets mount attributes (`MOUNT_ATTR_*`) on every mount of a detached or attached tree;
/// `idmap` is the user namespace whose mapping an idmapped mount shows (`MOUNT_ATTR_IDMAP`).
pub(super) fn set_attributes(tree: &OwnedFd, set: u64, idmap: Option<&OwnedFd>) -> io::Result<()> {
    let attr = libc::mount_attr {
        attr_set: set
            | if idmap.is_some() {
                libc::MOUNT_ATTR_IDMAP
            } else {
                0
            },
        attr_clr: 0,
        propagation: 0,
        userns_fd: idmap.map_or(0, |fd| fd.as_raw_fd() as u64),
    };
    // SAFETY: mount_setattr reads `attr` (ours, with its exact size) and an empty C string.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    result(rc)
}

/// The same on one mount only (not its submounts): the root's own tmpfs, made read-only last.
pub(super) fn set_attributes_here(mount_root: &OwnedFd, set: u64) -> io::Result<()> {
    let attr = libc::mount_attr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: as in `set_attributes`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount_root.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    result(rc)
}

/// Attaches a detached tree at the mount point `target` (an `O_PATH` fd).
pub(super) fn attach(tree: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: move_mount reads two empty C strings; both fds are ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    result(rc)
}

/// A new filesystem instance being configured (`fsopen`).
pub(super) struct FsContext(OwnedFd);

impl FsContext {
    pub(super) fn new(fstype: &CStr) -> io::Result<Self> {
        // SAFETY: fsopen reads a valid C string.
        let fd = unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), libc::FSOPEN_CLOEXEC) };
        fd_result(fd).map(FsContext)
    }

    /// A `key=value` option.
    pub(super) fn set(&self, key: &CStr, value: &CStr) -> io::Result<()> {
        // SAFETY: fsconfig reads two valid C strings.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                self.0.as_raw_fd(),
                libc::FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        };
        result(rc)
    }

    /// A flag option (`userxattr`).
    pub(super) fn flag(&self, key: &CStr) -> io::Result<()> {
        // SAFETY: fsconfig reads a valid C string; value must be null for a flag.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                self.0.as_raw_fd(),
                libc::FSCONFIG_SET_FLAG,
                key.as_ptr(),
                std::ptr::null::<libc::c_char>(),
                0,
            )
        };
        result(rc)
    }

    /// Creates the filesystem and returns it as a detached mount with `attributes`.
    pub(super) fn mount(self, attributes: u64) -> io::Result<OwnedFd> {
        // SAFETY: fsconfig with a command takes no pointers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                self.0.as_raw_fd(),
                libc::FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_void>(),
                0,
            )
        };
        result(rc)?;
        // SAFETY: fsmount takes integers only.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_fsmount,
                self.0.as_raw_fd(),
                libc::FSMOUNT_CLOEXEC,
                attributes,
            )
        };
        fd_result(fd)
    }
}

/// `pivot_root(".", put_old)` from the current directory.
pub(super) fn pivot_root_here(put_old: &CStr) -> io::Result<()> {
    // SAFETY: pivot_root reads two valid C strings.
    result(unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), put_old.as_ptr()) })
}

/// Detaches the mount at the current directory and everything below it (lazily).
pub(super) fn detach_here() -> io::Result<()> {
    // SAFETY: umount2 reads a valid C string.
    result(unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) }.into())
}

pub(super) fn detach(path: &CStr) -> io::Result<()> {
    // SAFETY: umount2 reads a valid C string.
    result(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) }.into())
}

pub(super) fn change_dir_to(dir: &OwnedFd) -> io::Result<()> {
    // SAFETY: fchdir on an fd we own.
    result(unsafe { libc::fchdir(dir.as_raw_fd()) }.into())
}

pub(super) fn change_dir(path: &CStr) -> io::Result<()> {
    // SAFETY: chdir reads a valid C string.
    result(unsafe { libc::chdir(path.as_ptr()) }.into())
}

/// `openat(dirfd, name, flags)`; `O_CLOEXEC` always.
pub(super) fn open_at(dirfd: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: openat reads a valid C string; the mode is used only with O_CREAT.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    fd_result(fd.into())
}

pub(super) fn make_dir_at(dirfd: RawFd, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: mkdirat reads a valid C string.
    result(unsafe { libc::mkdirat(dirfd, name.as_ptr(), mode) }.into())
}

pub(super) fn symlink_at(text: &CStr, dirfd: RawFd, name: &CStr) -> io::Result<()> {
    // SAFETY: symlinkat reads two valid C strings.
    result(unsafe { libc::symlinkat(text.as_ptr(), dirfd, name.as_ptr()) }.into())
}

/// The text of the symlink `name` in `dirfd`.
pub(super) fn read_link_at(dirfd: RawFd, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes into our buffer.
    let n = unsafe { libc::readlinkat(dirfd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(last_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// A new cgroup namespace rooted at this process's current cgroups.
pub(super) fn new_cgroup_namespace() -> io::Result<()> {
    // SAFETY: unshare takes integer flags only.
    result(unsafe { libc::unshare(libc::CLONE_NEWCGROUP) }.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bind source with a symlink in any component is refused (ELOOP), not followed: a server
    /// could swap a directory on the way for a link after the helper resolved the path.
    #[test]
    fn clone_tree_follows_no_symlink_on_the_way() {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("note: open_tree(OPEN_TREE_CLONE) needs root; this case runs under CI");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("real/sub")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let through_link = c_path(&dir.path().join("link/sub")).unwrap();
        let err = clone_tree(libc::AT_FDCWD, &through_link).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
        let real = c_path(&dir.path().join("real/sub")).unwrap();
        assert!(clone_tree(libc::AT_FDCWD, &real).is_ok());
    }
}
