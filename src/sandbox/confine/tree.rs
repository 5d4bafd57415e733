//! Finding and making paths *inside* the server's root while it is being built, relative to the
//! root's own directory fd: symlinks met on the way are followed as the server will see them
//! (an absolute link starts again at the server's root, never at the helper's), and missing
//! directories are created (0755, the sandbox root's own).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use super::sys;
use crate::paths::walk_components;

/// What the last component must be when it has to be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Dir,
    /// An empty regular file: the mount point of a bound file or device node.
    File,
}

fn name(component: &OsStr) -> io::Result<CString> {
    CString::new(component.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn is_symlink(fd: &OwnedFd) -> io::Result<bool> {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into our local struct; the fd is ours (O_PATH fds may be fstat'ed).
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

fn open_path(dir: &OwnedFd, name: &CString) -> io::Result<OwnedFd> {
    sys::open_at(dir.as_raw_fd(), name, libc::O_PATH | libc::O_NOFOLLOW)
}

fn create(dir: &OwnedFd, name: &CString, kind: Kind) -> io::Result<()> {
    let made = match kind {
        Kind::Dir => sys::make_dir_at(dir.as_raw_fd(), name, 0o755),
        Kind::File => sys::open_at(
            dir.as_raw_fd(),
            name,
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW,
        )
        .map(drop),
    };
    match made {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Opens `path` (absolute, in the server's view) under `root` as an `O_PATH` fd, creating the
/// directories on the way and the last component as `kind` when missing.
pub(super) fn place(root: &OwnedFd, path: &Path, kind: Kind) -> io::Result<OwnedFd> {
    const MAX_LINKS: usize = 40;
    let mut dirs: Vec<OwnedFd> = vec![root.try_clone()?];
    let mut pending = walk_components(path);
    let mut links = 0;
    if pending.is_empty() {
        return root.try_clone();
    }
    while let Some(component) = pending.pop_front() {
        if component == ".." {
            if dirs.len() > 1 {
                dirs.pop();
            }
            continue;
        }
        let last = pending.is_empty();
        let name = name(&component)?;
        let dir = dirs.last().ok_or_else(|| io::Error::other("empty walk"))?;
        let fd = match open_path(dir, &name) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                create(dir, &name, if last { kind } else { Kind::Dir })?;
                open_path(dir, &name)?
            }
            other => other?,
        };
        if is_symlink(&fd)? {
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let text = std::path::PathBuf::from(OsString::from_vec(sys::read_link_at(
                dir.as_raw_fd(),
                &name,
            )?));
            if text.is_absolute() {
                dirs.truncate(1);
            }
            let mut rest = walk_components(&text);
            rest.extend(pending);
            pending = rest;
            if pending.is_empty() {
                // A link to the root itself.
                return dirs[0].try_clone();
            }
            continue;
        }
        if last {
            return Ok(fd);
        }
        dirs.push(fd);
    }
    dirs.pop().ok_or_else(|| io::Error::other("empty walk"))
}

/// Creates the symlink `at -> text` in the root unless something is there already (a host
/// directory bound there shows its own entry).
pub(super) fn place_symlink(root: &OwnedFd, at: &Path, text: &Path) -> io::Result<()> {
    let (Some(parent), Some(file)) = (at.parent(), at.file_name()) else {
        return Ok(());
    };
    let dir = place(root, parent, Kind::Dir)?;
    let text = sys::c_path(text)?;
    match sys::symlink_at(&text, dir.as_raw_fd(), &name(file)?) {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        // Inside a read-only bind the host's own entry is there already.
        Err(err) if err.raw_os_error() == Some(libc::EROFS) => Ok(()),
        other => other,
    }
}

/// Creates a regular file with `text` (a generated file of the plan).
pub(super) fn place_file(root: &OwnedFd, at: &Path, text: &str, mode: u32) -> io::Result<()> {
    use std::io::Write;
    let (Some(parent), Some(file)) = (at.parent(), at.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    let dir = place(root, parent, Kind::Dir)?;
    let fd = sys::open_at(
        dir.as_raw_fd(),
        &name(file)?,
        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW,
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(text.as_bytes())?;
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}
