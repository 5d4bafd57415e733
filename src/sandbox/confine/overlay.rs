//! The copy-on-write cache overlays of the confine helper (the effects of
//! [`crate::sandbox::CacheOverlayPlan`]).
//!
//! The helper prepares (before the clone, while it is still itself): the private dirs, the mount
//! options, and, when it is root and the server will run as another uid, an idmapped clone of the
//! real cache. init mounts (in its fresh mount namespace, while it still holds every capability of
//! its user namespace, before landlock and seccomp): propagation private on `/`, then one
//! overlayfs per cache at the mount point inside the private home.
//!
//! Why an idmapped lower layer when airlock is root: overlayfs checks the *caller's* permissions
//! against the attributes of the layer a file comes from, so a server running as nobody could not
//! create files in a directory that exists only in root's cache (`_cacache/index-v5/..`, owned by
//! root, 0755). The idmapped clone shows the cache's owner as the server's uid; overlayfs still
//! never writes the lower layer, so the real cache stays unmodified. The clone is attached only long
//! enough for the overlay to take its private reference, then detached again.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Step, check, cstring, fail, make_private_dir, os_error};
use crate::sandbox::{CacheOverlayPlan, Identity, SandboxPlan};

/// `move_mount(2)` flag: the source is the fd itself (not in every libc release).
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x0000_0004;

/// One overlay, ready to mount.
pub(super) struct Prepared {
    name: String,
    lower: PathBuf,
    target: CString,
    target_text: String,
    options: CString,
    /// When the cache must be shown with another owner: a detached idmapped clone of the real
    /// cache and the (private, empty) directory it is attached at while the overlay is mounted.
    idmapped: Option<(OwnedFd, CString)>,
}

/// overlayfs splits its options on `,` and `lowerdir` on `:`; a backslash escapes either.
fn escape(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &byte in path.as_os_str().as_bytes() {
        if matches!(byte, b',' | b':' | b'\\') {
            out.push(b'\\');
        }
        out.push(byte);
    }
    out
}

fn options(lower: &Path, upper: &Path, work: &Path) -> CString {
    let mut text = b"lowerdir=".to_vec();
    text.extend(escape(lower));
    text.extend(b",upperdir=");
    text.extend(escape(upper));
    text.extend(b",workdir=");
    text.extend(escape(work));
    // trusted.* xattrs need CAP_SYS_ADMIN in the initial user namespace, which the sandbox never
    // has (even when airlock is root, init is root only in its own user namespace).
    text.extend(b",userxattr");
    cstring(Step::Overlay, &text)
}

pub(super) fn prepare(plan: &SandboxPlan) -> Vec<Prepared> {
    let mut out = Vec::new();
    for overlay in &plan.cache_overlays {
        // The mount point, or the private cache itself when there is nothing to overlay.
        make_private_dir(plan, &overlay.target);
        if !overlay.mount {
            continue;
        }
        let lower_meta = match std::fs::metadata(&overlay.lower) {
            Ok(meta) if meta.is_dir() => meta,
            Ok(_) => fail(
                Step::Overlay,
                format!(
                    "the {} cache {} is not a directory",
                    overlay.name,
                    overlay.lower.display()
                ),
            ),
            // The user has no cache: nothing to share, the mount point is an empty private cache.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => fail(
                Step::Overlay,
                format!(
                    "the {} cache {}: {err}",
                    overlay.name,
                    overlay.lower.display()
                ),
            ),
        };
        make_private_dir(plan, &overlay.upper);
        make_private_dir(plan, &overlay.work);
        let idmapped = match plan.identity {
            Some(id) if lower_meta.uid() != id.uid || lower_meta.gid() != id.gid => {
                Some(idmapped_lower(overlay, &lower_meta, id))
            }
            _ => None,
        };
        let lowerdir = match &idmapped {
            Some((_, at)) => at.clone(),
            None => overlay.lower.clone(),
        };
        out.push(Prepared {
            name: overlay.name.clone(),
            lower: overlay.lower.clone(),
            target: cstring(Step::Overlay, overlay.target.as_os_str().as_bytes()),
            target_text: overlay.target.display().to_string(),
            options: options(&lowerdir, &overlay.upper, &overlay.work),
            idmapped: idmapped
                .map(|(fd, at)| (fd, cstring(Step::Overlay, at.as_os_str().as_bytes()))),
        });
    }
    out
}

/// A detached clone of the real cache in which its owner appears as `id`. Root only (idmapping a
/// mount needs CAP_SYS_ADMIN over the filesystem), before the clone into the sandbox.
fn idmapped_lower(
    overlay: &CacheOverlayPlan,
    lower: &std::fs::Metadata,
    id: Identity,
) -> (OwnedFd, PathBuf) {
    let fail_id = |what: &str, err: std::io::Error| -> ! {
        fail(
            Step::Overlay,
            format!(
                "idmapping the {} cache {} for uid {}: {what}: {err}",
                overlay.name,
                overlay.lower.display(),
                id.uid
            ),
        )
    };
    // The attach point: next to the upper layer, root's own (never granted to the server).
    let at = overlay
        .upper
        .parent()
        .map(|dir| dir.join("lower"))
        .unwrap_or_else(|| fail(Step::Overlay, "the upper layer has no parent directory"));
    if let Err(err) = std::fs::create_dir_all(&at) {
        fail_id(&format!("creating {}", at.display()), err);
    }
    // An id mapping is a user namespace: inside id `lower owner` <-> outside id `server`, so a
    // file the filesystem says belongs to the cache's owner shows up as the server's.
    let userns = mapping_userns(
        &format!("{} {} 1", lower.uid(), id.uid),
        &format!("{} {} 1", lower.gid(), id.gid),
    );
    let path = cstring(Step::Overlay, overlay.lower.as_os_str().as_bytes());
    // SAFETY: open_tree reads a valid C string and returns a new fd (or -1).
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC,
        )
    };
    if tree < 0 {
        fail_id("open_tree", os_error());
    }
    // SAFETY: open_tree just returned this fd; we own it.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as libc::c_int) };
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_IDMAP | libc::MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    // SAFETY: mount_setattr reads `attr` (ours, with its exact size) and an empty C string path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc < 0 {
        fail_id(
            "mount_setattr(MOUNT_ATTR_IDMAP) (does the filesystem support idmapped mounts?)",
            os_error(),
        );
    }
    (tree, at)
}

/// A user namespace with the given maps, as an fd: a short-lived child creates it and waits
/// until the maps are written and the namespace is opened.
fn mapping_userns(uid_map: &str, gid_map: &str) -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into our array.
    check(
        Step::Overlay,
        "pipe2",
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into(),
    );
    // SAFETY: both fds were just created by pipe2 and are owned here.
    let (hold_r, hold_w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: fork-like clone (no CLONE_VM, null stack) of this single-threaded process.
    let child = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    check(
        Step::Overlay,
        "clone(CLONE_NEWUSER) for the id mapping",
        child,
    );
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
            fail(Step::Overlay, format!("writing {path} ({text:?}): {err}"));
        }
    };
    write("uid_map", uid_map);
    write("gid_map", gid_map);
    let ns = std::fs::File::open(format!("/proc/{child}/ns/user")).unwrap_or_else(|err| {
        fail(
            Step::Overlay,
            format!("opening the mapping namespace: {err}"),
        )
    });
    drop(hold_w);
    let mut status = 0;
    // SAFETY: reaps our own child; status is a local.
    unsafe { libc::waitpid(child, &mut status, 0) };
    OwnedFd::from(ns)
}

/// In init: private propagation, then every overlay. Any failure stops the sandbox: the server is
/// never started with the real cache or without its cache view.
pub(super) fn mount_all(overlays: Vec<Prepared>) {
    // Mounts made here never reach the host and the host's never reach the sandbox.
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
    check(
        Step::Overlay,
        "making mounts private (MS_REC|MS_PRIVATE on /)",
        rc.into(),
    );
    for overlay in overlays {
        if let Some((tree, at)) = &overlay.idmapped {
            // SAFETY: move_mount reads two valid C strings; `tree` is our detached mount.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    tree.as_raw_fd(),
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    at.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                )
            };
            if rc < 0 {
                fail(
                    Step::Overlay,
                    format!(
                        "attaching the idmapped {} cache: move_mount: {}",
                        overlay.name,
                        os_error()
                    ),
                );
            }
        }
        // SAFETY: mount(2) reads valid C strings (source, target, type, options) we own.
        let rc = unsafe {
            libc::mount(
                c"overlay".as_ptr(),
                overlay.target.as_ptr(),
                c"overlay".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                overlay.options.as_ptr().cast(),
            )
        };
        if rc < 0 {
            fail(
                Step::Overlay,
                format!(
                    "mounting the {} cache overlay at {} (lower {}): {}; the kernel refused an overlayfs in the sandbox's user namespace (needs Linux >= 5.11 with unprivileged overlayfs). The server is not started: airlock never runs it with the real cache writable or silently without its cache",
                    overlay.name,
                    overlay.target_text,
                    overlay.lower.display(),
                    os_error()
                ),
            );
        }
        if let Some((_, at)) = &overlay.idmapped {
            // The overlay holds its own private clone of the layer; detaching the attach point
            // keeps the idmapped cache out of the sandbox's mount table.
            // SAFETY: umount2 reads a valid C string.
            let rc = unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) };
            check(Step::Overlay, "detaching the idmapped cache", rc.into());
        }
    }
}
