"""A hostile MCP server (stdio, raw JSON-RPC): it answers quick requests wrongly on purpose.

Each tool names one misbehaviour, applied to its own answer: `twice` answers twice, `forged`
answers under another quick id first, `garbage` answers with a non-object line, `broken_utf8`
sends invalid UTF-8 before its answer, `stall` stops reading stdin, `hush` closes stdout and
stays alive, `fork` leaves a child holding the pipes and answers its pid, `flood` sends `count` log
messages first. `echo` answers normally.
Given a path as its argument, the server appends every line it reads there.
"""

from __future__ import annotations

import json
import os
import sys
import time

TOOLS = ["flood", "echo", "twice", "forged", "garbage", "broken_utf8", "stall", "hush", "fork"]
out = sys.stdout.buffer


def send(message: object) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def result(text: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def call(request_id: object, name: str, arguments: dict[str, object]) -> None:
    answer = {"jsonrpc": "2.0", "id": request_id, "result": result(f"{name}:{arguments}")}
    if name == "twice":
        send(answer)
        send({**answer, "result": result("second answer")})
    elif name == "forged":
        forged = f"nodmix-quick-{int(str(request_id).rsplit('-', 1)[-1]) + 1}"
        send({"jsonrpc": "2.0", "id": forged, "result": result("forged")})
        send(answer)
    elif name == "garbage":
        out.write(b'["nodmix-quick-garbage", 1]\n' + f'"{request_id}"\n'.encode())
        out.flush()
        send({"jsonrpc": "2.0", "id": request_id, "result": "not an object"})
    elif name == "broken_utf8":
        out.write(b'{"jsonrpc":"2.0","method":"x","params":{"a":"\xff\xfe"}}\n')
        out.flush()
        send(answer)
    elif name == "stall":
        time.sleep(float(arguments.get("seconds", 30)))
        send(answer)
    elif name == "hush":
        os.close(1)
        time.sleep(float(arguments.get("seconds", 60)))
        sys.exit(0)
    elif name == "flood":
        note = {"jsonrpc": "2.0", "method": "notifications/message"}
        line = json.dumps({**note, "params": {"level": "info", "data": "x" * 1000}}).encode()
        out.write((line + b"\n") * int(arguments.get("count", 100000)))
        send(answer)
    elif name == "fork":
        child = os.fork()
        if child == 0:
            time.sleep(float(arguments.get("seconds", 60)))
            os._exit(0)
        send({**answer, "result": result(str(child))})
    else:
        send(answer)


def main() -> None:
    record = open(sys.argv[1], "ab", buffering=0) if len(sys.argv) > 1 else None  # noqa: SIM115
    for line in sys.stdin.buffer:
        if record is not None:
            record.write(line)
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "hostile", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "tools/call":
            params = message["params"]
            call(request_id, params["name"], params.get("arguments") or {})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main()
