"""Fail when modules under src/ import each other in a circle.

Every import counts: at module level, inside a function (a lazy import) and under
`if TYPE_CHECKING:`, because each is a statement that one module knows the other. A circle means
two modules no longer know which of them is the lower one; the fix is a lower module that owns
the shared type or protocol, or a callback passed down instead of an import up.

`from a.b import c` points at `a/b/c.py` when that module exists, else at `a/b` (its
`__init__.py`). The implicit import of a parent package's `__init__.py` is not an edge: a
package's face handing on names from its own modules would otherwise make every package a circle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(
    tree: ast.Module, module: str, is_package: bool, modules: dict[str, Path]
) -> Iterator[tuple[str, int]]:
    """Every (module of src/, line) this module imports, relative imports resolved."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # `from pkg import mod` names the module; `from pkg import Name` the package
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                if target in modules:
                    yield target, node.lineno


def build_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: dict[str, int] = {}
        for target, line in imported_modules(tree, name, path.name == "__init__.py", modules):
            if target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, default=SRC, help="the source root (default: src/)")
    src = parser.parse_args(argv).src.resolve()
    modules = {module_name(path, src): path for path in sorted(src.rglob("*.py"))}
    graph = build_graph(modules)
    circles = strongly_connected(graph)
    for number, members in enumerate(circles, 1):
        print(f"error: import circle {number}: {len(members)} modules", file=sys.stderr)
        inside = set(members)
        for name in members:
            for target, line in sorted(graph[name].items()):
                if target in inside:
                    where = modules[name].relative_to(src.parent)
                    print(f"  {where}:{line}: {name} -> {target}", file=sys.stderr)
    if circles:
        print(
            f"{len(circles)} import circle(s) under {src.name}/: let a lower module own the "
            "shared type or protocol, or pass a callback down instead of importing up",
            file=sys.stderr,
        )
        return 1
    print(f"no import circles among {len(modules)} modules under {src.name}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
