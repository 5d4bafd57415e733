//! The one secret detector: which keys and which values are credentials. Both consumers read
//! these tables: the config layer masks matching `env`/`headers` values in human output
//! (`sk-****abcd`), and the audit log redacts them from logged tool arguments (`[REDACTED]`).
//! A pattern added here is handled by both; the tests at the bottom prove it for every entry.

mod argv;

pub use argv::mask_argv;

use std::sync::LazyLock;

use regex::Regex;

/// Fragments of a key (lower case, `-`, `_` and `.` removed) that mark its value secret wherever
/// they occur: `GITHUB_TOKEN`, `clientSecret`, `x-api-key`, `db.password`.
pub const SECRET_KEY_FRAGMENTS: [&str; 14] = [
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

/// Words that mark a key secret only as a whole word of it (split at `-`, `_`, `.` and
/// camelCase): `OPENAI_KEY`, `X-Auth`, `pwd`; but not `author`, `keyboard` or `passenger`.
pub const SECRET_KEY_WORDS: [&str; 7] = ["auth", "key", "pwd", "pw", "pass", "session", "creds"];

/// A well-known credential format.
#[derive(Debug, Clone, Copy)]
pub struct TokenShape {
    pub name: &'static str,
    /// A value starting with this is masked in human output even when it is too short for the
    /// pattern (a truncated or test token is still not for display).
    pub prefix: &'static str,
    /// Where this matches inside any text, the match is a secret (redacted from audit logs).
    pub pattern: &'static str,
    /// A made-up token of this shape, for the tests.
    pub example: &'static str,
}

/// Token shapes that are secret wherever they appear.
/// Each pattern starts at a word's start (`\b`): inside a longer name it is no token (a tool
/// `task-delete_all_user_files` holds `sk-delete_all_user_files`, which redacted to `ta[REDACTED]`
/// hid from the log which tool ran).
pub const TOKEN_SHAPES: [TokenShape; 14] = [
    TokenShape {
        name: "OpenAI / Anthropic API key",
        prefix: "sk-",
        pattern: r"\bsk-[A-Za-z0-9_-]{16,}",
        example: "sk-ant-api03-abcdefghijklmnop1234",
    },
    TokenShape {
        name: "Stripe key",
        prefix: "sk_live_",
        pattern: r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
        example: "sk_live_abcdefghijklmnop1234",
    },
    TokenShape {
        name: "GitHub token (classic, OAuth, app, refresh)",
        prefix: "ghp_",
        pattern: r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        example: "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    },
    TokenShape {
        name: "GitHub OAuth token",
        prefix: "gho_",
        pattern: r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        example: "gho_abcdefghijklmnopqrstuvwxyz0123456789",
    },
    TokenShape {
        name: "GitHub fine-grained token",
        prefix: "github_pat_",
        pattern: r"\bgithub_pat_[A-Za-z0-9_]{20,}",
        example: "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789",
    },
    TokenShape {
        name: "GitLab personal access token",
        prefix: "glpat-",
        pattern: r"\bglpat-[A-Za-z0-9_-]{20,}",
        example: "glpat-abcdefghij0123456789",
    },
    TokenShape {
        name: "AWS access key id",
        prefix: "AKIA",
        pattern: r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        example: "AKIAIOSFODNN7EXAMPLE",
    },
    TokenShape {
        name: "Slack token",
        prefix: "xoxb-",
        pattern: r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        example: "xoxb-1234567890-abcdefghij",
    },
    TokenShape {
        name: "Slack user token",
        prefix: "xoxp-",
        pattern: r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        example: "xoxp-1234567890-abcdefghij",
    },
    TokenShape {
        name: "Hugging Face token",
        prefix: "hf_",
        pattern: r"\bhf_[A-Za-z0-9]{30,}",
        example: "hf_abcdefghijklmnopqrstuvwxyz012345",
    },
    TokenShape {
        name: "npm token",
        prefix: "npm_",
        pattern: r"\bnpm_[A-Za-z0-9]{36}",
        example: "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    },
    TokenShape {
        name: "airlock gateway token (airlock token create)",
        prefix: "airlock_",
        pattern: r"\bairlock_[A-Za-z0-9_-]{43}",
        example: "airlock_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    },
    TokenShape {
        name: "HTTP bearer credential",
        prefix: "Bearer ",
        pattern: r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}",
        example: "Bearer abcdefgh.ijklmnop",
    },
    TokenShape {
        name: "PEM private key",
        prefix: "-----BEGIN ",
        // The whole key, to its END line; without one, the base64 that follows the header
        // (a header alone, quoted in a script, takes nothing after it).
        pattern: r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.*?)-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\r\n]*)",
        example: "-----BEGIN OPENSSH PRIVATE KEY-----",
    },
];

/// The shapes' patterns, compiled once, duplicates removed.
static TOKEN_PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for shape in TOKEN_SHAPES {
        if seen.contains(&shape.pattern) {
            continue;
        }
        seen.push(shape.pattern);
        // The table is constant and a unit test compiles every entry.
        if let Ok(regex) = Regex::new(shape.pattern) {
            out.push(regex);
        }
    }
    out
});

/// The shapes' patterns, compiled once, duplicates removed.
pub fn token_patterns() -> &'static [Regex] {
    &TOKEN_PATTERNS
}

/// The fewest bytes a match of any token shape has, read from the patterns' syntax: compiling
/// them (about 2 ms) is left to the first text that may hold a token.
static SHORTEST_TOKEN: LazyLock<usize> = LazyLock::new(|| {
    TOKEN_SHAPES
        .iter()
        .map(|shape| shortest_match(shape.pattern))
        .min()
        .unwrap_or(0)
});

/// Every token shape as one alternation, built from the patterns' text: the shapes are
/// compiled one by one only once a text holds one of them.
static ANY_TOKEN_SHAPE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let alternation: Vec<String> = TOKEN_SHAPES
        .iter()
        .map(|shape| format!("(?:{})", shape.pattern))
        .collect();
    Regex::new(&alternation.join("|")).ok()
});

/// Whether any of [`token_patterns`] matches `text`, in one pass: most logged strings match none,
/// and trying the shapes one by one costs a search each. One alternation, not a `RegexSet`:
/// the set tracks which pattern matched, which a yes/no does not need, and scans about ten
/// times slower (7.4 µs against 0.5 µs for a 4,000-byte argument).
pub fn any_token_shape(text: &str) -> bool {
    // Most logged strings (a tool name, a path, a word) are shorter than any token, and a regex
    // search has a fixed cost of its own even on a few bytes.
    if text.len() < *SHORTEST_TOKEN {
        return false;
    }
    match &*ANY_TOKEN_SHAPE {
        Some(any) => any.is_match(text),
        // Not expected (the same patterns compile one by one): try them one by one.
        None => token_patterns()
            .iter()
            .any(|pattern| pattern.is_match(text)),
    }
}

/// The fewest bytes a match of `pattern` can have: a text shorter than that cannot hold one. 0
/// when it cannot be told (the text is then always searched).
pub fn shortest_match(pattern: &str) -> usize {
    regex_syntax::Parser::new()
        .parse(pattern)
        .ok()
        .and_then(|hir| hir.properties().minimum_len())
        .unwrap_or(0)
}

/// True when a key's name says its value is a credential (`GITHUB_TOKEN`, `Authorization`,
/// `apiKey`, `db_password`, `X-Auth`).
pub fn key_looks_secret(key: &str) -> bool {
    // This runs for every argument key of every call: an ASCII key of a usual length is folded
    // on the stack.
    let mut buffer = [0u8; 64];
    let folded: std::borrow::Cow<'_, [u8]> = if key.is_ascii() && key.len() <= buffer.len() {
        let mut len = 0;
        for byte in key.bytes().filter(|b| !matches!(b, b'-' | b'_' | b'.')) {
            buffer[len] = byte.to_ascii_lowercase();
            len += 1;
        }
        std::borrow::Cow::Borrowed(&buffer[..len])
    } else {
        let folded: String = key
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | '.'))
            .flat_map(char::to_lowercase)
            .collect();
        std::borrow::Cow::Owned(folded.into_bytes())
    };
    if SECRET_KEY_FRAGMENTS.iter().any(|fragment| {
        folded
            .windows(fragment.len())
            .any(|w| w == fragment.as_bytes())
    }) {
        return true;
    }
    any_key_word(key, |word| {
        SECRET_KEY_WORDS
            .iter()
            .any(|secret| lowercase_equals(word, secret))
    })
}

/// Whether `word` lowercased is `lower`, without building the lowercased copy (this runs for
/// every argument key of every call).
fn lowercase_equals(word: &str, lower: &str) -> bool {
    if word.is_ascii() {
        // Only ASCII letters lowercase to ASCII ones here; other letters (the Kelvin sign to
        // `k`) take the general path.
        return word.eq_ignore_ascii_case(lower);
    }
    word.chars().flat_map(char::to_lowercase).eq(lower.chars())
}

/// Whether `test` holds for a word of `key`: the words are split at `-`, `_`, `.`, spaces,
/// lower→upper camelCase boundaries, and before the last capital of an acronym that starts a
/// word (`AWSKey` is `AWS` and `Key`, `DBPass` is `DB` and `Pass`).
fn any_key_word(key: &str, test: impl Fn(&str) -> bool) -> bool {
    key.split(['-', '_', '.', ' ']).any(|part| {
        let bytes = part.as_bytes();
        let mut start = 0;
        for index in 1..bytes.len() {
            let camel = bytes[index - 1].is_ascii_lowercase() && bytes[index].is_ascii_uppercase();
            let acronym_ends = bytes[index - 1].is_ascii_uppercase()
                && bytes[index].is_ascii_uppercase()
                && bytes.get(index + 1).is_some_and(u8::is_ascii_lowercase);
            if camel || acronym_ends {
                if test(&part[start..index]) {
                    return true;
                }
                start = index;
            }
        }
        !part[start..].is_empty() && test(&part[start..])
    })
}

/// True when a value looks like a credential whatever its key: it starts with a known prefix,
/// or a known token shape occurs anywhere in it.
pub fn value_looks_secret(value: &str) -> bool {
    TOKEN_SHAPES
        .iter()
        .any(|shape| value.starts_with(shape.prefix))
        || token_patterns().iter().any(|regex| regex.is_match(value))
}

/// Masks a secret for display, keeping just enough to recognise it: `sk-****abcd`.
/// Short values reveal nothing.
pub fn mask(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    if chars.len() < 12 {
        return "****".to_string();
    }
    let head: String = chars[..3].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}****{tail}")
}

/// A URL as it may be shown to a human or logged: scheme, host, port and path. User info, the
/// query and the fragment can carry tokens (`?api_key=...`), so they are never shown; a masked
/// `?****` says a query was there.
pub fn display_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "****".to_string();
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (before_query, had_query) = (&rest[..end], rest[end..].starts_with('?'));
    let (authority, path) = match before_query.find('/') {
        Some(slash) => before_query.split_at(slash),
        None => (before_query, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let query = if had_query { "?****" } else { "" };
    format!("{scheme}://{host}{path}{query}")
}

// A key (double-, single- or un-quoted), `:` or `=`, then a value in TOML's or JSON's quotes.
const PAIR: &str = r#"(?:"([^"\n]+)"|'([^'\n]+)'|([A-Za-z0-9_.\-]+))\s*[:=]\s*(?:"""((?s:.*?))"""|'''((?s:.*?))'''|"((?:[^"\\\n]|\\.)*)"|'([^'\n]*)')"#;
// A flag, then its value as the next element of an array (perhaps on the next diff line).
const FLAG_THEN_VALUE: &str =
    r#""(--?[A-Za-z0-9_.\-]+)"\s*,(?:\s*\n[ +\-])?\s*"((?:[^"\\\n]|\\.)*)""#;
// `--flag value` inside one text (a shell command line passed as one argument).
const FLAG_SPACE_VALUE: &str = r#"(?:^|\s)--?([A-Za-z][A-Za-z0-9_.\-]*)(?:[ \t]|\\\r?\n)+(?:'([^'\n]*)'|"([^"\n]*)"|([^\s"',=\-][^\s"',]*))"#;
/// An unquoted YAML value on its own line (`  apiKey: sk-...`, `- TOKEN: ...`; a `#` starts a
/// comment only after a space): config text passed to a server in an argument. Quoted values
/// are `PAIR`'s.
const YAML_PAIR: &str = r#"(?m)^[ \t]*(?:-[ \t]+)?([A-Za-z0-9_.\-]+)[ \t]*:[ \t]+([^\s"'#|>{\[&*!][^\r\n]*?)(?:[ \t]+#[^\r\n]*)?[ \t]*\r?$"#;
// `NAME=value` or `--name=value` inside a word.
const ASSIGNED: &str = r#"([A-Za-z0-9_.\-]+)=([^\s"',;]+)"#;
const AUTH_SCHEME: &str = r#"(?i)\b(?:basic|bearer|token|digest)\s+([A-Za-z0-9+/=._~\-]{6,})"#;
// An HTTP header as one quoted argument (`"--header", "X-Api-Key: value"`).
const HEADER_IN_STRING: &str = r#""([A-Za-z0-9_\-]+):[ \t]*((?:[^"\\\n]|\\.)+)""#;
const URL: &str = r#"[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>]+"#;

/// One rule of [`mask_in_config_text`]: its pattern, compiled at its first use, and what a
/// text must hold for the pattern to match at all. Compiling one takes up to 1 ms, and most texts
/// a session masks (a command line's `-y`, a package name, a path) hold none of it, so a
/// server's start does not wait for patterns its command line cannot match.
struct ConfigTextRule {
    compiled: LazyLock<Option<Regex>>,
    could_match: fn(&str) -> bool,
}

impl ConfigTextRule {
    /// The pattern when `text` could match it (`Some(None)` when it cannot); `None` when the
    /// pattern does not compile (not expected: constant patterns, compiled by a unit test).
    fn for_text(&self, text: &str) -> Option<Option<&Regex>> {
        if !(self.could_match)(text) {
            return Some(None);
        }
        self.compiled.as_ref().map(Some)
    }
}

// Each `could_match` names characters every match of its pattern contains.
static PAIR_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(PAIR).ok()),
    could_match: |text| text.contains([':', '=']) && text.contains(['"', '\'']),
};
static FLAG_THEN_VALUE_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(FLAG_THEN_VALUE).ok()),
    could_match: |text| text.contains('"') && text.contains(','),
};
static ASSIGNED_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(ASSIGNED).ok()),
    could_match: |text| text.contains('='),
};
static AUTH_SCHEME_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(AUTH_SCHEME).ok()),
    // `\s` is Unicode's White_Space, as `char::is_whitespace`.
    could_match: |text| text.contains(char::is_whitespace),
};
static FLAG_SPACE_VALUE_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(FLAG_SPACE_VALUE).ok()),
    could_match: |text| text.contains('-') && text.contains([' ', '\t', '\n']),
};
static YAML_PAIR_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(YAML_PAIR).ok()),
    could_match: |text| text.contains(": ") || text.contains(":\t"),
};
static HEADER_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(HEADER_IN_STRING).ok()),
    could_match: |text| text.contains(':'),
};
static URL_RULE: ConfigTextRule = ConfigTextRule {
    compiled: LazyLock::new(|| Regex::new(URL).ok()),
    could_match: |text| text.contains("://"),
};

/// A config file's text (or a diff of one) as it may be shown to a human. Masked: the quoted
/// value of a secret-looking key (`"GITHUB_TOKEN": "..."`, `API_KEY = '...'`, TOML's multi-line
/// strings too), the value after a secret-looking flag or `NAME=` (`"--api-key", "..."`,
/// `--api-key=...`, `MY_TOKEN=...`), the credential of an HTTP auth scheme (`Basic ...`,
/// `Bearer ...`), every token shape anywhere; URLs lose their user info and query. For
/// `install --dry-run`, which prints host files as they are and as they would be.
pub fn mask_in_config_text(text: &str) -> String {
    // Not expected (constant patterns, compiled by a unit test): show nothing rather than leak.
    masked_config_text(text).unwrap_or_else(|| "****".to_string())
}

/// [`mask_in_config_text`]; `None` when a pattern it needs does not compile.
fn masked_config_text(text: &str) -> Option<String> {
    let mut masked = text.to_string();
    if let Some(pair) = PAIR_RULE.for_text(&masked)? {
        masked = mask_groups(&masked, pair, |found| {
            let key = found.get(1).or(found.get(2)).or(found.get(3))?;
            let value = (4..=7).find_map(|group| found.get(group))?;
            (key_looks_secret(key.as_str()) || value_looks_secret(value.as_str())).then_some(value)
        });
    }
    if let Some(yaml_pair) = YAML_PAIR_RULE.for_text(&masked)? {
        masked = mask_groups(&masked, yaml_pair, |found| {
            key_looks_secret(&found[1]).then(|| found.get(2)).flatten()
        });
    }
    if let Some(flag_then_value) = FLAG_THEN_VALUE_RULE.for_text(&masked)? {
        masked = mask_groups(&masked, flag_then_value, |found| {
            key_looks_secret(&found[1]).then(|| found.get(2)).flatten()
        });
    }
    if let Some(header) = HEADER_RULE.for_text(&masked)? {
        masked = mask_groups(&masked, header, |found| {
            key_looks_secret(&found[1]).then(|| found.get(2)).flatten()
        });
    }
    // Before `NAME=value`, which would take the scheme's word for the value and leave the
    // credential after it (`Authorization=Bearer ...`).
    if let Some(auth_scheme) = AUTH_SCHEME_RULE.for_text(&masked)? {
        masked = mask_groups(&masked, auth_scheme, |found| found.get(1));
    }
    if let Some(assigned) = ASSIGNED_RULE.for_text(&masked)? {
        masked = mask_groups(&masked, assigned, |found| {
            key_looks_secret(&found[1]).then(|| found.get(2)).flatten()
        });
    }
    if let Some(flag_space_value) = FLAG_SPACE_VALUE_RULE.for_text(&masked)? {
        masked = mask_groups(&masked, flag_space_value, |found| {
            let value = (2..=4).find_map(|group| found.get(group))?;
            key_looks_secret(&found[1]).then_some(value)
        });
    }
    // One search says whether any shape is there before each is tried on its own.
    if any_token_shape(&masked) {
        for pattern in token_patterns() {
            masked = mask_groups(&masked, pattern, |found| found.get(0));
        }
    }
    let Some(url) = URL_RULE.for_text(&masked)? else {
        return Some(masked);
    };
    let shown = url.replace_all(&masked, |found: &regex::Captures<'_>| {
        let shown = &found[0];
        let authority = shown.split("://").nth(1).unwrap_or("");
        let authority = authority.split('/').next().unwrap_or("");
        if authority.contains('@') || shown.contains('?') {
            display_url(shown)
        } else {
            shown.to_string()
        }
    });
    Some(shown.into_owned())
}

/// `text` with the part `pick` chooses of each match of `pattern` masked (nothing when it
/// chooses none, or a part already masked).
fn mask_groups<'t>(
    text: &'t str,
    pattern: &Regex,
    pick: impl Fn(&regex::Captures<'t>) -> Option<regex::Match<'t>>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for found in pattern.captures_iter(text) {
        let Some(part) = pick(&found) else { continue };
        if part.as_str().contains("****") || part.start() < copied {
            continue;
        }
        out.push_str(&text[copied..part.start()]);
        out.push_str(&mask(part.as_str()));
        copied = part.end();
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests;
