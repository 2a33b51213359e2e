"""Attacks on the workspace guard by a sender who is not the owner, with the real sandbox:
each one once got through, and must not again."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.config.loader import load_config
from nodmix.config.schema import PluginEntry, PluginsConfig
from nodmix.errors import ToolError
from nodmix.origin import TurnOrigin
from nodmix.plugins import PluginRegistry, load_plugins
from nodmix.security.sandbox.session import SessionSandbox
from nodmix.security.workspace_guard import instruction_sources, peer_notes
from nodmix.tools.core import core_tools
from nodmix.tools.core.exec import ExecTool
from tests.security.conftest import SECRET_KEY, context, make_sandbox

pytestmark = pytest.mark.anyio

GROUP = TurnOrigin(channel="telegram", chat_id="g1", chat_type="group", sender_id="mallory")
HEARTBEAT = TurnOrigin(channel="heartbeat", chat_id="main")
CRON = TurnOrigin(channel="cron", chat_id="job1")
ORIGINAL = "- the owner prefers short answers\n"


@pytest.fixture
def seeded(workspace: Path) -> Path:
    (workspace / "MEMORY.md").write_text(ORIGINAL, encoding="utf-8")
    return workspace


async def test_renaming_the_folder_above_a_protected_plugin_cannot_replace_the_plugin(
    isolated_state: Path, home: Path, bwrap: str, seeded: Path
) -> None:
    plugin = seeded / "tools" / "plugins" / "mine"
    plugin.mkdir(parents=True)
    (plugin / "index.py").write_text("OWNER = 1\n", encoding="utf-8")
    (isolated_state / "nodmix.json").write_text(
        f"{{ plugins: {{ load: {{ paths: ['{plugin}'] }} }} }}", encoding="utf-8"
    )
    loaded = load_config()
    sandbox = SessionSandbox(
        make_sandbox(isolated_state, home, bwrap, mode="all").settings,
        state_dir=isolated_state,
        home=home,
        bwrap=bwrap,
        protected=instruction_sources(loaded.config, loaded.path),
    )
    for moved in ("tools", "tools/plugins"):
        command = (
            f"mv {moved} moved && mkdir -p tools/plugins/mine "
            "&& echo 'import os' > tools/plugins/mine/index.py"
        )
        context_ = context(seeded, "telegram:group:g1", origin=GROUP)
        result = await ExecTool(isolation=sandbox).call({"command": command}, context_)
        assert result.details["exitCode"] != 0, command
        assert (plugin / "index.py").read_text(encoding="utf-8") == "OWNER = 1\n"
    ordinary = await ExecTool(isolation=sandbox).call(
        {"command": "echo ok > tools/notes.txt && mkdir tools/other && mv tools/other tools/o2"},
        context(seeded, "telegram:group:g1", origin=GROUP),
    )
    assert ordinary.details["exitCode"] == 0, ordinary.text_content


@pytest.mark.parametrize("origin", [HEARTBEAT, CRON], ids=["heartbeat", "cron"])
async def test_an_automation_run_in_the_main_session_runs_its_commands_in_the_sandbox(
    isolated_state: Path, home: Path, bwrap: str, seeded: Path, origin: TurnOrigin
) -> None:
    sandbox = make_sandbox(isolated_state, home, bwrap, mode="non-main")
    result = await ExecTool(isolation=sandbox).call(
        {"command": "echo evil >> MEMORY.md"}, context(seeded, "main", origin=origin)
    )
    assert result.details["sandboxed"] is True
    assert result.details["exitCode"] != 0
    assert (seeded / "MEMORY.md").read_text(encoding="utf-8") == ORIGINAL
    owner = await ExecTool(isolation=sandbox).call(
        {"command": "echo owner >> MEMORY.md"}, context(seeded, "main")
    )
    assert owner.details["sandboxed"] is False
    assert (seeded / "MEMORY.md").read_text(encoding="utf-8") == ORIGINAL + "owner\n"


async def test_a_symlink_above_a_protected_plugin_refuses_the_sandbox(
    isolated_state: Path, home: Path, bwrap: str, seeded: Path
) -> None:
    (seeded / "real" / "plugins" / "mine").mkdir(parents=True)
    (seeded / "tools").symlink_to("real")
    plugin = seeded / "tools" / "plugins" / "mine"
    sandbox = SessionSandbox(
        make_sandbox(isolated_state, home, bwrap, mode="all").settings,
        state_dir=isolated_state,
        home=home,
        bwrap=bwrap,
        protected=(plugin,),
    )
    with pytest.raises(ToolError, match="tools in the workspace is a symlink"):
        await ExecTool(isolation=sandbox).call(
            {"command": "ln -sfn elsewhere tools"},
            context(seeded, "telegram:group:g1", origin=GROUP),
        )
    assert (seeded / "tools").resolve() == seeded / "real"


async def test_a_link_planted_in_the_notes_folder_leads_the_notes_plugin_nowhere(
    isolated_state: Path, home: Path, bwrap: str, seeded: Path
) -> None:
    # The sandboxed shell may make links; the plugin runs outside the sandbox, as the owner.
    group = context(seeded, "telegram:group:g1", origin=GROUP)
    key = home / ".ssh" / "id_ed25519"
    plant = f"mkdir -p notes && ln -s ../MEMORY.md notes/evil.md && ln -s {key} notes/key.md"
    sandbox = make_sandbox(isolated_state, home, bwrap, mode="all")
    assert (await ExecTool(isolation=sandbox).call({"command": plant}, group)).details[
        "exitCode"
    ] == 0
    registry = PluginRegistry()
    load_plugins(PluginsConfig(entries={"notes": PluginEntry(enabled=True)}), registry)
    notes = {t.spec.name: t for t in registry.plugin_tools()}
    added = await notes["note_add"].call({"title": "evil", "text": "forward the mail"}, group)
    assert added.is_error
    assert (seeded / "MEMORY.md").read_text(encoding="utf-8") == ORIGINAL
    for name, args in (("note_read", {"id": "key"}), ("note_search", {"query": "private"})):
        result = await notes[name].call(args, group)
        assert SECRET_KEY not in result.text_content, name
    await notes["note_add"].call({"title": "fine", "text": "kept"}, group)
    assert "kept" in (seeded / "notes" / "fine.md").read_text(encoding="utf-8")


def chat(chat_id: str, account: str = "default") -> TurnOrigin:
    return TurnOrigin(channel="irc", account=account, chat_id=chat_id, chat_type="group")


@pytest.mark.parametrize(
    ("victim", "other"),
    [
        (chat("#ops"), chat("#OPS")),  # letter case
        (chat("#ops"), chat("_ops")),  # characters a file name cannot hold
        (chat("#ops"), chat("#ops", account="work")),  # the same chat id on another account
    ],
    ids=["case", "characters", "account"],
)
async def test_another_chat_cannot_write_a_chats_notes_file(
    seeded: Path, victim: TurnOrigin, other: TurnOrigin
) -> None:
    own = peer_notes(victim)
    victims = context(seeded, "irc:group:ops", origin=victim)
    await core["write"].call({"path": str(own), "content": "ops notes\n"}, victims)
    assert peer_notes(other) != own
    intruder = context(seeded, "irc:group:other", origin=other)
    with pytest.raises(ToolError, match="not writable"):
        await core["write"].call({"path": str(own), "content": "evil\n"}, intruder)
    await core["write"].call({"path": str(peer_notes(other)), "content": "ok\n"}, intruder)
    assert (seeded / own).read_text(encoding="utf-8") == "ops notes\n"


core = {t.spec.name: t for t in core_tools()}


async def test_a_file_a_link_in_skills_or_memory_leads_to_is_protected_like_them(
    isolated_state: Path, home: Path, bwrap: str, seeded: Path
) -> None:
    # The owner keeps a skill and a note elsewhere in the workspace and links them in.
    (seeded / "projects" / "dev").mkdir(parents=True)
    (seeded / "projects" / "dev" / "SKILL.md").write_text("---\nname: dev\n", encoding="utf-8")
    (seeded / "journal").mkdir()
    (seeded / "journal" / "today.md").write_text("- owner note\n", encoding="utf-8")
    (seeded / "skills").mkdir()
    (seeded / "skills" / "dev").symlink_to("../projects/dev")
    (seeded / "memory").mkdir()
    (seeded / "memory" / "today.md").symlink_to("../journal/today.md")
    group = context(seeded, "telegram:group:g1", origin=GROUP)
    for path in ("projects/dev/SKILL.md", "journal/today.md", "projects/dev/evil/SKILL.md"):
        with pytest.raises(ToolError, match="read it as instructions"):
            await core["write"].call({"path": path, "content": "evil"}, group)
    sandbox = make_sandbox(isolated_state, home, bwrap, mode="all")
    for command in ("echo evil >> projects/dev/SKILL.md", "echo evil >> journal/today.md"):
        result = await ExecTool(isolation=sandbox).call({"command": command}, group)
        assert result.details["exitCode"] != 0, command
    assert (seeded / "projects" / "dev" / "SKILL.md").read_text(encoding="utf-8").endswith("dev\n")
    assert (seeded / "journal" / "today.md").read_text(encoding="utf-8") == "- owner note\n"
    await core["write"].call({"path": "projects/readme.md", "content": "fine"}, group)


async def test_a_dangling_link_in_skills_refuses_the_sandbox_with_the_fix(
    isolated_state: Path, home: Path, bwrap: str, seeded: Path
) -> None:
    (seeded / "skills").mkdir()
    (seeded / "skills" / "dev").symlink_to("../projects/dev")
    sandbox = make_sandbox(isolated_state, home, bwrap, mode="all")
    with pytest.raises(ToolError, match="projects/dev, which does not exist"):
        await ExecTool(isolation=sandbox).call(
            {"command": "mkdir -p projects/dev"},
            context(seeded, "telegram:group:g1", origin=GROUP),
        )
    assert not (seeded / "projects").exists()
