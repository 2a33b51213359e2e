"""Built-in script `huge`: a very long answer, to try the reply byte cap.

The answer is as many MiB as the last user message says (`4` -> 4 MiB; default 16), made of
numbered lines, streamed in 16 KiB pieces like a fast real model.
"""

from __future__ import annotations

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.scripts.echo import last_user_text

DEFAULT_MIB = 16
_LINE = "{:08d} the quick brown fox jumps over the lazy dog, again and again.\n"


def huge_text(size: int) -> str:
    """`size` characters of numbered ASCII lines."""
    line_len = len(_LINE.format(0))
    count = size // line_len + 1
    return "".join(_LINE.format(i) for i in range(count))[:size]


def respond(request: ModelRequest) -> ModelReply:
    """Answer with `N` MiB of text, `N` read from the last user message."""
    text = (last_user_text(request) or "").strip()
    try:
        mib = float(text.split()[0]) if text else DEFAULT_MIB
    except ValueError:
        mib = DEFAULT_MIB
    return ModelReply.text(huge_text(int(mib * (1 << 20))))
