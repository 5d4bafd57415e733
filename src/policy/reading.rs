//! How a path argument is read: the way the server will read it, or not at all.
//!
//! A rule such as "deny `read_file` when `path` is under `/etc/`" is only as good as the gate's
//! reading of the value. The server resolves `../../etc/passwd` against its working directory,
//! `~/x` against its own `HOME`, `file://localhost/etc/passwd` and `%2Fetc%2Fpasswd` through a URL
//! decoder: so does the gate. A value can have several plausible readings (a server may or may not
//! percent-decode a plain path); the gate keeps every one, and the rules treat them fail-closed:
//! `deny`/`ask` conditions fire when ANY reading matches, `allow` conditions hold only when EVERY
//! reading does. A value with no absolute reading at all (a relative path with no known working
//! directory, `~user`, a `file:` URL naming another host) never satisfies an `allow` condition and
//! always triggers `deny`/`ask` conditions.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::paths::normalize_path;

/// What the gate knows about the server's own view of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathContext {
    /// The `HOME` the server sees (its private home in the sandbox).
    pub home: Option<PathBuf>,
    /// The server's working directory.
    pub cwd: Option<PathBuf>,
    /// Directories named on the server's own command line. Some servers resolve a relative path
    /// against the directories they were given rather than their working directory (the
    /// official filesystem server does), so a relative path is read against each of them too.
    pub bases: Vec<PathBuf>,
    /// The directory the server starts in instead of `cwd` when its root does not show `cwd`
    /// or its uid may not enter it (its private home): a relative path is read against it too, since only the start
    /// tells which of the two the server gets (a deny then fires on either).
    pub fallback_cwd: Option<PathBuf>,
    /// The real home of the user airlock runs for, as written and resolved (it may be a
    /// link): a rule's `prefix = "~/..."` means it, as a grant's `~` does (the server's own `~`
    /// is its private home, above). Empty: unknown, and such a rule fails closed.
    pub user_homes: Vec<PathBuf>,
}

/// One reading of a path argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reading {
    /// The absolute, lexically normalised path; `None` when this reading cannot be resolved.
    pub resolved: Option<String>,
    /// How the raw value became `resolved` (or why it could not), for `explain` and denials.
    pub how: String,
    /// Whether this reading met the rule's condition, once a rule has judged it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holds: Option<bool>,
}

/// Every way a server could read `raw` as a path, resolved against `context`.
pub fn read_path(raw: &str, context: &PathContext) -> Vec<Reading> {
    let mut readings: Vec<Reading> = Vec::new();
    for (value, cleaned) in cleaned_values(raw) {
        read_value(&value, cleaned, context, &mut readings);
    }
    readings
}

/// `raw`, and what servers make of it before they read it (`Some` says what was done): trimmed
/// of the spaces and control characters around it (Python's `strip()`, JavaScript's `trim()`),
/// and what a WHATWG URL parser reads (C0 controls and spaces trimmed, tabs and line breaks
/// taken out anywhere: Python's `urlsplit`, Node's `URL`), which makes `" fi\tle:///etc/x"` a
/// `file:` URL.
fn cleaned_values(raw: &str) -> Vec<(String, Option<&'static str>)> {
    // JavaScript's `trim()` also takes U+FEFF, which is no white space to Unicode.
    let trimmed = |value: &str| {
        value
            .trim_matches(|c: char| c.is_whitespace() || c.is_control() || c == '\u{feff}')
            .to_string()
    };
    let url_cleaned = |value: &str| {
        value
            .trim_matches(|c: char| c <= ' ')
            .chars()
            .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
            .collect::<String>()
    };
    fn add(values: &mut Vec<(String, Option<&'static str>)>, value: String, what: &'static str) {
        if !values.iter().any(|(seen, _)| *seen == value) {
            values.push((value, Some(what)));
        }
    }
    let mut values = vec![(raw.to_string(), None)];
    add(
        &mut values,
        trimmed(raw),
        "trimmed of the spaces and control characters around it",
    );
    add(
        &mut values,
        url_cleaned(raw),
        "as a URL parser cleans it (controls around it, tabs and line breaks in it taken out)",
    );
    let both = "trimmed, then cleaned as a URL parser cleans it";
    add(&mut values, url_cleaned(&trimmed(raw)), both);
    add(&mut values, trimmed(&url_cleaned(raw)), both);
    // A server that percent-decodes a value before anything else (`unquote(p).strip()`, then a
    // URL parser): `%20/etc/x` and `%66ile:///etc/x` are `/etc/x` to it.
    if has_escape(raw)
        && let Some(decoded) = decode(raw)
    {
        let first = "percent-decoded first, then trimmed";
        add(&mut values, trimmed(&decoded), first);
        add(&mut values, url_cleaned(&trimmed(&decoded)), first);
    }
    // A URL parser reads `\` in a `file:` URL as `/` (a special scheme's separator).
    let backslashed: Vec<String> = values
        .iter()
        .map(|(value, _)| value.clone())
        .filter(|value| value.contains('\\') && has_scheme(value, "file"))
        .collect();
    for value in backslashed {
        add(
            &mut values,
            value.replace('\\', "/"),
            "with `\\` read as `/`, as a URL parser reads a file: URL",
        );
    }
    values
}

/// The readings of one value (`raw` or a cleaned form of it, `cleaned` saying how), added to
/// `readings` unless one resolves to the same path already.
fn read_value(
    raw: &str,
    cleaned: Option<&str>,
    context: &PathContext,
    readings: &mut Vec<Reading>,
) {
    let mut push = |reading: Reading| {
        if !readings.iter().any(|r| r.resolved == reading.resolved) {
            readings.push(reading);
        }
    };
    let (path, kind) = if has_scheme(raw, "file") {
        match file_url_path(raw) {
            Ok(path) => (path, "file: URL"),
            Err(why) => {
                push(unresolved(&why.to_string()));
                return;
            }
        }
    } else {
        (raw, "as written")
    };
    let source = match cleaned {
        Some(what) => format!("{kind}, {what}"),
        None => kind.to_string(),
    };
    for (candidate, how) in spellings(path, &source) {
        let Some(candidate) = candidate else {
            push(unresolved("bytes that do not decode to a path"));
            continue;
        };
        let mut read_as = |reading: Reading| {
            let process_handle = reading
                .resolved
                .as_deref()
                .is_some_and(names_a_process_handle);
            push(reading);
            if process_handle {
                push(unresolved(
                    "a path through what a process has open (/proc/self, /dev/fd): the server's kernel reads it for the server",
                ));
            }
        };
        read_as(resolve(&candidate, context, &how));
        // Most servers never expand `~` (Python's `abspath`, Node's `path.resolve`): to them
        // `~/../secret` is `secret` in their working directory.
        if candidate.starts_with('~')
            && let Some(cwd) = &context.cwd
        {
            read_as(against_dir(
                &candidate,
                cwd,
                &how,
                "the server's working directory, with `~` a directory's name, as a server that does not expand it reads it",
            ));
        }
        if is_relative(&candidate) {
            if let Some(home) = &context.fallback_cwd {
                read_as(against_dir(
                    &candidate,
                    home,
                    &how,
                    "its private home, where it starts if it cannot use its working directory",
                ));
            }
            for base in &context.bases {
                read_as(against_dir(
                    &candidate,
                    base,
                    &how,
                    "a directory on the server's command line",
                ));
            }
        }
    }
}

/// Whether a reading names what a process has open (its `cwd`, `root`, `fd/N`, its own
/// `/proc` entry, `/dev/fd`, `/dev/stdin`): the server's kernel reads those for the server, which
/// the gate cannot, so such a reading fails closed.
pub fn names_a_process_handle(path: &str) -> bool {
    let path = Path::new(path);
    let mut components = path.components().skip(1);
    match (
        components.next().and_then(|c| c.as_os_str().to_str()),
        components.next().and_then(|c| c.as_os_str().to_str()),
    ) {
        (Some("proc"), Some(entry)) => {
            entry == "self" || entry == "thread-self" || entry.bytes().all(|b| b.is_ascii_digit())
        }
        (Some("dev"), Some(entry)) => matches!(entry, "fd" | "stdin" | "stdout" | "stderr"),
        _ => false,
    }
}

/// Relative to a directory, for a server that reads it so: `~/x` too, when `~` is not expanded.
fn is_relative(path: &str) -> bool {
    !Path::new(path).is_absolute()
}

/// A relative path read against another directory the server may read it from (`what` it is).
fn against_dir(path: &str, dir: &Path, how: &str, what: &str) -> Reading {
    Reading {
        resolved: Some(
            normalize_path(&dir.join(path))
                .to_string_lossy()
                .into_owned(),
        ),
        how: format!("{how}, relative to {} ({what})", dir.display()),
        holds: None,
    }
}

fn unresolved(why: &str) -> Reading {
    Reading {
        resolved: None,
        how: why.to_string(),
        holds: None,
    }
}

fn has_scheme(raw: &str, scheme: &str) -> bool {
    raw.len() > scheme.len()
        && raw.as_bytes()[scheme.len()] == b':'
        && raw[..scheme.len()].eq_ignore_ascii_case(scheme)
}

/// Why a `file:` URL names no path on this machine (what the reading shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NotLocalFile {
    #[error("a file: URL without an absolute path")]
    RelativePath,
    #[error("a file: URL without a path")]
    NoPath,
    #[error("a file: URL naming another host")]
    OtherHost,
}

/// The path part of a `file:` URL on this machine: `file:///p`, `file://localhost/p`, `file:/p`.
/// Anything else names another host or no absolute path, and cannot be read here.
fn file_url_path(raw: &str) -> Result<&str, NotLocalFile> {
    let rest = &raw["file:".len()..];
    let Some(authority_and_path) = rest.strip_prefix("//") else {
        return if rest.starts_with('/') {
            Ok(rest)
        } else {
            Err(NotLocalFile::RelativePath)
        };
    };
    let (host, path) = match authority_and_path.find('/') {
        Some(slash) => authority_and_path.split_at(slash),
        None => return Err(NotLocalFile::NoPath),
    };
    let host = decode(host).unwrap_or_default();
    if host.is_empty() || host.eq_ignore_ascii_case("localhost") {
        Ok(path)
    } else {
        Err(NotLocalFile::OtherHost)
    }
}

/// The local path a `file:` URL names, percent-decoded and normalised, as a server that takes
/// it as a root reads it; `None` for another scheme, another host or no absolute path.
pub fn file_url_to_path(raw: &str) -> Option<PathBuf> {
    if !has_scheme(raw, "file") {
        return None;
    }
    let path = file_url_path(raw).ok()?;
    let decoded = decode(path)?;
    Some(normalize_path(Path::new(&decoded)))
}

/// The spellings a server may make of `path`: as written; percent-decoded; and, for a URL, what a
/// WHATWG parser gives (dot segments removed before decoding, query and fragment dropped). `None`
/// where decoding does not give text.
fn spellings(path: &str, source: &str) -> Vec<(Option<String>, String)> {
    let url = source.starts_with("file: URL");
    let mut out = vec![(Some(path.to_string()), source.to_string())];
    // No path holds a NUL: a server in C (or any that passes the value to the kernel as a C
    // string) reads up to it, so `/secret/key\0/../../open` is `/secret/key` there.
    if let Some(nul) = path.find('\0') {
        out.push((
            Some(path[..nul].to_string()),
            format!("{source}, up to its NUL (as a C string)"),
        ));
    }
    if has_escape(path) {
        out.push((decode(path), format!("{source}, percent-decoded")));
        let segments_first = normalize_path(Path::new(path))
            .to_string_lossy()
            .into_owned();
        out.push((
            decode(&segments_first),
            format!("{source}, dot segments removed, then percent-decoded"),
        ));
    }
    if url && let Some(end) = path.find(['?', '#']) {
        out.push((decode(&path[..end]), format!("{source}, without query")));
    }
    out
}

fn has_escape(text: &str) -> bool {
    text.as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
}

/// Percent-decodes `text`; `None` when the bytes are not text or hold a NUL.
fn decode(text: &str) -> Option<String> {
    match percent_encoding::percent_decode_str(text).decode_utf8() {
        Ok(decoded) if !decoded.contains('\0') => Some(decoded.into_owned()),
        _ => None,
    }
}

/// One candidate path, made absolute the way the server would, then normalised.
fn resolve(path: &str, context: &PathContext, how: &str) -> Reading {
    let absolute = if crate::paths::after_tilde(path).is_some() {
        match crate::paths::expand_tilde(path, context.home.as_deref()) {
            Some(path) => path,
            None => return unresolved("`~` with no known server HOME"),
        }
    } else if path.starts_with('~') {
        return unresolved("`~user` (another user's home)");
    } else if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        match &context.cwd {
            Some(cwd) => cwd.join(path),
            None => return unresolved("a relative path with no known working directory"),
        }
    };
    let how = if path.starts_with('~') {
        format!("{how}, ~ = the server's HOME")
    } else if !Path::new(path).is_absolute() {
        format!("{how}, relative to the server's working directory")
    } else {
        how.to_string()
    };
    Reading {
        resolved: Some(normalize_path(&absolute).to_string_lossy().into_owned()),
        how,
        holds: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_handles_are_told_apart() {
        for handle in [
            "/proc/self/cwd/x",
            "/proc/thread-self/root",
            "/proc/42/fd/3",
            "/dev/fd/0",
            "/dev/stdin",
        ] {
            assert!(names_a_process_handle(handle), "{handle}");
        }
        for plain in ["/proc/cpuinfo", "/dev/null", "/srv/proc/self", "/"] {
            assert!(!names_a_process_handle(plain), "{plain}");
        }
    }

    fn context() -> PathContext {
        PathContext {
            home: Some(PathBuf::from("/state/servers/fs/home")),
            cwd: Some(PathBuf::from("/work/notes")),
            bases: Vec::new(),
            fallback_cwd: None,
            user_homes: vec![PathBuf::from("/home/me")],
        }
    }

    fn resolved(raw: &str) -> Vec<Option<String>> {
        read_path(raw, &context())
            .into_iter()
            .map(|r| r.resolved)
            .collect()
    }

    fn some(path: &str) -> Option<String> {
        Some(path.to_string())
    }

    #[test]
    fn a_relative_path_is_also_read_against_each_directory_on_the_command_line() {
        let context = PathContext {
            bases: vec![PathBuf::from("/srv/given")],
            ..context()
        };
        let readings: Vec<Option<String>> = read_path("secret/k", &context)
            .into_iter()
            .map(|r| r.resolved)
            .collect();
        assert_eq!(
            readings,
            vec![some("/work/notes/secret/k"), some("/srv/given/secret/k")]
        );
        // An absolute path has one base already; `~/x` is the server's HOME, or a directory
        // named `~` where the server reads relative paths.
        assert_eq!(read_path("/etc/x", &context).len(), 1);
        let readings: Vec<Option<String>> = read_path("~/x", &context)
            .into_iter()
            .map(|r| r.resolved)
            .collect();
        assert_eq!(
            readings,
            vec![
                some("/state/servers/fs/home/x"),
                some("/work/notes/~/x"),
                some("/srv/given/~/x")
            ]
        );
    }

    #[test]
    fn a_server_that_does_not_expand_tilde_is_read_too() {
        // Python's abspath and Node's path.resolve: `~` is a directory name, `..` takes it off.
        let readings = resolved("~/../secret/key");
        assert!(
            readings.contains(&some("/work/notes/secret/key")),
            "{readings:?}"
        );
        // Another user's home cannot be read here, and fails closed; as a name it is read too.
        let readings = resolved("~root/../secret/key");
        assert!(readings.contains(&None), "{readings:?}");
        assert!(
            readings.contains(&some("/work/notes/secret/key")),
            "{readings:?}"
        );
    }

    #[test]
    fn what_a_server_cleans_off_a_value_is_cleaned_off_here_too() {
        // A URL parser trims controls and spaces around a URL and takes out tabs and line
        // breaks anywhere in it; a server may trim a plain path.
        for raw in [
            " file:///etc/passwd",
            "\u{1}file:///etc/passwd",
            "fi\tle:///etc/passwd",
            "file:///etc/pa\nsswd",
            "file:///etc/pa\r\nss\twd\u{0}",
            "\u{feff}/etc/passwd",
            "\u{feff} file:///etc/passwd",
            "\u{a0}fi\tle:///etc/passwd",
            "file:///etc\\passwd",
            "file://localhost/tmp/x/..\\..\\etc\\passwd",
            "\tfile:\\\\\\etc\\passwd",
            "%20/etc/passwd",
            "%66ile:///etc/passwd",
            " /etc/passwd\u{a0}",
            "\t/etc/passwd\n",
        ] {
            let readings = resolved(raw);
            assert!(
                readings.contains(&some("/etc/passwd")),
                "{raw:?}: {readings:?}"
            );
        }
        let reading = read_path(" file:///etc/passwd", &context())
            .into_iter()
            .find(|r| r.resolved == some("/etc/passwd"))
            .unwrap();
        assert!(reading.how.contains("file: URL, trimmed"), "{reading:?}");
    }

    #[test]
    fn every_spelling_of_etc_passwd_reads_as_etc_passwd() {
        for raw in [
            "/etc/passwd",
            "../../../../../etc/passwd",
            "file:///etc/passwd",
            "file://localhost/etc/passwd",
            "FILE://LOCALHOST/etc/passwd",
            "/tmp/../etc/passwd",
        ] {
            assert_eq!(resolved(raw), vec![some("/etc/passwd")], "{raw}");
        }
        // ~ is the server's HOME, four levels deep here.
        assert_eq!(
            resolved("~/../../../../etc/passwd"),
            vec![some("/etc/passwd")]
        );
        // Percent-encoding: both the literal and the decoded reading are kept.
        assert_eq!(
            resolved("file:///etc%2Fpasswd"),
            vec![some("/etc%2Fpasswd"), some("/etc/passwd")]
        );
        assert_eq!(
            resolved("%2Fetc%2Fpasswd"),
            vec![some("/work/notes/%2Fetc%2Fpasswd"), some("/etc/passwd")]
        );
        // A URL parser removes dot segments before decoding; a hand-rolled server after.
        assert_eq!(
            resolved("file:///etc%2Fa%2Fx/../a"),
            vec![some("/a"), some("/etc/a/a")]
        );
        assert_eq!(
            resolved("file:///etc/passwd?x=1"),
            vec![some("/etc/passwd?x=1"), some("/etc/passwd")]
        );
        // A C string ends at its NUL.
        assert_eq!(
            resolved("/etc/passwd\u{0}/../../tmp/x"),
            vec![some("/tmp/x"), some("/etc/passwd")]
        );
    }

    #[test]
    fn what_cannot_be_resolved_says_why() {
        let unknown = PathContext::default();
        for (raw, why) in [
            ("notes/a", "no known working directory"),
            ("~/a", "no known server HOME"),
        ] {
            let readings = read_path(raw, &unknown);
            assert_eq!(readings.len(), 1);
            assert_eq!(readings[0].resolved, None);
            assert!(readings[0].how.contains(why), "{readings:?}");
        }
        for raw in [
            "~root/.ssh/id_rsa",
            "file://evil.example/etc/passwd",
            "%FF%FE",
        ] {
            assert!(
                read_path(raw, &context())
                    .iter()
                    .any(|r| r.resolved.is_none()),
                "{raw}"
            );
        }
    }
}
