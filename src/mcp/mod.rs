//! MCP on the wire: framing (newline-delimited JSON with a maximum line size), message classes,
//! ids and protocol versions. Pure: no policy, no processes.
//!
//! Messages are parsed to `serde_json::Value` and only what the gate needs is looked at, so
//! unknown fields, methods and `_meta` pass through unchanged. Server answers are first read
//! with [`peek`], which takes those few fields without building the rest of the tree.

pub mod field;
pub mod framing;
pub mod lenient;
pub mod message;
pub mod nesting;
pub mod peek;
pub mod strict;
pub mod version;

pub use field::Field;
pub use framing::{DEFAULT_MAX_LINE_BYTES, Frame, LineReader};
pub use message::{
    Class, Invalid, Unreadable, classify, code, error_response, id_key, notification, request,
    result_response, salvage_id, tool_error_result, unreadable_line_reply,
};
pub use peek::{Peek, peek, splice_id};
pub use version::Era;

/// `T` read from one line as `serde_json::from_slice` reads it. A line that is UTF-8 as a whole
/// (every line that can parse: any byte above ASCII must be inside a string) is read as text, so
/// serde_json does not check each of its strings again; any other line is read as bytes, for
/// serde_json's own error at the right place.
pub fn from_line<'a, T: serde::Deserialize<'a>>(line: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    }
}

/// `_meta` key naming the server in a 2026-07-28 result (its `serverInfo` moved there).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The `_meta` key that ties a message to a task (protocol 2025-11-25).
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The task an answer created (a `CreateTaskResult`'s `result.task.taskId`).
pub fn created_task(answer: &serde_json::Value) -> Option<&str> {
    answer
        .at(&["result", "task", "taskId"])
        .and_then(serde_json::Value::as_str)
}

/// Whether a task's status is final (`completed`, `failed`, `cancelled`): the task has ended.
pub fn task_ended(status: Option<&serde_json::Value>) -> bool {
    matches!(
        status.and_then(serde_json::Value::as_str),
        Some("completed" | "failed" | "cancelled")
    )
}

/// The `nextCursor` of a listing page, when it names a next page: a non-empty string. Absent,
/// `null`, `""` or anything else ends the listing, as the SDKs' clients read it. Every reader
/// of pages here asks this one function: two ideas of "the last page" let a listing that ends
/// with `""` count as never finished for one reader and finished for the other.
pub fn next_cursor(result: &serde_json::Value) -> Option<&str> {
    result
        .get("nextCursor")
        .and_then(serde_json::Value::as_str)
        .filter(|cursor| !cursor.is_empty())
}

/// The length of `value` encoded, without keeping the encoding.
pub fn encoded_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn a_line_reads_as_serde_json_reads_its_bytes() {
        let lines: [&[u8]; 6] = [
            br#"{"id":1,"result":{"text":"caf\u00e9 \"x\""}}"#,
            "{\"text\":\"café ☃\"}".as_bytes(),
            b"{\"a\":\"\xff\"}",
            b"{\"a\":1}\xff",
            b"[1,2",
            b"  \"\\ud800\"  ",
        ];
        for line in lines {
            let read = super::from_line::<Value>(line).map_err(|e| e.to_string());
            let plain = serde_json::from_slice::<Value>(line).map_err(|e| e.to_string());
            assert_eq!(read, plain, "{}", String::from_utf8_lossy(line));
        }
    }
}
