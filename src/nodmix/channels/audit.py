"""The channel layer's checks for `nodmix security audit`: channels without an owner, and
delivery targets (webhook mappings, the heartbeat, cron jobs) the channel's rules refuse.

They read the config, the pairing files and `jobs.json`; nothing is changed. The CLI passes
them to `nodmix.security.audit.run_audit` (the security layer does not import channels).
"""

from __future__ import annotations

from collections.abc import Iterator

from nodmix.channels.pairing import open_pairing_store
from nodmix.channels.registry import enabled_channels, rules_for
from nodmix.channels.targets import deliver_refusal
from nodmix.origin import TurnOrigin
from nodmix.security.findings import AuditInputs, Check, Finding


def check_owners(inputs: AuditInputs) -> list[Finding]:
    """Configured channels that name no owner."""
    found: list[Finding] = []
    for channel in enabled_channels(inputs.config):
        if rules_for(inputs.config, channel).owner_ids:
            continue
        found.append(
            Finding(
                id="channels.no-owner",
                severity="low",
                title=f"channel {channel!r} names no owner (channels.{channel}.ownerIds)",
                detail="nobody there can answer exec approvals, and your own DMs get a "
                "session of their own, without your memory.",
                fix=f"message the bot yourself, then run `nodmix pairing approve {channel} "
                f"<code> --owner` (or set channels.{channel}.ownerIds)",
            )
        )
    return found


Target = tuple[str, str, bool, TurnOrigin | None]
"""Where it is set, the target, whether `--force` let it past the rules, and the chat that
set it (which may always get its results)."""


def _targets(inputs: AuditInputs) -> Iterator[Target]:
    """Every channel delivery target of the config and the jobs."""
    from nodmix.automation.jobs import creator_origin
    from nodmix.automation.store import open_job_store

    for name, mapping in inputs.config.hooks.mappings.items():
        if mapping.deliver:
            yield f"hooks.mappings.{name}.deliver", mapping.deliver, False, None
    beat = inputs.config.agents.defaults.heartbeat
    if beat is not None and beat.deliver:
        yield "agents.defaults.heartbeat.deliver", beat.deliver, False, None
    try:
        jobs = open_job_store(inputs.state_dir).load()
    except Exception:  # an unreadable jobs file is `nodmix doctor`'s to report
        jobs = []
    for job in jobs:
        if job.deliver:
            where = f"cron job {job.id} ({job.name})"
            yield where, job.deliver, job.forced, creator_origin(job)


def check_deliver_targets(inputs: AuditInputs) -> list[Finding]:
    """Delivery targets the channel's rules refuse (or that `--force` let past them)."""
    from nodmix.automation.jobs import JobError, parse_target, session_target

    pairing = open_pairing_store(inputs.state_dir)
    found: list[Finding] = []
    for where, target, forced, origin in _targets(inputs):
        if session_target(target) is not None:
            continue
        try:
            channel, chat = parse_target(target)
        except JobError:
            continue
        refused = deliver_refusal(inputs.config, pairing, channel, chat, origin)
        if refused is None:
            continue
        if forced:
            found.append(
                Finding(
                    id="deliver.forced",
                    severity="low",
                    title=f"{where} delivers to {target} outside the channel's rules (--force)",
                    detail=refused,
                    fix="remove the job, or allow the chat (allowFrom, groups or pairing)",
                )
            )
            continue
        found.append(
            Finding(
                id="deliver.not-allowed",
                severity="medium",
                title=f"{where} delivers to {target}, which is refused",
                detail=f"{refused}; nothing is sent there.",
                fix="deliver to an allowed chat, or allow this one (allowFrom, groups or pairing)",
            )
        )
    return found


CHANNEL_CHECKS: tuple[Check, ...] = (check_owners, check_deliver_targets)
