"""The gateway's Prometheus metrics (`GET /metrics`, text exposition format).

Each `Metrics` owns its own registry, so several runtimes in one process (tests) never share
or collide on counters. `TurnObserver` updates them from run events; the gateway's error
responses count under `nodmix_errors_total` too.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The media type of `render()`'s output."""

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Seconds: model answers range from a local server's milliseconds to long reasoning calls."""


class Metrics:
    """Counters and histograms of one running Nodmix."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter(
            "nodmix_turns", "Agent turns, by agent and outcome.", ["agent", "outcome"], registry=r
        )
        self.tool_calls = Counter(
            "nodmix_tool_calls",
            "Tool calls (nested code-mode calls included), by tool and status.",
            ["tool", "status"],
            registry=r,
        )
        self.codemode_steps = Counter(
            "nodmix_codemode_steps",
            "Code-mode steps (`exec` and `wait` calls of the model), by kind and status.",
            ["step", "status"],
            registry=r,
        )
        self.compactions = Counter(
            "nodmix_compactions",
            "Compactions, by trigger and outcome.",
            ["trigger", "outcome"],
            registry=r,
        )
        self.model_latency = Histogram(
            "nodmix_model_latency_seconds",
            "Seconds from a step's model request to its complete answer, by model.",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "nodmix_errors", "Errors, by code (turn failures and API errors).", ["code"], registry=r
        )

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return bytes(generate_latest(self.registry))
