//! Namespacing: `<server><sep><tool>` (and the same for prompts), within the host-side limit of
//! 128 characters of `[A-Za-z0-9_.-]`.
//!
//! Collisions are impossible by construction: a server name never contains the separator (config
//! validation refuses it), so the prefix up to the first separator names exactly one server; and
//! within one server, a name that had to be changed (invalid characters, too long) carries a hash
//! of the original, and [`NameTable`] re-salts the hash in the (adversarial) case where a server
//! lists a tool whose plain name equals another tool's hashed name.

use crate::fast_map::FastMap;

use sha2::{Digest, Sha256};

/// The longest name hosts accept (Claude, OpenAI and Gemini tool-name limits agree on this or
/// less; 128 is the MCP SEP-986 bound).
pub const MAX_NAME: usize = 128;
/// Hex digits of the hash appended to a changed name.
const HASH_LEN: usize = 8;

fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn short_hash(original: &str, salt: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(original.as_bytes());
    if salt > 0 {
        hasher.update(salt.to_le_bytes());
    }
    let digest = hasher.finalize();
    digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The host-facing name of `item` of `server`. Pure and deterministic; `salt` is 0 except when
/// [`NameTable`] resolves a collision. Returns the name and whether it differs from the plain
/// `server + sep + item`.
pub fn namespaced(server: &str, sep: &str, item: &str, salt: u32) -> (String, bool) {
    let prefix_len = server.len() + sep.len();
    let plain_ok = !item.is_empty() && item.chars().all(valid_char);
    if plain_ok && prefix_len + item.len() <= MAX_NAME && salt == 0 {
        return (format!("{server}{sep}{item}"), false);
    }
    let budget = MAX_NAME.saturating_sub(prefix_len + 1 + HASH_LEN);
    let sanitized: String = item
        .chars()
        .map(|c| if valid_char(c) { c } else { '_' })
        .take(budget)
        .collect();
    (
        format!("{server}{sep}{sanitized}-{}", short_hash(item, salt)),
        true,
    )
}

/// Splits a host-facing name at the first separator: `(server, rest)`.
pub fn split<'a>(name: &'a str, sep: &str) -> Option<(&'a str, &'a str)> {
    let at = name.find(sep)?;
    Some((&name[..at], &name[at + sep.len()..]))
}

/// Host-facing names ↔ (server index, original name), for one kind of item (tools or prompts).
#[derive(Debug, Default, Clone)]
pub struct NameTable {
    to_original: FastMap<String, (usize, String)>,
    by_server: FastMap<usize, Vec<String>>,
}

impl NameTable {
    /// Replaces the names of `server` with `items` (in the server's order). Returns the
    /// host-facing names in the same order, and the (original, host-facing) pairs that had to be
    /// changed, for the log.
    pub fn set_server(
        &mut self,
        server: usize,
        server_name: &str,
        sep: &str,
        items: &[&str],
    ) -> (Vec<String>, Vec<(String, String)>) {
        self.remove_server(server);
        let mut names = Vec::with_capacity(items.len());
        let mut changed = Vec::new();
        for item in items {
            let mut salt = 0;
            let name = loop {
                let (candidate, differs) = namespaced(server_name, sep, item, salt);
                match self.to_original.get(&candidate) {
                    // Listed twice by the server: the same name, once.
                    Some((owner, original)) if *owner == server && original == item => {
                        break None;
                    }
                    Some(_) => salt += 1,
                    None => {
                        if differs {
                            changed.push((item.to_string(), candidate.clone()));
                        }
                        break Some(candidate);
                    }
                }
            };
            let Some(name) = name else {
                names.push(namespaced(server_name, sep, item, 0).0);
                continue;
            };
            self.to_original
                .insert(name.clone(), (server, item.to_string()));
            self.by_server.entry(server).or_default().push(name.clone());
            names.push(name);
        }
        (names, changed)
    }

    pub fn remove_server(&mut self, server: usize) {
        for name in self.by_server.remove(&server).unwrap_or_default() {
            self.to_original.remove(&name);
        }
    }

    /// The server and original name behind a host-facing name.
    pub fn resolve(&self, name: &str) -> Option<(usize, &str)> {
        self.to_original
            .get(name)
            .map(|(server, original)| (*server, original.as_str()))
    }

    /// The host-facing name of `original` on `server`, if listed.
    pub fn name_of(&self, server: usize, original: &str) -> Option<&str> {
        self.by_server.get(&server)?.iter().find_map(|name| {
            let (owner, orig) = self.to_original.get(name)?;
            (*owner == server && orig == original).then_some(name.as_str())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty() && name.len() <= MAX_NAME && name.chars().all(valid_char)
    }

    #[test]
    fn plain_names_join_server_and_tool() {
        assert_eq!(
            namespaced("fs", "__", "read_file", 0),
            ("fs__read_file".into(), false)
        );
        assert_eq!(
            namespaced("fs", "_", "read_file", 0),
            ("fs_read_file".into(), false)
        );
        assert_eq!(split("fs__read__file", "__"), Some(("fs", "read__file")));
        assert_eq!(split("nothing", "__"), None);
    }

    #[test]
    fn invalid_or_long_names_are_shortened_deterministically() {
        let long = "x".repeat(300);
        let (a, changed) = namespaced("server", "__", &long, 0);
        assert!(changed && valid(&a) && a.len() == MAX_NAME, "{a}");
        assert_eq!(a, namespaced("server", "__", &long, 0).0);
        let other = format!("{}y", "x".repeat(299));
        assert_ne!(a, namespaced("server", "__", &other, 0).0);
        let (b, changed) = namespaced("server", "__", "get weather/now", 0);
        assert!(
            changed && valid(&b) && b.starts_with("server__get_weather_now-"),
            "{b}"
        );
        assert_ne!(b, namespaced("server", "__", "get_weather_now", 0).0);
        let (c, _) = namespaced("s", "__", "", 0);
        assert!(valid(&c));
        let (d, _) = namespaced("s", "__", "ünïcode", 0);
        assert!(valid(&d));
    }

    #[test]
    fn table_resolves_both_ways_and_never_collides() {
        let mut table = NameTable::default();
        let long = "t".repeat(200);
        let hashed = namespaced("a", "__", "x y", 0).0;
        // A hostile tool named like another tool's hashed name.
        let hostile = hashed.trim_start_matches("a__").to_string();
        let items = ["read", "x y", hostile.as_str(), long.as_str(), "read"];
        let (names, changed) = table.set_server(0, "a", "__", &items);
        assert_eq!(names.len(), 5);
        assert_eq!(names[0], names[4], "a duplicate listing keeps one name");
        let unique: std::collections::HashSet<_> = names[..4].iter().collect();
        assert_eq!(unique.len(), 4, "{names:?}");
        for name in &names {
            assert!(valid(name), "{name}");
        }
        assert_eq!(changed.len(), 3, "{changed:?}");
        for (item, name) in items.iter().zip(&names) {
            assert_eq!(table.resolve(name), Some((0, *item)));
            assert_eq!(table.name_of(0, item), Some(name.as_str()));
        }
        table.set_server(1, "b", "__", &["read"]);
        assert_eq!(table.resolve("b__read"), Some((1, "read")));
        assert_eq!(table.resolve("a__read"), Some((0, "read")));
        table.set_server(0, "a", "__", &["write"]);
        assert_eq!(table.resolve("a__read"), None);
        assert_eq!(table.resolve("a__write"), Some((0, "write")));
        table.remove_server(1);
        assert_eq!(table.resolve("b__read"), None);
    }
}
