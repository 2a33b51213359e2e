"""The channel manager: runs the configured adapters inside the gateway, applies access
control, routes messages to sessions and runs one turn at a time per session.

Each session has a lane: allowed messages queue there (bounded) and a worker runs them in
order through the runtime's turn API (`TurnRunner`), showing the typing indicator while a turn
runs and sending the reply, split at the platform's limit, when it ends. A message is marked
answered only after its reply went out, so a message pending at a crash runs again after the
restart; the delivery log (`delivery.py`) keeps a re-delivered message from being answered
twice.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from nodmix import offload
from nodmix.channels.access import decide, is_owner
from nodmix.channels.base import ChannelAdapter, ChatAdmission, WebhookReceiver
from nodmix.channels.chunking import split_text
from nodmix.channels.commands import COMMANDS, CommandCall, parse_command
from nodmix.channels.delivery import DeliveryLog, open_delivery_log
from nodmix.channels.direct_chats import DirectChats
from nodmix.channels.inbox import save_message
from nodmix.channels.newcomers import Newcomers
from nodmix.channels.pairing import open_pairing_store
from nodmix.channels.registry import create_adapter, enabled_channels, rules_for, webhook_paths
from nodmix.channels.routing import route_agent, session_key
from nodmix.channels.runner import ReplyHook, RunHandle, TurnRunner
from nodmix.channels.status import ChannelStatus, write_status
from nodmix.channels.streaming import EditThrottle, edit_stream
from nodmix.channels.tls import ClientTls
from nodmix.channels.types import InboundMessage, OutboundMessage
from nodmix.config.schema import NodmixConfig
from nodmix.origin import TurnOrigin, memory_scope

log = logging.getLogger("nodmix.channels")

Singleton = Callable[[str, Callable[[], Awaitable[None]]], Coroutine[Any, Any, None]]
"""Runs `body()` on one replica of a deployment at a time (`state.coordination`)."""

MAX_QUEUED_PER_SESSION = 20
TYPING_EVERY_SECONDS = 4.0
STATUS_EVERY_SECONDS = 1.0
RESTART_BACKOFF_SECONDS = 60.0
"""Longest wait before a channel whose adapter failed is started again."""


@dataclass(slots=True)
class _Lane:
    queue: deque[InboundMessage] = field(default_factory=deque)
    running: RunHandle | None = None
    stopped: bool = False
    busy: bool = False


class ChannelManager:
    """Every configured channel of one gateway."""

    def __init__(
        self,
        config: Callable[[], NodmixConfig],
        *,
        env: Mapping[str, str],
        state_dir: Path,
    ) -> None:
        self._config = config
        self._env = env
        self.state_dir = state_dir
        self.pairing = open_pairing_store(state_dir)
        self.direct_chats = DirectChats(state_dir)
        """Direct chats seen from allowed senders (what `allowFrom: ["*"]` may deliver to)."""
        self.adapters: dict[str, ChannelAdapter] = {}
        self.statuses: dict[str, ChannelStatus] = {}
        self._delivery: dict[str, DeliveryLog] = {}
        self._lanes: dict[str, _Lane] = {}
        self._runner: TurnRunner | None = None
        self._group: TaskGroup | None = None
        self._status_dirty = False
        self._newcomers = Newcomers(self.pairing)
        self._edits = EditThrottle()
        self._tls = ClientTls()
        self.owner_chats: dict[str, str] = {}
        """The owner's latest DM chat per channel (approval requests of other chats go
        there too)."""
        self.voice: ReplyHook | None = None  # spoken replies (`channels/voice.py`), if wired
        self.singleton: Singleton | None = None
        """With several gateway replicas: runs each polling or socket channel on one replica
        at a time (`state.coordination`); channels in webhook mode run on every replica."""

    # ---- lifecycle ------------------------------------------------------------------------

    def configured(self) -> list[str]:
        """Ids of the channels that start with the gateway."""
        return enabled_channels(self._config())

    def adapter(self, channel: str) -> ChannelAdapter:
        """The channel's adapter (built on first use, also outside the gateway)."""
        if channel not in self.adapters:
            self.adapters[channel] = create_adapter(
                channel, self._config(), self._env, self.state_dir, tls=self._tls
            )
        return self.adapters[channel]

    async def run(self, runner: TurnRunner) -> None:
        """Run every configured channel until cancelled (the gateway's lifespan)."""
        channels = self.configured()
        if not channels:
            return
        self._runner = runner
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                hooked = set(self.webhook_paths().values())
                for channel in channels:
                    self.statuses[channel] = ChannelStatus(channel=channel)
                    self._delivery[channel] = open_delivery_log(self.state_dir, channel)
                    if self.singleton is None or channel in hooked:
                        group.start_soon(self._run_channel, channel)
                    else:
                        group.start_soon(self.singleton, f"channel:{channel}", self._held(channel))
                group.start_soon(self._mirror_status)
        finally:
            self._group = None
            with anyio.CancelScope(shield=True):
                for adapter in self.adapters.values():
                    with contextlib.suppress(Exception):
                        await adapter.aclose()
                self.adapters.clear()

    async def _run_channel(self, channel: str) -> None:
        status = self.statuses[channel]
        # Read before the adapter exists (a webhook is refused until then): a message
        # received while this read waits on the database would be queued twice.
        delivery = self._delivery[channel]
        waiting = await offload.call(delivery, delivery.pending)  # accepted before a restart
        try:
            adapter = self.adapter(channel)
        except Exception as exc:
            status.error(str(exc))
            self._status_dirty = True
            log.error("channel %s not started: %s", channel, exc)
            return
        for msg in waiting:
            await self._enqueue(msg)
        backoff = 1.0
        while True:  # a defect in one adapter must not stop the others (nor the gateway)
            try:
                await adapter.run(self.receive, status)
                return
            except Exception as exc:
                status.connected = False
                status.error(f"stopped by an error, restarting in {backoff:g}s: {exc}")
                self._status_dirty = True
                log.exception("channel %s stopped by an error; restarting", channel)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_SECONDS)

    def _held(self, channel: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            try:
                await self._run_channel(channel)
            finally:  # another replica may take it over: a fresh adapter next time
                adapter = self.adapters.pop(channel, None)
                if adapter is not None:
                    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await adapter.aclose()

        return run

    def webhook_paths(self) -> dict[str, str]:
        """`{path: channel}` the gateway serves for channels in webhook mode."""
        return webhook_paths(self._config())

    async def webhook(
        self, channel: str, headers: Mapping[str, str], body: Callable[[], Awaitable[bytes]]
    ) -> int:
        """A request to a channel's webhook path (`body` reads its body); the HTTP status."""
        adapter: object = self.adapters.get(channel)
        if not isinstance(adapter, WebhookReceiver):
            return 503  # not started (yet): the platform posts it again later
        return await adapter.receive_webhook(headers, body)

    async def _mirror_status(self) -> None:
        last: list[dict[str, object]] = []
        while True:
            # Adapters update their status directly (errors, refusals), so compare too.
            snapshot = [s.to_json() for s in self.statuses.values()]
            if self._status_dirty or snapshot != last:
                self._status_dirty = False
                last = snapshot
                try:
                    await anyio.to_thread.run_sync(
                        write_status, self.state_dir, list(self.statuses.values())
                    )
                except OSError as exc:
                    log.warning("cannot write channel status: %s", exc)
            await anyio.sleep(STATUS_EVERY_SECONDS)

    def touch(self) -> None:
        """Status changed (adapters call this on connect/error)."""
        self._status_dirty = True

    # ---- inbound --------------------------------------------------------------------------

    async def receive(self, msg: InboundMessage) -> None:
        """One inbound message: access control first; nothing else sees a refused one."""
        status = self.statuses.setdefault(msg.channel, ChannelStatus(channel=msg.channel))
        status.received += 1
        status.last_event_at = time.time()
        self._status_dirty = True
        config = self._config()
        rules = rules_for(config, msg.channel)
        decision = await offload.call(self.pairing, decide, rules, self.pairing, msg)
        if decision.verdict == "pair":
            if self._group is None:  # outside the gateway's run (tests of the layer)
                await self._newcomers.answer(msg, status, self._send_safely)
            else:  # never wait for the platform here: an adapter's intake is waiting on us
                self._group.start_soon(self._newcomers.answer, msg, status, self._send_safely)
            return
        if decision.verdict != "allow":
            status.count(decision.verdict, decision.reason)
            log.info(
                "%s: %s message from %s: %s",
                msg.channel,
                decision.verdict,
                msg.sender_id,
                decision.reason,
            )
            return
        if msg.chat_type == "dm":
            await self.direct_chats.remember_async(msg.channel, msg.chat_id)
        adapter: object = self.adapters.get(msg.channel)
        if isinstance(adapter, ChatAdmission):  # strangers cannot push its address out now
            owner = msg.chat_type == "dm" and is_owner(rules, msg)
            adapter.admitted(msg.chat_id, owner=owner)
        delivery = self._delivery.get(msg.channel)
        if delivery is not None and not await offload.call(delivery, delivery.accept, msg):
            return  # delivered again after a restart: already answered or pending
        await self._enqueue(msg)

    def _route(self, msg: InboundMessage) -> tuple[str, str]:
        assert self._runner is not None
        config = self._config()
        section = getattr(config.channels, msg.channel, None)
        default = getattr(section, "agent_id", None) or self._runner.default_agent()
        agent = route_agent(config, msg, default)
        return agent, session_key(config, msg, agent, owner=self.is_owner(msg))

    def is_owner(self, msg: InboundMessage) -> bool:
        """Whether the message's sender is the channel's owner (`channels.<id>.ownerIds`)."""
        return is_owner(rules_for(self._config(), msg.channel), msg)

    def origin_of(self, msg: InboundMessage) -> TurnOrigin:
        """The origin a turn from `msg` gets: whether its sender is the owner, and whether
        `memory.shareWith` lets its chat read the owner's memory."""
        owner = self.is_owner(msg)
        if owner and msg.chat_type == "dm":
            self.owner_chats[msg.channel] = msg.chat_id  # where approvals reach the owner
        plain = msg.origin(owner=owner)
        shared = memory_scope(plain) in self._config().memory.share_with
        return msg.origin(owner=owner, memory=shared) if shared else plain

    async def _enqueue(self, msg: InboundMessage) -> None:
        agent_id, key = self._route(msg)
        parsed = parse_command(msg.text)
        if parsed is not None and COMMANDS[parsed[0]].immediate:
            command = COMMANDS[parsed[0]]
            call = CommandCall(parsed[0], parsed[1], msg, key, agent_id, self)
            assert self._group is not None and command.handler is not None
            self._group.start_soon(self._answer_command, call, command.handler)
            return
        lane = self._lanes.setdefault(key, _Lane())
        status = self.statuses[msg.channel]
        if len(lane.queue) >= MAX_QUEUED_PER_SESSION:
            status.count("refuse", "session queue full")
            await self._done(msg)
            return
        lane.queue.append(msg)
        status.queued += 1
        if not lane.busy:
            lane.busy = True
            assert self._group is not None
            self._group.start_soon(self._work, key, agent_id, lane)

    async def _answer_command(
        self, call: CommandCall, handler: Callable[[CommandCall], Awaitable[str]]
    ) -> None:
        try:
            text = await handler(call)
        except Exception as exc:
            text = f"/{call.name} failed: {exc}"
        await self._reply(call.message, text)
        await self._done(call.message)

    # ---- lanes ----------------------------------------------------------------------------

    async def _work(self, key: str, agent_id: str, lane: _Lane) -> None:
        try:
            while lane.queue:
                msg = lane.queue.popleft()
                self.statuses[msg.channel].queued -= 1
                await self._run_one(msg, key, agent_id, lane)
        finally:
            lane.busy = False
            if not lane.queue:
                self._lanes.pop(key, None)

    async def _run_one(self, msg: InboundMessage, key: str, agent_id: str, lane: _Lane) -> None:
        assert self._runner is not None
        runner = self._runner
        saved = await save_message(
            self.adapter(msg.channel), msg, runner.workspace(agent_id), self._config()
        )
        if saved.refusal is not None:  # too large: one line, no turn
            await self._reply(msg, saved.refusal)
            await self._done(msg)
            return
        lane.stopped = False
        rules = rules_for(self._config(), msg.channel)
        stream = None
        if rules.streaming == "edit":
            adapter, status = self.adapters.get(msg.channel), self.statuses[msg.channel]
            stream = edit_stream(adapter, self._edits, status, msg.chat_id, msg.thread_id)
        failed = False
        async with anyio.create_task_group() as typing_group:
            if rules.typing:
                typing_group.start_soon(self._keep_typing, msg)
            if stream is not None:
                typing_group.start_soon(stream.run)
            handle = runner.start(
                saved.text,
                agent_id=agent_id,
                session_key=key,
                origin=self.origin_of(msg),
                stream=stream,
                files=saved.files,
            )
            lane.running = handle
            try:
                reply = await handle.result()
            except Exception as exc:
                failed = True
                reply = "Stopped." if lane.stopped else f"Sorry, that failed: {exc}"
                if not lane.stopped:
                    self.statuses[msg.channel].error(f"turn failed: {exc}")
            finally:
                lane.running = None
                typing_group.cancel_scope.cancel()
        if stream is None or not await stream.complete(reply, failed=failed):
            await self._reply(msg, reply)
        # Recorded before the spoken reply (seconds of synthesis): a crash in between must
        # not send the written reply again after a restart.
        await self._done(msg)
        if self.voice is not None and not failed:
            await self.voice.after_reply(msg, reply)
        self.statuses[msg.channel].answered += 1
        self._status_dirty = True

    async def _done(self, msg: InboundMessage) -> None:
        """Record `msg` as answered (before the lane takes its next message)."""
        delivery = self._delivery[msg.channel]
        await offload.call(delivery, delivery.done, msg)

    async def _keep_typing(self, msg: InboundMessage) -> None:
        adapter = self.adapters.get(msg.channel)
        if adapter is None:
            return
        while True:
            with contextlib.suppress(Exception):
                await adapter.typing(msg.chat_id, msg.thread_id)
            await anyio.sleep(TYPING_EVERY_SECONDS)

    def lane_state(self, key: str) -> tuple[bool, int]:
        """`(running, queued)` of a session's lane."""
        lane = self._lanes.get(key)
        if lane is None:
            return False, 0
        return lane.running is not None, len(lane.queue)

    def stop_session(self, key: str) -> bool:
        """Cancel the session's running turn (`/stop`); queued messages still run."""
        lane = self._lanes.get(key)
        if lane is None or lane.running is None:
            return False
        lane.stopped = True
        lane.running.cancel()
        return True

    # ---- outbound -------------------------------------------------------------------------

    async def _reply(self, msg: InboundMessage, text: str) -> None:
        await self._send_safely(
            msg.channel,
            OutboundMessage(chat_id=msg.chat_id, text=text, thread_id=msg.thread_id),
        )

    async def _send_safely(self, channel: str, message: OutboundMessage) -> None:
        try:
            await self.send(channel, message)
        except Exception as exc:
            status = self.statuses.get(channel)
            if status is not None:
                status.error(f"send failed: {exc}")
            log.warning("%s: cannot send to %s: %s", channel, message.chat_id, exc)

    async def send(self, channel: str, message: OutboundMessage) -> list[str]:
        """Send text (split at the platform's limit) and files; the sent message ids."""
        adapter = self.adapter(channel)
        pieces = split_text(message.text, adapter.text_limit) if message.text.strip() else []
        ids: list[str] = []
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            ids += await adapter.send(
                OutboundMessage(
                    chat_id=message.chat_id,
                    text=piece,
                    thread_id=message.thread_id,
                    attachments=message.attachments if last else (),
                )
            )
        if not pieces and message.attachments:
            ids += await adapter.send(message)
        return ids

    def outbound_allowed(self, channel: str, chat_id: str, origin: TurnOrigin | None) -> bool:
        """Whether the agent may message `chat_id` (`deliver_refusal` has no objection)."""
        return self.deliver_refusal(channel, chat_id, origin) is None

    def deliver_refusal(self, channel: str, chat_id: str, origin: TurnOrigin | None) -> str | None:
        """Why the agent may not message `channel:chat_id`, or None (`channels/targets.py`)."""
        from nodmix.channels.targets import deliver_refusal

        config = self._config()
        return deliver_refusal(
            config, self.pairing, channel, chat_id, origin, seen=self.direct_chats
        )
