//! Argument keys as a server might read them.
//!
//! A rule on the argument `path` must also govern `Path`, ` path`, or a key in another Unicode
//! normal form (`ｐａｔｈ`): a lenient server (one that lowercases or trims keys, or a framework
//! that normalises them) would read any of them as `path`. Two keys of one call that read the
//! same are ambiguous: the gate cannot know which one the server will use.

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

/// The reading of a key that ignores case, whitespace, invisible characters (zero-width spaces,
/// the byte-order mark: JavaScript's `trim()` removes it; bidirectional isolates) and Unicode
/// compatibility forms (NFKC), `ß` as `ss` (full case folding), and everything from a NUL on
/// (cJSON ends a key there). Erring
/// towards "the same key" is the safe side: more keys fall under a rule.
pub fn fold_key(key: &str) -> String {
    let key = key.split('\0').next().unwrap_or_default();
    let folded: String = key
        .nfkc()
        .filter(|c| !c.is_whitespace() && !is_invisible(*c))
        // The dotless and the dotted I are `i` to a reader comparing by simple case mappings
        // (.NET's `OrdinalIgnoreCase` uppercases `ı` to `I`); `to_lowercase` keeps `ı` and makes
        // `İ` an `i` with a combining dot.
        .map(|c| match c {
            '\u{0131}' | '\u{0130}' => 'i',
            c => c,
        })
        .flat_map(char::to_lowercase)
        .collect();
    // Full case folding (Python's `casefold()`) makes `ß` (and `ẞ`, lowercased above) `ss`.
    if folded.contains('\u{df}') {
        folded.replace('\u{df}', "ss")
    } else {
        folded
    }
}

/// Characters that render as nothing: every format character (general category Cf: zero-width
/// spaces and joiners, bidirectional marks, embeddings and isolates, the byte-order mark, tags),
/// and the other default-ignorable code points that are not (the combining grapheme joiner,
/// Hangul fillers, Khmer inherent vowels, Mongolian and other variation selectors). A lenient
/// server that drops them (as Python's `unicodedata`-based cleanups of Cf do) reads `pa\u{2066}th` as
/// `path`; so must the gate. A fixed list would miss the next one.
pub(crate) fn is_invisible(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    get_general_category(c) == GeneralCategory::Format
        || matches!(
            c,
            '\u{034F}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FFA0}'
                | '\u{E0100}'..='\u{E01EF}'
        )
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
            // Bidirectional isolates and other format characters once missed.
            "\u{2066}path\u{2069}",
            "pa\u{2067}th\u{2068}",
            "pa\u{061C}th",
            "path\u{E0001}",
            "\u{180E}path",
            // Default-ignorable, though not format characters.
            "pa\u{034F}th",
            "path\u{FE0F}",
            "pa\u{3164}th",
            // A NUL ends the key for cJSON; the long s and the Kelvin sign fold to ASCII.
            "path\u{0}.txt",
            "PATH\u{0}",
        ] {
            assert_eq!(fold_key(key), fold_key("path"), "{key:?}");
        }
        // Every format character the tables know, one at a time.
        for code in 0..=0x10FFFF {
            let Some(c) = char::from_u32(code) else {
                continue;
            };
            if unicode_general_category::get_general_category(c)
                == unicode_general_category::GeneralCategory::Format
            {
                assert_eq!(fold_key(&format!("pa{c}th")), "path", "U+{code:04X}");
            }
        }
        assert_ne!(fold_key("paths"), fold_key("path"));
        assert_eq!(fold_key("ta\u{017F}\u{212A}"), fold_key("task"));
        assert_eq!(fold_key("f\u{0131}le"), fold_key("file"));
        assert_eq!(fold_key("F\u{0130}LE"), fold_key("file"));
        assert_eq!(fold_key("addre\u{df}"), fold_key("address"));
        assert_eq!(fold_key("ADDRE\u{1e9e}"), fold_key("address"));
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
