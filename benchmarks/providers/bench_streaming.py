"""Streaming a huge reply: folding many deltas stays linear, and the byte cap stops early.

Run from the repository root:

    python -m benchmarks.providers.bench_streaming [--mib 16] [--runs 3]

A scripted model server in this process streams an N MiB answer in 16 KiB pieces (the
`huge` script); each adapter reads it over a real socket and folds it into one message.
Uncapped, this measures the whole path (SSE decoding, chunk parsing, folding); with the
default 1 MiB `maxOutputBytes`, it measures how soon the stream is cut off.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

from nodmix.providers.anthropic import AnthropicProvider
from nodmix.providers.base import ModelRequest, ModelSpec, collect
from nodmix.providers.limits import DEFAULT_MAX_OUTPUT_BYTES
from nodmix.providers.openai import OpenAIProvider
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import huge

RESULTS = Path(__file__).resolve().parent.parent / "results" / "streaming.json"
TARGET_SECONDS_PER_16_MIB = 5.0


def _provider(api: str, server: ScriptedModelServer) -> Any:
    if api == "openai":
        return OpenAIProvider(name="bench", base_url=server.base_url)
    return AnthropicProvider(name="bench", base_url=server.url)


async def _measure(api: str, mib: int, cap: int | None, runs: int) -> dict[str, Any]:
    from nodmix.messages import user_message

    request = ModelRequest(
        model=ModelSpec(provider="bench", id="m"),
        system="",
        messages=[user_message(str(mib))],
        max_output_bytes=cap,
    )
    samples: list[float] = []
    size = 0
    async with ScriptedModelServer(huge.respond) as server, _provider(api, server) as provider:
        for _ in range(runs):
            start = time.perf_counter()
            message = await collect(provider, request)
            samples.append(time.perf_counter() - start)
            size = len(message.text.encode())
            stop = message.stop_reason
    return {
        "api": api,
        "mib": mib,
        "cap": cap,
        "median_s": statistics.median(samples),
        "bytes": size,
        "stop_reason": stop,
    }


async def _all(mib: int, runs: int) -> list[dict[str, Any]]:
    results = []
    for api in ("openai", "anthropic"):
        results.append(await _measure(api, mib, None, runs))
        results.append(await _measure(api, mib, DEFAULT_MAX_OUTPUT_BYTES, runs))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    results = anyio.run(_all, args.mib, args.runs)
    target = TARGET_SECONDS_PER_16_MIB * args.mib / 16
    print("| benchmark | result | target | ok |")
    print("|---|---|---|---|")
    for row in results:
        if row["cap"] is None:
            name = f"{row['api']}: stream and fold a {row['mib']} MiB reply (uncapped)"
            ok = row["median_s"] <= target
            bound = f"≤ {target:g} s"
        else:
            name = f"{row['api']}: same reply, default 1 MiB cap (`{row['stop_reason']}`)"
            ok = row["stop_reason"] == "length" and row["bytes"] == row["cap"]
            bound = "cut at 1 MiB"
        print(
            f"| {name} | {row['median_s']:.2f} s ({row['bytes']:,} bytes kept) | {bound} |"
            f" {'yes' if ok else 'NO'} |"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps({"benchmark": "streaming", "results": results}, indent=2) + "\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
