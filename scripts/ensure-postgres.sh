#!/usr/bin/env bash
# The PostgreSQL state backend's tests and benchmarks start a real PostgreSQL server from
# Debian's `postgresql` package (initdb and pg_ctl into a temp dir, on a free loopback port,
# as the unprivileged `postgres` user when run as root). Install it when no server binaries
# are there. Debian keeps them off PATH, in /usr/lib/postgresql/<major>/bin.
set -euo pipefail
for bin in /usr/lib/postgresql/*/bin/initdb; do
  if [ -x "$bin" ]; then exit 0; fi
done
here=$(cd "$(dirname "$0")" && pwd)
# The helper installs when the command it names is missing; `initdb` is never on PATH here.
"$here/ensure-debian-package.sh" nodmix-no-initdb-on-path postgresql \
  "The PostgreSQL state backend's tests need a local PostgreSQL server"
