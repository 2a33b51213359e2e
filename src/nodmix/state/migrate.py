"""`nodmix state migrate`: copy a file state directory into the PostgreSQL database, or the
database back into a state directory, then check that everything arrived.

What moves: every agent's session index and transcripts (live, archived and deleted, line for
line), cron jobs, the scheduler's state, run history and reported failures, pairing state,
channel positions, pending and answered messages, the exec allowlist, subagent runs,
parked code-mode runs and the token a gateway made itself. What stays: memory indexes (they
belong to a workspace; give the replicas a shared workspace volume), logs, caches and
per-replica status files.

Copying is idempotent: an index key or record already at the target is left alone, except
that the same session further along at the source replaces its stale copy (the way back to the
directory a deployment came from); a key the target holds for another session is reported as a
conflict, never overwritten. A transcript only gets the lines it lacks, and only when the
target's lines are the start of the source's: one that went on differently on both sides is a
conflict, left as it is (splicing two histories would break its chain). A migration stopped
halfway (a crash, Ctrl-C, a database restart) is finished by running it again; a check then
compares every copied transcript byte for byte and every index entry, in both directions
(`migrate_check`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from nodmix.automation.history import RunHistory, RunRecord
from nodmix.automation.store import JobStore
from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.files import channels_dir, read_json, write_json
from nodmix.channels.pairing import PairingStore
from nodmix.checkpoints.store import FileCheckpointStore
from nodmix.config.paths import sessions_dir
from nodmix.crashpoints import crash_point
from nodmix.gateway.token import FileTokenStore, TokenStore
from nodmix.security.allowlist import Allowlist
from nodmix.sessions.files import private_dirs
from nodmix.sessions.scan import transcript_files
from nodmix.sessions.store import STORE_FILE_NAME, SessionStore
from nodmix.sessions.store_entry import StoreData
from nodmix.state.migrate_check import (
    STATUS_DIRS,
    Report,
    agent_dirs,
    check,
    check_files,
    continues,
    diverged_note,
    split_transcript,
)
from nodmix.subagents.store import FileSubagentStore

if TYPE_CHECKING:
    from nodmix.state.postgres.backend import PostgresState


def _merge(source: StoreData, report: Report, where: str) -> Callable[[StoreData], None]:
    def merge(data: StoreData) -> None:
        for key, entry in source.items():
            current = data.get(key)
            if current is None:
                data[key] = entry
                report.add("index entries")
            elif current == entry:
                continue
            elif (
                current.session_id == entry.session_id
                and entry.updated_at > current.updated_at
                and entry.session_file not in report.diverged
            ):
                # The same session, further along at the source (the round trip files ->
                # postgres -> files): its newer counters and times replace the stale copy.
                data[key] = entry
                report.add("index entries updated")
            elif (
                current.session_id != entry.session_id
                or entry.updated_at == current.updated_at
                or entry.session_file in report.diverged
            ):
                report.conflicts.append(f"{where}: {key} differs at the target (kept as it is)")
            # else: the same session, further along at the target: it stays as it is.

    return merge


# ---- files -> database ----------------------------------------------------------------------


def to_postgres(state_dir: Path, pg: PostgresState) -> Report:
    """Copy the file state under `state_dir` into `pg`'s database, then check it."""
    from nodmix.state.postgres import transfer

    report = Report("files -> postgres")
    backend = pg.sessions()
    for agent in agent_dirs(state_dir):
        folder = sessions_dir(state_dir, agent)
        for status, sub in STATUS_DIRS.items():
            for path in transcript_files(folder / sub if sub else folder):
                header, lines = split_transcript(path.read_bytes())
                if not header:
                    report.problems.append(f"{path}: no session header (not copied)")
                    continue
                stored = transfer.stored_lines(pg.db, agent, path.name)
                if stored is not None and not continues(stored, header, lines):
                    report.conflicts.append(diverged_note(path))
                    report.diverged.add(path.name)
                    continue
                added = transfer.put_transcript(pg.db, agent, path, header, lines, status)
                report.add("transcript lines", added)
                report.add("transcripts", int(added > 0))
                crash_point("state.migrate.transcript")
        if (folder / STORE_FILE_NAME).exists() or (folder / f"{STORE_FILE_NAME}.journal").exists():
            source = SessionStore.for_agent(state_dir, agent).load()
            backend.index(agent, durable=True).update(_merge(source, report, agent))
    _automation_to(state_dir, pg, report)
    _channels_to(state_dir, pg, report)
    _token(FileTokenStore(state_dir), pg.provide("gateway.token"), report)
    raw, target_list = Allowlist(state_dir)._raw(), pg.provide("security.allowlist")
    if raw is not None and target_list._raw() is None:
        target_list._write(raw)
        report.add("allowlist")
    target = pg.provide("subagents.runs")
    for run in FileSubagentStore(state_dir / "subagents" / "runs").all():
        if target.get(run.run_id) is None:
            target.save(run)
            report.add("subagent runs")
    _runs_to(state_dir, pg, report)
    _checkpoints(
        FileCheckpointStore(state_dir), pg.provide("checkpoints"), agent_dirs(state_dir), report
    )
    check(state_dir, pg, report)
    return report


def _automation_to(state_dir: Path, pg: PostgresState, report: Report) -> None:
    from nodmix.state.postgres import transfer

    files = JobStore(state_dir)
    jobs = files.load()
    if jobs:

        def merge(current: list[Any]) -> None:
            have = {job.id for job in current}
            for job in jobs:
                if job.id not in have:
                    current.append(job)
                    report.add("cron jobs")

        pg.provide("automation.jobs").update(merge)
    if files.state_path.exists():
        target = pg.provide("automation.jobs")
        if not target.load_state():
            target.write_state(files.state_path.read_bytes())
            report.add("cron state")
    history = RunHistory(state_dir)
    encoder = msgspec.json.Encoder()
    for job_id in history.job_ids():
        for run in history._read(job_id)[1]:
            added = transfer.put_cron_run(
                pg.db,
                run.job_id,
                run.run_id,
                run.started_at,
                run.status,
                run.owner,
                encoder.encode(run),
                run.slot,
                run.trigger,
            )
            report.add("cron runs", int(added))
        if files.failure_reported(job_id):
            pg.provide("automation.jobs").set_failure_reported(job_id, True)


def _channels_to(state_dir: Path, pg: PostgresState, report: Report) -> None:
    from nodmix.state.postgres import transfer

    pairing = PairingStore(state_dir)
    target = pg.provide("channels.pairing")
    for channel in pairing.channels():
        if not target.load(channel).approved and not target.load(channel).pending:
            target._save(channel, pairing.load(channel))
            report.add("pairing channels")
    root = channels_dir(state_dir)
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if folder.name == "pairing":
            continue
        log, into = (
            DeliveryLog(state_dir, folder.name),
            pg.provide("channels.delivery", folder.name),
        )
        position = log.position()
        if position and not into.position():
            into.save_position(position)
            report.add("channel positions")
        for msg in log.pending():
            report.add("pending messages", int(into.accept(msg)))
        keys = read_json(folder / "answered.json", {}).get("keys", [])
        transfer.put_answered(pg.db, folder.name, [k for k in keys if isinstance(k, str)])
        _records(log, into, report)


def _runs_to(state_dir: Path, pg: PostgresState, report: Report) -> None:
    from nodmix.codemode.run_records import RunFileError, decode
    from nodmix.state.postgres import transfer

    folder = state_dir / "codemode" / "runs"
    for path in sorted(folder.glob("*.run")) if folder.is_dir() else []:
        data = path.read_bytes()
        try:
            record, _ = decode(data)
        except RunFileError as exc:
            report.problems.append(f"{path}: {exc} (not copied)")
            continue
        added = transfer.put_parked_run(
            pg.db,
            record.id,
            record.scope.agent_id,
            record.scope.session_key,
            record.created_at,
            record.expires_at,
            data,
        )
        report.add("parked code-mode runs", int(added))


# ---- database -> files ----------------------------------------------------------------------


def to_files(state_dir: Path, pg: PostgresState) -> Report:
    """Copy the database into the file state under `state_dir`, then check it."""
    from nodmix.state.postgres import transfer

    report = Report("postgres -> files")
    for agent, name, status, header, lines in transfer.transcripts(pg.db):
        folder = sessions_dir(state_dir, agent) / STATUS_DIRS.get(status, "")
        private_dirs(folder)
        path = folder / name
        have = split_transcript(path.read_bytes())[1] if path.exists() else None
        if have is not None and not continues((header, have), header, lines):
            report.conflicts.append(diverged_note(path))
            report.diverged.add(name)
            continue
        if have is None:
            tmp = path.with_name(f".{name}.migrate.tmp")
            tmp.write_bytes(header + b"".join(lines))
            tmp.chmod(0o600)
            tmp.replace(path)
            report.add("transcript lines", len(lines))
        elif len(have) < len(lines):
            with path.open("ab") as fh:
                fh.write(b"".join(lines[len(have) :]))
            report.add("transcript lines", len(lines) - len(have))
        else:
            continue
        report.add("transcripts")
    for agent in pg.sessions().agent_ids():
        source = pg.sessions().index(agent, durable=True).load()
        SessionStore.for_agent(state_dir, agent).update(_merge(source, report, agent))
    _automation_back(state_dir, pg, report)
    _channels_back(state_dir, pg, report)
    _token(pg.provide("gateway.token"), FileTokenStore(state_dir), report)
    raw = pg.provide("security.allowlist")._raw()
    if raw is not None and Allowlist(state_dir)._raw() is None:
        Allowlist(state_dir)._write(raw)
        report.add("allowlist")
    files = FileSubagentStore(state_dir / "subagents" / "runs")
    for run in pg.provide("subagents.runs").all():
        if files.get(run.run_id) is None:
            files.save(run)
            report.add("subagent runs")
    _runs_back(state_dir, pg, report)
    agents = pg.sessions().agent_ids()
    _checkpoints(pg.provide("checkpoints"), FileCheckpointStore(state_dir), agents, report)
    check_files(state_dir, pg, report)
    return report


def _token(source: TokenStore, target: TokenStore, report: Report) -> None:
    """The token a gateway made itself, so its clients keep working (never overwritten)."""
    token = source.load()
    if token is not None and target.load() is None:
        report.add("gateway token", int(target.load_or_create(token) == token))


def _checkpoints(
    source: FileCheckpointStore, target: FileCheckpointStore, agents: list[str], report: Report
) -> None:
    for agent in agents:
        have = {info.id for info in target.list_checkpoints(agent)}
        for info in reversed(source.list_checkpoints(agent)):  # oldest first: pruning keeps
            if info.id not in have:  # the newest, as at the source
                _, body = source.read(agent, info.id)
                target.save(info, body)
                report.add("checkpoints")


def _automation_back(state_dir: Path, pg: PostgresState, report: Report) -> None:
    from nodmix.state.postgres import transfer

    source, files = pg.provide("automation.jobs"), JobStore(state_dir)
    jobs = source.load()

    def merge(current: list[Any]) -> None:
        have = {job.id for job in current}
        for job in jobs:
            if job.id not in have:
                current.append(job)
                report.add("cron jobs")

    if jobs:
        files.update(merge)
    state = source.load_state()
    if state and not files.load_state():
        files.save_state(state)
        report.add("cron state")
    history = RunHistory(state_dir)
    decoder = msgspec.json.Decoder(RunRecord)
    known: dict[str, set[str]] = {}
    for raw in transfer.cron_runs(pg.db):
        run = decoder.decode(raw)
        have = known.setdefault(run.job_id, {r.run_id for r in history._read(run.job_id)[1]})
        if run.run_id not in have:
            history.record(run)
            report.add("cron runs")


def _channels_back(state_dir: Path, pg: PostgresState, report: Report) -> None:
    from nodmix.state.postgres import transfer

    source, files = pg.provide("channels.pairing"), PairingStore(state_dir)
    for channel in source.channels():
        if not files.path(channel).exists():
            files._save(channel, source.load(channel))
            report.add("pairing channels")
    for channel in transfer.delivery_channels(pg.db):
        into, origin = DeliveryLog(state_dir, channel), pg.provide("channels.delivery", channel)
        if origin.position() and not into.position():
            into.save_position(origin.position())
            report.add("channel positions")
        for msg in origin.pending():
            report.add("pending messages", int(into.accept(msg)))
        keys = transfer.answered(pg.db, channel)
        if keys:
            path = channels_dir(state_dir) / channel / "answered.json"
            old = [k for k in read_json(path, {}).get("keys", []) if isinstance(k, str)]
            write_json(path, {"keys": list(dict.fromkeys(old + keys))[-2000:]})
        _records(origin, into, report)


def _records(origin: DeliveryLog, into: DeliveryLog, report: Report) -> None:
    """Copy a channel's append-only records (WhatsApp's handled ids) where none are yet."""
    for name in origin.record_names():
        records, _ = origin.records(name)
        if records and not into.records(name)[0]:
            into.compact_records(name, records, upto=0)
            report.add("channel records", len(records))


def _runs_back(state_dir: Path, pg: PostgresState, report: Report) -> None:
    from nodmix.assets.files import atomic_write, ensure_private_dir
    from nodmix.state.postgres import transfer

    folder = ensure_private_dir(state_dir / "codemode" / "runs")
    for run_id, data in transfer.parked_runs(pg.db):
        path = folder / f"{run_id}.run"
        if not path.exists():
            atomic_write(path, data)
            report.add("parked code-mode runs")
