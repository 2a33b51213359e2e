"""Automation: what 1,000 scheduled jobs cost an idle gateway, and how late jobs fire.

    python -m benchmarks.automation.bench_automation

Idle cost: `nodmix gateway` runs as its own process with 1,000 daily cron jobs (none due
during the measurement) and, for comparison, with none; its CPU time (`/proc/<pid>/stat`)
is sampled over a window after start-up. Lateness: a real gateway in this process (scripted
model server) runs 40 jobs every 4 s, spread over the interval, next to 960 idle ones; each
run's lateness is the time from its due moment to the model request arriving.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nodmix.automation.jobs import Job, new_job
from nodmix.automation.schedule import cron_schedule, every_schedule
from nodmix.automation.store import JobStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer

ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney")
RESULTS = Path(__file__).resolve().parent.parent / "results"


def _config(state: Path, model_url: str) -> None:
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": model_url,
                    "apiKey": "none",
                    "models": [{"id": "scripted", "contextWindow": 32000}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        "automation": {"maxConcurrentRuns": 4},
    }
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def _idle_jobs(count: int, now: float) -> list[Job]:
    """Daily jobs at minutes that are not due in the next hour."""
    rng = random.Random(7)
    hour = time.gmtime(now).tm_hour
    jobs = []
    for i in range(count):
        at_hour = (hour + 2 + rng.randrange(20)) % 24
        schedule = cron_schedule(f"{rng.randrange(60)} {at_hour} * * *", ZONES[i % len(ZONES)])
        jobs.append(new_job(name=f"idle {i}", message=f"idle {i}", schedule=schedule, now=now))
    return jobs


def _write_jobs(state: Path, jobs: list[Job]) -> None:
    JobStore(state).update(lambda stored: stored.extend(jobs))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(jobs: int, window: float, model_url: str) -> float:
    """CPU percent of an idle `nodmix gateway` process holding `jobs` cron jobs."""
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        _config(state, model_url)
        _write_jobs(state, _idle_jobs(jobs, time.time()))
        env = {
            **os.environ,
            "NODMIX_STATE_DIR": str(state),
            "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "nodmix", "gateway", "--port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if "listening on" in line:
                    break
            deadline = time.monotonic() + 30
            while jobs and not (state / "automation" / "state.json").exists():  # loaded
                if time.monotonic() > deadline:
                    raise RuntimeError("the scheduler never wrote its state")
                time.sleep(0.05)
            time.sleep(2.0)  # let start-up work settle before the window opens
            cpu0, t0 = _cpu_seconds(proc.pid), time.monotonic()
            time.sleep(window)
            cpu1, t1 = _cpu_seconds(proc.pid), time.monotonic()
            return (cpu1 - cpu0) / (t1 - t0) * 100
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def lateness(active: int, every: float, duration: float, idle: int) -> list[float]:
    """Seconds from each due time to the model request, for `active` jobs every `every` s."""
    arrivals: list[tuple[str, float]] = []
    lock = threading.Lock()

    def respond(request: ModelRequest) -> ModelReply:
        users = [m for m in request.messages if isinstance(m, UserMessage)]
        with lock:
            arrivals.append((users[-1].text if users else "", time.time()))
        return ModelReply.text("done")

    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(respond) as model:
        state = Path(tmp)
        os.environ["NODMIX_STATE_DIR"] = str(state)
        os.environ["NODMIX_CONFIG_PATH"] = str(state / "nodmix.json")
        _config(state, model.base_url)
        now = time.time()
        jobs = _idle_jobs(idle, now)
        anchors: dict[str, float] = {}
        for i in range(active):
            job = new_job(
                name=f"active {i}",
                message=f"active {i}",
                schedule=every_schedule(f"{every:g}s"),
                now=now + 2 + every * i / active,
            )
            anchors[job.message] = job.created_at
            jobs.append(job)
        settings = GatewaySettings(port=0, token=None, watch_config=False)
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)):
            _write_jobs(state, jobs)
            time.sleep(duration)
        late = []
        for text, arrived in arrivals:
            anchor = anchors.get(text)
            if anchor is None:
                continue
            due = anchor + ((arrived - anchor) // every) * every
            late.append(arrived - due)
        return late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--window", type=float, default=20.0, help="idle CPU window, seconds")
    parser.add_argument("--duration", type=float, default=30.0, help="lateness run, seconds")
    args = parser.parse_args()
    with ScriptedModelServer(lambda r: ModelReply.text("ok")) as model:
        baseline = idle_cpu(0, args.window, model.base_url)
        loaded = idle_cpu(1000, args.window, model.base_url)
    late = sorted(lateness(active=40, every=4.0, duration=args.duration, idle=960))
    p50 = statistics.median(late)
    p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
    results = {
        "idle_cpu_percent_0_jobs": baseline,
        "idle_cpu_percent_1000_jobs": loaded,
        "fires": len(late),
        "lateness_p50_s": p50,
        "lateness_p99_s": p99,
        "lateness_max_s": late[-1],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "automation.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print("| benchmark | result | target | ok |")
    print("|---|---|---|---|")
    print(
        f"| idle gateway CPU with 1,000 cron jobs ({args.window:g} s window) | "
        f"{loaded:.2f}% (with no jobs: {baseline:.2f}%) | < 1% | {'yes' if loaded < 1 else 'no'} |"
    )
    print(
        f"| firing lateness, due time → model request ({len(late)} runs of 40 jobs every 4 s, "
        f"1,000 jobs loaded) | p99 {p99 * 1000:.0f} ms (p50 {p50 * 1000:.0f} ms, max "
        f"{late[-1] * 1000:.0f} ms) | p99 ≤ 1 s | {'yes' if p99 <= 1 else 'no'} |"
    )


if __name__ == "__main__":
    main()
