"""Gating: unmet requirements keep a skill out, each with a reason a user can act on."""

from __future__ import annotations

from pathlib import Path

from nodmix.config.schema import SkillEntry
from nodmix.skills.gating import Gate, GateInputs
from nodmix.skills.model import Requirements, Skill


def _skill(name: str = "s", primary_env: str | None = None, **requires: tuple[str, ...]) -> Skill:
    return Skill(
        name=name,
        description="d",
        folder=Path("/skills") / name,
        source="workspace",
        requires=Requirements(**requires),
        primary_env=primary_env,
    )


def _gate(
    *, env: dict[str, str] | None = None, raw: dict[str, object] | None = None, **kwargs: object
) -> Gate:
    programs = {"git", "jq"}
    return Gate(
        GateInputs(
            env=env or {},
            raw_config=raw or {},
            which=lambda name: f"/usr/bin/{name}" if name in programs else None,
            platform="linux",
            **kwargs,  # type: ignore[arg-type]
        )
    )


def test_met_requirements_give_no_reasons() -> None:
    skill = _skill(bins=("git",), any_bins=("rg", "jq"), env=("HOME",), os=("linux",))
    assert _gate(env={"HOME": "/root"}).reasons(skill) == ()


def test_each_unmet_requirement_is_named() -> None:
    skill = _skill(
        bins=("git", "gh"),
        any_bins=("rg", "ag"),
        env=("GH_TOKEN",),
        config=("tools.webFetch.maxBytes",),
        os=("darwin",),
    )
    assert _gate().reasons(skill) == (
        "works only on darwin (this is linux)",
        "missing binary: gh",
        "missing binary: one of rg, ag",
        "environment variable GH_TOKEN is not set",
        "config key tools.webFetch.maxBytes is not set",
    )


def test_config_keys_and_entry_env_and_api_key_satisfy_requirements() -> None:
    skill = _skill(env=("GH_TOKEN", "GH_HOST"), config=("tools.webFetch.maxBytes",))
    entries = {"s": SkillEntry(env={"GH_HOST": "github.com"}, api_key="${SECRET}")}
    raw = {"tools": {"webFetch": {"maxBytes": 1000}}}
    assert _gate(raw=raw, entries=entries).reasons(skill) == (
        "environment variable GH_TOKEN is not set",
    )
    keyed = _skill(env=("GH_TOKEN",), primary_env="GH_TOKEN")
    assert _gate(entries=entries).reasons(keyed) != ()  # ${SECRET} is unset
    assert _gate(env={"SECRET": "k"}, entries=entries).reasons(keyed) == ()


def test_disabled_entry_wins_over_everything() -> None:
    entries = {"s": SkillEntry(enabled=False)}
    assert _gate(entries=entries).reasons(_skill()) == ("disabled by skills.entries.s.enabled",)


def test_entry_env_and_api_key_reach_commands_without_overriding_the_environment() -> None:
    from nodmix.skills.gating import skill_env

    keyed = _skill("gh", primary_env="GH_TOKEN")
    other = _skill("other")
    entries = {
        "gh": SkillEntry(env={"GH_HOST": "example.org", "HOME": "/elsewhere"}, api_key="k-1"),
        "unused": SkillEntry(env={"NEVER": "x"}),
    }
    assert skill_env([keyed, other], entries, {"HOME": "/root"}) == {
        "GH_HOST": "example.org",
        "GH_TOKEN": "k-1",
    }
