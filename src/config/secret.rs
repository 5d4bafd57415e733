//! Recognising and masking secrets for human-facing output and logs.

/// Key fragments that mark a value as secret (`GITHUB_TOKEN`, `Authorization`, `api_key`, ...).
const SECRET_KEY_PARTS: [&str; 10] = [
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "auth",
    "credential",
    "cookie",
    "session",
    "bearer",
];

/// Value prefixes of well-known credential formats.
const SECRET_VALUE_PREFIXES: [&str; 9] = [
    "sk-",
    "ghp_",
    "gho_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "glpat-",
    "AKIA",
    "Bearer ",
];

/// True when a key's name suggests its value is a credential.
pub fn key_looks_secret(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    SECRET_KEY_PARTS.iter().any(|part| lower.contains(part))
}

/// True when a value looks like a credential whatever its key.
pub fn value_looks_secret(value: &str) -> bool {
    SECRET_VALUE_PREFIXES
        .iter()
        .any(|prefix| value.starts_with(prefix))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keep_a_recognisable_head_and_tail_only() {
        assert_eq!(mask("sk-1234567890abcd"), "sk-****abcd");
        assert_eq!(mask("short"), "****");
        assert_eq!(mask("ééééééééééééé"), "ééé****éééé");
    }

    #[test]
    fn urls_lose_user_info_and_query() {
        assert_eq!(
            display_url("https://u:pw@api.example.com:8443/mcp?key=sk-1#x"),
            "https://api.example.com:8443/mcp?****"
        );
        assert_eq!(
            display_url("http://127.0.0.1:3000"),
            "http://127.0.0.1:3000"
        );
        assert_eq!(display_url("https://h/p#frag"), "https://h/p");
        assert_eq!(display_url("not a url"), "****");
    }

    #[test]
    fn secret_keys_and_values_are_recognised() {
        assert!(key_looks_secret("GITHUB_TOKEN"));
        assert!(key_looks_secret("Authorization"));
        assert!(key_looks_secret("openai_api_key"));
        assert!(!key_looks_secret("LOG_LEVEL"));
        assert!(value_looks_secret("ghp_abcdef"));
        assert!(!value_looks_secret("info"));
    }
}
