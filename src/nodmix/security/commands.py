"""Shell command lines as the allowlist sees them: split with `shlex`, judged conservatively.

A command line is split into simple commands at `;`, `&&`, `||` and `|`. Each simple command is
an argv list the allowlist can match. Anything whose effect the argv does not show never
auto-matches: command substitution (`$(...)`, backticks), variable expansion (`$`), redirects
(`>`, `<`), background jobs and subshells (`&`, `(`), line breaks, globs and `~` in arguments
(the shell would expand them), and lines `shlex` cannot parse. Such a line is `opaque`. A `#`
is part of a word here, never a comment, so nothing after it is hidden from the check.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

_SEPARATORS = frozenset({";", "&&", "||", "|"})
_OPAQUE_CHARS = ("$", "`", "\n", "\r", "\x00")
_GLOB_CHARS = frozenset("*?[{")
_PUNCTUATION = ";&|<>()"
_PUNCT_SET = frozenset(_PUNCTUATION)
_NEEDS_SHLEX = ("'", '"', "\\", "#")
_SIMPLE_TOKENS = re.compile(r"[;&|<>()]+|[^\s;&|<>()]+")
"""Tokens of a line without quotes, escapes or comments (what `shlex` would produce, faster)."""
_ASSIGNED_TILDE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*~")
"""bash expands `~` in any word that looks like an assignment (`of=~/x`), argument or not."""


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """A command line split into simple commands, or `opaque` with why."""

    parts: tuple[tuple[str, ...], ...]
    opaque: str | None = None
    """Why no allowlist pattern can ever match this line (None when it can)."""


def _opaque(why: str) -> ParsedCommand:
    return ParsedCommand(parts=(), opaque=why)


@lru_cache(maxsize=1024)
def parse_command(command: str) -> ParsedCommand:
    """Split `command` into simple commands (see the module docstring for what is opaque)."""
    for char in _OPAQUE_CHARS:
        if char in command:
            what = {"$": "expansion", "`": "command substitution"}.get(char, "a line break")
            return _opaque(f"the command uses {what}")
    if any(char in command for char in _NEEDS_SHLEX):
        lexer = shlex.shlex(command, posix=True, punctuation_chars=_PUNCTUATION)
        lexer.whitespace_split = True
        # shlex ends a word and drops the rest of the line at any `#`, but bash starts a
        # comment only at the start of a word (`echo hi#; rm x` runs `rm`): keep every `#` as
        # a word character, so the parts after it are seen (a real comment then only makes the
        # line look bigger than what runs, never smaller).
        lexer.commenters = ""
        try:
            tokens = list(lexer)
        except ValueError as exc:
            return _opaque(f"the command cannot be parsed ({exc})")
    else:
        tokens = _SIMPLE_TOKENS.findall(command)
    parts: list[tuple[str, ...]] = []
    current: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if not current:
                return _opaque("the command has an empty part")
            parts.append(tuple(current))
            current = []
            continue
        if token and set(token) <= _PUNCT_SET:
            return _opaque(f"the command uses {token!r} (redirects, jobs, subshells)")
        if _GLOB_CHARS & set(token) or token.startswith("~") or _ASSIGNED_TILDE.match(token):
            return _opaque(f"the argument {token!r} would be expanded by the shell")
        current.append(token)
    if current:
        parts.append(tuple(current))
    if not parts:
        return _opaque("the command is empty")
    return ParsedCommand(parts=tuple(parts))


def quote_pattern(argv: tuple[str, ...]) -> str:
    """An allowlist pattern matching exactly `argv` (glob characters escaped)."""
    escaped = []
    for arg in argv:
        text = "".join(f"[{c}]" if c in "*?[" else c for c in arg)
        escaped.append(shlex.quote(text))
    return " ".join(escaped)
