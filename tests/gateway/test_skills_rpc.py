"""The gateway's `skills.list` method over a real WebSocket."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.gateway.client import GatewayClient, GatewayError
from tests.gateway.support import TOKEN, socket_gateway
from tests.skills.support import write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_skills_list_reports_each_skill_and_rescans_between_requests(
    isolated_state: Path, configured: Path
) -> None:
    skills = isolated_state / "workspace" / "skills"
    write_skill(
        skills,
        "radar",
        "Show the rain radar.",
        metadata="metadata:\n  nodmix:\n    requires:\n      bins: [nodmix-test-no-such-bin]\n",
    )
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            first = await client.request("skills.list")
            write_skill(skills, "trip", "Plan a trip.")
            second = await client.request("skills.list", {"agentId": "main"})
            with pytest.raises(GatewayError, match="agentId"):
                await client.request("skills.list", {"agentId": 3})
    rows = {row["name"]: row for row in first["skills"]}
    assert first["agentId"] == "main"
    assert rows["radar"]["eligible"] is False
    assert rows["radar"]["reasons"] == ["missing binary: nodmix-test-no-such-bin"]
    assert rows["daily-note"]["eligible"] is True
    assert "trip" not in rows
    assert {row["name"] for row in second["skills"]} >= {"trip", "radar", "daily-note"}
