"""A friendly pre-check for module access (`import`, `import()`, `require`) in guest source.

This is a convenience that turns an obvious mistake into a clear `module_access_denied`
message before anything runs. It is NOT the security control and it can be fooled
(`eval("imp" + "ort('x')")`): the real controls are that the sandbox's module loader refuses
every specifier, `require` does not exist, and the guest has no module system at all.

The scan ignores comments, string literals and template text, so `"please import this"` does
not trigger it. Regular-expression literals are recognized heuristically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

MODULE_ACCESS_DENIED: Final = "module_access_denied"

ModuleAccessKind = Literal["static_import", "dynamic_import", "import_meta", "require"]

_PATTERNS: Final[tuple[tuple[ModuleAccessKind, re.Pattern[str]], ...]] = (
    ("import_meta", re.compile(r"(?<![.\w$])import\s*\.\s*meta\b")),
    ("dynamic_import", re.compile(r"(?<![.\w$])import\s*\(")),
    ("static_import", re.compile(r"(?<![.\w$])import(?:\s*[\"'{*]|\s+[A-Za-z_$])")),
    ("static_import", re.compile(r"(?<![.\w$])export\s+(?:\*|\{[^}]*\})\s*from\b")),
    ("require", re.compile(r"(?<![.\w$])require\s*\(")),
)
_DESCRIPTIONS: Final[dict[ModuleAccessKind, str]] = {
    "static_import": "an import statement",
    "dynamic_import": "a dynamic import()",
    "import_meta": "import.meta",
    "require": "require()",
}
# After these characters a "/" starts a regular expression rather than a division.
_REGEX_PRECEDERS: Final = set("(,=:[!&|?{};+-*%<>~^")
_REGEX_KEYWORDS: Final = {"return", "typeof", "instanceof", "in", "of", "new", "delete", "void"}
_TRAILING_WORD: Final = re.compile(r"([\w$]+)\s*$")


@dataclass(frozen=True, slots=True)
class ModuleAccess:
    """One detected module access.

    Attributes:
        kind: What was found.
        line: 1-based line.
        column: 1-based column.
        code: Always `module_access_denied`, for error reporting.
    """

    kind: ModuleAccessKind
    line: int
    column: int
    code: str = MODULE_ACCESS_DENIED

    @property
    def message(self) -> str:
        """A readable one-line explanation for the model."""
        return (
            f"module access is not available in the sandbox: {_DESCRIPTIONS[self.kind]} "
            f"at line {self.line}, column {self.column}; use the provided globals instead"
        )


def find_module_access(source: str) -> ModuleAccess | None:
    """The first `import`/`import()`/`import.meta`/`require(` in code (not in strings or
    comments), or None.
    """
    code = mask_literals(source)
    best: tuple[int, ModuleAccessKind] | None = None
    for kind, pattern in _PATTERNS:
        match = pattern.search(code)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), kind)
    if best is None:
        return None
    offset, kind = best
    line = code.count("\n", 0, offset) + 1
    column = offset - (code.rfind("\n", 0, offset) + 1) + 1
    return ModuleAccess(kind=kind, line=line, column=column)


def mask_literals(source: str) -> str:
    """`source` with comment, string, template-text and regex contents replaced by spaces.

    Quotes, template `${...}` code and newlines are kept, so offsets and lines still match.
    """
    return _Masker(source).run()


class _Masker:
    """A tiny JavaScript scanner: just enough to tell code from literals and comments."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.out = list(source)
        self.n = len(source)
        self.templates: list[int] = []  # brace depth at each open `${`
        self.depth = 0
        self.last = ""  # last significant code character (for the regex heuristic)

    def run(self) -> str:
        i = 0
        while i < self.n:
            i = self._step(i)
        return "".join(self.out)

    def _step(self, i: int) -> int:
        ch, nxt = self.src[i], self.src[i + 1 : i + 2]
        if ch == "/" and nxt in ("/", "*"):
            return self._comment(i, nxt)
        if ch in "'\"":
            return self._string(i, ch)
        if ch == "`":
            return self._template_text(i + 1)
        if ch == "/" and _regex_allowed(self.last, self.src, i):
            return self._regex(i)
        if ch == "{":
            self.depth += 1
        elif ch == "}":
            if self.templates and self.templates[-1] == self.depth:
                self.templates.pop()
                return self._template_text(i + 1)
            self.depth -= 1
        if not ch.isspace():
            self.last = ch
        return i + 1

    def _blank(self, start: int, end: int) -> None:
        for k in range(start, min(end, self.n)):
            if self.out[k] != "\n":
                self.out[k] = " "

    def _comment(self, i: int, kind: str) -> int:
        if kind == "/":
            end = self.src.find("\n", i)
            end = self.n if end < 0 else end
        else:
            end = self.src.find("*/", i + 2)
            end = self.n if end < 0 else end + 2
        self._blank(i, end)
        return end

    def _string(self, i: int, quote: str) -> int:
        k = i + 1
        while k < self.n and self.src[k] not in (quote, "\n"):
            k += 2 if self.src[k] == "\\" else 1
        self._blank(i + 1, k)
        self.last = quote
        return k + 1

    def _template_text(self, start: int) -> int:
        # Template text runs until the closing backtick or the next "${".
        self.last = "`"
        k = start
        while k < self.n:
            ch = self.src[k]
            if ch == "\\":
                k += 2
            elif ch == "`":
                self._blank(start, k)
                return k + 1
            elif ch == "$" and self.src[k + 1 : k + 2] == "{":
                self._blank(start, k)
                self.templates.append(self.depth)
                return k + 2
            else:
                k += 1
        self._blank(start, self.n)
        return self.n

    def _regex(self, i: int) -> int:
        k, in_class = i + 1, False
        while k < self.n and self.src[k] != "\n":
            c = self.src[k]
            if c == "\\":
                k += 2
                continue
            if c == "/" and not in_class:
                break
            if c in "[]":
                in_class = c == "["
            k += 1
        self._blank(i + 1, k)
        self.last = "/"
        return k + 1


def _regex_allowed(last: str, source: str, index: int) -> bool:
    if last == "" or last in _REGEX_PRECEDERS:
        return True
    if last.isalnum() or last in "_$":  # `return /x/` is a regex, `a / b` a division
        word = _TRAILING_WORD.search(source, 0, index)
        return word is not None and word.group(1) in _REGEX_KEYWORDS
    return False
