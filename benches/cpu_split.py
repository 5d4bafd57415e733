#!/usr/bin/env python3
"""Where the time of one `tools/call` round trip goes, per process, with everything on one vCPU.

The latency benches (`cargo bench --bench run`, `--bench serve`) measure round trips across two
vCPUs, where every hop's wake-up cost (see README "Performance", halt polling) adds noise of the
same size as airlock's own cost. Pinned to one vCPU there is no cross-vCPU wake-up: a round trip's
wall time is the CPU time of the processes on its path, and this script splits it into the
client (this script), the proxy (airlock, or the byte-copy floor proxy) and the server, from each
process's CPU time in /proc (schedstat, all threads). Same calls, same run, four paths: direct, the floor proxy,
`airlock run`, `airlock serve`; for the native echo server and, when installed by
`bash .ci/install-peers`, the official server-everything.

Usage (builds first; the floor proxy is the `run` bench binary in its proxy mode):
    cargo build --release --bin airlock --example mcp_echo && cargo bench --bench run --no-run
    python3 benches/cpu_split.py            # CALLS=20000 ROUNDS=3 by default
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS = int(os.environ.get("CALLS", "20000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
WARMUP = 500


def newest_bench_binary(name):
    candidates = [
        path
        for path in glob.glob(os.path.join(ROOT, "target/release/deps", name + "-*"))
        if os.access(path, os.X_OK) and not path.endswith(".d")
    ]
    if not candidates:
        sys.exit(f"no {name} bench binary: run `cargo bench --bench {name} --no-run` first")
    return max(candidates, key=os.path.getmtime)


def tree(pid):
    """`pid` and every descendant (the sandbox's helper, init and server)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in glob.glob(f"/proc/{current}/task/*/children"):
            try:
                with open(task) as children:
                    queue.extend(int(child) for child in children.read().split())
            except OSError:
                pass
    return found


def cpu_ns(pids):
    """(name, pid) -> CPU time in ns, all threads (schedstat: exact, unlike the tick counts)."""
    spent = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as comm:
                name = comm.read().strip()
            total = 0
            for task in glob.glob(f"/proc/{pid}/task/*/schedstat"):
                with open(task) as stat:
                    total += int(stat.read().split()[0])
        except OSError:
            continue
        spent[(name, pid)] = total
    return spent


class Peer:
    def __init__(self, argv, env):
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            bufsize=0,
        )
        self.buffer = b""

    def send(self, text):
        self.process.stdin.write(text.encode() + b"\n")

    def answer(self, id_):
        marker = b'"id":%d' % id_
        while True:
            while b"\n" not in self.buffer:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    sys.exit(f"the peer closed its output (exit {self.process.wait()})")
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            if marker in line:
                return line

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def measure(argv, tool, argument, env):
    peer = Peer(argv, env)
    peer.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "cpu-split", "version": "1"},
                },
            }
        )
    )
    peer.answer(0)
    peer.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def call(id_):
        peer.send(
            '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{"%s":"hello %d"}}}'
            % (id_, tool, argument, id_)
        )
        line = peer.answer(id_)
        if b"hello" not in line:
            sys.exit(f"bad answer: {line[:200]!r}")

    for id_ in range(1, WARMUP + 1):
        call(id_)
    pids = tree(peer.process.pid)
    me = [os.getpid()]
    before, own_before, started = cpu_ns(pids), cpu_ns(me), time.perf_counter()
    for id_ in range(WARMUP + 1, WARMUP + 1 + CALLS):
        call(id_)
    wall = time.perf_counter() - started
    after, own_after = cpu_ns(pids), cpu_ns(me)
    peer.close()
    per_call = lambda seconds: seconds / CALLS * 1e6  # noqa: E731
    proxy = server = 0.0
    for key, total in after.items():
        if key not in before:
            continue
        spent = (total - before[key]) / 1e9
        # The proxy is the process this script started (airlock or the floor proxy); its helper
        # and init sleep; the server is the deepest one that worked.
        if key[1] == peer.process.pid:
            proxy += spent
        else:
            server += spent
    if len(after) == 1:  # direct: the process started is the server
        proxy, server = 0.0, proxy
    driver = sum(own_after.values()) / 1e9 - sum(own_before.values()) / 1e9
    return per_call(wall), per_call(driver), per_call(proxy), per_call(server)


def main():
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    airlock = os.path.join(ROOT, "target/release/airlock")
    echo = os.path.join(ROOT, "target/release/examples/mcp_echo")
    for path in (airlock, echo):
        if not os.access(path, os.X_OK):
            sys.exit(f"missing {path}: cargo build --release --bin airlock --example mcp_echo")
    floor = newest_bench_binary("run")
    work = tempfile.mkdtemp(prefix="airlock-cpu-split-")
    node = shutil.which("node")
    everything = os.path.join(
        ROOT, ".peers/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    )
    servers = [("native echo", [echo], "echo", "text")]
    if node and os.path.exists(everything):
        servers.append(("server-everything", [node, everything, "stdio"], "echo", "message"))
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as out:
        commands = ", ".join(json.dumps(argv[0]) for _, argv, _, _ in servers)
        reads = ", ".join(json.dumps(p) for p in (os.path.dirname(echo), os.path.join(ROOT, ".peers")))
        out.write(f"version = 1\n[launch]\nallow_commands = [{commands}]\n[sandbox]\nread = [{reads}]\n")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"))
    floor_env = dict(env, AIRLOCK_BENCH_PROXY="tokio")
    print(f"one vCPU, {CALLS} calls per figure, {ROUNDS} rounds; µs per call (CPU: user + system, all threads)")
    print("| server | path | wall | client CPU | proxy CPU | server CPU |")
    print("|---|---|---|---|---|---|")
    for label, argv, tool, argument in servers:
        # One server name per server: the pins of one must not meet the other's tools.
        short = "echo" if argv[0] == echo else "everything"
        config = os.path.join(work, f"{short}.toml")
        with open(config, "w") as out:
            out.write(f"[servers.{short}]\n")
            out.write("command = %s\nargs = %s\n" % (json.dumps(argv[0]), json.dumps(argv[1:])))
        audit = ["--audit", os.path.join(work, "audit.jsonl")]
        paths = [
            ("direct", argv, tool, env),
            ("floor proxy", [floor] + argv, tool, floor_env),
            ("airlock run", [airlock, "run", "--policy", policy] + audit + ["--"] + argv, tool, env),
            ("airlock serve", [airlock, "serve", "--policy", policy, "--config", config] + audit, short + "__" + tool, env),
        ]
        for round_ in range(ROUNDS):
            for name, command, called, path_env in paths:
                wall, driver, proxy, server = measure(command, called, argument, path_env)
                shown_proxy = "–" if name == "direct" else f"{proxy:.1f}"
                print(f"| {label} | {name} (round {round_ + 1}) | {wall:.1f} | {driver:.1f} | {shown_proxy} | {server:.1f} |")
                sys.stdout.flush()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
