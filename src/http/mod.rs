//! `airlock serve --listen`: the gateway over Streamable HTTP (see `docs/http.md`).
//!
//! | file | owns |
//! |---|---|
//! | [`listen`] | `--listen` addresses; loopback or not |
//! | [`origin`] | `Host`/`Origin` checks against DNS rebinding |
//! | [`limits`] | body size, sessions, idle time, the request-rate bucket |
//! | [`wire`] | versions, 2026-07-28 header checks, HTTP status of an answer |
//! | [`sse`] | event bytes, event ids, the replay buffer for `Last-Event-ID` |
//! | [`auth`] | bearer tokens, JWT validation, resource metadata, the identity |

pub mod auth;
pub mod limits;
pub mod listen;
pub mod origin;
pub mod session;
pub mod sse;
pub mod wire;

pub use auth::Identity;
pub use limits::Limits;
pub use listen::ListenAddr;
