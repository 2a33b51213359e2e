"""A provider's `timeouts` and `retry` settings reach the requests the router's providers make."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from nodmix.config.loader import validate
from nodmix.config.schema import ModelsConfig, RetryConfig
from nodmix.errors import ConfigError, ProviderTimeoutError
from nodmix.providers.base import collect
from nodmix.providers.router import ProviderRouter
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import stalls
from tests.providers.providers_support import make_request

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def _models(base_url: str, **settings: object) -> ModelsConfig:
    provider = {"api": "openai-completions", "baseUrl": base_url, **settings}
    return msgspec.convert({"providers": {"local": provider}}, ModelsConfig)


async def test_the_providers_idle_timeout_bounds_its_requests() -> None:
    async with ScriptedModelServer(stalls.trickle) as server:
        config = _models(server.base_url, timeouts={"idleSeconds": 0.5})
        async with ProviderRouter(config, {}) as router:
            resolved = router.resolve("local/scripted")
            with anyio.fail_after(5.5), pytest.raises(ProviderTimeoutError) as info:
                await collect(resolved.provider, make_request(model="scripted"))
    assert "local/scripted did not respond within 0.5 s" in str(info.value)


def test_the_providers_retry_setting_comes_with_the_resolved_model() -> None:
    config = _models("http://127.0.0.1:9/v1", retry={"attempts": 2, "maxDelaySeconds": 5})
    resolved = ProviderRouter(config, {}).resolve("local/m")
    assert resolved.retry == RetryConfig(attempts=2, max_delay_seconds=5)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"timeouts": {"idleSeconds": 0}}, "models.providers.local.timeouts.idleSeconds"),
        ({"timeouts": {"idle": 5}}, "models.providers.local.timeouts.idle"),
        ({"retry": {"attempts": 0}}, "models.providers.local.retry.attempts"),
    ],
)
def test_bad_limits_name_the_dotted_key(settings: dict[str, object], key: str) -> None:
    provider = {"api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1", **settings}
    with pytest.raises(ConfigError) as err:
        validate({"models": {"providers": {"local": provider}}}, file="nodmix.json")
    assert err.value.key == key


def test_agent_limits_are_validated_too() -> None:
    with pytest.raises(ConfigError) as err:
        validate({"agents": {"defaults": {"maxOutputBytes": -1}}}, file="nodmix.json")
    assert err.value.key == "agents.defaults.maxOutputBytes"
