//! Errors about a user's file: where (file:line:col), what, and how to fix it.
//!
//! Config and policy loading share this type so every load error reads the same way and the CLI
//! can map all of them to exit code 2.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A 1-based line and column in a text file (ordered by line, then column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

/// A problem in a user's file. Displayed as `file:line:col: message` then `  fix: ...`, followed by
/// the other problems found in the same load (`also`), each the same way: a user fixes them all
/// in one go instead of one per run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SourceError {
    pub file: PathBuf,
    pub position: Option<LineCol>,
    pub message: String,
    pub fix: Option<String>,
    /// Further errors of the same load, in file order.
    pub also: Vec<SourceError>,
}

impl SourceError {
    pub fn new(file: &Path, position: Option<LineCol>, message: impl Into<String>) -> Self {
        SourceError {
            file: file.to_path_buf(),
            position,
            message: message.into(),
            fix: None,
            also: Vec::new(),
        }
    }

    /// One error carrying all of `errors` (`None` when there are none), in file order: files as
    /// first met, positions ascending within each (a knock-on error the parser met first does
    /// not come before its cause), errors without a position after those with one.
    pub fn all(errors: Vec<SourceError>) -> Option<SourceError> {
        let mut errors: Vec<SourceError> =
            errors.into_iter().flat_map(SourceError::flatten).collect();
        let mut files: Vec<PathBuf> = Vec::new();
        for error in &errors {
            if !files.contains(&error.file) {
                files.push(error.file.clone());
            }
        }
        errors.sort_by_key(|error| {
            let file = files.iter().position(|f| *f == error.file);
            (file, error.position.is_none(), error.position)
        });
        let mut errors = errors.into_iter();
        let mut first = errors.next()?;
        first.also = errors.collect();
        Some(first)
    }

    /// This error and the ones it carries, one by one.
    pub fn flatten(mut self) -> Vec<SourceError> {
        let also = std::mem::take(&mut self.also);
        let mut out = vec![self];
        out.extend(also.into_iter().flat_map(SourceError::flatten));
        out
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
        for other in &self.also {
            write!(f, "\n{other}")?;
        }
        Ok(())
    }
}

/// A finding about a user's file that does not stop anything (an unset variable, a key airlock
/// ignores). Displayed like an error, `file:line:col: message`, so every warning about a file says
/// where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceWarning {
    pub file: PathBuf,
    pub position: Option<LineCol>,
    pub message: String,
}

impl SourceWarning {
    pub fn new(file: &Path, position: Option<LineCol>, message: impl Into<String>) -> Self {
        SourceWarning {
            file: file.to_path_buf(),
            position,
            message: message.into(),
        }
    }

    pub fn at_span(
        file: &Path,
        text: &str,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(file, Some(LineCol::from_offset(text, span.start)), message)
    }
}

impl fmt::Display for SourceWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(at) = self.position {
            write!(f, ":{}:{}", at.line, at.column)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Edit distance between two short names (keys, server names), for did-you-mean hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// The candidate closest to `word`, when it is close enough to be a likely typo (case aside, at
/// most a third of the letters differ, at least one allowed).
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lowered = word.to_lowercase();
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| {
            (
                edit_distance(&lowered, &candidate.to_lowercase()),
                candidate,
            )
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// The likely meant names for a misspelt `word`: the closest candidate (see [`closest`]), else
/// every candidate whose last `_` part is close to it (`timout` → `startup_timeout`,
/// `tool_timeout`, `idle_timeout`).
pub fn likely_meant<'a>(word: &str, candidates: &[&'a str]) -> Vec<&'a str> {
    if let Some(best) = closest(word, candidates.iter().copied()) {
        return vec![best];
    }
    candidates
        .iter()
        .copied()
        .filter(|candidate| {
            candidate
                .rsplit_once('_')
                .is_some_and(|(_, last)| closest(word, [last]).is_some())
        })
        .collect()
}

/// "did you mean `a`?" (or "`a`, `b` or `c`") for a misspelt `word`, when anything is close.
pub fn did_you_mean(word: &str, candidates: &[&str]) -> Option<String> {
    did_you_mean_quoted(word, candidates, &|name| format!("`{name}`"))
}

/// [`did_you_mean`] with each name quoted by `quote` (a JSON file's keys read as `"command"`).
pub fn did_you_mean_quoted(
    word: &str,
    candidates: &[&str],
    quote: &dyn Fn(&str) -> String,
) -> Option<String> {
    let quoted: Vec<String> = likely_meant(word, candidates)
        .iter()
        .map(|name| quote(name))
        .collect();
    match quoted.as_slice() {
        [] => None,
        [one] => Some(format!("did you mean {one}?")),
        [first @ .., last] => Some(format!("did you mean {} or {last}?", first.join(", "))),
    }
}

/// The names serde lists after "expected" in an unknown-field/variant message.
fn expected_names(message: &str) -> Vec<&str> {
    let Some((_, expected)) = message.split_once("expected") else {
        return Vec::new();
    };
    expected.split('`').skip(1).step_by(2).collect()
}

/// The fix for an unknown key or value: the closest accepted name, else the list.
fn unknown_name_fix(message: &str) -> String {
    let given = message.split('`').nth(1).unwrap_or_default();
    let expected = expected_names(message);
    match did_you_mean(given, &expected) {
        Some(hint) => hint,
        None if expected.is_empty() => "remove it or correct its spelling".to_string(),
        None => format!("use one of: {}", expected.join(", ")),
    }
}

/// Turns a `toml` parse/deserialize error into a located [`SourceError`], with a fix hint for
/// the common cases (unknown keys, wrong types).
pub fn from_toml_error(file: &Path, text: &str, err: &toml::de::Error) -> SourceError {
    let position = err
        .span()
        .map(|span| LineCol::from_offset(text, span.start));
    let message = plain_types(err.message().trim());
    let fix = if message.starts_with("unknown field") || message.starts_with("unknown variant") {
        Some(unknown_name_fix(&message))
    } else if message.starts_with("invalid type") {
        Some(type_fix(&message))
    } else if message.starts_with("missing field") {
        Some("add the missing key".to_string())
    } else {
        Some("correct the TOML syntax at this position".to_string())
    };
    SourceError {
        file: file.to_path_buf(),
        position,
        message,
        fix,
        also: Vec::new(),
    }
}

/// serde's Rust type names in a message, in words: `expected u64` → `expected a whole number`.
/// The fix for a value of the wrong type, shown in TOML: what to write instead.
fn type_fix(message: &str) -> String {
    let expected = message.split_once("expected").map_or("", |(_, rest)| rest);
    if expected.contains("whole number") {
        "write a whole number without quotes, e.g. `512`".to_string()
    } else if expected.contains("a number") {
        "write a number without quotes, e.g. `1.5`".to_string()
    } else if expected.contains("true or false") {
        "write `true` or `false`, without quotes".to_string()
    } else if expected.contains("sequence") || expected.contains("array") {
        "write a list in brackets, e.g. `[\"a\", \"b\"]` (one item is `[\"a\"]`)".to_string()
    } else if expected.contains("string") {
        "write the value in double quotes, e.g. `\"value\"`".to_string()
    } else if expected.contains("map") || expected.contains("table") || expected.contains("struct")
    {
        "write a table: a `[section]` of its own, or `{ key = \"value\" }`".to_string()
    } else {
        "give the value the type the message names".to_string()
    }
}

fn plain_types(message: &str) -> String {
    let mut plain = message.to_string();
    for int in [
        "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize",
    ] {
        plain = plain.replace(&format!("expected {int}"), "expected a whole number");
    }
    plain
        .replace("expected f64", "expected a number")
        .replace("expected a boolean", "expected true or false")
}

/// Deserializes a TOML file and reports every problem in it, not only the first: all syntax
/// errors the parser recovers from, then every unknown key and wrongly typed value (each is set
/// aside and deserialization runs again, up to a bound).
pub fn parse_toml_all<T: serde::de::DeserializeOwned>(
    file: &Path,
    text: &str,
) -> Result<T, SourceError> {
    match parse_toml_partial(file, text) {
        (Some(value), errors) if errors.is_empty() => Ok(value),
        (_, errors) => Err(SourceError::all(errors)
            .unwrap_or_else(|| SourceError::new(file, None, "invalid TOML"))),
    }
}

/// [`parse_toml_all`]'s errors, and the value deserialized from what is left once the bad keys
/// and values are set aside (`None` after a syntax error, or when nothing deserializes): a
/// caller checks the rest too, so an unknown key does not hide a bad value elsewhere.
pub fn parse_toml_partial<T: serde::de::DeserializeOwned>(
    file: &Path,
    text: &str,
) -> (Option<T>, Vec<SourceError>) {
    use toml::de::{DeTable, Deserializer};
    let (mut table, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        let errors = syntax
            .iter()
            .map(|e| from_toml_error(file, text, e))
            .collect();
        return (None, errors);
    }
    let mut errors = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    let mut rest = None;
    for _ in 0..64 {
        match T::deserialize(Deserializer::from(table.clone())) {
            Ok(value) => {
                rest = Some(value);
                break;
            }
            Err(err) => {
                let message = err.message().trim();
                // A value set aside for an earlier error is not missing as well, nor is the key
                // a misspelt one set aside was meant to be (`prefx` for `prefix`).
                let missing = message
                    .strip_prefix("missing field")
                    .and_then(|rest| rest.split('`').nth(1));
                let knock_on = missing.is_some_and(|field| {
                    removed.iter().any(|key| key == field)
                        || did_you_mean(
                            field,
                            &removed.iter().map(String::as_str).collect::<Vec<_>>(),
                        )
                        .is_some()
                });
                if !knock_on {
                    errors.push(from_toml_error(file, text, &err));
                }
                match err
                    .span()
                    .and_then(|span| remove_entry(table.get_mut(), &span))
                {
                    Some(key) => removed.push(key),
                    None => break,
                }
            }
        }
    }
    errors.sort_by_key(|e| e.position.map(|p| (p.line, p.column)));
    (rest, errors)
}

/// Removes the entry an error at `span` is about, wherever it is; returns its key.
fn remove_entry(table: &mut toml::de::DeTable<'_>, span: &Range<usize>) -> Option<String> {
    remove_table_of_array(table, span)
        .or_else(|| remove_at(table, span))
        .or_else(|| remove_holding(table, span))
}

/// Removes the table of an array of tables whose header is at `span`. An error about one such
/// table (`[[tools.rule]]` missing a key) points at its header, which is also the span of the
/// whole array: only that table is set aside, so the array's other tables still reach the checks
/// that run after parsing.
fn remove_table_of_array(table: &mut toml::de::DeTable<'_>, span: &Range<usize>) -> Option<String> {
    use toml::de::DeValue;
    for (key, value) in table.iter_mut() {
        let hit = match value.get_mut() {
            DeValue::Table(inner) => remove_table_of_array(inner, span),
            DeValue::Array(items) => {
                let index = items.iter().position(|item| {
                    matches!(item.get_ref(), DeValue::Table(_)) && item.span() == *span
                });
                match index {
                    Some(index) => {
                        // `DeArray` has no `remove`: rebuilt without that table (its only
                        // flag is the parser's own).
                        let before = std::mem::replace(items, toml::de::DeArray::new());
                        for (at, item) in before.iter().enumerate() {
                            if at != index {
                                items.push(item.clone());
                            }
                        }
                        Some(key.get_ref().to_string())
                    }
                    None => items.iter_mut().find_map(|item| match item.get_mut() {
                        DeValue::Table(inner) => remove_table_of_array(inner, span),
                        _ => None,
                    }),
                }
            }
            _ => None,
        };
        if hit.is_some() {
            return hit;
        }
    }
    None
}

/// Removes the entry whose key or value is at `span`.
fn remove_at(table: &mut toml::de::DeTable<'_>, span: &Range<usize>) -> Option<String> {
    use toml::de::DeValue;
    let found = table
        .iter()
        .find(|(key, value)| key.span() == *span || value.span() == *span)
        .map(|(key, _)| key.clone());
    if let Some(key) = found {
        let name = key.get_ref().to_string();
        table.remove(&key);
        return Some(name);
    }
    for (_, value) in table.iter_mut() {
        let hit = match value.get_mut() {
            DeValue::Table(inner) => remove_at(inner, span),
            DeValue::Array(items) => items.iter_mut().find_map(|item| match item.get_mut() {
                DeValue::Table(inner) => remove_at(inner, span),
                _ => None,
            }),
            _ => None,
        };
        if hit.is_some() {
            return hit;
        }
    }
    None
}

/// Removes the entry whose value holds `span`: an error about an element of an array of
/// scalars (`deny = [5]`) points at the element, which is no entry of its own, and would
/// otherwise stop the search for the file's other errors. Tables are searched whole (a table's
/// own span is only its header).
fn remove_holding(table: &mut toml::de::DeTable<'_>, span: &Range<usize>) -> Option<String> {
    use toml::de::DeValue;
    let holds = |outer: Range<usize>| outer.start <= span.start && span.end <= outer.end;
    let found = table
        .iter()
        .find(|(_, value)| !matches!(value.get_ref(), DeValue::Table(_)) && holds(value.span()))
        .map(|(key, _)| key.clone());
    if let Some(key) = found {
        let name = key.get_ref().to_string();
        table.remove(&key);
        return Some(name);
    }
    table
        .iter_mut()
        .find_map(|(_, value)| match value.get_mut() {
            DeValue::Table(inner) => remove_holding(inner, span),
            DeValue::Array(items) => items.iter_mut().find_map(|item| match item.get_mut() {
                DeValue::Table(inner) => remove_holding(inner, span),
                _ => None,
            }),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_errors_name_types_in_words() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Values {
            memory_mb: Option<u64>,
            read: Option<Vec<String>>,
            command: Option<String>,
            trust: Option<bool>,
        }
        let fix_for = |text: &str| {
            let err = parse_toml_all::<Values>(Path::new("a.toml"), text).unwrap_err();
            (err.message, err.fix.unwrap_or_default())
        };
        let (message, fix) = fix_for("memory_mb = \"lots\"\n");
        assert_eq!(
            message,
            "invalid type: string \"lots\", expected a whole number"
        );
        assert_eq!(fix, "write a whole number without quotes, e.g. `512`");
        let (_, fix) = fix_for("read = \"~/x\"\n");
        assert!(fix.contains("list in brackets"), "{fix}");
        let (_, fix) = fix_for("command = 3\n");
        assert!(fix.contains("double quotes"), "{fix}");
        let (_, fix) = fix_for("trust = \"yes\"\n");
        assert!(fix.contains("`true` or `false`"), "{fix}");
    }

    /// One bad table of an array of tables is set aside alone: the array's other tables still
    /// reach the checks that run after parsing.
    #[test]
    fn a_bad_table_of_an_array_of_tables_is_set_aside_alone() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Rule {
            action: Action,
            prefix: String,
        }
        #[derive(Debug, serde::Deserialize)]
        #[serde(rename_all = "lowercase")]
        #[allow(dead_code)]
        enum Action {
            Allow,
            Deny,
        }
        #[derive(Debug, serde::Deserialize)]
        struct Tools {
            rule: Vec<Rule>,
        }
        #[derive(Debug, serde::Deserialize)]
        struct File {
            tools: Tools,
        }
        for (text, bad_line) in [
            (
                "[[tools.rule]]\naction = \"forbid\"\nprefix = \"a\"\n[[tools.rule]]\naction = \"deny\"\nprefix = \"b\"\n",
                2,
            ),
            (
                "[[tools.rule]]\naction = \"deny\"\nprefix = \"a\"\n[[tools.rule]]\naction = \"deny\"\nprefx = \"b\"\n",
                6,
            ),
            (
                "[[tools.rule]]\nprefix = \"a\"\n[[tools.rule]]\naction = \"allow\"\nprefix = \"b\"\n",
                1,
            ),
        ] {
            let (file, errors) = parse_toml_partial::<File>(Path::new("p.toml"), text);
            let lines: Vec<Option<usize>> =
                errors.iter().map(|e| e.position.map(|p| p.line)).collect();
            assert_eq!(lines, vec![Some(bad_line)], "{text}: {errors:?}");
            let kept: Vec<String> = file
                .unwrap_or_else(|| panic!("{text}: {errors:?}"))
                .tools
                .rule
                .into_iter()
                .map(|rule| rule.prefix)
                .collect();
            assert_eq!(kept.len(), 1, "{text}: the good rule is kept");
        }
    }

    #[test]
    fn all_errors_come_in_file_order() {
        let at = |file: &str, line: Option<usize>| {
            SourceError::new(
                Path::new(file),
                line.map(|line| LineCol { line, column: 1 }),
                "x",
            )
        };
        let all = SourceError::all(vec![
            at("a.toml", Some(9)),
            at("b.toml", Some(1)),
            at("a.toml", None),
            at("a.toml", Some(8)),
        ])
        .unwrap();
        let order: Vec<(String, Option<usize>)> = all
            .flatten()
            .iter()
            .map(|e| (e.file.display().to_string(), e.position.map(|p| p.line)))
            .collect();
        assert_eq!(
            order,
            vec![
                ("a.toml".to_string(), Some(8)),
                ("a.toml".to_string(), Some(9)),
                ("a.toml".to_string(), None),
                ("b.toml".to_string(), Some(1)),
            ]
        );
    }

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

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read by serde only
    struct Sample {
        version: i64,
        tools: Option<SampleTools>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read by serde only
    struct SampleTools {
        allow: Option<Vec<String>>,
        deny: Option<Vec<String>>,
    }

    #[test]
    fn every_unknown_key_and_bad_value_is_reported_with_a_did_you_mean() {
        let text =
            "version = 1\n[tools]\nalow = [\"a\"]\ndeny = 3\nsomething = 1\n[tols]\nread = []\n";
        let err = parse_toml_all::<Sample>(Path::new("p.toml"), text).unwrap_err();
        let all = err.clone().flatten();
        let lines: Vec<(usize, &str)> = all
            .iter()
            .map(|e| {
                (
                    e.position.unwrap().line,
                    e.fix.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(lines.len(), 4, "{all:#?}");
        assert_eq!(lines[0], (3, "did you mean `allow`?"));
        assert_eq!(lines[1].0, 4);
        assert_eq!(lines[2].0, 5);
        assert!(lines[2].1.starts_with("use one of"), "{}", lines[2].1);
        assert_eq!(lines[3], (6, "did you mean `tools`?"));
        let shown = err.to_string();
        assert!(
            shown.contains("p.toml:3:1:") && shown.contains("\np.toml:6:2:"),
            "{shown}"
        );
    }

    #[test]
    fn syntax_errors_are_all_reported_and_good_files_load() {
        let ok: Sample = parse_toml_all(Path::new("p.toml"), "version = 1\n").unwrap();
        assert_eq!(ok.version, 1);
        let err =
            parse_toml_all::<Sample>(Path::new("p.toml"), "version = \n[tools\n").unwrap_err();
        assert!(!err.flatten().is_empty());
    }

    #[test]
    fn closest_names_catch_typos_only() {
        let keys = ["allow", "ask", "deny", "default"];
        assert_eq!(closest("alow", keys), Some("allow"));
        assert_eq!(closest("Deny", keys), Some("deny"));
        assert_eq!(closest("denied", keys), None);
        assert_eq!(
            closest("filesytem", ["filesystem", "fs"]),
            Some("filesystem")
        );
    }

    #[test]
    fn a_misspelt_last_word_suggests_every_key_ending_in_it() {
        let keys = [
            "command",
            "startup_timeout",
            "tool_timeout",
            "idle_timeout",
            "url",
        ];
        assert_eq!(
            did_you_mean("timout", &keys).as_deref(),
            Some("did you mean `startup_timeout`, `tool_timeout` or `idle_timeout`?")
        );
        assert_eq!(
            did_you_mean("tool_timout", &keys).as_deref(),
            Some("did you mean `tool_timeout`?")
        );
        assert_eq!(
            did_you_mean("comand", &keys).as_deref(),
            Some("did you mean `command`?")
        );
        assert_eq!(did_you_mean("autoApprove", &keys), None);
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
