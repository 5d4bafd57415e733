//! Which server of a gateway a resource URI belongs to. URIs are addresses, not names: the
//! gateway does not namespace them, so a hostile server could name another server's URI to have
//! the host's `resources/read` of it come to itself, and answer in the other's name. These rules
//! make such a claim a refusal at worst, never a takeover:
//!
//! - a server claims a URI by listing it (`resources/list`), by returning it as a
//!   `resource_link` in a tool result (a host may read it before any listing), or by a template
//!   (`resources/templates/list`) that covers it ([`Core::resource_server`]);
//! - a URI one server claims goes to it; a URI two servers claim, in any of those ways and
//!   whatever their templates' lengths, is ambiguous: refused naming both, never given to the
//!   first or the most specific;
//! - a server's listing replaces its earlier one: a URI it no longer lists is no longer its.
//!
//! Each server's claims are bounded in number (its links are kept up to a bound, the oldest let
//! go first), so a server can neither grow the map without end nor crowd out another server's
//! URIs. A URI is noted by its SHA-256, whatever its length: a long URI (a pre-signed URL) is
//! claimed as any other, and never falls to another server's template for being long.
//!
//! [`Core::resource_server`]: super::Core::resource_server

use std::collections::VecDeque;

use crate::fast_map::FastMap;

/// URIs a server's listing claims at most (past it, its further URIs route as unclaimed ones
/// do: by template, or to the only server offering resources), and links it claims at most
/// (past it, its oldest link is let go).
const MAX_CLAIMS_PER_SERVER: usize = 10_000;

/// A URI as the claims note it: its SHA-256 (a fixed size, whatever the URI's length; no server
/// can make two URIs share one).
type UriKey = [u8; 32];

fn key(uri: &str) -> UriKey {
    crate::audit::chain::line_hash(uri.as_bytes())
}

/// The servers that named one URI, by how.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Claim {
    /// Servers that list it (`resources/list`).
    listed: Vec<usize>,
    /// Servers that returned a `resource_link` to it.
    linked: Vec<usize>,
}

impl Claim {
    fn is_empty(&self) -> bool {
        self.listed.is_empty() && self.linked.is_empty()
    }
}

/// What one server claims, for its bounds.
#[derive(Debug, Default)]
struct Held {
    listed: usize,
    /// Its links, oldest first.
    links: VecDeque<UriKey>,
}

#[derive(Debug, Default)]
pub(super) struct ResourceClaims {
    by_uri: FastMap<UriKey, Claim>,
    /// Index: the server's.
    held: Vec<Held>,
}

impl ResourceClaims {
    /// Server `server` lists `uris` now (the whole of its listing): what it listed before and
    /// lists no more is no longer its.
    pub fn relist<'a>(&mut self, server: usize, uris: impl IntoIterator<Item = &'a str>) {
        self.let_go(server, |claim| &mut claim.listed);
        self.held_mut(server).listed = 0;
        self.add_listed(server, uris);
    }

    /// Server `server` lists `uris` too (part of a listing that did not arrive whole): added to
    /// what it claims, nothing given up.
    pub fn add_listed<'a>(&mut self, server: usize, uris: impl IntoIterator<Item = &'a str>) {
        for uri in uris {
            if self.held_mut(server).listed >= MAX_CLAIMS_PER_SERVER {
                continue;
            }
            let listed = &mut self.by_uri.entry(key(uri)).or_default().listed;
            if !listed.contains(&server) {
                listed.push(server);
                self.held_mut(server).listed += 1;
            }
        }
    }

    /// Server `server` returned a link to `uri`.
    pub fn link(&mut self, server: usize, uri: &str) {
        let uri = key(uri);
        let linked = &mut self.by_uri.entry(uri).or_default().linked;
        if linked.contains(&server) {
            return;
        }
        linked.push(server);
        let links = &mut self.held_mut(server).links;
        links.push_back(uri);
        if links.len() > MAX_CLAIMS_PER_SERVER
            && let Some(oldest) = links.pop_front()
            && let Some(claim) = self.by_uri.get_mut(&oldest)
        {
            claim.linked.retain(|s| *s != server);
            if claim.is_empty() {
                self.by_uri.remove(&oldest);
            }
        }
    }

    /// The live servers (`live`) that claim `uri`: by listing it, by a link to it, or by a
    /// template that covers it (`templates`: template, its literal prefix, server), or is it,
    /// as a completion names one. One: it owns the URI; none: nobody claims it; more: it is
    /// ambiguous.
    pub fn claimants(
        &self,
        uri: &str,
        templates: &[(String, String, usize)],
        live: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let mut claimants = Vec::new();
        let mut add = |server: usize| {
            if live(server) && !claimants.contains(&server) {
                claimants.push(server);
            }
        };
        if let Some(claim) = self.by_uri.get(&key(uri)) {
            claim
                .listed
                .iter()
                .chain(&claim.linked)
                .for_each(|s| add(*s));
        }
        for (template, prefix, server) in templates {
            if template == uri || uri.starts_with(prefix.as_str()) {
                add(*server);
            }
        }
        claimants
    }

    /// Forgets every claim of `server` (it was replaced or removed).
    pub fn forget(&mut self, server: usize) {
        self.let_go(server, |claim| &mut claim.listed);
        self.let_go(server, |claim| &mut claim.linked);
        if let Some(held) = self.held.get_mut(server) {
            *held = Held::default();
        }
    }

    /// Gives every claim of `from` to `to` (a server replaced by a reload: its replacement
    /// serves the same resources until it lists its own).
    pub fn hand_over(&mut self, from: usize, to: usize) {
        for claim in self.by_uri.values_mut() {
            for servers in [&mut claim.listed, &mut claim.linked] {
                if let Some(at) = servers.iter().position(|s| *s == from) {
                    servers.remove(at);
                    if !servers.contains(&to) {
                        servers.push(to);
                    }
                }
            }
        }
        let held = std::mem::take(self.held_mut(from));
        *self.held_mut(to) = held;
    }

    /// Takes `server` out of one kind of claim everywhere.
    fn let_go(&mut self, server: usize, kind: fn(&mut Claim) -> &mut Vec<usize>) {
        self.by_uri.retain(|_, claim| {
            kind(claim).retain(|s| *s != server);
            !claim.is_empty()
        });
    }

    fn held_mut(&mut self, server: usize) -> &mut Held {
        if self.held.len() <= server {
            self.held.resize_with(server + 1, Held::default);
        }
        &mut self.held[server]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn templates(list: &[(&str, usize)]) -> Vec<(String, String, usize)> {
        list.iter()
            .map(|(template, server)| {
                let prefix = template.split('{').next().unwrap_or(template);
                (template.to_string(), prefix.to_string(), *server)
            })
            .collect()
    }

    const ALL: fn(usize) -> bool = |_| true;

    #[test]
    fn a_uri_two_servers_claim_in_any_way_is_ambiguous_never_the_first_ones() {
        let mut claims = ResourceClaims::default();
        let none = templates(&[]);
        claims.link(1, "notes://secret");
        assert_eq!(claims.claimants("notes://secret", &none, ALL), vec![1]);
        // Another server listing it, or covering it by a template: neither takes it.
        let covering = templates(&[("notes://{id}", 1)]);
        assert_eq!(claims.claimants("notes://other", &covering, ALL), vec![1]);
        claims.relist(0, ["notes://secret", "notes://other"]);
        assert_eq!(claims.claimants("notes://secret", &none, ALL), vec![0, 1]);
        assert_eq!(
            claims.claimants("notes://other", &covering, ALL),
            vec![0, 1]
        );
        // The template itself, as a completion names it.
        assert_eq!(claims.claimants("notes://{id}", &covering, ALL), vec![1]);
        // A server that is gone no longer counts.
        assert_eq!(
            claims.claimants("notes://secret", &none, |s| s != 1),
            vec![0]
        );
        claims.forget(1);
        assert_eq!(claims.claimants("notes://secret", &none, ALL), vec![0]);
        claims.forget(0);
        assert_eq!(
            claims.claimants("notes://secret", &none, ALL),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn a_replaced_server_hands_its_claims_to_its_replacement() {
        let mut claims = ResourceClaims::default();
        let evil = templates(&[("notes://{id}", 1)]);
        claims.relist(0, ["notes://secret"]);
        claims.link(0, "mem://linked");
        claims.hand_over(0, 2);
        claims.forget(0);
        assert_eq!(claims.claimants("notes://secret", &evil, ALL), vec![2, 1]);
        assert_eq!(claims.claimants("mem://linked", &evil, ALL), vec![2]);
        // Its next listing replaces what it took over.
        claims.relist(2, ["notes://other"]);
        assert_eq!(claims.claimants("notes://other", &evil, ALL), vec![2, 1]);
        assert_eq!(claims.claimants("mem://linked", &evil, ALL), vec![2]);
        assert_eq!(claims.claimants("notes://secret", &evil, ALL), vec![1]);
    }

    #[test]
    fn templates_of_two_servers_over_one_uri_are_ambiguous_whatever_their_length() {
        let claims = ResourceClaims::default();
        let both = templates(&[("file:///b/{path}", 0), ("file:///b/docs/{name}", 1)]);
        assert_eq!(
            claims.claimants("file:///b/docs/plan.md", &both, ALL),
            vec![0, 1]
        );
        assert_eq!(claims.claimants("file:///b/other", &both, ALL), vec![0]);
        assert_eq!(claims.claimants("mem://x", &both, ALL), Vec::<usize>::new());
    }

    #[test]
    fn a_listing_replaces_the_servers_last_one() {
        let mut claims = ResourceClaims::default();
        let none = templates(&[]);
        claims.relist(0, ["mem://a", "mem://b"]);
        claims.link(0, "mem://b");
        claims.relist(0, ["mem://c"]);
        assert_eq!(claims.claimants("mem://a", &none, ALL), Vec::<usize>::new());
        assert_eq!(
            claims.claimants("mem://b", &none, ALL),
            vec![0],
            "still linked"
        );
        assert_eq!(claims.claimants("mem://c", &none, ALL), vec![0]);
        // A server whose listing changes all the time keeps its current one readable.
        for round in 0..5 {
            let uris: Vec<String> = (0..4000).map(|n| format!("rot://{round}/{n}")).collect();
            claims.relist(1, uris.iter().map(String::as_str));
        }
        assert_eq!(claims.claimants("rot://4/3999", &none, ALL), vec![1]);
        assert_eq!(
            claims.claimants("rot://3/3999", &none, ALL),
            Vec::<usize>::new()
        );
        assert!(claims.by_uri.len() < 4010, "{}", claims.by_uri.len());
    }

    #[test]
    fn each_server_claims_a_bounded_number_of_uris_of_any_length() {
        let mut claims = ResourceClaims::default();
        let none = templates(&[]);
        let claimed =
            |claims: &ResourceClaims, uri: &str| !claims.claimants(uri, &none, ALL).is_empty();
        let many: Vec<String> = (0..MAX_CLAIMS_PER_SERVER + 5)
            .map(|n| format!("mem://{n}"))
            .collect();
        claims.relist(0, many.iter().map(String::as_str));
        assert!(claimed(&claims, &many[MAX_CLAIMS_PER_SERVER - 1]));
        assert!(!claimed(&claims, &many[MAX_CLAIMS_PER_SERVER]));
        // Another server is not crowded out.
        claims.relist(1, [many[MAX_CLAIMS_PER_SERVER].as_str()]);
        assert!(claimed(&claims, &many[MAX_CLAIMS_PER_SERVER]));
        // A long URI (a pre-signed URL) is claimed as any other: a catch-all template of another
        // server does not get it alone.
        let long = format!("https://bucket.example/k?token={}", "t".repeat(64 * 1024));
        claims.relist(1, [long.as_str()]);
        let catch_all = templates(&[("https://{+rest}", 3)]);
        assert_eq!(claims.claimants(&long, &catch_all, ALL), vec![1, 3]);
        // Links past the bound let the oldest go.
        for n in 0..MAX_CLAIMS_PER_SERVER + 1 {
            claims.link(2, &format!("link://{n}"));
        }
        assert!(!claimed(&claims, "link://0"));
        assert!(claimed(&claims, "link://1"));
        assert!(claimed(&claims, &format!("link://{MAX_CLAIMS_PER_SERVER}")));
    }
}
