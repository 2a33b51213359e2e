#!/usr/bin/env bash
# ensure-debian-package.sh COMMAND PACKAGE WHY: when COMMAND is missing, install Debian's PACKAGE
# system-wide, first saying WHY (as root, or through sudo); without either, say what to run.
set -euo pipefail
command_name=$1 package=$2 why=$3
if command -v "$command_name" >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "$package is missing and cannot be installed without root: apt-get install --no-install-recommends $package" >&2
  exit 1
fi
echo "$why: installing Debian's $package system-wide (${sudo[*]:+sudo }apt-get install --no-install-recommends $package)" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >/dev/null
