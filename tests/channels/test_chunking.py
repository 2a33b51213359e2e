"""Long replies split at the platform limit without breaking words or code fences."""

from __future__ import annotations

from nodmix.channels.chunking import split_text


def test_short_text_is_one_piece() -> None:
    assert split_text("hello", 4096) == ["hello"]


def test_ten_thousand_characters_become_three_telegram_messages_without_split_words() -> None:
    text = " ".join(f"w{i:04d}" for i in range(1667))[:10_000]
    pieces = split_text(text, 4096)
    assert len(pieces) == 3
    assert all(len(p) <= 4096 for p in pieces)
    assert " ".join(pieces).split() == text.split()


def test_a_code_fence_cut_in_two_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"x = {i}" for i in range(900))
    text = f"intro\n```python\n{code}\n```\nend"
    pieces = split_text(text, 4096)
    assert len(pieces) == 2
    assert pieces[0].endswith("\n```")
    assert pieces[1].startswith("```python\n")
    assert all(len(p) <= 4096 for p in pieces)
    lines = [ln for p in pieces for ln in p.split("\n") if ln.startswith("x = ")]
    assert lines == code.split("\n")


def test_a_word_longer_than_the_limit_is_cut() -> None:
    pieces = split_text("a" * 100, 40)
    assert "".join(pieces) == "a" * 100
    assert all(len(p) <= 40 for p in pieces)
