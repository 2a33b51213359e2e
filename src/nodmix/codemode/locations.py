"""Guest error locations mapped back to the program the model wrote.

The sandbox reports `line:column` in the script it ran. For JavaScript that is the program
inside a one-line async wrapper: lines match, and only columns of the first line are shifted by
the wrapper's opening. TypeScript is re-printed by the transform (types gone, statements
re-indented, objects split over lines), and the transform emits no source map, so lines are
matched back by their tokens: generated lines are aligned, in order, with the program lines
that share most of their identifiers and literals, and the column is that of the same token
in the program line. This is exact for the usual one-statement-per-line code and close
(the right statement) otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from nodmix.sandbox.base import Failed
from nodmix.sandbox.prelude import wrap_async

if TYPE_CHECKING:
    from nodmix.codemode.runs import RunState

_WRAPPER_WIDTH: Final = len(wrap_async("").split("\n", 1)[0])
_TOKEN: Final = re.compile(r"[A-Za-z_$][\w$]*|\d[\w.]*")
_WINDOW: Final = 60
_LOCATION: Final = re.compile(r" \(at cell\.js:(\d+):(\d+)\)$")


@dataclass(frozen=True, slots=True)
class SourceMap:
    """How to map a location in the script the sandbox ran back to the program."""

    program: str
    generated: str | None = None
    """The transformed script (TypeScript), or None when the program ran as written."""

    @property
    def filename(self) -> str:
        """The name errors use for the program: `cell.js` or `cell.ts`."""
        return "cell.js" if self.generated is None else "cell.ts"

    def locate(self, line: int, column: int) -> tuple[int, int]:
        """The program's `(line, column)` (1-based) for a location in the script that ran."""
        if self.generated is None:
            if line == 1:
                column = max(1, column - _WRAPPER_WIDTH)
            return line, column
        return _map_generated(self.program, self.generated, line, column)

    def rewrite(self, message: str) -> tuple[str, int, int] | None:
        """`message` with its trailing `(at cell.js:L:C)` mapped, plus the mapped line and
        column; None when the message carries no location."""
        match = _LOCATION.search(message)
        if match is None:
            return None
        line, column = self.locate(int(match.group(1)), int(match.group(2)))
        head = message[: match.start()]
        return f"{head} (at {self.filename}:{line}:{column})", line, column


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(_strip_strings(text))


def _strip_strings(text: str) -> str:
    # Quote styles differ after the transform; compare what is inside strings as plain words.
    return text.replace('"', " ").replace("'", " ").replace("`", " ")


def _map_generated(program: str, generated: str, line: int, column: int) -> tuple[int, int]:
    source_lines = program.split("\n")
    gen_lines = generated.split("\n")
    source_tokens = [set(_tokens(text)) for text in source_lines]
    pointer = 0
    # Generated line 1 is the wrapper's opening; program line k is generated line >= k.
    for index in range(1, min(line, len(gen_lines))):
        wanted = set(_tokens(gen_lines[index]))
        if not wanted:
            continue
        best, best_score = pointer, 0.0
        for candidate in range(pointer, min(len(source_lines), pointer + _WINDOW)):
            score = len(wanted & source_tokens[candidate]) / len(wanted)
            if score > best_score:
                best, best_score = candidate, score
                if score == 1.0:
                    break
        if best_score > 0:
            pointer = best
    gen_text = gen_lines[line - 1] if 0 < line <= len(gen_lines) else ""
    src_text = source_lines[pointer] if pointer < len(source_lines) else ""
    return pointer + 1, _map_column(gen_text, src_text, column)


def _map_column(gen_text: str, src_text: str, column: int) -> int:
    """The column of the token at `column` of `gen_text` in `src_text` (same occurrence)."""
    indent = len(src_text) - len(src_text.lstrip())
    position = column - 1
    for match in _TOKEN.finditer(gen_text):
        if match.end() <= position:
            continue
        token = match.group(0)
        word = re.compile(rf"(?<![\w$]){re.escape(token)}(?![\w$])")
        occurrence = len(word.findall(gen_text[: match.start()]))
        found = [m.start() for m in word.finditer(src_text)]
        if found:
            return found[min(occurrence, len(found) - 1)] + 1
        break
    return indent + 1


def guest_error(state: RunState, outcome: Failed) -> tuple[str, dict[str, Any] | None]:
    """The message of an uncaught guest exception with its location mapped to the program,
    and the structured `guestError` details (`name`, `message`, `line`, `column`)."""
    message = outcome.message
    details: dict[str, Any] = {"name": outcome.error_name, "message": outcome.error_message}
    source_map = state.source_map
    mapped = source_map.rewrite(message) if isinstance(source_map, SourceMap) else None
    if mapped is not None:
        message, details["line"], details["column"] = mapped
    if not outcome.error_name and not outcome.error_message:
        return message, None
    return message, details


def value_too_large(size: int, state: RunState) -> str:
    """Why a returned value was refused, and how to return less."""
    limit = state.settings.max_output_bytes
    return (
        f"code mode output limit exceeded: the returned value is {size:,} bytes of JSON, over "
        f"the {limit:,}-byte limit (maxOutputBytes). Return less: a count or summary, the "
        "first items (`.slice(0, 20)`), or only the fields you need (`.map(x => ({ id: x.id "
        "}))`), and log key lines with console.log instead of returning everything."
    )


def output_too_large(state: RunState) -> str:
    """Why printed output (`text()`, `json()`, `console.*`) was refused, and how to print less."""
    limit = state.settings.max_output_bytes
    written = state.output_bytes
    refused = state.output_refused_bytes
    return (
        f"code mode output limit exceeded: text(), json() and console output had written "
        f"{written:,} bytes, and the next item ({refused:,} bytes) would pass the {limit:,}-byte "
        "limit (maxOutputBytes). Print less: counts or a summary instead of whole records, the "
        "first lines (`.slice(0, 20)`), or only the fields you need; or return the data as "
        "the value (it has its own limit of the same size) instead of printing it."
    )
