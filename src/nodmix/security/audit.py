"""`nodmix security audit`: read the config and the state dir and list what is risky.

Each finding names what is wrong, how bad it is and the fix. `high` means someone else can get at
the machine or its secrets today (the command exits 1); `medium` is a weakness worth fixing;
`low` is a note. The checks only read: files, modes and the config. They live in
`security/audit_checks.py`; this module runs them and renders the report.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from nodmix.config.schema import NodmixConfig
from nodmix.security.findings import SEVERITIES, AuditInputs, Check, Finding, Severity


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """The findings, most severe first."""

    findings: tuple[Finding, ...]

    @property
    def counts(self) -> dict[Severity, int]:
        """How many findings of each severity."""
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    @property
    def failed(self) -> bool:
        """Whether a high-severity finding exists."""
        return self.counts["high"] > 0

    def summary(self) -> str:
        """One line: `no risky settings found` or `2 high, 1 medium, 0 low`."""
        if not self.findings:
            return "no risky settings found"
        counts = self.counts
        return ", ".join(f"{counts[s]} {s}" for s in SEVERITIES)

    def render(self) -> str:
        """The report as text, one block per finding."""
        if not self.findings:
            return "security audit: no risky settings found"
        lines = [f"security audit: {self.summary()}"]
        for f in self.findings:
            lines.append(f"[{f.severity}] {f.title}")
            lines.append(f"    {f.detail}")
            lines.append(f"    fix: {f.fix}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """The report as plain data (`--json`)."""
        return {
            "ok": not self.failed,
            "counts": self.counts,
            "findings": msgspec.to_builtins(list(self.findings)),
        }


def run_audit(
    config: NodmixConfig,
    *,
    config_path: Path,
    state_dir: Path,
    env: Mapping[str, str] | None = None,
    extra: Sequence[Check] = (),
) -> AuditReport:
    """Run every check (and `extra`: the channel layer's, `nodmix.channels.audit`) and sort
    the findings by severity."""
    from nodmix.security.audit_checks import CHECKS

    inputs = AuditInputs(
        config=config,
        config_path=config_path,
        state_dir=state_dir,
        env=os.environ if env is None else env,
    )
    findings = [f for check in (*CHECKS, *extra) for f in check(inputs)]
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    return AuditReport(findings=tuple(findings))
