#!/usr/bin/env bash
# A sandboxed `exec` (agents.defaults.sandbox.mode) runs commands under Debian's bubblewrap, and the
# sandbox tests drive the real thing. Install it when missing, saying so first.
exec "$(dirname "$0")/ensure-debian-package.sh" bwrap bubblewrap "the sandboxed shell needs bubblewrap"
