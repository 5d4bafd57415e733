//! Reading a file airlock decides something by when a server may have written it: a project
//! policy in a write-granted working directory, `pyvenv.cfg` in a venv, a version file, a
//! script's `#!` line. Only a regular file is opened, so a link a server planted to a FIFO
//! cannot make airlock wait, nor one to a device make it read without end (`/dev/zero`) or open
//! what opening sets going (a watchdog); and only so much of it is read.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading when it is a regular file (links followed). Its type is checked on
/// a handle that opens nothing (`O_PATH`), and the file is then opened through that handle, so
/// what was checked is what is read.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let handle = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)?;
    if !handle.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    // The file is there: failing to open it now is never "no such file" (with no /proc it
    // would be, and a policy would be skipped as absent).
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .map_err(|err| match err.kind() {
            io::ErrorKind::NotFound => io::Error::other(format!(
                "cannot open it through /proc/self/fd ({err}); is /proc mounted?"
            )),
            _ => err,
        })
}

/// The whole of the regular file at `path`, which must be at most `limit` bytes.
pub fn read_small(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// [`read_small`] as text.
pub fn read_small_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_small(path, limit)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// [`read_small_text`] of `root`'s `relative` path for a tree someone else may have written (a
/// confined install's layer): the file must be regular and, links resolved, still inside `root`
/// (a link out of it to a file only airlock may read is refused, as in the file's place).
pub fn read_small_text_within(root: &Path, relative: &Path, limit: u64) -> io::Result<String> {
    let file = open_regular(&root.join(relative))?;
    let real_root = std::fs::canonicalize(root)?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    if !real.starts_with(&real_root) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it leads out of {}", root.display()),
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_and_anything_else_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.toml");
        std::fs::write(&file, "version = 1\n").unwrap();
        assert_eq!(read_small_text(&file, 64).unwrap(), "version = 1\n");
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_small_text(&link, 64).unwrap(), "version = 1\n");

        // A FIFO nobody writes would block an open or a read without end.
        let fifo = dir.path().join("fifo.toml");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let zero = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for refused in [&fifo, &zero, &dir.path().to_path_buf()] {
            let err = read_small(refused, 64).unwrap_err();
            assert_eq!(
                err.to_string(),
                "not a regular file",
                "{}",
                refused.display()
            );
        }
        let err = read_small(Path::new("/dev/null"), 64).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file");
    }

    #[test]
    fn a_file_within_a_tree_is_read_and_a_link_out_of_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, outside) = (dir.path().join("layer"), dir.path().join("secret"));
        std::fs::create_dir_all(tree.join("_npx/a")).unwrap();
        std::fs::write(&outside, "root only").unwrap();
        std::fs::write(tree.join("_npx/a/lock.json"), "{}").unwrap();
        let read = |relative: &str| read_small_text_within(&tree, Path::new(relative), 64);
        assert_eq!(read("_npx/a/lock.json").unwrap(), "{}");
        // A link inside the tree is fine; one out of it, at the file or a directory, is not.
        std::os::unix::fs::symlink("a", tree.join("_npx/b")).unwrap();
        assert_eq!(read("_npx/b/lock.json").unwrap(), "{}");
        std::os::unix::fs::symlink(&outside, tree.join("_npx/a/out.json")).unwrap();
        std::os::unix::fs::symlink(dir.path(), tree.join("_npx/up")).unwrap();
        for refused in ["_npx/a/out.json", "_npx/up/secret"] {
            let err = read(refused).unwrap_err();
            assert!(err.to_string().contains("leads out of"), "{refused}: {err}");
        }
        let fifo = tree.join("_npx/a/fifo.json");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read("_npx/a/fifo.json").unwrap_err().to_string(),
            "not a regular file"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused_and_a_missing_one_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big");
        std::fs::write(&file, vec![b'x'; 65]).unwrap();
        assert_eq!(read_small(&file, 65).unwrap().len(), 65);
        assert_eq!(
            read_small(&file, 64).unwrap_err().to_string(),
            "larger than 64 bytes"
        );
        let missing = read_small(&dir.path().join("missing"), 64).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(read_small_text(&file, 64).is_err());
    }
}
