"""Reading SKILL.md front matter: the public format plus Nodmix's own requirements."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodmix.skills.frontmatter import SkillFormatError, parse_skill, read_body
from tests.skills.support import write_skill


def test_requirements_come_from_metadata_nodmix(tmp_path: Path) -> None:
    path = write_skill(
        tmp_path,
        "gh-issues",
        "Triage GitHub issues.",
        metadata=(
            "license: MIT\n"
            "metadata:\n"
            "  nodmix:\n"
            "    primaryEnv: GH_TOKEN\n"
            "    os: [linux, darwin]\n"
            "    requires:\n"
            "      bins: [gh]\n"
            "      anyBins: [jq, python3]\n"
            "      env: GH_TOKEN\n"
            "      config: [tools.webFetch]\n"
            "      tools: [cron, message]\n"
        ),
    )
    skill = parse_skill(path, "workspace")
    assert skill.name == "gh-issues"
    assert skill.description == "Triage GitHub issues."
    assert skill.folder == path.parent
    assert skill.requires.bins == ("gh",)
    assert skill.requires.any_bins == ("jq", "python3")
    assert skill.requires.env == ("GH_TOKEN",)
    assert skill.requires.config == ("tools.webFetch",)
    assert skill.requires.os == ("linux", "darwin")
    assert skill.requires.tools == ("cron", "message")
    assert skill.primary_env == "GH_TOKEN"


def test_multiline_description_becomes_one_line(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "notes", ">\n  Keep notes\n  tidy.")
    assert parse_skill(path, "managed").description == "Keep notes tidy."


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no front matter\n", "does not start with a '---'"),
        ("---\nname: x\n", "no closing '---'"),
        ("---\nname: [x\n---\n", "not valid YAML at line"),
        ("---\n- a\n- b\n---\n", "not a YAML mapping"),
        ("---\ndescription: d\n---\n", "'name' is missing"),
        ("---\nname: Bad_Name\ndescription: d\n---\n", "lowercase letters"),
        ("---\nname: ok\n---\n", "'description' is missing"),
        ("---\nname: ok\ndescription: d\nmetadata: 3\n---\n", "'metadata' must be a mapping"),
        (
            "---\nname: ok\ndescription: d\nmetadata: {nodmix: {requires: {bins: 5}}}\n---\n",
            "'metadata.nodmix.requires.bins' must be a string or a list",
        ),
        (
            "---\nname: ok\ndescription: d\nmetadata: {nodmix: {requires: {tools: [1]}}}\n---\n",
            "'metadata.nodmix.requires.tools' must be a string or a list",
        ),
    ],
)
def test_malformed_front_matter_names_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SkillFormatError, match=problem.replace("(", r"\(").replace("[", r"\[")):
        parse_skill(path, "workspace")


def test_body_is_the_markdown_after_the_front_matter(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "x", body="# Title\n\nDo this.\n")
    assert read_body(path) == "# Title\n\nDo this."


def test_a_skill_file_that_is_a_fifo_or_a_device_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    # workspace skills can be left by sandboxed commands: a FIFO would block the scan forever
    fifo = tmp_path / "fifo" / "SKILL.md"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    device = tmp_path / "dev" / "SKILL.md"
    device.parent.mkdir()
    device.symlink_to("/dev/zero")
    for path in (fifo, device):
        with pytest.raises(OSError, match="not a regular file"):
            parse_skill(path, "workspace")
        with pytest.raises(OSError, match="not a regular file"):
            read_body(path)
