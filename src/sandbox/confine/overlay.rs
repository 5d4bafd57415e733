//! The copy-on-write cache overlays of the confine helper (the effects of
//! [`crate::sandbox::CacheOverlayPlan`]).
//!
//! The helper prepares, before the clone: the real cache's physical path, and, when it is root and
//! the server will run as another uid, an idmapped clone of it. init mounts, while it builds the
//! server's root: one overlayfs per cache, lower = the real cache (read-only, never written),
//! upper and workdir = `layers/<name>/{upper,work}` on the server's scratch disk (a tmpfs of
//! `disk_mb`, this instance's alone, gone when it ends), at the mount point inside the private
//! home or over the real cache path (`at_real_path`, uv), whose read-write landlock rule init then
//! adds on the mounted overlay.
//!
//! Why an idmapped lower layer when airlock is root: overlayfs checks the *caller's* permissions
//! against the attributes of the layer a file comes from, so a server running as nobody could not
//! create files in a directory that exists only in root's cache (`_cacache/index-v5/..`, owned by
//! root, 0755). The idmapped clone shows the cache's owner as the server's uid; overlayfs still
//! never writes the lower layer. The clone is attached only long enough for the overlay to take
//! its private reference, then detached again.
//!
//! Each instance has its own scratch disk, so two instances of one server never share an upper
//! layer (which overlayfs forbids), and nothing a server writes into its cache view outlives it or
//! reaches the user's disk.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::tree::{self, Kind};
use super::{Step, check, fail, idmap, make_private_dir, sys};
use crate::sandbox::{Identity, SandboxPlan};

/// One overlay, ready to mount.
pub(super) struct Prepared {
    name: String,
    /// The real cache's physical path; `None`: the user has none (an empty lower layer).
    lower: Option<PathBuf>,
    target: PathBuf,
    at_real_path: bool,
    /// An idmapped clone of the real cache (airlock root, the cache not the server's).
    idmapped: Option<OwnedFd>,
    /// airlock's private copy: finished install layers, newest first, stacked above the real
    /// cache (host paths).
    private_layers: Vec<PathBuf>,
    /// The install step's upper layer on disk (its `work` beside it), instead of the scratch disk.
    upper_on_disk: Option<PathBuf>,
}

/// overlayfs splits `lowerdir` on `:`; a backslash escapes it.
fn escape(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for &byte in path.as_os_str().as_bytes() {
        if matches!(byte, b':' | b'\\') {
            out.push(b'\\');
        }
        out.push(byte);
    }
    out
}

pub(super) fn prepare(plan: &SandboxPlan) -> Vec<Prepared> {
    let mut out = Vec::new();
    for overlay in &plan.cache_overlays {
        if !overlay.mount {
            // No mount namespace: the mount point is a private, empty cache on disk.
            make_private_dir(plan, &overlay.target);
            continue;
        }
        let lower = match std::fs::canonicalize(&overlay.lower) {
            Ok(real) => Some(real),
            // The user has no cache: nothing to share, the view is an empty private cache.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => fail(
                Step::Overlay,
                format!(
                    "the {} cache {}: {err}",
                    overlay.name,
                    overlay.lower.display()
                ),
            ),
        };
        let idmapped = match (&lower, plan.identity) {
            (Some(real), Some(id)) => idmapped_lower(&overlay.name, real, id),
            _ => None,
        };
        let private_layers = overlay
            .layers
            .as_deref()
            .map(crate::fetch::layers::layers_in)
            .unwrap_or_default();
        out.push(Prepared {
            name: overlay.name.clone(),
            lower,
            target: overlay.target.clone(),
            at_real_path: overlay.at_real_path,
            idmapped,
            private_layers,
            upper_on_disk: overlay.upper_on_disk.clone(),
        });
    }
    out
}

/// A detached clone of the real cache in which its owner appears as `id`, when they differ.
fn idmapped_lower(name: &str, lower: &Path, id: Identity) -> Option<OwnedFd> {
    let meta = std::fs::metadata(lower).unwrap_or_else(|err| {
        fail(
            Step::Overlay,
            format!("the {name} cache {}: {err}", lower.display()),
        )
    });
    if !meta.is_dir() {
        fail(
            Step::Overlay,
            format!("the {name} cache {} is not a directory", lower.display()),
        );
    }
    if meta.uid() == id.uid && meta.gid() == id.gid {
        return None;
    }
    let mapping = idmap::owner_as(meta.uid(), meta.gid(), id);
    let fail_id = |what: &str, err: std::io::Error| -> ! {
        fail(
            Step::Overlay,
            format!(
                "idmapping the {name} cache {} for uid {}: {what}: {err}",
                lower.display(),
                id.uid
            ),
        )
    };
    // clone_tree follows no symlink; the real cache may sit behind one of the user's (a
    // symlinked home), and no server can write links into it (it is read-only to every server).
    let real = std::fs::canonicalize(lower).unwrap_or_else(|err| fail_id("realpath", err));
    let path = sys::c_path(&real).unwrap_or_else(|err| fail_id("path", err));
    let tree =
        sys::clone_tree(libc::AT_FDCWD, &path).unwrap_or_else(|err| fail_id("open_tree", err));
    let attributes = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
    if let Err(err) = sys::set_attributes(&tree, attributes, Some(&mapping)) {
        fail_id(
            "mount_setattr(MOUNT_ATTR_IDMAP) (does the filesystem support idmapped mounts?)",
            err,
        );
    }
    Some(tree)
}

/// In init, while the root is built (`root` is its directory, `/scratch` the scratch disk, the
/// host at `/oldroot`): every overlay, mounted into the root. Any failure stops the sandbox: the
/// server is never started with the real cache or without its cache view.
///
/// Returns the mount points that are real cache paths, each opened (`O_PATH`) right after its
/// overlay was attached, i.e. the overlay's root: init grants read-write beneath those fds in
/// landlock, so a write grant on that path cannot exist without the overlay.
pub(super) fn mount_all(
    root: &OwnedFd,
    overlays: Vec<Prepared>,
    owner: Option<Identity>,
) -> Vec<(PathBuf, OwnedFd)> {
    let mut granted = Vec::new();
    for overlay in overlays {
        let fail_at = |what: &str, err: std::io::Error| -> ! {
            fail(
                Step::Overlay,
                format!(
                    "the {} cache overlay at {}: {what}: {err}",
                    overlay.name,
                    overlay.target.display()
                ),
            )
        };
        let layers = Path::new("/scratch/layers").join(&overlay.name);
        let (upper, work) = match &overlay.upper_on_disk {
            // Made (and owned by the installing uid) by airlock before the helper started.
            Some(upper) => (on_host(upper), on_host(&upper.with_file_name("work"))),
            None => {
                for dir in ["upper", "work"] {
                    scratch_dir(&layers.join(dir), owner);
                }
                (layers.join("upper"), layers.join("work"))
            }
        };
        let lowerdir = match (&overlay.idmapped, &overlay.lower) {
            (Some(tree), _) => {
                let at = layers.join("lower");
                scratch_dir(&at, None);
                let target = std::fs::File::open(&at).map(OwnedFd::from);
                let target =
                    target.unwrap_or_else(|err| fail_at("opening the lower attach point", err));
                sys::attach(tree, &target)
                    .unwrap_or_else(|err| fail_at("attaching the idmapped cache", err));
                at
            }
            (None, Some(real)) => on_host(real),
            (None, None) => {
                let empty = layers.join("empty");
                scratch_dir(&empty, None);
                empty
            }
        };
        let mut lowers: Vec<PathBuf> = overlay.private_layers.iter().map(|l| on_host(l)).collect();
        lowers.push(lowerdir.clone());
        let mounted = new_overlay(&lowers, &upper, &work)
            .unwrap_or_else(|err| fail_at(&mount_failure(), err));
        if overlay.idmapped.is_some() {
            // The overlay holds its own private clone of the layer; detaching the attach point
            // keeps the idmapped cache out of the sandbox's mount table.
            let at = sys::c_path(&lowerdir).unwrap_or_else(|err| fail_at("path", err));
            sys::detach(&at).unwrap_or_else(|err| fail_at("detaching the idmapped cache", err));
        }
        let target = tree::place(root, &overlay.target, Kind::Dir)
            .unwrap_or_else(|err| fail_at("making the mount point", err));
        sys::attach(&mounted, &target).unwrap_or_else(|err| fail_at("attaching", err));
        if overlay.at_real_path {
            let fd = tree::place(root, &overlay.target, Kind::Dir)
                .unwrap_or_else(|err| fail_at("opening the mounted overlay", err));
            check_overlay(&fd, &overlay.name, &overlay.target);
            granted.push((overlay.target.clone(), fd));
        }
    }
    granted
}

/// What failed when the overlay would not mount, with the kernel-version advice only when this
/// kernel is older than the one overlayfs needs for an upper layer on tmpfs (6.6).
fn mount_failure() -> String {
    use crate::sandbox::host::{kernel_release, release_older_than};
    let release = kernel_release().unwrap_or_default();
    match release_older_than(&release, 6, 6) {
        Some(true) => format!(
            "mounting the overlayfs (Linux {release} cannot put an overlay's upper layer on tmpfs; fix: upgrade to Linux 6.6 or newer)"
        ),
        _ => "mounting the overlayfs".to_string(),
    }
}

/// A host path as init sees it while it builds the root (the host is at `/oldroot`).
fn on_host(path: &Path) -> PathBuf {
    Path::new("/oldroot").join(path.strip_prefix("/").unwrap_or(path))
}

/// `lowers`: highest first (airlock's install layers, then the real cache).
fn new_overlay(lowers: &[PathBuf], upper: &Path, work: &Path) -> std::io::Result<OwnedFd> {
    let cstring = |bytes: Vec<u8>| {
        std::ffi::CString::new(bytes)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in a path"))
    };
    let context = sys::FsContext::new(c"overlay")?;
    // One `lowerdir+` per layer (Linux 6.8+): the kernel copies each fsconfig string with a
    // 256-byte limit, and three of airlock's install layers (about 100 bytes each) joined into
    // one `lowerdir` exceed it. Older kernels take the joined string (then at most two layers).
    let mut lowers_added = 0;
    for lower in lowers {
        match context.set(c"lowerdir+", &sys::c_path(lower)?) {
            Ok(()) => lowers_added += 1,
            Err(err) if lowers_added == 0 && err.raw_os_error() == Some(libc::EINVAL) => break,
            Err(err) => return Err(err),
        }
    }
    if lowers_added == 0 {
        let lowerdir = lowers
            .iter()
            .map(|lower| escape(lower))
            .collect::<Vec<_>>()
            .join(&b':');
        if lowerdir.len() > 255 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} cache layers are more than this kernel takes in one overlay (Linux 6.8 or newer takes any number; or remove the server's install layers in airlock's state dir, packages/*/layers)",
                    lowers.len()
                ),
            ));
        }
        context.set(c"lowerdir", &cstring(lowerdir)?)?;
    }
    context.set(c"upperdir", &sys::c_path(upper)?)?;
    context.set(c"workdir", &sys::c_path(work)?)?;
    // trusted.* xattrs need CAP_SYS_ADMIN in the initial user namespace, which the sandbox never
    // has (even when airlock is root, init is root only in its own user namespace).
    context.flag(c"userxattr")?;
    context.mount(libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV)
}

/// A directory on the scratch disk, owned by the server's uid (when airlock is root) and 0700.
pub(super) fn scratch_dir(path: &Path, owner: Option<Identity>) {
    use std::os::unix::fs::{PermissionsExt, chown};
    let made = std::fs::create_dir_all(path)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)))
        .and_then(|()| match owner {
            Some(id) => chown(path, Some(id.uid), Some(id.gid)),
            None => Ok(()),
        });
    if let Err(err) = made {
        fail(
            Step::Root,
            format!("creating {} on the scratch disk: {err}", path.display()),
        );
    }
}

/// Checks that `fd` is the root of an overlayfs: nothing may have replaced the mount point.
fn check_overlay(fd: &OwnedFd, name: &str, target: &Path) {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero statfs is a valid value for fstatfs to overwrite.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes into our local struct.
    let rc = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut stat) };
    check(Step::Overlay, "fstatfs on the mounted overlay", rc.into());
    if stat.f_type != libc::OVERLAYFS_SUPER_MAGIC {
        fail(
            Step::Overlay,
            format!(
                "{} is not the {name} cache overlay after mounting it (filesystem type {:#x}): no grant on the real cache",
                target.display(),
                stat.f_type
            ),
        );
    }
}
