"""Where Nodmix keeps what it must remember: files under `$NODMIX_STATE_DIR` (the default), or
a PostgreSQL database that several gateway replicas share (`state.backend: "postgres"`).

- `binding`: the seam every stateful domain opens its store through (no Nodmix imports).
- `backend`: `open_state()`, the `StateBackend` the runtime holds, `FileState`.
- `coordination`: singletons and cross-replica events (`LocalCoordination` for files).
- `settings`, `extras`: the `state` config section; the driver's install hint.
- `postgres/`: the database backend, one module per domain, and its migrations.
- `migrate`: copying a file state directory into the database and back.

See docs/state.md for how a new store plugs in.
"""
