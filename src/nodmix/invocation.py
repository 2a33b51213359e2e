"""How the user runs `nodmix` from here, so printed hints work when pasted.

A `make run` user has `.venv/bin/nodmix`, not `nodmix` on PATH; a `pip install --user` user
has `nodmix`. `nodmix_command()` is what hints print: `nodmix` when that name on PATH is this
very install, else the path of this install's script (relative to the working directory when
it is below it). `install_command()` is how hints say to add an extra to this install.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections.abc import Sequence
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


def install_command(
    extras: Sequence[str],
    *,
    keep: Sequence[str] = (),
    prefix: Path | None = None,
    base_prefix: Path | None = None,
    cwd: Path | None = None,
) -> str:
    """The command that adds `extras` to this installation of nodmix, as a user would paste it.

    A venv (`make run`'s `.venv`): its own pip, which keeps nodmix and installs what the
    extras need. pipx or `uv tool`: reinstall the tool with the extras, naming the extras
    already installed (`keep`) too, since the tool's environment is rebuilt. Otherwise the
    interpreter's pip (`--user` when nodmix is installed there).
    """
    prefix = Path(sys.prefix) if prefix is None else prefix
    base_prefix = Path(sys.base_prefix) if base_prefix is None else base_prefix
    cwd = Path.cwd() if cwd is None else cwd
    wanted = ",".join(dict.fromkeys([*extras, *keep]))
    pipx = prefix / "pipx_metadata.json"
    if pipx.is_file():
        source = _pipx_source(pipx)
        return f"pipx install --force {_quoted(_requirement(wanted, source))}"
    receipt = prefix / "uv-receipt.toml"
    if receipt.is_file():
        return f"uv tool install {_quoted(_requirement(wanted, _uv_source(receipt)))}"
    spec = _quoted(f"nodmix[{','.join(dict.fromkeys(extras))}]")
    if prefix != base_prefix:
        pip = prefix / "bin" / "pip"
        if pip.is_file():
            return f"{_shown(pip, cwd)} install {spec}"
        return f"{_shown(prefix / 'bin' / 'python', cwd)} -m pip install {spec}"
    user = " --user" if _user_install() else ""
    return f"{Path(sys.executable).name} -m pip install{user} {spec}"


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _requirement(extras: str, source: str | None) -> str:
    """`nodmix[extras]`, or `nodmix[extras] @ <url>` for a tool installed from a path or URL."""
    return f"nodmix[{extras}]" + (f" @ {source}" if source else "")


def _pipx_source(metadata: Path) -> str | None:
    """Where pipx installed nodmix from: None for the package index, else a URL."""
    try:
        main = json.loads(metadata.read_text(encoding="utf-8"))["main_package"]
        spec = str(main.get("package_or_url") or "")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return _as_url(spec)


def _uv_source(receipt: Path) -> str | None:
    """Where `uv tool` installed nodmix from: None for the package index, else a URL."""
    import tomllib

    try:
        data = tomllib.loads(receipt.read_text(encoding="utf-8"))
        requirement = next(
            r for r in data["tool"]["requirements"] if str(r.get("name", "")).lower() == "nodmix"
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StopIteration):
        return None
    for key in ("directory", "path", "editable"):
        if requirement.get(key):
            return Path(str(requirement[key])).resolve().as_uri()
    if requirement.get("git"):
        return f"git+{requirement['git']}"
    url = requirement.get("url")
    return str(url) if url else None


def _as_url(spec: str) -> str | None:
    if not spec or spec.split("[")[0].strip().lower().replace("_", "-") == "nodmix":
        return None
    if "://" in spec or spec.startswith("git+"):
        return spec
    return Path(spec).expanduser().resolve().as_uri()


def _user_install() -> bool:
    import site

    user_site = site.getusersitepackages()
    return bool(user_site) and Path(__file__).resolve().is_relative_to(Path(user_site).resolve())
