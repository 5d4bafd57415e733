//! Transparent huge pages: off for airlock itself, as inherited for the servers it starts.
//!
//! airlock's allocator (mimalloc, see `src/main.rs`) keeps its heap in large aligned arenas.
//! Where the host's THP setting is `always` (`/sys/kernel/mm/transparent_hugepage/enabled`), the
//! kernel backs them with 2 MiB pages as soon as one byte of each is touched, which doubles
//! airlock's resident memory (`cargo bench --bench run`: 14.5 MiB with THP off for the process,
//! 28.4 MiB with it on) for no measurable gain. So airlock opts out for itself at start
//! (`PR_SET_THP_DISABLE`).
//!
//! That flag is inherited across `fork` and `execve`. The confine helper therefore sets it back,
//! before it forks the server, to what airlock itself inherited (carried in the plan): a server's
//! memory is treated as it would be without airlock. Host tools airlock runs outside the sandbox
//! (`npm config get`, `python3 -c`) keep the opt-out; they read a setting and exit.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether airlock was started with THP already disabled for it.
static INHERITED_DISABLED: AtomicBool = AtomicBool::new(false);

/// Turns THP off for this process, remembering what it was. Best effort: a kernel without the
/// prctl (before 3.15) keeps its default, which costs memory, not confinement.
pub fn opt_out() {
    // SAFETY: PR_GET_THP_DISABLE takes no pointers; it returns 0 or 1, or -1 when unsupported.
    let before = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
    INHERITED_DISABLED.store(before == 1, Ordering::Relaxed);
    set_disabled(true);
}

/// What [`opt_out`] found: the value a server should get.
pub fn inherited_disabled() -> bool {
    INHERITED_DISABLED.load(Ordering::Relaxed)
}

/// Sets this process's THP flag (inherited by children forked after). Best effort, as above.
pub fn set_disabled(disabled: bool) {
    let flag: libc::c_ulong = disabled.into();
    // SAFETY: PR_SET_THP_DISABLE takes an integer flag and zeroes; no pointers.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, flag, 0, 0, 0) };
}
