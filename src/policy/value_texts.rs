//! The texts an argument value is judged as by a rule: what it says, and what a server may read
//! it as.
//!
//! Servers are lenient where the gate must not be: the official Python SDK (pydantic in lax
//! mode) takes `1.0`, `1e0`, `true`, `" 1"` and `"1_0"` for an integer, and parses a string it
//! is given for a list (`"[\"/a\"]"`) as JSON; JavaScript's `Number()` takes `"0x10"`. A rule
//! that compared only the value's own spelling would let `{"pid": 1e0}` past `regex = "^1$"`.
//! So a value is judged as each of its readings, as a path is ([`super::reading`]): a `deny` or
//! `ask` fires on any, an `allow` needs all.

use serde_json::Value;

/// How deep strings holding JSON lists are looked into (`"[\"[...]\"]"`): each level is one
/// more parse a server would have to choose to make.
const MAX_NESTED_LISTS: usize = 2;

/// Every text `value` is judged as. `as_path`: the rule reads values as paths, where a number
/// is never meant, so strings are taken as written (and lists inside strings still opened).
pub fn texts(value: &Value, as_path: bool) -> Vec<String> {
    let mut out = Vec::new();
    collect(value, as_path, MAX_NESTED_LISTS, &mut out);
    out
}

fn collect(value: &Value, as_path: bool, depth: usize, out: &mut Vec<String>) {
    let push = |text: String, out: &mut Vec<String>| {
        if !out.contains(&text) {
            out.push(text);
        }
    };
    match value {
        Value::String(text) => {
            push(text.clone(), out);
            if !as_path && let Some(number) = lax_number(text) {
                for reading in number_texts(number) {
                    push(reading, out);
                }
            }
            if depth > 0
                && let Some(Value::Array(items)) = json_list(text)
            {
                for item in &items {
                    collect(item, as_path, depth - 1, out);
                }
            }
        }
        Value::Array(items) if depth > 0 => {
            for item in items {
                collect(item, as_path, depth - 1, out);
            }
        }
        Value::Number(number) => {
            push(number.to_string(), out);
            if let Some(float) = number.as_f64().filter(|_| number.is_f64()) {
                for reading in number_texts(float) {
                    push(reading, out);
                }
            }
        }
        Value::Bool(flag) => {
            push(flag.to_string(), out);
            if !as_path {
                push(u8::from(*flag).to_string(), out);
            }
        }
        other => push(other.to_string(), out),
    }
}

/// `x` as the texts a rule on a number expects: a whole number as an integer (`1.0` as `1`),
/// anything else as Rust writes it.
fn number_texts(x: f64) -> Vec<String> {
    if !x.is_finite() {
        return Vec::new();
    }
    // Below 2^53 every whole f64 is exactly the integer it names.
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        return vec![format!("{}", x as i64)];
    }
    vec![x.to_string()]
}

/// The number a lenient server reads `text` as, if any: surrounding whitespace ignored, `_`
/// between digits (Python), `0x`/`0o`/`0b` prefixes (Python's `int(x, 0)`, JavaScript's
/// `Number()`), decimal and exponent forms.
fn lax_number(text: &str) -> Option<f64> {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.len() > 64 {
        return None;
    }
    let (negative, unsigned) = match trimmed.as_bytes()[0] {
        b'-' => (true, &trimmed[1..]),
        b'+' => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let digits = without_digit_underscores(unsigned)?;
    let radix = match digits.get(..2).map(str::to_ascii_lowercase).as_deref() {
        Some("0x") => Some(16),
        Some("0o") => Some(8),
        Some("0b") => Some(2),
        _ => None,
    };
    let magnitude = match radix {
        Some(radix) => u64::from_str_radix(&digits[2..], radix).ok()? as f64,
        // Rust also reads `inf` and `nan`; no server takes those for a number argument.
        None if digits.bytes().any(|b| b.is_ascii_digit()) => digits.parse::<f64>().ok()?,
        None => return None,
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// `text` without the underscores Python allows between two digits; `None` when an underscore
/// stands anywhere else (then no server reads it as a number).
fn without_digit_underscores(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (at, &byte) in bytes.iter().enumerate() {
        if byte == b'_' {
            let between = at > 0
                && at + 1 < bytes.len()
                && bytes[at - 1].is_ascii_hexdigit()
                && bytes[at + 1].is_ascii_hexdigit();
            if !between {
                return None;
            }
        } else {
            out.push(char::from(byte));
        }
    }
    Some(out)
}

/// `text` parsed as JSON when it looks like a list (as a lenient server parses a string it was
/// given for a list).
fn json_list(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if !trimmed.starts_with('[') {
        return None;
    }
    serde_json::from_str(trimmed).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: Value) -> Vec<String> {
        texts(&value, false)
    }

    #[test]
    fn a_whole_number_in_any_spelling_reads_as_its_integer() {
        for spelling in [json!(1), json!(1.0), json!(1e0), json!(0.1e1)] {
            assert!(
                read(spelling.clone()).contains(&"1".to_string()),
                "{spelling}"
            );
        }
        assert_eq!(read(json!(1.5)), vec!["1.5"]);
        assert_eq!(read(json!(-3)), vec!["-3"]);
    }

    #[test]
    fn a_string_or_a_bool_a_server_takes_for_a_number_reads_as_that_number_too() {
        for (spelling, number) in [
            (" 1", "1"),
            ("1.0", "1"),
            ("1e0", "1"),
            ("1_0", "10"),
            ("0x10", "16"),
            ("-0b11", "-3"),
            ("+7", "7"),
        ] {
            let readings = read(json!(spelling));
            assert_eq!(readings[0], spelling, "the value as written comes first");
            assert!(
                readings.contains(&number.to_string()),
                "{spelling}: {readings:?}"
            );
        }
        assert_eq!(read(json!(true)), vec!["true", "1"]);
        for not_a_number in ["", "abc", "1__0", "_1", "1_", "inf", "nan", "0x", "1.2.3"] {
            assert_eq!(read(json!(not_a_number)), vec![not_a_number.to_string()]);
        }
    }

    #[test]
    fn a_list_given_as_a_string_is_read_element_by_element_too() {
        let readings = texts(&json!("[\"/secret/x\", \"/ok\"]"), true);
        assert_eq!(readings[1..], ["/secret/x".to_string(), "/ok".to_string()]);
        let nested = texts(&json!(["[\"/a\", \"[\\\"/b\\\"]\"]"]), true);
        assert!(nested.contains(&"/a".to_string()), "{nested:?}");
        assert!(
            !nested.contains(&"/b".to_string()),
            "bounded depth: {nested:?}"
        );
        assert_eq!(texts(&json!("[not json"), true), vec!["[not json"]);
    }

    #[test]
    fn a_path_rule_takes_strings_as_written() {
        assert_eq!(texts(&json!("1_0"), true), vec!["1_0"]);
        assert_eq!(texts(&json!(["/a", 2]), true), vec!["/a", "2"]);
    }
}
