"""`PostgresState`: the postgres state backend of one process (a replica, or a CLI command)."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from nodmix import stores
from nodmix.coordination import Coordination
from nodmix.sessions.backend import SessionBackend
from nodmix.state.postgres.coordination import PgCoordination
from nodmix.state.postgres.database import Database
from nodmix.state.postgres.locks import AdvisoryLocks
from nodmix.state.postgres.migrations import migrate, schema_version
from nodmix.state.postgres.sessions import PgSessions
from nodmix.state.settings import StateSettings

log = logging.getLogger("nodmix.state")


def new_replica_id(role: str) -> str:
    """`<host>:<pid>:<random>` (a reused pid never passes for a dead replica)."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{secrets.token_hex(3)}"


class PostgresState:
    """The database, this process's advisory locks and coordination, bound to a state dir."""

    kind = "postgres"

    def __init__(self, settings: StateSettings, state_dir: Path, *, role: str) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self.replica_id = new_replica_id(role)
        self.db = Database(settings, application_name=f"nodmix {role}")
        self.locks = AdvisoryLocks(self._lock_connection, self.db.where)
        self.pg = PgCoordination(
            self.db, replica_id=self.replica_id, lease_seconds=settings.lease_seconds
        )
        self.coordination: Coordination = self.pg
        self._sessions: PgSessions | None = None
        self.migrated: list[int] = []

    @classmethod
    def open(cls, settings: StateSettings, state_dir: Path, *, role: str) -> PostgresState:
        """Connect, migrate and bind (see `open_state`)."""
        state = cls(settings, state_dir, role=role)
        state.db.open()
        try:
            state.migrated = migrate(state.db)
            if state.migrated:
                log.info("state database %s migrated to %s", state.db.where, state.migrated)
        except BaseException:
            state.db.close()
            raise
        stores.bind(state_dir, state)
        return state

    def _lock_connection(self) -> Any:
        import psycopg

        return psycopg.connect(self.db.conninfo, autocommit=True)

    def sessions(self) -> SessionBackend:
        """Sessions in the database."""
        if self._sessions is None:
            self._sessions = PgSessions(
                self.db, self.locks, self.state_dir, process=self.replica_id
            )
        return self._sessions

    def provide(self, domain: str, *args: Any) -> Any:
        """The database store of a domain (`stores.provided`); None keeps files."""
        maker = getattr(self, "_provide_" + domain.replace(".", "_"), None)
        return maker(*args) if maker is not None else None

    def _provide_sessions(self) -> SessionBackend:
        return self.sessions()

    def _provide_gateway_pointers(self, file_name: str) -> Any:
        from nodmix.state.postgres.pointers import PgSessionPointers

        return PgSessionPointers(self.db, self.state_dir, file_name)

    def _provide_gateway_token(self) -> Any:
        from nodmix.state.postgres.token import PgTokenStore

        return PgTokenStore(self.db)

    def _provide_checkpoints(self) -> Any:
        from nodmix.state.postgres.checkpoints import PgCheckpointStore

        return PgCheckpointStore(self.db, self.state_dir)

    def _provide_codemode_runs(self) -> Any:
        from nodmix.state.postgres.codemode import PgRunStore

        return PgRunStore(self.db, self.pg)

    def _provide_channels_delivery(self, channel: str) -> Any:
        from nodmix.state.postgres.channels import PgDeliveryLog

        return PgDeliveryLog(self.db, self.state_dir, channel)

    def _provide_channels_pairing(self) -> Any:
        from nodmix.state.postgres.channels import PgPairingStore

        return PgPairingStore(self.db, self.locks, self.state_dir)

    def _provide_security_allowlist(self) -> Any:
        from nodmix.state.postgres.security import PgAllowlist

        return PgAllowlist(self.db, self.state_dir)

    def _provide_security_approvals(self) -> Any:
        from nodmix.state.postgres.approvals import PgSharedApprovals

        return PgSharedApprovals(self.db, self.pg)

    def _provide_subagents_runs(self) -> Any:
        from nodmix.state.postgres.subagents import PgSubagentStore

        return PgSubagentStore(self.db, self.locks)

    def _provide_automation_jobs(self) -> Any:
        from nodmix.state.postgres.automation import PgJobStore

        return PgJobStore(self.db, self.locks, self.state_dir)

    def _provide_automation_history(self, kept: int) -> Any:
        from nodmix.state.postgres.automation import PgRunHistory

        return PgRunHistory(self.db, self.pg, self.state_dir, kept=kept)

    def describe(self) -> dict[str, Any]:
        """The database (password hidden), its schema, replicas and singleton holders."""
        out: dict[str, Any] = {
            "backend": "postgres",
            "database": self.db.where,
            "leaseSeconds": self.settings.lease_seconds,
            "schemaVersion": schema_version(self.db),
            "replica": self.replica_id,
        }
        out.update(self.pg.describe())
        return out

    def problem(self) -> str | None:
        """The refusal after a newer Nodmix migrated the schema (`migrations.check_schema`)."""
        return self.db.refusal

    def close(self) -> None:
        """Unbind, drop the locks and close the pool."""
        stores.unbind(self.state_dir, self)
        self.locks.close()
        self.db.close()
