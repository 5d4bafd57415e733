//! `airlock serve`: many servers presented to one host as one MCP server.
//!
//! - [`names`]: `server__tool` namespacing and deterministic shortening (pure).
//! - [`lifecycle`]: each server's Declared → Starting → Ready → Idle → Stopped machine, with
//!   bounded restart backoff (pure).
//! - [`router`]: routing, id/progress/cancel maps, aggregation, the handshake with the host and
//!   each server, through each server's own [`crate::gate::Gate`] (pure).
//! - [`shell`]: the async shell that spawns, reads, writes and keeps time.
//! - [`remote`]: remote servers (Streamable HTTP, legacy HTTP+SSE) behind the same seam as a
//!   stdio child.
//! - [`control`]: the status socket `airlock status` reads.
//!
//! The behaviour and the decisions behind it are documented in `docs/serve.md`.

pub mod control;
mod io;
pub mod lifecycle;
pub mod names;
pub mod remote;
pub mod router;
pub mod shell;

pub use router::{Action, Router, ServerSpec, ServerStatus};
