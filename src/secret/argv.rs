//! A server's command line as the audit log may keep it. Host entries carry credentials in
//! `args` in every shape a program takes them: `--api-key VALUE`, `--password=VALUE`,
//! `-p VALUE`, `-u user:pass`, a header (`"X-Api-Key: VALUE"`), a JSON blob
//! (`--config '{"apiKey": ...}'`, how registry launchers pass keys), a URL with user info or a
//! token in its path. Each argument is read as the shape it has; what is left goes through the
//! same masking as a host's config text ([`super::mask_in_config_text`]). Pure.

use serde_json::Value;

use super::{key_looks_secret, mask, value_looks_secret};

/// What the argument after a flag is, as far as masking goes.
#[derive(Clone, Copy)]
enum Next {
    /// Not a flag's value, or one that says nothing secret.
    Plain,
    /// The value of a secret-looking flag (`--token`, `--api-key`).
    Secret,
    /// `-p`'s value: a password (mysql, psql style) unless it is a port's digits.
    PasswordOrPort,
    /// `-u`'s value: `user:password` (curl style) when it has a colon.
    UserAndPassword,
}

/// `argv` with every credential masked; the program and the shape of each argument stay.
pub fn mask_argv(argv: &[String]) -> Vec<String> {
    let mut next = Next::Plain;
    argv.iter()
        .map(|arg| {
            // A flag's value is never a long flag: `mysql -p --api-key X` (a bare `-p` asks for
            // the password) has X as `--api-key`'s value, not `--api-key` as `-p`'s.
            if arg
                .strip_prefix("--")
                .is_some_and(|name| !name.is_empty() && looks_like_flag(name))
            {
                next = Next::Plain;
            }
            let masked = match next {
                Next::Secret => Some(mask(arg)),
                Next::PasswordOrPort if !arg.bytes().all(|b| b.is_ascii_digit()) => Some(mask(arg)),
                Next::UserAndPassword => Some(user_and_password(arg)),
                _ => None,
            };
            next = Next::Plain;
            masked.unwrap_or_else(|| mask_one(arg, &mut next))
        })
        .collect()
}

/// One argument that is not a flag's value; sets `next` when it is a flag whose value follows.
fn mask_one(arg: &str, next: &mut Next) -> String {
    // A flag is a word: `-----BEGIN ... PRIVATE KEY-----` and the like are text.
    if let Some(body) = arg.strip_prefix('-').filter(|body| looks_like_flag(body)) {
        let name = body.trim_start_matches('-');
        let dashes = &arg[..arg.len() - name.len()];
        // curl's `-uname:password`, attached (not a one-dash long flag: `-url=https://...`).
        let attached = name.strip_prefix('u').filter(|value| {
            dashes == "-"
                && value.split_once(':').is_some_and(|(user, _)| {
                    !user.is_empty()
                        && user
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
                })
        });
        if let Some(attached) = attached {
            return format!("-u{}", user_and_password(attached));
        }
        if let Some(at) = name.find(['=', ':']) {
            let (flag, value) = (&name[..at], &name[at + 1..]);
            let separator = &name[at..=at];
            if key_looks_secret(flag) && !value.is_empty() {
                return format!("{dashes}{flag}{separator}{}", mask(value));
            }
            if is_user_flag(dashes, flag) {
                return format!("{dashes}{flag}{separator}{}", user_and_password(value));
            }
            // The value as an argument of its own (`--header=X-Api-Key: ...`, `--config={...}`).
            if !value.is_empty() {
                let shown = mask_one(value, &mut Next::Plain);
                return format!("{dashes}{flag}{separator}{shown}");
            }
        } else if key_looks_secret(name) {
            *next = Next::Secret;
            return arg.to_string();
        } else if dashes == "-" && name == "p" {
            *next = Next::PasswordOrPort;
            return arg.to_string();
        } else if is_user_flag(dashes, name) {
            *next = Next::UserAndPassword;
            return arg.to_string();
        }
    }
    if arg.trim_start().starts_with(['{', '['])
        && let Ok(mut value) = serde_json::from_str::<Value>(arg)
    {
        mask_json(&mut value);
        return value.to_string();
    }
    // A header or a `Name: value` pair under a secret-looking name.
    if let Some((name, value)) = arg.split_once(':')
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && key_looks_secret(name)
        && !value.trim().is_empty()
    {
        return format!("{name}: {}", mask(value.trim()));
    }
    // User info first: the config masking would read a `#` or `/` in a password as the URL's
    // fragment or path and keep what comes before it.
    mask_url_tokens(&super::mask_in_config_text(&without_url_user_info(arg)))
}

/// Masks, in place, every value under a secret-looking key and every value that looks like a
/// token, at any depth.
fn mask_json(value: &mut Value) {
    match value {
        Value::Object(map) => {
            // `{"name": "API_KEY", "value": ...}`: an environment entry, a header.
            let named_secret = map
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(key_looks_secret);
            for (key, item) in map.iter_mut() {
                if key_looks_secret(key) || (named_secret && key == "value") {
                    mask_every_value(item);
                } else {
                    mask_json(item);
                }
            }
        }
        // `["X-Api-Key", ...]`: a header as a pair.
        Value::Array(items)
            if items.len() == 2 && items[0].as_str().is_some_and(key_looks_secret) =>
        {
            mask_every_value(&mut items[1]);
        }
        Value::Array(items) => items.iter_mut().for_each(mask_json),
        Value::String(text) => *text = super::mask_in_config_text(text),
        _ => {}
    }
}

/// The flags whose value is `user:password` (curl's `-u`/`--user`, `-U`/`--proxy-user`; docker's
/// `--user` takes `uid:gid`, which [`user_and_password`] leaves as it is).
fn is_user_flag(dashes: &str, name: &str) -> bool {
    (dashes == "-" && matches!(name, "u" | "U")) || matches!(name, "user" | "proxy-user")
}

/// `user:password` with the password masked; `uid:gid` (all digits) and a value with no colon
/// as they are.
fn user_and_password(value: &str) -> String {
    match value.split_once(':') {
        Some((user, password)) if !password.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{user}:{}", mask(password))
        }
        _ => value.to_string(),
    }
}

/// Masks, in place, every string and number in `value`, at any depth: what sits under a
/// secret-looking key (`{"token": {"value": ...}}`, `{"apiKey": [...]}`) is secret whatever its
/// shape.
fn mask_every_value(value: &mut Value) {
    match value {
        Value::String(text) => *text = mask(text),
        Value::Number(_) => *value = Value::from("****"),
        Value::Array(items) => items.iter_mut().for_each(mask_every_value),
        Value::Object(map) => map.values_mut().for_each(mask_every_value),
        Value::Bool(_) | Value::Null => {}
    }
}

/// Whether the text after an argument's first `-` reads as a flag's name: more dashes, then a
/// word (with `=` or `:` and a value after it, as `--name=value`).
fn looks_like_flag(body: &str) -> bool {
    let name = body.trim_start_matches('-');
    let word = name.split(['=', ':']).next().unwrap_or_default();
    !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `text` without the user info of the URL in it, if any (even a password with `/` or `#`).
fn without_url_user_info(text: &str) -> String {
    match text.find("://") {
        Some(scheme_end) => {
            let (head, rest) = text.split_at(scheme_end + 3);
            format!("{head}{}", without_user_info(rest))
        }
        None => text.to_string(),
    }
}

/// Every path segment of the URL in `text` that looks like a token (`bot123456:AAH...`, a
/// webhook's key) masked.
fn mask_url_tokens(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else {
        return text.to_string();
    };
    let (head, rest) = text.split_at(scheme_end + 3);
    let end = rest.find(['?', '#', ' ']).unwrap_or(rest.len());
    let (path, tail) = rest.split_at(end);
    let masked: Vec<String> = path
        .split('/')
        .map(|segment| {
            if looks_like_token(segment) {
                mask(segment)
            } else {
                segment.to_string()
            }
        })
        .collect();
    format!("{head}{}{tail}", masked.join("/"))
}

/// `rest` (what follows `scheme://`) without the user info before its host: everything up to the
/// last `@` when what comes before it has a `:` that is not a port's (`host:8080/...`).
fn without_user_info(rest: &str) -> &str {
    let Some(at) = rest.rfind('@') else {
        return rest;
    };
    let before = &rest[..at];
    if before.contains(char::is_whitespace) {
        return rest;
    }
    let is_host_and_port = before.split_once(':').is_some_and(|(host, after)| {
        !host.contains('/')
            && after
                .split('/')
                .next()
                .is_some_and(|port| port.bytes().all(|b| b.is_ascii_digit()))
            && after.contains('/')
    });
    if before.contains(':') && !is_host_and_port {
        &rest[at + 1..]
    } else {
        rest
    }
}

/// A path segment of 20 or more token characters with letters and digits both, or one a token
/// shape matches.
fn looks_like_token(segment: &str) -> bool {
    let tokenish = segment.len() >= 20
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'))
        && segment.bytes().any(|b| b.is_ascii_digit())
        && segment.bytes().any(|b| b.is_ascii_alphabetic());
    tokenish || value_looks_secret(segment)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_flag_is_never_the_value_of_the_flag_before_it() {
        let shown = masked(&["mysql", "-p", "--api-key", "LongFlagS3cretValue"]);
        assert_eq!(shown[2], "--api-key");
        assert!(!shown[3].contains("FlagS3cret"), "{shown:?}");
        assert_eq!(
            masked(&["--token", "--verbose", "x"]),
            ["--token", "--verbose", "x"]
        );
        // A password may start with one dash.
        assert!(!masked(&["--password", "-dashS3cretPw"])[1].contains("dashS3cret"));
    }

    #[test]
    fn plain_yaml_stays_and_a_masked_yaml_value_keeps_its_line_ending() {
        assert_eq!(
            masked(&["--config", "db:\n  user: me\n  port: 5432"]),
            ["--config", "db:\n  user: me\n  port: 5432"]
        );
        let shown = masked(&["--config", "name: x\r\npassword: CrlfS3cretPw\r\nuser: me"]);
        assert!(shown[1].ends_with("\r\nuser: me"), "{shown:?}");
        assert!(!shown[1].contains("****\r\r"), "{shown:?}");
    }

    fn masked(args: &[&str]) -> Vec<String> {
        let argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        mask_argv(&argv)
    }

    #[test]
    fn every_shape_a_credential_takes_is_masked() {
        let cases: [(&[&str], &str); 36] = [
            (
                &["--config", "name: x\npassword: Xy7#kLmNoPqRsTuV # note"],
                "kLmNoPqRsTuV",
            ),
            (
                &["--config", "name: x\r\npassword: CrlfS3cretPw\r\n"],
                "CrlfS3cretPw",
            ),
            (
                &["-c", "server --api-key \\\n  ContinuedS3cret"],
                "ContinuedS3cret",
            ),
            (
                &["--config", "db:\n  password: YamlS3cretPw\n  user: me"],
                "YamlS3cretPw",
            ),
            (
                &["--config", "- API_TOKEN: ListS3cret # note"],
                "ListS3cret",
            ),
            (&["--api-key", "abcdefghijklmnop1234"], "abcdefghijklmnop"),
            (&["--password=hunter2pass"], "hunter2pass"),
            (&["--password:colonPw123"], "colonPw123"),
            (&["-p", "S3cr3tPw1"], "S3cr3tPw1"),
            (&["-u", "admin:adminPw9"], "adminPw9"),
            (
                &["--header", "X-Api-Key: a1b2c3d4e5f6a7b8"],
                "a1b2c3d4e5f6a7b8",
            ),
            (
                &[
                    "--config",
                    r#"{"apiKey":"jsonS3cretValue","password":"jsonPw2"}"#,
                ],
                "jsonS3cret",
            ),
            (
                &[
                    "--config",
                    r#"{"apiKey":"jsonS3cretValue","password":"jsonPw2"}"#,
                ],
                "jsonPw2",
            ),
            (&["postgres://u:pa/ssW0rd@db.internal/x"], "ssW0rd"),
            (&["mongodb://u:p%40ss#frag@h/db"], "p%40ss"),
            (
                &["https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe"],
                "AAHdqTcvCH1vGWJxfSe",
            ),
            (
                &["https://hooks.slack.com/services/T0001/B0001/Xa9b8c7d6e5f4g3h2i1j0k1l"],
                "Xa9b8c7d6e5f4g3h2i1j0k1l",
            ),
            (&["MY_TOKEN=abcdef123456"], "abcdef123456"),
            (
                &["Authorization=Bearer abcdefgh12345XYZ"],
                "abcdefgh12345XYZ",
            ),
            (
                &["-c", "server --api-key SpaceS3cret1 --port 80"],
                "SpaceS3cret1",
            ),
            (
                &[
                    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2\n-----END RSA PRIVATE KEY-----",
                ],
                "MIIEpAIBAAKCAQEA3Tz2",
            ),
            (&["--user", "admin:CurlS3cretPw1"], "CurlS3cretPw1"),
            (
                &["-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0pgpKeyBody\n"],
                "lQOYBF0pgpKeyBody",
            ),
            (&["--pw", "pwS3cretValue1"], "pwS3cretValue1"),
            (
                &["--config", r#"{"apiKey":["arrayS3cret"]}"#],
                "arrayS3cret",
            ),
            (
                &["--config", r#"{"token":{"value":"nestedS3cret"}}"#],
                "nestedS3cret",
            ),
            (&["--user=admin:EqS3cretPassword1"], "EqS3cretPassword1"),
            (&["-uadmin:AttachedS3cret1"], "AttachedS3cret1"),
            (&["--proxy-user", "admin:ProxyS3cret1"], "ProxyS3cret1"),
            (
                &["-c", "server --api-key 'S3cretQuoted123'"],
                "S3cretQuoted123",
            ),
            (
                &["-c", "server --api-key \"S3cretDouble123\""],
                "S3cretDouble123",
            ),
            (
                &[
                    "--config",
                    r#"{"env":[{"name":"API_KEY","value":"EnvS3cretValue"}]}"#,
                ],
                "EnvS3cretValue",
            ),
            (
                &[
                    "--config",
                    r#"{"headers":[["X-Api-Key","PairS3cretValue"]]}"#,
                ],
                "PairS3cretValue",
            ),
            (&["--header=X-Api-Key: HeaderEqS3cret1"], "HeaderEqS3cret1"),
            (
                &["Server=x;Password=S3cretNoSpace1;Database=y"],
                "S3cretNoSpace1",
            ),
            (
                &["--token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
                "ghp_abcdefghij",
            ),
        ];
        for (args, secret) in cases {
            let shown = masked(args).join(" ");
            assert!(!shown.contains(secret), "{args:?} -> {shown}");
        }
    }

    #[test]
    fn what_is_not_a_credential_stays_as_it_is() {
        let plain = [
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/home/me/projects",
            "-p",
            "8080",
            "--port=5432",
            "https://registry.npmjs.org/@scope/pkg",
            "http://localhost:8080/mcp",
            "postgres://db.internal:5432/app",
            r#"{"root":"/data","depth":2}"#,
            "--user",
            "alice",
            "-c",
            "server --port 80 --verbose",
            "--user",
            "1000:1000",
            "--user=1000:1000",
            "-url=https://api.example.com/v1",
            "--header=Accept: text/plain",
            r#"{"env":[{"name":"LOG_LEVEL","value":"debug"}]}"#,
        ];
        assert_eq!(masked(&plain), plain.map(String::from).to_vec());
        // A key's header quoted without its body is masked, and the rest of the text stays.
        let script = "grep -- '-----BEGIN RSA PRIVATE KEY-----' /etc/ssl; exec server --port 80 /d";
        let shown = masked(&["-c", script]).join(" ");
        assert!(
            shown.ends_with("' /etc/ssl; exec server --port 80 /d"),
            "{shown}"
        );
    }
}
