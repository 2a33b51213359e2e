"""What an audit check is: a function from `AuditInputs` (the config, the state dir, the
environment) to `Finding`s, each with a severity, what is wrong and the fix."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, TypeAlias

import msgspec

from nodmix.config.schema import NodmixConfig

Severity: TypeAlias = Literal["high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low")


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One risk: a stable id, how bad it is, what it is, and the fix."""

    id: str
    severity: Severity
    title: str
    detail: str
    fix: str


class AuditInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What the checks read."""

    config: NodmixConfig
    config_path: Path
    state_dir: Path
    env: Mapping[str, str]


Check: TypeAlias = Callable[[AuditInputs], list[Finding]]
