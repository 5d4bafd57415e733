//! Network egress by name: a server reaches the hosts its allow list names and nothing else,
//! whatever runtime it is written in, without proxy variables.
//!
//! How (the whole design is in `docs/network.md`): the server keeps a private network namespace
//! in which every address is local. Inside it, airlock holds port 53 ([`resolver`]: allowed names
//! get a stand-in address from [`standin`], others NXDOMAIN), and every `connect` of the server
//! waits for airlock ([`handover`], a seccomp user notification): the dialled address says which
//! name or listed address the server wants ([`route`]); airlock connects to it from outside the
//! sandbox, refusing private, loopback and link-local addresses for names, and puts that socket
//! in place of the server's. Every connection and refused lookup is audited ([`event`]), with
//! byte counts from the kernel ([`diag`]).
//!
//! Pure parts: [`allow`] (entries, matching, coverage), [`addr`], [`standin`], [`dns`],
//! [`resolver::respond`], [`route::decide`], [`route::usable_addresses`], [`event`].

pub mod addr;
pub mod allow;
pub mod budget;
pub mod diag;
pub mod dns;
pub mod event;
pub mod explain;
pub mod handover;
pub mod lookup_cache;
pub mod notify;
pub mod resolver;
pub mod route;
pub mod service;
pub mod standin;
pub mod sys;

pub use allow::{AllowEntry, AllowList, NetRule};
