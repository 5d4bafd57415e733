//! `airlock run`: the passthrough session between one host (airlock's stdin/stdout) and one
//! server (the child's stdout/stdin).
//!
//! Everything runs in one task on a current-thread runtime: two reader loops (host, server), two
//! outlets (written directly by the readers when the peer has room, drained otherwise) and a
//! timer, joined; the gate sits in a `RefCell` that is never borrowed across an
//! `await`. Each direction has one reader and one writer, so message order per direction is kept.
//! The session is generic over the four streams so tests drive it with in-memory pipes.

mod outlet;
mod session;
mod stderr;

pub use session::{EndedBy, SessionError, SessionLimits, SessionOutcome, run_session};
pub use stderr::relay_stderr;
