//! The server's stderr, relayed line by line to airlock's stderr with the server's name in front,
//! so a user can tell whose message it is.

use std::io::Write;

use tokio::io::{AsyncRead, BufReader};

use crate::mcp::{Frame, LineReader};

/// Longest stderr line relayed whole; longer ones are summarised.
pub const MAX_STDERR_LINE: usize = 64 * 1024;

/// How the confine helper's failure lines start (`airlock-confine: <step>: <why>`).
pub const HELPER_PREFIX: &str = "airlock-confine: ";

/// How the helper's remarks on a start that goes on begin, after [`HELPER_PREFIX`].
const HELPER_NOTE: &str = "note: ";

/// Longest part of a server's last stderr line kept for the host's error text.
const LAST_WORDS_BYTES: usize = 200;

/// What the relay saw by the end of the stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StderrEnd {
    /// The last line the confine helper wrote about a failure (without its prefix), so the exit
    /// of a sandbox that could not be set up can be told in the helper's own words.
    pub helper_line: Option<String>,
    /// The server's last non-blank line (as shown: control characters escaped; its first 200
    /// bytes), so a server that dies at once can be told with its own reason (`fatal: missing
    /// API key`) and not only its exit code.
    pub last_line: Option<String>,
}

/// Relays until end of stream (or a read error, which ends the relay like end of stream would).
pub async fn relay_stderr<R: AsyncRead + Unpin>(
    reader: R,
    server: &str,
    sink: &mut (dyn Write + Send),
) -> StderrEnd {
    let mut lines = LineReader::new(BufReader::new(reader), MAX_STDERR_LINE);
    let mut end = StderrEnd::default();
    while let Ok(Some(frame)) = lines.next_frame().await {
        let _ = match frame {
            Frame::Line(line) => {
                let text = String::from_utf8_lossy(&line);
                let helpers = text.strip_prefix(HELPER_PREFIX);
                // A note is the helper's remark on a start that went on, never why it failed.
                if let Some(why) = helpers.filter(|why| !why.starts_with(HELPER_NOTE)) {
                    end.helper_line = Some(why.trim_end().to_string());
                }
                let shown = shown(&text);
                // The helper's lines are airlock's words, not the server's.
                if helpers.is_none() && !shown.trim().is_empty() {
                    end.last_line = Some(first_bytes(shown.trim(), LAST_WORDS_BYTES));
                }
                writeln!(sink, "[{server}] {shown}")
            }
            Frame::Oversized { bytes } => {
                writeln!(sink, "[{server}] ({bytes}-byte line not shown)")
            }
        };
    }
    end
}

/// The first `limit` bytes of `text`, cut at a character boundary, `…` marking a cut.
fn first_bytes(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// A server's stderr text as it may reach the user's terminal: control characters (escape
/// sequences that would retitle the window, write the clipboard, or move the cursor back over the
/// `[server]` prefix to forge an airlock line), bidirectional controls, and the invisible marks
/// and separators that make one name look like another (zero-width spaces and joiners, the
/// line and paragraph separators, the byte-order mark) are shown as `\xNN` / `\u{NNNN}` instead
/// of acting. Tabs stay. Pure.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    // The invisible set is the gate's own (`policy::keys::is_invisible`: every format character
    // and the other default-ignorables, bidi controls among them), plus the line and paragraph
    // separators, which are not format characters but break a line for some terminals.
    // ASCII first: a server may write megabytes, and the category lookup is for the rest only.
    let acts = |c: char| {
        if c.is_ascii() {
            return c.is_ascii_control() && c != '\t';
        }
        c.is_control()
            || crate::policy::keys::is_invisible(c)
            || matches!(c, '\u{2028}' | '\u{2029}')
    };
    if !text.chars().any(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !acts(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_cursor_moves_are_shown_not_acted() {
        let forged =
            "ok\x1b]0;TITLE\x07 \x1b[2K\r2026 INFO airlock: all tools approved\u{202e}x\ty";
        assert_eq!(
            shown(forged),
            "ok\\x1b]0;TITLE\\x07 \\x1b[2K\\x0d2026 INFO airlock: all tools approved\\u{202e}x\ty"
        );
        assert!(matches!(shown("plain text"), std::borrow::Cow::Borrowed(_)));
    }

    #[tokio::test]
    async fn prefixes_each_line() {
        let mut out = Vec::new();
        let input: &[u8] = b"starting\nairlock-confine: landlock: refused\nready\r\n";
        let end = relay_stderr(input, "fs", &mut out).await;
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[fs] starting\n[fs] airlock-confine: landlock: refused\n[fs] ready\n"
        );
        assert_eq!(end.helper_line.as_deref(), Some("landlock: refused"));
        assert_eq!(end.last_line.as_deref(), Some("ready"));
        // The helper's note on a start that went on is neither why it failed nor the server's
        // last words.
        let input: &[u8] = b"fatal: no key\nairlock-confine: note: the server cannot use the working directory /x\n";
        let end = relay_stderr(input, "fs", &mut Vec::new()).await;
        assert_eq!(end.helper_line, None);
        assert_eq!(end.last_line.as_deref(), Some("fatal: no key"));
        let long = format!("fatal: {}\n\n", "é".repeat(300));
        let end = relay_stderr(long.as_bytes(), "fs", &mut Vec::new()).await;
        let last = end.last_line.unwrap();
        assert!(
            last.starts_with("fatal: é") && last.ends_with('…'),
            "{last}"
        );
        assert!(last.len() <= 200 + '…'.len_utf8(), "{}", last.len());
    }
}
