"""Pending approval requests of every replica (`gateway.approvals_shared.SharedApprovals`):
one document per request under `security.approvals`, holding its wire shape and the replica
that asked. A request whose replica stopped heartbeating, or whose time ran out, is no longer
listed and is removed by the next listing."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from nodmix.state.postgres import documents

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.coordination import PgCoordination
    from nodmix.state.postgres.database import Database

NAMESPACE = "security.approvals"


class PgSharedApprovals:
    """Requests recorded by the replica whose turn asked."""

    round_trips = True
    """Every call is a database round trip (`nodmix.offload`)."""

    def __init__(self, db: Database, pg: PgCoordination) -> None:
        self.db = db
        self.pg = pg

    def asked(self, requests: list[dict[str, Any]]) -> None:
        """One document per request (not flushed: it lives as long as its replica)."""
        for request in requests:
            body = json.dumps({**request, "replica": self.pg.replica_id}).encode()
            documents.write(self.db, NAMESPACE, str(request["id"]), body, durable=False)

    def settled(self, request_id: str) -> None:
        """Answered or timed out: gone from every replica's list."""
        documents.delete(self.db, NAMESPACE, request_id)

    def pending(self, *, session_key: str | None = None) -> list[dict[str, Any]]:
        """Requests of live replicas that have not run out of time, oldest first."""

        def work(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            live = {
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM nodmix_replicas"
                    " WHERE seen_at > now() - %s * interval '1 second'",
                    (self.pg.lease_seconds,),
                )
            }
            rows = conn.execute(
                "SELECT name, body FROM nodmix_documents WHERE namespace = %s ORDER BY updated_at",
                (NAMESPACE,),
            ).fetchall()
            now_ms = time.time() * 1000
            found, stale = [], []
            for name, body in rows:
                try:
                    request = json.loads(bytes(body))
                    alive = request.get("replica") in live and request["expiresAt"] > now_ms
                except (ValueError, KeyError, TypeError):
                    alive = False
                if not alive:
                    stale.append(str(name))
                elif session_key in (None, request.get("sessionKey")):
                    request.pop("replica", None)
                    found.append(request)
            if stale:
                conn.execute(
                    "DELETE FROM nodmix_documents WHERE namespace = %s AND name = ANY(%s)",
                    (NAMESPACE, stale),
                )
            return found

        return self.db.run(work)
