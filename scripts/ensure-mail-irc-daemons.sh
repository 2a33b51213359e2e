#!/usr/bin/env bash
# The IRC and email channel tests run real local daemons: Debian's ngircd (IRC) and dovecot-imapd
# (IMAP), each started unprivileged by the tests with a generated config on a loopback port.
# The IRC TLS test makes its certificate with the openssl tool. Install what is missing, saying
# so first.
set -euo pipefail
missing=()
[ -x /usr/sbin/ngircd ] || missing+=(ngircd)
[ -x /usr/sbin/dovecot ] && [ -e /usr/lib/dovecot/imap ] || missing+=(dovecot-imapd)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi
install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "${missing[*]} missing and cannot be installed without root: apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "IRC/email channel tests need local daemons: installing Debian's ${missing[*]} system-wide (${sudo[*]:+sudo }apt-get install --no-install-recommends ${missing[*]})" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null
