//! What of a tool call's arguments reaches the audit log: values under secret-looking keys and
//! well-known token shapes (both from the one table in [`crate::secret`]) and the policy's
//! `audit.redact` regexes are replaced by `[REDACTED]`; then large values are capped, keeping
//! their head, their size and their hash, so a 200 KiB argument costs the log a few hundred bytes.

use regex::Regex;
use serde_json::{Map, Value};

use super::Event;
use crate::hash::sha256_hex;
use crate::secret;

pub const REDACTED: &str = "[REDACTED]";

/// A string argument longer than this (in bytes, after redaction) is logged capped.
pub const MAX_LOGGED_STRING_BYTES: usize = 4096;
/// How much of a capped string is kept, in bytes (cut back to a character boundary).
pub const CAPPED_HEAD_BYTES: usize = 256;
/// When the arguments as a whole, after capping each string, still encode to more than this (a
/// long array of small values), they are logged as one capped string.
pub const MAX_LOGGED_ARGS_BYTES: usize = 64 * 1024;
/// A name taken from a call (a tool name, a request id) longer than this is logged capped: a
/// name is read by people scanning the log, and a host can send one of any size.
pub const MAX_LOGGED_NAME_BYTES: usize = 256;
/// How much of a capped name is kept, in bytes.
const CAPPED_NAME_HEAD_BYTES: usize = 64;

#[derive(Debug, thiserror::Error)]
#[error("audit.redact pattern {pattern:?} is not a valid regex: {source}")]
pub struct PatternError {
    pub pattern: String,
    #[source]
    pub source: regex::Error,
}

#[derive(Debug, Clone)]
pub struct Redactor {
    /// The policy's own `audit.redact` patterns (the built-in shapes live in [`crate::secret`]).
    extra: Vec<Regex>,
    /// The fewest bytes any of `extra` can match ([`secret::shortest_match`]).
    extra_shortest: usize,
}

/// `<head>… [capped: N bytes, sha256 HEX]`: the marker a capped value is logged as.
pub fn capped_marker(head: &str, total_bytes: usize, sha256: &str) -> String {
    format!("{head}… [capped: {total_bytes} bytes, sha256 {sha256}]")
}

fn cap_string(text: String) -> String {
    cap_to(text, MAX_LOGGED_STRING_BYTES, CAPPED_HEAD_BYTES)
}

/// `text` whole when it has at most `limit` bytes, else its first `head` bytes (cut back to a
/// character boundary) with its size and hash.
fn cap_to(text: String, limit: usize, head: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut end = head;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    capped_marker(&text[..end], text.len(), &sha256_hex(text.as_bytes()))
}

impl Redactor {
    /// The built-in secret shapes plus `extra` (the policy's `audit.redact`).
    pub fn new<'a>(extra: impl IntoIterator<Item = &'a str>) -> Result<Redactor, PatternError> {
        let mut patterns = Vec::new();
        for pattern in extra {
            let regex = Regex::new(pattern).map_err(|source| PatternError {
                pattern: pattern.to_string(),
                source,
            })?;
            patterns.push(regex);
        }
        let extra_shortest = patterns
            .iter()
            .map(|pattern| secret::shortest_match(pattern.as_str()))
            .min()
            .unwrap_or(usize::MAX);
        Ok(Redactor {
            extra: patterns,
            extra_shortest,
        })
    }

    /// A copy of `value` as it may be logged: secrets replaced by `[REDACTED]`, large strings
    /// capped, and the whole capped when it is still too large.
    pub fn redact(&self, value: &Value) -> Value {
        let mut size = 0;
        let logged = self.redact_value(value, &mut size);
        if size <= MAX_LOGGED_ARGS_BYTES {
            return logged;
        }
        // The estimate is generous; only an actual encoding over the limit is capped.
        let encoded = logged.to_string();
        if encoded.len() <= MAX_LOGGED_ARGS_BYTES {
            return logged;
        }
        Value::String(cap_string(encoded))
    }

    /// Redacts and caps; `size` accumulates an upper estimate of the encoded length.
    fn redact_value(&self, value: &Value, size: &mut usize) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (key, item) in map {
                    *size += key.len() + 4;
                    let redacted = if secret::key_looks_secret(key) && !item.is_null() {
                        *size += REDACTED.len() + 2;
                        Value::String(REDACTED.to_string())
                    } else {
                        self.redact_value(item, size)
                    };
                    out.insert(key.clone(), redacted);
                }
                *size += 2;
                Value::Object(out)
            }
            Value::Array(items) => {
                *size += 2 + items.len();
                Value::Array(
                    items
                        .iter()
                        .map(|item| self.redact_value(item, size))
                        .collect(),
                )
            }
            Value::String(text) => {
                let logged = cap_string(self.redact_text(text));
                // Escapes can at most double a string (\uXXXX is rarer than that, and only a
                // too-small estimate matters: it is checked by encoding).
                *size += logged.len() * 2 + 2;
                Value::String(logged)
            }
            other => {
                *size += 24;
                other.clone()
            }
        }
    }

    /// A text that quotes a call (a refusal, a reason, a value the gate read) as it may be
    /// logged: redacted and capped as one string argument is.
    pub fn loggable_text(&self, text: &str) -> String {
        cap_string(self.redact_text(text))
    }

    /// One argument value quoted in a text, as it may be logged: `[REDACTED]` under a
    /// secret-looking key (as in `args`), else redacted and capped as a string argument.
    pub fn loggable_value(&self, key: &str, value: &str) -> String {
        if secret::key_looks_secret(key) {
            REDACTED.to_string()
        } else {
            self.loggable_text(value)
        }
    }

    /// A name from a call (a tool name) as it may be logged: redacted, and capped to
    /// [`MAX_LOGGED_NAME_BYTES`].
    pub fn loggable_name(&self, name: &str) -> String {
        cap_to(
            self.redact_text(name),
            MAX_LOGGED_NAME_BYTES,
            CAPPED_NAME_HEAD_BYTES,
        )
    }

    /// Applies the argument rules to the fields of an event that can carry what a host sent
    /// besides `args`: the tool name, the request id and the reason (a refusal quotes the name
    /// and may quote a value). Every event of a session passes here on its way to the log, so
    /// no code path that builds one can leak past redaction or the cap.
    pub fn seal(&self, event: &mut Event) {
        if let Some(tool) = &mut event.tool {
            *tool = self.loggable_name(tool);
        }
        // Redacted whatever its length (a host's id in a token's shape was logged as sent), and
        // the same way in every record of the call, so they still match.
        if let Some(Value::String(id)) = &mut event.request_id {
            *id = self.loggable_name(id);
        }
        if let Some(reason) = &mut event.reason {
            *reason = self.loggable_text(reason);
        }
    }

    /// `text` with every token shape and policy pattern match replaced by `[REDACTED]`.
    pub fn redact_text(&self, text: &str) -> String {
        let extra_match =
            || text.len() >= self.extra_shortest && self.extra.iter().any(|p| p.is_match(text));
        if !secret::any_token_shape(text) && !extra_match() {
            return text.to_string();
        }
        let mut current = std::borrow::Cow::Borrowed(text);
        for pattern in secret::token_patterns().iter().chain(&self.extra) {
            if pattern.is_match(&current) {
                current =
                    std::borrow::Cow::Owned(pattern.replace_all(&current, REDACTED).into_owned());
            }
        }
        current.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_secret_keys_at_any_depth() {
        let redactor = Redactor::new([]).unwrap();
        let args = json!({
            "path": "/tmp/x", "api_key": "abc", "nested": {"Authorization": "Basic x", "author": "me"},
            "list": [{"client-secret": 5}], "token": null
        });
        assert_eq!(
            redactor.redact(&args),
            json!({
                "path": "/tmp/x", "api_key": REDACTED, "nested": {"Authorization": REDACTED, "author": "me"},
                "list": [{"client-secret": REDACTED}], "token": null
            })
        );
    }

    #[test]
    fn a_policy_pattern_shorter_than_any_token_shape_still_redacts() {
        let redactor = Redactor::new(["k9", "pin-[0-9]{4}"]).unwrap();
        assert_eq!(redactor.redact_text("k9"), REDACTED);
        assert_eq!(redactor.redact_text("a pin-1234"), format!("a {REDACTED}"));
        assert_eq!(redactor.redact_text("k"), "k");
        assert_eq!(Redactor::new([]).unwrap().redact_text("k9"), "k9");
    }

    #[test]
    fn redacts_token_shapes_and_policy_patterns() {
        let redactor = Redactor::new(["acct-[0-9]+"]).unwrap();
        let args = json!({"text": "use sk-abcdefghijklmnop1234 and acct-42 please", "n": 1});
        assert_eq!(
            redactor.redact(&args),
            json!({"text": "use [REDACTED] and [REDACTED] please", "n": 1})
        );
    }

    #[test]
    fn bad_policy_pattern_is_an_error() {
        assert!(Redactor::new(["("]).is_err());
    }

    #[test]
    fn large_strings_are_capped_with_size_and_hash() {
        let redactor = Redactor::new([]).unwrap();
        let big = "é".repeat(100 * 1024); // 200 KiB, two bytes a character
        let logged = redactor.redact(&json!({"content": big, "path": "/x"}));
        let text = logged["content"].as_str().unwrap();
        assert!(text.len() < 400, "{}", text.len());
        assert!(text.starts_with("éé"));
        assert!(text.contains("[capped: 204800 bytes, sha256 "), "{text}");
        assert!(text.contains(&sha256_hex(big.as_bytes())));
        assert_eq!(logged["path"], "/x");
        let at_limit = "a".repeat(MAX_LOGGED_STRING_BYTES);
        assert_eq!(redactor.redact(&json!(at_limit)), json!(at_limit));
    }

    #[test]
    fn a_secret_is_redacted_before_its_value_is_capped_and_hashed() {
        let redactor = Redactor::new([]).unwrap();
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let big = format!("{token} {}", "x".repeat(10_000));
        let text = redactor.redact(&json!(big)).as_str().unwrap().to_string();
        assert!(text.starts_with("[REDACTED] xxx"), "{text}");
        let redacted = big.replacen(token, REDACTED, 1);
        assert!(text.contains(&sha256_hex(redacted.as_bytes())));
    }

    #[test]
    fn many_small_values_are_capped_as_a_whole() {
        let redactor = Redactor::new([]).unwrap();
        let many: Vec<u64> = (0..100_000).collect();
        let logged = redactor.redact(&json!({ "ids": many }));
        let text = logged.as_str().unwrap();
        assert!(text.starts_with("{\"ids\":[0,1,2"), "{text}");
        assert!(text.contains("[capped: "));
        let small = json!({"ids": [1, 2, 3]});
        assert_eq!(redactor.redact(&small), small);
    }

    #[test]
    fn a_sealed_event_carries_names_ids_and_reasons_redacted_and_capped() {
        let redactor = Redactor::new(["acct-[0-9]+"]).unwrap();
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let name = "n".repeat(200 * 1024);
        let mut event = Event::new(super::super::EventKind::Outcome, "fs");
        event.tool = Some(name.clone());
        event.request_id = Some(json!("i".repeat(1000)));
        event.reason = Some(format!("Unknown tool: {name} with {token} for acct-7"));
        redactor.seal(&mut event);
        let tool = event.tool.unwrap();
        assert!(tool.len() < MAX_LOGGED_NAME_BYTES, "{}", tool.len());
        assert!(tool.contains("[capped: 204800 bytes, sha256 "), "{tool}");
        let id = event.request_id.unwrap();
        assert!(id.as_str().unwrap().contains("[capped: 1000 bytes"), "{id}");
        let reason = event.reason.unwrap();
        assert!(reason.len() < 400, "{}", reason.len());
        // Redacted before it is capped: the hash is of the redacted text.
        let whole = format!("Unknown tool: {name} with [REDACTED] for [REDACTED]");
        assert!(reason.contains(&sha256_hex(whole.as_bytes())), "{reason}");

        let mut small = Event::new(super::super::EventKind::Decision, "fs");
        small.tool = Some("read_file".into());
        small.request_id = Some(json!(7));
        small.reason = Some(format!("token {token} and acct-42"));
        redactor.seal(&mut small);
        assert_eq!(small.tool.as_deref(), Some("read_file"));
        assert_eq!(small.request_id, Some(json!(7)));
        assert_eq!(
            small.reason.as_deref(),
            Some("token [REDACTED] and [REDACTED]")
        );
    }

    /// A short id in a token's shape is redacted like a long one; a name that merely holds a
    /// token's prefix inside it (`task-`, `disk-`) is a name, and stays readable.
    #[test]
    fn a_token_shaped_id_is_redacted_and_a_name_holding_a_prefix_is_not() {
        let redactor = Redactor::new([]).unwrap();
        let mut event = Event::new(super::super::EventKind::Decision, "fs");
        event.tool = Some("task-delete_all_user_files".into());
        event.request_id = Some(json!("ghp_abcdefghijklmnopqrstuvwxyz0123"));
        redactor.seal(&mut event);
        assert_eq!(event.tool.as_deref(), Some("task-delete_all_user_files"));
        assert_eq!(event.request_id, Some(json!(REDACTED)));
        for name in [
            "task-list_user_files_safe",
            "/etc/cron.d/disk-cleanup-job-hourly",
            "risk-assessment-report-final",
            "tokenAKIADELETEALLFILES00x",
        ] {
            assert_eq!(redactor.redact_text(name), name);
        }
        for secret in [
            "key=sk-ant-api03-abcdefghijklmnop1234",
            "AKIAIOSFODNN7EXAMPLE",
            "Authorization: Bearer abcdefgh.ijklmnop",
        ] {
            assert!(redactor.redact_text(secret).contains(REDACTED), "{secret}");
        }
    }
}
