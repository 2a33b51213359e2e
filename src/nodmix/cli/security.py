"""`nodmix security audit`: list risky settings in the config and state dir, each with its fix."""

from __future__ import annotations

import argparse

from nodmix.cli.common import common_parent, print_json, show_help_without_action


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `nodmix security audit`."""
    parser = sub.add_parser(
        "security",
        parents=[common_parent()],
        help="check this installation for risky settings",
        description="Security checks of the config and the state dir.",
    )
    actions = parser.add_subparsers(dest="security_command", metavar="ACTION")
    audit = actions.add_parser(
        "audit",
        parents=[common_parent()],
        help="list what is risky and how to fix it (exit 1 on a high-severity finding)",
        description=(
            "Reads nodmix.json and the state dir (nothing is changed) and lists risky settings: "
            "a gateway reachable without a token, short tokens, state other users can read, "
            "plugins loaded from writable paths, exec without a sandbox in non-main sessions, "
            "channels open to anyone. Exits 1 when a high-severity finding exists."
        ),
    )
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.set_defaults(handler=_audit)
    show_help_without_action(parser)


def _audit(args: argparse.Namespace) -> int:
    from nodmix.cli.common import channel_checks
    from nodmix.config import paths
    from nodmix.config.loader import load_config
    from nodmix.security.audit import run_audit

    loaded = load_config()
    report = run_audit(
        loaded.config,
        config_path=loaded.path,
        state_dir=paths.state_dir(),
        extra=channel_checks(loaded.config),
    )
    if args.json:
        print_json(report.to_json())
    else:
        print(report.render())
    return 1 if report.failed else 0
