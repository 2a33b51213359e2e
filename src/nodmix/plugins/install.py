"""Installing and removing plugin packages in the environment Nodmix runs in.

`pip` (as `sys.executable -m pip`) does the installing; Nodmix then checks, in a fresh
interpreter (so nothing stale is cached), that the installed distribution publishes a
`nodmix.plugins` entry point that loads a `Plugin`. A package that does not is uninstalled
again (when it was not there before) and nothing is enabled.

`link` (`plugins install -l PATH`) is for a plugin under development: nothing is copied. A
project folder (with `pyproject.toml`, `setup.py` or `setup.cfg`) gets an editable install
(`pip install -e`), so its code is imported from the folder; a plain module (a `.py` file or a
package folder defining `plugin = Plugin(...)`) is checked here and then listed in
`plugins.load.paths` by the caller.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nodmix.errors import PluginError
from nodmix.plugins.loader import ENTRY_POINT_GROUP, from_path

PIP_TIMEOUT = 900.0
"""Seconds pip may take (building a local package can fetch its build backend)."""
CHECK_TIMEOUT = 60.0

_CHECK = """
import json, sys
from importlib.metadata import distributions
from nodmix.plugins.api import Plugin
wanted = set(json.loads(sys.argv[1]))
out = []
for dist in distributions():
    name = dist.metadata["Name"] or ""
    if name.lower().replace("_", "-") not in wanted:
        continue
    for ep in dist.entry_points:
        if ep.group != sys.argv[2]:
            continue
        row = {"dist": name, "version": dist.version, "entryPoint": ep.name}
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:
            row["error"] = f"import failed: {type(exc).__name__}: {exc}"
        else:
            if isinstance(obj, Plugin):
                row["id"] = obj.id
            else:
                row["error"] = "does not provide a nodmix.plugins.Plugin"
        out.append(row)
print(json.dumps(out))
"""


@dataclass(frozen=True, slots=True)
class InstalledPlugin:
    """A plugin entry point of an installed distribution."""

    dist: str
    version: str
    entry_point: str
    id: str | None
    error: str | None = None


def normalize(name: str) -> str:
    """A distribution name as pip compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "pip", *args],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PluginError(f"pip {args[0]} did not finish within {PIP_TIMEOUT:g}s") from None


def _pip_failure(done: subprocess.CompletedProcess[str], what: str) -> PluginError:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
    reason = lines[-1].strip() if lines else f"exit status {done.returncode}"
    return PluginError(f"pip could not {what}: {reason}")


def plugins_of(dists: list[str]) -> list[InstalledPlugin]:
    """The `nodmix.plugins` entry points of these distributions, each loaded and checked."""
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _CHECK,
                json.dumps(sorted(map(normalize, dists))),
                ENTRY_POINT_GROUP,
            ],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PluginError(f"checking the plugin took over {CHECK_TIMEOUT:g}s") from None
    if done.returncode != 0:
        raise PluginError(f"could not check the installed package: {done.stderr.strip()[-300:]}")
    return [
        InstalledPlugin(
            dist=row["dist"],
            version=row["version"],
            entry_point=row["entryPoint"],
            id=row.get("id"),
            error=row.get("error"),
        )
        for row in json.loads(done.stdout)
    ]


def install(target: str) -> list[InstalledPlugin]:
    """`pip install target` (a folder, a wheel, or a requirement), then check its plugins.

    An empty list means pip found the plugin already installed and changed nothing.

    Raises:
        PluginError: pip failed, or the package provides no working `nodmix.plugins` entry
            point (it is then uninstalled again; one that was installed before stays).
    """
    path = Path(target).expanduser()
    spec = str(path.resolve()) if path.exists() else target
    if spec.startswith("-") or not spec.strip():
        # pip would read it as one of its options (`--index-url=...`, `-r file`).
        raise PluginError(f"{target!r} is not a folder, a wheel or a package name")
    return _pip_install(target, spec)


def _pip_install(target: str, *spec: str) -> list[InstalledPlugin]:
    with tempfile.TemporaryDirectory(prefix="nodmix-pip-") as tmp:
        report = Path(tmp) / "report.json"
        done = _pip("install", "--quiet", "--report", str(report), *spec)
        if done.returncode != 0:
            raise _pip_failure(done, f"install {target}")
        installed = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    if not installed:  # already installed, nothing changed: but is it a plugin at all?
        name = _distribution_of(spec[-1])
        found = plugins_of([name])
        if not any(p.id is not None for p in found):
            problem = (
                f"{found[0].entry_point}: {found[0].error}"
                if found
                else (f"it has no '{ENTRY_POINT_GROUP}' entry point, so it is not a Nodmix plugin")
            )
            raise PluginError(f"{target} is installed, but {problem}; nothing changed")
        return []
    names = [str(item["metadata"]["name"]) for item in installed]
    requested = [str(i["metadata"]["name"]) for i in installed if i.get("requested")] or names
    found = plugins_of(requested)
    good = [p for p in found if p.id is not None]
    if good:
        return good
    _pip("uninstall", "--yes", *requested)  # installed just now: take it out again
    if found:
        raise PluginError(f"{target}: {found[0].entry_point}: {found[0].error}; not installed")
    raise PluginError(
        f"{target} has no '{ENTRY_POINT_GROUP}' entry point, so it is not a Nodmix plugin;"
        " not installed"
    )


def _distribution_of(spec: str) -> str:
    """The distribution a requirement, folder or wheel names (pip resolves it without
    installing anything).

    Raises:
        PluginError: pip could not read it.
    """
    with tempfile.TemporaryDirectory(prefix="nodmix-pip-") as tmp:
        report = Path(tmp) / "report.json"
        done = _pip(
            "install",
            "--quiet",
            "--dry-run",
            "--ignore-installed",
            "--no-deps",
            "--report",
            str(report),
            spec,
        )
        if done.returncode != 0:
            raise _pip_failure(done, f"read {spec}")
        items = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    if not items:
        raise PluginError(f"pip names no package for {spec}")
    return str(items[0]["metadata"]["name"])


PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


@dataclass(frozen=True, slots=True)
class Linked:
    """A plugin linked from a local path: an editable install, or a module to load."""

    path: Path
    editable: bool
    plugins: list[InstalledPlugin]
    """The editable install's plugins (empty when pip changed nothing)."""
    plugin_id: str | None = None
    """The id of a plain module's plugin (it goes into `plugins.load.paths`)."""


def link(target: str) -> Linked:
    """Link the plugin at `target` for development (see the module docstring).

    Raises:
        PluginError: the path is missing, pip failed, or it holds no plugin.
    """
    path = Path(target).expanduser()
    if not path.exists():
        raise PluginError(
            f"{target}: no such file or folder (-l links a plugin under development from a "
            "local path)"
        )
    path = path.resolve()
    if path.is_dir() and any((path / name).is_file() for name in PROJECT_FILES):
        return Linked(path=path, editable=True, plugins=_pip_install(target, "-e", str(path)))
    found = from_path(path)
    if found.plugin is None:
        raise PluginError(
            f"{path}: {found.error}; -l links a project folder (with a pyproject.toml, installed "
            "editable) or a module that defines `plugin = nodmix.plugins.Plugin(...)`"
        )
    return Linked(path=path, editable=False, plugins=[], plugin_id=found.plugin.id)


def uninstall(dist: str) -> None:
    """`pip uninstall dist`.

    Raises:
        PluginError: pip failed.
    """
    done = _pip("uninstall", "--yes", dist)
    if done.returncode != 0:
        raise _pip_failure(done, f"uninstall {dist}")
