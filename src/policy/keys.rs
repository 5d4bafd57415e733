//! Argument keys as a server might read them.
//!
//! A rule on the argument `path` must also govern `Path`, ` path`, or a key in another Unicode
//! normal form (`ｐａｔｈ`): a lenient server (one that lowercases or trims keys, or a framework
//! that normalises them) would read any of them as `path`. Two keys of one call that read the
//! same are ambiguous: the gate cannot know which one the server will use.

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

/// The reading of a key that ignores case, whitespace, invisible format characters (zero-width
/// spaces, the byte-order mark: JavaScript's `trim()` removes it) and Unicode compatibility forms
/// (NFKC). Erring towards "the same key" is the safe side: more keys fall under a rule.
pub fn fold_key(key: &str) -> String {
    key.nfkc()
        .filter(|c| !c.is_whitespace() && !is_invisible(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

fn is_invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// The entries of `arguments` whose key reads as `name`, in the call's order.
pub fn entries_read_as<'a>(
    arguments: &'a Map<String, Value>,
    name: &str,
) -> Vec<(&'a str, &'a Value)> {
    let wanted = fold_key(name);
    arguments
        .iter()
        .filter(|(key, _)| *key == name || fold_key(key) == wanted)
        .map(|(key, value)| (key.as_str(), value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn case_whitespace_and_compatibility_forms_read_the_same() {
        for key in [
            "path",
            "Path",
            "PATH",
            " path",
            "pa th\t",
            "ｐａｔｈ",
            "\u{FEFF}path",
            "pa\u{200B}th",
        ] {
            assert_eq!(fold_key(key), fold_key("path"), "{key:?}");
        }
        assert_ne!(fold_key("paths"), fold_key("path"));
    }

    #[test]
    fn every_key_that_reads_as_the_name_is_found() {
        let args = json!({"Path": "/a", "other": 1, "path ": "/b"});
        let found = entries_read_as(args.as_object().unwrap(), "path");
        assert_eq!(
            found.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            vec!["Path", "path "]
        );
    }
}
