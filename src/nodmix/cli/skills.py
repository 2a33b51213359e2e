"""`nodmix skills list|info|check|install|remove`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from nodmix.cli.common import common_parent, print_json
from nodmix.invocation import nodmix_command

if TYPE_CHECKING:
    from nodmix.skills import SkillReview


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `skills` command group."""
    parser = sub.add_parser("skills", help="list, check, install and remove skills")
    cmds = parser.add_subparsers(dest="skills_command", metavar="ACTION", required=True)
    parent = common_parent()
    agent = argparse.ArgumentParser(add_help=False)
    agent.add_argument("--agent", help="judge skills for this agent (default: main)")
    p = cmds.add_parser("list", parents=[parent, agent], help="skills found and whether offered")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)
    p = cmds.add_parser("info", parents=[parent, agent], help="one skill in detail")
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_info)
    p = cmds.add_parser(
        "check", parents=[parent, agent], help="why skills are not offered; broken SKILL.md files"
    )
    p.set_defaults(handler=_check)
    p = cmds.add_parser(
        "install", parents=[parent], help="install a skill folder or .zip/.tar.gz archive"
    )
    p.add_argument("source", metavar="PATH_OR_ARCHIVE")
    p.add_argument("--force", action="store_true", help="replace an installed skill of that name")
    p.set_defaults(handler=_install)
    p = cmds.add_parser("remove", parents=[parent], help="remove an installed skill")
    p.add_argument("name")
    p.set_defaults(handler=_remove)


def _review(args: argparse.Namespace) -> SkillReview:
    import os

    from nodmix.agents import resolve_agent
    from nodmix.config import paths
    from nodmix.config.loader import load_config
    from nodmix.skills import SkillBook, SkillScanner

    loaded = load_config()
    agent = resolve_agent(loaded.config, args.agent or paths.DEFAULT_AGENT_ID)
    # Broken SKILL.md files are reported by the commands themselves, not as log warnings.
    book = SkillBook(state_dir=paths.state_dir(), scanner=SkillScanner(warn=lambda _: None))
    return book.review(
        loaded.config,
        raw_config=loaded.raw,
        config_dir=loaded.path.parent,
        agent_id=agent.id,
        workspace=agent.workspace,
        env=os.environ,
    )


def _list(args: argparse.Namespace) -> int:
    from nodmix.skills.prompt import short_description

    review = _review(args)
    if args.json:
        print_json([s.to_json() for s in review.statuses])
        return 0
    if not review.statuses:
        print("no skills found")
    for status in review.statuses:
        skill = status.skill
        state = "ready" if status.eligible else "blocked"
        print(
            f"{skill.name:<24} {state:<8} {skill.source:<9} {short_description(skill.description)}"
        )
    blocked = sum(1 for s in review.statuses if not s.eligible)
    if blocked or review.problems:
        check = f"{nodmix_command()} skills check"
        print(f"\n{blocked} blocked, {len(review.problems)} broken: see `{check}`")
    return 0


def _info(args: argparse.Namespace) -> int:
    from nodmix.errors import SkillError

    review = _review(args)
    status = review.find(args.name)
    if status is None:
        # A SKILL.md that cannot be parsed has no name: its folder's name stands for it.
        marker = f"/{args.name}/SKILL.md:"
        broken = next((p for p in review.problems if marker in p.replace("\\", "/")), None)
        if broken is not None:
            raise SkillError(f"skill {args.name!r} is broken: {broken}")
        known = ", ".join(s.skill.name for s in review.statuses) or "none"
        raise SkillError(f"no skill named {args.name!r} (found: {known})")
    data = status.to_json()
    if args.json:
        print_json(data)
        return 0
    print(f"{data['name']}: {data['description']}")
    print(f"  path:     {data['path']}")
    print(f"  source:   {data['source']}")
    print(f"  offered:  {'yes' if status.eligible else 'no'}")
    for reason in status.reasons:
        print(f"    - {reason}")
    req = status.skill.requires
    for label, values in (
        ("bins", req.bins),
        ("anyBins", req.any_bins),
        ("env", req.env),
        ("config", req.config),
        ("os", req.os),
        ("tools", req.tools),
    ):
        if values:
            print(f"  requires {label}: {', '.join(values)}")
    for folder in status.overrides:
        print(f"  overrides: {folder}")
    return 0


def _check(args: argparse.Namespace) -> int:
    review = _review(args)
    ready = [s for s in review.statuses if s.eligible]
    blocked = [s for s in review.statuses if not s.eligible]
    for status in blocked:
        print(f"{status.skill.name}: not offered ({status.skill.file})")
        for reason in status.reasons:
            print(f"  - {reason}")
    for problem in review.problems:
        print(problem)
    for name in _unknown_allowlisted(args, review):
        print(f"{name}: named in the agent's skills allowlist, but no skill has that name")
    print(f"{len(ready)} ready, {len(blocked)} blocked, {len(review.problems)} broken")
    return 1 if review.problems else 0


def _unknown_allowlisted(args: argparse.Namespace, review: SkillReview) -> list[str]:
    """Names in `agents.list[].skills` that no skill found has (a typo offers nothing)."""
    from nodmix.config import paths
    from nodmix.config.loader import load_config

    agent_id = args.agent or paths.DEFAULT_AGENT_ID
    entry = next((a for a in load_config().config.agents.entries if a.id == agent_id), None)
    found = {status.skill.name for status in review.statuses}
    return [name for name in (entry.skills or []) if name not in found] if entry else []


def _install(args: argparse.Namespace) -> int:
    from nodmix.config import paths
    from nodmix.skills import managed_dir
    from nodmix.skills.install import install_skill

    skill = install_skill(
        Path(args.source).expanduser(), managed_dir(paths.state_dir()), force=args.force
    )
    print(f"installed skill {skill.name!r} in {skill.folder}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from nodmix.config import paths
    from nodmix.errors import SkillError
    from nodmix.skills import managed_dir
    from nodmix.skills.install import remove_skill

    try:
        folder = remove_skill(args.name, managed_dir(paths.state_dir()))
    except SkillError as exc:
        # A skill found elsewhere (bundled, a workspace folder) is not ours to delete: say where.
        status = _review(argparse.Namespace(agent=None)).find(args.name)
        if status is None or status.skill.source == "managed":
            raise
        where = {"bundled": "is bundled with Nodmix", "extra": "is in skills.load.extraDirs"}
        raise SkillError(
            f"{exc}; {args.name!r} {where.get(status.skill.source, 'is in the workspace')}"
            f" ({status.skill.folder}): `remove` only deletes installed skills; turn it off"
            f" with skills.entries.{args.name}.enabled: false"
        ) from None
    print(f"removed skill {args.name!r} ({folder})")
    return 0
