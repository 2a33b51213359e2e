"""`nodmix completion bash|zsh|fish`: shell completion generated from the argument parser.

bash and zsh scripts come from `shtab`; fish's are written here from the same parser (commands,
their actions and options), since shtab does not produce fish.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from nodmix.cli.common import common_parent

SHELLS = ("bash", "zsh", "fish")


def install_path(shell: str, env: Mapping[str, str], home: Path) -> Path:
    """Where `--install` writes a shell's script: the folder each shell loads per user (zsh
    has none: `~/.zfunc`, which `.zshrc` adds to `fpath`)."""
    data = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    return {
        "bash": data / "bash-completion" / "completions" / "nodmix",
        "zsh": home / ".zfunc" / "_nodmix",
        "fish": config / "fish" / "completions" / "nodmix.fish",
    }[shell]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `completion` command."""
    p = sub.add_parser(
        "completion",
        parents=[common_parent()],
        help="print a shell completion script (bash, zsh, fish)",
        description=(
            "Print the completion script for a shell, or with --install write it where the "
            "shell loads it for this user (creating the folder): bash "
            "~/.local/share/bash-completion/completions/nodmix, zsh ~/.zfunc/_nodmix (add "
            "`fpath=(~/.zfunc $fpath)` before `compinit` in ~/.zshrc), fish "
            "~/.config/fish/completions/nodmix.fish."
        ),
    )
    p.add_argument("shell", choices=SHELLS)
    p.add_argument(
        "--install", action="store_true", help="write the script to the shell's folder for it"
    )
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from nodmix.cli.main import build_parser

    parser = build_parser()
    if args.shell == "fish":
        script = fish_script(parser)
    else:
        import shtab

        script = shtab.complete(parser, shell=args.shell)
    if not args.install:
        print(script)
        return 0
    from nodmix.assets.files import atomic_write

    path = install_path(args.shell, os.environ, Path.home())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, f"{script}\n".encode())
    print(f"wrote {path}")
    if args.shell == "zsh":
        print("add `fpath=(~/.zfunc $fpath)` before `compinit` in ~/.zshrc, then start a new shell")
    else:
        print("start a new shell to use it")
    return 0


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Subcommand name → (help, parser), in order."""
    out: dict[str, tuple[str, argparse.ArgumentParser]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out[name] = (helps.get(name, ""), sub)
    return out


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_options(parser: argparse.ArgumentParser, condition: str) -> list[str]:
    lines = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        flags = []
        for option in action.option_strings:
            if option.startswith("--"):
                flags.append(f"-l {option[2:]}")
            elif len(option) == 2:
                flags.append(f"-s {option[1]}")
        if not flags:
            continue
        takes = " -r" if action.nargs != 0 else ""
        choices = f" -a {_fish_quote(' '.join(map(str, action.choices)))}" if action.choices else ""
        help_text = f" -d {_fish_quote(action.help or '')}" if action.help else ""
        head = f"complete -c nodmix -n {_fish_quote(condition)} {' '.join(flags)}"
        lines.append(f"{head}{takes}{choices}{help_text}")
    return lines


def fish_script(parser: argparse.ArgumentParser) -> str:
    """Fish completions: commands, their actions, and every option with its help."""
    lines = ["# nodmix completions for fish (`nodmix completion fish`)", "complete -c nodmix -f"]
    lines += _fish_options(parser, "__fish_use_subcommand")
    for name, (help_text, sub) in _subcommands(parser).items():
        lines.append(
            f"complete -c nodmix -n __fish_use_subcommand -a {name} -d {_fish_quote(help_text)}"
        )
        actions = _subcommands(sub)
        if actions:
            seen = f"__fish_seen_subcommand_from {name}"
            inside = f"{seen}; and not __fish_seen_subcommand_from {' '.join(actions)}"
            for action, (action_help, action_parser) in actions.items():
                described = f"-a {action} -d {_fish_quote(action_help)}"
                lines.append(f"complete -c nodmix -n {_fish_quote(inside)} {described}")
                both = f"{seen}; and __fish_seen_subcommand_from {action}"
                lines += _fish_options(action_parser, both)
        lines += _fish_options(sub, f"__fish_seen_subcommand_from {name}")
    return "\n".join(lines)
