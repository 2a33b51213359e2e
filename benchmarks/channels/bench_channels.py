"""Channel layer: inbound latency to the model request, and a burst of DMs.

    python -m benchmarks.channels.bench_channels

A real gateway (in process, on a socket) polls the scripted Bot API with python-telegram-bot;
the agent's model is the scripted model server. Latency is measured from injecting an update
into the Bot API server to the model request arriving (both in this process, one clock): it
covers the long-poll wake-up, the library's parsing, access control, the delivery log's
fsync'ed pending file, the session lane and the runtime's turn set-up.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI

LATENCY_MESSAGES = 40
BURST_MESSAGES = 200
BURST_SENDERS = 50


def main() -> None:
    arrivals: dict[str, float] = {}
    lock = threading.Lock()

    def respond(request: ModelRequest) -> ModelReply:
        users = [m for m in request.messages if isinstance(m, UserMessage)]
        text = users[-1].text if users else ""
        with lock:
            arrivals.setdefault(text, time.perf_counter())
        return ModelReply.text(f"re: {text}")

    import os

    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(respond) as model,
        ScriptedBotAPI(max_poll_seconds=5) as api,
    ):
        state = Path(tmp)
        os.environ["NODMIX_STATE_DIR"] = str(state)
        os.environ["NODMIX_CONFIG_PATH"] = str(state / "nodmix.json")
        config = {
            "models": {
                "providers": {
                    "local": {
                        "api": "openai-completions",
                        "baseUrl": model.base_url,
                        "apiKey": "none",
                        "models": [{"id": "scripted", "contextWindow": 32000}],
                    }
                }
            },
            "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
            "channels": {
                "telegram": {
                    "botToken": api.token,
                    "apiBaseUrl": api.url,
                    "pollTimeoutSeconds": 5,
                    "allowFrom": ["*"],
                    "dmPolicy": "open",
                    "typing": False,
                }
            },
            "session": {"dmScope": "per-peer"},
        }
        (state / "nodmix.json").write_text(json.dumps(config))
        with BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1)):
            latencies = []
            for i in range(LATENCY_MESSAGES):
                text = f"latency {i}"
                injected = time.perf_counter()
                api.inject_text(chat_id=7, sender_id=7, text=text)
                api.wait_for(lambda t=text: f"re: {t}" in api.sent_texts(7), timeout=30)
                latencies.append((arrivals[text] - injected) * 1000)
            burst_start = time.perf_counter()
            for i in range(BURST_MESSAGES):
                sender = 1000 + i % BURST_SENDERS
                api.inject_text(chat_id=sender, sender_id=sender, text=f"burst {i}")
            api.wait_for(
                lambda: sum(t.startswith("re: burst") for t in api.sent_texts()) >= BURST_MESSAGES,
                timeout=120,
            )
            burst_seconds = time.perf_counter() - burst_start
        replies = Counter(t for t in api.sent_texts() if t.startswith("re: burst"))
    lost = BURST_MESSAGES - len(replies)
    doubled = sum(1 for n in replies.values() if n > 1)
    print("| measurement | result |")
    print("|---|---|")
    print(
        f"| inbound update → model request, median of {LATENCY_MESSAGES} | "
        f"{statistics.median(latencies):.1f} ms (p90 "
        f"{sorted(latencies)[int(len(latencies) * 0.9)]:.1f} ms) |"
    )
    print(
        f"| {BURST_MESSAGES} DMs from {BURST_SENDERS} senders at once | "
        f"all answered in {burst_seconds:.1f} s; lost {lost}, answered twice {doubled} |"
    )


if __name__ == "__main__":
    main()
