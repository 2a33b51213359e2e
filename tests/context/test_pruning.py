"""Pruning old tool results in the request."""

from __future__ import annotations

from nodmix.context.pruning import IMAGE_NOTE, PruneSettings, prune_tool_results
from nodmix.context.tokens import IMAGE_CHARS, estimate_tokens
from nodmix.messages import (
    AssistantMessage,
    ImageBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
)


def _history(results: int, size: int = 10_000) -> list[Message]:
    out: list[Message] = [UserMessage(content=(TextBlock(text="go"),))]
    for n in range(results):
        call = ToolCallBlock(id=f"c{n}", name="read", arguments={"path": f"f{n}"})
        out.append(AssistantMessage(content=(call,), stop_reason="toolUse"))
        text = "\n".join(f"line {n}.{i} " + "x" * 40 for i in range(size // 50))
        out.append(
            ToolResultMessage(
                tool_call_id=f"c{n}",
                tool_name="read",
                content=(TextBlock(text=text),),
                is_error=False,
            )
        )
    return out


def _results(messages: list[Message] | tuple[Message, ...]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def test_a_small_request_is_passed_through_untouched() -> None:
    messages = _history(5)
    pruned = prune_tool_results(messages, estimated_tokens=1000, budget_tokens=100_000)
    assert pruned.messages is messages and pruned.trimmed == 0


def test_old_results_keep_head_and_tail_and_the_newest_stay_whole() -> None:
    messages = _history(6)
    snapshot = list(messages)
    estimate = estimate_tokens(messages)
    pruned = prune_tool_results(messages, estimated_tokens=estimate, budget_tokens=estimate)
    results = _results(list(pruned.messages))
    originals = _results(messages)
    assert pruned.trimmed == 3 and pruned.saved_tokens > 0
    for old, new in zip(originals[:3], results[:3], strict=True):
        assert (
            new.text.startswith(old.text.split("\n")[0]) and "left out of the request" in new.text
        )
        assert new.text.endswith(old.text.split("\n")[-1]) and len(new.text) < 2500
        assert new.tool_call_id == old.tool_call_id and new.tool_name == old.tool_name
    assert results[3:] == originals[3:]
    assert messages == snapshot  # the input (the transcript's view) is not changed


def test_short_results_are_never_trimmed() -> None:
    messages = _history(6, size=1500)
    pruned = prune_tool_results(messages, estimated_tokens=10_000, budget_tokens=10_000)
    assert pruned.trimmed == 0


def test_old_images_become_a_note() -> None:
    image = ImageBlock(data="AAAA", mime_type="image/png")
    messages: list[Message] = [
        ToolResultMessage(
            tool_call_id=f"c{n}", tool_name="screenshot", content=(image,), is_error=False
        )
        for n in range(4)
    ]
    pruned = prune_tool_results(messages, estimated_tokens=5000, budget_tokens=6000)
    texts = [r.text for r in _results(list(pruned.messages))]
    assert texts[0] == IMAGE_NOTE and pruned.saved_chars == IMAGE_CHARS - len(IMAGE_NOTE)
    assert texts[1:] == ["", "", ""]


def test_hard_pruning_trims_the_newest_results_largest_first_until_the_request_fits() -> None:
    messages = _history(4, size=20_000)
    estimate = estimate_tokens(messages)
    settings = PruneSettings(keep_recent_results=4)
    soft = prune_tool_results(
        messages, estimated_tokens=estimate, budget_tokens=estimate // 2, settings=settings
    )
    assert soft.trimmed == 0
    hard = prune_tool_results(
        messages,
        estimated_tokens=estimate,
        budget_tokens=estimate // 2,
        settings=settings,
        hard=True,
    )
    assert hard.trimmed >= 2 and estimate - hard.saved_tokens <= estimate // 2
