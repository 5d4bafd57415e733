//! Egress by name in the helper (see `crate::net`): the helper connects to airlock's hand-over
//! channel before it clones `init`; `init`, while it still holds the capabilities of its user
//! namespace, sets up the network namespace and hands airlock its sockets. Two calls, one each.

use std::os::fd::OwnedFd;

use super::{Step, fail};
use crate::net::{notify, sys};
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

/// What `init` hands airlock once it is confined: the channel and the namespace's sockets.
pub(super) struct Prepared {
    channel: OwnedFd,
    sockets: sys::NamespaceSockets,
}

/// In `init`, before dropping privileges: loopback, local routes, the resolver's sockets.
pub(super) fn set_up(plan: &SandboxPlan, channel: Option<OwnedFd>) -> Option<Prepared> {
    let (NetMode::Egress(_), Some(channel)) = (&plan.network, channel) else {
        return None;
    };
    let sockets = sys::setup_namespace()
        .unwrap_or_else(|err| fail(Step::Network, format!("network namespace: {err}")));
    Some(Prepared { channel, sockets })
}

/// In `init`, after its seccomp filters and before it forks the server: the filter that hands
/// every `connect` to airlock (`crate::net::handover`), whose listener goes to airlock with the
/// resolver's sockets. Without it the server could reach nothing, so a kernel that cannot give
/// it stops the start here.
pub(super) fn hand_over(prepared: Option<Prepared>) {
    let Some(Prepared {
        channel,
        mut sockets,
    }) = prepared
    else {
        return;
    };
    let Some(program) = notify::connect_filter() else {
        fail(
            Step::Network,
            "egress by name needs a seccomp filter for this architecture (x86_64 or aarch64)",
        );
    };
    let listener = notify::install_connect_filter(&program).unwrap_or_else(|err| {
        fail(
            Step::Network,
            format!("egress by name needs seccomp user notifications (Linux 5.14 or later): {err}"),
        )
    });
    sockets.sockets.push((sys::Role::ConnectNotify, listener));
    if let Err(err) = sys::send_sockets(&channel, &sockets) {
        fail(
            Step::Network,
            format!("handing the sockets to airlock: {err}"),
        );
    }
    // The sockets and the listener now live on in airlock; init's copies close here, before
    // the fork: the server never holds them.
}
