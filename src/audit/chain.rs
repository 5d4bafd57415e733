//! The hash chain that makes an audit log tamper-evident (design: `docs/run.md`, "Audit log";
//! what it proves: `SECURITY.md`).
//!
//! Every record ends with `"prev":"<hex>"`, the SHA-256 of the line before it in the same file
//! (its exact bytes, without the newline), or 64 zeros for the first line of a file. Writers
//! serialise on an advisory lock of the log, so records of several airlock processes appending
//! to one file still form one chain in file order. Beside the log, a small checkpoint records
//! the log's length and the hash of its last line, so a cut tail is seen too.
//!
//! This file is pure: building chained lines and reading and writing the checkpoint's text. The
//! sink does the locking and I/O; `verify` walks a log.

use sha2::{Digest, Sha256};

use crate::hash::hex_into;

/// A SHA-256 digest.
pub type LineHash = [u8; 32];

/// `prev` of the first record of a file.
pub const GENESIS: LineHash = [0; 32];

/// The checkpoint's size on disk: it is rewritten in place, always this long.
pub const CHECKPOINT_BYTES: usize = 192;

/// The checkpoint file that goes with `log`: `audit.jsonl` → `audit.jsonl.checkpoint`.
pub fn checkpoint_path(log: &std::path::Path) -> std::path::PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".checkpoint");
    std::path::PathBuf::from(name)
}

/// The hash the next line stores as its `prev`.
pub fn line_hash(line: &[u8]) -> LineHash {
    Sha256::digest(line).into()
}

/// Appends `body` (one encoded record, a JSON object) to `out` as a chained line ending in `\n`
/// and returns the new line's hash. `body` must end with `}`; the link goes in as its last field.
pub fn append_linked(out: &mut Vec<u8>, body: &[u8], prev: &LineHash) -> LineHash {
    let start = out.len();
    append_unhashed(out, body, prev);
    line_hash(&out[start..out.len() - 1])
}

/// [`append_linked`] without taking the new line's hash: a writer that needs it only for the
/// next line takes it later (`line_hash` of the line without its `\n`).
pub fn append_unhashed(out: &mut Vec<u8>, body: &[u8], prev: &LineHash) {
    let without_brace = body.strip_suffix(b"}").unwrap_or(body);
    out.extend_from_slice(without_brace);
    out.extend_from_slice(b",\"prev\":\"");
    hex_into(out, prev);
    out.extend_from_slice(b"\"}\n");
}

/// Parses 64 hex characters.
pub fn parse_hash(text: &str) -> Option<LineHash> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (index, pair) in text.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        let (high, low) = (digit(pair[0])?, digit(pair[1])?);
        out[index] = u8::try_from(high * 16 + low).ok()?;
    }
    Some(out)
}

/// What the checkpoint says about the log: its length and its last line when last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Length of the log in bytes, ending with the last line's `\n`.
    pub bytes: u64,
    /// Hash of the last line.
    pub last: LineHash,
    /// Session and seq of that line (for messages).
    pub session: String,
    pub seq: u64,
}

impl Checkpoint {
    /// The checkpoint's text: one JSON object padded with spaces to [`CHECKPOINT_BYTES`], so an
    /// update is one write in place.
    ///
    /// Written by hand (it is rewritten with every commit): the same text `serde_json` gives the
    /// object `{"version":1,"bytes":..,"last":..,"session":..,"seq":..}` in that key order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHECKPOINT_BYTES);
        out.extend_from_slice(b"{\"version\":1,\"bytes\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.bytes).as_bytes());
        out.extend_from_slice(b",\"last\":\"");
        hex_into(&mut out, &self.last);
        out.extend_from_slice(b"\",\"session\":");
        // Writing to a Vec cannot fail; neither can a string's JSON encoding.
        let _ = serde_json::to_writer(&mut out, &self.session);
        out.extend_from_slice(b",\"seq\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.seq).as_bytes());
        out.push(b'}');
        if out.len() < CHECKPOINT_BYTES - 1 {
            out.resize(CHECKPOINT_BYTES - 1, b' ');
        }
        out.push(b'\n');
        out
    }

    /// Reads a checkpoint's text; `None` when it is not one.
    pub fn parse(text: &[u8]) -> Option<Checkpoint> {
        let value: serde_json::Value = serde_json::from_slice(text).ok()?;
        if value["version"] != 1 {
            return None;
        }
        Some(Checkpoint {
            bytes: value["bytes"].as_u64()?,
            last: parse_hash(value["last"].as_str()?)?,
            session: value["session"].as_str().unwrap_or_default().to_string(),
            seq: value["seq"].as_u64().unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hex;

    #[test]
    fn a_linked_line_carries_the_previous_hash_last() {
        let mut out = Vec::new();
        let first = append_linked(&mut out, br#"{"seq":1}"#, &GENESIS);
        let second = append_linked(&mut out, br#"{"seq":2}"#, &first);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(r#"{{"seq":1,"prev":"{}"}}"#, "0".repeat(64))
        );
        assert_eq!(line_hash(lines[0].as_bytes()), first);
        assert!(lines[1].ends_with(&format!(r#""prev":"{}"}}"#, hex(&first))));
        assert_eq!(line_hash(lines[1].as_bytes()), second);
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn hashes_round_trip_through_hex() {
        let hash = line_hash(b"x");
        assert_eq!(parse_hash(&hex(&hash)), Some(hash));
        assert_eq!(parse_hash("zz"), None);
        assert_eq!(parse_hash(&"g".repeat(64)), None);
    }

    #[test]
    fn checkpoints_have_a_fixed_size_and_round_trip() {
        let checkpoint = Checkpoint {
            bytes: u64::MAX,
            last: line_hash(b"y"),
            session: "0123456789abcdef".into(),
            seq: u64::MAX,
        };
        let text = checkpoint.encode();
        assert_eq!(text.len(), CHECKPOINT_BYTES);
        let reference = serde_json::json!({
            "version": 1,
            "bytes": checkpoint.bytes,
            "last": hex(&checkpoint.last),
            "session": "0123456789abcdef",
            "seq": checkpoint.seq,
        })
        .to_string();
        assert_eq!(
            String::from_utf8_lossy(&text).trim_end(),
            reference,
            "the same text serde_json gives"
        );
        assert_eq!(Checkpoint::parse(&text), Some(checkpoint));
        assert_eq!(Checkpoint::parse(b"{}"), None);
        assert_eq!(
            checkpoint_path(std::path::Path::new("/a/audit.jsonl")),
            std::path::PathBuf::from("/a/audit.jsonl.checkpoint")
        );
    }
}
