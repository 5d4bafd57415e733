#!/usr/bin/env python3
"""A tiny MCP server (stdlib only) for trying airlock: `echo` and `whoami` tools.

    airlock run --name demo -- python3 examples/demo_server.py

`whoami` reports what the server can see from inside the sandbox (uid, HOME, whether ~/.ssh and
the network are reachable), so you can watch the confinement work.
"""
import json
import os
import socket
import sys

TOOLS = [
    {"name": "echo", "description": "Echo the text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "whoami", "description": "Describe the sandbox this server runs in.",
     "inputSchema": {"type": "object", "properties": {}}},
]


def probe():
    facts = {"uid": os.getuid(), "home": os.environ.get("HOME"), "env_names": sorted(os.environ)}
    try:
        os.listdir(os.path.expanduser("~root/.ssh"))
        facts["root_ssh_dir"] = "readable"
    except OSError as err:
        facts["root_ssh_dir"] = f"refused ({err.strerror})"
    try:
        socket.create_connection(("127.0.0.1", 22), timeout=1).close()
        facts["tcp_127.0.0.1:22"] = "connected"
    except OSError as err:
        facts["tcp_127.0.0.1:22"] = f"refused ({err.strerror})"
    return facts


def answer(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "airlock-demo", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "echo":
            return {"content": [{"type": "text", "text": str(args.get("text", ""))}]}
        if name == "whoami":
            return {"content": [{"type": "text", "text": json.dumps(probe())}]}
        return {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}
    if method == "ping":
        return {}
    return None


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" not in message or "method" not in message:
        continue
    result = answer(message)
    if result is None:
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "method not found"}}
    else:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
