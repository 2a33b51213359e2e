"""Identifier policy and the shape of summariser prompts."""

from __future__ import annotations

from nodmix.compaction.prompts import (
    SAFEGUARD_HEADINGS,
    STRICT_IDENTIFIERS,
    focus_instructions,
    history_prompt,
    merge_prompt,
)


def test_strict_policy_asks_for_identifiers_verbatim() -> None:
    text = focus_instructions("strict", None)
    assert text == STRICT_IDENTIFIERS
    for word in ("UUIDs", "hashes", "URLs", "IP addresses", "ports", "file names"):
        assert word in text
    assert "token" not in text.lower() and "api key" not in text.lower()


def test_policy_off_without_focus_has_no_instructions() -> None:
    assert focus_instructions("off", None) is None
    assert focus_instructions("off", None, "Track release blockers.") == (
        "Additional focus:\nTrack release blockers."
    )


def test_custom_policy_uses_its_own_text_and_blank_falls_back_to_strict() -> None:
    custom = focus_instructions("custom", "Keep ticket IDs unchanged.")
    assert custom is not None and "Keep ticket IDs unchanged." in custom
    assert STRICT_IDENTIFIERS not in custom
    assert focus_instructions("custom", "   ") == STRICT_IDENTIFIERS


def test_strict_policy_with_focus_joins_them_under_one_label() -> None:
    text = focus_instructions("strict", None, "Config focus.", None, "From /compact.")
    assert text == f"{STRICT_IDENTIFIERS}\n\nAdditional focus:\nConfig focus.\nFrom /compact."


def test_history_prompt_wraps_the_conversation_and_folds_in_the_previous_summary() -> None:
    prompt = history_prompt(
        "User: hi", previous_summary="old", instructions="RULES", safeguard=True
    )
    assert prompt.startswith("<conversation>\nUser: hi\n</conversation>")
    assert "<previous-summary>\nold\n</previous-summary>" in prompt
    assert all(h in prompt for h in SAFEGUARD_HEADINGS)
    assert prompt.endswith("RULES")


def test_merge_prompt_lists_parts_in_order() -> None:
    prompt = merge_prompt(["one", "two"], previous_summary=None, instructions=None, safeguard=False)
    assert prompt.index('<part index="1">\none') < prompt.index('<part index="2">\ntwo')
