"""`nodmix onboard`: the first-run wizard (in a terminal), or the same with flags.

Interactive: provider, key or local server URL, a model picked from the server's `/models`, a
test request, code mode on or off; then `nodmix.json` is written (validated, atomically, 0600).
`--non-interactive` takes every answer as a flag, for scripts and provisioning.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from nodmix.cli.common import common_parent

if TYPE_CHECKING:
    from nodmix.cli.onboarding import Answers


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `onboard` command."""
    p = sub.add_parser(
        "onboard",
        parents=[common_parent()],
        help="first-run wizard: pick a model provider and model, write nodmix.json",
        description=(
            "Ask for a model provider, its API key or local server URL, a model (from the "
            "server's model list), send it a test request, ask about code mode, and write "
            "nodmix.json. Settings it does not ask about are kept. With --non-interactive, "
            "the answers come from the flags."
        ),
    )
    p.add_argument("--non-interactive", action="store_true", help="take answers from flags")
    p.add_argument("--provider", help="openai | anthropic | openrouter | local")
    p.add_argument("--base-url", help="the local server's URL (e.g. http://127.0.0.1:11434/v1)")
    p.add_argument("--api-key", help="an API key, or ${ENV_VAR} to read it from the environment")
    p.add_argument("--model", help="model id (default: the first the server lists)")
    p.add_argument("--code-mode", choices=("on", "off"), default=None, help="default off")
    p.add_argument(
        "--channel", choices=("telegram",), help="also add a chat channel (token from the env)"
    )
    p.add_argument(
        "--owner-id",
        help="your sender id on --channel (channels.<id>.ownerIds); without it, pair later "
        "with `pairing approve <channel> <code> --owner`",
    )
    p.add_argument("--skip-test", action="store_true", help="do not send the test request")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from nodmix.config import paths
    from nodmix.errors import NodmixError

    path = paths.config_path()
    if args.non_interactive:
        answers = _from_flags(args)
    elif not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise NodmixError(
            "onboard asks questions in a terminal; without one, pass --non-interactive with "
            "--provider and --model (and --base-url or --api-key)"
        )
    else:
        from nodmix.cli.onboard_prompts import ask

        asked = ask(path, os.environ)
        if asked is None:
            print("nothing written")
            return 1
        answers = asked
    if not args.skip_test and args.non_interactive:
        _test_or_fail(answers)
    _write(path, answers)
    return 0


def _from_flags(args: argparse.Namespace) -> Answers:
    from nodmix.cli.onboarding import (
        LOCAL_PROVIDER,
        Answers,
        candidate_router,
        channels_supported,
        provider_choice,
    )
    from nodmix.config.loader import is_http_url
    from nodmix.errors import NodmixError
    from nodmix.providers.probe import list_models

    if not args.provider:
        raise NodmixError("--non-interactive needs --provider (openai|anthropic|openrouter|local)")
    try:
        choice = provider_choice(args.provider)
    except ValueError as exc:
        raise NodmixError(f"--provider: {exc}") from None
    if args.channel and not channels_supported():
        raise NodmixError("--channel: this build of Nodmix has no chat channels")
    base_url = args.base_url or choice.default_url
    if args.base_url and not is_http_url(args.base_url):
        raise NodmixError(f"--base-url: expected an http:// or https:// URL, got {args.base_url!r}")
    if choice.id == LOCAL_PROVIDER and not base_url:
        raise NodmixError("--provider local needs --base-url")
    answers = Answers(
        provider=choice.id,
        model=args.model or "",
        api_key=args.api_key,
        base_url=base_url if choice.id == LOCAL_PROVIDER else args.base_url,
        code_mode=args.code_mode == "on",
        channel=args.channel,
        owner_id=args.owner_id.strip() if args.channel and args.owner_id else None,
    )
    if answers.model:
        return answers
    router = candidate_router(answers, os.environ)
    models = list_models(router, choice.id)
    if not models:
        raise NodmixError(f"{choice.id} lists no models; pass --model")
    print(f"model: {models[0]} (the first of {len(models)} listed; --model picks another)")
    return Answers(**{**_fields(answers), "model": models[0]})


def _fields(answers: Answers) -> dict[str, Any]:
    return {k: getattr(answers, k) for k in answers.__slots__}


def _test_or_fail(answers: Answers) -> None:
    from nodmix.cli.onboarding import test_model
    from nodmix.errors import NodmixError

    ok, line = test_model(answers)
    print(line)
    if not ok:
        raise NodmixError(f"{answers.model_ref} did not answer; nothing written (--skip-test)")


def _write(path: Any, answers: Answers) -> None:
    from nodmix.cli.onboarding import apply
    from nodmix.config.edit import write_document
    from nodmix.config.loader import load_config
    from nodmix.invocation import command

    loaded = load_config()
    write_document(path, apply(loaded.raw, answers))
    print(f"wrote {path}")
    print(f"  model:     {answers.model_ref}")
    print(f"  code mode: {'on' if answers.code_mode else 'off'}")
    if answers.channel:
        from nodmix.cli.onboarding import CHANNELS

        variable = CHANNELS[answers.channel]
        print(f"  channel:   {answers.channel} (the gateway reads its token from {variable})")
        if not os.environ.get(variable):
            print(f"  set {variable} in the gateway's environment before starting it")
        if answers.owner_id:
            print(f"  owner:     {answers.owner_id} (channels.{answers.channel}.ownerIds)")
        else:
            print(
                "  owner:     not set yet: message the bot, then approve the code it answers "
                f"with: {command(f'pairing approve {answers.channel} <CODE> --owner')}"
            )
        from nodmix.extras import hint, installed, part

        if not installed(part(answers.channel)):
            print(f"  {hint(part(answers.channel))}")
    print(f"next: {command('agent -m hello')}  or  {command('gateway')}")
