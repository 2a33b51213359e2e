"""A real XMPP server for the XMPP channel tests (Debian's Prosody on 127.0.0.1, started with
a generated config in a temp dir, a MUC component beside it, accounts made with prosodyctl),
the bot's account, config and gateway on it, and a person on XMPP (slixmpp on a loop of its
own thread) who talks to the bot."""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from tests.channels.daemon import free_port, start_daemon, stop_daemon, wait_until
from tests.channels.support import write_config

T = TypeVar("T")
PROSODY = "/usr/bin/prosody"
PROSODYCTL = "/usr/bin/prosodyctl"
DOMAIN = "localhost"
MUC = "conference.localhost"
UPLOAD = "upload.localhost"
UPLOAD_LIMIT = 10 * 1024 * 1024
BOT = f"nodbot@{DOMAIN}"
BOT_PASSWORD = "bot-secret"


class Prosody:
    """A Prosody process on 127.0.0.1:`port`; `stop()` and `start()` again keep the port and
    the accounts."""

    def __init__(
        self,
        workdir: Path,
        *,
        upload: bool = False,
        tls: tuple[Path, Path] | None = None,
        component: tuple[str, str] | None = None,
    ) -> None:
        """`tls`: (certificate, key) offered with STARTTLS (then required for logging in);
        `component`: (domain, secret) of an external component (XEP-0114) that may connect
        on `component_port`, as another server's service would be reached."""
        assert shutil.which(PROSODY), "prosody is missing: run scripts/ensure-prosody.sh"
        self.workdir = workdir
        self.port = free_port()
        self.http_port = free_port()
        self.component_port = free_port()
        self.config = workdir / "prosody.cfg.lua"
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        (workdir / "certs").mkdir(exist_ok=True)
        if tls is not None:  # found by the host's name in `certificates`
            shutil.copyfile(tls[0], workdir / "certs" / f"{DOMAIN}.crt")
            shutil.copyfile(tls[1], workdir / "certs" / f"{DOMAIN}.key")
        self.config.write_text(
            f'pidfile = "{workdir}/prosody.pid"\n'
            f'data_path = "{workdir}/data"\n'
            f'certificates = "{workdir}/certs"\n'
            "run_as_root = true\n"
            'interfaces = { "127.0.0.1" }\n'
            f"c2s_ports = {{ {self.port} }}\n"
            "c2s_direct_tls_ports = {}\ns2s_ports = {}\nhttps_ports = {}\n"
            + (
                f'http_ports = {{ {self.http_port} }}\nhttp_interfaces = {{ "127.0.0.1" }}\n'
                f'http_default_host = "{UPLOAD}"\n'
                if upload
                else "http_ports = {}\n"
            )
            + 'modules_enabled = { "roster", "saslauth", "disco", "ping", "offline"'
            + (', "tls" }\n' if tls else " }\n")
            + 'modules_disabled = { "s2s" }\n'
            f"c2s_require_encryption = {'true' if tls else 'false'}\n"
            + 'authentication = "internal_hashed"\n'
            f'log = {{ warn = "{workdir}/prosody.log" }}\n'
            f"component_ports = {{ {self.component_port} }}\n"
            'component_interfaces = { "127.0.0.1" }\n'
            f'VirtualHost "{DOMAIN}"\n'
            f'Component "{MUC}" "muc"\n'
            "  restrict_room_creation = false\n"
            "  muc_room_locking = false\n"
            + (
                f'Component "{component[0]}"\n  component_secret = "{component[1]}"\n'
                if component
                else ""
            )
            + (
                f'Component "{UPLOAD}" "http_file_share"\n'
                f'  http_external_url = "http://127.0.0.1:{self.http_port}/"\n'
                f"  http_file_share_size_limit = {UPLOAD_LIMIT}\n"
                if upload
                else ""
            ),
            encoding="utf-8",
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def register(self, user: str, password: str) -> str:
        """Create an account; its bare JID."""
        subprocess.run(
            [PROSODYCTL, "--config", str(self.config), "register", user, DOMAIN, password],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return f"{user}@{DOMAIN}"

    def start(self) -> None:
        argv = [PROSODY, "-F", "--config", str(self.config)]
        log = self.workdir / "prosody.log"
        self.proc = start_daemon(argv, self.port, "prosody", log=log)

    def stop(self) -> None:
        stop_daemon(self.proc, timeout=15)
        self.proc = None


def bot_server(workdir: Path, *accounts: tuple[str, str], **options: Any) -> Prosody:
    """A started Prosody under `workdir` (`options` as for `Prosody`) with the bot's account
    and `accounts` (user, password)."""
    server = Prosody(workdir, **options)
    for user, password in (("nodbot", BOT_PASSWORD), *accounts):
        server.register(user, password)
    server.start()
    return server


def write_bot_config(state: Path, model_url: str, prosody: Prosody, **xmpp: Any) -> Path:
    """`nodmix.json` with the agent's model at `model_url` and the bot on `prosody` (plain
    TCP, no typing notices; `xmpp` adds or replaces keys of its section)."""
    section = {
        "jid": BOT,
        "password": BOT_PASSWORD,
        "server": "127.0.0.1",
        "port": prosody.port,
        "tls": "off",
        "typing": False,
        **xmpp,
    }
    return write_config(state, model_url, {"xmpp": section})


@contextlib.contextmanager
def xmpp_gateway(*, connected: bool = True) -> Iterator[BackgroundGateway]:
    """A gateway of the state dir's config in this process (no token, no model retries),
    once its bot is logged in (`connected=False`: at once)."""
    settings = GatewaySettings(port=0, token=None)
    with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
        status = gateway.runtime.channels.statuses["xmpp"]
        if connected:
            wait_until(lambda: status.connected, what="the bot logged in")
        yield gateway


class XmppPerson:
    """Someone with an XMPP client: sends direct and room messages and records what arrives
    (bodies, and which earlier message a correction replaces)."""

    def __init__(
        self,
        server: Prosody,
        user: str,
        password: str = "pw",
        *,
        ca_file: Path | None = None,
        resource: str | None = None,
    ) -> None:
        """`ca_file`: log in over STARTTLS, trusting this certificate; `resource`: bind this
        resource (the client's own choice, as any client may make it)."""
        import slixmpp

        self.jid = server.register(user, password)
        full = f"{self.jid}/{resource}" if resource else self.jid
        self.nick = user
        self.received: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

        async def make() -> Any:
            client = slixmpp.ClientXMPP(
                full,
                password,
                plugin_config={"feature_mechanisms": {"unencrypted_scram": True}},
            )
            client.enable_direct_tls = False
            client.enable_starttls = ca_file is not None
            client.enable_plaintext = ca_file is None
            if ca_file is not None:
                client.ssl_context = ssl.create_default_context(cafile=str(ca_file))
            for plugin in ("xep_0030", "xep_0045", "xep_0066", "xep_0085", "xep_0308", "xep_0363"):
                client.register_plugin(plugin)
            started = asyncio.get_running_loop().create_future()
            client.add_event_handler("session_start", lambda _e: started.set_result(None))
            client.add_event_handler("message", self._record)
            client.add_event_handler("groupchat_message", self._record_room)
            client.connect("127.0.0.1", server.port)
            await asyncio.wait_for(started, 20)
            client.send_presence()
            return client

        self.client = self._run(make())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def _record(self, msg: Any) -> None:
        if msg["type"] in ("chat", "normal") and msg["body"]:
            self._add(msg, str(msg["from"]).split("/", 1)[0])

    def _record_room(self, msg: Any) -> None:
        if msg["body"] and msg["mucnick"] != self.nick:
            self._add(msg, str(msg["from"]))

    def _add(self, msg: Any, sender: str) -> None:
        entry = {
            "from": sender,
            "body": str(msg["body"]),
            "oob": str(msg["oob"]["url"]),
            "id": str(msg["id"]),
            "replaces": str(msg["replace"]["id"]),
            "type": str(msg["type"]),
        }
        with self._lock:
            self.received.append(entry)

    def say(self, to: str, text: str, *, room: bool = False) -> None:
        def send() -> None:
            self.client.send_message(mto=to, mbody=text, mtype="groupchat" if room else "chat")

        self._loop.call_soon_threadsafe(send)

    def send_file(self, to: str, name: str, data: bytes, *, room: bool = False) -> str:
        """Share a file as clients do: upload it (XEP-0363), send its link as out-of-band
        data (XEP-0066); the link."""

        async def share() -> str:
            upload = self.client.plugin["xep_0363"]
            url = str(await upload.upload_file(name, size=len(data), input_file=io.BytesIO(data)))
            msg = self.client.make_message(mto=to, mbody=url, mtype="groupchat" if room else "chat")
            msg["oob"]["url"] = url
            msg.send()
            return url

        return str(self._run(share()))

    def links(self) -> list[str]:
        """Out-of-band links received."""
        with self._lock:
            return [e["oob"] for e in self.received if e["oob"]]

    def join(self, room: str) -> None:
        muc = self.client.plugin["xep_0045"]
        self._run(muc.join_muc_wait(room, self.nick, maxstanzas=0, timeout=20))

    def occupants(self, room: str) -> list[str]:
        return list(self.client.plugin["xep_0045"].get_roster(room) or [])

    def texts(self, sender: str | None = None) -> list[str]:
        """Bodies received (from a bare JID or `room/nick`), corrections applied in place."""
        with self._lock:
            entries = [e for e in self.received if sender is None or e["from"] == sender]
        shown: dict[str, str] = {}
        order: list[str] = []
        for entry in entries:
            if entry["replaces"] and entry["replaces"] in shown:
                shown[entry["replaces"]] = entry["body"]
                continue
            key = entry["id"] or str(len(order))
            shown[key] = entry["body"]
            order.append(key)
        return [shown[k] for k in order]

    def corrections(self) -> int:
        with self._lock:
            return sum(1 for e in self.received if e["replaces"])

    def wait_for(self, check: Callable[[], T], *, timeout: float = 30.0, what: str = "") -> T:
        return wait_until(check, timeout=timeout, what=what or "xmpp condition")

    def close(self) -> None:
        async def leave() -> None:
            try:
                await asyncio.wait_for(self.client.disconnect(wait=1.0), 3)
            except Exception:
                self.client.abort()
            current = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            self._run(leave())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
