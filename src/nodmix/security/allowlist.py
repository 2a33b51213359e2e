"""The persisted exec allowlist: approved command patterns, per agent or for every agent.

A pattern is written like a command line: the executable, then one glob per argument
(`fnmatch` rules: `*`, `?`, `[...]`), split with `shlex` so quoting works as in a shell. Each
glob matches exactly one argument, except a final `**`, which matches any number of remaining
arguments (none included). An executable without `/` matches only a bare command name (so `ls`
does not match `./ls` or `/tmp/ls`); one with `/` matches the full path as written.

Examples: `git status` (exactly that), `git log **` (any `git log`), `ls -la *` (one argument).

The list lives in `$NODMIX_STATE_DIR/security/exec-allowlist.json`, rewritten atomically on every
change (a crash mid-write leaves the old file).
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.errors import ConfigError
from nodmix.security.commands import ParsedCommand
from nodmix.stores import provided

ALL_AGENTS = "*"
FILE_NAME = "exec-allowlist.json"


_GLOB = frozenset("*?[")


def _matcher(glob: str) -> str | re.Pattern[str]:
    """A literal string, or the compiled regex of a glob (`fnmatch` rules)."""
    return re.compile(fnmatch.translate(glob)) if _GLOB & set(glob) else glob


def _matches(matcher: str | re.Pattern[str], value: str) -> bool:
    if isinstance(matcher, str):
        return matcher == value
    return matcher.match(value) is not None


@dataclass(frozen=True, slots=True)
class Pattern:
    """One compiled allowlist pattern."""

    id: str
    text: str
    agent: str
    created_at: int
    exe: str
    args: tuple[str, ...]
    rest: bool
    """The pattern ends with `**` (any further arguments)."""
    exe_matcher: str | re.Pattern[str]
    arg_matchers: tuple[str | re.Pattern[str], ...]

    @classmethod
    def compile(
        cls,
        text: str,
        *,
        agent: str = ALL_AGENTS,
        id: str | None = None,
        created_at: int | None = None,
    ) -> Pattern:
        """Parse a pattern; raises `ValueError` with a readable message when it is malformed."""
        try:
            tokens = shlex.split(text)
        except ValueError as exc:
            raise ValueError(f"pattern {text!r} cannot be parsed: {exc}") from None
        if not tokens:
            raise ValueError("a pattern needs at least an executable")
        if any(t in (";", "&&", "||", "|", ">", "<", "&") for t in tokens):
            raise ValueError(f"pattern {text!r} is one command: no ;, &&, |, or redirects")
        rest = tokens[-1] == "**"
        if rest:
            tokens = tokens[:-1]
        if not tokens:
            raise ValueError("a pattern needs an executable before `**`")
        return cls(
            id=id or uuid.uuid4().hex[:8],
            text=text.strip(),
            agent=agent,
            created_at=created_at if created_at is not None else int(time.time()),
            exe=tokens[0],
            args=tuple(tokens[1:]),
            rest=rest,
            exe_matcher=_matcher(tokens[0]),
            arg_matchers=tuple(_matcher(t) for t in tokens[1:]),
        )

    def matches(self, argv: Sequence[str]) -> bool:
        """Whether one simple command's argv is covered."""
        if not argv:
            return False
        exe = argv[0]
        if ("/" in self.exe) != ("/" in exe) or not _matches(self.exe_matcher, exe):
            return False
        count = len(argv) - 1
        wanted = len(self.arg_matchers)
        if count < wanted or (count > wanted and not self.rest):
            return False
        return all(_matches(m, a) for m, a in zip(self.arg_matchers, argv[1:], strict=False))

    def applies_to(self, agent_id: str) -> bool:
        """Whether the pattern is for this agent (or for all)."""
        return self.agent in (ALL_AGENTS, agent_id)

    def to_json(self) -> dict[str, Any]:
        """The persisted and listed shape."""
        return {
            "id": self.id,
            "pattern": self.text,
            "agent": self.agent,
            "createdAt": self.created_at,
        }


class PatternIndex:
    """Patterns by literal executable (and those whose executable is a glob), so a check
    looks only at the few patterns that can match."""

    def __init__(self, patterns: Sequence[Pattern]) -> None:
        self.patterns = tuple(patterns)
        self._by_exe: dict[str, list[Pattern]] = {}
        self._globbed: list[Pattern] = []
        for p in self.patterns:
            if isinstance(p.exe_matcher, str):
                self._by_exe.setdefault(p.exe, []).append(p)
            else:
                self._globbed.append(p)

    def match(self, argv: Sequence[str], agent_id: str) -> bool:
        """Whether some pattern for `agent_id` covers this simple command."""
        for group in (self._by_exe.get(argv[0], ()), self._globbed):
            for p in group:
                if p.applies_to(agent_id) and p.matches(argv):
                    return True
        return False


def covers(index: PatternIndex, parsed: ParsedCommand, agent_id: str) -> bool:
    """Whether every part of a parsed command line matches some pattern for `agent_id`."""
    if parsed.opaque is not None:
        return False
    return all(index.match(part, agent_id) for part in parsed.parts)


def open_allowlist(state_dir: Path) -> Allowlist:
    """The exec allowlist of the backend serving `state_dir` (files by default)."""
    found = provided(state_dir, "security.allowlist")
    return found if isinstance(found, Allowlist) else Allowlist(state_dir)


class Allowlist:
    """The persisted patterns; safe to share between the event loop and worker threads."""

    def __init__(self, state_dir: Path) -> None:
        """Use `<state_dir>/security/exec-allowlist.json` (read on first use, created on the
        first change)."""
        self.path = state_dir / "security" / FILE_NAME
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._index: PatternIndex | None = None

    @property
    def patterns(self) -> tuple[Pattern, ...]:
        """The current patterns (an immutable snapshot)."""
        return self.index.patterns

    @property
    def index(self) -> PatternIndex:
        """The current patterns, indexed for matching.

        Raises:
            ConfigError: the file exists but cannot be read or parsed.
        """
        index = self._index
        if index is None:
            with self._lock:
                index = self._index = PatternIndex(self._load())
        return index

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def refresh(self) -> bool:
        """Re-read the file if another process changed it; True when it did."""
        if self._file_stamp() == self._stamp:
            return False
        self.reload()
        return True

    def _raw(self) -> Any:
        """The stored document (None when there is none)."""
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{self.path}: cannot read the exec allowlist ({exc})") from None

    def _write(self, data: dict[str, Any]) -> None:
        """Replace the stored document."""
        ensure_private_dir(self.path.parent)
        atomic_write(self.path, (json.dumps(data, indent=2) + "\n").encode())

    def _load(self) -> tuple[Pattern, ...]:
        self._stamp = self._file_stamp()
        raw = self._raw()
        if raw is None:
            return ()
        entries = raw.get("patterns") if isinstance(raw, dict) else None
        if not isinstance(entries, list):
            raise ConfigError(f'{self.path}: expected {{"patterns": [...]}}')
        out = []
        for index, item in enumerate(entries):
            try:
                out.append(
                    Pattern.compile(
                        str(item["pattern"]),
                        agent=str(item.get("agent") or ALL_AGENTS),
                        id=str(item["id"]),
                        created_at=int(item.get("createdAt") or 0),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"{self.path}: patterns[{index}] is invalid ({exc})") from None
        return tuple(out)

    def reload(self) -> None:
        """Re-read the file (another process, such as `nodmix approvals allow`, changed it)."""
        with self._lock:
            self._index = PatternIndex(self._load())

    def _save(self, patterns: tuple[Pattern, ...]) -> None:
        self._write({"version": 1, "patterns": [p.to_json() for p in patterns]})
        self._index = PatternIndex(patterns)
        self._stamp = self._file_stamp()

    def add(self, text: str, *, agent: str = ALL_AGENTS) -> Pattern:
        """Add a pattern (an identical one for the same agent is returned, not duplicated).

        Raises:
            ValueError: the pattern is malformed, or names what no command can match.
        """
        for char, what in (("$", "`$`"), ("`", "backticks"), ("\n", "a line break")):
            if char in text:
                raise ValueError(
                    f"pattern {text.strip()!r} would never match: a command with {what}"
                    " (expansion, substitution) is always asked"
                )
        pattern = Pattern.compile(text, agent=agent)
        with self._lock:
            current = self._load()
            for existing in current:
                if existing.text == pattern.text and existing.agent == agent:
                    self._index = PatternIndex(current)
                    return existing
            self._save((*current, pattern))
        return pattern

    def revoke(self, key: str) -> list[Pattern]:
        """Remove patterns by id or exact pattern text; returns what was removed."""
        with self._lock:
            current = self._load()
            gone = [p for p in current if key in (p.id, p.text)]
            if gone:
                self._save(tuple(p for p in current if p not in gone))
        return gone
