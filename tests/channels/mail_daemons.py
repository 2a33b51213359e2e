"""Real mail servers for the email channel tests: Debian's dovecot-imapd on a loopback port
(generated config, a passwd-file user, a temp maildir; run as the current user, or with
dovecot's own unprivileged users when the tests run as root) and aiosmtpd recording what the
agent sends."""

from __future__ import annotations

import datetime
import email
import email.policy
import imaplib
import ipaddress
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.channels.irc_daemon import free_port, wait_until

DOVECOT = "/usr/sbin/dovecot"
USER = "agent@nodmix.test"
PASSWORD = "mailbox-secret"


class Dovecot:
    """One IMAP mailbox (`USER`) served on 127.0.0.1:`port`."""

    def __init__(self, *, tls: bool = False) -> None:
        """With `tls`, also IMAP over TLS on `tls_port`, with a certificate for 127.0.0.1
        that `ca_file` (a self-signed one) vouches for."""
        assert os.path.exists(DOVECOT), "dovecot is missing: run scripts/ensure-mail-irc-daemons.sh"
        # Not under pytest's tmp_path: dovecot's unprivileged processes must reach it.
        self.root = Path(tempfile.mkdtemp(prefix="nodmix-dovecot-"))
        self.root.chmod(0o755)
        self.port = free_port()
        self.tls_port = free_port() if tls else 0
        self.ca_file = self.root / "cert.pem"
        ssl_lines = "ssl = no"
        if tls:
            key = self.root / "key.pem"
            _self_signed(self.ca_file, key)
            ssl_lines = f"ssl = yes\nssl_cert = <{self.ca_file}\nssl_key = <{key}"
        home = self.root / "home"
        home.mkdir()
        if os.getuid() == 0:
            login, internal = "dovenull", "dovecot"
            mail_user = pwd.getpwnam("dovecot")
            os.chown(home, mail_user.pw_uid, mail_user.pw_gid)
        else:
            login = internal = pwd.getpwuid(os.getuid()).pw_name
            mail_user = pwd.getpwuid(os.getuid())
        passwd = self.root / "passwd"
        passwd.write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n", encoding="utf-8")
        passwd.chmod(0o644)
        self.config = self.root / "dovecot.conf"
        self.config.write_text(
            f"""base_dir = {self.root}/run
state_dir = {self.root}/state
instance_name = nodmix-test-{self.port}
protocols = imap
listen = 127.0.0.1
{ssl_lines}
disable_plaintext_auth = no
auth_mechanisms = plain login
log_path = {self.root}/dovecot.log
default_internal_user = {internal}
default_login_user = {login}
first_valid_uid = 1
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {passwd}
}}
userdb {{
  driver = static
  args = uid={mail_user.pw_uid} gid={mail_user.pw_gid} home={home}/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
service stats {{
  inet_listener http {{
    port = 0
  }}
}}
""",
            encoding="utf-8",
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        for name in ("run", "state"):
            (self.root / name).mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so `stop` reaches every process
        )
        wait_until(self._answers, timeout=30, what="dovecot answering")

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"dovecot exited: {self.log()}")
        try:
            with imaplib.IMAP4("127.0.0.1", self.port, timeout=5) as imap:
                imap.login(USER, PASSWORD)
                imap.select("INBOX")
            return True
        except (OSError, imaplib.IMAP4.error):
            return False

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def deliver(self, mail: EmailMessage | bytes) -> None:
        """Put a message into the INBOX (as a delivery agent would)."""
        data = mail if isinstance(mail, bytes) else mail.as_bytes()
        with imaplib.IMAP4("127.0.0.1", self.port, timeout=10) as imap:
            imap.login(USER, PASSWORD)
            status, detail = imap.append("INBOX", None, None, data)
            assert status == "OK", detail

    def rebuild_uids(self) -> None:
        """Forget the mailbox's UID list and indexes (stopped server): the next start gives the
        INBOX a new UIDVALIDITY, as a restored or migrated mailbox would have. The
        `dovecot-uidvalidity` counter stays: from it dovecot picks a value above the old one
        even within the same second (from the clock alone it could pick the same one)."""
        for path in (self.root / "home").rglob("dovecot*"):
            if path.is_file() and not path.name.startswith("dovecot-uidvalidity"):
                path.unlink()

    def stop(self) -> None:
        """Stop the whole server the way a service manager stops its unit: SIGTERM to every
        process at once. (Signalling only the master leaves each logged-in imap process
        holding its client's connection for ~10 s more, still answering commands.)"""
        if self.proc is not None and self.proc.poll() is None:
            group = self.proc.pid  # the session leader: the group has its id
            _signal_group(group, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
                wait_until(lambda: not _group_alive(group), timeout=10, what="dovecot stopped")
            except (subprocess.TimeoutExpired, TimeoutError):
                _signal_group(group, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _self_signed(cert: Path, key: Path) -> None:
    """A key and a self-signed certificate for 127.0.0.1, as PEM files."""
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    issued = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(issued.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o644)  # dovecot's master reads it, whichever user it runs as


def _signal_group(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


class _Recorder:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        mail = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(mail, EmailMessage)
        with self.lock:
            self.messages.append(mail)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"


class SmtpRecorder:
    """An aiosmtpd server on 127.0.0.1 keeping every message it is given."""

    def __init__(self) -> None:
        self._handler = _Recorder()
        self.port = free_port()
        self._controller = Controller(self._handler, hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> SmtpRecorder:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()

    def sent(self, to: str | None = None) -> list[EmailMessage]:
        with self._handler.lock:
            return [m for m in self._handler.messages if to is None or str(m["To"]).lower() == to]

    def texts(self, to: str | None = None) -> list[str]:
        out = []
        for mail in self.sent(to):
            body = mail.get_body(preferencelist=("plain",))
            out.append(
                body.get_content().replace("\r\n", "\n").strip()
                if isinstance(body, EmailMessage)
                else ""
            )
        return out
