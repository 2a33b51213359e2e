"""`nodmix sandbox`: install and inspect the QuickJS-WASI code-mode runtime."""

from __future__ import annotations

import argparse

from nodmix.cli.common import common_parent, print_json, show_help_without_action


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `nodmix sandbox install` and `nodmix sandbox status`."""
    parser = sub.add_parser(
        "sandbox",
        parents=[common_parent()],
        help="install or inspect the code-mode JavaScript sandbox runtime",
        description="Manage the QuickJS-WASI runtime used by code mode.",
    )
    actions = parser.add_subparsers(dest="sandbox_command", metavar="ACTION")

    install = actions.add_parser(
        "install",
        parents=[common_parent()],
        help="download, verify and precompile quickjs.wasm (idempotent)",
        description=(
            "Download quickjs-wasi from the npm registry ($NODMIX_NPM_REGISTRY overrides it), "
            "verify its pinned hashes, store it in the cache directory ($NODMIX_CACHE_DIR) "
            "and precompile it."
        ),
    )
    install.add_argument(
        "--force", action="store_true", help="download again even if a verified copy exists"
    )
    install.set_defaults(handler=_install)

    status = actions.add_parser(
        "status", parents=[common_parent()], help="show whether the runtime is installed"
    )
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=_status)

    show_help_without_action(parser)


def _install(args: argparse.Namespace) -> int:
    from nodmix.sandbox import assets

    report = assets.install(force=bool(args.force))
    print(report.summary())
    return 0


def _status(args: argparse.Namespace) -> int:
    from nodmix.sandbox import assets

    report = assets.status()
    if args.json:
        print_json(report.to_dict())
    else:
        state = "installed" if report.installed else "NOT USABLE"
        print(f"quickjs-wasi {report.version}: {state}")
        print(f"  runtime:  {report.wasm_path}")
        print(f"  sha256:   {'ok' if report.sha256_ok else 'missing or mismatch'}")
        print(f"  compiled: {'cached' if report.compiled_cached else 'not cached'}")
        print(f"  status:   {report.hint}")
    return 0 if report.installed else 1
