#!/usr/bin/env bash
# Voice notes are converted with Debian's ffmpeg (speech replies to OGG/Opus for Telegram's
# sendVoice, recordings to a format the transcription endpoint takes). Install it when missing,
# saying so first.
exec "$(dirname "$0")/ensure-debian-package.sh" ffmpeg ffmpeg "voice notes need ffmpeg"
