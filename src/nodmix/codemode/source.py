"""Checking `exec` input before anything runs: fields, language, shell look-alikes, modules."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nodmix.codemode.description import LANGUAGES
from nodmix.codemode.results import ErrorCode
from nodmix.sandbox import find_module_access

_SHELL_WORDS = frozenset(
    "ls cat pwd cd echo grep find mkdir rm cp mv touch head tail curl wget git npm pip python "
    "python3 node sed awk chmod chown ps kill whoami uname df du which env export sudo apt "
    "make tar unzip ssh docker".split()
)
_JS_SIGNS = re.compile(r"[(){};=`]|=>|\bawait\b|\breturn\b|\bconst\b|\blet\b|\bvar\b")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A cell ready to run, or why it cannot."""

    code: str = ""
    language: str = "javascript"
    error: str | None = None
    code_kind: ErrorCode | None = None


def prepare(
    args: dict[str, Any], languages: tuple[str, ...], max_source_bytes: int | None = None
) -> Prepared:
    """Validate `{code | command, language}`; a source over `max_source_bytes` (UTF-8) is refused
    before anything parses or transpiles it."""
    code, command = args.get("code"), args.get("command")
    for name, value in (("code", code), ("command", command)):
        if value is not None and not isinstance(value, str):
            return _bad(f"exec: `{name}` must be a string of JavaScript or TypeScript.")
    unknown = sorted(set(args) - {"code", "command", "language"})
    if unknown:
        return _bad(f"exec: unknown field(s) {', '.join(unknown)}; pass `code` and `language`.")
    if code and command and code != command:
        return _bad("exec: `code` and `command` are aliases and must match when both are given.")
    source = code or command or ""
    if max_source_bytes is not None and len(source) > max_source_bytes // 4:
        size = len(source.encode("utf-8", errors="surrogatepass"))
        if size > max_source_bytes:
            return Prepared(
                error=f"exec: the program is {size} bytes, over the {max_source_bytes}-byte "
                "limit (tools.codeMode.maxSourceBytes). Send a shorter program: keep data out "
                "of the source and read it through tools instead.",
                code_kind="source_too_large",
            )
    if not source.strip():
        return _bad("exec: `code` is required: a JavaScript or TypeScript program to run.")
    language = args.get("language", "javascript")
    if language is None:
        language = "javascript"
    if language not in LANGUAGES:
        return Prepared(
            error=f"exec runs JavaScript or TypeScript only; language {language!r} is not "
            'supported. Use "javascript", and call the shell through '
            "tools.call('nodmix:core:exec', {command}) if a shell tool is available.",
            code_kind="unsupported_language",
        )
    if language not in languages:
        return _bad(_disabled(language, languages))
    # Module access is checked before the shell heuristic: `export * from 'x'` starts with a
    # shell word (`export`) but is JavaScript module syntax, and must say so.
    access = find_module_access(source)
    if access is not None:
        return Prepared(
            error=f"{access.message.split('; ')[0]}; reach files, network and other actions "
            "through tools.search/tools.call instead.",
            code_kind="module_access_denied",
        )
    if looks_like_shell(source):
        return _bad(
            "exec runs JavaScript, not shell commands. To run a shell command, write e.g. "
            "`const r = await tools.call('nodmix:core:exec', {command: 'ls -la'}); return r.text`."
        )
    return Prepared(code=source, language=language)


def looks_like_shell(source: str) -> bool:
    """A single line that starts with a common shell command and has no JavaScript syntax."""
    text = source.strip()
    if "\n" in text or _JS_SIGNS.search(text):
        return False
    first = text.split(maxsplit=1)[0] if text else ""
    return first in _SHELL_WORDS or first.startswith(("./", "/bin/", "/usr/"))


def _disabled(language: str, languages: tuple[str, ...]) -> str:
    """What to do about a cell in a language `tools.codeMode.languages` leaves out."""
    enabled = ", ".join(languages)
    head = f"exec: language {language!r} is disabled here (tools.codeMode.languages: {enabled})."
    if language == "typescript":
        return (
            f"{head} Send the program as JavaScript: drop the type annotations, interfaces and "
            'casts, and pass language "javascript" (or leave language out).'
        )
    return f'{head} Pass language "typescript": plain JavaScript is valid TypeScript.'


def _bad(message: str) -> Prepared:
    return Prepared(error=message, code_kind="invalid_input")
