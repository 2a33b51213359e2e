"""Teams attacked: forged, expired, misdirected and algorithm-swapped tokens, activities that
do not match their token, other tenants, huge bodies, and a key endpoint that is down or
hangs. Each is refused before anything reaches the agent; the channel recovers when the key
endpoint does."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from nodmix.channels import signing_keys
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from nodmix.testing.signing import RsaKey
from tests.channels.webhooks import TEAMS_PATH, start_teams

pytestmark = pytest.mark.integration

ANN = TeamsUser("ann")


def _forgeries(teams: ScriptedTeams) -> dict[str, str | None]:
    now = int(time.time())
    other = RsaKey(teams.key.kid)  # the right key id, another key
    public_pem = teams.key.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims = {"iss": "https://api.botframework.com", "aud": teams.app_id, "exp": now + 600}
    claims["serviceurl"] = teams.service_url
    return {
        "no header": None,
        "not a jwt": "not.a.token",
        "another key": teams.sign(key=other),
        "unknown key id": teams.sign(key=RsaKey("rotated-away")),
        "alg none": jwt.encode(claims, None, algorithm="none", headers={"kid": teams.key.kid}),
        "HS256 with the public key": _hs256(claims, public_pem, teams.key.kid),
        "expired": teams.sign(exp=now - 3600, nbf=now - 7200, iat=now - 7200),
        "not yet valid": teams.sign(nbf=now + 3600, iat=now + 3600),
        "no expiry": teams.sign(exp=None),
        "another bot": teams.sign(aud="11111111-2222-3333-4444-555555555555"),
        "another issuer": teams.sign(iss="https://sts.windows.net/evil/"),
        "no service URL": teams.sign(serviceurl=None),
        "huge": "x" * 20_000,
    }


def _hs256(claims: dict[str, object], secret: bytes, kid: str) -> str:
    import base64
    import hashlib
    import hmac
    import json

    def part(data: dict[str, object]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    head = part({"alg": "HS256", "typ": "JWT", "kid": kid}) + "." + part(claims)
    mac = hmac.new(secret, head.encode(), hashlib.sha256).digest()
    return head + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def test_forged_and_misdirected_tokens_are_refused_before_the_body_is_used(
    isolated_state: Path, teams: ScriptedTeams, model: ScriptedModelServer
) -> None:
    gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad])
    try:
        forgeries = _forgeries(teams)
        for name, token in forgeries.items():
            activity = teams.activity(f"forged: {name}", user=ANN)
            assert teams.post(activity, token=token) == 401, name
        # Invented key ids do not make the gateway hammer the key endpoint.
        fetched = teams.keys_endpoint.served
        invented = [teams.sign(key=RsaKey(f"invented-{i}")) for i in range(2)]
        for i in range(30):
            flood = teams.activity("kid flood", user=ANN)
            assert teams.post(flood, token=invented[i % 2]) == 401
        assert teams.keys_endpoint.served == fetched
        # A valid token, but the activity names another service URL or channel.
        moved = teams.activity("moved", user=ANN) | {"serviceUrl": "https://evil.example/t/"}
        assert teams.post(moved) == 401
        skype = teams.activity("skype", user=ANN) | {"channelId": "skype"}
        assert teams.post(skype) == 401
        elsewhere = teams.sign(serviceurl="https://evil.example/teams/")
        assert teams.post(teams.activity("elsewhere", user=ANN), token=elsewhere) == 401
        # A body past the gateway's limit (sent without a length) behind a forged token is
        # refused on its headers.
        big = httpx2.post(
            gateway.url + TEAMS_PATH,
            content=iter([b"{", b" " * (9 << 20), b"}"]),
            headers={"Authorization": "Bearer forged", "Content-Type": "application/json"},
            timeout=30,
        )
        assert big.status_code == 401
        teams.send("the real one", user=ANN)
        teams.wait_for(lambda: teams.texts(ANN.personal_conversation))
        assert teams.texts(ANN.personal_conversation) == ["the real one"]
        assert _user_texts(model) == ["the real one"]
        status = gateway.runtime.channels.statuses["msteams"]
        assert status.reasons["invalid Bot Framework token"] == len(forgeries) + 31
        assert status.reasons["activity does not match its token"] == 3
    finally:
        gateway.__exit__(None, None, None)


def test_a_valid_token_with_a_huge_body_is_refused_by_the_body_limit(
    isolated_state: Path, teams: ScriptedTeams, model: ScriptedModelServer
) -> None:
    gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad])
    try:
        big = httpx2.post(
            gateway.url + TEAMS_PATH,
            content=b'{"type": "message", "text": "' + b"a" * (9 << 20) + b'"}',
            headers={"Authorization": f"Bearer {teams.sign()}"},
            timeout=30,
        )
        assert big.status_code == 413 and model.requests == []
    finally:
        gateway.__exit__(None, None, None)


def test_activities_from_another_tenant_are_refused_for_a_single_tenant_bot(
    isolated_state: Path, teams: ScriptedTeams, model: ScriptedModelServer
) -> None:
    gateway = start_teams(isolated_state, model, teams, allowFrom=["*"], tenantId="tenant-home")
    try:
        assert teams.post(teams.activity("from tenant-1", user=ANN)) == 403
        assert model.requests == []
        status = gateway.runtime.channels.statuses["msteams"]
        assert status.reasons["activity from another tenant"] == 1
    finally:
        gateway.__exit__(None, None, None)


def test_a_key_endpoint_that_is_down_or_hangs_is_noticed_and_recovered_from(
    isolated_state: Path,
    teams: ScriptedTeams,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signing_keys, "FETCH_TIMEOUT_SECONDS", 1.0)
    monkeypatch.setattr(signing_keys, "FAILED_RETRY_SECONDS", 0.2)
    gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad])
    try:
        status = gateway.runtime.channels.statuses["msteams"]
        teams.keys_endpoint.mode = "down"
        assert teams.post(teams.activity("while down", user=ANN)) == 503
        assert "HTTP 500" in (status.last_error or "") and not status.connected
        teams.keys_endpoint.mode = "hang"
        started = time.monotonic()
        teams.wait_for(lambda: teams.post(teams.activity("while hanging", user=ANN)) == 503
                       and "no answer within" in (status.last_error or ""))  # fmt: skip
        assert time.monotonic() - started < 10
        teams.keys_endpoint.mode = "up"
        teams.wait_for(lambda: teams.post(teams.activity("back", user=ANN)) == 200)
        teams.wait_for(lambda: teams.texts(ANN.personal_conversation))
        assert _user_texts(model) == ["back"] and status.connected
    finally:
        teams.keys_endpoint.mode = "up"
        gateway.__exit__(None, None, None)


def _user_texts(model: ScriptedModelServer) -> list[str]:
    from tests.channels.support import model_user_texts

    return model_user_texts(model)
