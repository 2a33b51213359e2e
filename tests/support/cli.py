"""The `nodmix` command in a real subprocess, against one state directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_nodmix(
    state: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = "",
    python: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m nodmix ARGS` with `state` as state directory and its `nodmix.json`.

    `env` adds variables, `stdin` is fed as input (empty by
    default, None inherits), `python` picks another
    interpreter (an installed virtualenv).
    """
    full_env = {
        **os.environ,
        "NODMIX_STATE_DIR": str(state),
        "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
        **(env or {}),
    }
    return subprocess.run(
        [str(python or sys.executable), "-m", "nodmix", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
