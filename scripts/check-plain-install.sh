#!/usr/bin/env bash
# A plain install must work: build the wheel, install it WITHOUT extras or the lock file into a
# fresh venv, with an empty sandbox cache and state dir, point it at the scripted model server
# using the exact lines the server prints, and run a code-mode turn. That turn has to fetch the
# sandbox runtime itself (first use), so this also checks that path end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
PY=${PY:-python3}
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "plain-install check FAILED: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; cat "$f" >&2; done; exit 1; }

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
until grep -q '^  .*agents.defaults.model.primary' "$work/server.log"; do
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
