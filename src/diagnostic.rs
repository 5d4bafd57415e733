//! Errors about a user's file: where (file:line:col), what, and how to fix it.
//!
//! Config and policy loading share this type so every load error reads the same way and the CLI
//! can map all of them to exit code 2.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A 1-based line and column in a text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

impl LineCol {
    /// Converts a byte offset into a 1-based line and column (columns count characters).
    pub fn from_offset(text: &str, offset: usize) -> LineCol {
        let offset = offset.min(text.len());
        let before = text.get(..offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let column = before[line_start..].chars().count() + 1;
        LineCol { line, column }
    }
}

/// A problem in a user's file. Displayed as `file:line:col: message` then `  fix: ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SourceError {
    pub file: PathBuf,
    pub position: Option<LineCol>,
    pub message: String,
    pub fix: Option<String>,
}

impl SourceError {
    pub fn new(file: &Path, position: Option<LineCol>, message: impl Into<String>) -> Self {
        SourceError {
            file: file.to_path_buf(),
            position,
            message: message.into(),
            fix: None,
        }
    }

    /// An error at a byte span of `text` (the contents of `file`).
    pub fn at_span(
        file: &Path,
        text: &str,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(file, Some(LineCol::from_offset(text, span.start)), message)
    }

    pub fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(at) = self.position {
            write!(f, ":{}:{}", at.line, at.column)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n  fix: {fix}")?;
        }
        Ok(())
    }
}

/// Turns a `toml` parse/deserialize error into a located [`SourceError`], with a fix hint for
/// the common cases (unknown keys, wrong types).
pub fn from_toml_error(file: &Path, text: &str, err: &toml::de::Error) -> SourceError {
    let position = err
        .span()
        .map(|span| LineCol::from_offset(text, span.start));
    let message = err.message().trim().to_string();
    let fix = if message.starts_with("unknown field") {
        Some(
            "remove the key or correct its spelling; the accepted keys are listed above"
                .to_string(),
        )
    } else if message.starts_with("invalid type") {
        Some("give the value the type the message names".to_string())
    } else if message.starts_with("missing field") {
        Some("add the missing key".to_string())
    } else if message.starts_with("unknown variant") {
        Some("use one of the values the message lists".to_string())
    } else {
        Some("correct the TOML syntax at this position".to_string())
    };
    SourceError {
        file: file.to_path_buf(),
        position,
        message,
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_to_one_based_line_and_column() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(
            LineCol::from_offset(text, 0),
            LineCol { line: 1, column: 1 }
        );
        assert_eq!(
            LineCol::from_offset(text, 6),
            LineCol { line: 2, column: 1 }
        );
        // 'é' is two bytes but one column.
        assert_eq!(
            LineCol::from_offset(text, 9),
            LineCol { line: 2, column: 3 }
        );
    }

    #[test]
    fn display_names_file_line_column_and_fix() {
        let err = SourceError::new(
            Path::new("p.toml"),
            Some(LineCol { line: 3, column: 7 }),
            "bad",
        )
        .with_fix("do this");
        assert_eq!(err.to_string(), "p.toml:3:7: bad\n  fix: do this");
    }
}
