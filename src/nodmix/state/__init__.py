"""Where Nodmix keeps what it must remember: files under `$NODMIX_STATE_DIR` (the default), or
a PostgreSQL database that several gateway replicas share (`state.backend: "postgres"`).

- `backend`: `open_state()`, the `StateBackend` the runtime holds, `FileState`.
- `settings`, `extras`: the `state` config section; the driver's install hint.
- `postgres/`: the database backend, one module per domain, and its migrations.
- `migrate`: copying a file state directory into the database and back.

The seam every stateful domain opens its store through is `nodmix.stores`, and singletons and
cross-replica events go through `nodmix.coordination` (`LocalCoordination` for files): both
import nothing of Nodmix, so the stores of every layer use them. See docs/state.md for how a
new store plugs in.
"""
