"""The table of optional parts: it matches pyproject's extras, says which parts a config turns
on, and refuses a part whose library is missing with one line naming the install command."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import msgspec
import pytest

from nodmix import extras
from nodmix.config.schema import NodmixConfig

ROOT = Path(__file__).resolve().parents[1]


def _config(doc: dict[str, object]) -> NodmixConfig:
    return msgspec.convert(doc, NodmixConfig)


def test_every_part_has_its_extra_in_pyproject_and_all_has_them_all() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    names = {row.extra for row in extras.PARTS}
    assert names <= set(optional)
    assert optional["all"] == [f"nodmix[{','.join(sorted(names, key=list(optional).index))}]"]
    core = {_name(requirement) for requirement in project["dependencies"]}
    for row in extras.PARTS:  # the core never declares what an extra is for
        assert not {_name(requirement) for requirement in optional[row.extra]} & core


def test_the_readme_table_names_every_extra() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("| extra | what it adds |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = {name for line in rows for name in re.findall(r"`([a-z]+)`", line.split("|")[1])}
    assert named == {row.extra for row in extras.PARTS}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_channel_sections_and_embeddings_turn_their_parts_on() -> None:
    config = _config(
        {
            "channels": {"discord": {"token": "x"}, "slack": {"enabled": False}},
            "memory": {"embeddings": {"baseUrl": "http://127.0.0.1:1/v1", "model": "m"}},
        }
    )
    on = [row.id for row in extras.PARTS if extras.in_use(row, config)]
    assert on == ["discord", "embeddings"]


def test_a_missing_library_is_named_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "discord", None)  # as in a core-only install
    config = _config({"channels": {"discord": {"token": "x"}, "telegram": {"botToken": "1:a"}}})
    assert [row.id for row in extras.missing(config)] == ["discord"]
    with pytest.raises(extras.MissingExtraError) as caught:
        extras.require("discord")
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith("the Discord channel (channels.discord) needs the 'discord' extra")
    assert line.endswith("install 'nodmix[discord]'")


@pytest.mark.parametrize(
    ("key", "hit"),
    [
        ("channels.discord", True),
        ("channels.discord.token", True),
        ("channels", True),
        ("channels.telegram", False),
        ("channels.discordx", False),
        ("gateway.port", False),
    ],
)
def test_config_set_reports_only_the_parts_its_key_concerns(
    monkeypatch: pytest.MonkeyPatch, key: str, hit: bool
) -> None:
    monkeypatch.setitem(sys.modules, "discord", None)
    config = _config({"channels": {"discord": {"token": "x"}}})
    assert bool(extras.missing_under(config, key)) is hit


def test_creating_an_adapter_without_its_extra_is_refused_before_any_import(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from nodmix.channels.registry import create_adapter

    monkeypatch.setitem(sys.modules, "discord", None)
    monkeypatch.delitem(sys.modules, "nodmix.channels.discord.adapter", raising=False)
    config = _config({"channels": {"discord": {"token": "x"}}})
    with pytest.raises(extras.MissingExtraError, match=r"nodmix\[discord\]"):
        create_adapter("discord", config, {}, tmp_path)
    assert "nodmix.channels.discord.adapter" not in sys.modules


@pytest.mark.parametrize(
    ("channel", "section", "library"),
    [
        ("xmpp", {"jid": "bot@example.org", "password": "x"}, "slixmpp"),
        ("xmpp", {"jid": "bot@example.org", "password": "x"}, "aiohttp"),
        ("mattermost", {"url": "https://chat.example.org", "token": "x"}, "mattermostautodriver"),
    ],
)
def test_xmpp_and_mattermost_without_their_library_are_refused_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    channel: str,
    section: dict[str, object],
    library: str,
) -> None:
    from nodmix.channels.registry import create_adapter

    monkeypatch.setitem(sys.modules, library, None)
    config = _config({"channels": {channel: section}})
    assert [row.id for row in extras.missing(config)] == [channel]
    with pytest.raises(extras.MissingExtraError, match=rf"install 'nodmix\[{channel}\]'$"):
        create_adapter(channel, config, {}, tmp_path)


def test_an_extras_library_is_imported_only_by_its_part_or_lazily() -> None:
    """What a core install imports at start never needs an extra: a module outside a part's
    own package imports an extra's library only inside a function or for types."""

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    wants = {
        row: {_name(r) for r in project["optional-dependencies"][row.extra]} for row in extras.PARTS
    }
    dists = importlib.metadata.packages_distributions()
    src = ROOT / "src"
    wrong: list[str] = []
    for path in sorted((src / "nodmix").rglob("*.py")):
        module = ".".join(path.relative_to(src).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _top_level_imports(tree):
            for name in _imported(node):
                declared = _distributions(name, dists)
                if not declared or declared & (core | {"nodmix"}):
                    continue
                rows = [row for row in extras.PARTS if declared & wants[row]]
                if not rows:
                    wrong.append(f"{module}: {name} belongs to no part of nodmix.extras.PARTS")
                elif not any(_inside(module, row.package) for row in rows):
                    extra = " or ".join(row.extra for row in rows)
                    wrong.append(f"{module}: imports {name} ({extra} extra) at module level")
    assert not wrong, "\n".join(wrong)


def _distributions(name: str, dists: Mapping[str, list[str]]) -> set[str]:
    """The distributions that ship module `name`; of a namespace package (`google`), only
    those that ship the subpackage named (`google.auth` is google-auth's, not protobuf's)."""
    parts = name.split(".")
    found = list(dict.fromkeys(dists.get(parts[0], [])))
    if len(found) > 1 and len(parts) > 1:
        sub = f"{parts[0]}/{parts[1]}"
        shipping = [
            d
            for d in found
            if any(str(f).startswith(sub) for f in importlib.metadata.files(d) or ())
        ]
        found = shipping or found
    return {_name(d) for d in found}


def _inside(module: str, package: str | None) -> bool:
    return package is not None and f"{module}.".startswith(f"{package}.")


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported (not in functions or TYPE_CHECKING)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        elif isinstance(node, ast.If | ast.Try):
            found.extend(n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))
    return found


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [node.module] if node.module and not node.level else []
