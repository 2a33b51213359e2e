"""Read and change `nodmix.json` by dotted key path (`a.b[0].c`).

Edits go through the same validation as loading, so a `set` that would make the file invalid is
refused before anything is written. The file is rewritten as formatted JSON (JSON5 comments are
not preserved); the write is atomic.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from nodmix.config.loader import validate
from nodmix.errors import ConfigError

_SEGMENT_RE = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_key(key: str) -> list[str | int]:
    """Split `agents.list[0].id` into `["agents", "list", 0, "id"]`."""
    key = key.strip()
    if not key:
        raise ConfigError("empty key path")
    out: list[str | int] = []
    pos = 0
    for match in _SEGMENT_RE.finditer(key):
        gap = key[pos : match.start()]
        if gap not in ("", "."):
            raise ConfigError(f"cannot parse key path {key!r}")
        out.append(int(match.group(2)) if match.group(2) is not None else match.group(1))
        pos = match.end()
    if pos != len(key):
        raise ConfigError(f"cannot parse key path {key!r}")
    return out


_MISSING = object()


def get_value(doc: Any, key: str) -> Any:
    """The value at a key path, or raise `ConfigError` when it is not set."""
    node = doc
    for seg in parse_key(key):
        in_list = isinstance(seg, int) and isinstance(node, list) and seg < len(node)
        in_dict = isinstance(seg, str) and isinstance(node, dict) and seg in node
        if in_list or in_dict:
            node = node[seg]
        else:
            raise ConfigError("not set", key=key)
    return node


def set_value(doc: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of `doc` with `value` at `key`, creating intermediate objects."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    segs = parse_key(key)
    node: Any = out
    for i, seg in enumerate(segs[:-1]):
        nxt = segs[i + 1]
        if isinstance(seg, int):
            if not isinstance(node, list) or seg > len(node):
                raise ConfigError("list index out of range", key=key)
            if seg == len(node):
                node.append([] if isinstance(nxt, int) else {})
            node = node[seg]
            continue
        if not isinstance(node, dict):
            raise ConfigError("cannot set a key inside a non-object value", key=key)
        if seg not in node or node[seg] is None:
            node[seg] = [] if isinstance(nxt, int) else {}
        node = node[seg]
    last = segs[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last > len(node):
            raise ConfigError("list index out of range", key=key)
        if last == len(node):
            node.append(value)
        else:
            node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ConfigError("cannot set a key inside a non-object value", key=key)
    return out


def unset_value(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """A copy of `doc` without `key`; raises `ConfigError` when it is not set."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    segs = parse_key(key)
    parent = get_value(out, _format(segs[:-1])) if len(segs) > 1 else out
    last = segs[-1]
    if isinstance(last, int) and isinstance(parent, list) and last < len(parent):
        parent.pop(last)
    elif isinstance(last, str) and isinstance(parent, dict) and last in parent:
        del parent[last]
    else:
        raise ConfigError("not set", key=key)
    return out


def _format(segs: list[str | int]) -> str:
    out = ""
    for seg in segs:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else seg)
    return out


def parse_cli_value(text: str, *, strict_json: bool = False) -> Any:
    """Interpret a command-line value: JSON5 when it parses, else a plain string."""
    import json5

    try:
        return json5.loads(text)
    except ValueError:
        if strict_json:
            raise ConfigError(f"not valid JSON: {text!r}") from None
        return text


def write_document(path: Path, doc: dict[str, Any]) -> None:
    """Validate `doc` and write it atomically to `path`, readable by its owner only (0600:
    it may hold API keys)."""
    validate(doc, file=str(path))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # usually the state dir
    data = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".nodmix-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
