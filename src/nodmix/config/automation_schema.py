"""The `automation` and `hooks` sections of `nodmix.json`, and `agents.defaults.heartbeat`.

`automation` bounds scheduled work (`nodmix cron`), `hooks.mappings.<name>` turns
`POST /hooks/<name>` into a turn, `agents.defaults.heartbeat` makes the agent read its
`HEARTBEAT.md` checklist on a rhythm. Unset keys take the defaults documented on each field.
"""

import re
from typing import Annotated, Literal

import msgspec

from nodmix.config.section import Section

DURATION_PATTERN = r"^\s*(\d+(\.\d+)?\s*[smhdw]\s*)+$"
TIME_OF_DAY_PATTERN = r"^([01]?\d|2[0-3]):[0-5]\d$|^24:00$"
TARGET_PATTERN = r"^[a-z][a-z0-9_-]*:\S+$|^session$"
Duration = Annotated[str, msgspec.Meta(pattern=DURATION_PATTERN)]
"""`30s`, `20m`, `2h`, `1d`, `1h30m`."""
TimeOfDay = Annotated[str, msgspec.Meta(pattern=TIME_OF_DAY_PATTERN)]
Target = Annotated[str, msgspec.Meta(pattern=TARGET_PATTERN)]
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


PATTERN_WORDS = {
    DURATION_PATTERN: "a duration like 30s, 20m, 2h, 1d or 1h30m",
    TIME_OF_DAY_PATTERN: "a time of day, HH:MM",
    TARGET_PATTERN: "a target like telegram:4242 or session:main",
}
"""What a value matching each pattern looks like, for error messages."""

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration_seconds(text: str) -> float:
    """The seconds a `Duration` value (already matched by its pattern) stands for."""
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text.lower()))
