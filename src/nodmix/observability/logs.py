"""Structured logs: JSON lines in `<state>/logs/nodmix.log`, rotated by size.

Every process that opens a runtime (the gateway, `nodmix agent --local`) adds a handler for the
`nodmix` loggers that writes one JSON object a line (`ts`, `level`, `logger`, `msg`, and the
record's `extra` fields), so `nodmix logs` can filter and follow them whichever process wrote
them. The terminal keeps the plain-text lines (`gateway/server.py`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOGGER = "nodmix"
MAX_BYTES = 5 * 1024 * 1024
"""Size at which the log file is rotated."""
BACKUPS = 3
"""Rotated files kept (`nodmix.log.1` … `.3`)."""

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def log_file(state_dir: Path) -> Path:
    """Where the structured log of a state dir lives."""
    return state_dir / "logs" / "nodmix.log"


class JsonLineFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
        }
        out.update(
            (k, v) for k, v in record.__dict__.items() if k not in _STANDARD and k[:1] != "_"
        )
        if record.exc_info and record.exc_info[1] is not None:
            out["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        return json.dumps(out, ensure_ascii=False, default=str)


class _PrivateRotatingHandler(logging.FileHandler):
    """A file handler rotated by size, whose files are readable by their owner only (0600).

    Two records a turn reach it, so it does per record only what rotation needs: a record
    is formatted once (the size check and the write share it), and whether the log is a
    regular file (only those are rotated) is learned when it is opened, not by two `stat`
    calls per record. The renaming itself is `logging.handlers.RotatingFileHandler`'s, loaded
    when the file first reaches its size: that module (with pickle) costs every start ~1.5 ms.
    """

    _regular = True
    _formatted: tuple[logging.LogRecord, str] | None = None

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        super().__init__(path, mode="a", encoding="utf-8", delay=True)
        self.maxBytes = max_bytes
        self.backupCount = backups

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.shouldRollover(record):
                self.doRollover()
            super().emit(record)
        except Exception:
            self.handleError(record)

    def doRollover(self) -> None:
        """Rename the log to `.1` (and older ones one further); the next record opens a new
        file."""
        import logging.handlers

        if self.stream is not None:
            self.stream.close()
            self.stream = None
        renamer = logging.handlers.RotatingFileHandler(
            self.baseFilename, backupCount=self.backupCount, delay=True
        )
        renamer.doRollover()  # with delay it renames and does not reopen
        renamer.close()

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._regular = stat.S_ISREG(os.fstat(fd).st_mode)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)

    def format(self, record: logging.LogRecord) -> str:
        last = self._formatted
        if last is not None and last[0] is record:
            return last[1]
        text = super().format(record)
        self._formatted = (record, text)
        return text

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        if self.stream is None:
            self.stream = self._open()
        if not self._regular or self.maxBytes <= 0:
            return False
        self.stream.seek(0, 2)
        return bool(self.stream.tell() + len(self.format(record)) + 1 >= self.maxBytes)


@contextlib.contextmanager
def open_log_file(
    state_dir: Path, *, level: int = logging.INFO, max_bytes: int = MAX_BYTES
) -> Iterator[Path]:
    """Write `nodmix.*` records at `level` and above to the state dir's log while open.

    The `nodmix` logger is lowered to `level` if it was not set, so INFO records reach the
    file; the terminal's own handlers keep their levels.
    """
    path = log_file(state_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handler = _PrivateRotatingHandler(path, max_bytes=max_bytes, backups=BACKUPS)
    handler.setLevel(level)
    handler.setFormatter(JsonLineFormatter())
    logger = logging.getLogger(LOGGER)
    previous = logger.level
    if previous == logging.NOTSET or previous > level:
        logger.setLevel(level)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
        if logger.level == level:
            logger.setLevel(previous)
