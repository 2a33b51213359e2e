"""Channel layer: inbound latency to the model request, and a burst of DMs.

    python -m benchmarks.channels.bench_channels

A real gateway (in process, on a socket) polls the scripted Bot API with python-telegram-bot;
the agent's model is the scripted model server. Latency is measured from injecting an update
into the Bot API server to the model request arriving (both in this process, one clock): it
covers the long-poll wake-up, the library's parsing, access control, the delivery log's
fsync'ed pending file, the session lane and the runtime's turn set-up.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.channels.harness import (
    BURST_MESSAGES,
    BURST_SENDERS,
    LATENCY_MESSAGES,
    OPEN,
    Arrivals,
    gateway_with,
    injection,
    latency_cell,
    run_channel,
)
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI


def main() -> None:
    arrivals = Arrivals()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(arrivals.respond) as model,
        ScriptedBotAPI(max_poll_seconds=5) as api,
    ):
        section = {"botToken": api.token, "apiBaseUrl": api.url, "pollTimeoutSeconds": 5}
        with gateway_with(Path(tmp), model.base_url, {"telegram": {**section, **OPEN}}):

            def to_telegram(sender: str, text: str) -> None:
                api.inject_text(chat_id=int(sender), sender_id=int(sender), text=text)

            latencies, burst_seconds, lost, doubled = run_channel(
                "telegram", injection(to_telegram), api.sent_texts, arrivals
            )
    print("| measurement | result |")
    print("|---|---|")
    print(
        f"| inbound update → model request, median of {LATENCY_MESSAGES} | "
        f"{latency_cell(latencies)} |"
    )
    print(
        f"| {BURST_MESSAGES} DMs from {BURST_SENDERS} senders at once | "
        f"all answered in {burst_seconds:.1f} s; lost {lost}, answered twice {doubled} |"
    )


if __name__ == "__main__":
    main()
