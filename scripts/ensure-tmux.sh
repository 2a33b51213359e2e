#!/usr/bin/env bash
# The onboarding wizard's terminal test drives `nodmix onboard` inside Debian's tmux. Install it
# when missing, saying so first.
exec "$(dirname "$0")/ensure-debian-package.sh" tmux tmux "the terminal tests need tmux"
