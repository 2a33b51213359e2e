"""`nodmix gateway install|uninstall|status|restart`: the gateway as a user service."""

from __future__ import annotations

import argparse
import os
import sys

from nodmix.cli.common import common_parent, print_json


def add_parsers(
    gateway: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Add the service actions under `nodmix gateway` (plain `nodmix gateway` still serves);
    the subparsers, for more actions."""
    actions = gateway.add_subparsers(dest="service_action", metavar="[ACTION]")
    parent = common_parent()
    p = actions.add_parser(
        "install",
        parents=[parent],
        help="run the gateway as a user service (systemd; launchd on macOS)",
        description=(
            "Write ~/.config/systemd/user/nodmix-gateway.service (on macOS a LaunchAgent) that "
            "runs this installation's gateway, and enable and start it, so the gateway "
            "survives logout (with lingering) and reboot."
        ),
    )
    p.add_argument("--port", type=int, help="the service's port (default: config or 18789)")
    p.add_argument("--bind", metavar="loopback|lan|ADDRESS", help="where the service listens")
    p.set_defaults(handler=_install)
    for name, text in (
        ("uninstall", "stop and remove the user service"),
        ("restart", "restart the user service"),
        ("status", "the user service and whether the gateway answers"),
    ):
        p = actions.add_parser(name, parents=[parent], help=text)
        if name == "status":
            p.add_argument("--json", action="store_true")
        p.set_defaults(
            handler={"uninstall": _uninstall, "restart": _restart, "status": _status}[name]
        )
    return actions


def _install(args: argparse.Namespace) -> int:
    from nodmix.config import paths
    from nodmix.service import service_manager
    from nodmix.service.manager import shown
    from nodmix.service.units import gateway_spec

    manager = service_manager()
    extra = [
        *(["--port", str(args.port)] if args.port else []),
        *(["--bind", args.bind] if args.bind else []),
    ]
    log_file = paths.state_dir() / "logs" / "gateway.out"
    spec = gateway_spec(sys.executable, extra, os.environ, log_file=log_file)
    path = manager.write(spec)
    print(f"wrote {path}")
    commands = manager.commands("install")
    if not manager.available:
        print(f"{manager.kind} is not running on this machine, so the service was not started.")
        print(f"where it runs, enable it with: {shown(commands)}")
        if manager.kind == "systemd":
            print(f"to keep it running after logout: loginctl enable-linger {_user()}")
        return 0
    manager.run("install")
    print(f"enabled and started: {shown(commands)}")
    if manager.kind == "systemd":
        print(f"to keep it running after logout: loginctl enable-linger {_user()}")
    return 0


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except OSError:
        return "$USER"


def _uninstall(args: argparse.Namespace) -> int:
    from nodmix.service import service_manager
    from nodmix.service.manager import shown

    manager = service_manager()
    if not manager.path.exists():
        print(f"no service installed ({manager.path} does not exist)")
        return 0
    if manager.available:
        manager.run("uninstall", check=False)  # already stopped or disabled is fine
    manager.path.unlink()
    print(f"removed {manager.path}")
    if not manager.available:
        print(f"(where {manager.kind} runs, also: {shown(manager.commands('uninstall'))})")
    return 0


def _restart(args: argparse.Namespace) -> int:
    from nodmix.errors import NodmixError
    from nodmix.service import service_manager

    manager = service_manager()
    if not manager.path.exists():
        raise NodmixError("the gateway service is not installed; run `gateway install` first")
    if not manager.available:
        raise NodmixError(
            f"{manager.kind} is not running on this machine; restart a foreground gateway "
            "with Ctrl-C and `nodmix gateway`"
        )
    manager.run("restart")
    print("gateway service restarted")
    return 0


def _status(args: argparse.Namespace) -> int:
    from nodmix.cli.status_report import gateway_status
    from nodmix.config import paths
    from nodmix.config.loader import load_config
    from nodmix.service import service_manager

    manager = service_manager()
    installed = manager.path.exists()
    active: str | None = None
    if installed and manager.available:
        [result] = manager.run("status", check=False)
        active = (result.stdout.strip().splitlines() or ["unknown"])[0]
        if manager.kind == "launchd":
            active = "loaded" if result.returncode == 0 else "not loaded"
    gateway = gateway_status(paths.state_dir(), load_config(), None)
    report = {
        "manager": manager.kind,
        "managerRunning": manager.available,
        "unit": str(manager.path),
        "installed": installed,
        "active": active,
        "gateway": gateway,
    }
    if args.json:
        print_json(report)
        return 0
    state = "installed" if installed else "not installed"
    print(f"service:  {state} ({manager.path})")
    if not manager.available:
        print(f"manager:  {manager.kind} is not running on this machine")
    elif installed:
        print(f"manager:  {manager.kind}: {active}")
    answer = f"answering at {gateway['url']}" if gateway["running"] else "not answering"
    print(f"gateway:  {answer}")
    return 0
