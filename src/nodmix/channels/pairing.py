"""Pairing: unknown senders get a one-time code; the owner approves it.

State per channel in `<state>/channels/pairing/<channel>.json`: pending requests (code,
sender, when), approved senders, and when recent codes were handed out. Codes are 8
characters of capital letters and digits without look-alikes (no 0/O, 1/I) and expire after
an hour. Every change is a locked read-modify-write with an atomic replace, so the gateway and
`nodmix pairing approve` can act at the same time.

Bounded, so that a few accounts cannot lock everyone else out:

- a channel holds at most `MAX_PENDING` requests; a new one displaces the oldest (which would
  have expired first), so a newcomer always gets a code;
- one sender gets a new code at most every `SENDER_COOLDOWN_SECONDS` and at most
  `MAX_CODES_PER_SENDER` times a day (their live code is repeated meanwhile), so cycling
  accounts to displace others' requests needs many accounts;
- a channel hands out at most `MAX_CODES_PER_HOUR` new codes an hour (the bound on what a
  flood of fresh accounts can make the bot do: reply, or join rooms on Matrix).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from pathlib import Path
from typing import Any

import msgspec

from nodmix.channels.files import channels_dir, locked, read_json, write_json
from nodmix.errors import NodmixError
from nodmix.invocation import nodmix_command
from nodmix.stores import provided

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL_SECONDS = 3600.0
MAX_PENDING = 10
"""Pending requests a channel holds; a new one displaces the oldest."""
SENDER_COOLDOWN_SECONDS = 600.0
"""A sender gets a new code at most this often (after theirs expired or was displaced)."""
MAX_CODES_PER_SENDER = 3
"""New codes one sender gets in `ISSUED_WINDOW_SECONDS`."""
MAX_CODES_PER_HOUR = 30
"""New codes a channel hands out in an hour."""
ISSUED_WINDOW_SECONDS = 86400.0
MAX_ISSUED = 2000
"""Entries of the issue log kept (a bound on the file whatever the traffic)."""


class PairingError(NodmixError):
    """An unknown code, or a sender that is not approved."""


class PendingRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A sender waiting for approval."""

    code: str
    sender_id: str
    sender_name: str = ""
    chat_id: str = ""
    created_at: float

    def to_json(self, channel: str) -> dict[str, Any]:
        """The shape `nodmix pairing list --json` and `pairing.list` report."""
        return {
            "channel": channel,
            "code": self.code,
            "senderId": self.sender_id,
            "senderName": self.sender_name,
            "createdAt": int(self.created_at * 1000),
            "expiresAt": int((self.created_at + CODE_TTL_SECONDS) * 1000),
        }


class Approved(msgspec.Struct, frozen=True, kw_only=True):
    """A sender the owner let in."""

    sender_id: str
    sender_name: str = ""
    approved_at: float


class Issued(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A code handed out: to whom and when (for the rate limits)."""

    sender_id: str
    at: float


class PairingState(msgspec.Struct, kw_only=True):
    """One channel's pairing file."""

    pending: list[PendingRequest] = msgspec.field(default_factory=list)
    approved: list[Approved] = msgspec.field(default_factory=list)
    issued: list[Issued] = msgspec.field(default_factory=list)


def new_code() -> str:
    """A random pairing code."""
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def open_pairing_store(state_dir: Path) -> PairingStore:
    """The pairing state of the backend serving `state_dir` (files by default)."""
    found = provided(state_dir, "channels.pairing")
    return found if isinstance(found, PairingStore) else PairingStore(state_dir)


class PairingStore:
    """The pairing files of every channel under a state dir."""

    def __init__(self, state_dir: Path, *, clock: Any = time.time) -> None:
        self.root = channels_dir(state_dir) / "pairing"
        self._clock = clock
        self._cache: dict[str, tuple[int, PairingState]] = {}

    def path(self, channel: str) -> Path:
        """The pairing file of `channel`."""
        return self.root / f"{channel}.json"

    def load(self, channel: str) -> PairingState:
        """The channel's state, expired codes dropped (cached until the file changes)."""
        path = self.path(channel)
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            return PairingState()
        cached = self._cache.get(channel)
        if cached is None or cached[0] != stamp:
            raw = read_json(path, {})
            try:
                state = msgspec.convert(raw, PairingState)
            except msgspec.ValidationError:
                state = PairingState()
            cached = (stamp, state)
            self._cache[channel] = cached
        return self._current(cached[1])

    def _current(self, state: PairingState) -> PairingState:
        """`state` without expired codes and issue-log entries past the window (a copy)."""
        now = self._clock()
        live = [p for p in state.pending if now - p.created_at < CODE_TTL_SECONDS]
        recent = [i for i in state.issued if now - i.at < ISSUED_WINDOW_SECONDS][-MAX_ISSUED:]
        return PairingState(pending=live, approved=list(state.approved), issued=recent)

    def _save(self, channel: str, state: PairingState) -> None:
        write_json(self.path(channel), msgspec.to_builtins(state))
        self._cache.pop(channel, None)

    def _locked(self, channel: str) -> contextlib.AbstractContextManager[None]:
        """Exclusive use of the channel's pairing state for a read-modify-write."""
        return locked(self.path(channel))

    def is_approved(self, channel: str, sender_id: str) -> bool:
        """Whether the owner approved `sender_id` on `channel`."""
        return any(a.sender_id == sender_id for a in self.load(channel).approved)

    def request(
        self, channel: str, sender_id: str, *, sender_name: str = "", chat_id: str = ""
    ) -> tuple[PendingRequest | None, bool]:
        """The sender's pending request: `(request, created_now)`; `(None, False)` when the
        sender or the channel is over its rate limit. A full channel drops its oldest request
        to make room."""
        with self._locked(channel):
            state = self.load(channel)
            for pending in state.pending:
                if pending.sender_id == sender_id:
                    return pending, False
            now = self._clock()
            if self._limited(state, sender_id, now) is not None:
                return None, False
            while len(state.pending) >= MAX_PENDING:
                dropped = min(state.pending, key=lambda p: p.created_at)
                state.pending.remove(dropped)
            taken = {p.code for p in state.pending}
            code = new_code()
            while code in taken:
                code = new_code()
            request = PendingRequest(
                code=code,
                sender_id=sender_id,
                sender_name=sender_name,
                chat_id=chat_id,
                created_at=now,
            )
            state.pending.append(request)
            state.issued = [*state.issued, Issued(sender_id=sender_id, at=now)][-MAX_ISSUED:]
            self._save(channel, state)
            return request, True

    def may_request(self, channel: str, sender_id: str) -> bool:
        """Whether `sender_id` has a live code or would get one now (read only)."""
        state = self.load(channel)
        if any(p.sender_id == sender_id for p in state.pending):
            return True
        return self._limited(state, sender_id, self._clock()) is None

    @staticmethod
    def _limited(state: PairingState, sender_id: str, now: float) -> str | None:
        """Why no new code goes out now (a rate limit), or None."""
        mine = [i.at for i in state.issued if i.sender_id == sender_id]
        if mine and now - max(mine) < SENDER_COOLDOWN_SECONDS:
            return "sender cooldown"
        if len(mine) >= MAX_CODES_PER_SENDER:
            return "sender daily limit"
        if sum(1 for i in state.issued if now - i.at < 3600.0) >= MAX_CODES_PER_HOUR:
            return "channel hourly limit"
        return None

    def approve(self, channel: str, code: str) -> PendingRequest:
        """Approve a pending code (case-insensitive).

        Raises:
            PairingError: no live request has that code.
        """
        wanted = code.strip().upper()
        with self._locked(channel):
            state = self.load(channel)
            found = next((p for p in state.pending if p.code == wanted), None)
            if found is None:
                listing = f"{nodmix_command()} pairing list"
                raise PairingError(
                    f"no pending pairing request on {channel} has code {wanted!r} "
                    f"(codes expire after an hour, or when {MAX_PENDING} newer requests "
                    f"displace them; list them with `{listing}`)"
                )
            state.pending = [p for p in state.pending if p.sender_id != found.sender_id]
            state.approved = [a for a in state.approved if a.sender_id != found.sender_id]
            state.approved.append(
                Approved(
                    sender_id=found.sender_id,
                    sender_name=found.sender_name,
                    approved_at=self._clock(),
                )
            )
            self._save(channel, state)
            return found

    def revoke(self, channel: str, sender_id: str) -> None:
        """Forget an approved sender (they must pair again).

        Raises:
            PairingError: the sender is not approved on that channel.
        """
        with self._locked(channel):
            state = self.load(channel)
            if not any(a.sender_id == sender_id for a in state.approved):
                raise PairingError(f"sender {sender_id} is not approved on {channel}")
            state.approved = [a for a in state.approved if a.sender_id != sender_id]
            state.pending = [p for p in state.pending if p.sender_id != sender_id]
            self._save(channel, state)

    def channels(self) -> list[str]:
        """Channels that have a pairing file."""
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.json"))
