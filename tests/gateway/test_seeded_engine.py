"""A context engine meets a gateway session after the client's history is recorded: its
`bootstrap` sees the conversation the client sent, and only once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client, write_config

pytestmark = pytest.mark.anyio

SEEN_ENGINE_PLUGIN = '''
import json
from pathlib import Path

from nodmix.context.base import AssembleResult, CompactResult, ContextEngineInfo
from nodmix.context.tokens import estimate_tokens
from nodmix.plugins import Plugin


class SeenEngine:
    """Writes what each bootstrap saw to the file its config names."""

    info = ContextEngineInfo(id="seen", name="Seen")

    def __init__(self, ctx):
        self.out = Path(ctx.config["out"])

    async def bootstrap(self, params):
        seen = [[m.role, m.text] for m in params.messages]
        with self.out.open("a", encoding="utf-8") as out:
            out.write(json.dumps(seen) + "\\n")

    async def ingest(self, params):
        return None

    async def assemble(self, params):
        return AssembleResult(
            messages=params.messages, estimated_tokens=estimate_tokens(params.messages)
        )

    async def compact(self, params):
        return CompactResult(ok=True, compacted=False)


plugin = Plugin(
    id="seen-plugin",
    name="Seen engine",
    register=lambda api: api.register_context_engine("seen", SeenEngine),
)
'''


async def test_an_engine_bootstraps_a_gateway_session_with_the_client_history(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    plugin = isolated_state / "plugins" / "seen.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(SEEN_ENGINE_PLUGIN, encoding="utf-8")
    out = isolated_state / "bootstraps.jsonl"
    write_config(
        isolated_state,
        model_server.base_url,
        f"plugins: {{ load: {{ paths: [{json.dumps(str(plugin))}] }}, "
        "slots: { contextEngine: 'seen' }, "
        f"entries: {{ 'seen-plugin': {{ config: {{ out: {json.dumps(str(out))} }} }} }} }}",
    )
    history = [
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "now"},
    ]
    async with asgi_client() as client:
        first = await client.post(
            "/v1/chat/completions", json={"model": "nodmix", "messages": history, "user": "s1"}
        )
        assert first.status_code == 200, first.text
        more = [*history, {"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
        second = await client.post(
            "/v1/chat/completions", json={"model": "nodmix", "messages": more, "user": "s1"}
        )
        assert second.status_code == 200, second.text
    seen = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert seen == [[["user", "earlier question"], ["assistant", "earlier answer"]]]
