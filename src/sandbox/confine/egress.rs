//! Egress by name in the helper (see `crate::net`): the helper connects to airlock's hand-over
//! channel before it clones `init`; `init`, while it still holds the capabilities of its user
//! namespace, sets up the network namespace and hands airlock its sockets. Two calls, one each.

use std::os::fd::OwnedFd;

use super::{Step, fail};
use crate::net::sys;
use crate::sandbox::{NetMode, SandboxPlan};

/// In the helper, before the clone: the connection `init` inherits (only with an allow list).
pub(super) fn connect(plan: &SandboxPlan) -> Option<OwnedFd> {
    let NetMode::Egress(egress) = &plan.network else {
        return None;
    };
    let Some(channel) = &egress.channel else {
        fail(
            Step::Network,
            "the plan has an allow list but no hand-over channel",
        );
    };
    match sys::connect_channel(channel) {
        Ok(fd) => Some(fd),
        Err(err) => fail(Step::Network, format!("connecting to airlock: {err}")),
    }
}

/// In `init`, before dropping privileges: loopback, local routes, airlock's sockets, hand-over.
pub(super) fn set_up(plan: &SandboxPlan, channel: Option<OwnedFd>) {
    let (NetMode::Egress(egress), Some(channel)) = (&plan.network, channel) else {
        return;
    };
    let sockets = sys::setup_namespace(&egress.ports)
        .unwrap_or_else(|err| fail(Step::Network, format!("network namespace: {err}")));
    if let Err(err) = sys::send_sockets(&channel, &sockets) {
        fail(
            Step::Network,
            format!("handing the sockets to airlock: {err}"),
        );
    }
    // The sockets now live on in airlock; init's copies and the channel close here.
}
