"""Audit checks of who reaches the gateway and the owner's memory: `gateway.auth.mode: "none"`,
the gateway's token files, and `memory.shareWith` (the channel checks, owners and delivery
targets, are `nodmix.channels.audit`'s)."""

from __future__ import annotations

import stat
from pathlib import Path

from nodmix.security.findings import AuditInputs, Check, Finding


def check_gateway_auth(inputs: AuditInputs) -> list[Finding]:
    """A gateway that serves without a token, and token files other users can read."""
    found: list[Finding] = []
    if inputs.config.gateway.auth.mode == "none":
        found.append(
            Finding(
                id="gateway.auth-none",
                severity="high",
                title='gateway.auth.mode is "none": the gateway asks no token',
                detail="every local process and user is the owner: it can run turns (and exec "
                "through them), read memory and transcripts, approve pairing codes and exec "
                "requests over the API and the WebSocket.",
                fix="remove gateway.auth.mode (the gateway then makes its own token, which the "
                "CLI and the banner's page link find)",
            )
        )
    for path in (inputs.state_dir / "gateway" / "token", inputs.state_dir / "gateway.json"):
        mode = _mode(path)
        if mode is not None and mode & 0o077:
            found.append(
                Finding(
                    id="gateway.token-readable",
                    severity="high",
                    title=f"{path} (the gateway token) is readable by others "
                    f"({stat.filemode(mode)})",
                    detail="whoever reads it is the owner of the gateway.",
                    fix=f"chmod 600 {path}",
                )
            )
    return found


def _mode(path: Path) -> int | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    return info.st_mode if stat.S_ISREG(info.st_mode) else None


def check_memory_sharing(inputs: AuditInputs) -> list[Finding]:
    """Chats that read the owner's memory although they are not the owner."""
    found: list[Finding] = []
    for scope in inputs.config.memory.share_with:
        kind = scope.split(":", 1)[0]
        found.append(
            Finding(
                id="memory.shared",
                severity="medium" if kind == "group" else "low",
                title=f"{scope} reads the owner's memory (memory.shareWith)",
                detail=(
                    "every member of that group gets MEMORY.md in the prompt and can have the "
                    "agent read memory/."
                    if kind == "group"
                    else "turns from it get MEMORY.md in the prompt and can read memory/."
                ),
                fix=f"remove {scope!r} from memory.shareWith unless everyone there may know "
                "what the agent keeps for you",
            )
        )
    return found


SHARING_CHECKS: tuple[Check, ...] = (check_gateway_auth, check_memory_sharing)
