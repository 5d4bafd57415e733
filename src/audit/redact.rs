//! Redaction of logged tool arguments: values under secret-looking keys, well-known token shapes,
//! and the policy's `audit.redact` regexes.

use regex::Regex;
use serde_json::{Map, Value};

pub const REDACTED: &str = "[REDACTED]";

/// Key fragments (lower case, `-`/`_` removed) that mark a value as secret.
const SECRET_KEY_PARTS: [&str; 14] = [
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "authorization",
    "credential",
    "privatekey",
    "cookie",
    "sessionid",
    "accesskey",
    "bearer",
    "signature",
];
/// Whole keys that are secret but too short to search for inside other words.
const SECRET_KEYS: [&str; 3] = ["auth", "pwd", "pass"];

/// Token shapes that are secret wherever they appear.
const BUILTIN_PATTERNS: [&str; 6] = [
    r"sk-[A-Za-z0-9_-]{16,}",
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"AKIA[0-9A-Z]{16}",
    r"xox[abprs]-[A-Za-z0-9-]{10,}",
    r"(?i)bearer\s+[A-Za-z0-9._~+/=-]{8,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
];

#[derive(Debug, thiserror::Error)]
#[error("audit.redact pattern {pattern:?} is not a valid regex: {source}")]
pub struct PatternError {
    pub pattern: String,
    #[source]
    pub source: regex::Error,
}

#[derive(Debug, Clone)]
pub struct Redactor {
    patterns: Vec<Regex>,
}

fn secret_key(key: &str) -> bool {
    let folded: String = key
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_KEYS.contains(&folded.as_str())
        || SECRET_KEY_PARTS.iter().any(|part| folded.contains(part))
}

impl Redactor {
    /// The built-in token shapes plus `extra` (the policy's `audit.redact`).
    pub fn new<'a>(extra: impl IntoIterator<Item = &'a str>) -> Result<Redactor, PatternError> {
        let mut patterns = Vec::new();
        for pattern in BUILTIN_PATTERNS.into_iter().chain(extra) {
            let regex = Regex::new(pattern).map_err(|source| PatternError {
                pattern: pattern.to_string(),
                source,
            })?;
            patterns.push(regex);
        }
        Ok(Redactor { patterns })
    }

    /// A copy of `value` with secrets replaced by `[REDACTED]`.
    pub fn redact(&self, value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (key, item) in map {
                    let redacted = if secret_key(key) && !item.is_null() {
                        Value::String(REDACTED.to_string())
                    } else {
                        self.redact(item)
                    };
                    out.insert(key.clone(), redacted);
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.redact(item)).collect())
            }
            Value::String(text) => Value::String(self.redact_text(text)),
            other => other.clone(),
        }
    }

    fn redact_text(&self, text: &str) -> String {
        let mut current = std::borrow::Cow::Borrowed(text);
        for pattern in &self.patterns {
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
}
