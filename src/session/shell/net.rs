//! The session's part in network egress (`crate::net`): a server whose network is an allow list
//! sends the audit events of its connections here; the loop writes each one, then tells the
//! hand-over it is written (the server's `connect` is answered only after that).

use tokio::sync::mpsc;

use super::link::Input;
use crate::gateway::remote::Launch;
use crate::net::route::NetAudit;

/// Connection events waiting for the loop (the hand-over waits when this many are queued).
const QUEUE: usize = 1024;

/// At shutdown, connection events are written until none came for this long: the connections of
/// a server end with it, and report their last bytes just after.
pub const QUIET: std::time::Duration = std::time::Duration::from_millis(200);

/// At shutdown, connection events are waited for this long at most: the hand-over accounts for
/// a server's connections for up to 3 s after its sandbox is gone (`crate::net::handover`'s
/// `CLOSE_GRACE`), then says what is left.
pub const DRAIN_AT_MOST: std::time::Duration = std::time::Duration::from_millis(3500);

/// The sender servers' connect hand-overs use; its events reach the loop as [`Input::Net`].
pub fn forward_to(inputs: &mpsc::UnboundedSender<Input>) -> mpsc::Sender<NetAudit> {
    let (events_tx, events) = mpsc::channel::<NetAudit>(QUEUE);
    forward_from(events, inputs);
    events_tx
}

/// Events from outside the session (the HTTP face) reach the loop as [`Input::Net`] too.
pub fn forward_from(mut events: mpsc::Receiver<NetAudit>, inputs: &mpsc::UnboundedSender<Input>) {
    let inputs = inputs.clone();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if inputs.send(Input::Net(Box::new(event))).is_err() {
                return;
            }
        }
    });
}

/// Gives a launch with a network allow list (or an install step, whose network is its package
/// registry) the sender; returns whether it has one.
pub fn attach(launch: &mut Launch, events: &mpsc::Sender<NetAudit>) -> bool {
    match launch {
        Launch::Local(prepared)
            if matches!(prepared.plan.network, crate::sandbox::NetMode::Egress(_))
                || prepared.fetch.is_some() =>
        {
            prepared.net_audit = Some(events.clone());
            true
        }
        _ => false,
    }
}
