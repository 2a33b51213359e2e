"""The gateway's own token: made on the first start of a gateway that has none configured.

A gateway always requires a token unless `gateway.auth.mode` is `"none"`. When neither
`--token`, `NODMIX_GATEWAY_TOKEN` nor `gateway.auth.token` gives one, the gateway uses
`<state>/gateway/token`, creating it (43 random URL-safe characters, 256 bits, mode 0600) on
its first start. Everything on the same machine that can read the state dir (the CLI, the
banner's page link) finds it there, so a fresh install, and a state dir whose gateway ran
without a token before, need no configuration.

With the postgres state backend the made token is a database document instead
(`open_token_store`), so every replica accepts the same one and the CLI on any machine with
the config finds it.

This module is light (no Starlette, no uvicorn): the CLI imports it to find the token.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import string
from pathlib import Path
from typing import Protocol

from nodmix.assets.files import ensure_private_dir
from nodmix.stores import provided

TOKEN_BYTES = 32
"""Entropy of a generated token (`secrets.token_urlsafe(32)`: 43 characters)."""
MAX_TOKEN_CHARS = 512
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "-_.~+/=")


class TokenStore(Protocol):
    """Where a gateway keeps the token it made itself."""

    @property
    def where(self) -> str:
        """Where the token is, for people (a path, or the state database)."""
        ...

    def load(self) -> str | None:
        """The stored token, or None when there is none (or it is unusable)."""
        ...

    def load_or_create(self, token: str | None = None) -> str:
        """The stored token, made now if there is none (`token`: the one to store then, as
        `nodmix state migrate` carries a token over)."""
        ...


def open_token_store(state_dir: Path) -> TokenStore:
    """The token store of the backend serving `state_dir` (the file by default)."""
    found = provided(state_dir, "gateway.token")
    return found if found is not None else FileTokenStore(state_dir)


def token_file(state_dir: Path) -> Path:
    """`<state>/gateway/token`."""
    return state_dir / "gateway" / "token"


def new_token() -> str:
    """A fresh random token."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def usable(token: str) -> bool:
    """Whether `token` can be sent in a header as it is (printable, no spaces, not huge)."""
    return 0 < len(token) <= MAX_TOKEN_CHARS and set(token) <= _TOKEN_CHARS


class FileTokenStore:
    """The token in `<state>/gateway/token` (0600 in a 0700 folder; never follows links)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = token_file(state_dir)

    @property
    def where(self) -> str:
        """The token file's path."""
        return str(self.path)

    def load(self) -> str | None:
        """The token in the file; a file others can read is made private first."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                return None
            if info.st_mode & 0o077:
                with contextlib.suppress(OSError):
                    os.fchmod(handle.fileno(), 0o600)
            raw = handle.read(MAX_TOKEN_CHARS + 2)
        try:
            token = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            return None
        return token if usable(token) else None

    def load_or_create(self, token: str | None = None) -> str:
        """The token in the file, or a new one (`token`, when given) written there. Two
        gateways starting at once agree on one token: the file is created by a hard link,
        which never replaces it."""
        found = self.load()
        if found is not None:
            return found
        folder = ensure_private_dir(self.path.parent)
        token = token if token is not None and usable(token) else new_token()
        tmp = folder / f".token.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write((token + "\n").encode("ascii"))
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, self.path)
            except FileExistsError:  # another gateway (or an unusable file) got there first
                existing = self.load()
                if existing is not None:
                    return existing
                os.replace(tmp, self.path)  # unusable: replace it (a token loses nothing)
                return token
            return token
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
