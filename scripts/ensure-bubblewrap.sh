#!/usr/bin/env bash
# A sandboxed `exec` (agents.defaults.sandbox.mode) runs commands under Debian's bubblewrap, and the
# sandbox tests drive the real thing. Install it when missing, saying so first.
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then exit 0; fi
install=(apt-get install -y -qq --no-install-recommends bubblewrap)
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "bubblewrap is missing and cannot be installed without root: apt-get install --no-install-recommends bubblewrap" >&2
  exit 1
fi
echo "the sandboxed shell needs bubblewrap: installing Debian's bubblewrap system-wide (${sudo[*]:+sudo }apt-get install --no-install-recommends bubblewrap)" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null
