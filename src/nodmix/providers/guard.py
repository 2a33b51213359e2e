"""The code-mode payload guard: the model sees exactly the expected tools, or nothing is sent.

Code mode replaces every tool with `exec` and `wait`. The check runs on the *final* vendor
payload, after all mapping, so a bug anywhere upstream (a tool that slipped through, a
renamed tool) fails closed instead of leaking the full tool surface to the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodmix.errors import ProviderRequestError


def check_tool_surface(
    names: Sequence[str], expected: frozenset[str] | None, *, provider: str
) -> None:
    """Raise unless the payload's tool names are exactly `expected` (no check when `None`).

    Args:
        names: Tool names in the final payload, in payload order (duplicates count).
        expected: The names the payload must carry, or `None` to skip the check.
        provider: Provider id, recorded on the error.

    Raises:
        ProviderRequestError: The surface differs; nothing may be sent.
    """
    if expected is None:
        return
    if sorted(names) == sorted(expected):
        return
    want = ",".join(sorted(expected)) or "none"
    got = ",".join(sorted(names)) or "none"
    raise ProviderRequestError(
        f"code mode payload tool surface violation: expected {want}; got {got}",
        provider=provider,
    )
