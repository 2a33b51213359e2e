"""XMPP and Mattermost channels: inbound latency to the model request (their idle memory is
in the channel memory table, `benchmarks.channels.bench_memory`).

    python -m benchmarks.channels.bench_xmpp_mattermost

Latency: a real gateway (in process) runs the XMPP channel against a real Prosody on loopback
(a person on a slixmpp client of their own sends each message) and the Mattermost channel
against the scripted Mattermost server (an injected `posted` event over its WebSocket); the
model is the scripted model server. Measured from the send (or the injection) to the model
request arriving, one clock: the network hop, the library's parsing, access control, the
fsync'ed pending file, the session lane and the turn's set-up.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.channels.prosody import Prosody, XmppPerson
from tests.support.config import write_json_config

from benchmarks.channels.harness import (
    LATENCY_MESSAGES,
    OPEN,
    Arrivals,
    background_gateway,
    latency_cell,
    wait_connected,
    wait_until,
)
from benchmarks.report import cpu_calibration_ms
from nodmix.testing.mattermost_server import ScriptedMattermost
from nodmix.testing.model_server import ScriptedModelServer

ANN = "ann00000000000000000000000"


def latency(root: Path) -> dict[str, list[float]]:
    arrivals = Arrivals()
    prosody = Prosody(root / "prosody")
    prosody.register("nodbot", "pw")
    prosody.start()
    try:
        with ScriptedModelServer(arrivals.respond) as model, ScriptedMattermost() as mm:
            mm.add_user(ANN, "ann")
            xmpp = {"jid": "nodbot@localhost", "password": "pw", "server": "127.0.0.1"}
            channels: dict[str, Any] = {
                "xmpp": {**xmpp, "port": prosody.port, "tls": "off", **OPEN},
                "mattermost": {"url": mm.url, "token": mm.token, **OPEN},
            }
            state = root / "state"
            state.mkdir()
            write_json_config(state, model.base_url, channels=channels)
            os.environ["NODMIX_STATE_DIR"] = str(state)
            gateway = background_gateway()
            ann = XmppPerson(prosody, "ann")
            out: dict[str, list[float]] = {"XMPP": [], "Mattermost": []}
            with gateway:
                wait_connected(gateway, ["xmpp", "mattermost"])
                dm = mm.dm_channel(ANN)
                for i in range(LATENCY_MESSAGES):
                    text = f"xmpp latency {i}"
                    start = time.perf_counter()
                    ann.say("nodbot@localhost", text)
                    wait_until(lambda t=text: f"re: {t}" in ann.texts(), "xmpp reply")
                    out["XMPP"].append((arrivals[text] - start) * 1000)
                    text = f"mattermost latency {i}"
                    start = time.perf_counter()
                    mm.inject_post(dm, ANN, text, channel_type="D")
                    wait_until(lambda t=text: f"re: {t}" in mm.texts(dm), "mattermost reply")
                    out["Mattermost"].append((arrivals[text] - start) * 1000)
            ann.close()
    finally:
        prosody.stop()
    return out


def main() -> None:
    calibration = cpu_calibration_ms()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = latency(root)
    names = ("XMPP", "Mattermost")
    print("| measurement | XMPP (real Prosody) | Mattermost (scripted server) |")
    print("|---|---|---|")
    cells = [latency_cell(results[name]) for name in names]
    print(
        f"| inbound message → model request, median of {LATENCY_MESSAGES} | {' | '.join(cells)} |"
    )
    print(f"| CPU calibration | {calibration:.0f} ms | |")


if __name__ == "__main__":
    main()
