"""The words the summarising model reads.

The summary replaces history in the agent's own context, so the prompts optimise for one
thing: could the agent pick the work up from this text alone? They ask for facts over prose,
keep identifiers verbatim (a shortened commit hash or a "fixed" UUID is worse than none), and
frame the conversation as material to describe, never as a chat to continue.
"""

from __future__ import annotations

from typing import Final

from nodmix.compaction.settings import IdentifierPolicy

SUMMARIZER_SYSTEM: Final = (
    "You write the working record of a conversation between a user and an AI assistant that "
    "uses tools. The record replaces the original messages in the assistant's context, so the "
    "assistant must be able to carry on from it alone. Describe what happened; do not answer "
    "questions from the conversation, do not continue it, and do not invent anything. Write in "
    "the language the user writes in."
)

STRICT_IDENTIFIERS: Final = (
    "Copy every opaque identifier exactly as it appears, character for character: IDs and "
    "UUIDs, hashes, file names and paths, URLs, hostnames, IP addresses and ports, version "
    "numbers. Never shorten, reformat or reconstruct one from memory."
)

SAFEGUARD_HEADINGS: Final = (
    "## Goal",
    "## Decisions",
    "## Open TODOs",
    "## Constraints/Rules",
    "## Pending user asks",
    "## Exact identifiers",
)

_DEFAULT_SHAPE: Final = (
    "Cover, as short lists rather than prose:\n"
    "- what the user wants overall, and every request that is still open;\n"
    "- decisions made and their reasons; rules and preferences the user stated;\n"
    "- the work done: files touched, commands run, tool results that matter, errors met and "
    "how they were handled;\n"
    "- the next steps."
)

_SAFEGUARD_SHAPE: Final = (
    "Use exactly these section headings, in this order, each on its own line (write 'None.' "
    "under a heading with nothing to report):\n"
    + "\n".join(SAFEGUARD_HEADINGS)
    + "\nUnder them: the user's overall aim; decisions and their reasons; unfinished work; "
    "rules and preferences the user set; requests the user made that are not done yet; and "
    "the identifiers the work depends on."
)


def focus_instructions(
    policy: IdentifierPolicy,
    identifier_instructions: str | None,
    *focus: str | None,
) -> str | None:
    """Identifier rules plus any extra focus (config `customInstructions`, `/compact` text).

    `strict` uses the built-in rule, `custom` the configured `identifierInstructions` (or the
    built-in rule when those are blank), `off` none. Extra focus follows under one
    "Additional focus:" label.
    """
    rule: str | None
    if policy == "off":
        rule = None
    elif policy == "custom" and identifier_instructions and identifier_instructions.strip():
        rule = identifier_instructions.strip()
    else:
        rule = STRICT_IDENTIFIERS
    extra = "\n".join(f.strip() for f in focus if f and f.strip())
    if extra:
        addition = f"Additional focus:\n{extra}"
        return f"{rule}\n\n{addition}" if rule else addition
    return rule


def history_prompt(
    conversation: str,
    *,
    previous_summary: str | None,
    instructions: str | None,
    safeguard: bool,
    part: tuple[int, int] | None = None,
) -> str:
    """The task of summarising a conversation (or one part of it)."""
    sections = [f"<conversation>\n{conversation}\n</conversation>"]
    if previous_summary:
        sections.append(f"<previous-summary>\n{previous_summary}\n</previous-summary>")
    if part is not None:
        task = (
            f"The conversation above is part {part[0]} of {part[1]} of a longer conversation "
            "(oldest part first). Write the record of this part only; the parts are combined "
            "afterwards."
        )
    elif previous_summary:
        task = (
            "Write the record of the conversation above. It continues the earlier record in "
            "<previous-summary>: fold that record in so that nothing in it is lost, and update "
            "whatever the newer messages changed."
        )
    else:
        task = "Write the record of the conversation above."
    sections.append(task + "\n\n" + (_SAFEGUARD_SHAPE if safeguard else _DEFAULT_SHAPE))
    if instructions:
        sections.append(instructions)
    return "\n\n".join(sections)


def merge_prompt(
    summaries: list[str],
    *,
    previous_summary: str | None,
    instructions: str | None,
    safeguard: bool,
) -> str:
    """The task of combining the records of consecutive parts into one."""
    parts = "\n\n".join(
        f'<part index="{i}">\n{text}\n</part>' for i, text in enumerate(summaries, 1)
    )
    sections = [f"<parts>\n{parts}\n</parts>"]
    if previous_summary:
        sections.append(f"<previous-summary>\n{previous_summary}\n</previous-summary>")
    task = (
        "The parts above are records of consecutive stretches of one conversation, oldest "
        "first. Combine them into a single record"
        + (", together with the earlier record in <previous-summary>," if previous_summary else "")
        + " without losing any open request, decision, rule or identifier. Where a later part "
        "changes something, keep the later state."
    )
    sections.append(task + "\n\n" + (_SAFEGUARD_SHAPE if safeguard else _DEFAULT_SHAPE))
    if instructions:
        sections.append(instructions)
    return "\n\n".join(sections)


def turn_prefix_prompt(conversation: str, *, instructions: str | None) -> str:
    """The task of summarising the start of the exchange that is still going on."""
    task = (
        "The messages above open the exchange the assistant is in the middle of; the messages "
        "after them stay in its context verbatim. Record what the user asked in this exchange "
        "and what has been done toward it so far, briefly, so the assistant can finish it."
    )
    sections = [f"<conversation>\n{conversation}\n</conversation>", task]
    if instructions:
        sections.append(instructions)
    return "\n\n".join(sections)


def retry_note(missing: list[str]) -> str:
    """Added to a safeguard retry whose first answer lacked required headings."""
    return (
        "Your previous answer was missing these required headings: "
        + ", ".join(missing)
        + ". Answer again with every heading present."
    )
