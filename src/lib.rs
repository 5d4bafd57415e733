//! airlock: run MCP servers you did not write, confined, gated and audited.
//!
//! The crate is organised by concern (see `../shared/DESIGN.md`):
//! - [`config`]: server declarations (`airlock.toml`, `mcpServers` JSON), interpolation, masking.
//! - [`policy`]: policy files, layering, locks, and the pure `decide`.
//! - [`diagnostic`]: errors that point at a file, line and column, with the fix.
//!
//! Everything that decides is pure and unit-tested; everything that touches the OS is thin and
//! proven by the end-to-end tests under `tests/`.

pub mod audit;
pub mod cli;
pub mod config;
pub mod diagnostic;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
pub mod gateway;
pub mod hash;
pub mod http;
pub mod install;
pub mod lock;
pub mod mcp;
pub mod net;
pub mod paths;
pub mod pins;
pub mod policy;
pub mod process;
pub mod random;
pub mod sandbox;
pub mod secret;
/// The session core of `run` and `serve`: see `docs/architecture.md`.
pub mod session;
