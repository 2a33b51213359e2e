"""`nodmix cron add|list|show|edit|enable|disable|remove|run|runs`: scheduled jobs.

Jobs live in the state directory, so these commands work whether or not a gateway runs; a
running gateway notices an edit within a second. `cron run` runs the job in this process
(through a local runtime) and waits for it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING

from nodmix.cli.common import common_parent, print_json

if TYPE_CHECKING:
    from nodmix.automation.jobs import Job
    from nodmix.automation.store import JobState, JobStore


def _schedule_options(q: argparse.ArgumentParser, *, required: bool) -> None:
    when = q.add_mutually_exclusive_group(required=required)
    when.add_argument("--cron", help='cron expression, e.g. "0 7 * * *"')
    when.add_argument("--every", help="interval, e.g. 30m, 2h, 1d")
    when.add_argument("--at", help="one moment, e.g. 2026-12-01T09:00 or +20m")
    q.add_argument("--tz", help="time zone of --cron/--at, e.g. Europe/Paris")


def _job_options(q: argparse.ArgumentParser) -> None:
    q.add_argument("--agent", help="agent id (default: main)")
    q.add_argument("--session", choices=["isolated", "main"], help="isolated (default) or main")
    q.add_argument(
        "--deliver",
        help="<channel>:<chatId> that gets the result, or session[:<key>] to append it to a "
        "session's transcript (session alone: the main session)",
    )
    q.add_argument("--model", help="provider/model for this job's turns")
    q.add_argument(
        "--force",
        action="store_true",
        help="deliver to a chat the channel's rules do not allow (logged; the channel must "
        "still be configured)",
    )
    q.add_argument(
        "--retry-interrupted",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run a scheduled run cut short by a crash or restart once more when the gateway "
        "starts (default: on)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `cron` command group."""
    parent = common_parent()
    p = sub.add_parser("cron", parents=[parent], help="scheduled jobs (reminders, routines)")
    cmds = p.add_subparsers(dest="cron_command", metavar="ACTION", required=True)

    q = cmds.add_parser("add", parents=[parent], help="schedule a job")
    q.add_argument("--name", required=True)
    q.add_argument("--message", required=True, help="what the agent is told at each run")
    _schedule_options(q, required=True)
    _job_options(q)
    q.add_argument("--json", action="store_true", help="print the job as JSON")
    q.set_defaults(handler=_add)

    q = cmds.add_parser("list", parents=[parent], help="every job with its next run")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(handler=_list)

    q = cmds.add_parser("show", parents=[parent], help="one job")
    q.add_argument("id")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(handler=_show)

    q = cmds.add_parser("edit", parents=[parent], help="change a job")
    q.add_argument("id")
    q.add_argument("--name")
    q.add_argument("--message")
    _schedule_options(q, required=False)
    _job_options(q)
    q.set_defaults(handler=_edit)

    for action, text in (("enable", "resume a job"), ("disable", "pause a job")):
        q = cmds.add_parser(action, parents=[parent], help=text)
        q.add_argument("id")
        q.set_defaults(handler=_toggle, enabled=action == "enable")

    q = cmds.add_parser("remove", parents=[parent], help="delete a job")
    q.add_argument("id")
    q.set_defaults(handler=_remove)

    q = cmds.add_parser("run", parents=[parent], help="run a job now and wait for it")
    q.add_argument("id")
    q.set_defaults(handler=_run)

    q = cmds.add_parser("runs", parents=[parent], help="a job's run history")
    q.add_argument("id")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(handler=_runs)


def _store() -> JobStore:
    from nodmix.automation.store import open_job_store
    from nodmix.config import paths

    return open_job_store(paths.state_dir(dict(os.environ)))


def _check_target(target: str | None, *, force: bool = False) -> bool:
    """Refuse a delivery target the channel's rules do not allow (`channels/targets.py`), the
    same check as the `cron` and `message` tools; `--force` lets the owner's shell deliver to
    a chat outside the rules (logged; a channel that is not configured is still refused).
    Whether the target was forced past the rules."""
    if not target:
        return False
    from nodmix.automation.jobs import JobError, parse_target
    from nodmix.channels.pairing import open_pairing_store
    from nodmix.channels.registry import enabled_channels
    from nodmix.channels.targets import deliver_refusal
    from nodmix.config import paths
    from nodmix.config.loader import load_config

    if target.strip() == "session" or target.startswith("session:"):
        return False  # a session target: `new_job` checks the key
    channel, to = parse_target(target)
    env = dict(os.environ)
    config = load_config(env=env).config
    refused = deliver_refusal(config, open_pairing_store(paths.state_dir(env)), channel, to)
    if refused is None:
        return False
    if not force or channel not in enabled_channels(config):
        hint = "" if channel not in enabled_channels(config) else " (--force delivers anyway)"
        raise JobError(f"--deliver {target}: {refused}{hint}")
    import logging

    from nodmix.observability.logs import open_log_file

    with open_log_file(paths.state_dir(env)):  # `nodmix logs` shows it
        logging.getLogger("nodmix.security").warning(
            "cron --deliver %s forced past the channel's rules: %s", target, refused
        )
    print(f"nodmix: warning: --deliver {target} forced: {refused}", file=sys.stderr)
    return True


def _stamp(when: float | None) -> str:
    if when is None:
        return "-"
    return datetime.fromtimestamp(when).astimezone().isoformat(timespec="seconds")


def _next_run(store: JobStore, job: Job) -> float | None:
    from nodmix.automation.schedule import next_fire
    from nodmix.automation.store import schedule_key

    state = store.load_state().get(job.id)
    if state is not None and state.schedule_key == schedule_key(job):
        return state.next_run_at
    return next_fire(job.schedule, time.time(), anchor=job.created_at)


def _add(args: argparse.Namespace) -> int:
    from nodmix.automation.jobs import build_schedule, new_job

    now = time.time()
    schedule = build_schedule(cron=args.cron, every=args.every, at=args.at, tz=args.tz, now=now)
    forced = _check_target(args.deliver, force=args.force)
    job = new_job(
        name=args.name,
        message=args.message,
        schedule=schedule,
        now=now,
        agent_id=args.agent,
        session=args.session or "isolated",
        deliver=args.deliver,
        model=args.model,
        forced=forced,
        retry_interrupted=args.retry_interrupted is not False,
    )
    _store().add(job)
    if args.json:
        print_json(job.describe())
    else:
        print(f"Added job {job.id} ({job.name}): {schedule.describe()}.")
    return 0


def _last_run(job_id: str, state: JobState | None) -> tuple[float | None, str | None]:
    """When the job last ran and how that run stands now: from its run history (a run whose
    process died reads as `interrupted`), else from the scheduler's state."""
    from nodmix.automation.history import open_run_history
    from nodmix.config import paths

    runs = open_run_history(paths.state_dir(dict(os.environ))).runs(job_id)
    if runs:
        last = max(runs, key=lambda r: r.started_at)
        return last.started_at, last.status
    return (state.last_run_at, state.last_status) if state else (None, None)


def _list(args: argparse.Namespace) -> int:
    store = _store()
    jobs = store.load()
    states = store.load_state()
    if args.json:
        rows = []
        for job in jobs:
            row = job.describe()
            row["nextRunAt"] = _next_run(store, job) if job.enabled else None
            row["lastRunAt"], row["lastStatus"] = _last_run(job.id, states.get(job.id))
            rows.append(row)
        print_json({"jobs": rows})
        return 0
    if not jobs:
        print("No cron jobs. Add one: nodmix cron add --name NAME --every 30m --message TEXT")
        return 0
    for job in jobs:
        nxt = _stamp(_next_run(store, job)) if job.enabled else "disabled"
        status = _last_run(job.id, states.get(job.id))[1]
        last = f"last {status}" if status else "never ran"
        target = f" -> {job.deliver}" if job.deliver else ""
        print(f"{job.id}  {job.name}  {job.schedule.describe()}  next {nxt}  {last}{target}")
    return 0


def _show(args: argparse.Namespace) -> int:
    store = _store()
    job = store.get(args.id)
    row = job.describe()
    row["nextRunAt"] = _next_run(store, job) if job.enabled else None
    if args.json:
        print_json(row)
        return 0
    for key, value in row.items():
        if key == "schedule":
            continue  # `when` says it in words
        if key.endswith("At"):
            value = _stamp(value if isinstance(value, float | int) else None)
        print(f"{key}: {value}")
    return 0


def _edit(args: argparse.Namespace) -> int:
    import msgspec

    from nodmix.automation.jobs import build_schedule, new_job

    store = _store()
    job = store.get(args.id)
    schedule = job.schedule
    if args.cron or args.every or args.at:
        schedule = build_schedule(
            cron=args.cron, every=args.every, at=args.at, tz=args.tz, now=time.time()
        )
    elif args.tz and job.schedule.kind == "cron":  # the same expression in another zone
        schedule = build_schedule(
            cron=job.schedule.expr, every=None, at=None, tz=args.tz, now=time.time()
        )
    forced = _check_target(args.deliver, force=args.force)
    checked = new_job(  # the same validation as `add`
        name=args.name or job.name,
        message=args.message or job.message,
        schedule=schedule,
        now=job.created_at,
        agent_id=args.agent or job.agent_id,
        session=args.session or job.session,
        deliver=args.deliver or job.deliver,
        model=args.model or job.model,
        created_by=job.created_by,
        for_owner=job.is_owners(),
        forced=forced if args.deliver else job.forced,
        created_from=job.created_from,
        retry_interrupted=(
            job.retry_interrupted if args.retry_interrupted is None else args.retry_interrupted
        ),
    )
    changed = msgspec.structs.replace(
        checked, id=job.id, enabled=job.enabled, created_in=job.created_in
    )
    if schedule != job.schedule:  # a new rhythm counts from now
        changed = msgspec.structs.replace(changed, created_at=time.time())
    store.replace(changed)
    print(f"Updated job {job.id} ({changed.name}): {changed.schedule.describe()}.")
    return 0


def _toggle(args: argparse.Namespace) -> int:
    import msgspec

    store = _store()
    job = store.get(args.id)
    store.replace(msgspec.structs.replace(job, enabled=args.enabled))
    print(f"{'Enabled' if args.enabled else 'Disabled'} job {job.id} ({job.name}).")
    return 0


def _remove(args: argparse.Namespace) -> int:
    store = _store()
    job = store.get(args.id)
    store.remove(job.id)
    print(f"Removed job {job.id} ({job.name}).")
    return 0


def _run(args: argparse.Namespace) -> int:
    import anyio

    from nodmix.cli.cron_run import run_now
    from nodmix.errors import NodmixError

    job = _store().get(args.id)
    record = anyio.run(run_now, job)
    if record is None:
        raise NodmixError(f"job {job.id} is running already")
    print(f"Run {record.run_id}: {record.status} in {record.duration or 0:.1f}s.")
    if record.reply:
        print(record.reply)
    if record.error:
        print(f"error: {record.error}")
    return 0 if record.status == "ok" else 1


def _runs(args: argparse.Namespace) -> int:
    from nodmix.automation.history import open_run_history
    from nodmix.automation.jobs import JobError
    from nodmix.config import paths

    store = _store()
    history = open_run_history(paths.state_dir(dict(os.environ)))
    try:
        job_id = store.get(args.id).id
    except JobError:
        # A removed job (a one-shot job removes itself after it ran) keeps its history under
        # its id; a name that matches no job and no history must not read as "not run yet".
        if any(job.name == args.id for job in store.load()):
            raise  # several jobs have that name
        if not history.runs(args.id):
            raise JobError(
                f"no cron job {args.id!r} and no runs recorded under that id (a removed job's"
                " runs are found by its id, printed when it was added)"
            ) from None
        job_id = args.id
    runs = history.runs(job_id)
    if args.json:
        print_json({"jobId": job_id, "runs": [r.to_json() for r in runs]})
        return 0
    if not runs:
        print(f"Job {job_id} has not run yet.")
        return 0
    for run in runs:
        took = f"{run.duration:.1f}s" if run.duration is not None else "-"
        detail = run.error or run.reply or ""
        print(f"{_stamp(run.started_at)}  {took:>7}  {run.status:<8} {run.trigger:<8} {detail}")
    return 0
