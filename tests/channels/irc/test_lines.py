"""IRC lines: UTF-8 byte limits and flood pacing."""

from __future__ import annotations

import time

import anyio
import pytest

from nodmix.channels.irc.lines import FloodGate, split_lines, text_budget


def test_the_budget_leaves_room_for_the_prefix_the_server_adds() -> None:
    budget = text_budget("nodbot", "#lounge")
    prefix = f":nodbot!{'u' * 10}@{'h' * 63} PRIVMSG #lounge :"
    assert budget + len(prefix) + 2 == 512


@pytest.mark.parametrize("text", ["€" * 500, "a" * 1000, "ab€" * 300, "😀x" * 200])
def test_lines_fit_the_byte_budget_and_never_split_a_character(text: str) -> None:
    lines = split_lines(text, 100)
    assert all(len(line.encode()) <= 100 for line in lines)
    assert "".join(lines) == text


def test_lines_break_at_spaces_and_at_newlines_and_drop_blank_lines() -> None:
    text = "first line\n\n" + " ".join(["word"] * 60) + "\r\nlast"
    lines = split_lines(text, 50)
    assert lines[0] == "first line"
    assert lines[-1] == "last"
    middle = lines[1:-1]
    assert all(line.split() == ["word"] * len(line.split()) for line in middle)
    assert sum(len(line.split()) for line in middle) == 60
    assert "" not in lines


def test_the_flood_gate_lets_a_burst_through_then_paces() -> None:
    async def main() -> list[float]:
        gate = FloodGate(0.05, burst=3)
        stamps = []
        for _ in range(6):
            await gate.wait()
            stamps.append(time.monotonic())
        return stamps

    stamps = anyio.run(main)
    # Three lines go at once; the next three each wait for a token (at least 3 x 0.05 s).
    assert stamps[-1] - stamps[0] >= 0.14
