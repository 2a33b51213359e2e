#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through playwright-core. Install it when missing,
# saying so first: this is the only system-wide change `make test` makes.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
install=(apt-get install -y -qq --no-install-recommends chromium)
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "chromium is missing and cannot be installed without root: apt-get install --no-install-recommends chromium" >&2
  exit 1
fi
echo "browser tests need Chromium: installing Debian's chromium system-wide (${sudo[*]:+sudo }apt-get install --no-install-recommends chromium)" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null
