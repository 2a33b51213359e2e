"""The channels of a gateway share one TLS client context, so a further Telegram bot does not
load another copy of the CA certificates, and bots sharing it still verify the server."""

from __future__ import annotations

import gc
import os
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import uvicorn
from telegram.error import NetworkError

from nodmix.channels.registry import create_adapter
from nodmix.channels.telegram.adapter import TelegramAdapter, TelegramSettings
from nodmix.channels.tls import ClientTls
from nodmix.config.loader import validate
from nodmix.config.schema import NodmixConfig
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.daemon import self_signed
from tests.channels.irc_daemon import free_port, wait_until
from tests.support.config import scripted_config
from tests.support.process import rss_kb

FURTHER_BOTS = 10
CA_COPY_KB = 700
"""A verifying context (the parsed CA bundle) is ~800 KB; each bot used to build two."""


def _config() -> NodmixConfig:
    section = {"botToken": "123456:TEST-token", "apiBaseUrl": "https://bot-api.invalid"}
    return validate(
        scripted_config("http://127.0.0.1:9/v1", channels={"telegram": section}), file="test"
    )


def test_the_shared_context_is_built_once_and_only_when_asked() -> None:
    tls = ClientTls()
    assert tls._context is None
    first = tls.context()
    assert tls.context() is first
    assert first.check_hostname


def test_further_telegram_bots_reuse_the_gateways_tls_context(tmp_path: Path) -> None:
    config, tls = _config(), ClientTls()
    bots = [create_adapter("telegram", config, {}, tmp_path / "first", tls=tls)]  # warm up
    gc.collect()
    before = rss_kb(os.getpid())
    bots += [
        create_adapter("telegram", config, {}, tmp_path / str(i), tls=tls)
        for i in range(FURTHER_BOTS)
    ]
    gc.collect()
    grown = rss_kb(os.getpid()) - before
    assert len(bots) == FURTHER_BOTS + 1
    # Each bot building its own two contexts grew RSS by ~1.6 MB a bot.
    assert grown < FURTHER_BOTS * CA_COPY_KB, f"{FURTHER_BOTS} bots grew RSS by {grown} KB"


@pytest.fixture
def tls_bot_api(tmp_path: Path) -> Iterator[tuple[ScriptedBotAPI, str, Path]]:
    """The scripted Bot API also served over HTTPS with a fresh self-signed certificate:
    (api, https URL, certificate file)."""
    cert, key = self_signed(tmp_path, "cert")
    with ScriptedBotAPI() as api:
        config = uvicorn.Config(
            api.build_app(),
            host="127.0.0.1",
            port=free_port(),
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            lifespan="off",
            log_level="warning",
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        wait_until(lambda: server.started, what="the HTTPS Bot API listening")
        try:
            yield api, f"https://127.0.0.1:{config.port}", cert
        finally:
            server.should_exit = True
            thread.join(timeout=10)


@pytest.mark.anyio
@pytest.mark.integration
async def test_bots_sharing_the_context_still_verify_the_bot_api_certificate(
    tls_bot_api: tuple[ScriptedBotAPI, str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, url, cert = tls_bot_api
    stranger = ssl.create_default_context()  # the system's CAs only: does not know the cert
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the trust a user gives a private Bot API
    shared = ClientTls().context()
    bots = [
        TelegramAdapter(TelegramSettings(api.token, url, 1), tmp_path / str(i), shared)
        for i in range(3)
    ]
    with anyio.fail_after(30):
        for bot in bots:  # getMe on one client, getUpdates on the other, both over TLS
            async with bot.bot:
                assert await bot.check() == f"@{api.username}"
                assert await bot.bot.get_updates(timeout=0) == ()

    refused = TelegramAdapter(TelegramSettings(api.token, url, 1), tmp_path / "x", stranger)
    try:
        with anyio.fail_after(30), pytest.raises(NetworkError):
            await refused.check()
    finally:
        await refused.bot.request.shutdown()
