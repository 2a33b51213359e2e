"""Google Chat attacked: forged, expired, misdirected and algorithm-swapped tokens, another
service account's ID token, huge bodies, and a certificate endpoint that is down or hangs.
Each is refused before anything reaches the agent; the channel recovers with the endpoint."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import httpx2
import pytest

from nodmix.channels import signing_keys
from nodmix.testing.googlechat_payloads import ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.signing import RsaKey
from tests.channels.support import model_user_texts
from tests.channels.webhooks import CHAT_PATH, start_chat

pytestmark = pytest.mark.integration

ANN = ChatUser("ann")


def _unsigned(header: dict[str, object], claims: dict[str, object], signature: bytes) -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return ".".join(
        (part(json.dumps(header).encode()), part(json.dumps(claims).encode()), part(signature))
    )


def _forgeries(chat: ScriptedChat) -> dict[str, str | None]:
    now = int(time.time())
    claims = {"iss": "chat@system.gserviceaccount.com", "aud": chat.project_number}
    claims |= {"iat": now, "exp": now + 600}
    return {
        "no header": None,
        "not a jwt": "garbage",
        "another key": chat.sign(key=RsaKey(chat.signer.kid)),
        "unknown key id": chat.sign(key=RsaKey("not-googles")),
        "alg none": _unsigned({"alg": "none", "kid": chat.signer.kid}, claims, b""),
        "HS256": _unsigned({"alg": "HS256", "kid": chat.signer.kid}, claims, b"\0" * 32),
        "expired": chat.sign(iat=now - 7200, exp=now - 3600),
        "issued in the future": chat.sign(iat=now + 3600, exp=now + 7200),
        "no expiry": chat.sign(exp=None),
        "another project": chat.sign(aud="999999999999"),
        "another issuer": chat.sign(iss="eve@evil-project.iam.gserviceaccount.com"),
        "huge": "x" * 20_000,
    }


def test_forged_and_misdirected_tokens_are_refused_before_the_body_is_used(
    isolated_state: Path, chat: ScriptedChat, model: ScriptedModelServer
) -> None:
    gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN.id])
    try:
        forgeries = _forgeries(chat)
        for name, token in forgeries.items():
            assert chat.post(chat.event(f"forged: {name}", user=ANN), token=token) == 401, name
        big = httpx2.post(
            gateway.url + CHAT_PATH,
            content=iter([b"{", b" " * (9 << 20), b"}"]),
            headers={"Authorization": "Bearer forged", "Content-Type": "application/json"},
            timeout=30,
        )
        assert big.status_code == 401
        chat.send("the real one", user=ANN)
        chat.wait_for(lambda: chat.texts(ANN.dm_space))
        assert model_user_texts(model) == ["the real one"]
        status = gateway.runtime.channels.statuses["googlechat"]
        assert status.reasons["invalid Google Chat token"] == len(forgeries) + 1
    finally:
        gateway.__exit__(None, None, None)


def test_with_an_endpoint_url_audience_only_chats_id_tokens_pass(
    isolated_state: Path, chat: ScriptedChat, model: ScriptedModelServer
) -> None:
    url = "https://bot.example.org/channels/googlechat/events"
    gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN.id], audience=url)
    try:
        now = int(time.time())
        google = {"iss": "https://accounts.google.com", "aud": url, "iat": now, "exp": now + 600}
        chats = google | {"email": "chat@system.gserviceaccount.com", "email_verified": True}
        eves = google | {"email": "eve@evil.iam.gserviceaccount.com", "email_verified": True}
        unverified = chats | {"email_verified": False}
        for token in (chat.sign(**eves), chat.sign(**unverified), chat.sign()):
            assert chat.post(chat.event("not chat", user=ANN), token=token) == 401
        assert chat.post(chat.event("from chat", user=ANN), token=chat.sign(**chats)) == 200
        chat.wait_for(lambda: chat.texts(ANN.dm_space))
        assert model_user_texts(model) == ["from chat"]
    finally:
        gateway.__exit__(None, None, None)


def test_a_certificate_endpoint_that_is_down_or_hangs_is_noticed_and_recovered_from(
    isolated_state: Path,
    chat: ScriptedChat,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signing_keys, "FETCH_TIMEOUT_SECONDS", 1.0)
    monkeypatch.setattr(signing_keys, "FAILED_RETRY_SECONDS", 0.2)
    gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN.id])
    try:
        status = gateway.runtime.channels.statuses["googlechat"]
        chat.certs_endpoint.mode = "down"
        assert chat.post(chat.event("while down", user=ANN)) == 503
        assert "HTTP 500" in (status.last_error or "") and not status.connected
        chat.certs_endpoint.mode = "hang"
        chat.wait_for(lambda: chat.post(chat.event("while hanging", user=ANN)) == 503
                      and "no answer within" in (status.last_error or ""))  # fmt: skip
        chat.certs_endpoint.mode = "up"
        chat.wait_for(lambda: chat.post(chat.event("back", user=ANN)) == 200)
        chat.wait_for(lambda: chat.texts(ANN.dm_space))
        assert model_user_texts(model) == ["back"] and status.connected
    finally:
        chat.certs_endpoint.mode = "up"
        gateway.__exit__(None, None, None)
