#!/usr/bin/env bash
# The onboarding wizard's terminal test drives `nodmix onboard` inside Debian's tmux. Install it
# when missing, saying so first.
set -euo pipefail
if command -v tmux >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "tmux is missing and cannot be installed without root: apt-get install --no-install-recommends tmux" >&2
  exit 1
fi
echo "the terminal tests need tmux: installing Debian's tmux system-wide (${sudo[*]:+sudo }apt-get install --no-install-recommends tmux)" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux >/dev/null
