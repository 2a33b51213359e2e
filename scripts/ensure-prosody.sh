#!/usr/bin/env bash
# The XMPP channel tests run a real XMPP server: Debian's Prosody, started unprivileged by the
# tests with a generated config on a loopback port (accounts made with prosodyctl).
set -euo pipefail
exec "$(dirname "$0")/ensure-debian-package.sh" prosody prosody "XMPP channel tests need a local XMPP server"
