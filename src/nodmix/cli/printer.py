"""How the terminal shows a turn as it happens, in process or through a gateway: answer text on
stdout, tool activity on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any


class EventPrinter:
    """Shows a turn as it happens: answer text on stdout, tool activity on stderr."""

    def __init__(self, *, stream_text: bool) -> None:
        self.stream_text = stream_text
        self.streamed = False
        self.mid_line = False

    def __call__(self, event: Any) -> None:
        kind = getattr(event, "kind", "")
        if kind == "text_delta" and self.stream_text:
            sys.stdout.write(event.text)
            sys.stdout.flush()
            self.streamed = True
            self.mid_line = not event.text.endswith("\n")
        elif kind == "tool_started":
            self._line(f"{_indent(event)}→ {event.tool_name}({_args(event.arguments)})")
        elif kind == "tool_finished":
            mark = "✗" if event.result.is_error else "✓"
            name = event.result.tool_name
            self._line(f"{_indent(event)}{mark} {name} ({event.duration_ms:.0f} ms)")
        elif kind == "tool_progress":
            self._line(f"{_indent(event)}  … {event.text}")
        elif kind == "approval_resolved" and event.decision == "timeout":
            self._line(f"! approval {event.id} timed out: the command was not run")
        elif kind == "model_fallback":
            self._line(f"! {event.failed} failed ({event.error}); trying {event.next}")
        elif kind in ("notice", "compaction") and getattr(event, "message", None) is None:
            text = getattr(event, "text", None)
            if text:
                self._line(text if getattr(event, "level", None) == "info" else f"! {text}")
        elif kind == "compaction":
            self._line(f"! {event.message}")

    def _line(self, text: str) -> None:
        if self.mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False
        print(text, file=sys.stderr)


def _indent(event: Any) -> str:
    return "    " if getattr(event, "parent_call_id", None) else "  "


def _args(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = text.replace("\n", "⏎")
        parts.append(f"{key}={text[:60] + '…' if len(text) > 60 else text}")
    return ", ".join(parts)[:160]
