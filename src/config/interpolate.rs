//! `${env:NAME}` and `${NAME}` interpolation, as MCP hosts do it.
//!
//! Unset names expand to the empty string with a warning (shell semantics, what users of other
//! hosts expect); with `strict_env = true` they are an error. `$${` writes a literal `${`.

/// The result of expanding one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub value: String,
    /// Names that were referenced but unset.
    pub unset: Vec<String>,
    /// True when any part of the value came from the environment.
    pub interpolated: bool,
}

/// Why a template cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpolateError {
    #[error("unterminated `${{` at byte {0}")]
    Unterminated(usize),
    #[error("`${{{0}}}` is not a valid variable reference")]
    BadName(String),
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// Expands `template`, looking names up with `lookup`.
pub fn expand(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded, InterpolateError> {
    let mut value = String::with_capacity(template.len());
    let mut unset = Vec::new();
    let mut interpolated = false;
    let mut rest = template;
    let mut consumed = 0;
    while let Some(start) = rest.find('$') {
        value.push_str(&rest[..start]);
        let after = &rest[start..];
        if let Some(tail) = after.strip_prefix("$${") {
            value.push_str("${");
            consumed += start + 3;
            rest = tail;
            continue;
        }
        let Some(body) = after.strip_prefix("${") else {
            value.push('$');
            consumed += start + 1;
            rest = &after[1..];
            continue;
        };
        let end = body
            .find('}')
            .ok_or(InterpolateError::Unterminated(consumed + start))?;
        let reference = &body[..end];
        let name = reference.strip_prefix("env:").unwrap_or(reference);
        if !valid_name(name) {
            return Err(InterpolateError::BadName(reference.to_string()));
        }
        interpolated = true;
        match lookup(name) {
            Some(found) => value.push_str(&found),
            None => unset.push(name.to_string()),
        }
        consumed += start + 2 + end + 1;
        rest = &body[end + 1..];
    }
    value.push_str(rest);
    Ok(Expanded {
        value,
        unset,
        interpolated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
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
        assert_eq!(
            expand("${HOME}/notes", &env).unwrap().value,
            "/home/me/notes"
        );
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
    }

    #[test]
    fn malformed_references_are_errors() {
        assert_eq!(
            expand("x${HOME", &env),
            Err(InterpolateError::Unterminated(1))
        );
        assert!(matches!(
            expand("${env:}", &env),
            Err(InterpolateError::BadName(_))
        ));
        assert!(matches!(
            expand("${a b}", &env),
            Err(InterpolateError::BadName(_))
        ));
    }
}
