//! Tool patterns: `mcp:<server>__<tool>` with `*` and `?`, `mcp:<server>` for a whole server, and
//! the Claude Code spelling `mcp__<server>__<tool>`.
//!
//! A pattern is split at its first `__` into a server glob and a tool glob. Server names can never
//! contain `__` (config validation forbids it), so the split is unambiguous even when tool names
//! contain `__` themselves.

use std::fmt;

/// Why a pattern string is not a valid tool pattern. The message is shown to users as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatternError(pub String);

/// A `*`/`?` glob over one name. `*` matches any run of characters (including none), `?` exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Glob {
    /// No wildcard: compared for equality (the fast, common case).
    Literal(String),
    /// At least one wildcard.
    Wildcard(Vec<GlobToken>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlobToken {
    Text(String),
    AnyOne,
    AnyRun,
}

impl Glob {
    pub fn parse(text: &str) -> Glob {
        if !text.contains(['*', '?']) {
            return Glob::Literal(text.to_string());
        }
        let mut tokens = Vec::new();
        let mut literal = String::new();
        for c in text.chars() {
            match c {
                '*' | '?' => {
                    if !literal.is_empty() {
                        tokens.push(GlobToken::Text(std::mem::take(&mut literal)));
                    }
                    if c == '?' {
                        tokens.push(GlobToken::AnyOne);
                    } else if tokens.last() != Some(&GlobToken::AnyRun) {
                        tokens.push(GlobToken::AnyRun);
                    }
                }
                _ => literal.push(c),
            }
        }
        if !literal.is_empty() {
            tokens.push(GlobToken::Text(literal));
        }
        Glob::Wildcard(tokens)
    }

    pub fn literal(&self) -> Option<&str> {
        match self {
            Glob::Literal(text) => Some(text),
            Glob::Wildcard(_) => None,
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        match self {
            Glob::Literal(text) => text == name,
            Glob::Wildcard(tokens) => wildcard_match(tokens, name),
        }
    }

    /// The glob with its text lowercased ([`fold_case`]): it matches folded names regardless
    /// of case.
    pub fn lowercased(&self) -> Glob {
        match self {
            Glob::Literal(text) => Glob::Literal(fold_case(text)),
            Glob::Wildcard(tokens) => Glob::Wildcard(
                tokens
                    .iter()
                    .map(|token| match token {
                        GlobToken::Text(text) => GlobToken::Text(fold_case(text)),
                        other => other.clone(),
                    })
                    .collect(),
            ),
        }
    }
}

/// `name` with each character lowercased where that gives one character (`İ` lowercases to
/// two, and stays): a name keeps its length in characters, so `?` still matches one.
pub fn fold_case(name: &str) -> String {
    name.chars()
        .map(|c| {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(one), None) => one,
                _ => c,
            }
        })
        .collect()
}

/// Iterative glob matching with a single backtrack point (the last `*`): linear in practice and
/// never exponential, so a hostile tool name cannot make a decision slow.
fn wildcard_match(tokens: &[GlobToken], name: &str) -> bool {
    let mut token_index = 0;
    let mut rest = name;
    let mut backtrack: Option<(usize, &str)> = None;
    loop {
        match tokens.get(token_index) {
            None if rest.is_empty() => return true,
            Some(GlobToken::AnyRun) => {
                backtrack = Some((token_index, rest));
                token_index += 1;
                continue;
            }
            Some(GlobToken::AnyOne) => {
                let mut chars = rest.chars();
                if chars.next().is_some() {
                    rest = chars.as_str();
                    token_index += 1;
                    continue;
                }
            }
            Some(GlobToken::Text(text)) => {
                if let Some(after) = rest.strip_prefix(text.as_str()) {
                    rest = after;
                    token_index += 1;
                    continue;
                }
            }
            None => {}
        }
        // Mismatch: let the last `*` swallow one more character and retry from just after it.
        match backtrack {
            Some((star_index, star_rest)) => {
                let mut chars = star_rest.chars();
                if chars.next().is_none() {
                    return false;
                }
                backtrack = Some((star_index, chars.as_str()));
                rest = chars.as_str();
                token_index = star_index + 1;
            }
            None => return false,
        }
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Glob::Literal(text) => f.write_str(text),
            Glob::Wildcard(tokens) => {
                for token in tokens {
                    match token {
                        GlobToken::Text(text) => f.write_str(text)?,
                        GlobToken::AnyOne => f.write_str("?")?,
                        GlobToken::AnyRun => f.write_str("*")?,
                    }
                }
                Ok(())
            }
        }
    }
}

/// A compiled tool pattern: which servers and which of their tools it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPattern {
    pub server: Glob,
    pub tool: Glob,
}

/// Characters allowed in the server and tool parts of a pattern (besides the wildcards).
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':')
}

impl ToolPattern {
    /// The pattern with its tool part folded, for matching folded tool names
    /// ([`Glob::lowercased`]). Server names are the config's own, compared as written.
    pub fn lowercased(&self) -> ToolPattern {
        ToolPattern {
            server: self.server.clone(),
            tool: self.tool.lowercased(),
        }
    }

    /// Parses `mcp:<server>[__<tool>]` or `mcp__<server>[__<tool>]`.
    pub fn parse(text: &str) -> Result<ToolPattern, PatternError> {
        let body = text
            .strip_prefix("mcp:")
            .or_else(|| text.strip_prefix("mcp__"))
            .ok_or_else(|| {
                PatternError(format!(
                    "tool pattern {text:?} must start with `mcp:` (for example `mcp:fs__read_file`, `mcp:fs` or `mcp:*`)"
                ))
            })?;
        if body.is_empty() {
            return Err(PatternError(format!(
                "tool pattern {text:?} names no server; write `mcp:<server>` or `mcp:*`"
            )));
        }
        if let Some(bad) = body
            .chars()
            .find(|&c| !(is_name_char(c) || c == '*' || c == '?'))
        {
            return Err(PatternError(format!(
                "tool pattern {text:?} contains {bad:?}; only letters, digits, `_ - . / :` and the wildcards `*` `?` are allowed"
            )));
        }
        let (server, tool) = match body.split_once("__") {
            Some((server, tool)) => (server, tool),
            None => (body, "*"),
        };
        if server.is_empty() || tool.is_empty() {
            return Err(PatternError(format!(
                "tool pattern {text:?} has an empty server or tool part around `__`"
            )));
        }
        Ok(ToolPattern {
            server: Glob::parse(server),
            tool: Glob::parse(tool),
        })
    }

    /// A pattern covering one server's tools, for per-server `tools` lists in the server config
    /// (where users write just the tool glob).
    pub fn for_server(server: &str, tool_glob: &str) -> Result<ToolPattern, PatternError> {
        if tool_glob.starts_with("mcp:") || tool_glob.starts_with("mcp__") {
            let pattern = ToolPattern::parse(tool_glob)?;
            if !pattern.server.matches(server) || pattern.server.literal() != Some(server) {
                return Err(PatternError(format!(
                    "pattern {tool_glob:?} in server {server:?} must name that server (write `mcp:{server}__...` or just the tool name)"
                )));
            }
            return Ok(pattern);
        }
        if tool_glob.is_empty()
            || tool_glob
                .chars()
                .any(|c| !(is_name_char(c) || c == '*' || c == '?'))
        {
            return Err(PatternError(format!(
                "tool name {tool_glob:?} may contain only letters, digits, `_ - . / :` and `*` `?`"
            )));
        }
        Ok(ToolPattern {
            server: Glob::Literal(server.to_string()),
            tool: Glob::parse(tool_glob),
        })
    }

    pub fn matches(&self, server: &str, tool: &str) -> bool {
        self.server.matches(server) && self.tool.matches(tool)
    }
}

impl fmt::Display for ToolPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mcp:{}__{}", self.server, self.tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_star_and_question_mark() {
        let glob = Glob::parse("read_*");
        assert!(glob.matches("read_file"));
        assert!(glob.matches("read_"));
        assert!(!glob.matches("write_file"));
        assert!(Glob::parse("a?c").matches("abc"));
        assert!(!Glob::parse("a?c").matches("ac"));
        assert!(Glob::parse("*_file*").matches("read_file_v2"));
        assert!(Glob::parse("*a*b*c").matches("xxaxxbxxbxc"));
        assert!(!Glob::parse("*a*b*c").matches("xxaxxbxx"));
        assert!(Glob::parse("*").matches(""));
    }

    #[test]
    fn hostile_names_do_not_blow_up_matching() {
        let glob = Glob::parse("*a*a*a*a*a*a*b");
        let name = "a".repeat(10_000);
        assert!(!glob.matches(&name));
    }

    #[test]
    fn patterns_split_server_and_tool_at_the_first_double_underscore() {
        let pattern = ToolPattern::parse("mcp:fs__write__file").unwrap();
        assert_eq!(pattern.server, Glob::Literal("fs".into()));
        assert_eq!(pattern.tool, Glob::Literal("write__file".into()));
    }

    #[test]
    fn whole_server_and_claude_code_spelling() {
        let whole = ToolPattern::parse("mcp:github").unwrap();
        assert!(whole.matches("github", "anything"));
        assert!(!whole.matches("gitlab", "anything"));
        let alias = ToolPattern::parse("mcp__fs__read_file").unwrap();
        assert_eq!(alias, ToolPattern::parse("mcp:fs__read_file").unwrap());
    }

    #[test]
    fn bad_patterns_are_rejected_with_a_reason() {
        assert!(
            ToolPattern::parse("fs__read")
                .unwrap_err()
                .0
                .contains("must start with `mcp:`")
        );
        assert!(ToolPattern::parse("mcp:").is_err());
        assert!(ToolPattern::parse("mcp:fs__").is_err());
        assert!(
            ToolPattern::parse("mcp:fs__read file")
                .unwrap_err()
                .0
                .contains("' '")
        );
    }

    #[test]
    fn per_server_patterns_stay_inside_their_server() {
        let pattern = ToolPattern::for_server("fs", "read_*").unwrap();
        assert!(pattern.matches("fs", "read_file"));
        assert!(!pattern.matches("other", "read_file"));
        assert!(ToolPattern::for_server("fs", "mcp:other__x").is_err());
        assert!(ToolPattern::for_server("fs", "mcp:*__x").is_err());
    }
}
