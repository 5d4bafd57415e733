//! The texts an argument value is judged as by a rule: what it says, and what a server may read
//! it as.
//!
//! Servers are lenient where the gate must not be: the official Python SDK (pydantic in lax
//! mode) takes `1.0`, `1e0`, `true`, `" 1"` and `"1_0"` for an integer, `1`, `"yes"` and `"on"`
//! for `true`, and parses a string it is given for a list (`"[\"/a\"]"`) as JSON (Python's
//! `json.loads`, which also takes `NaN` and lone surrogates); JavaScript's `Number()` takes
//! `"0x10"`. A `deny` or `ask` rule that compared only the value's own spelling would let
//! `{"pid": 1e0}` past `regex = "^1$"`, so for those a value is judged as each of its readings
//! and fires on any (a value that looks like a list but cannot be read fires too: it fails
//! closed). An `allow` rule judges a scalar as written: it holds only for what it was written
//! to match, and a reading it did not foresee (`true` also read as `1`) must not refuse a plain
//! call. A list or an object is another matter, since the server then acts on its parts: an
//! `allow` rule must hold for a string as written and, when the string holds a JSON list or
//! object, for every element, key and value of it too, and so for a list or object sent as it is
//! (`"[\"/srv/secret/key\"]"` is a relative path inside an allowed working directory as written,
//! and the secret file to the server; an object's JSON text holds an allowed path beside a
//! secret one: found by reviews); one holding JSON airlock cannot read, or strings holding JSON
//! deeper than it opens, does not hold. Both kinds of rule read objects by their keys and
//! values.

use std::collections::HashSet;

use serde_json::Value;

/// How deep strings holding JSON lists are looked into (`"[\"[...]\"]"`): each level is one
/// more parse a server would have to choose to make.
const MAX_NESTED_LISTS: usize = 2;

/// What a value is judged as.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Texts {
    /// Each text once, the value as written first.
    pub texts: Vec<String>,
    /// Why a reading a server may make could not be made here (a string it may parse as a list
    /// nested past serde's limit, a number past f64, digits other than ASCII ones): judged as
    /// failing closed.
    pub unreadable: Option<&'static str>,
}

/// Why a list in a string cannot be read here.
const LIST_PAST_READING: &str = "a string that a lenient server reads as a list, past what airlock can read (nested too deep, a number too large)";

/// Why a number in other digits is not read here.
const OTHER_DIGITS: &str = "a number written in digits other than ASCII ones (Python's int() reads `\u{ff11}` as 1), which airlock does not read";

/// Every text `value` is judged as. `as_path`: the rule reads values as paths, where a number
/// is never meant, so strings are taken as written (lists inside strings are still opened).
/// `every_reading`: a `deny`/`ask` rule's (all readings); else an `allow` rule's (as written).
pub fn texts(value: &Value, as_path: bool, every_reading: bool) -> Texts {
    let mut out = Collected::default();
    if every_reading {
        out.readings(value, as_path, MAX_NESTED_LISTS);
    } else {
        out.as_written(value, MAX_NESTED_LISTS);
    }
    Texts {
        texts: out.texts,
        unreadable: out.unreadable,
    }
}

#[derive(Default)]
struct Collected {
    texts: Vec<String>,
    seen: HashSet<String>,
    unreadable: Option<&'static str>,
}

impl Collected {
    fn push(&mut self, text: String) {
        if self.seen.insert(text.clone()) {
            self.texts.push(text);
        }
    }

    /// An `allow` rule's texts: each string and scalar as written, and the keys and values of
    /// every list and object the value is or holds (one sent as it is, or held in a string, as
    /// a server acts on them), opening at most `parses` strings deep; a string holding one past
    /// that, or one airlock cannot read, is unreadable (the rule does not hold).
    fn as_written(&mut self, value: &Value, parses: usize) {
        match value {
            Value::String(text) => {
                self.push(text.clone());
                match json_list(text) {
                    Listed::Items(inner) if parses > 0 => self.as_written(&inner, parses - 1),
                    Listed::Items(_) | Listed::Unreadable => {
                        self.unreadable.get_or_insert(LIST_PAST_READING);
                    }
                    Listed::NotAList => {}
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.as_written(item, parses);
                }
            }
            Value::Object(members) => {
                for (key, member) in members {
                    self.push(key.clone());
                    self.as_written(member, parses);
                }
            }
            other => self.push(other.to_string()),
        }
    }

    /// A `deny`/`ask` rule's texts: every reading of each string and scalar, and of the keys and
    /// values of every list and object the value is or holds, opening at most `parses` strings
    /// deep (each one more parse a server would have to choose to make).
    fn readings(&mut self, value: &Value, as_path: bool, parses: usize) {
        match value {
            Value::String(text) => {
                self.push(text.clone());
                if !as_path {
                    if let Some(integer) = exact_integer(text) {
                        self.push(integer);
                    }
                    if let Some(number) = lax_number(text) {
                        self.push_number(number);
                    }
                    if let Some(flag) = lax_bool(text) {
                        self.push(flag.to_string());
                    }
                    if in_other_digits(text) {
                        self.unreadable.get_or_insert(OTHER_DIGITS);
                    }
                }
                match json_list(text) {
                    Listed::Items(inner) if parses > 0 => {
                        self.readings(&inner, as_path, parses - 1);
                    }
                    Listed::Unreadable => {
                        self.unreadable.get_or_insert(LIST_PAST_READING);
                    }
                    Listed::Items(_) | Listed::NotAList => {}
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.readings(item, as_path, parses);
                }
            }
            Value::Object(members) => {
                for (key, member) in members {
                    self.push(key.clone());
                    self.readings(member, as_path, parses);
                }
            }
            Value::Number(number) => {
                self.push(number.to_string());
                if let Some(float) = number.as_f64().filter(|_| number.is_f64()) {
                    self.push_number(float);
                }
                if !as_path && let Some(flag) = number.as_f64().and_then(bool_of_number) {
                    self.push(flag.to_string());
                }
            }
            Value::Bool(flag) => {
                self.push(flag.to_string());
                if !as_path {
                    self.push(u8::from(*flag).to_string());
                }
            }
            other => self.push(other.to_string()),
        }
    }

    /// `x` as the text a rule on a number expects: a whole number as an integer (`1.0` as
    /// `1`), anything else as Rust writes it.
    fn push_number(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        // Below 2^53 every whole f64 is exactly the integer it names (larger ones come from
        // their digits: `exact_integer`).
        if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
            self.push(format!("{}", x as i64));
        } else {
            self.push(x.to_string());
        }
    }
}

/// `1` and `0` are `true` and `false` to a lax boolean.
fn bool_of_number(x: f64) -> Option<bool> {
    match x {
        1.0 => Some(true),
        0.0 => Some(false),
        _ => None,
    }
}

/// The boolean pydantic's lax mode reads `text` as, if any.
fn lax_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" | "on" => Some(true),
        "0" | "false" | "f" | "no" | "n" | "off" => Some(false),
        _ => None,
    }
}

/// Whether `text` is a number written with digits other than ASCII ones (`\u{ff11}`, `\u{661}`,
/// `\u{1d7cf}`): Python's `int()` and `float()` read any Unicode decimal digit. Reading their
/// values would take the Unicode digit tables; the rule fails closed on them instead.
fn in_other_digits(text: &str) -> bool {
    let trimmed = text.trim();
    trimmed.chars().any(|c| !c.is_ascii() && c.is_numeric())
        && trimmed
            .chars()
            .all(|c| c.is_numeric() || matches!(c, '+' | '-' | '.' | '_' | 'e' | 'E'))
}

/// The integer a whole number written as a string names, from its digits (exact at any size,
/// where an f64 would round `9007199254740993`): `" +0_42.000 "` is `42`.
fn exact_integer(text: &str) -> Option<String> {
    let trimmed = text.trim();
    let (sign, unsigned) = match trimmed.as_bytes().first()? {
        b'-' => ("-", &trimmed[1..]),
        b'+' => ("", &trimmed[1..]),
        _ => ("", trimmed),
    };
    let digits = without_digit_underscores(unsigned)?;
    let (whole, fraction) = digits.split_once('.').unwrap_or((&digits, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b == b'0')
    {
        return None;
    }
    let significant = whole.trim_start_matches('0');
    Some(match significant {
        "" => "0".to_string(),
        digits => format!("{sign}{digits}"),
    })
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

/// What a string that may hold a list holds.
enum Listed {
    /// The list or object it holds.
    Items(Value),
    /// It starts like a list or an object but is no JSON a lenient parser reads either.
    NotAList,
    /// It is a list to Python's `json.loads` but past what airlock reads (nested deeper than
    /// serde's limit, a number past f64).
    Unreadable,
}

/// `text` parsed as a JSON list or object the way a lenient server does, when it looks like one
/// (the official Python SDK parses a string given for a list, a dict or a model). Python's
/// `json.loads` also takes `NaN`, `Infinity` and lone surrogate escapes: a text serde refuses is
/// read again with those made readable, so a list cannot hide an element behind them.
fn json_list(text: &str) -> Listed {
    let opener = if opens_with(text, '{') { '{' } else { '[' };
    match lenient_json(text, opener) {
        Lenient::Read(container @ (Value::Array(_) | Value::Object(_))) => Listed::Items(container),
        Lenient::Read(_) | Lenient::NotJson => Listed::NotAList,
        Lenient::Unreadable => Listed::Unreadable,
    }
}

/// What a string holding JSON that starts with `opener` holds, read as a lenient server reads
/// it (Python's `json.loads`).
pub enum Lenient {
    Read(Value),
    /// It does not start with `opener`, or no lenient parser reads it.
    NotJson,
    /// Python reads it, airlock cannot (nested past serde's limit, a number past f64).
    Unreadable,
}

/// `text` without the white space and byte order marks around it (a decoder of bytes drops a
/// leading U+FEFF, which is no white space to Unicode).
pub fn trimmed(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// Whether `text`, [`trimmed`], starts with `opener`.
pub fn opens_with(text: &str, opener: char) -> bool {
    trimmed(text).starts_with(opener)
}

pub fn lenient_json(text: &str, opener: char) -> Lenient {
    let trimmed = trimmed(text);
    if !trimmed.starts_with(opener) {
        return Lenient::NotJson;
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => Lenient::Read(value),
        Err(err) if past_serde(&err) => Lenient::Unreadable,
        Err(_) => match serde_json::from_str::<Value>(&pythonic_json_made_standard(trimmed)) {
            Ok(value) => Lenient::Read(value),
            Err(err) if past_serde(&err) => Lenient::Unreadable,
            Err(_) => Lenient::NotJson,
        },
    }
}

fn past_serde(err: &serde_json::Error) -> bool {
    let message = err.to_string();
    message.contains("recursion limit exceeded") || message.contains("number out of range")
}

/// `text` with what Python's `json.loads` accepts and JSON does not replaced outside strings
/// (`NaN`, `Infinity`, `-Infinity` as `null`) and inside them (a surrogate escape as U+FFFD).
fn pythonic_json_made_standard(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut in_string = false;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if c == '\\' {
                let bytes = rest.as_bytes();
                let surrogate = bytes.len() >= 6
                    && bytes[1] == b'u'
                    && bytes[2].eq_ignore_ascii_case(&b'd')
                    && matches!(bytes[3].to_ascii_lowercase(), b'8'..=b'9' | b'a'..=b'f')
                    && bytes[4].is_ascii_hexdigit()
                    && bytes[5].is_ascii_hexdigit();
                if surrogate {
                    out.push_str("\\ufffd");
                    rest = &rest[6..];
                    continue;
                }
                let pair: String = rest.chars().take(2).collect();
                out.push_str(&pair);
                rest = &rest[pair.len()..];
                continue;
            }
            in_string = c != '"';
        } else if c == '"' {
            in_string = true;
        } else if let Some(token) = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|token| rest.starts_with(token))
        {
            out.push_str("null");
            rest = &rest[token.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A deny rule's readings of `value`.
    fn read(value: Value) -> Vec<String> {
        texts(&value, false, true).texts
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
        // Past 2^53 a string's digits are read exactly, not through an f64.
        for spelling in [
            "9007199254740993.0",
            "9_007_199_254_740_993",
            " 9007199254740993 ",
        ] {
            assert!(
                read(json!(spelling)).contains(&"9007199254740993".to_string()),
                "{spelling}"
            );
        }
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
            ("007", "7"),
        ] {
            let readings = read(json!(spelling));
            assert_eq!(readings[0], spelling, "the value as written comes first");
            assert!(
                readings.contains(&number.to_string()),
                "{spelling}: {readings:?}"
            );
        }
        assert_eq!(read(json!(true)), vec!["true", "1"]);
        for not_a_number in ["abc", "1__0", "_1", "1_", "inf", "nan", "0x", "1.2.3"] {
            assert_eq!(read(json!(not_a_number)), vec![not_a_number.to_string()]);
        }
    }

    #[test]
    fn what_a_lax_boolean_takes_reads_as_the_boolean_too() {
        for (spelling, flag) in [
            (json!(1), "true"),
            (json!(1.0), "true"),
            (json!(0), "false"),
            (json!("1"), "true"),
            (json!("yes"), "true"),
            (json!(" On "), "true"),
            (json!("t"), "true"),
            (json!("Y"), "true"),
            (json!("TRUE"), "true"),
            (json!("off"), "false"),
        ] {
            assert!(
                read(spelling.clone()).contains(&flag.to_string()),
                "{spelling}"
            );
        }
    }

    #[test]
    fn a_list_given_as_a_string_is_read_element_by_element_too() {
        let readings = texts(&json!("[\"/secret/x\", \"/ok\"]"), true, true).texts;
        assert_eq!(readings[1..], ["/secret/x".to_string(), "/ok".to_string()]);
        // Two parses of strings holding lists are read, not a third.
        let third = json!(["/b"]).to_string();
        let second = json!([third]).to_string();
        let first = json!(["/a", second]).to_string();
        let nested = texts(&json!([first]), true, true).texts;
        assert!(nested.contains(&"/a".to_string()), "{nested:?}");
        assert!(
            !nested.contains(&"/b".to_string()),
            "bounded depth: {nested:?}"
        );
        assert_eq!(
            texts(&json!("[not json"), true, true).texts,
            vec!["[not json"]
        );
    }

    /// Python's `json.loads` reads `NaN`, `Infinity` and lone surrogates, serde does not: the
    /// list's other elements are still read; a list past serde's limits fails closed.
    #[test]
    fn a_list_only_a_lenient_parser_reads_is_still_read_or_fails_closed() {
        for list in [
            r#"["/srv/secret/x", "\ud800"]"#,
            r#"["/srv/secret/x", NaN]"#,
            r#"["/srv/secret/x", -Infinity]"#,
            r#"["/srv/secret/x", "NaN é \u00e9 \"q\""]"#,
        ] {
            let read = texts(&json!(list), true, true);
            assert!(
                read.texts.contains(&"/srv/secret/x".to_string()),
                "{list}: {read:?}"
            );
        }
        let huge = texts(&json!(r#"["/srv/secret/x", 1e400]"#), true, true);
        assert!(huge.unreadable.is_some(), "{huge:?}");
        let deep = format!(
            "[\"/srv/secret/x\", {}{}]",
            "[".repeat(130),
            "]".repeat(130)
        );
        assert!(texts(&json!(deep), true, true).unreadable.is_some());
    }

    #[test]
    fn a_path_rule_takes_strings_as_written() {
        assert_eq!(texts(&json!("1_0"), true, true).texts, vec!["1_0"]);
        assert_eq!(texts(&json!(["/a", 2]), true, true).texts, vec!["/a", "2"]);
    }

    /// An allow rule holds for what it was written to match: no reading it did not foresee.
    #[test]
    fn an_allow_rule_judges_the_value_as_written() {
        assert_eq!(texts(&json!(true), false, false).texts, vec!["true"]);
        assert_eq!(texts(&json!("0644"), false, false).texts, vec!["0644"]);
        assert_eq!(texts(&json!(["a", 2]), false, false).texts, vec!["a", "2"]);
    }

    /// ... but a list held in a string is what the server acts on: every element is judged too,
    /// and a list it cannot read, or one nested past the depth it reads, fails the rule.
    #[test]
    fn an_allow_rule_judges_every_element_of_a_list_in_a_string() {
        let read = texts(
            &json!("[\"/srv/secret/key\", \"/srv/public/a\"]"),
            true,
            false,
        );
        assert_eq!(
            read.texts,
            vec![
                "[\"/srv/secret/key\", \"/srv/public/a\"]",
                "/srv/secret/key",
                "/srv/public/a"
            ]
        );
        assert_eq!(read.unreadable, None);
        let nested = texts(&json!(["[\"/srv/secret/key\"]"]), true, false);
        assert!(nested.texts.contains(&"/srv/secret/key".to_string()));
        // Lists and objects as they are sent are read whole, however nested; only strings
        // holding JSON count as parses.
        let raw = texts(&json!([[["/x"]], {"k": {"j": "/y"}}]), true, false);
        assert!(raw.texts.contains(&"/x".to_string()) && raw.texts.contains(&"/y".to_string()));
        assert_eq!(raw.unreadable, None);
        let inner = json!(["/x"]).to_string();
        let three_parses = json!([json!([inner]).to_string()]).to_string();
        assert!(
            texts(&json!(three_parses), true, false)
                .unreadable
                .is_some()
        );
        assert!(texts(&json!("[1e999]"), false, false).unreadable.is_some());
        assert_eq!(texts(&json!("[not json"), true, false).unreadable, None);
    }

    /// An object (a dict or model to the server) is judged by its keys and values, for both
    /// kinds of rule, sent as it is or held in a string (a review's bypass:
    /// `"{\"a\": \"/srv/secret/key\", \"b\": \"/srv/public/a\"}"` allowed by
    /// `regex = "/srv/public/"`, and a deny rule's prefix never met by an object's text).
    #[test]
    fn an_object_is_judged_by_its_keys_and_values() {
        let held = json!("{\"a\": \"/srv/secret/key\", \"b\": \"/srv/public/a\"}");
        for every_reading in [false, true] {
            for value in [
                &held,
                &json!({"a": "/srv/secret/key", "b": "/srv/public/a"}),
            ] {
                let read = texts(value, true, every_reading);
                assert!(
                    read.texts.contains(&"/srv/secret/key".to_string()),
                    "{read:?}"
                );
                assert!(read.texts.contains(&"a".to_string()), "{read:?}");
            }
        }
        assert!(
            texts(&json!("{\"a\": 1e999}"), false, false)
                .unreadable
                .is_some()
        );
    }

    /// Many values cost each one lookup, not one per value seen before.
    #[test]
    fn a_long_list_is_read_in_linear_time() {
        let many: Vec<Value> = (0..200_000).map(|n| json!(n)).collect();
        let started = std::time::Instant::now();
        let read = texts(&Value::Array(many), false, true);
        assert!(read.texts.len() >= 200_000);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_number_in_other_digits_fails_closed() {
        for other in [
            "\u{ff11}",
            "\u{661}\u{662}",
            "\u{1d7cf}",
            " -\u{ff11}.5 ",
            "1\u{ff10}",
        ] {
            let read = texts(&json!(other), false, true);
            assert_eq!(read.unreadable, Some(OTHER_DIGITS), "{other:?}");
        }
        // ASCII digits are read; text that is not a number, a path and an allow rule's
        // reading as written are left alone.
        for (value, as_path, every) in [
            ("1", false, true),
            ("Room \u{ff12}", false, true),
            ("\u{ff11}", true, true),
            ("\u{ff11}", false, false),
        ] {
            let read = texts(&json!(value), as_path, every);
            assert_eq!(read.unreadable, None, "{value:?}");
        }
    }
}
