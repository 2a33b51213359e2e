"""Markdown chunking: headings, paragraphs, overlap and line ranges."""

from __future__ import annotations

from nodmix.memory.chunking import chunk_markdown

NOTE = """# 2026-11-18

## Dentist
Booked for Thursday at 3pm.

## Groceries
Oat milk and lentils.
"""


def test_each_heading_starts_a_chunk_with_its_line_range_and_parent_title() -> None:
    chunks = chunk_markdown(NOTE)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4), (6, 7)]
    assert chunks[0].text.splitlines()[2:] == ["## Dentist", "Booked for Thursday at 3pm."]
    assert chunks[1].title == "2026-11-18"
    assert chunks[1].text == "## Groceries\nOat milk and lentils."


def test_long_sections_split_at_paragraphs_and_repeat_the_last_lines() -> None:
    paragraphs = [f"line {n} of paragraph {p}." for p in range(6) for n in range(3)]
    lines: list[str] = ["# Log"]
    for p in range(6):
        lines += [f"line {n} of paragraph {p}." for n in range(3)] + [""]
    chunks = chunk_markdown("\n".join(lines), max_chars=140, overlap_chars=30)
    assert len(chunks) > 2
    for before, after in zip(chunks, chunks[1:], strict=False):
        # The next chunk starts inside the previous one: its last line is repeated.
        assert after.start_line <= before.end_line
        assert before.text.splitlines()[-1] == after.text.splitlines()[0]
        assert after.title == "Log"
    covered = {line for c in chunks for line in c.text.splitlines()}
    assert set(paragraphs) <= covered
    assert all(len(c.text) <= 140 + 30 for c in chunks)


def test_a_hash_line_inside_a_code_fence_is_not_a_heading() -> None:
    text = "# Setup\n```sh\n# install it\npip install x\n```\nDone."
    chunks = chunk_markdown(text)
    assert len(chunks) == 1
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 6)


def test_a_file_of_only_headings_or_blank_lines_has_no_chunks() -> None:
    assert chunk_markdown("# A\n## B\n\n") == []
    assert chunk_markdown("") == []


def test_identical_text_gets_the_same_hash_and_a_different_title_changes_it() -> None:
    a = chunk_markdown("# A\nsame words")[0]
    b = chunk_markdown("# A\nsame words")[0]
    c = chunk_markdown("# B\n## A\nsame words")[0]
    assert a.hash == b.hash
    assert c.text != a.text and c.hash != a.hash
