//! `airlock serve`'s own parts around the session core ([`crate::session`]):
//!
//! - [`names`]: `server__tool` namespacing and deterministic shortening (pure).
//! - [`lifecycle`]: each server's Declared → Starting → Ready → Idle → Stopped machine, with
//!   bounded restart backoff (pure).
//! - [`remote`]: remote servers (Streamable HTTP, legacy HTTP+SSE) behind the same seam as a
//!   stdio child.
//! - [`control`]: the control socket `airlock status` and `airlock reload` talk to.
//!
//! The behaviour and the decisions behind it are documented in `docs/serve.md`.

pub mod control;
pub mod lifecycle;
pub mod names;
pub mod remote;
