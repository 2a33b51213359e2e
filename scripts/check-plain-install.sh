#!/usr/bin/env bash
# A plain install must work: build the wheel, install it WITHOUT extras or the lock file into a
# fresh venv, with an empty sandbox cache and state dir, point it at the scripted model server
# using the exact lines the server prints, and run a code-mode turn. That turn has to fetch the
# sandbox runtime itself (first use), so this also checks that path end to end.
#
# Then the extras: the core imports every module that is not an optional part's own package;
# a Discord channel configured on the core install is refused with one line naming the install
# command (config set, doctor, gateway start) while the gateway serves turns; that command,
# run as printed, installs the extra; and `pip install '.[telegram]'` into another fresh venv
# runs a Telegram turn against the scripted Bot API.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
PY=${PY:-python3}
work=$(mktemp -d)
server_pid=""
gateway_pid=""
bot_pid=""
stop() { if [ -n "$1" ]; then kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; fi; }
cleanup() {
  stop "$gateway_pid"; stop "$bot_pid"; stop "$server_pid"
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "plain-install check FAILED: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -n 60 "$f" >&2; done; exit 1; }
# wait_for FILE TEXT WHAT: poll (with a deadline) until FILE has a line containing TEXT.
wait_for() {
  local deadline=$((SECONDS + 60))
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$3 (no '$2' in $1 within 60 s)"
    sleep 0.2
  done
}
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "plain-install check: wheel -> fresh venv without extras, empty cache and state ($work)"
"$PY" -m pip wheel -q --no-deps -w "$work/dist" "$repo" >"$work/build.log" 2>&1 || fail "wheel build"
"$PY" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$work"/dist/nodmix-*.whl >"$work/install.log" 2>&1 || fail "pip install"

export NODMIX_CACHE_DIR="$work/cache" NODMIX_STATE_DIR="$work/state"
export NODMIX_CONFIG_PATH="$work/state/nodmix.json"
mkdir -p "$NODMIX_CACHE_DIR" "$NODMIX_STATE_DIR/workspace"
nodmix="$work/venv/bin/nodmix"
cd "$work"

"$work/venv/bin/python" -m nodmix.testing.model_server --script code-mode >"$work/server.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + 30))
until grep -q '^  .*agents.defaults.model.primary' "$work/server.log" 2>/dev/null; do
  kill -0 "$server_pid" 2>/dev/null || fail "the model server exited"
  [ "$SECONDS" -lt "$deadline" ] || fail "the model server did not start within 30 s"
  sleep 0.1
done
# The lines the server prints are meant to be pasted: run them as printed.
while IFS= read -r line; do
  eval "$line" >/dev/null || fail "printed setup line failed: $line"
done < <(grep '^  ' "$work/server.log")
"$nodmix" config set tools.codeMode true >/dev/null || fail "config set tools.codeMode"

echo "The ferry leaves at 9:40." >"$NODMIX_STATE_DIR/workspace/notes.txt"
"$nodmix" agent --local -m "read notes.txt" >"$work/turn.log" 2>"$work/turn-stderr.log" \
  || fail "the code-mode turn failed"
grep -q "The ferry leaves at 9:40." "$work/turn.log" || fail "the reply lacks the file's text"
grep -q "first use of code mode: fetching" "$work/turn-stderr.log" \
  || fail "the first code-mode run did not fetch the sandbox runtime"
"$nodmix" doctor --offline >"$work/doctor.log" 2>&1 || fail "nodmix doctor reports an error"
grep -q "a sandbox cell ran" "$work/doctor.log" || fail "doctor did not run a sandbox cell"
"$nodmix" skills list >"$work/skills.log" 2>&1 || fail "nodmix skills list"
grep -q "^daily-note .*bundled" "$work/skills.log" || fail "the wheel lacks the bundled skills"
echo "plain-install check: ok (first-use runtime fetch, code-mode turn, doctor)"

echo "plain-install check: the core imports without any optional library"
"$work/venv/bin/python" - >"$work/imports.log" 2>&1 <<'PY' || fail "a core module needs an extra"
import importlib, pathlib, nodmix
from nodmix.extras import PARTS, installed
assert not any(installed(row) for row in PARTS), "an extra's library is in the core install"
optional = tuple(f"{row.package}." for row in PARTS if row.package)
root = pathlib.Path(nodmix.__file__).parent
for path in sorted(root.rglob("*.py")):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    if not name.endswith("__main__") and not f"{name}.".startswith(optional):
        importlib.import_module(name)
PY

echo "plain-install check: a Discord channel on the core install is refused with the install line"
hint="venv/bin/pip install 'nodmix[discord]'"
"$nodmix" config set channels.discord '{token: "not-a-real-token"}' >/dev/null 2>"$work/set.log" \
  || fail "config set channels.discord"
[ "$(wc -l <"$work/set.log")" -eq 1 ] && grep -qF "$hint" "$work/set.log" \
  || fail "config set did not print the one install line"
if "$nodmix" doctor --offline >"$work/doctor-discord.log" 2>&1; then fail "doctor passed a channel it cannot run"; fi
grep -qF "✗ channel discord: the Discord channel (channels.discord) needs the 'discord' extra" \
  "$work/doctor-discord.log" && grep -qF "$hint" "$work/doctor-discord.log" \
  || fail "doctor did not name the install command"
port=$(free_port)
"$nodmix" config set gateway.port "$port" >/dev/null || fail "config set gateway.port"
"$nodmix" gateway >"$work/gateway.log" 2>&1 &
gateway_pid=$!
wait_for "$work/gateway.log" "listening on" "the core gateway did not start"
wait_for "$work/gateway.log" "channel discord not started: the Discord channel (channels.discord)" \
  "gateway start did not refuse discord"
grep -qF "$hint" "$work/gateway.log" || fail "gateway start did not name the install command"
for log in set doctor-discord gateway; do
  if grep -q "Traceback" "$work/$log.log"; then fail "a traceback in $log.log for a missing extra"; fi
done
NODMIX_AGENT_REQUIRE_GATEWAY=1 "$nodmix" agent -m "read notes.txt" >"$work/gateway-turn.log" 2>&1 \
  || fail "a turn through the core gateway failed"
grep -q "The ferry leaves at 9:40." "$work/gateway-turn.log" || fail "the gateway turn lacks the file"
stop "$gateway_pid"; gateway_pid=""
eval "$hint" >"$work/hint-install.log" 2>&1 || fail "the printed install command failed: $hint"
"$nodmix" doctor --offline >"$work/doctor-after.log" 2>&1
grep -q "✓ channel discord: configured" "$work/doctor-after.log" \
  || fail "after the printed command, doctor still misses the discord extra"

echo "plain-install check: state.backend postgres on the core install fails with one install line"
mkdir -p "$work/pg-state"
echo '{state: {backend: "postgres", postgres: {url: "postgresql://127.0.0.1:1/nodmix"}}}' \
  >"$work/pg-state/nodmix.json"
if NODMIX_STATE_DIR="$work/pg-state" NODMIX_CONFIG_PATH="$work/pg-state/nodmix.json" \
  "$nodmix" gateway --port 0 >"$work/pg.log" 2>&1; then fail "a postgres backend started without psycopg"; fi
grep -qF "nodmix: error: state.backend: the postgres state backend needs the PostgreSQL driver" \
  "$work/pg.log" && grep -qF "pip install 'nodmix[postgres]'" "$work/pg.log" \
  || fail "the postgres backend without its extra did not name the install command"
if grep -q "Traceback" "$work/pg.log"; then fail "a traceback in pg.log for the missing postgres extra"; fi

echo "plain-install check: pip install '.[telegram]' into a fresh venv, a turn over the Bot API"
"$PY" -m venv "$work/tg"
"$work/tg/bin/python" -m pip install -q "$repo[telegram]" >"$work/tg-install.log" 2>&1 \
  || fail "pip install '.[telegram]'"
export NODMIX_STATE_DIR="$work/tg-state" NODMIX_CONFIG_PATH="$work/tg-state/nodmix.json"
mkdir -p "$NODMIX_STATE_DIR"
tg="$work/tg/bin/nodmix"
while IFS= read -r line; do
  eval "$line" >/dev/null || fail "printed setup line failed: $line"
done < <(grep '^  .*config set' "$work/server.log")
mkfifo "$work/bot.in"
exec 3<>"$work/bot.in"
"$work/tg/bin/python" -m nodmix.testing.telegram_server --port 0 <"$work/bot.in" >"$work/bot.log" 2>&1 &
bot_pid=$!
wait_for "$work/bot.log" "config set channels.telegram" "the scripted Bot API did not start"
eval "$(grep -m1 'config set channels.telegram' "$work/bot.log")" >/dev/null \
  || fail "the Bot API's printed config line failed"
"$tg" config set channels.telegram.allowFrom '[42]' >/dev/null || fail "allowFrom"
"$tg" config set gateway.port "$(free_port)" >/dev/null || fail "config set gateway.port"
"$tg" gateway >"$work/tg-gateway.log" 2>&1 &
gateway_pid=$!
wait_for "$work/tg-gateway.log" "listening on" "the Telegram gateway did not start"
echo "hello from the ferry" >&3
wait_for "$work/bot.log" "bot -> 42: hello from the ferry" "no Telegram reply"
echo "plain-install check: ok (core imports, Discord refused with its install line, Telegram turn)"
