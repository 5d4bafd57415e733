#!/usr/bin/env python3
"""Where a sequential `tools/call` round trip spends its time, segment by segment, from the system
calls of one process at a time: a proxy (airlock, a floor proxy) or a server.

Runs `benches/drivers/mcp_driver.c` (`seq`: each answer read before the next call) against
COMMAND, and after a few seconds of calls records 1.5 s of one process's `read`, `write`,
`flock`, `lseek` and `pwrite64` (perf's syscall tracepoints, filtered in the kernel: a few
events a call, so the process keeps nearly its own pace; tracing every process and the
scheduler at once doubled some segments). Prints the medians (the tracepoints' clock has a
resolution of 1 µs):

- for a proxy (`--trace proxy`: the process named `airlock`, or the bench's floor proxy):
  from its read of the host's line returning to each system call up to its write of the call to
  the server (the request's path), and from its read of the server's answer returning to its
  write of it to the host (the answer's path), and the four segments of whole calls in a row
  (request, the server's turn, answer, the host's turn);
- for the server (`--trace server`: the process whose command line holds SERVER_MATCH): from its
  read of a call returning to its write of the answer (its own work; it makes no other system
  call in between when it is the Node server-everything).

A traced system call costs about a µs more than an untraced one, and more in a process that
sleeps (perf's per-task events are switched at each sleep): compare the shapes of two processes'
segments, not their sums, and judge a change by the untraced round trip (`mcp_driver seq`).

The host's and the server's pipes are told apart by their inodes (`/proc/PID/fd`), not by
numbers. Needs root (perf) and a built driver:

    cc -O2 -o /tmp/mcp_driver benches/drivers/mcp_driver.c
    ARGKEY=message python3 benches/segments.py --trace proxy everything__echo \\
        target/release/airlock serve --config ev.toml --policy policy.toml
    ARGKEY=message python3 benches/segments.py --trace server echo node .../index.js stdio

Figures and what they showed: docs/run.md, "`serve` beside Node, segment by segment".
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

DRIVER = os.environ.get("MCP_DRIVER", "/tmp/mcp_driver")
CALLS = 300_000
SYSCALLS = {0: "read", 1: "write", 8: "lseek", 18: "pwrite64", 73: "flock"}
LINE = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+raw_syscalls:(sys_enter|sys_exit):\s+NR (-?\d+) (.*)$")


def pipe_inodes(pid):
    """fd -> pipe inode of every pipe `pid` holds."""
    inodes = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:["):
            inodes[int(fd)] = target[6:-1]
    return inodes


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def descendants(pid):
    found = []
    for child in children(pid):
        found.append(child)
        found.extend(descendants(child))
    return found


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def events(data):
    """(kind, nr, fd, time_us, ret) for each traced call of the main thread."""
    text = subprocess.run(
        ["perf", "script", "-i", data, "-F", "tid,time,event,trace"],
        capture_output=True, text=True, check=True,
    ).stdout
    entered = None
    for line in text.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        _, at, kind, nr, rest = match.groups()
        at = float(at) * 1e6
        nr = int(nr)
        if kind == "sys_enter":
            fd = int(re.match(r"\(([0-9a-f]+)", rest).group(1), 16)
            entered = fd
            yield ("enter", nr, fd, at, None)
        elif entered is not None:
            yield ("exit", nr, entered, at, int(rest.lstrip("= ")))


def proxy_segments(evs, host_in, host_out, server_in, server_out):
    request, answer, turnaround = {}, [], []
    read_at = step = None
    answer_at = answered_at = None
    for kind, nr, fd, at, ret in evs:
        if kind == "exit" and nr == 0 and ret and ret > 0 and fd == host_in:
            read_at, step = at, 0
            if answered_at is not None:
                turnaround.append(at - answered_at)
                answered_at = None
            continue
        if kind == "exit" and nr == 0 and ret and ret > 0 and fd == server_out:
            answer_at = at
            continue
        if kind == "enter" and nr == 1 and fd == host_out and answer_at is not None:
            answer.append(at - answer_at)
            answer_at = None
            answered_at = at
        if read_at is not None:
            step += 1
            where = {host_in: "host", host_out: "host", server_in: "server", server_out: "server"}
            name = f"{step}. {kind} {SYSCALLS.get(nr, nr)}({where.get(fd, 'fd %d' % fd)})"
            request.setdefault(name, []).append(at - read_at)
            if kind == "enter" and nr == 1 and fd == server_in:
                read_at = None
    calls = max((len(v) for v in request.values()), default=0)
    print("the request's path, from the host's line read (µs, p50):")
    for name, offsets in sorted(request.items(), key=lambda kv: int(kv[0].split(".")[0])):
        if len(offsets) >= calls / 2:
            print(f"  {name:40} +{statistics.median(offsets):5.1f}")
    if answer:
        print(f"the answer's path, server's answer read -> written to the host: {statistics.median(answer):.1f} µs")
    if turnaround:
        print(f"the answer written -> the host's next line read (the host's turn): {statistics.median(turnaround):.1f} µs")
    cycle(evs, host_in, host_out, server_in, server_out)


def cycle(evs, host_in, host_out, server_in, server_out):
    """Each whole call seen from the proxy: the four segments of one call in a row, so their
    medians can be read beside the median of their sum."""
    marks = []
    for kind, nr, fd, at, ret in evs:
        if kind == "exit" and nr == 0 and ret and ret > 0 and fd in (host_in, server_out):
            marks.append(("host read" if fd == host_in else "server read", at))
        elif kind == "enter" and nr == 1 and fd in (host_out, server_in):
            marks.append(("host write" if fd == host_out else "server write", at))
    order = ["host read", "server write", "server read", "host write"]
    names = ["request", "server's turn", "answer", "host's turn"]
    rows = []
    for i in range(len(marks) - 4):
        window = marks[i:i + 5]
        if [m[0] for m in window[:4]] == order and window[4][0] == "host read":
            rows.append([b[1] - a[1] for a, b in zip(window, window[1:])])
    if rows:
        medians = ", ".join(f"{n} {statistics.median(r[k] for r in rows):.1f}" for k, n in enumerate(names))
        print(f"whole calls in a row ({len(rows)}), p50 µs: {medians}; their sum {statistics.median(sum(r) for r in rows):.1f}")


def server_segments(evs):
    work, read_at = [], None
    for kind, nr, fd, at, ret in evs:
        if kind == "exit" and nr == 0 and ret and ret > 0 and fd == 0:
            read_at = at
        elif kind == "enter" and nr == 1 and fd == 1 and read_at is not None:
            work.append(at - read_at)
            read_at = None
    if work:
        print(f"the server's own work, call read -> answer written: p50 {statistics.median(work):.1f} µs over {len(work)} calls")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", choices=["proxy", "server"], required=True)
    parser.add_argument("--server-match", default="server-everything",
                        help="a word of the server's command line (--trace server)")
    parser.add_argument("tool")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    driver = subprocess.Popen([DRIVER, "seq", str(CALLS), args.tool] + args.command,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(3)
    below = descendants(driver.pid)
    if args.trace == "proxy":
        proxy = below[0]
        target = proxy
    else:
        target = next(p for p in reversed(below)
                      if args.server_match in cmdline(p) and "airlock" not in cmdline(p).split()[0])
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "perf.data")
        ids = " || ".join(f"id == {nr}" for nr in SYSCALLS)
        # The proxy's pipes, read now while they are open.
        if args.trace == "proxy":
            driver_pipes = set(pipe_inodes(driver.pid).values())
            mine = pipe_inodes(proxy)
            host = {fd for fd, inode in mine.items() if inode in driver_pipes}
        subprocess.run(["perf", "record", "-q", "-e", "raw_syscalls:sys_enter", "--filter", ids,
                        "-e", "raw_syscalls:sys_exit", "--filter", ids, "-t", str(target),
                        "-o", data, "--", "sleep", "1.5"],
                       stderr=subprocess.DEVNULL, check=True)
        evs = list(events(data))
    print(driver.communicate()[0].strip().splitlines()[-1], "(the whole run, traced for 1.5 s)")
    if args.trace == "server":
        server_segments(evs)
        return
    reads = {fd for kind, nr, fd, _, ret in evs if kind == "exit" and nr == 0 and ret and ret > 0}
    writes = {fd for kind, nr, fd, _, _ in evs if kind == "enter" and nr == 1}
    host_in = next(iter(reads & host), None)
    host_out = next(iter(writes & host - {host_in}), None)
    server_pipes = set(mine) - host
    server_out = next(iter((reads - host) & server_pipes), None)
    server_in = next(iter((writes - host) & server_pipes), None)
    if None in (host_in, host_out, server_in, server_out):
        sys.exit(f"could not tell the pipes apart: host {sorted(host)}, reads {sorted(reads)}, writes {sorted(writes)}")
    proxy_segments(evs, host_in, host_out, server_in, server_out)


if __name__ == "__main__":
    main()
