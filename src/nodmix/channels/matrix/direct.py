"""Which Matrix rooms are direct chats, and with whom: what the protocol says, never how many
members a room has.

The bot account's `m.direct` account data (user id -> room ids) is the record, as in every
Matrix client: an invitation flagged `is_direct` is added to it when the bot joins, and it is
read back at start and from `/sync`. A room joined before this record was kept is looked up
once: the bot's own membership event shows the invitation it replaced, and that invitation's
`is_direct` flag and sender decide. A message is a DM only when it comes from the person the
room is a direct chat with, and never in a room listed under the channel's `groups`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import ClientError
from nio import AsyncClient
from nio.api import Api
from nio.responses import DirectRoomsResponse, RoomGetEventResponse

log = logging.getLogger("nodmix.channels.matrix")

DIRECT = "m.direct"
KEPT_CHECKS = 5000


class DirectRooms:
    """The `m.direct` record of one account, kept in step with the homeserver."""

    def __init__(self, client: AsyncClient, groups: frozenset[str] = frozenset()) -> None:
        self.client = client
        self.groups = groups
        self._partners: dict[str, set[str]] = {}
        """room id -> the users it is a direct chat with."""
        self._record: dict[str, list[str]] = {}
        self._checked: set[str] = set()
        """Rooms whose membership history was looked at (found direct or not)."""

    def is_direct(self, room_id: str, sender: str) -> bool:
        """Whether a message from `sender` in `room_id` is a direct message."""
        return room_id not in self.groups and sender in self._partners.get(room_id, ())

    def room_with(self, user_id: str) -> str | None:
        """The latest room recorded as a direct chat with `user_id` (none yet: None)."""
        rooms = [r for r in self._record.get(user_id, ()) if r not in self.groups]
        return rooms[-1] if rooms else None

    def known(self, room_id: str) -> bool:
        """Whether the record or a lookup has settled what `room_id` is."""
        return room_id in self._partners or room_id in self._checked

    def load(self, content: Mapping[str, Any]) -> None:
        """Take the account data's content (`m.direct` from `/sync` or a GET)."""
        record: dict[str, list[str]] = {}
        partners: dict[str, set[str]] = {}
        for user, rooms in content.items():
            if isinstance(user, str) and isinstance(rooms, list):
                record[user] = [r for r in rooms if isinstance(r, str)]
                for room in record[user]:
                    partners.setdefault(room, set()).add(user)
        self._record, self._partners = record, partners

    async def fetch(self) -> None:
        """Read the record from the homeserver (none yet: an empty one)."""
        found = await self.client.list_direct_rooms()
        self.load(found.rooms if isinstance(found, DirectRoomsResponse) else {})

    async def add(self, room_id: str, partner: str) -> None:
        """Record `room_id` as a direct chat with `partner`, here and on the homeserver."""
        self._partners.setdefault(room_id, set()).add(partner)
        rooms = self._record.setdefault(partner, [])
        if room_id in rooms:
            return
        rooms.append(room_id)
        path = Api._build_path(
            ["user", self.client.user_id, "account_data", DIRECT],
            {"access_token": self.client.access_token},
        )
        try:
            response = await self.client.send(
                "PUT", path, json.dumps(self._record), {"Content-Type": "application/json"}
            )
            if response.status != 200:
                log.warning("matrix: saving m.direct failed (%s)", response.status)
        except (TimeoutError, ClientError, OSError) as exc:
            log.warning("matrix: saving m.direct failed: %s", exc)

    async def look_up(self, room_id: str) -> None:
        """Settle a room the record does not name: direct when the bot was invited to it
        with `is_direct` (its membership event replaced that invitation)."""
        if len(self._checked) >= KEPT_CHECKS:
            self._checked.clear()
        self._checked.add(room_id)
        invite = await self._replaced_invitation(room_id)
        if invite is None:
            return
        content = invite.get("content") or {}
        sender = invite.get("sender")
        direct = content.get("membership") == "invite" and content.get("is_direct") is True
        if direct and isinstance(sender, str):
            log.info("matrix: %s is a direct chat with %s (its invitation says)", room_id, sender)
            await self.add(room_id, sender)

    async def _replaced_invitation(self, room_id: str) -> dict[str, Any] | None:
        path = Api._build_path(
            ["rooms", room_id, "state", "m.room.member", str(self.client.user_id)],
            {"access_token": self.client.access_token, "format": "event"},
        )
        try:
            response = await self.client.send("GET", path)
            if response.status != 200:
                return None
            member = await response.json()
            replaced = (member.get("unsigned") or {}).get("replaces_state")
            if not isinstance(replaced, str):
                return None
            found = await self.client.room_get_event(room_id, replaced)
        except (TimeoutError, ClientError, OSError, ValueError) as exc:
            log.warning("matrix: looking up %s failed: %s", room_id, exc)
            self._checked.discard(room_id)  # try again with the next message
            return None
        if isinstance(found, RoomGetEventResponse):
            source: dict[str, Any] = found.event.source
            return source
        return None
