"""What `nodmix state migrate` found, and how each direction is checked: every copied
transcript compared byte for byte (the target may be further along, never different) and
every index entry looked up."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.config.paths import sessions_dir
from nodmix.sessions.files import ARCHIVE_DIR, TRASH_DIR
from nodmix.sessions.keys import is_agent_id
from nodmix.sessions.scan import transcript_files
from nodmix.sessions.store import STORE_FILE_NAME, SessionStore

if TYPE_CHECKING:
    from nodmix.state.postgres.backend import PostgresState

STATUS_DIRS = {"live": "", "archived": ARCHIVE_DIR, "deleted": TRASH_DIR}


@dataclass
class Report:
    """What a migration copied and found."""

    direction: str
    counts: dict[str, int] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    diverged: set[str] = field(default_factory=set)
    """Transcript files whose histories differ at the source and the target (left alone)."""

    def add(self, what: str, n: int = 1) -> None:
        if n:
            self.counts[what] = self.counts.get(what, 0) + n

    def to_json(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "copied": dict(sorted(self.counts.items())),
            "conflicts": self.conflicts,
            "problems": self.problems,
            "ok": not self.problems,
        }


def split_transcript(data: bytes) -> tuple[bytes, list[bytes]]:
    """A transcript file's header line and its complete entry lines (a torn tail left out)."""
    first = data.find(b"\n") + 1
    end = data.rfind(b"\n") + 1
    body = data[first:end]
    return data[:first], [line + b"\n" for line in body.split(b"\n")[:-1]] if body else []


def digest(header: bytes, lines: list[bytes]) -> str:
    return hashlib.sha256(header + b"".join(lines)).hexdigest()


def agent_dirs(state_dir: Path) -> list[str]:
    root = state_dir / "agents"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if is_agent_id(p.name) and p.is_dir())


def check(state_dir: Path, pg: PostgresState, report: Report) -> None:
    """Compare every transcript and index entry of the state dir with the database."""
    from nodmix.state.postgres import transfer

    backend = pg.sessions()
    for agent in agent_dirs(state_dir):
        folder = sessions_dir(state_dir, agent)
        for sub in STATUS_DIRS.values():
            for path in transcript_files(folder / sub if sub else folder):
                header, lines = split_transcript(path.read_bytes())
                stored = transfer.stored_lines(pg.db, agent, path.name)
                if path.name in report.diverged:
                    continue
                if stored is None:
                    report.problems.append(f"{path}: missing in the database")
                elif digest(*stored) != digest(header, lines) and digest(
                    stored[0], stored[1][: len(lines)]
                ) != digest(header, lines):
                    report.problems.append(f"{path}: differs from the database copy")
        if (folder / STORE_FILE_NAME).exists() or (folder / f"{STORE_FILE_NAME}.journal").exists():
            target = backend.index(agent, durable=True).load()
            for key in SessionStore.for_agent(state_dir, agent).load():
                if key not in target:
                    report.problems.append(f"{agent}: index entry {key} missing in the database")


def check_files(state_dir: Path, pg: PostgresState, report: Report) -> None:
    """Compare every stored transcript and index entry with the state dir it was copied to."""
    from nodmix.state.postgres import transfer

    for agent, name, status, header, lines in transfer.transcripts(pg.db):
        path = sessions_dir(state_dir, agent) / STATUS_DIRS.get(status, "") / name
        if not path.exists():
            report.problems.append(f"{path}: missing in the state directory")
        elif name not in report.diverged and not continues(
            (header, lines), *split_transcript(path.read_bytes())
        ):
            report.problems.append(f"{path}: differs from the database copy")
    for agent in pg.sessions().agent_ids():
        have = SessionStore.for_agent(state_dir, agent).load()
        for key in pg.sessions().index(agent, durable=True).load():
            if key not in have:
                report.problems.append(f"{agent}: index entry {key} missing in the state dir")


def continues(older: tuple[bytes, list[bytes]], header: bytes, lines: list[bytes]) -> bool:
    """Whether `header` + `lines` is `older` with lines added at the end (or the same)."""
    return older[0] == header and lines[: len(older[1])] == older[1]


def diverged_note(path: Path) -> str:
    return (
        f"{path.name}: the transcript went on differently at the source and the target "
        "(kept as it is at the target; the two histories cannot be merged)"
    )


def render(report: Report) -> str:
    """The report as the terminal shows it."""
    lines = [f"state migrate: {report.direction}"]
    lines += [f"  {what}: {n}" for what, n in sorted(report.counts.items())] or ["  nothing new"]
    lines += [f"  conflict: {c}" for c in report.conflicts]
    lines += [f"  PROBLEM: {p}" for p in report.problems]
    if report.problems:
        lines.append("check FAILED")
    elif report.conflicts:
        lines.append(
            f"checked: everything else matches; {len(report.conflicts)} conflict(s) above were "
            "left as they are at the target"
        )
    else:
        lines.append("checked: every copied transcript and index entry matches")
    return "\n".join(lines)


def dump(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)
