"""Config file changes while the gateway runs: applied live where they can be, otherwise
reported as needing a restart; an invalid file is never applied."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from nodmix.config.loader import load_config
from nodmix.config.schema import NodmixConfig
from nodmix.gateway.client import GatewayClient
from nodmix.gateway.reload import ConfigWatcher
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, poll_until, socket_gateway, write_config


def _touch_forward(path: Path) -> None:
    # Make the change visible even on filesystems with coarse timestamps.
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_a_valid_change_asks_for_a_restart_and_names_the_sections(
    configured: Path, model_server: ScriptedModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    watcher = ConfigWatcher(load_config(), env=os.environ)
    assert watcher.check() is False
    path = write_config(configured, model_server.base_url, "tools: { deny: ['exec'] }")
    _touch_forward(path)
    with caplog.at_level(logging.INFO, logger="nodmix.gateway"):
        assert watcher.check() is True
    assert watcher.state.changed == ["tools"] and watcher.state.restart_required
    assert "restart the gateway to apply" in caplog.text and "tools" in caplog.text


def test_an_invalid_file_is_reported_and_the_running_config_kept(
    configured: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watcher = ConfigWatcher(load_config(), env=os.environ)
    path = configured / "nodmix.json"
    path.write_text("{ agents: { defualts: {} } }", encoding="utf-8")
    _touch_forward(path)
    with caplog.at_level(logging.INFO, logger="nodmix.gateway"):
        watcher.check()
    assert watcher.state.error is not None and "agents.defualts" in watcher.state.error
    assert not watcher.state.restart_required
    assert "still running the configuration it started with" in caplog.text


def test_saving_an_equivalent_file_needs_no_restart(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    watcher = ConfigWatcher(load_config(), env=os.environ)
    path = configured / "nodmix.json"
    path.write_text(path.read_text(encoding="utf-8") + "\n// a comment\n", encoding="utf-8")
    _touch_forward(path)
    assert watcher.check() is True
    assert watcher.state.changed == [] and watcher.state.error is None


@pytest.mark.anyio
async def test_the_running_gateway_applies_agents_live_and_asks_a_restart_for_its_port(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    with socket_gateway(watch_config=True) as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            before = await client.request("health")
            path = write_config(configured, model_server.base_url, agents="list: [{ id: 'x' }]")
            _touch_forward(path)

            async def applied() -> bool:
                health = await client.request("health")
                return [a["id"] for a in health["agents"]] == ["main", "x"]

            await poll_until(applied, what="the watcher to apply the new agent")
            live = await client.request("health")
            path = write_config(
                configured,
                model_server.base_url,
                "gateway: { port: 1 }",
                agents="list: [{ id: 'x' }]",
            )
            _touch_forward(path)

            async def restart_pending() -> bool:
                health = await client.request("health")
                return bool(health["config"]["restartRequired"])

            await poll_until(restart_pending, what="the watcher to see the port change")
            after = await client.request("health")
    assert before["config"]["restartRequired"] is False
    assert live["config"]["appliedSections"] == ["agents"]
    assert live["config"]["restartRequired"] is False
    assert after["config"]["changedSections"] == ["gateway"]


def test_the_gateway_doc_says_which_sections_apply_live_and_which_need_a_restart() -> None:
    from nodmix.runtime.reconfigure import LIVE_SECTIONS, RESTART_SECTIONS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()
    paragraph = doc.split("**Config changes apply live.**")[1].split("\n\n")[0]
    live, restart = paragraph.split("is reported as")[0].split("The other sections")
    for section in LIVE_SECTIONS:
        assert f"`{section}`" in live, section
    others = [s for s in NodmixConfig.__struct_fields__ if s not in LIVE_SECTIONS]
    assert set(RESTART_SECTIONS) <= set(others)
    for section in others:
        assert f"`{section}" in restart, section
