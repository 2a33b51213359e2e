"""What the model reads back from each code-mode `exec`/`wait` call, before and after the
compact result format.

Every code-mode result lands in the session transcript twice over: its text (what the model
read) and its details (the whole result, telemetry included). "Before" is the format the model
used to read, the whole result as indented JSON (`json.dumps(details, indent=2)`); "after" is the
text the model actually read in this run. Both come from the same transcript entries of the
real turns, so nothing is estimated. Tokens are Nodmix's estimate, characters / 4.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nodmix.context.tokens import chars_to_tokens
from nodmix.messages import ToolResultMessage
from nodmix.runtime import Runtime
from nodmix.sessions.replay import messages_for_model

CODE_TOOLS = ("exec", "wait")


def old_format(details: Any) -> str:
    """The result text the model read before: the whole result, indented."""
    return json.dumps(details, indent=2, ensure_ascii=False, default=str)


def session_results(runtime: Runtime, key: str) -> list[ToolResultMessage]:
    """The code-mode tool results of one session, in order."""
    session = runtime.sessions.open(key)
    return [
        m
        for m in messages_for_model(session.entries)
        if isinstance(m, ToolResultMessage) and m.tool_name in CODE_TOOLS
    ]


def measure(results: Sequence[ToolResultMessage]) -> dict[str, Any]:
    """Characters and tokens per call, old format vs what the model read."""
    before = [len(old_format(m.details)) for m in results]
    after = [len(m.text) for m in results]
    calls = len(results)
    return {
        "calls": calls,
        "before_chars": sum(before),
        "after_chars": sum(after),
        "before_tokens": sum(chars_to_tokens(c) for c in before),
        "after_tokens": sum(chars_to_tokens(c) for c in after),
        "before_chars_per_call": sum(before) / calls if calls else 0.0,
        "after_chars_per_call": sum(after) / calls if calls else 0.0,
        "last_telemetry": results[-1].details.get("telemetry") if results else None,
    }


def table(rows: Sequence[dict[str, Any]], return_one: dict[str, Any]) -> list[str]:
    """Markdown: per workflow and catalog size, then the `return 1` row."""
    out = [
        "| workflow | catalog | exec/wait calls | before: chars (tokens) per call "
        "| after: chars (tokens) per call | after / before |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        m = r["result_size"]
        ratio = m["after_chars"] / m["before_chars"] if m["before_chars"] else 0.0
        out.append(
            f"| {r['workflow']} | {r['catalog']} | {m['calls']} "
            f"| {m['before_chars_per_call']:,.0f} ({m['before_tokens'] / m['calls']:,.0f}) "
            f"| {m['after_chars_per_call']:,.0f} ({m['after_tokens'] / m['calls']:,.0f}) "
            f"| {ratio:.2f} |"
        )
    out.append(
        f"| `return 1` | - | 1 | {return_one['before_chars']} ({return_one['before_tokens']}) "
        f"| {return_one['after_chars']} ({return_one['after_tokens']}) "
        f"| {return_one['after_chars'] / return_one['before_chars']:.2f} |"
    )
    return out
