//! Trust over time: tool, prompt and resource-template definitions are pinned the first time
//! airlock sees them, and a changed or new one is hidden and refused until a person approves it
//! (`airlock pins approve`). A server never approved on this machine can be quarantined.
//!
//! - [`definition`]: what a pin covers, canonicalised and hashed;
//! - [`record`]: one server's pins as stored, and approve/reset;
//! - [`decide`]: the pure decisions (a listing observed, a use asked for);
//! - [`store`]: `<state dir>/pins/<server>.json`, atomic writes under a lock;
//! - [`diff`]: old and new side by side, for `airlock pins diff`;
//! - [`guard`]: one server's pins during a session, held by the gate.

pub mod decide;
pub mod definition;
pub mod diff;
pub mod guard;
pub mod record;
pub mod store;

pub use decide::{PinEvent, PinEventKind, Reason, Settings, Verdict, decide_use, observe_listing};
pub use definition::{Definition, Kind};
pub use guard::{Filtered, PinGuard};
pub use record::ServerPins;
pub use store::{PinError, PinStore};
