"""Audit of the exec allowlist: patterns so wide that they let any command run unasked."""

from __future__ import annotations

import shlex

from nodmix.invocation import nodmix_command
from nodmix.security.findings import AuditInputs, Finding

ANYTHING_PROBES: tuple[tuple[str, ...], ...] = (
    ("reboot",),
    ("rm", "-rf", "/"),
    ("curl", "https://example.org/x.sh"),
    ("bash", "-c", "any command"),
    ("sh", "-c", "any command"),
    ("python3", "-c", "any program"),
    ("perl", "-e", "any program"),
    ("node", "-e", "any program"),
    ("env", "rm", "-rf", "/"),
    ("sudo", "rm", "-rf", "/"),
    ("xargs", "rm", "-rf", "/"),
)
"""Commands that stand for "anything": a pattern covering one of them allows every command
(a shell or interpreter given code, a runner given another command, or any executable)."""


def check_allowlist_breadth(inputs: AuditInputs) -> list[Finding]:
    """One finding per allowlist pattern that covers one of `ANYTHING_PROBES`."""
    from nodmix.security.allowlist import open_allowlist

    try:
        patterns = open_allowlist(inputs.state_dir).patterns
    except (OSError, ValueError):
        return []  # an unreadable allowlist is refused where it is used, with its own error
    found: list[Finding] = []
    for pattern in patterns:
        probe = next((p for p in ANYTHING_PROBES if pattern.matches(p)), None)
        if probe is None:
            continue
        whom = "every agent" if pattern.agent == "*" else f"agent {pattern.agent!r}"
        found.append(
            Finding(
                id="exec.allowlist-anything",
                severity="medium",
                title=f"exec allowlist pattern {pattern.text!r} lets arbitrary commands "
                "run unasked",
                detail=f"it covers `{shlex.join(probe)}`: for {whom}, what it covers runs "
                "without asking, in channel sessions too (the sandbox, where it is on, still "
                "applies).",
                fix=f"`{nodmix_command()} approvals revoke {pattern.id}`, then allow the exact "
                "commands you need",
            )
        )
    return found
