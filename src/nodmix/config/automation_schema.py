"""The `automation` and `hooks` sections of `nodmix.json`, and `agents.defaults.heartbeat`.

`automation` bounds scheduled work (`nodmix cron`), `hooks.mappings.<name>` turns
`POST /hooks/<name>` into a turn, `agents.defaults.heartbeat` makes the agent read its
`HEARTBEAT.md` checklist on a rhythm. Unset keys take the defaults documented on each field.
"""

from typing import Annotated, Literal

import msgspec

from nodmix.config.section import Section

Duration = Annotated[str, msgspec.Meta(pattern=r"^\s*(\d+(\.\d+)?\s*[smhdw]\s*)+$")]
"""`30s`, `20m`, `2h`, `1d`, `1h30m`."""
TimeOfDay = Annotated[str, msgspec.Meta(pattern=r"^([01]?\d|2[0-3]):[0-5]\d$|^24:00$")]
Target = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_-]*:\S+$|^session$")]
"""`<channel>:<chatId>`, or `session:<key>` (`session`: the main session) to append the reply
to a session's transcript."""


class ActiveHoursConfig(Section, frozen=True):
    """`agents.defaults.heartbeat.activeHours`: beats only between `start` and `end`."""

    start: TimeOfDay
    """`HH:MM` (local to `timezone`)."""
    end: TimeOfDay
    """`HH:MM`; before `start` means a window across midnight."""
    timezone: str | None = None
    """IANA zone (default: the machine's)."""


class HeartbeatConfig(Section, frozen=True):
    """`agents.defaults.heartbeat`: off unless `every` is set."""

    every: Duration | None = None
    """Interval between beats (`30m`)."""
    active_hours: ActiveHoursConfig | None = None
    deliver: Target | None = None
    """`<channel>:<chatId>` that gets replies other than `HEARTBEAT_OK`."""
    model: str | None = None


class AutomationConfig(Section, frozen=True):
    """`automation`: limits of cron, heartbeat and webhook runs."""

    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Runs at once across all jobs (default 2)."""
    run_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """Seconds one run may take (default 600)."""
    missed_runs: Literal["run-once", "skip"] | None = None
    """A run missed while the gateway was down: fire once on start (default) or skip it."""
    runs_kept: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Run history entries kept per job (default 50)."""


class HookMapping(Section, frozen=True):
    """`hooks.mappings.<name>`: what `POST /hooks/<name>` asks the agent."""

    message: str
    """Template over the JSON body: `New mail: {{body.subject}}`."""
    agent_id: str | None = None
    session_key: str | None = None
    """Session to run in (default: a fresh `hook:<name>:<runId>` session per call)."""
    deliver: Target | None = None
    """`<channel>:<chatId>` that gets the reply."""
    model: str | None = None


class HooksConfig(Section, frozen=True):
    """`hooks`: webhooks."""

    mappings: dict[str, HookMapping] = {}
    token: str | None = None
    """A token (literal or `${ENV_VAR}`) that authorizes `POST /hooks/<name>` and
    `GET /hooks/runs/<id>` only: give it to the services that call webhooks instead of the
    gateway token, which opens the whole API."""


def check_deliver_channels(targets: list[tuple[str, str]], channels: object, *, file: str) -> None:
    """Each configured `deliver` target (`(key, "<channel>:<chatId>")`) names a channel
    `channels` configures and does not disable. Whether the chat itself is allowed depends on
    pairing too, so that is checked when the reply is sent
    (`nodmix.channels.targets.deliver_refusal`).

    Raises:
        ConfigError: a target names a channel that is not configured (names the file and key).
    """
    from nodmix.errors import ConfigError

    for key, target in targets:
        channel = target.split(":", 1)[0]
        if channel == "session":
            continue
        section = getattr(channels, channel, None) if channel != "defaults" else None
        if section is None or not getattr(section, "enabled", True):
            raise ConfigError(
                f"{target!r}: channel {channel!r} is not configured (no channels.{channel} "
                "section, or it is disabled)",
                file=file,
                key=key,
            )
