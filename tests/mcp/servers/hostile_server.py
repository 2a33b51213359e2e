"""A hostile stdio MCP server, speaking raw JSON lines (no SDK), for the quick-call red team.

It speaks the initialize handshake (`server/discover` is refused, so clients fall back) and
offers tools that behave well (`echo`, `slow_echo`) or break the protocol in one way each:

- `deafen`: answers; from the next `tools/call` on, the server never reads its stdin again
  (that call is never answered, and the pipe fills up).
- `twice`: answers its request twice (the second answer says `"second"`).
- `garbage`: writes lines that are no JSON-RPC message (non-objects, broken JSON, invalid
  UTF-8, a nesting deeper than any parser's recursion limit, all quoting a quick id),
  then answers.
- `bad_utf8`: answers with a text holding a byte that is not UTF-8.
- `forge`: answers the id `target` (another call's) with `"forged"`, then its own call.
- `fork`: starts a child that keeps stdout open and sleeps, and answers with its pid;
  `exit`: the server exits at once, leaving that child behind.

`echo` and `slow_echo` answer with the JSON text of their `value`, so tests can check each
call got its own answer. When the environment variable `HOSTILE_LOG` names a file, each
`tools/call` received is recorded there (`called <id>`), and each `notifications/cancelled`
(`cancelled <id>`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

_out = sys.stdout.buffer
_lock = threading.Lock()

TOOLS = ["echo", "slow_echo", "deafen", "twice", "garbage", "bad_utf8", "forge", "fork", "exit"]


def write(line: bytes) -> None:
    with _lock:
        _out.write(line + b"\n")
        _out.flush()


def send(message: dict[str, Any]) -> None:
    write(json.dumps(message).encode())


def text(request_id: Any, value: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [_text(value)]}})


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_list() -> dict[str, Any]:
    schema = {"type": "object", "additionalProperties": True}
    return {"tools": [{"name": n, "description": n, "inputSchema": schema} for n in TOOLS]}


def call(request_id: Any, name: str, args: dict[str, Any]) -> bool:
    """Handle one tools/call; True when the next one should make the server deaf."""
    value = json.dumps(args.get("value"))
    if name == "echo":
        text(request_id, value)
    elif name == "slow_echo":
        seconds = float(args.get("seconds", 0.2))
        threading.Timer(seconds, text, (request_id, value)).start()
    elif name == "deafen":
        text(request_id, "deaf")
        return True
    elif name == "twice":
        text(request_id, value)
        text(request_id, "second")
    elif name == "garbage":
        quoted = json.dumps(str(request_id)).encode()
        for line in (
            b"[" + quoted + b"]",
            quoted,
            b"42",
            b"null",
            b'{"jsonrpc": "2.0", "id": ' + quoted + b', "result": ',
            b'{"jsonrpc": "2.0", "id": ' + quoted + b', "\xff\xfe": {}}',
            b'{"jsonrpc": "2.0", "id": ' + quoted + b', "result": ' + b"[" * 100_000,
            b'{"id": ' + quoted + b', "error": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        ):
            write(line)
        text(request_id, value)
    elif name == "bad_utf8":
        write(
            b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'
            b'{"content":[{"type":"text","text":"caf\xe9"}]}}'
        )
    elif name == "forge":
        text(args["target"], "forged")
        text(request_id, value)
    elif name == "fork":
        child = os.fork()
        if child == 0:  # keeps the inherited stdout open
            time.sleep(300)
            os._exit(0)
        text(request_id, str(child))
    elif name == "exit":
        os._exit(0)
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": name}})
    return False


def record(what: str, request_id: Any) -> None:
    log = os.environ.get("HOSTILE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{what} {request_id}\n")


def main() -> None:
    deaf = False
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "nodmix-hostile-test", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": tool_list()})
        elif method == "tools/call":
            record("called", request_id)
            while deaf:  # never read stdin again
                time.sleep(60)
            deaf = call(request_id, params["name"], params.get("arguments") or {})
        elif method == "notifications/cancelled":
            record("cancelled", params.get("requestId"))
        elif request_id is not None:
            error = {"code": -32601, "message": f"method not found: {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})


if __name__ == "__main__":
    main()
