"""Teams file links that point into the gateway's own network: a file's download URL on a
private address the bot does not know as a Bot Connector (what a replayed token with a body
of one's own could post), directly or behind a redirect. The bot never fetches it; the
message is still answered, with a note that the file could not be saved."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser, file_attachment
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.support import model_user_texts
from tests.channels.webhooks import start_teams

pytestmark = pytest.mark.integration

ANN = TeamsUser("ann")


class _Internal(BaseHTTPRequestHandler):
    """A service on another loopback address (127.0.0.2): a secret, or a redirect to it."""

    hits: list[str] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        if self.path.startswith("/hop"):
            self.send_response(302)
            self.send_header("Location", "/secret")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"internal secret"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def internal() -> Iterator[ThreadingHTTPServer]:
    _Internal.hits = []
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Internal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_file_link_to_a_private_address_is_never_fetched(
    isolated_state: Path, model: ScriptedModelServer, internal: ThreadingHTTPServer
) -> None:
    base = f"http://127.0.0.2:{internal.server_address[1]}"
    with ScriptedTeams() as teams:
        gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad])
        try:
            for path in ("/secret", "/hop"):
                note = file_attachment("notes.txt", base + path)
                teams.send(f"read {path}", user=ANN, attachments=[note])
            teams.wait_for(lambda: len(teams.texts(ANN.personal_conversation)) == 2)
        finally:
            gateway.__exit__(None, None, None)
    assert _Internal.hits == []
    texts = model_user_texts(model)
    assert all("could not be saved" in t and "private address" in t for t in texts), texts
    inbox = isolated_state / "workspace" / "inbox"
    assert not inbox.exists() or not any(
        p.read_bytes() == b"internal secret" for p in inbox.iterdir()
    )
