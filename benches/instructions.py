#!/usr/bin/env python3
"""airlock's own instructions per `tools/call`, counted by callgrind: stable whatever else runs on
the machine, so a change to the per-call path can be judged without the latency benches' noise.

Drives `airlock run` and `airlock serve` (with the native echo server) under
`valgrind --tool=callgrind` with 64 calls in flight, once with 1,000 calls and once with 5,000,
and prints the difference per call (start-up and shutdown cancel out). Under valgrind SHA-256
runs without the CPU's SHA extensions: about 37.7k of each figure is the audit chain's hashing,
which natively is a small share. Figures and what they showed: docs/run.md, "Performance".

Usage (builds first; needs valgrind):
    cargo build --release --bin airlock --example mcp_echo
    python3 benches/instructions.py            # both modes
    python3 benches/instructions.py serve      # one
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.path.join(ROOT, "target/release/airlock")
ECHO = os.path.join(ROOT, "target/release/examples/mcp_echo")
IN_FLIGHT = 64


def drive(mode, calls, work):
    """Runs `calls` pipelined calls through airlock under callgrind; returns its instruction count."""
    out = os.path.join(work, f"callgrind.{mode}.{calls}")
    audit = ["--audit", os.path.join(work, "audit.jsonl")]
    policy = ["--policy", os.path.join(work, "policy.toml")]
    if mode == "run":
        argv = [AIRLOCK, "run"] + policy + audit + ["--", ECHO]
        tool = "echo"
    else:
        argv = [AIRLOCK, "serve"] + policy + ["--config", os.path.join(work, "echo.toml")] + audit
        tool = "echo__echo"
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"))
    child = subprocess.Popen(
        valgrind + argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )

    def send(message):
        child.stdin.write((json.dumps(message) + "\n").encode())
        child.stdin.flush()

    send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "instructions", "version": "1"}}})
    child.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    if mode == "serve":
        send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        child.stdout.readline()
    slots = threading.Semaphore(IN_FLIGHT)

    def writer():
        for n in range(calls):
            slots.acquire()
            send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                  "params": {"name": tool, "arguments": {"text": "hello"}}})

    thread = threading.Thread(target=writer)
    thread.start()
    for _ in range(calls):
        line = child.stdout.readline()
        if b'"result"' not in line:
            sys.exit(f"a call failed: {line!r}")
        slots.release()
    thread.join()
    child.stdin.close()
    child.wait()
    summary = subprocess.run(["callgrind_annotate", out], capture_output=True, text=True).stdout
    total = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", summary)
    if not total:
        sys.exit(f"no total in {out}")
    return int(total.group(1).replace(",", ""))


def main():
    for path in (AIRLOCK, ECHO):
        if not os.access(path, os.X_OK):
            sys.exit(f"missing {path}: cargo build --release --bin airlock --example mcp_echo")
    modes = sys.argv[1:] or ["run", "serve"]
    with tempfile.TemporaryDirectory(prefix="airlock-instructions-") as work:
        with open(os.path.join(work, "policy.toml"), "w") as out:
            out.write(f"version = 1\n[launch]\nallow_commands = [{json.dumps(ECHO)}]\n"
                      f"[sandbox]\nread = [{json.dumps(os.path.dirname(ECHO))}]\n")
        with open(os.path.join(work, "echo.toml"), "w") as out:
            out.write(f"[servers.echo]\ncommand = {json.dumps(ECHO)}\n")
        for mode in modes:
            few, many = drive(mode, 1000, work), drive(mode, 5000, work)
            print(f"{mode}: {(many - few) / 4000:,.0f} instructions per call in airlock")


if __name__ == "__main__":
    main()
