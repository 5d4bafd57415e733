//! Which server of a gateway a resource URI belongs to. URIs are addresses, not names: the
//! gateway does not namespace them, so a hostile server could name another server's URI to have
//! the host's `resources/read` of it come to itself, and answer in the other's name. These rules
//! make such a claim a refusal at worst, never a takeover:
//!
//! - a server's own `resources/list` is the strongest claim; two servers listing one URI make it
//!   ambiguous, refused with both named (not given to the first to list it);
//! - a `resource_link` in a tool result (a host may read it before any listing) claims a URI
//!   only while no server lists it, and links from two servers make it ambiguous;
//! - templates route what no listing claims ([`Core::resource_server`]); templates or links of
//!   two servers that cover one URI make it ambiguous, whatever their lengths.
//!
//! Each server's claims are bounded in number and length, so a server can neither grow the map
//! without end nor crowd out another server's URIs.
//!
//! [`Core::resource_server`]: super::Core::resource_server

use crate::fast_map::FastMap;

/// URIs a server can claim at most; past it, its further URIs route as unclaimed ones do (by
/// template, or to the only server offering resources).
const MAX_CLAIMS_PER_SERVER: usize = 10_000;

/// A longer URI is not noted (it routes as an unclaimed one does).
const MAX_CLAIMED_URI_BYTES: usize = 2 * 1024;

/// The servers that named one URI, by how.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Claim {
    /// Servers that list it (`resources/list`).
    listed: Vec<usize>,
    /// Servers that returned a `resource_link` to it.
    linked: Vec<usize>,
}

#[derive(Debug, Default)]
pub(super) struct ResourceClaims {
    by_uri: FastMap<String, Claim>,
    /// Claims noted per server (index: the server's).
    counts: Vec<usize>,
}

impl ResourceClaims {
    /// Server `server` lists `uri`.
    pub fn list(&mut self, server: usize, uri: &str) {
        self.note(server, uri, |claim| &mut claim.listed);
    }

    /// Server `server` returned a link to `uri`.
    pub fn link(&mut self, server: usize, uri: &str) {
        self.note(server, uri, |claim| &mut claim.linked);
    }

    fn note(&mut self, server: usize, uri: &str, by: fn(&mut Claim) -> &mut Vec<usize>) {
        if uri.len() > MAX_CLAIMED_URI_BYTES {
            return;
        }
        if self.counts.len() <= server {
            self.counts.resize(server + 1, 0);
        }
        let already = self
            .by_uri
            .get(uri)
            .is_some_and(|claim| claim.listed.contains(&server) || claim.linked.contains(&server));
        if !already && self.counts[server] >= MAX_CLAIMS_PER_SERVER {
            return;
        }
        let claim = self.by_uri.entry(uri.to_string()).or_default();
        let servers = by(claim);
        if !servers.contains(&server) {
            servers.push(server);
        }
        if !already {
            self.counts[server] += 1;
        }
    }

    /// The servers with the strongest claim to `uri`, among those `live` says are still
    /// there: those that list it; else those that linked it or offer a template that covers it
    /// (`templates`: template, its literal prefix, server), or is it, as a completion names
    /// one. One server: it owns the URI; none: nobody claims it; more: it is ambiguous.
    pub fn claimants(
        &self,
        uri: &str,
        templates: &[(String, String, usize)],
        live: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let claim = self.by_uri.get(uri);
        let listed: Vec<usize> = claim
            .into_iter()
            .flat_map(|claim| claim.listed.iter().copied())
            .filter(|server| live(*server))
            .collect();
        if !listed.is_empty() {
            return listed;
        }
        let mut covering: Vec<usize> = claim
            .into_iter()
            .flat_map(|claim| claim.linked.iter().copied())
            .filter(|server| live(*server))
            .collect();
        for (template, prefix, server) in templates {
            if live(*server)
                && (template == uri || uri.starts_with(prefix.as_str()))
                && !covering.contains(server)
            {
                covering.push(*server);
            }
        }
        covering
    }

    /// Forgets every claim of `server` (it was replaced or removed).
    pub fn forget(&mut self, server: usize) {
        self.by_uri.retain(|_, claim| {
            claim.listed.retain(|s| *s != server);
            claim.linked.retain(|s| *s != server);
            !(claim.listed.is_empty() && claim.linked.is_empty())
        });
        if let Some(count) = self.counts.get_mut(server) {
            *count = 0;
        }
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

    #[test]
    fn a_listing_outranks_links_and_templates_and_two_listings_are_ambiguous() {
        let mut claims = ResourceClaims::default();
        let none = templates(&[]);
        let all = |_| true;
        claims.link(1, "file:///b/secret");
        assert_eq!(claims.claimants("file:///b/secret", &none, all), vec![1]);
        claims.list(0, "file:///b/secret");
        let covering = templates(&[("file:///b/{path}", 1)]);
        assert_eq!(
            claims.claimants("file:///b/secret", &covering, all),
            vec![0]
        );
        claims.list(1, "file:///b/secret");
        claims.list(0, "file:///b/secret");
        assert_eq!(claims.claimants("file:///b/secret", &none, all), vec![0, 1]);
        // A server that is gone no longer counts.
        assert_eq!(
            claims.claimants("file:///b/secret", &none, |s| s != 1),
            vec![0]
        );
        claims.forget(1);
        assert_eq!(claims.claimants("file:///b/secret", &none, all), vec![0]);
        claims.forget(0);
        assert_eq!(
            claims.claimants("file:///b/secret", &none, all),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn templates_and_links_of_two_servers_over_one_uri_are_ambiguous_whatever_their_length() {
        let mut claims = ResourceClaims::default();
        let all = |_| true;
        let both = templates(&[("file:///b/{path}", 0), ("file:///b/docs/{name}", 1)]);
        assert_eq!(
            claims.claimants("file:///b/docs/plan.md", &both, all),
            vec![0, 1]
        );
        assert_eq!(claims.claimants("file:///b/other", &both, all), vec![0]);
        // The template itself, as a completion names it.
        assert_eq!(
            claims.claimants("file:///b/docs/{name}", &both, all),
            vec![0, 1]
        );
        let own = templates(&[("file:///b/{path}", 0), ("mem://{key}", 1)]);
        claims.link(1, "file:///b/x");
        assert_eq!(claims.claimants("file:///b/x", &own, all), vec![1, 0]);
        claims.link(0, "mem://k");
        assert_eq!(claims.claimants("mem://k", &own, all), vec![0, 1]);
        claims.link(0, "file:///b/y");
        assert_eq!(claims.claimants("file:///b/y", &own, all), vec![0]);
    }

    #[test]
    fn each_server_claims_a_bounded_number_of_uris_of_bounded_length() {
        let mut claims = ResourceClaims::default();
        let none = templates(&[]);
        let all = |_| true;
        let claimed =
            |claims: &ResourceClaims, uri: &str| !claims.claimants(uri, &none, all).is_empty();
        for n in 0..MAX_CLAIMS_PER_SERVER + 5 {
            claims.list(0, &format!("mem://{n}"));
        }
        assert!(claimed(
            &claims,
            &format!("mem://{}", MAX_CLAIMS_PER_SERVER - 1)
        ));
        assert!(!claimed(&claims, &format!("mem://{MAX_CLAIMS_PER_SERVER}")));
        // A URI it already claims is still noted another way; another server is not crowded out.
        claims.link(0, "mem://0");
        assert_eq!(claims.by_uri["mem://0"].linked, vec![0]);
        claims.list(1, &format!("mem://{MAX_CLAIMS_PER_SERVER}"));
        assert!(claimed(&claims, &format!("mem://{MAX_CLAIMS_PER_SERVER}")));
        let long = "x".repeat(MAX_CLAIMED_URI_BYTES + 1);
        claims.list(1, &long);
        assert!(!claimed(&claims, &long));
        // Forgetting a server gives its room back.
        claims.forget(0);
        claims.list(0, "mem://again");
        assert!(claimed(&claims, "mem://again"));
    }
}
