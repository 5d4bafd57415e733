//! Advisory file locks (`flock(2)`): the audit log's writers and the pin store serialise on them,
//! so several airlock processes can share one file.

use std::fs::File;
use std::os::fd::AsRawFd;

/// `flock(2)` with `operation` (`libc::LOCK_EX`, `LOCK_SH`, `LOCK_UN`), retried on EINTR.
pub fn flock(file: &File, operation: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock only reads the descriptor number, which `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
