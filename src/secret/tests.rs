//! The unit tests of `secret`: masking, the token shapes and the keys that look secret.

use super::*;

#[test]
fn shortest_match_is_the_fewest_bytes_a_match_can_have() {
    assert_eq!(shortest_match(r"sk-[A-Za-z0-9_-]{16,}"), 19);
    assert_eq!(shortest_match(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]{8,}"), 15);
    assert_eq!(shortest_match("a|bcd"), 1);
    assert_eq!(shortest_match("é"), 2, "bytes, as a text's len()");
    assert_eq!(shortest_match("x*"), 0);
    assert_eq!(shortest_match("(unclosed"), 0, "unknown: always searched");
}

#[test]
fn tokens_as_short_as_the_shortest_shape_are_still_found() {
    // The shortest shapes match 15 bytes: a text that long is searched, a shorter one
    // cannot hold a token.
    assert!(any_token_shape("Bearer abcdefgh"));
    assert!(any_token_shape("xoxb-0123456789"));
    assert!(!any_token_shape("Bearer abcdefg"));
    for shape in TOKEN_SHAPES {
        assert!(
            shortest_match(shape.pattern) <= shape.example.len(),
            "{}",
            shape.name
        );
        assert!(any_token_shape(shape.example), "{}", shape.name);
    }
}

#[test]
fn config_text_shows_no_secret() {
    let json = r#"+      "env": {"FIXTURE_TOKEN": "token-claude-code", "PATH_HINT": "/usr/bin"},
+      "args": ["--key", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
+      "url": "https://api.example.org/mcp?api_key=abc123&x=1",
"#;
    let shown = mask_in_config_text(json);
    for secret in [
        "token-claude-code",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "abc123",
    ] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
    for kept in [
        "FIXTURE_TOKEN",
        "tok****code",
        "/usr/bin",
        "https://api.example.org/mcp?****",
    ] {
        assert!(shown.contains(kept), "{kept} missing: {shown}");
    }
    let toml = "+FIXTURE_TOKEN = \"token-codex\"  # kept out of git\n API_KEY = 'literal-secret-value'\n name = \"report\"\n";
    let shown = mask_in_config_text(toml);
    assert!(
        !shown.contains("token-codex") && !shown.contains("literal-secret-value"),
        "{shown}"
    );
    assert!(
        shown.contains("name = \"report\"") && shown.contains("# kept out of git"),
        "{shown}"
    );

    // What a hostile review found still shown (2026-11-26).
    let cases = [
        (
            r#""args": ["-e", "MY_API_KEY=plain-value-one"]"#,
            "plain-value-one",
        ),
        (
            r#""args": ["--api-key=plain-value-two"]"#,
            "plain-value-two",
        ),
        (
            "\"args\": [\"--api-key\",\n+        \"plain-value-three\"]",
            "plain-value-three",
        ),
        (
            r#""DATABASE_URL": "postgresql://admin:hunter2pass@db/prod""#,
            "hunter2pass",
        ),
        (
            r#""args": ["postgresql://admin:hunter3pass@db/prod"]"#,
            "hunter3pass",
        ),
        (
            r#""url": "https://user:pw-secret-9@host/mcp""#,
            "pw-secret-9",
        ),
        (
            r#""headers": ["Authorization: Basic dXNlcjpwYXNzd29yZA=="]"#,
            "dXNlcjpwYXNzd29yZA==",
        ),
        ("'API_KEY' = \"quoted-key-secret\"", "quoted-key-secret"),
        (
            "API_KEY = \"\"\"\nmultiline-secret\n\"\"\"",
            "multiline-secret",
        ),
        (
            "# see: 'docs\nOPENAI_API_KEY = \"after-apostrophe\"",
            "after-apostrophe",
        ),
        (
            r#""API Key Header": "spaced-key-secret""#,
            "spaced-key-secret",
        ),
        // A header as one argument, and a key named for credentials (a review's leaks).
        (
            r#""args": ["--header", "X-Api-Key: plainsecretvalue99"]"#,
            "plainsecretvalue99",
        ),
        (
            r#""MY_CREDS": "opaque-credential-zzz""#,
            "opaque-credential-zzz",
        ),
    ];
    for (text, secret) in cases {
        let shown = mask_in_config_text(text);
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
    // Ordinary values stay as they are.
    let plain = r#""command": "npx", "args": ["-y", "@scope/server", "--port=8080"], "url": "https://example.org/mcp""#;
    assert_eq!(mask_in_config_text(plain), plain);
}
use crate::audit::Redactor;
use serde_json::json;

#[test]
fn the_one_pass_check_agrees_with_the_shapes_one_by_one() {
    let one_by_one = |text: &str| token_patterns().iter().any(|p| p.is_match(text));
    let mut texts = vec![
        "",
        "hello 7",
        "sk-",
        "a plain sentence with no secret in it",
        // The one case-insensitive shape stays in its own group: `SK-` is not `sk-`.
        "BEARER abcdefghijkl",
        "SK-ABCDEFGHIJKLMNOPQR",
        "xoxB-1234567890ab",
        "-----begin rsa private key-----",
    ];
    texts.extend(TOKEN_SHAPES.iter().map(|shape| shape.example));
    let embedded: Vec<String> = TOKEN_SHAPES
        .iter()
        .map(|shape| format!("use {} please", shape.example))
        .collect();
    texts.extend(embedded.iter().map(String::as_str));
    for text in texts {
        assert_eq!(any_token_shape(text), one_by_one(text), "{text}");
    }
    assert!(
        TOKEN_SHAPES
            .iter()
            .all(|shape| any_token_shape(shape.example))
    );
}

#[test]
fn a_command_line_keeps_no_credential() {
    let argv: Vec<String> = [
        "python3",
        "srv.py",
        "postgres://user:hunter2pass@localhost/db",
        "--api-key=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
        "--password",
        "plainpw123",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "say \"hi\"",
        "--port",
        "5432",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let masked = mask_argv(&argv);
    assert_eq!(masked.len(), argv.len());
    let text = masked.join(" ");
    for secret in [
        "hunter2pass",
        "abcdefghijklmnop",
        "plainpw123",
        "ghp_abcdefghij",
    ] {
        assert!(!text.contains(secret), "{text}");
    }
    assert_eq!(masked[0..2], argv[0..2]);
    assert_eq!(masked[2], "postgres://localhost/db");
    assert_eq!(masked[7..], argv[7..]);
}

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
fn a_config_rule_is_skipped_only_for_a_text_it_cannot_match() {
    let texts = [
        r#""GITHUB_TOKEN": "ghp_abc""#,
        "api_key = 'x'",
        "api_key:\"x\"",
        "secret = \"\"\"\nline\n\"\"\"",
        "password = '''x'''",
        "\"--api-key\",\n+ \"v\"",
        "\"--token\" , \"v\"",
        "MY_TOKEN=abc",
        "--api-key=abc",
        "Authorization: Bearer abcdefgh",
        // Whitespace other than ASCII's is `\s` too.
        "bearer\u{a0}abcdefgh",
        "token\u{2003}abcdefgh",
        "Basic\u{85}dXNlcjpwYXNz",
        "https://user:pass@host/p?q=1",
        "x://y",
        "server --api-key v1 --port 80",
        "envs:\n  GITHUB_TOKEN: ghp_x\n",
        "-t\tabc",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/home/user/projects",
        "plain words, with a comma",
    ];
    let rules = [
        ("PAIR", &PAIR_RULE),
        ("FLAG_THEN_VALUE", &FLAG_THEN_VALUE_RULE),
        ("ASSIGNED", &ASSIGNED_RULE),
        ("AUTH_SCHEME", &AUTH_SCHEME_RULE),
        ("URL", &URL_RULE),
        ("FLAG_SPACE_VALUE", &FLAG_SPACE_VALUE_RULE),
        ("YAML_PAIR", &YAML_PAIR_RULE),
    ];
    let mut matched = std::collections::BTreeSet::new();
    for (name, rule) in rules {
        let regex = rule.compiled.as_ref().unwrap();
        for text in texts {
            if regex.is_match(text) {
                matched.insert(name);
                assert!((rule.could_match)(text), "{name} matches {text:?}");
            }
        }
    }
    assert_eq!(
        matched.len(),
        rules.len(),
        "every rule meets a text it matches"
    );
    // A command line's usual words can match none of them: nothing is compiled for them.
    for text in [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/home/user/projects",
    ] {
        assert!(
            rules.iter().all(|(_, rule)| !(rule.could_match)(text)),
            "{text}"
        );
    }
}

#[test]
fn every_pattern_compiles_and_matches_its_example() {
    for shape in TOKEN_SHAPES {
        let regex = Regex::new(shape.pattern).unwrap();
        assert!(regex.is_match(shape.example), "{}", shape.name);
        assert!(shape.example.starts_with(shape.prefix), "{}", shape.name);
    }
    let distinct: std::collections::BTreeSet<&str> =
        TOKEN_SHAPES.iter().map(|s| s.pattern).collect();
    assert_eq!(token_patterns().len(), distinct.len());
}

#[test]
fn keys_are_secret_by_fragment_or_whole_word() {
    for key in [
        "GITHUB_TOKEN",
        "Authorization",
        "openai_api_key",
        "apiKey",
        "X-Auth",
        "OPENAI_KEY",
        "pwd",
        "SESSION",
        "clientSecret",
        "db.password",
        // KELVIN SIGN lowercases to `k`: a word is compared by its Unicode lowercase.
        "\u{212A}ey",
        // Past the folding buffer, and not ASCII: folded on the heap, same answer.
        "a_very_long_configuration_key_name_that_goes_on_and_on_and_on_Api_Key",
        "\u{00DC}ber-Pass.Word",
        // An acronym, then a secret word.
        "AWSKey",
        "DBPass",
        "SSHKey",
        "HTTPAuth",
        "MySQLPwd",
    ] {
        assert!(key_looks_secret(key), "{key}");
    }
    let long = "a_very_long_configuration_setting_name_that_goes_on_and_on_and_on_author";
    assert!(long.len() > 64 && !key_looks_secret(long));
    for key in [
        "LOG_LEVEL",
        "author",
        "keyboard",
        "monkey",
        "passenger",
        "path",
        "URLKeyboard",
        "APIVersion",
    ] {
        assert!(!key_looks_secret(key), "{key}");
    }
    assert!(value_looks_secret("ghp_abcdef"));
    assert!(!value_looks_secret("info"));
}

/// Config values under each secret key, and holding each token shape, are masked in human
/// output; the same keys and shapes are redacted from audited arguments.
fn config_value(key: &str, value: &str) -> crate::config::ConfigValue {
    let text = format!("[servers.s]\ncommand = \"npx\"\nenv = {{ {key:?} = {value:?} }}\n");
    let config = crate::config::parse(std::path::Path::new("airlock.toml"), text, &|_| None)
        .unwrap_or_else(|err| panic!("{key}: {err}"));
    config.servers[0].env[key].clone()
}

#[test]
fn every_token_shape_is_masked_in_config_and_redacted_in_audit() {
    let redactor = Redactor::new([]).unwrap();
    for shape in TOKEN_SHAPES {
        let value = config_value("PLAIN", shape.example);
        assert!(value.secret, "config does not mask {}", shape.name);
        assert!(
            !value.display().contains(&shape.example[4..]),
            "{}",
            shape.name
        );
        let args = json!({"text": format!("use {} now", shape.example)});
        let logged = redactor.redact(&args).to_string();
        assert!(
            !logged.contains(shape.example),
            "audit does not redact {}: {logged}",
            shape.name
        );
        assert!(logged.contains("[REDACTED]"), "{}", shape.name);
    }
}

#[test]
fn every_secret_key_is_masked_in_config_and_redacted_in_audit() {
    let redactor = Redactor::new([]).unwrap();
    let keys = SECRET_KEY_FRAGMENTS
        .iter()
        .map(|fragment| format!("my_{fragment}"))
        .chain(SECRET_KEY_WORDS.iter().map(|word| format!("my_{word}")));
    for key in keys {
        let value = config_value(&key, "plain-value-123");
        assert!(value.secret, "config does not mask {key}");
        let logged = redactor.redact(&json!({ key.clone(): "plain-value-123" }));
        assert_eq!(logged[&key], "[REDACTED]", "audit does not redact {key}");
    }
}
