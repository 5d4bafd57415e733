//! A stdio MCP peer the benches drive line by line: started, handed `initialize`, then measured.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub struct Peer {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
}

/// Starts `program` with `args` and `env` and completes its `initialize`.
pub fn start(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Peer {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {}: {err}", program.display()));
    let stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut peer = Peer {
        child,
        stdin,
        stdout,
    };
    peer.stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n")
        .expect("write");
    let mut line = String::new();
    peer.stdout.read_line(&mut line).expect("initialize answer");
    assert!(line.contains("\"result\""), "initialize failed: {line}");
    peer
}

impl Peer {
    /// Closes its input and waits for it to exit.
    pub fn finish(self) {
        let Peer {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let _ = child.wait();
    }
}
