"""The sandbox of one agent, as the tools see it (`nodmix.tools.isolation.Isolation`).

It decides per call whether the session is sandboxed (`sandbox.mode`), runs the commands of
sandboxed sessions under bubblewrap, and gives `web_fetch` a transport that refuses private
addresses.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx2

from nodmix.agents import AgentProfile
from nodmix.config import paths
from nodmix.security.memory_guard import sandbox_masks
from nodmix.security.network import guarded_transport
from nodmix.security.sandbox.bwrap import bwrap_launch
from nodmix.security.sandbox.policy import SandboxSettings, is_sandboxed
from nodmix.security.workspace_guard import sandbox_readonly
from nodmix.tools.base import ToolContext
from nodmix.tools.isolation import Launch


class SessionSandbox:
    """The `Isolation` of one agent.

    Args:
        settings: The agent's sandbox settings.
        state_dir: The state dir, hidden from sandboxed commands.
        home: The home directory, hidden too (default: the current user's).
        bwrap: Path of the `bwrap` executable; found on PATH when None.
        protected: More paths the commands of other senders see read-only when they lie in the
            workspace (`workspace_guard.instruction_sources`; default: the config file).
    """

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        state_dir: Path,
        home: Path | None = None,
        bwrap: str | None = None,
        protected: tuple[Path, ...] | None = None,
    ) -> None:
        self.settings = settings
        self._protected = protected
        self._hidden = (state_dir, home or Path.home())
        self._bwrap = bwrap
        self._empty = state_dir / "sandbox" / "empty"
        """Shown in place of the owner's `MEMORY.md` to commands that may not read it."""

    @classmethod
    def for_agent(
        cls, agent: AgentProfile, protected: tuple[Path, ...] | None = None
    ) -> SessionSandbox | None:
        """The agent's sandbox, or None when its mode is `off`."""
        settings = SandboxSettings.from_config(agent.sandbox)
        if settings.mode == "off":
            return None
        return cls(settings, state_dir=paths.state_dir(), protected=protected)

    def applies(self, ctx: ToolContext) -> bool:
        """Whether the call's turn is sandboxed under the agent's mode."""
        return is_sandboxed(self.settings.mode, ctx.agent_id, ctx.session_key, ctx.origin)

    async def wrap(self, launch: Launch, ctx: ToolContext) -> Launch:
        """Run `launch` under bubblewrap (raises `ToolError` when the sandbox cannot start).

        A turn that does not speak for the owner sees the paths that feed the owner's
        instructions read-only (`nodmix.security.workspace_guard`), and one that may not read
        the owner's memory sees `MEMORY.md` and `memory/` empty
        (`nodmix.security.memory_guard`)."""
        readonly = sandbox_readonly(
            origin=ctx.origin,
            agent_id=ctx.agent_id,
            session_key=ctx.session_key,
            access=self.settings.workspace_access,
        )
        masked, keep = sandbox_masks(
            launch.cwd, origin=ctx.origin, agent_id=ctx.agent_id, session_key=ctx.session_key
        )
        return await bwrap_launch(
            launch,
            self.settings,
            hidden=self._hidden,
            bwrap=self._bwrap,
            readonly=readonly,
            also=self._also() if readonly else (),
            masked=tuple(masked),
            keep=keep,
            empty=empty_file(self._empty) if masked else None,
        )

    def _also(self) -> tuple[Path, ...]:
        return (paths.config_path(),) if self._protected is None else self._protected

    def web_transport(self) -> httpx2.AsyncBaseTransport:
        """A transport that connects only to public addresses (checked after resolving)."""
        return guarded_transport()


def empty_file(path: Path) -> Path:
    """`path` as an empty, private regular file (made, or emptied, when it is not one)."""
    from nodmix.assets.files import ensure_private_dir

    try:
        info = path.lstat()
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            return path
        path.unlink()
    except FileNotFoundError:
        pass
    ensure_private_dir(path.parent)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
    except FileExistsError:  # another command made it at the same moment
        pass
    return path
