//! A minimal, fast MCP server (stdio) used as the fixture of `benches/run.rs`: it answers
//! `initialize`, `tools/list` and `tools/call` (tool `echo`) with as little work as possible, so
//! the benchmark measures airlock rather than the server.

use std::io::{BufRead, BufWriter, Write};

use serde_json::{Value, json};

fn main() -> std::io::Result<()> {
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    for line in stdin.lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let result = match message.get("method").and_then(Value::as_str) {
            Some("initialize") => {
                json!({"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "mcp_echo", "version": "1"}})
            }
            Some("tools/list") => {
                json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
            }
            Some("tools/call") => {
                json!({"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]})
            }
            _ => json!({}),
        };
        serde_json::to_writer(
            &mut out,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}
