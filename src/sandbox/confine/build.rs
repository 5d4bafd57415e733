//! The server's root, init side: built in init's own mount namespace while it still holds every
//! capability of its user namespace, before anything is dropped. As bubblewrap does:
//!
//! 1. every mount private; a small staging tmpfs over `/tmp` holding `newroot` (the root-to-be, a
//!    tmpfs), `scratch` (the server's disk: a tmpfs of `disk_mb`) and `oldroot`;
//!    `pivot_root` into the staging tmpfs, so the host is at `/oldroot` and nothing the server
//!    will see depends on where things are in the helper's view;
//! 2. the copies of the host's symlinks, then every bind at its own path (the helper's idmapped
//!    clones, or clones of `/oldroot<path>`), parents first; the private home and tmp (clones of
//!    the scratch disk's); the cache overlays; a procfs for the server's pid namespace
//!    (`subset=pid`: only processes; hidden when not its own); its cgroup; the generated files;
//! 3. the root's own tmpfs made read-only; `pivot_root` into it, and the staging tmpfs with the
//!    whole host detached.
//!
//! After this the host's filesystem does not exist for init or the server: only what is in the
//! root. Landlock and seccomp come after, as independent layers.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::root::{Prepared, bind_attributes};
use super::tree::{self, Kind};
use super::{Step, fail, overlay, sys};
use crate::sandbox::RootFileContent;

fn fail_root(what: &str, err: impl std::fmt::Display) -> ! {
    fail(Step::Root, format!("{what}: {err}"))
}

fn open_dir(path: &Path) -> OwnedFd {
    let c = sys::c_path(path).unwrap_or_else(|err| fail_root("path", err));
    sys::open_at(libc::AT_FDCWD, &c, libc::O_PATH | libc::O_DIRECTORY)
        .unwrap_or_else(|err| fail_root(&format!("opening {}", path.display()), err))
}

fn tmpfs(options: &[(&std::ffi::CStr, String)]) -> std::io::Result<OwnedFd> {
    let context = sys::FsContext::new(c"tmpfs")?;
    for (key, value) in options {
        let value = std::ffi::CString::new(value.as_str())
            .map_err(|_| std::io::Error::other("NUL in a tmpfs option"))?;
        context.set(key, &value)?;
    }
    context.mount(libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV)
}

/// Step 1: the staging tmpfs, the root-to-be and the scratch disk; pivot into the staging tmpfs.
fn enter_staging(prepared: &Prepared) {
    sys::make_mounts_private().unwrap_or_else(|err| fail_root("making mounts private", err));
    let staging = tmpfs(&[(c"size", "64k".into()), (c"mode", "0755".into())])
        .unwrap_or_else(|err| fail_root("creating the staging tmpfs", err));
    sys::attach(&staging, &open_dir(Path::new("/tmp")))
        .unwrap_or_else(|err| fail_root("attaching the staging tmpfs at /tmp", err));
    let staging = open_dir(Path::new("/tmp"));
    for name in [c"newroot", c"oldroot", c"scratch"] {
        sys::make_dir_at(staging.as_raw_fd(), name, 0o755)
            .unwrap_or_else(|err| fail_root("staging directories", err));
    }
    let root = tmpfs(&[
        (c"size", "4m".into()),
        (c"nr_inodes", "16384".into()),
        (c"mode", "0755".into()),
    ])
    .unwrap_or_else(|err| fail_root("creating the root tmpfs", err));
    sys::attach(&root, &open_dir(Path::new("/tmp/newroot")))
        .unwrap_or_else(|err| fail_root("attaching the root tmpfs", err));
    // As many inodes as 4 KiB pages: a file with any content takes a page of `disk_mb` anyway,
    // so the count binds only on empty files, directories and links, which otherwise cost the
    // host's kernel memory (about 1 KiB each, up to the default of half of RAM's pages) that
    // `disk_mb` does not count.
    let scratch = tmpfs(&[
        (c"size", format!("{}m", prepared.scratch_mb)),
        (
            c"nr_inodes",
            prepared.scratch_mb.saturating_mul(256).to_string(),
        ),
        (c"mode", "0755".into()),
    ])
    .unwrap_or_else(|err| fail_root("creating the scratch disk (tmpfs)", err));
    sys::attach(&scratch, &open_dir(Path::new("/tmp/scratch")))
        .unwrap_or_else(|err| fail_root("attaching the scratch disk", err));
    sys::change_dir_to(&staging).unwrap_or_else(|err| fail_root("chdir to the staging tmpfs", err));
    sys::pivot_root_here(c"oldroot")
        .unwrap_or_else(|err| fail_root("pivot_root into the staging tmpfs", err));
    sys::change_dir(c"/").unwrap_or_else(|err| fail_root("chdir /", err));
}

fn place(root: &OwnedFd, at: &Path, kind: Kind) -> OwnedFd {
    tree::place(root, at, kind).unwrap_or_else(|err| {
        fail_root(
            &format!("making {} in the server's root", at.display()),
            err,
        )
    })
}

fn host_path(at: &Path) -> PathBuf {
    Path::new("/oldroot").join(at.strip_prefix("/").unwrap_or(at))
}

/// Step 2a: symlink copies and binds.
fn bind_all(root: &OwnedFd, prepared: &mut Prepared) {
    for (at, text) in &prepared.links {
        tree::place_symlink(root, at, text)
            .unwrap_or_else(|err| fail_root(&format!("copying the symlink {}", at.display()), err));
    }
    for bind in std::mem::take(&mut prepared.binds) {
        let tree = match bind.tree {
            Some(tree) => tree,
            None => {
                let source =
                    sys::c_path(&host_path(&bind.at)).unwrap_or_else(|err| fail_root("path", err));
                let tree = sys::clone_tree(libc::AT_FDCWD, &source).unwrap_or_else(|err| {
                    fail_root(&format!("cloning {}", bind.at.display()), err)
                });
                sys::set_attributes(&tree, bind_attributes(bind.writable, bind.device), None)
                    .unwrap_or_else(|err| {
                        fail_root(&format!("mount attributes of {}", bind.at.display()), err)
                    });
                tree
            }
        };
        let kind = if bind.dir { Kind::Dir } else { Kind::File };
        let target = place(root, &bind.at, kind);
        sys::attach(&tree, &target)
            .unwrap_or_else(|err| fail_root(&format!("binding {}", bind.at.display()), err));
    }
}

/// Step 2b: the private home and tmp, from the scratch disk.
fn private_dirs(root: &OwnedFd, prepared: &Prepared) {
    for (name, at) in [("home", &prepared.home), ("tmp", &prepared.tmp)] {
        let on_scratch = Path::new("/scratch").join(name);
        overlay::scratch_dir(&on_scratch, prepared.owner);
        let source = sys::c_path(&on_scratch).unwrap_or_else(|err| fail_root("path", err));
        let tree = sys::clone_tree(libc::AT_FDCWD, &source)
            .unwrap_or_else(|err| fail_root(&format!("the private {name}"), err));
        let target = place(root, at, Kind::Dir);
        sys::attach(&tree, &target).unwrap_or_else(|err| {
            fail_root(
                &format!("mounting the private {name} at {}", at.display()),
                err,
            )
        });
    }
}

/// A procfs for init's pid namespace: only the server's own processes exist in it. `subset=pid`
/// (Linux >= 5.8) leaves out everything that is not a process (`/proc/sys`, `/proc/kcore`, the
/// host's `/proc/meminfo`...); `hidepid=invisible` hides processes of other uids.
pub(super) fn own_proc() -> std::io::Result<OwnedFd> {
    let restricted = || -> std::io::Result<OwnedFd> {
        let context = sys::FsContext::new(c"proc")?;
        context.set(c"subset", c"pid")?;
        context.set(c"hidepid", c"invisible")?;
        context.mount(libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC)
    };
    restricted().or_else(|_| {
        let context = sys::FsContext::new(c"proc")?;
        context.mount(libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC)
    })
}

/// Step 2d: /proc, the cgroup view and the generated files.
fn system_views(root: &OwnedFd, prepared: &Prepared) {
    let proc = own_proc().unwrap_or_else(|err| {
        let cause = if err.raw_os_error() == Some(libc::EPERM) {
            // The host is at /oldroot in the staging root; its mountinfo shows what covers /proc.
            let mountinfo =
                std::fs::read_to_string("/oldroot/proc/self/mountinfo").unwrap_or_default();
            let covering = crate::sandbox::procfs::covering_mounts(&mountinfo, "/oldroot/proc");
            format!("; {}", crate::sandbox::procfs::refusal_cause(&covering))
        } else {
            String::new()
        };
        fail(
            Step::Root,
            format!("mounting the server's own /proc: {err}{cause}"),
        )
    });
    sys::attach(&proc, &place(root, Path::new("/proc"), Kind::Dir))
        .unwrap_or_else(|err| fail_root("attaching /proc", err));
    if prepared.cgroup_view {
        let cgroup = sys::FsContext::new(c"cgroup2")
            .and_then(|context| {
                context.mount(
                    libc::MOUNT_ATTR_RDONLY
                        | libc::MOUNT_ATTR_NOSUID
                        | libc::MOUNT_ATTR_NODEV
                        | libc::MOUNT_ATTR_NOEXEC,
                )
            })
            .unwrap_or_else(|err| fail_root("mounting the server's own cgroup", err));
        sys::attach(
            &cgroup,
            &place(root, Path::new("/sys/fs/cgroup"), Kind::Dir),
        )
        .unwrap_or_else(|err| fail_root("attaching /sys/fs/cgroup", err));
    }
    for file in &prepared.files {
        let made = match &file.content {
            RootFileContent::Symlink(text) => tree::place_symlink(root, &file.path, text),
            RootFileContent::Text { text, mode } => tree::place_file(root, &file.path, text, *mode),
        };
        made.unwrap_or_else(|err| fail_root(&format!("creating {}", file.path.display()), err));
    }
}

/// Step 3: the root read-only, then `pivot_root` into it; the staging tmpfs and the host go.
fn enter_root(root: &OwnedFd) {
    sys::set_attributes_here(
        root,
        libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
    )
    .unwrap_or_else(|err| fail_root("making the root read-only", err));
    let staging = open_dir(Path::new("/"));
    sys::change_dir_to(root).unwrap_or_else(|err| fail_root("chdir to the root", err));
    sys::pivot_root_here(c".")
        .unwrap_or_else(|err| fail_root("pivot_root into the server's root", err));
    // The staging tmpfs (with the host below it) is now stacked on the new root: detach it.
    sys::change_dir_to(&staging).unwrap_or_else(|err| fail_root("chdir to the old root", err));
    sys::detach_here().unwrap_or_else(|err| fail_root("detaching the host", err));
    sys::change_dir(c"/").unwrap_or_else(|err| fail_root("chdir /", err));
}

/// Builds the root and enters it. Returns the overlays mounted over real cache paths (their
/// roots, for landlock).
pub(super) fn build(
    mut prepared: Prepared,
    overlays: Vec<overlay::Prepared>,
) -> Vec<(PathBuf, OwnedFd)> {
    enter_staging(&prepared);
    let root = open_dir(Path::new("/newroot"));
    bind_all(&root, &mut prepared);
    private_dirs(&root, &prepared);
    let granted = overlay::mount_all(&root, overlays, prepared.owner);
    system_views(&root, &prepared);
    // Extension point: files or sockets that exist only for the sandbox and need the root
    // writable (a resolver configuration, the resolver's sockets) go in before this line.
    enter_root(&root);
    granted
}
