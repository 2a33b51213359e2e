"""Decoding the JSON arguments of a model's tool call, without ever failing.

Models sometimes produce invalid JSON (truncated by `max_tokens`, trailing prose, a bare
string). The turn must go on: the tool then reports bad arguments to the model, which can
retry. So anything that is not a JSON object is kept verbatim under `_raw`.
"""

from __future__ import annotations

import json

from nodmix.messages import JsonObject

RAW_ARGUMENTS_KEY = "_raw"
"""Where unparseable tool-call arguments are kept."""


def parse_arguments(raw: str) -> JsonObject:
    """Decode a tool call's JSON arguments; anything but a JSON object is kept under `_raw`."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: raw}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: raw}
