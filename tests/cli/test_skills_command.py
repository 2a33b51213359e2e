"""`nodmix skills` and skills in a turn, as a user meets them: real subprocesses, a real model
server over a socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer
from tests.skills.support import write_skill
from tests.support.cli import run_nodmix
from tests.support.config import write_config

pytestmark = pytest.mark.integration


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(tool_then_answer)
    with server:
        yield server


def _system_prompt(server: ScriptedModelServer) -> str:
    messages = server.requests[-1].body["messages"]
    return str(next(m["content"] for m in messages if m["role"] == "system"))


def test_dropped_in_skill_is_listed_and_offered_as_one_line_without_its_body(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url)
    skills = isolated_state / "workspace" / "skills"
    write_skill(
        skills,
        "trip-planner",
        "Plan a day trip from the ferry timetable.",
        body="SECRET-BODY: check the timetable first.\n",
    )
    listed = run_nodmix(isolated_state, "skills", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["trip-planner"]["eligible"] is True
    assert rows["trip-planner"]["source"] == "workspace"
    assert rows["daily-note"]["source"] == "bundled"

    turn = run_nodmix(isolated_state, "agent", "--local", "-m", "hello there")
    assert turn.returncode == 0, turn.stderr
    system = _system_prompt(model_server)
    lines = system.splitlines()
    mentions = [line for line in lines if "trip-planner" in line]
    assert mentions == ["- trip-planner: Plan a day trip from the ferry timetable."]
    assert lines[lines.index(mentions[0]) - 1] == "skills/:"  # skills/trip-planner/SKILL.md
    assert "SECRET-BODY" not in system


def test_skill_needing_a_missing_binary_is_not_offered_and_check_says_which(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url)
    write_skill(
        isolated_state / "workspace" / "skills",
        "radar",
        "Show the rain radar.",
        metadata="metadata:\n  nodmix:\n    requires:\n      bins: [nodmix-test-no-such-bin]\n",
    )
    check = run_nodmix(isolated_state, "skills", "check")
    assert check.returncode == 0, check.stderr
    assert "radar: not offered" in check.stdout
    assert "missing binary: nodmix-test-no-such-bin" in check.stdout

    turn = run_nodmix(isolated_state, "agent", "--local", "-m", "hello")
    assert turn.returncode == 0, turn.stderr
    system = _system_prompt(model_server)
    assert "radar" not in system
    assert "- daily-note:" in system


def test_model_reads_a_bundled_skill_outside_the_workspace_with_read(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url)
    listed = json.loads(run_nodmix(isolated_state, "skills", "info", "daily-note", "--json").stdout)
    turn = run_nodmix(isolated_state, "agent", "--local", "--json", "-m", f"read {listed['path']}")
    assert turn.returncode == 0, turn.stderr
    assert "# Keep a daily note" in json.loads(turn.stdout)["reply"]


def test_install_and_remove_round_trip_and_broken_skill_fails_check(
    isolated_state: Path, tmp_path: Path
) -> None:
    source = write_skill(tmp_path / "src", "packed", "Packed skill.").parent
    installed = run_nodmix(isolated_state, "skills", "install", str(source))
    assert installed.returncode == 0, installed.stderr
    assert (isolated_state / "skills" / "packed" / "SKILL.md").is_file()
    info = run_nodmix(isolated_state, "skills", "info", "packed")
    assert "source:   managed" in info.stdout

    broken = isolated_state / "workspace" / "skills" / "broken" / "SKILL.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("---\nname: [x\n---\n", encoding="utf-8")
    check = run_nodmix(isolated_state, "skills", "check")
    assert check.returncode == 1
    assert f"skipped skill {broken}" in check.stdout
    doctor = run_nodmix(isolated_state, "doctor", "--offline", "--json")
    finding = next(c for c in json.loads(doctor.stdout) if c["name"] == "skills")
    assert finding["level"] == "warn"
    assert "1 SKILL.md skipped" in finding["detail"]

    removed = run_nodmix(isolated_state, "skills", "remove", "packed")
    assert removed.returncode == 0, removed.stderr
    again = run_nodmix(isolated_state, "skills", "remove", "packed")
    assert again.returncode == 1
    assert again.stderr.strip() == (
        f"nodmix: error: no skill 'packed' is installed in {isolated_state / 'skills'}"
    )
    assert "Traceback" not in again.stderr


def test_info_on_a_broken_skill_names_its_file_and_the_parse_error(isolated_state: Path) -> None:
    broken = isolated_state / "workspace" / "skills" / "radar" / "SKILL.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("---\nname: radar\ndescription: [unclosed\n---\n", encoding="utf-8")
    info = run_nodmix(isolated_state, "skills", "info", "radar")
    assert info.returncode == 1
    lines = info.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"nodmix: error: skill 'radar' is broken: skipped skill {broken}: ")
    assert "not valid YAML" in lines[0]

    unknown = run_nodmix(isolated_state, "skills", "info", "nosuch")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("nodmix: error: no skill named 'nosuch' (found: ")


def test_remove_on_a_bundled_or_workspace_skill_says_where_it_is_and_how_to_turn_it_off(
    isolated_state: Path,
) -> None:
    folder = write_skill(isolated_state / "workspace" / "skills", "radar", "Rain radar.").parent
    for name, where in (("radar", "is in the workspace"), ("reminders", "is bundled with Nodmix")):
        done = run_nodmix(isolated_state, "skills", "remove", name)
        assert done.returncode == 1
        [line] = done.stderr.strip().splitlines()
        assert f"'{name}' {where} (" in line
        assert line.endswith(f"turn it off with skills.entries.{name}.enabled: false")
    assert (folder / "SKILL.md").is_file()


def test_check_names_a_skills_allowlist_entry_that_matches_no_skill(isolated_state: Path) -> None:
    agents = "list: [{ id: 'work', skills: ['daily-note', 'daily-notes'] }]"
    write_config(isolated_state, "http://127.0.0.1:9/v1", agents=agents)
    check = run_nodmix(isolated_state, "skills", "check", "--agent", "work")
    assert check.returncode == 0, check.stderr
    lines = check.stdout.splitlines()
    assert "daily-notes: named in the agent's skills allowlist, but no skill has that name" in lines
    assert not any(line.startswith("daily-note:") for line in lines)  # the real one is offered
