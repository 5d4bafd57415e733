//! `airlock serve --listen`: the gateway over Streamable HTTP (see `docs/http.md`).
//!
//! | file | owns |
//! |---|---|
//! | [`listen`] | `--listen` addresses; loopback or not |
//! | [`settings`] | the listener's settings and the start-up refusal of an exposed, unauthenticated address |
//! | [`origin`] | `Host`/`Origin` checks against DNS rebinding |
//! | [`limits`] | body size, sessions, idle time, the request-rate bucket |
//! | [`wire`] | versions, 2026-07-28 header checks, HTTP status of an answer |
//! | [`sse`] | event bytes, event ids, the replay buffer for `Last-Event-ID` |
//! | [`session`] | one session's streams: which stream a message goes on (pure) |
//! | [`hub`] | the session table, and the [`hub::Backend`] seam to the gateway |
//! | [`server`] | accepting connections, the per-request gate (origin, auth, rate) |
//! | [`post`], [`streams`] | POST; GET and DELETE |
//! | [`body`] | JSON and SSE response bodies |
//! | [`mux`] | many sessions as the session core's one host (ids, handshake, routing; pure) |
//! | [`face`] | the mux task between the listener and the core's host pipe |
//! | [`config`] | `[http]` in airlock.toml |
//! | [`auth`] | bearer tokens, JWT validation, resource metadata, the identity |

pub mod auth;
pub mod body;
pub mod config;
pub mod face;
pub mod hub;
pub mod limits;
pub mod listen;
pub mod mux;
pub mod origin;
pub mod post;
pub mod retry_states;
pub mod server;
pub mod session;
pub mod settings;
pub mod sink;
pub mod sse;
pub mod streams;
pub mod tasks;
pub mod wire;

pub use auth::Identity;
pub use hub::{Backend, Hub, Outbox, SessionInfo, SessionKey};
pub use limits::Limits;
pub use listen::ListenAddr;
pub use settings::HttpSettings;

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod testing;
