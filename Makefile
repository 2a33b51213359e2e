# Nodmix: two commands. `make run` sets up and starts the gateway; `make test` sets up and runs
# lint, type check and the whole suite. Everything a fresh machine needs is installed from here.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint typecheck unit plain-install bench install install-cli sandbox web node browser bubblewrap daemons postgres terminal media clean

# Every optional part (`[all]`: each channel's library, numpy, trafilatura, playwright, the web
# search clients) plus the dev tools, pinned by the lock. pip shows what it collects and
# installs: a first run takes minutes.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24"
	@echo "installing Nodmix with every extra and the dev tools into $(VENV) (pip's progress follows)"
	$(BIN)/python -m pip install --progress-bar on -c requirements.lock -e ".[all,dev]"
	touch $(STAMP)

# Byte-compile explicitly: with PYTHONDONTWRITEBYTECODE set (some environments do), an editable
# install would otherwise recompile every module on each start (~70 ms of `nodmix` start-up).
install: $(STAMP) sandbox web
	$(BIN)/python -m compileall -q src

# `nodmix` on PATH: a link in ~/.local/bin to this checkout's command (says so when that folder
# is not on PATH yet).
install-cli: install
	mkdir -p "$(HOME)/.local/bin"
	ln -sf "$(abspath $(BIN))/nodmix" "$(HOME)/.local/bin/nodmix"
	@case ":$$PATH:" in *":$(HOME)/.local/bin:"*) echo "nodmix: $(HOME)/.local/bin/nodmix";; \
	  *) echo "linked $(HOME)/.local/bin/nodmix; that folder is not on PATH yet:" \
	     'export PATH="$$HOME/.local/bin:$$PATH"  (add it to ~/.profile)';; esac

# Fetch quickjs.wasm from its npm package (pinned, hash-verified) and precompile it.
sandbox: $(STAMP)
	$(BIN)/nodmix sandbox install

# The web page's Markdown renderer and sanitizer (npm marked + dompurify, pinned, hash-verified).
web: $(STAMP)
	$(BIN)/nodmix web install

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch node_modules/.installed

node: node_modules/.installed

browser:
	scripts/ensure-chromium.sh

# The sandboxed shell (agents.defaults.sandbox.mode) runs commands under Debian's bubblewrap.
bubblewrap:
	scripts/ensure-bubblewrap.sh

# The IRC, email and XMPP channel tests run Debian's ngircd, dovecot-imapd and Prosody on
# loopback ports.
daemons:
	scripts/ensure-mail-irc-daemons.sh
	scripts/ensure-prosody.sh

# The PostgreSQL state backend is tested against a real server: Debian's postgresql.
postgres:
	scripts/ensure-postgres.sh

# `nodmix onboard` is tested in a real terminal: Debian's tmux.
terminal:
	scripts/ensure-tmux.sh

# Voice replies are converted to OGG/Opus (Telegram voice messages) with Debian's ffmpeg.
media:
	scripts/ensure-ffmpeg.sh

run: install media
	$(BIN)/nodmix gateway

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/python scripts/check_module_size.py
	$(BIN)/python scripts/check_import_cycles.py
	$(BIN)/check-jsonschema --builtin-schema vendor.compose-spec deploy/compose.yaml
	$(BIN)/hadolint Dockerfile

typecheck: $(STAMP)
	$(BIN)/mypy

unit: install node browser bubblewrap daemons postgres terminal media
	scripts/run-pytest.sh $(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# A wheel installed without extras into a fresh venv, empty cache: a code-mode turn must work.
plain-install:
	PY=$(PY) scripts/check-plain-install.sh

test: lint typecheck unit plain-install

bench: install node bubblewrap postgres media
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) node_modules
