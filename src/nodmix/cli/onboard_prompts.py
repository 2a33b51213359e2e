"""The questions of `nodmix onboard` in a terminal (prompt_toolkit line editing)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from prompt_toolkit import prompt
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.validation import Validator

from nodmix.cli.onboarding import (
    LOCAL_PROVIDER,
    PROVIDERS,
    Answers,
    ProviderChoice,
    test_model,
)

SHOWN_MODELS = 30
"""At most this many listed models are numbered; the rest can still be typed by name."""


def ask(path: Path, env: Mapping[str, str]) -> Answers | None:
    """Ask every question; None if the user declines to write."""
    print(f"Welcome to Nodmix. This sets up {path}.")
    if path.exists() and not _yes(f"{path.name} exists; update its model settings?", True):
        return None
    choice = _pick_provider()
    base_url, api_key = _connection(choice, env)
    draft = Answers(provider=choice.id, model="", api_key=api_key, base_url=base_url)
    model = _pick_model(draft, env)
    answers = Answers(provider=choice.id, model=model, api_key=api_key, base_url=base_url)
    print(f"Sending {answers.model_ref} a test request...")
    ok, line = test_model(answers)
    print(line)
    if not ok and not _yes("Write the config anyway?", False):
        return None
    code_mode = _yes(
        "Turn on code mode (the model writes small programs that call tools, in a sandbox)?",
        False,
    )
    channel = _pick_channel()
    return Answers(
        provider=choice.id,
        model=model,
        api_key=api_key,
        base_url=base_url,
        code_mode=code_mode,
        channel=channel,
        owner_id=_owner_id(channel) if channel else None,
    )


def _pick_channel() -> str | None:
    """An optional chat channel (only where this build has channels)."""
    from nodmix.cli.onboarding import CHANNELS, channels_supported

    if not channels_supported():
        return None
    for channel, variable in CHANNELS.items():
        if _yes(f"Also answer chats on {channel.title()} (bot token from ${variable})?", False):
            return channel
    return None


def _owner_id(channel: str) -> str | None:
    """The owner's sender id on the channel, or None to pair later."""
    answer = _text(
        f"Your {channel.title()} user id, to be its owner (Enter: pair later with "
        f"`pairing approve {channel} <code> --owner`)",
        check=lambda t: not any(c.isspace() for c in t.strip()),
        error="an id without spaces",
    )
    return answer.strip() or None


def _pick_provider() -> ProviderChoice:
    print("Which model provider?")
    for n, choice in enumerate(PROVIDERS, 1):
        print(f"  {n}) {choice.label}")
    index = _number("Provider", len(PROVIDERS), default=1)
    return PROVIDERS[index - 1]


def _connection(choice: ProviderChoice, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    if choice.id == LOCAL_PROVIDER:
        url = _text("Server URL", default=choice.default_url or "").strip()
        key = _text("API key (Enter for none)", password=True).strip()
        return url, key or None
    if choice.key_env and env.get(choice.key_env):
        key = _text(f"API key (Enter to use ${choice.key_env})", password=True).strip()
        return None, key or f"${{{choice.key_env}}}"
    key = _text(f"{choice.label} API key", password=True, required=True).strip()
    return None, key


def _pick_model(draft: Answers, env: Mapping[str, str]) -> str:
    from nodmix.cli.onboarding import candidate_router
    from nodmix.errors import NodmixError
    from nodmix.providers.probe import list_models

    router = candidate_router(draft, env)
    try:
        models = list_models(router, draft.provider)
    except NodmixError as exc:
        print(f"Could not list the models: {exc}")
        models = []
    if not models:
        usual = router.definition(draft.provider).default_model or ""
        return _text("Model id", default=usual, required=True).strip()
    print(f"Models the server lists ({len(models)}):")
    shown = models[:SHOWN_MODELS]
    for n, model in enumerate(shown, 1):
        print(f"  {n}) {model}")
    if len(models) > len(shown):
        print(f"  ... and {len(models) - len(shown)} more (type a name; Tab completes)")
    answer = _text(
        f"Model (1-{len(shown)} or a name)",
        default="1",
        completer=models,
        check=lambda t: t.strip() in models or _in_range(t, len(shown)),
        error="pick a number from the list or a listed model name",
    ).strip()
    return shown[int(answer) - 1] if _in_range(answer, len(shown)) else answer


def _in_range(text: str, top: int) -> bool:
    return text.strip().isdigit() and 1 <= int(text) <= top


def _number(label: str, top: int, *, default: int) -> int:
    answer = _text(
        f"{label} (1-{top})",
        default=str(default),
        check=lambda t: _in_range(t, top),
        error=f"a number from 1 to {top}",
    )
    return int(answer)


def _yes(question: str, default: bool) -> bool:
    hint = "Y/n" if default else "y/N"
    answer = _text(
        f"{question} ({hint})",
        check=lambda t: t.strip().lower() in ("", "y", "yes", "n", "no"),
        error="answer y or n",
    )
    return default if not answer.strip() else answer.strip().lower().startswith("y")


def _text(
    label: str,
    *,
    default: str = "",
    password: bool = False,
    required: bool = False,
    completer: Sequence[str] = (),
    check: Callable[[str], bool] | None = None,
    error: str = "",
) -> str:
    def valid(text: str) -> bool:
        if not text.strip():
            return bool(default) or not required
        return check(text) if check is not None else True

    validator = Validator.from_callable(
        valid, error_message=error or "an answer is needed", move_cursor_to_end=True
    )
    shown = f"{label} [{default}]: " if default and not password else f"{label}: "
    answer = prompt(
        shown,
        is_password=password,
        completer=WordCompleter(list(completer), sentence=True) if completer else None,
        validator=validator,
        validate_while_typing=False,
    )
    return answer if answer.strip() else default
