"""How the user runs `nodmix` from here, so printed hints work when pasted.

A `make run` user has `.venv/bin/nodmix`, not `nodmix` on PATH; a `pip install --user` user
has `nodmix`. `nodmix_command()` is what hints print: `nodmix` when that name on PATH is this
very install, else the path of this install's script (relative to the working directory when
it is below it).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path


@functools.cache
def nodmix_command() -> str:
    """The command that runs this installation of nodmix, as a user would type it."""
    script = Path(sys.executable).parent / "nodmix"
    if not script.is_file():
        return "nodmix"
    found = shutil.which("nodmix")
    try:
        if found and os.path.samefile(found, script):
            return "nodmix"
    except OSError:
        pass
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def command(arguments: str) -> str:
    """`nodmix_command()` followed by `arguments`, e.g. `command("sandbox install")`."""
    return f"{nodmix_command()} {arguments}"
