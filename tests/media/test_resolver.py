"""The images of a request, per model: pixels for a vision model in the last turns, one line
for text-only models and older turns; prepared once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nodmix.media.cache import ImageCache
from nodmix.media.resolver import ImageResolver, turn_cutoff
from nodmix.media.settings import ImageSettings
from nodmix.messages import (
    AssistantMessage,
    ImageBlock,
    ImageRefBlock,
    Message,
    TextBlock,
    ToolResultMessage,
    UserMessage,
)
from nodmix.providers.base import ModelSpec
from tests.media.samples import photo

VISION = ModelSpec(provider="p", id="v", input=("text", "image"))
TEXT = ModelSpec(provider="p", id="t")


def _turn(n: int, path: str) -> list[Message]:
    return [
        UserMessage(
            content=(TextBlock(text=f"turn {n}"), ImageRefBlock(path=path, mime_type="image/jpeg"))
        ),
        AssistantMessage(content=(TextBlock(text=f"answer {n}"),)),
    ]


def _resolver(keep: int = 2, side: int = 400) -> ImageResolver:
    return ImageResolver(ImageCache(), lambda agent: ImageSettings(max_side=side, keep_turns=keep))


def _kinds(messages: list[Message] | tuple[Message, ...]) -> list[list[str]]:
    return [
        [type(b).__name__ for b in m.content]
        for m in messages
        if not isinstance(m, AssistantMessage)
    ]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "inbox").mkdir()
    for n in range(3):
        (tmp_path / "inbox" / f"p{n}.jpg").write_bytes(photo(800 + n, 600))
    return tmp_path


def test_a_vision_model_sees_the_last_turns_and_older_images_become_placeholders(
    workspace: Path,
) -> None:
    history = [m for n in range(3) for m in _turn(n, f"inbox/p{n}.jpg")]
    for_model = anyio.run(
        lambda: _resolver().prepare(history, agent_id="main", workspace=workspace)
    )
    seen = list(for_model(VISION))
    assert _kinds(seen) == [
        ["TextBlock", "TextBlock"],
        ["TextBlock", "TextBlock", "ImageBlock"],
        ["TextBlock", "TextBlock", "ImageBlock"],
    ]
    assert "from an earlier turn, no longer shown" in seen[0].content[1].text  # type: ignore[union-attr]
    assert seen[2].content[1] == TextBlock(text="[image inbox/p1.jpg]")
    blind = list(for_model(TEXT))
    assert all(type(b) is TextBlock for m in blind for b in m.content)
    assert "this model cannot see images" in blind[4].content[1].text  # type: ignore[union-attr]
    assert history[0].content[1] == ImageRefBlock(path="inbox/p0.jpg", mime_type="image/jpeg")


def test_each_image_is_prepared_once_and_a_changed_file_again(workspace: Path) -> None:
    resolver = _resolver()
    history = _turn(0, "inbox/p0.jpg")

    async def twice() -> None:
        for _ in range(2):
            await resolver.prepare(history, agent_id="main", workspace=workspace)

    anyio.run(twice)
    assert (resolver.cache.misses, resolver.cache.hits) == (1, 1)
    (workspace / "inbox" / "p0.jpg").write_bytes(photo(500, 500))
    anyio.run(lambda: resolver.prepare(history, agent_id="main", workspace=workspace))
    assert resolver.cache.misses == 2


def test_a_missing_or_swapped_file_becomes_a_note_not_a_failure(workspace: Path) -> None:
    (workspace / "inbox" / "p1.jpg").unlink()
    secret = workspace.parent / "secret.jpg"
    secret.write_bytes(photo(50, 50))
    (workspace / "inbox" / "p2.jpg").unlink()
    (workspace / "inbox" / "p2.jpg").symlink_to(secret)
    history = [*_turn(1, "inbox/p1.jpg"), *_turn(2, "inbox/p2.jpg")]
    for_model = anyio.run(
        lambda: _resolver().prepare(history, agent_id="main", workspace=workspace)
    )
    texts = [b.text for m in for_model(VISION) for b in m.content if isinstance(b, TextBlock)]
    assert "[image inbox/p1.jpg cannot be shown: the file is gone]" in texts
    assert any("inbox/p2.jpg cannot be shown" in t and "symlink" in t for t in texts)


def test_inline_tool_images_age_like_references(workspace: Path) -> None:
    inline = ImageBlock(data="aGk=", mime_type="image/png")
    history: list[Message] = [
        UserMessage(content=(TextBlock(text="look"),)),
        ToolResultMessage(tool_call_id="c", tool_name="shot", content=(inline,), is_error=False),
        UserMessage(content=(TextBlock(text="one"),)),
        UserMessage(content=(TextBlock(text="two"),)),
    ]
    for_model = anyio.run(
        lambda: _resolver(keep=2).prepare(history, agent_id="m", workspace=workspace)
    )
    assert for_model(VISION)[1].content == (
        TextBlock(text="[an image from an earlier turn, no longer shown]"),
    )


def test_a_request_without_images_is_passed_through_untouched(workspace: Path) -> None:
    history: list[Message] = [UserMessage(content=(TextBlock(text="hi"),))]
    for_model = anyio.run(lambda: _resolver().prepare(history, agent_id="m", workspace=workspace))
    assert for_model(VISION) is history


def test_the_cutoff_counts_user_turns_from_the_end() -> None:
    history: list[Message] = [m for n in range(3) for m in _turn(n, "x")]
    assert turn_cutoff(history, 1) == 4
    assert turn_cutoff(history, 3) == 0
    assert turn_cutoff(history, 9) == 0
    assert turn_cutoff(history, 0) == len(history)
