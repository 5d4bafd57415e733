//! Whether a line nests arrays and objects deeper than a reader of `Value`s takes. A server's
//! answer on the fast path is only peeked at ([`super::peek`]), and serde_json skips what it does
//! not read without counting depth: a result nested 200,000 deep would reach the host (whose own
//! parser may crash on it) while the full path drops the same line as junk. Peeking first asks
//! this, so both paths refuse the same lines.

/// How deep serde_json reads arrays and objects inside one another into a `Value` (its
/// recursion limit of 128 refuses the 128th).
pub const SERDE_JSON_DEPTH: usize = 127;

/// Whether `line` (one JSON text) opens more than `limit` arrays and objects inside one another,
/// strings not counted. Lines with no more than `limit` brackets are answered at once; others
/// are scanned, jumping through strings.
pub fn nests_deeper_than(line: &[u8], limit: usize) -> bool {
    if memchr::memchr2_iter(b'[', b'{', line).nth(limit).is_none() {
        return false;
    }
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = line.get(at) {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => at = string_end(line, at + 1),
            _ => {}
        }
        at += 1;
    }
    false
}

/// Where the string whose content starts at `from` ends (its closing quote), or the line's end.
fn string_end(line: &[u8], mut from: usize) -> usize {
    while let Some(found) = memchr::memchr2(b'"', b'\\', &line[from.min(line.len())..]) {
        let at = from + found;
        if line[at] == b'"' {
            return at;
        }
        // An escape: the byte after the backslash is never the string's end.
        from = at + 2;
    }
    line.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_serde_json_on_what_is_too_deep() {
        let answer =
            |inner: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":{inner}}}}}"#);
        for depth in 120..135 {
            for open in ["[", "{\"a\":"] {
                let close = if open == "[" { "]" } else { "}" };
                let line = answer(&format!("{}1{}", open.repeat(depth), close.repeat(depth)));
                let too_deep = serde_json::from_str::<serde_json::Value>(&line).is_err();
                assert_eq!(
                    nests_deeper_than(line.as_bytes(), SERDE_JSON_DEPTH),
                    too_deep,
                    "{depth} {open}"
                );
            }
        }
    }

    #[test]
    fn brackets_in_strings_and_escaped_quotes_do_not_count() {
        let text = format!(r#"{{"text":"\"{}\\","more":"x"}}"#, "[{".repeat(500));
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
        assert!(!nests_deeper_than(text.as_bytes(), SERDE_JSON_DEPTH));
        let flat = format!("[{}1]", "[1],".repeat(500));
        assert!(!nests_deeper_than(flat.as_bytes(), SERDE_JSON_DEPTH));
        let deep = format!(r#"{{"s":"\\"}}{}"#, "[".repeat(200));
        assert!(nests_deeper_than(deep.as_bytes(), SERDE_JSON_DEPTH));
        // An unterminated string ends the scan.
        assert!(!nests_deeper_than(
            format!("\"{}", "[".repeat(200)).as_bytes(),
            128
        ));
    }
}
