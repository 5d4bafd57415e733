//! Templates: `${env:NAME}`, `${NAME}`, `${env:NAME|fallback}`, `$${` and a leading `~`.
//!
//! One grammar for every template airlock reads: config values (`args`, `env`, `headers`, ...),
//! policy paths (grants, `audit.path`) and runtime profiles (`${private_home}`). What a name means
//! is the caller's: [`Var::Env`] is `${env:NAME}`, [`Var::Plain`] is `${NAME}` (config files take
//! both from the environment; profiles give `${private_home}` its own meaning). What an unset
//! name means is the caller's too: the expansion reports it in [`Expanded::unset`] and puts `""`
//! in its place (or the fallback after `|`), and the caller decides whether that is an error.

use std::path::{Path, PathBuf};

/// One reference in a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var<'a> {
    /// `${env:NAME}`
    Env(&'a str),
    /// `${NAME}`
    Plain(&'a str),
}

impl Var<'_> {
    pub fn name(&self) -> &str {
        match self {
            Var::Env(name) | Var::Plain(name) => name,
        }
    }
}

/// The result of expanding one template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub value: String,
    /// Names that were referenced, unset, and had no fallback (`HOME` for a `~` without a home).
    pub unset: Vec<String>,
    /// True when the template referenced a variable that may hold a secret: any but the
    /// well-known locations ([`NOT_SECRET`]), whose values are paths and names everyone may
    /// see. Config treats such values as secrets (masked in `airlock check`).
    pub interpolated: bool,
}

/// Variables that name where things are and who the user is, never a credential: a value built
/// from them is not masked (`${HOME}/mcp-memory` is shown as the path it is).
pub const NOT_SECRET: [&str; 12] = [
    "HOME",
    "USER",
    "LOGNAME",
    "PWD",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "LANG",
    "TZ",
];

/// Why a template cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unterminated `${{` at byte {0}")]
    Unterminated(usize),
    #[error("`${{{0}}}` is not a valid variable reference")]
    BadName(String),
}

/// What follows a leading `~` that means the home directory: `""` for `~`, `"/x"` for `~/x`;
/// `None` for anything else (`~user`, another user's home, included).
pub fn after_tilde(text: &str) -> Option<&str> {
    (text == "~" || text.starts_with("~/")).then(|| &text[1..])
}

/// `~` and `~/x` with `home`, as a shell expands them: `home`, then the rest verbatim (`~//x` is
/// `home//x`, never `/x`). `None` for anything else (`~user` included) and without a home.
pub fn expand_tilde(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    let rest = after_tilde(text)?;
    let mut path = home?.as_os_str().to_owned();
    path.push(rest);
    Some(PathBuf::from(path))
}

/// Expands the `${…}` references of `template`; a `~` stays as it is.
pub fn expand(
    template: &str,
    lookup: &dyn Fn(Var<'_>) -> Option<String>,
) -> Result<Expanded, TemplateError> {
    Expander { lookup, home: None }.run(template)
}

/// Expands a path template: a leading `~` (alone or before `/`) is `home`, also at the start of
/// a fallback; then the `${…}` references as [`expand`] does. A `~` without a home leaves `""`
/// and reports `HOME` as unset.
pub fn expand_path(
    template: &str,
    home: Option<&Path>,
    lookup: &dyn Fn(Var<'_>) -> Option<String>,
) -> Result<Expanded, TemplateError> {
    Expander {
        lookup,
        home: Some(home),
    }
    .run(template)
}

struct Expander<'a> {
    lookup: &'a dyn Fn(Var<'_>) -> Option<String>,
    /// `None`: `~` is literal; `Some(home)`: a leading `~` expands (to nothing when `home` is
    /// `None`, which is reported).
    home: Option<Option<&'a Path>>,
}

impl Expander<'_> {
    fn run(&self, template: &str) -> Result<Expanded, TemplateError> {
        let mut out = Expanded {
            value: String::with_capacity(template.len()),
            unset: Vec::new(),
            interpolated: false,
        };
        self.expand_into(template, 0, &mut out)?;
        Ok(out)
    }

    /// Appends the expansion of `template` (found at byte `base` of the outermost template).
    fn expand_into(
        &self,
        template: &str,
        base: usize,
        out: &mut Expanded,
    ) -> Result<(), TemplateError> {
        let mut rest = template;
        let mut consumed = base;
        if let Some(home) = self.home
            && after_tilde(rest).is_some()
        {
            match home {
                Some(home) => out.value.push_str(&home.to_string_lossy()),
                None => out.unset.push("HOME".to_string()),
            }
            rest = &rest[1..];
            consumed += 1;
        }
        while let Some(start) = rest.find('$') {
            out.value.push_str(&rest[..start]);
            let at = consumed + start;
            let after = &rest[start..];
            if let Some(tail) = after.strip_prefix("$${") {
                out.value.push_str("${");
                consumed = at + 3;
                rest = tail;
                continue;
            }
            let Some(body) = after.strip_prefix("${") else {
                out.value.push('$');
                consumed = at + 1;
                rest = &after[1..];
                continue;
            };
            let end = matching_brace(body).ok_or(TemplateError::Unterminated(at))?;
            self.reference(&body[..end], at + 2, out)?;
            consumed = at + 2 + end + 1;
            rest = &body[end + 1..];
        }
        out.value.push_str(rest);
        Ok(())
    }

    /// One `${reference}`: `env:NAME` or `NAME`, then an optional `|fallback`.
    fn reference(&self, text: &str, at: usize, out: &mut Expanded) -> Result<(), TemplateError> {
        let (reference, fallback) = match text.split_once('|') {
            Some((reference, fallback)) => (reference, Some(fallback)),
            None => (text, None),
        };
        let var = match reference.strip_prefix("env:") {
            Some(name) => Var::Env(name),
            None => Var::Plain(reference),
        };
        if !valid_name(var.name()) {
            return Err(TemplateError::BadName(text.to_string()));
        }
        if !NOT_SECRET.contains(&var.name()) {
            out.interpolated = true;
        }
        match ((self.lookup)(var), fallback) {
            (Some(value), _) => out.value.push_str(&value),
            (None, Some(fallback)) => {
                self.expand_into(fallback, at + reference.len() + 1, out)?;
            }
            (None, None) => out.unset.push(var.name().to_string()),
        }
        Ok(())
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// The index of the `}` closing a reference whose body starts `text` (nested `${…}` in a
/// fallback are skipped whole).
fn matching_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (index, ch) in text.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(index),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn env(var: Var<'_>) -> Option<String> {
        match var.name() {
            "TOKEN" => Some("sk-abc".into()),
            "HOME" => Some("/home/me".into()),
            _ => None,
        }
    }

    #[test]
    fn both_spellings_expand() {
        let out = expand("Bearer ${env:TOKEN}", &env).unwrap();
        assert_eq!(out.value, "Bearer sk-abc");
        assert!(out.interpolated);
        let home = expand("${HOME}/notes", &env).unwrap();
        assert_eq!(home.value, "/home/me/notes");
        assert!(!home.interpolated, "a path under HOME is no secret");
    }

    #[test]
    fn unset_names_expand_empty_and_are_reported() {
        let out = expand("a${env:NOPE}b", &env).unwrap();
        assert_eq!(out.value, "ab");
        assert_eq!(out.unset, vec!["NOPE".to_string()]);
    }

    #[test]
    fn literals_and_escapes_survive() {
        let out = expand("cost $5 and $${HOME}", &env).unwrap();
        assert_eq!(out.value, "cost $5 and ${HOME}");
        assert!(!out.interpolated);
        assert_eq!(expand("~/x", &env).unwrap().value, "~/x");
    }

    #[test]
    fn malformed_references_are_errors() {
        assert_eq!(expand("x${HOME", &env), Err(TemplateError::Unterminated(1)));
        assert_eq!(
            expand("$${a}${HOME", &env),
            Err(TemplateError::Unterminated(5))
        );
        assert!(matches!(
            expand("${env:}", &env),
            Err(TemplateError::BadName(_))
        ));
        assert!(matches!(
            expand("${a b}", &env),
            Err(TemplateError::BadName(_))
        ));
    }

    #[test]
    fn fallbacks_apply_only_when_unset_and_may_nest() {
        assert_eq!(
            expand("${env:NOPE|x}/${env:TOKEN|y}", &env).unwrap().value,
            "x/sk-abc"
        );
        let nested = expand("${env:NOPE|${env:NADA|z}}", &env).unwrap();
        assert_eq!(nested.value, "z");
        assert!(nested.unset.is_empty());
        let inner_unset = expand("${env:NOPE|${env:NADA}}", &env).unwrap();
        assert_eq!(inner_unset.unset, vec!["NADA".to_string()]);
    }

    #[test]
    fn path_templates_expand_a_leading_tilde_also_in_fallbacks() {
        let home = PathBuf::from("/home/me");
        let out = expand_path("${env:npm_cache|~/.npm}", Some(&home), &env).unwrap();
        assert_eq!(out.value, "/home/me/.npm");
        assert_eq!(
            expand_path("~", Some(&home), &env).unwrap().value,
            "/home/me"
        );
        assert_eq!(
            expand_path("a~/b", Some(&home), &env).unwrap().value,
            "a~/b"
        );
        assert_eq!(
            expand_path("~user/x", Some(&home), &env).unwrap().value,
            "~user/x"
        );
        let homeless = expand_path("~/x", None, &env).unwrap();
        assert_eq!(homeless.unset, vec!["HOME".to_string()]);
    }

    #[test]
    fn a_leading_tilde_is_the_home_as_a_shell_reads_it() {
        let home = Some(Path::new("/home/me"));
        let expanded = |text| expand_tilde(text, home);
        assert_eq!(expanded("~"), Some(PathBuf::from("/home/me")));
        assert_eq!(expanded("~/notes"), Some(PathBuf::from("/home/me/notes")));
        assert_eq!(expanded("~//etc"), Some(PathBuf::from("/home/me//etc")));
        assert_eq!(expanded("~root/x"), None);
        assert_eq!(expanded("/abs/~"), None);
        assert_eq!(expand_tilde("~/x", None), None);
        assert_eq!(after_tilde("~"), Some(""));
        assert_eq!(after_tilde("~/a"), Some("/a"));
        assert_eq!(after_tilde("~a"), None);
    }
}
