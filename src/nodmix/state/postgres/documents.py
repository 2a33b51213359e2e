"""Small named documents (`nodmix_documents`): what the file backend keeps as one JSON file
replaced atomically under a lock file (the cron jobs, the scheduler's state, a channel's
pairing file and position, the exec allowlist).

A document changes in a transaction holding its row (`SELECT ... FOR UPDATE`), so two
replicas (or a replica and a CLI command) never lose each other's edits; its `version` grows
with every change, so a reader can tell cheaply whether to read it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database


def read(db: Database, namespace: str, name: str) -> tuple[bytes, int] | None:
    """The document's bytes and version, or None."""

    def work(conn: psycopg.Connection[Any]) -> tuple[bytes, int] | None:
        row = conn.execute(
            "SELECT body, version FROM nodmix_documents WHERE namespace = %s AND name = %s",
            (namespace, name),
        ).fetchone()
        return (bytes(row[0]), int(row[1])) if row else None

    return db.run(work)


def version(db: Database, namespace: str, name: str) -> int | None:
    """The document's version (None: no such document)."""

    def work(conn: psycopg.Connection[Any]) -> int | None:
        row = conn.execute(
            "SELECT version FROM nodmix_documents WHERE namespace = %s AND name = %s",
            (namespace, name),
        ).fetchone()
        return int(row[0]) if row else None

    return db.run(work)


def write(db: Database, namespace: str, name: str, body: bytes, *, durable: bool = True) -> None:
    """Replace (or create) the document."""

    def work(conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            "INSERT INTO nodmix_documents (namespace, name, body) VALUES (%s, %s, %s)"
            " ON CONFLICT (namespace, name) DO UPDATE SET body = EXCLUDED.body,"
            " version = nodmix_documents.version + 1, updated_at = now()",
            (namespace, name, body),
        )

    db.run(work, durable=durable)


def delete(db: Database, namespace: str, name: str) -> bool:
    """Remove the document; False when there was none."""

    def work(conn: psycopg.Connection[Any]) -> bool:
        return (
            conn.execute(
                "DELETE FROM nodmix_documents WHERE namespace = %s AND name = %s",
                (namespace, name),
            ).rowcount
            > 0
        )

    return db.run(work, durable=True)


def names(db: Database, namespace: str) -> list[str]:
    """The documents of a namespace, sorted."""

    def work(conn: psycopg.Connection[Any]) -> list[str]:
        rows = conn.execute(
            "SELECT name FROM nodmix_documents WHERE namespace = %s ORDER BY name", (namespace,)
        ).fetchall()
        return [str(r[0]) for r in rows]

    return db.run(work)


def update(
    db: Database,
    namespace: str,
    name: str,
    change: Callable[[bytes | None], tuple[bytes | None, Any]],
) -> Any:
    """`change(current bytes or None) -> (new bytes or None to leave it, result)` under the
    document's row lock; returns the result."""
    with db.transaction(durable=True) as conn:
        conn.execute(
            "INSERT INTO nodmix_documents (namespace, name, body) VALUES (%s, %s, '')"
            " ON CONFLICT (namespace, name) DO NOTHING",
            (namespace, name),
        )
        row = conn.execute(
            "SELECT body FROM nodmix_documents WHERE namespace = %s AND name = %s FOR UPDATE",
            (namespace, name),
        ).fetchone()
        current = bytes(row[0]) if row and row[0] else None
        body, result = change(current)
        if body is not None:
            conn.execute(
                "UPDATE nodmix_documents SET body = %s, version = version + 1,"
                " updated_at = now() WHERE namespace = %s AND name = %s",
                (body, namespace, name),
            )
        elif current is None:
            conn.execute(
                "DELETE FROM nodmix_documents WHERE namespace = %s AND name = %s",
                (namespace, name),
            )
        return result
