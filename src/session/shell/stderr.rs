//! The server's stderr, relayed line by line to airlock's stderr with the server's name in front,
//! so a user can tell whose message it is.

use std::io::Write;

use tokio::io::{AsyncRead, BufReader};

use crate::mcp::{Frame, LineReader};

/// Longest stderr line relayed whole; longer ones are summarised.
pub const MAX_STDERR_LINE: usize = 64 * 1024;

/// How the confine helper's failure lines start (`airlock-confine: <step>: <why>`).
pub const HELPER_PREFIX: &str = "airlock-confine: ";

/// Relays until end of stream (or a read error, which ends the relay like end of stream would).
/// Returns the last line the confine helper wrote about a failure (without its prefix), so the
/// exit of a sandbox that could not be set up can be told in the helper's own words.
pub async fn relay_stderr<R: AsyncRead + Unpin>(
    reader: R,
    server: &str,
    sink: &mut (dyn Write + Send),
) -> Option<String> {
    let mut lines = LineReader::new(BufReader::new(reader), MAX_STDERR_LINE);
    let mut helper_line = None;
    while let Ok(Some(frame)) = lines.next_frame().await {
        let _ = match frame {
            Frame::Line(line) => {
                let text = String::from_utf8_lossy(&line);
                if let Some(why) = text.strip_prefix(HELPER_PREFIX) {
                    helper_line = Some(why.trim_end().to_string());
                }
                writeln!(sink, "[{server}] {text}")
            }
            Frame::Oversized { bytes } => {
                writeln!(sink, "[{server}] ({bytes}-byte line not shown)")
            }
        };
    }
    helper_line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn prefixes_each_line() {
        let mut out = Vec::new();
        let input: &[u8] = b"starting\nairlock-confine: landlock: refused\nready\r\n";
        let helper = relay_stderr(input, "fs", &mut out).await;
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[fs] starting\n[fs] airlock-confine: landlock: refused\n[fs] ready\n"
        );
        assert_eq!(helper.as_deref(), Some("landlock: refused"));
    }
}
