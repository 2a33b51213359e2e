"""The channel layer as tools and automation reach it, built only when a channel is used.

Every turn asks whether a channel is configured (the `message` and `cron` tools depend on it);
answering that must not import the channel layer and its platform libraries, which a runtime
without channels (most `nodmix agent --local` runs) never needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from nodmix.agents import channels_configured
from nodmix.config.schema import NodmixConfig
from nodmix.origin import TurnOrigin

if TYPE_CHECKING:
    from nodmix.channels.manager import ChannelManager
    from nodmix.channels.types import OutboundMessage
    from nodmix.media.service import MediaService
    from nodmix.security.parts import SecurityParts


class LazyChannels:
    """`configured`, `outbound_allowed` and `send` of the runtime's `ChannelManager`, which is
    created on the first call that needs it."""

    def __init__(
        self, config: Callable[[], NodmixConfig], manager: Callable[[], ChannelManager]
    ) -> None:
        self._config = config
        self._manager = manager

    def configured(self) -> list[str]:
        """Ids of the channels that start with the gateway ([] without importing anything)."""
        if not channels_configured(self._config()):
            return []
        return self._manager().configured()

    def outbound_allowed(self, channel: str, chat_id: str, origin: TurnOrigin | None) -> bool:
        """Whether the agent may message `chat_id` (same rules as inbound)."""
        return self._manager().outbound_allowed(channel, chat_id, origin)

    def deliver_refusal(self, channel: str, chat_id: str, origin: TurnOrigin | None) -> str | None:
        """Why the agent may not message `channel:chat_id` (one line naming the rule), or None;
        a channel that is not configured is refused without building the channel layer."""
        if not channels_configured(self._config()):
            return f"channel {channel!r} is not configured (no channels are configured)"
        return self._manager().deliver_refusal(channel, chat_id, origin)

    async def send(self, channel: str, message: OutboundMessage) -> list[str]:
        """Send through the channel's adapter."""
        return await self._manager().send(channel, message)


def open_channels(
    config: Callable[[], NodmixConfig],
    *,
    env: Mapping[str, str],
    state_dir: Path,
    security: SecurityParts,
    media: MediaService | None = None,
) -> ChannelManager:
    """The channel manager. Approval requests of channel turns are posted to their chat, and
    `/approve` answers there; with `media`, replies may be spoken (`/tts`)."""
    from nodmix.channels.approvals import ChannelApprovalPresenter, register_approval_commands
    from nodmix.channels.manager import ChannelManager
    from nodmix.channels.voice import VoiceReplies, register_voice_command

    manager = ChannelManager(config, env=env, state_dir=state_dir)
    security.broker.router.register("channel", ChannelApprovalPresenter(manager))
    register_approval_commands(security.answer_command_async)
    if media is not None:
        manager.voice = VoiceReplies(media, manager)
        register_voice_command()
    return manager
