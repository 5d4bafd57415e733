//! The copy-on-write cache overlays of the confine helper (the effects of
//! [`crate::sandbox::CacheOverlayPlan`]).
//!
//! The helper prepares (before the clone, while it is still itself): the private dirs, the mount
//! options, and, when it is root and the server will run as another uid, an idmapped clone of the
//! real cache. init mounts (in its fresh mount namespace, while it still holds every capability of
//! its user namespace, before landlock and seccomp): propagation private on `/`, then one
//! overlayfs per cache at the mount point inside the private home, or over the real cache path
//! (`at_real_path`, uv), whose read-write landlock rule init then adds on the mounted overlay.
//!
//! Why an idmapped lower layer when airlock is root: overlayfs checks the *caller's* permissions
//! against the attributes of the layer a file comes from, so a server running as nobody could not
//! create files in a directory that exists only in root's cache (`_cacache/index-v5/..`, owned by
//! root, 0755). The idmapped clone shows the cache's owner as the server's uid; overlayfs still
//! never writes the lower layer, so the real cache stays unmodified. The clone is attached only long
//! enough for the overlay to take its private reference, then detached again.
//!
//! Why a lock per cache: two instances of one server (two MCP hosts starting the same command) must
//! not mount overlays over the same upper/work pair (undefined for overlayfs; with some options the
//! kernel refuses with EBUSY). The helper takes an exclusive non-blocking `flock` on
//! `cache/<name>/lock`; the instance holding it uses the persistent pair, any other gets an
//! ephemeral pair under `cache/<name>/instances/<helper pid>`, removed by the supervisor when the
//! instance ends. The lock fds are CLOEXEC and live only in the helper: init drops its copies right
//! after the clone (the helper's copies of the same open file descriptions keep the locks), so the
//! server never has them.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{Step, check, cstring, fail, make_private_dir, os_error};
use crate::sandbox::{CacheOverlayPlan, Identity, SandboxPlan};

/// `move_mount(2)` flag: the source is the fd itself (not in every libc release).
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x0000_0004;

/// What makes one overlay's upper/work pair this instance's alone: an `flock`ed fd, held by the
/// helper (the supervisor) until it exits, and the ephemeral pair to remove then, if any.
pub(super) struct Lease {
    _lock: OwnedFd,
    ephemeral: Option<PathBuf>,
}

impl Lease {
    /// In the supervisor, once init (and with it the sandbox's mount namespace) is gone: removes
    /// the ephemeral pair while still holding its lock (so no sweeper races us), then unlocks.
    pub(super) fn finish(self) {
        if let Some(dir) = &self.ephemeral {
            remove_tree(dir);
        }
    }
}

/// One overlay, ready to mount.
pub(super) struct Prepared {
    name: String,
    lower: PathBuf,
    target: CString,
    target_text: String,
    target_path: PathBuf,
    /// Mounted over the real cache path: the server's read-write access beneath it is granted on
    /// the mounted overlay only (see [`mount_all`]).
    at_real_path: bool,
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

pub(super) fn prepare(plan: &SandboxPlan) -> (Vec<Prepared>, Vec<Lease>) {
    let mut out = Vec::new();
    let mut leases = Vec::new();
    for overlay in &plan.cache_overlays {
        if overlay.at_real_path {
            // The mount point is the real cache: never chmod/chown it, and make sure it exists
            // (a user who never ran uv gets an empty real cache dir, which the overlay covers).
            if !overlay.mount || overlay.target != overlay.lower {
                fail(
                    Step::Overlay,
                    format!(
                        "the {} cache: a plan that puts it at its real path {} must mount an overlay there",
                        overlay.name,
                        overlay.lower.display()
                    ),
                );
            }
            if let Err(err) = std::fs::create_dir_all(&overlay.lower) {
                fail(
                    Step::Overlay,
                    format!(
                        "creating the {} cache {}: {err}",
                        overlay.name,
                        overlay.lower.display()
                    ),
                );
            }
        } else {
            // The mount point, or the private cache itself when there is nothing to overlay.
            make_private_dir(plan, &overlay.target);
        }
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
        let (upper, work, lease) = claim_layers(overlay);
        make_private_dir(plan, &upper);
        make_private_dir(plan, &work);
        leases.push(lease);
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
            target_path: overlay.target.clone(),
            at_real_path: overlay.at_real_path,
            options: options(&lowerdir, &upper, &work),
            idmapped: idmapped
                .map(|(fd, at)| (fd, cstring(Step::Overlay, at.as_os_str().as_bytes()))),
        });
    }
    (out, leases)
}

/// The upper/work pair this instance may use alone: the persistent one if its lock is free,
/// otherwise a fresh ephemeral one (equally confined: the real cache is the lower layer either
/// way). Stale ephemeral pairs of instances that are gone are swept first.
fn claim_layers(overlay: &CacheOverlayPlan) -> (PathBuf, PathBuf, Lease) {
    let fail_at = |what: &str, path: &Path, err: std::io::Error| -> ! {
        fail(
            Step::Overlay,
            format!(
                "the {} cache layer: {what} {}: {err}",
                overlay.name,
                path.display()
            ),
        )
    };
    let own = std::process::id();
    sweep_instances(&overlay.instances, own);
    if let Some(dir) = overlay.lock.parent()
        && let Err(err) = std::fs::create_dir_all(dir)
    {
        fail_at("creating", dir, err);
    }
    match try_lock(&overlay.lock) {
        Ok(Some(lock)) => {
            let lease = Lease {
                _lock: lock,
                ephemeral: None,
            };
            return (overlay.upper.clone(), overlay.work.clone(), lease);
        }
        Ok(None) => {}
        Err(err) => fail_at("locking", &overlay.lock, err),
    }
    if let Err(err) = std::fs::create_dir_all(&overlay.instances) {
        fail_at("creating", &overlay.instances, err);
    }
    // `<pid>`, or `<pid>.<n>` in the odd case that a live instance from another pid namespace
    // sharing this state dir has the same number (its lock kept the sweep away from it).
    for attempt in 0..16u32 {
        let name = match attempt {
            0 => own.to_string(),
            n => format!("{own}.{n}"),
        };
        let dir = overlay.instances.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => fail_at("creating", &dir, err),
        }
        let lock = match try_lock(&dir.join("lock")) {
            Ok(Some(lock)) => lock,
            // Only a sweeper from another pid namespace (to which our pid means nothing) can
            // have locked or removed the directory in between: take the next name.
            Ok(None) => continue,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => fail_at("locking", &dir.join("lock"), err),
        };
        eprintln!(
            "airlock-confine: the {} cache layer {} is in use by another instance of this server: this instance writes to a temporary layer {} (removed when it ends)",
            overlay.name,
            overlay.upper.display(),
            dir.display()
        );
        let (upper, work) = (dir.join("upper"), dir.join("work"));
        let lease = Lease {
            _lock: lock,
            ephemeral: Some(dir),
        };
        return (upper, work, lease);
    }
    fail(
        Step::Overlay,
        format!(
            "the {} cache layer {} is in use by another instance of this server and no temporary layer could be made under {}",
            overlay.name,
            overlay.upper.display(),
            overlay.instances.display()
        ),
    )
}

/// An exclusive, non-blocking `flock` on `path` (created 0600 if missing): `None` when another
/// open file description holds it. The fd is CLOEXEC (std always sets it).
fn try_lock(path: &Path) -> std::io::Result<Option<OwnedFd>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    // SAFETY: flock on an fd we own; no pointers.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(Some(OwnedFd::from(file)));
    }
    let err = os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(err)
    }
}

/// Removes the ephemeral pairs of instances that are gone (their supervisor was SIGKILLed, or the
/// helper failed before the server started). An entry is stale when its pid is not alive (or is
/// our own: a leftover of an earlier process with our number) and its lock is free; the pid check
/// keeps a sweeper off a pair whose instance has made the directory but not locked it yet. Best
/// effort: errors leave the entry for a later start.
fn sweep_instances(instances: &Path, own: u32) {
    let Ok(entries) = std::fs::read_dir(instances) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.split('.').next())
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
            .filter(|pid| *pid > 0)
        else {
            continue;
        };
        if pid as u32 != own && pid_alive(pid) {
            continue;
        }
        let dir = entry.path();
        if let Ok(Some(_lock)) = try_lock(&dir.join("lock")) {
            remove_tree(&dir);
        }
    }
}

fn pid_alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists; no pointers.
    let rc = unsafe { libc::kill(pid, 0) };
    // EPERM: it exists, it is someone else's.
    rc == 0 || os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Best-effort recursive removal. overlayfs leaves its `work/work` directory with mode 000, which
/// an unprivileged owner cannot list: on a first failure, make every directory ours to list and
/// try again.
fn remove_tree(dir: &Path) {
    if std::fs::remove_dir_all(dir).is_ok() {
        return;
    }
    make_listable(dir);
    let _ = std::fs::remove_dir_all(dir);
}

fn make_listable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        // The entry's own type (never a symlink's target).
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            make_listable(&entry.path());
        }
    }
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
///
/// Returns the mount points that are real cache paths, each opened (`O_PATH`) right after its
/// overlay was mounted on it, i.e. the overlay's root: init grants read-write beneath those fds
/// in landlock. The rule is thereby tied to the overlay (landlock matches rules by inode), never
/// to the real directory below it, so a write grant on that path cannot exist without the overlay.
pub(super) fn mount_all(overlays: Vec<Prepared>) -> Vec<(PathBuf, OwnedFd)> {
    let mut granted = Vec::new();
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
        if overlay.at_real_path {
            granted.push((overlay.target_path.clone(), mounted_root(&overlay)));
        }
    }
    granted
}

/// The root of the overlay just mounted at `overlay.target`, opened `O_PATH`, after checking that
/// it is indeed an overlayfs (`statfs`): nothing may have replaced the mount point in between.
fn mounted_root(overlay: &Prepared) -> OwnedFd {
    // SAFETY: open reads a valid C string; the result is checked below.
    let fd = unsafe {
        libc::open(
            overlay.target.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        fail(
            Step::Overlay,
            format!(
                "opening the mounted {} cache overlay {}: {}",
                overlay.name,
                overlay.target_text,
                os_error()
            ),
        );
    }
    // SAFETY: open just returned this fd; we own it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero statfs is a valid value for fstatfs to overwrite.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes into our local struct.
    let rc = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut stat) };
    check(Step::Overlay, "fstatfs on the mounted overlay", rc.into());
    if stat.f_type != libc::OVERLAYFS_SUPER_MAGIC {
        fail(
            Step::Overlay,
            format!(
                "{} is not the {} cache overlay after mounting it (filesystem type {:#x}): no grant on the real cache",
                overlay.target_text, overlay.name, stat.f_type
            ),
        );
    }
    fd
}
