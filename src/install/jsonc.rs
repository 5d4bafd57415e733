//! A JSON-with-comments reader that keeps byte spans, so a host's file can be edited by splicing
//! text: everything airlock does not change (comments, indentation, key order, trailing commas,
//! number spellings) stays byte for byte. Zed's and VS Code's settings files are JSONC; the other
//! hosts write plain JSON, which is a subset.

use std::ops::Range;

/// A parsed value and where it is in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub span: Range<usize>,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Object(Vec<Member>),
    Array(Vec<Node>),
    String(String),
    /// `true` or `false` (a server entry's `disabled`, `enabled`).
    Bool(bool),
    /// Numbers and `null`: airlock never needs their value.
    Scalar,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: String,
    pub key_span: Range<usize>,
    pub value: Node,
}

/// Why a text is not JSON(C): the byte offset and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct JsoncError {
    pub offset: usize,
    pub message: String,
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.members()?
            .iter()
            .find(|member| member.key == key)
            .map(|member| &member.value)
    }

    pub fn members(&self) -> Option<&[Member]> {
        match &self.value {
            Value::Object(members) => Some(members),
            _ => None,
        }
    }

    pub fn member(&self, key: &str) -> Option<&Member> {
        self.members()?.iter().find(|member| member.key == key)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match &self.value {
            Value::Bool(flag) => Some(*flag),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The array's items when every one is a string.
    pub fn strings(&self) -> Option<Vec<String>> {
        self.items()?
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect()
    }
}

/// Parses a whole document (one value, then only whitespace and comments).
pub fn parse(text: &str) -> Result<Node, JsoncError> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        text,
        pos: 0,
        depth: 0,
    };
    // A byte-order mark is legal at the start of files some editors write.
    if text.starts_with('\u{feff}') {
        parser.pos = 3;
    }
    parser.skip_trivia()?;
    let node = parser.value()?;
    parser.skip_trivia()?;
    if parser.pos != parser.bytes.len() {
        return Err(parser.error("unexpected text after the end of the document"));
    }
    Ok(node)
}

/// Nesting deeper than this is refused rather than risking the stack on a hostile file.
const MAX_DEPTH: usize = 256;

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> JsoncError {
        JsoncError {
            offset: self.pos,
            message: message.to_string(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips whitespace, `// line` and `/* block */` comments.
    fn skip_trivia(&mut self) -> Result<(), JsoncError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    let start = self.pos;
                    self.pos += 2;
                    match self.text[self.pos..].find("*/") {
                        Some(end) => self.pos += end + 2,
                        None => {
                            self.pos = start;
                            return Err(self.error("unterminated /* comment"));
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self) -> Result<Node, JsoncError> {
        let start = self.pos;
        let value = match self.peek() {
            Some(b'{') => self.nested(Self::object)?,
            Some(b'[') => self.nested(Self::array)?,
            Some(b'"') => Value::String(self.string()?),
            Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => self.scalar()?,
            Some(_) => return Err(self.error("expected a JSON value")),
            None => return Err(self.error("unexpected end of the document")),
        };
        Ok(Node {
            span: start..self.pos,
            value,
        })
    }

    fn nested(
        &mut self,
        inner: fn(&mut Self) -> Result<Value, JsoncError>,
    ) -> Result<Value, JsoncError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("nesting is too deep"));
        }
        let value = inner(self);
        self.depth -= 1;
        value
    }

    fn object(&mut self) -> Result<Value, JsoncError> {
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip_trivia()?;
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(members));
                }
                Some(b'"') => {}
                _ => return Err(self.error("expected a \"key\" or `}`")),
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = key_start..self.pos;
            self.skip_trivia()?;
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:` after the key"));
            }
            self.pos += 1;
            self.skip_trivia()?;
            let value = self.value()?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip_trivia()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self) -> Result<Value, JsoncError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_trivia()?;
            if self.peek() == Some(b']') {
                self.pos += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.skip_trivia()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {}
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn scalar(&mut self) -> Result<Value, JsoncError> {
        let start = self.pos;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'E')
        ) {
            self.pos += 1;
        }
        let word = &self.text[start..self.pos];
        let number = word.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
            && word.parse::<f64>().is_ok();
        if matches!(word, "true" | "false") {
            Ok(Value::Bool(word == "true"))
        } else if number || word == "null" {
            Ok(Value::Scalar)
        } else {
            self.pos = start;
            Err(self.error("expected a number, true, false or null"))
        }
    }

    fn string(&mut self) -> Result<String, JsoncError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.text[self.pos..].chars().next() else {
                self.pos = start;
                return Err(self.error("unterminated string"));
            };
            self.pos += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => out.push(self.escape()?),
                c if (c as u32) < 0x20 => {
                    return Err(self.error("control character in a string"));
                }
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, JsoncError> {
        let c = self
            .peek()
            .ok_or_else(|| self.error("unterminated escape"))?;
        self.pos += 1;
        Ok(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4()?;
                if (0xD800..0xDC00).contains(&high) && self.text[self.pos..].starts_with("\\u") {
                    self.pos += 2;
                    let low = self.hex4()?;
                    if (0xDC00..0xE000).contains(&low) {
                        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                            .unwrap_or('\u{fffd}')
                    } else {
                        // A broken pair is no key or value any host reads the same way.
                        return Err(self.error(
                            "a \\u escape starts a surrogate pair that the next one does not end",
                        ));
                    }
                } else {
                    char::from_u32(high).unwrap_or('\u{fffd}')
                }
            }
            _ => return Err(self.error("unknown escape in a string")),
        })
    }

    fn hex4(&mut self) -> Result<u32, JsoncError> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("short \\u escape"))?;
        let value = u32::from_str_radix(digits, 16).map_err(|_| self.error("bad \\u escape"))?;
        self.pos += 4;
        Ok(value)
    }
}

/// `text` (JSON with comments and trailing commas) as plain JSON of the same length and lines:
/// every comment and every comma before a closing `]` or `}` blanked to spaces (a comment's line
/// breaks kept), so a strict parser's line and column point where they point in `text`. `None`
/// when there is nothing to blank (plain JSON already), or a block comment is not closed (the
/// strict parser then says where).
pub fn as_plain_json(text: &str) -> Option<String> {
    let mut bytes = text.as_bytes().to_vec();
    let mut changed = false;
    let mut at = 0;
    // The last comma outside strings that follows a value, until something other than white
    // space or a comment follows it (`{,}` and `[1,,]` stay the errors they are).
    let mut pending_comma: Option<usize> = None;
    let mut after_value = false;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                pending_comma = None;
                after_value = true;
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
                at += 1;
            }
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                while at < bytes.len() && bytes[at] != b'\n' {
                    bytes[at] = b' ';
                    at += 1;
                }
                changed = true;
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                let end = text[at + 2..].find("*/")? + at + 4;
                for byte in &mut bytes[at..end] {
                    if *byte != b'\n' {
                        *byte = b' ';
                    }
                }
                at = end;
                changed = true;
            }
            b',' => {
                pending_comma = after_value.then_some(at);
                after_value = false;
                at += 1;
            }
            b']' | b'}' => {
                if let Some(comma) = pending_comma.take() {
                    bytes[comma] = b' ';
                    changed = true;
                }
                after_value = true;
                at += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => at += 1,
            other => {
                pending_comma = None;
                after_value = !matches!(other, b'{' | b'[' | b':');
                at += 1;
            }
        }
    }
    // Only ASCII bytes were replaced by ASCII spaces, and never inside a multi-byte character
    // (comments end at ASCII bytes; a comment's own non-ASCII text is blanked whole).
    changed.then(|| String::from_utf8(bytes).ok()).flatten()
}

/// The text a JSON string literal for `value` takes.
pub fn quote(value: &str) -> String {
    serde_json::Value::String(value.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_blank_to_plain_json_of_the_same_lines() {
        let text = "// settings\n{\n  /* a\n b */ \"a\": [\"x,]\", 1, true,],\n  \"u\": \"//é\", // tail é\n}\n";
        let plain = as_plain_json(text).unwrap();
        assert_eq!(plain.len(), text.len());
        assert_eq!(plain.lines().count(), text.lines().count());
        let value: serde_json::Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(value["a"], serde_json::json!(["x,]", 1, true]));
        assert_eq!(value["u"], "//é");
        assert_eq!(as_plain_json("{\"a\": [1, 2]}"), None);
        assert_eq!(as_plain_json("{\"a\": 1} /* open"), None);
        assert_eq!(as_plain_json("[1,,]"), None);
        assert_eq!(as_plain_json("{,}"), None);
        assert_eq!(as_plain_json("[[1,],]").as_deref(), Some("[[1 ] ]"));
    }

    #[test]
    fn spans_point_at_values_and_comments_are_skipped() {
        let text = "// settings\n{\n  /* servers */ \"a\": [\"x\", 1, true,],\n  \"b\": {\"c\": null}, // tail\n}\n";
        let root = parse(text).unwrap();
        let a = root.get("a").unwrap();
        assert_eq!(&text[a.span.clone()], "[\"x\", 1, true,]");
        assert_eq!(a.items().unwrap().len(), 3);
        assert_eq!(&text[root.member("b").unwrap().key_span.clone()], "\"b\"");
        assert!(root.get("b").unwrap().get("c").is_some());
    }

    #[test]
    fn a_broken_surrogate_pair_is_an_error_not_a_panic() {
        let err = parse("{\"\\ud800\\u0000\": 1}").unwrap_err();
        assert!(err.message.contains("surrogate"), "{err}");
    }

    #[test]
    fn strings_decode_escapes_and_surrogates() {
        let root = parse(r#"{"k": "a\"b\\c\u00e9\ud83d\ude00\n"}"#).unwrap();
        assert_eq!(root.get("k").unwrap().as_str(), Some("a\"b\\cé😀\n"));
        assert_eq!(quote("a\"b"), r#""a\"b""#);
    }

    #[test]
    fn errors_say_where() {
        for (text, offset) in [
            ("{\"a\" 1}", 5),
            ("{\"a\": }", 6),
            ("[1, 2", 5),
            ("{} x", 3),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.offset, offset, "{text}: {err}");
        }
        assert!(parse("/* open").is_err());
        assert!(parse(&"[".repeat(10_000)).is_err());
    }
}
