"""The shapes of the scripted Mattermost server's REST answers about posts, channels and
files (`nodmix.testing.mattermost_server`)."""

from __future__ import annotations

from typing import Any


def member_channels(
    types: dict[str, str], posts: list[dict[str, Any]], team: str
) -> list[dict[str, Any]]:
    """`GET /users/{id}/channels`: each channel with its type and `last_post_at` (ms)."""
    last: dict[str, int] = {}
    for post in posts:
        last[post["channel_id"]] = max(last.get(post["channel_id"], 0), int(post["create_at"]))
    return [
        {"id": channel_id, "type": kind, "team_id": team, "last_post_at": last.get(channel_id, 0)}
        for channel_id, kind in types.items()
    ]


def posts_since(posts: list[dict[str, Any]], channel_id: str, since: int) -> dict[str, Any]:
    """`GET /channels/{id}/posts?since=`: the channel's posts created or edited after `since`
    (ms), as `{order, posts}` newest first (the server does not page this answer)."""
    found = [p for p in posts if p["channel_id"] == channel_id and p["update_at"] > since]
    found.reverse()
    return {"order": [p["id"] for p in found], "posts": {p["id"]: p for p in found}}


def file_info(file_id: str, name: str, data: bytes) -> dict[str, Any]:
    """A file's `FileInfo`."""
    mime = "image/png" if name.endswith(".png") else "application/octet-stream"
    return {"id": file_id, "name": name, "size": len(data), "mime_type": mime}
