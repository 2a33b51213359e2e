"""`nodmix state migrate|status`: move a deployment between the files and postgres backends,
and see the backend, its replicas and who runs which singleton."""

from __future__ import annotations

import argparse
import os
from typing import Any

from nodmix.cli.common import common_parent, print_json, show_help_without_action


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `state` command group."""
    p = sub.add_parser(
        "state",
        parents=[common_parent()],
        help="the state backend: migrate between files and PostgreSQL, status",
        description=(
            "Nodmix keeps its state in files under the state directory (state.backend: files) "
            "or in PostgreSQL, shared by gateway replicas (state.backend: postgres)."
        ),
    )
    show_help_without_action(p)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    q = actions.add_parser(
        "migrate",
        parents=[common_parent()],
        help="copy the state directory into PostgreSQL, or PostgreSQL into the state directory",
        description=(
            "Copies sessions (index and transcripts), cron jobs, state and history, pairing, "
            "channel delivery state, the exec allowlist, subagent runs and parked code-mode "
            "runs, then checks the copy. Safe to run again: what is there already is kept, so "
            "an interrupted migration is finished by running it once more. Memory indexes "
            "stay with their workspace. Stop the gateways first."
        ),
    )
    q.add_argument("--to", required=True, choices=["postgres", "files"])
    q.add_argument("--url", help="the database (default: state.postgres.url, NODMIX_DATABASE_URL)")
    q.add_argument("--force", action="store_true", help="even while a gateway is running")
    q.add_argument("--json", action="store_true", help="print the report as JSON")
    q.set_defaults(handler=_migrate)
    q = actions.add_parser(
        "status", parents=[common_parent()], help="backend, database, replicas and singletons"
    )
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(handler=_status)


def _settings(url: str | None) -> Any:
    from nodmix.config.loader import load_config
    from nodmix.errors import ConfigError
    from nodmix.state.settings import StateSettings, state_settings

    env = dict(os.environ)
    loaded = load_config(env=env)
    if url:
        return StateSettings(backend="postgres", url=url)
    config = loaded.config
    if config.state.postgres is None or not config.state.postgres.url:
        if env.get("NODMIX_DATABASE_URL"):
            return StateSettings(backend="postgres", url=env["NODMIX_DATABASE_URL"])
        raise ConfigError(
            "name the database with --url, state.postgres.url or NODMIX_DATABASE_URL",
            key="state.postgres.url",
        )
    import msgspec

    forced = msgspec.structs.replace(
        config, state=msgspec.structs.replace(config.state, backend="postgres")
    )
    return state_settings(forced, env, file=str(loaded.path))


def _migrate(args: argparse.Namespace) -> int:
    from nodmix.config import paths
    from nodmix.errors import NodmixError
    from nodmix.gateway.presence import read_presence
    from nodmix.state import migrate, migrate_check
    from nodmix.state.postgres.backend import PostgresState

    state_dir = paths.state_dir()
    settings = _settings(args.url)
    running = read_presence(state_dir)
    if running is not None and not args.force:
        raise NodmixError(
            f"a gateway is running on {state_dir} (pid {running.get('pid')}): stop it first, "
            "so nothing changes while the state is copied (or pass --force)"
        )
    pg = PostgresState.open(settings, state_dir / ".migrate", role="migrate")
    try:
        live = [r for r in pg.pg.describe()["replicas"] if not r["self"]]
        if live and not args.force:
            raise NodmixError(
                f"{len(live)} gateway replica(s) use {pg.db.where}: stop them first "
                "(or pass --force)"
            )
        if args.to == "postgres":
            report = migrate.to_postgres(state_dir, pg)
        else:
            report = migrate.to_files(state_dir, pg)
    finally:
        pg.close()
    if args.json:
        print(migrate_check.dump(report))
    else:
        print(migrate_check.render(report))
    return 0 if not report.problems else 1


def _status(args: argparse.Namespace) -> int:
    from nodmix.config import paths
    from nodmix.config.loader import load_config
    from nodmix.state.backend import open_state

    env = dict(os.environ)
    loaded = load_config(env=env)
    backend = open_state(loaded.config, env, paths.state_dir(env), file=str(loaded.path))
    try:
        report = backend.describe()
    finally:
        backend.close()
    if args.json:
        print_json(report)
    else:
        print("\n".join(render(report)))
    return 0


def render(report: dict[str, Any]) -> list[str]:
    """The backend report as terminal lines (also used by `nodmix status`)."""
    if report.get("backend") != "postgres":
        return [f"state:     files under {report.get('stateDir')}"]
    lines = [
        f"state:     postgres {report['database']} (schema {report['schemaVersion']}, "
        f"lease {report['leaseSeconds']:g}s)",
        f"replicas:  {len(report['replicas'])}",
    ]
    lines += [
        f"  {replica['id']}  {replica.get('url') or '-'}  seen {replica['seenSecondsAgo']:g}s ago"
        for replica in report["replicas"]
    ]
    lines.append("singletons:" + ("" if report["singletons"] else " none running"))
    for lease in report["singletons"]:
        state = "held" if lease["live"] else "expired"
        lines.append(
            f"  {lease['name']}: {lease['holder']} ({state}, "
            f"{lease['expiresInSeconds']:g}s left, epoch {lease['epoch']})"
        )
    return lines
