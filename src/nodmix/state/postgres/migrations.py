"""Schema migrations: numbered SQL files applied in order, recorded in
`nodmix_schema_version`.

Every replica migrates on start, under a transaction-wide advisory lock, so replicas started
together never race: the first applies what is missing, the others wait and then find nothing
to do. Each file runs in one transaction with its version row, so a crash mid-migration leaves
the schema as it was before that file. A database migrated by a newer Nodmix (a version this
one does not know) is refused with a clear error instead of being written to: on start, and by
a replica already running when the newer one migrated, which notices at its next heartbeat
(`check_schema`, a third of `leaseSeconds`) and from then on refuses every statement with one
line naming both versions (`nodmix status` and `/health` show it).
"""

from __future__ import annotations

import functools
import logging
import re
from importlib import resources
from typing import TYPE_CHECKING, Any

from nodmix import __version__
from nodmix.errors import StateUnavailableError

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.state")

MIGRATION_LOCK = 0x6E6F646D69780001
"""The advisory lock key that serialises migrations ("nodmix" and 1)."""
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def migrations() -> list[tuple[int, str, str]]:
    """`(version, name, sql)` of every migration shipped, in order."""
    found = []
    for item in resources.files("nodmix.state.postgres").joinpath("sql").iterdir():
        match = _NAME.match(item.name)
        if match:
            found.append((int(match.group(1)), match.group(2), item.read_text(encoding="utf-8")))
    return sorted(found)


@functools.cache
def latest_version() -> int:
    """The schema version this Nodmix writes."""
    return max(version for version, _, _ in migrations())


def check_schema(db: Database) -> str | None:
    """Refuse the database from now on if a newer Nodmix migrated it past this one's schema;
    the refusal line (None: the schema is one this Nodmix knows).

    Raises:
        StateUnavailableError: the database cannot be read now (checked again next time).
    """
    if db.refusal is not None:
        return db.refusal
    found, known = db.query(_newest), latest_version()
    if found > known:
        db.refusal = (
            f"the state database was migrated to schema version {found} by a newer "
            f"Nodmix; this one ({__version__}, schema version {known}) no longer writes to it: "
            "upgrade Nodmix here and restart it"
        )
        log.error("%s (%s)", db.refusal, db.where)
    return db.refusal


def migrate(db: Database) -> list[int]:
    """Bring the schema up to date; the versions applied now (empty: already current).

    Raises:
        StateUnavailableError: the database was migrated by a newer Nodmix, or a migration
            failed (its transaction is rolled back).
    """
    with db.connection() as conn:
        return _migrate(conn, db.where)


def _migrate(conn: psycopg.Connection[Any], where: str) -> list[int]:
    import psycopg

    known = migrations()
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS nodmix_schema_version ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM nodmix_schema_version")}
        newest = max((v for v, _, _ in known), default=0)
        if done and max(done) > newest:
            raise StateUnavailableError(
                f"the state database {where} has schema version {max(done)}, newer than this "
                f"Nodmix knows ({newest}); upgrade Nodmix on this machine"
            )
        for version, name, sql in known:
            if version in done:
                continue
            try:
                with conn.transaction():
                    conn.execute(sql.encode("utf-8"))
                    conn.execute(
                        "INSERT INTO nodmix_schema_version (version, name) VALUES (%s, %s)",
                        (version, name),
                    )
            except psycopg.Error as exc:
                raise StateUnavailableError(
                    f"migration {version:04d}_{name} of {where} failed: {exc}"
                ) from None
            applied.append(version)
    return applied


def _newest(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT max(version) FROM nodmix_schema_version").fetchone()
    return int(row[0] or 0) if row else 0


def schema_version(db: Database) -> int:
    """The version the database is at (0: never migrated)."""
    import psycopg

    with db.connection() as conn:
        try:
            row = conn.execute("SELECT max(version) FROM nodmix_schema_version").fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
    return int(row[0] or 0) if row else 0
