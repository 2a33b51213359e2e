"""Run history: one JSON-lines file per job under `automation/runs/`, capped per job.

A run is appended when it starts (`running`) and again when it ends; readers keep the last
record of each run id. A run records the process running it (`owner`, see `owners.py`): one
left `running` by a process that is gone reads as `interrupted`, and the gateway writes that
down when it starts (`close_interrupted`). When the file holds more than twice the cap it is
rewritten (atomically) with the newest runs only.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Literal

import msgspec

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.automation.owners import ProcessMarks
from nodmix.automation.store import automation_dir
from nodmix.stores import provided

RunStatus = Literal["running", "ok", "error", "timeout", "skipped", "interrupted"]
DEFAULT_RUNS_KEPT = 50
EXCERPT_CHARS = 200


class RunRecord(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """One run of a job (or of a webhook mapping, or a heartbeat)."""

    run_id: str
    job_id: str
    trigger: str
    """`schedule`, `missed`, `retry`, `manual`, `webhook`, `heartbeat`."""
    started_at: float
    status: RunStatus = "running"
    slot: float | None = None
    """The scheduled time this run is for (scheduled runs and their retries)."""
    owner: str | None = None
    """The token of the process running it (`owners.ProcessMarks`)."""
    finished_at: float | None = None
    session_key: str | None = None
    reply: str | None = None
    """The start of the reply."""
    error: str | None = None
    delivered: bool = False

    @property
    def duration(self) -> float | None:
        """Seconds the run took (None while it runs)."""
        return None if self.finished_at is None else self.finished_at - self.started_at

    def to_json(self) -> dict[str, object]:
        """The record with its duration."""
        out: dict[str, object] = msgspec.to_builtins(self)
        out["status"] = self.status  # the default ("running") is left out of the files only
        if self.duration is not None:
            out["durationSeconds"] = round(self.duration, 3)
        return out


class SlotTaken(Exception):
    """Another replica already started a run for this scheduled time (shared state only)."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of a reply, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def open_run_history(state_dir: Path, *, kept: int = DEFAULT_RUNS_KEPT) -> RunHistory:
    """The run history of the state backend serving `state_dir` (files by default)."""
    found = provided(state_dir, "automation.history", kept)
    return found if isinstance(found, RunHistory) else RunHistory(state_dir, kept=kept)


class RunHistory:
    """The run files of one state directory."""

    def __init__(self, state_dir: Path, *, kept: int = DEFAULT_RUNS_KEPT) -> None:
        self.dir = automation_dir(state_dir) / "runs"
        self.owners = ProcessMarks(automation_dir(state_dir) / "owners")
        """Tells whether the process of a `running` run still lives."""
        self.kept = max(1, kept)
        self._decoder = msgspec.json.Decoder(RunRecord)
        self._encoder = msgspec.json.Encoder()

    def _path(self, job_id: str) -> Path:
        return self.dir / f"{job_id}.jsonl"

    def record(self, run: RunRecord) -> None:
        """Append the run's current state (and trim the file when it grew past the cap)."""
        ensure_private_dir(self.dir)
        path = self._path(run.job_id)
        line = self._encoder.encode(run) + b"\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > len(line) * self.kept * 2:  # cheap size check before counting lines
            lines, runs = self._read(run.job_id)
            if lines > self.kept * 2:
                kept = runs[-self.kept :]
                atomic_write(path, b"".join(self._encoder.encode(r) + b"\n" for r in kept))

    def _read(self, job_id: str) -> tuple[int, list[RunRecord]]:
        try:
            data = self._path(job_id).read_bytes()
        except FileNotFoundError:
            return 0, []
        latest: dict[str, RunRecord] = {}
        lines = data.splitlines()
        for line in lines:
            with contextlib.suppress(msgspec.DecodeError):  # a line torn by a crash
                run = self._decoder.decode(line)
                latest.pop(run.run_id, None)
                latest[run.run_id] = run
        return len(lines), sorted(latest.values(), key=lambda r: r.started_at)

    def runs(self, job_id: str) -> list[RunRecord]:
        """Runs of a job, oldest first (the last state of each); a run whose process is gone
        reads as `interrupted` even before the gateway wrote that down."""
        return [self._true(r) for r in self._read(job_id)[1][-self.kept :]]

    def find(self, job_id: str, run_id: str) -> RunRecord | None:
        """One run of a job."""
        return next((r for r in self.runs(job_id) if r.run_id == run_id), None)

    def job_ids(self) -> list[str]:
        """Ids with a history file (jobs, heartbeats, webhook mappings), sorted."""
        with contextlib.suppress(FileNotFoundError):
            return sorted(p.stem for p in self.dir.iterdir() if p.suffix == ".jsonl")
        return []

    def close_interrupted(self, now: float) -> list[RunRecord]:
        """Write down as `interrupted` every run left `running` by a process that is gone
        (killed, or the machine stopped); the runs closed, oldest first."""
        closed: list[RunRecord] = []
        for job_id in self.job_ids():
            for run in self._read(job_id)[1]:
                if run.status == "running" and not self.owners.alive(run.owner):
                    done = self._interrupted(run, now)
                    self.record(done)
                    closed.append(done)
        self.owners.sweep()
        return sorted(closed, key=lambda r: r.started_at)

    def _true(self, run: RunRecord) -> RunRecord:
        if run.status != "running" or self.owners.alive(run.owner):
            return run
        return self._interrupted(run, None)

    @staticmethod
    def _interrupted(run: RunRecord, now: float | None) -> RunRecord:
        return msgspec.structs.replace(
            run,
            status="interrupted",
            finished_at=now,
            error="interrupted: the process running it stopped (a crash or a restart)",
        )
