//! The session core: everything between one host and its MCP servers, for `airlock run` (one
//! server) and `airlock serve` (many) alike.
//!
//! - [`core`]: the pure state machine. Host dispatch, naming and routing, correlation, the gate
//!   of each server, list aggregation, failure bookkeeping, protocol eras, reload. Inputs in,
//!   [`core::Action`]s out; unit-tested with a fake clock.
//! - [`shell`]: the async event loop around it. Framing limits, junk accounting, backpressure,
//!   the audit write before forwarding, spawning and supervising servers, signals, shutdown.
//! - [`exit`]: how a server ended, for the audit log and `run`'s exit status.
//! - [`stderr_queue`]: airlock's stderr during a session, written by a thread of its own so that
//!   a host that does not read it never blocks the loop.
//!
//! The design, with the path of a `tools/call` in each mode, is in `docs/architecture.md`.

pub mod core;
pub mod exit;
pub mod shell;
pub mod stderr_queue;

pub use self::core::{Core, ServerSpec, ServerStatus, Topology};
pub use shell::{EndReason, Ended, ReloadError, ReloadPlan, Reloader, Session, ShellError};
