"""What `pip install` of Nodmix costs: packages, disk and time, for the core and some extras.

    python -m benchmarks.install.bench_install [--extras telegram all]

Builds the wheel once, then for the core and each named extra creates an empty venv and
installs the wheel into it as a user would (no lock file), timing `pip install`. Packages and
megabytes count what the install added to the empty venv (pip itself is not counted). pip's
cache is warm (the machine's wheel cache or an earlier run), so the time is resolution,
unpacking and byte-compiling, not the download.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import print_table, write_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "install.json"
CORE_MAX_MB = 150
CORE_MAX_PACKAGES = 60
LIST_PROGRAM = (
    "import importlib.metadata as md, json; "
    "print(json.dumps(sorted({d.metadata['Name'] for d in md.distributions()})))"
)


def _run(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def _site_bytes(venv: Path) -> int:
    return sum(p.stat().st_size for p in (venv / "lib").rglob("*") if p.is_file())


def _packages(venv: Path) -> set[str]:
    names: list[str] = json.loads(_run(str(venv / "bin" / "python"), "-c", LIST_PROGRAM))
    return set(names)


def measure(wheel: Path, extra: str | None, work: Path) -> dict[str, object]:
    """Install `wheel` (with `extra`) into an empty venv; what it added and how long it took."""
    venv = work / f"venv-{extra or 'core'}"
    _run(sys.executable, "-m", "venv", str(venv))
    before_bytes, before = _site_bytes(venv), _packages(venv)
    spec = f"{wheel}[{extra}]" if extra else str(wheel)
    started = time.perf_counter()
    _run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", spec)
    seconds = time.perf_counter() - started
    added = sorted(_packages(venv) - before)
    return {
        "extra": extra or "core",
        "packages": len(added),
        "megabytes": round((_site_bytes(venv) - before_bytes) / 1e6, 1),
        "seconds": round(seconds, 1),
        "added": added,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extras", nargs="*", default=["telegram", "all"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nodmix-bench-install-") as tmp:
        work = Path(tmp)
        _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work), str(ROOT))
        wheel = next(work.glob("nodmix-*.whl"))
        rows = [measure(wheel, extra, work) for extra in (None, *args.extras)]
    write_results(RESULTS, rows)
    table = []
    for row in rows:
        core = row["extra"] == "core"
        spec = "nodmix" if core else f"nodmix[{row['extra']}]"
        mb, count = float(str(row["megabytes"])), int(str(row["packages"]))
        table.append(
            (
                f"`pip install {spec}` into an empty venv",
                f"{count} packages, {mb:.1f} MB, {row['seconds']} s",
                f"≤ {CORE_MAX_PACKAGES} packages, ≤ {CORE_MAX_MB} MB" if core else "",
                (count <= CORE_MAX_PACKAGES and mb <= CORE_MAX_MB) if core else None,
            )
        )
    print_table(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
