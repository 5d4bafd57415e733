//! airlock: run MCP servers you did not write, confined, gated and audited.
//!
//! One module per concern; `docs/architecture.md` has the map (what each may not do, the
//! processes, the path of a call, where the kernel is touched):
//! - [`config`] server declarations; [`policy`] policy files and the pure decision; [`paths`]
//!   environment, XDG dirs, `~`/`${…}` expansion, normalisation, command resolution;
//! - [`sandbox`] the pure plan and the confine helper; [`process`] launching and the kill
//!   sequence; [`fetch`] the install step of a package not cached yet; [`net`] egress by name;
//! - [`mcp`] framing and messages; [`gate`] per-server decisions; [`session`] the one core of
//!   `run` and `serve`; [`gateway`] lifecycles, names, remote links; [`http`] `serve --listen`;
//! - [`audit`] the chained log; [`pins`] pinned definitions; [`secret`] the secret detector;
//!   [`install`] host config files; [`cli`] the commands; [`diagnostic`] file:line:col errors;
//! - small shared pieces: [`hash`] SHA-256 as hex; [`lock`] `flock(2)` file locks (audit log, pin
//!   store); [`random`] `getrandom(2)` bytes for session ids and tokens.
//!
//! Everything that decides is pure and unit-tested; everything that touches the OS is thin and
//! proven by the end-to-end tests under `tests/`.

pub mod audit;
pub mod cli;
pub mod config;
pub mod diagnostic;
pub mod fast_map;
pub mod fetch;
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
