//! The server's stderr, relayed line by line to airlock's stderr with the server's name in front,
//! so a user can tell whose message it is.

use std::io::Write;

use tokio::io::{AsyncRead, BufReader};

use crate::mcp::{Frame, LineReader};

/// Longest stderr line relayed whole; longer ones are summarised.
pub const MAX_STDERR_LINE: usize = 64 * 1024;

/// Relays until end of stream (or a read error, which ends the relay like end of stream would).
pub async fn relay_stderr<R: AsyncRead + Unpin>(
    reader: R,
    server: &str,
    sink: &mut (dyn Write + Send),
) {
    let mut lines = LineReader::new(BufReader::new(reader), MAX_STDERR_LINE);
    while let Ok(Some(frame)) = lines.next_frame().await {
        let _ = match frame {
            Frame::Line(line) => {
                let text = String::from_utf8_lossy(&line);
                writeln!(sink, "[{server}] {text}")
            }
            Frame::Oversized { bytes } => {
                writeln!(sink, "[{server}] ({bytes}-byte line not shown)")
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn prefixes_each_line() {
        let mut out = Vec::new();
        let input: &[u8] = b"starting\nready\r\n";
        relay_stderr(input, "fs", &mut out).await;
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[fs] starting\n[fs] ready\n"
        );
    }
}
