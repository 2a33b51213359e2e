"""The jobs file: edits from several processes never lose each other, a corrupt file is one
clear error, and a lock held too long fails instead of hanging."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodmix.automation import store as store_module
from nodmix.automation.jobs import JobError, new_job
from nodmix.automation.schedule import every_schedule
from nodmix.automation.store import JobStore

ADD_MANY = """
import sys
from nodmix.automation.jobs import new_job
from nodmix.automation.schedule import every_schedule
from nodmix.automation.store import JobStore
from pathlib import Path
store = JobStore(Path(sys.argv[1]))
for i in range(25):
    store.add(new_job(name=f"{sys.argv[2]}{i}", message="m", schedule=every_schedule("1h"), now=0))
"""


def test_concurrent_writers_in_several_processes_keep_every_job(isolated_state: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", ADD_MANY, str(isolated_state), tag])
        for tag in ("a", "b", "c")
    ]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    names = {job.name for job in JobStore(isolated_state).load()}
    assert len(names) == 75


def test_a_corrupt_jobs_file_is_one_error_naming_it(isolated_state: Path) -> None:
    store = JobStore(isolated_state)
    store.dir.mkdir(parents=True)
    store.jobs_path.write_text("{ not json", encoding="utf-8")
    with pytest.raises(JobError, match="jobs.json"):
        store.load()


def test_a_lock_held_too_long_fails_with_a_clear_error(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_SECONDS", 0.2)
    store = JobStore(isolated_state)
    store.add(new_job(name="x", message="m", schedule=every_schedule("1h"), now=0))
    fd = os.open(isolated_state / "automation" / "jobs.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(JobError, match="stayed locked by another process"):
            store.add(new_job(name="y", message="m", schedule=every_schedule("1h"), now=0))
    finally:
        os.close(fd)
    assert [job.name for job in store.load()] == ["x"]
