//! The audit log: the event schema, sinks (append-only JSON Lines file, stderr) and redaction.
//!
//! Schema (stable snake_case, see `docs/run.md`): every line has `ts` (RFC 3339 UTC), `seq`
//! (per session, from 1), `event` and `server`; the other fields appear when they apply.

pub mod calls;
pub mod chain;
pub mod event;
pub mod query;
pub mod redact;
pub mod rotate;
pub mod sink;
pub mod target;
pub mod verify;

pub use event::{Event, EventKind, Outcome};
pub use redact::Redactor;
pub use sink::{AuditError, AuditLog};
pub use target::{AuditTarget, TargetError, resolve_target};
