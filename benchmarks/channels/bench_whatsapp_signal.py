"""WhatsApp and Signal channels: inbound latency to the model request, a burst of DMs, and the
memory an idle gateway pays for each, beyond its library.

    python -m benchmarks.channels.bench_whatsapp_signal

Latency and burst: a real gateway (in process, on a socket) takes WhatsApp updates signed and
POSTed by the scripted Cloud API (pywa's async client answers through the scripted Graph API)
and Signal messages from the scripted signal-cli daemon's server-sent event stream; the
agent's model is the scripted model server. Latency runs from injecting the message into the
scripted server to the model request arriving (one process, one clock): for WhatsApp the
signed POST, the signature check, decoding, the handled-id store's atomic write; for Signal
the SSE event and its parsing; then access control, the fsync'ed pending file, the session
lane and the turn's set-up.
Memory: `nodmix gateway` subprocesses with no channel, with WhatsApp and with Signal, each
idle after connecting (`benchmarks.channels.bench_memory.measure`); the library's share is the
VmRSS an interpreter that holds the gateway's modules gains by importing the adapter module.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.channels import harness
from benchmarks.report import cpu_calibration_ms
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from nodmix.testing.whatsapp_server import ScriptedWhatsApp

_RSS = (
    "import sys, {module}\n"
    "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS')][0])"
)


def _uuid(sender: str) -> str:
    return f"00000000-0000-4000-8000-{int(sender):012d}"


def latency_and_burst() -> dict[str, harness.RunResult]:
    arrivals = harness.Arrivals()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(arrivals.respond) as model,
        ScriptedWhatsApp() as wa,
        ScriptedSignalDaemon() as daemon,
    ):
        channels = {"whatsapp": wa.config(**harness.OPEN), "signal": daemon.config(**harness.OPEN)}
        with harness.gateway_with(Path(tmp), model.base_url, channels) as gateway:
            wa.webhook_url = f"{gateway.url}/whatsapp"
            harness.wait_connected(gateway, list(channels))

            def to_whatsapp(sender: str, text: str) -> None:
                wa.inject_text(f"1555010{int(sender):04d}", text)

            def to_signal(sender: str, text: str) -> None:
                daemon.inject_text(_uuid(sender), text)

            return {
                "WhatsApp": harness.run_channel(
                    "whatsapp", harness.injection(to_whatsapp), wa.sent_texts, arrivals
                ),
                "Signal": harness.run_channel(
                    "signal", harness.injection(to_signal), daemon.sent_texts, arrivals
                ),
            }


def library_mb(module: str) -> float:
    """VmRSS (MB) an interpreter holding the gateway's modules gains by importing `module`
    (median of 3)."""

    def rss(target: str) -> int:
        code = _RSS.format(module=target)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        return int(out.stdout.strip())

    gateway = "nodmix.gateway.server, nodmix.channels.manager"  # what the gateway has anyway
    gains = [rss(f"{gateway}, {module}") - rss(gateway) for _ in range(3)]
    return statistics.median(gains) / 1024


def memory() -> dict[str, float]:
    with (
        harness.idle_gateways() as measure,
        ScriptedWhatsApp() as wa,
        ScriptedSignalDaemon() as daemon,
    ):
        base = measure({})
        with_wa = measure({"whatsapp": wa.config()})
        with_signal = measure({"signal": daemon.config()})
    return {"none": base, "WhatsApp": with_wa - base, "Signal": with_signal - base}


def main() -> None:
    calibration = cpu_calibration_ms()
    names = ("WhatsApp", "Signal")
    harness.print_runs(latency_and_burst(), inbound="message")
    mem = memory()
    libraries = {
        "WhatsApp": library_mb("nodmix.channels.whatsapp.adapter"),
        "Signal": library_mb("nodmix.channels.signal.adapter"),
    }
    print(f"| gateway VmRSS without channels | {mem['none']:.1f} MB | |")
    print(f"| + the channel, idle | {mem['WhatsApp']:+.1f} MB | {mem['Signal']:+.1f} MB |")
    print(
        f"| of which its library and adapter modules | {libraries['WhatsApp']:+.1f} MB | "
        f"{libraries['Signal']:+.1f} MB |"
    )
    beyond = {n: mem[n] - libraries[n] for n in names}
    print(
        f"| beyond the library (the idle channel itself) | {beyond['WhatsApp']:+.1f} MB | "
        f"{beyond['Signal']:+.1f} MB |"
    )
    print(f"\nCPU calibration: {calibration:.0f} ms")


if __name__ == "__main__":
    main()
