"""Fail when a source module passes the hard size budget (house style: 400 soft, 800 hard)."""

from __future__ import annotations

import sys
from pathlib import Path

HARD_LIMIT = 800
SOFT_LIMIT = 400


def main() -> int:
    root = Path(__file__).resolve().parent.parent / "src" / "nodmix"
    failures: list[str] = []
    soft: list[str] = []
    for path in sorted(root.rglob("*.py")):
        lines = sum(1 for _ in path.open(encoding="utf-8"))
        rel = path.relative_to(root.parent)
        if lines > HARD_LIMIT:
            failures.append(f"{rel}: {lines} lines (hard limit {HARD_LIMIT})")
        elif lines > SOFT_LIMIT:
            soft.append(f"{rel}: {lines} lines")
    for line in soft:
        print(f"note: over the soft budget of {SOFT_LIMIT}: {line}")
    for line in failures:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
