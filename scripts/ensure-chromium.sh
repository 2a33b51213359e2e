#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through playwright-core. Install it when missing,
# saying so first: this is the only system-wide change `make test` makes.
exec "$(dirname "$0")/ensure-debian-package.sh" chromium chromium "browser tests need Chromium"
