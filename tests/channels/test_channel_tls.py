"""The channels of a gateway share one TLS client context, so a further Telegram bot does not
load another copy of the CA certificates."""

from __future__ import annotations

import gc
import os
from pathlib import Path

from nodmix.channels.registry import create_adapter
from nodmix.channels.tls import ClientTls
from nodmix.config.loader import validate
from nodmix.config.schema import NodmixConfig
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
