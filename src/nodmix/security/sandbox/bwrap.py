"""Running a sandboxed session's commands under bubblewrap.

The command sees a fresh root: the system directories read-only (`/usr`, `/bin`, `/lib*` and a
short list of `/etc` entries programs need), its own `/proc`, `/dev` and `/tmp`, and the agent
workspace read-write at its real path. Nothing else exists in it: not the home directory, not
the state dir, not other workspaces. It gets new user, PID, IPC, UTS, cgroup and (unless
`sandbox.network` is true) network namespaces, no capabilities, a scrubbed environment and
rlimits on CPU time, address space and file size. bubblewrap's init is PID 1 of the namespace:
when the command exits, everything it left running in the background is killed with it.

If bubblewrap is missing or cannot create its namespaces, `wrap` raises a one-line `ToolError`
saying how to fix it; a sandboxed session never runs a command outside the sandbox.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import anyio

from nodmix.errors import ToolError
from nodmix.security.sandbox.policy import SandboxSettings
from nodmix.security.workspace_guard import PROTECTED_DIRS, linked_targets
from nodmix.tools.isolation import Launch

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What programs commonly read from /etc; everything else there (passwd, shadow, ssh, the
# gateway's own config) stays out.
_ETC_ENTRIES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "ssl/certs",  # not all of /etc/ssl: `private/` holds keys a root gateway could read
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "bash.bashrc",
    "inputrc",
)
_NETWORK_ETC = ("resolv.conf", "gai.conf", "services", "protocols")
_KEPT_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
_PROBE_TIMEOUT_SECONDS = 10.0
_FIX = 'or set agents.defaults.sandbox.mode to "off" to run this agent\'s commands unsandboxed'
_probed: set[tuple[str, bool]] = set()


def sandbox_env(host_env: Mapping[str, str], workspace: Path) -> dict[str, str]:
    """The environment a sandboxed command gets: no secrets, only locale and basics."""
    env = {k: host_env[k] for k in _KEPT_ENV if k in host_env}
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        PATH=SANDBOX_PATH,
        HOME=str(workspace),
        TMPDIR="/tmp",
        TERM="dumb",
        PAGER="cat",
        GIT_PAGER="cat",
    )
    return env


def _system_mounts(network: bool) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_LINKS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in _ETC_ENTRIES + (_NETWORK_ETC if network else ()):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def limits_script(settings: SandboxSettings, shell: str) -> str:
    """The shell commands that set the rlimits (hard and soft), failing with exit 126."""
    # bash counts `ulimit -f` in 1024-byte blocks, POSIX shells (dash) in 512-byte ones.
    block = 1024 if Path(shell).name == "bash" else 512
    memory_kib = max(settings.memory_bytes // 1024, 1)
    file_blocks = max(settings.file_size_bytes // block, 1)
    return (
        f"ulimit -t {settings.cpu_seconds} && ulimit -v {memory_kib} && "
        f"ulimit -f {file_blocks} || exit 126"
    )


def _limited(settings: SandboxSettings, command: tuple[str, ...]) -> list[str]:
    """`command` with the rlimits applied first, in the same shell when it is `sh -c TEXT`
    (one process start fewer), else through a wrapper shell that `exec`s it."""
    shell = command[0]
    limits = limits_script(settings, shell)
    if len(command) == 3 and command[1] == "-c":
        # Same line, so the command's own line numbers in error messages do not shift.
        return [shell, "-c", f"{limits}; {command[2]}"]
    return [shell, "-c", f'{limits}; exec "$@"', "sandbox", *command]


@functools.cache
def sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bubblewrap can cap a tmpfs (`--size`, since 0.8); asked once per path."""
    import subprocess

    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=_PROBE_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in done.stdout + done.stderr


def bwrap_argv(
    bwrap: str,
    settings: SandboxSettings,
    workspace: Path,
    command: tuple[str, ...],
    *,
    readonly: tuple[Path, ...] = (),
    masked: tuple[Path, ...] = (),
    keep: Path | None = None,
    empty: Path | None = None,
) -> list[str]:
    """The full bubblewrap command line that runs `command` (an argv) in the sandbox.

    `/tmp` is memory: it is capped at `fileSizeBytes` in total when bubblewrap can do it
    (`sizes_tmpfs`), so many files each under the per-file limit cannot fill the RAM.
    `readonly` paths (in the workspace, existing, not symlinks: see `readonly_paths`) are bound
    read-only over the read-write workspace; the workspace itself among them makes it all
    read-only. `masked` paths (the owner's memory, for a turn that may not read it) are shown
    empty: a file as the empty file `empty`, read-only, a folder as an empty read-only one, in
    which `keep` (the chat's own notes) is shown again, read-only."""
    args = [bwrap, "--unshare-all"]
    if settings.network:
        args.append("--share-net")
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--hostname", "sandbox"]
    args += _system_mounts(settings.network)
    args += ["--proc", "/proc", "--dev", "/dev"]
    if sizes_tmpfs(bwrap):
        args += ["--size", str(max(settings.file_size_bytes, 4096))]
    args += ["--tmpfs", "/tmp"]
    ws = str(workspace)
    args += ["--ro-bind" if workspace in readonly else "--bind", ws, ws]
    for folder in _pinned(workspace, readonly):
        args += ["--bind", str(folder), str(folder)]
    for path in readonly:
        if path != workspace:
            args += ["--ro-bind", str(path), str(path)]
    for path in masked:
        if path.is_dir():
            args += ["--tmpfs", str(path)]
            if keep is not None and keep.is_relative_to(path):
                args += ["--ro-bind", str(keep), str(keep)]
            args += ["--remount-ro", str(path)]
        elif empty is not None:
            args += ["--ro-bind", str(empty), str(path)]
    args += ["--chdir", ws, "--"]
    args += _limited(settings, command)
    return args


def _pinned(workspace: Path, readonly: tuple[Path, ...]) -> list[Path]:
    """The folders between the workspace and each read-only path, outermost first, that are
    not read-only themselves. They are bound onto themselves (still writable) so that each is
    a mount point, which cannot be renamed or removed: otherwise `mv tools old && mkdir -p
    tools/plugins/x` would put a new folder where a protected `tools/plugins/x` was."""
    found: set[Path] = set()
    for path in readonly:
        for folder in path.parents:
            if folder == workspace or not folder.is_relative_to(workspace):
                break
            if not any(_contains(ro, folder) for ro in readonly):
                found.add(folder)
    return sorted(found, key=lambda p: len(p.parts))


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or inner.is_relative_to(outer)


def readonly_paths(
    workspace: Path, names: tuple[str, ...], also: tuple[Path, ...] = ()
) -> tuple[Path, ...]:
    """The paths to bind read-only for `names` (top-level names in the resolved `workspace`,
    `""` for all of it) and `also` (files such as the config, when inside the workspace).

    A name that does not exist yet gets an empty placeholder first (a folder for
    `workspace_guard.PROTECTED_DIRS`, else an empty file, which Nodmix reads as no content),
    since a missing path could be created through the read-write workspace. Where links in
    the protected folders lead elsewhere in the workspace is held too
    (`workspace_guard.linked_targets`). A symlink cannot
    be held read-only (replacing it needs no write to its target), so it is refused, and so
    is a symlinked folder above a protected path.

    Raises:
        ToolError: a protected path is a symlink, or a protected file in `also` is missing.
    """
    found: list[Path] = []
    for name in names:
        path = workspace / name if name else workspace
        if not os.path.lexists(path):
            if name in PROTECTED_DIRS:
                path.mkdir(exist_ok=True)
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))
        found.append(_bindable(workspace, path))
    if any(name in PROTECTED_DIRS for name in names):
        for target in linked_targets(workspace):
            if not os.path.lexists(target):
                raise ToolError(
                    f"exec is sandboxed for this sender, but a link in memory/ or skills/ leads "
                    f"to {target.relative_to(workspace)}, which does not exist, so the sandbox "
                    "cannot keep it read-only; create it or remove the link."
                )
            found.append(_bindable(workspace, target))
    for extra in also:
        path = Path(os.path.abspath(extra))
        if not path.is_relative_to(workspace) and path.resolve().is_relative_to(workspace):
            path = path.resolve()  # a link from outside into the workspace: hold its target
        if path.is_relative_to(workspace):
            if not os.path.lexists(path):
                raise ToolError(
                    f"exec is sandboxed for this sender, but {path} (in the workspace) does not "
                    "exist yet, so the sandbox cannot keep it read-only; create it first or "
                    "move it out of the workspace."
                )
            found.append(_bindable(workspace, path))
    return tuple(found)


def _bindable(workspace: Path, path: Path) -> Path:
    # The folders above it too: a link there could be pointed elsewhere from the sandbox.
    for link in (path, *path.parents):
        if link == workspace or not link.is_relative_to(workspace):
            break
        if link.is_symlink():
            raise ToolError(
                f"exec is sandboxed for this sender, but {link.relative_to(workspace)} in the "
                "workspace is a symlink, which the sandbox cannot keep read-only; replace it "
                "with the file or folder itself."
            )
    return path


async def bwrap_launch(
    launch: Launch,
    settings: SandboxSettings,
    *,
    hidden: tuple[Path, ...],
    bwrap: str | None = None,
    readonly: tuple[str, ...] = (),
    also: tuple[Path, ...] = (),
    masked: tuple[Path, ...] = (),
    keep: Path | None = None,
    empty: Path | None = None,
) -> Launch:
    """The bubblewrap launch of `launch` (its cwd is taken as the workspace).

    Args:
        launch: The unsandboxed launch.
        settings: The agent's sandbox settings.
        hidden: Paths the sandbox must not show (the state dir, the home directory); a
            workspace that contains one is refused.
        bwrap: Path of the `bwrap` executable; found on PATH when None.
        readonly: Top-level workspace names the command must not change (`""`: all of it).
        also: More files it must not change when they lie in the workspace (the config).
        masked: Workspace paths the command must see empty (`memory_guard.sandbox_masks`).
        keep: A file inside a masked folder to show again (the chat's own notes).
        empty: An empty file outside the workspace, shown in place of masked files.

    Raises:
        ToolError: The sandbox cannot start, with how to fix it.
    """
    workspace = launch.cwd.resolve()
    ro = readonly_paths(workspace, readonly, also) if readonly else ()
    masked = tuple(_bindable(workspace, path) for path in masked)
    for private in hidden:
        if _contains(workspace, private.resolve()):
            raise ToolError(
                f"exec is sandboxed in this session, but the workspace {workspace} contains "
                f"{private}, which the sandbox must hide; give the agent a workspace of its "
                "own (agents.list[].workspace)."
            )
    bwrap = bwrap or shutil.which("bwrap")
    if bwrap is None or not os.access(bwrap, os.X_OK):
        raise ToolError(
            "exec is sandboxed in this session, but bubblewrap is not installed; install it "
            f"(apt-get install bubblewrap, or `make bubblewrap` in a checkout) {_FIX}."
        )
    await anyio.to_thread.run_sync(sizes_tmpfs, bwrap)  # asked once, off the event loop
    await _probe(bwrap, settings, workspace)
    argv = bwrap_argv(
        bwrap, settings, workspace, launch.argv, readonly=ro, masked=masked, keep=keep, empty=empty
    )
    return Launch(argv=tuple(argv), env=sandbox_env(launch.env, workspace), cwd=workspace)


def check_sandbox(settings: SandboxSettings, *, bwrap: str | None = None) -> str | None:
    """Start the sandbox once, blocking (for the audit); None if it works, else why not."""
    import subprocess
    import tempfile

    bwrap = bwrap or shutil.which("bwrap")
    if bwrap is None or not os.access(bwrap, os.X_OK):
        return "bubblewrap (bwrap) is not installed"
    with tempfile.TemporaryDirectory(prefix="nodmix-sandbox-check-") as tmp:
        workspace = Path(tmp).resolve()
        argv = bwrap_argv(bwrap, settings, workspace, ("/bin/sh", "-c", "true"))
        try:
            done = subprocess.run(
                argv,
                env=sandbox_env({}, workspace),
                capture_output=True,
                timeout=_PROBE_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap did not start: {exc}"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"bubblewrap exited with {done.returncode}"


async def _probe(bwrap: str, settings: SandboxSettings, workspace: Path) -> None:
    """Start the sandbox once per process (and network setting) to tell a setup failure apart
    from a command that fails; a failure is not remembered, so a fix takes effect at once."""
    key = (bwrap, settings.network)
    if key in _probed:
        return
    argv = bwrap_argv(bwrap, settings, workspace, ("/bin/sh", "-c", "true"))
    try:
        with anyio.fail_after(_PROBE_TIMEOUT_SECONDS):
            result = await anyio.run_process(argv, check=False, env=sandbox_env({}, workspace))
    except TimeoutError:
        raise ToolError(
            f"exec is sandboxed in this session, but bubblewrap did not start within "
            f"{_PROBE_TIMEOUT_SECONDS:g} s; check `{bwrap} --version` {_FIX}."
        ) from None
    except OSError as exc:
        raise ToolError(
            f"exec is sandboxed in this session, but bubblewrap cannot run ({exc}) {_FIX}."
        ) from None
    if result.returncode != 0:
        lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = lines[-1] if lines else f"exit code {result.returncode}"
        raise ToolError(
            f"exec is sandboxed in this session, but the sandbox cannot start ({reason}); "
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 "
            f"and user.max_user_namespaces > 0) {_FIX}."
        )
    _probed.add(key)
