"""A scripted Google Chat on a real socket: the Chat REST API, the signer whose certificates
verify the tokens Chat sends with each event, and the OAuth token endpoint a service account
gets its access token from.

- `GET /certs`: the signer's certificates (`{kid: PEM}`, as Google publishes them);
  `certs_endpoint` switches it `down` (500) or makes it `hang`;
- `POST /token`: the JWT-bearer grant: the service account's signed assertion is verified
  with its key (google-auth signs it on the app's side) and a token handed out;
- `/v1/spaces/{space}/messages` (`POST`) and `/v1/spaces/{space}/messages/{id}` (`PATCH`):
  each call checked for a token it issued, refused over Chat's 4096-character text limit, and
  made to fail with `fail_next`;
- `GET /v1/media/{resource}?alt=media`: attachment downloads (the app's token needed).

Tests post events to the gateway as Chat does, with a signed bearer token::

    with ScriptedChat() as chat:  # channels.googlechat: chat.channel_config()
        chat.endpoint = gateway.url + "/channels/googlechat/events"
        chat.send("hello", user=ANN)
        chat.wait_for(lambda: chat.texts(ANN.dm_space))
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodmix.testing.bot_platform import ScriptedBotPlatform, token_claims
from nodmix.testing.googlechat_payloads import ChatUser, SpaceKind, message_event
from nodmix.testing.signing import Outage, RsaKey

CHAT_ISSUER = "chat@system.gserviceaccount.com"
TEXT_LIMIT = 4096
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"
"""The audience google-auth puts in a service account's assertion (Google accepts it)."""


def google_jwt() -> Any:
    """`google.auth.jwt` (google-auth is the Google Chat extra: imported when first used)."""
    from google.auth import jwt

    return jwt


@dataclass
class Posted:
    """A message the app created (its text as patched last)."""

    name: str
    space: str
    text: str
    thread: str | None
    edits: int = 0


class ScriptedChat(ScriptedBotPlatform):
    """Google Chat for one app (`endpoint`: where events are posted). Thread-safe for test
    code."""

    def __init__(self, *, project_number: str = "123456789012", app_name: str = "Nodmix") -> None:
        super().__init__()
        self.project_number = project_number
        self.app_name = app_name
        self.signer = RsaKey("chat-key-1")
        self.account_key = RsaKey("sa-key-1")
        self.certs_endpoint = Outage()
        self.posted: list[Posted] = []
        self._signers: dict[RsaKey, Any] = {}

    def service_account(self) -> dict[str, Any]:
        """The app's service-account key file."""
        return {
            "type": "service_account",
            "project_id": "nodmix-test",
            "private_key_id": self.account_key.kid,
            "private_key": self.account_key.private_pem,
            "client_email": "nodmix-app@nodmix-test.iam.gserviceaccount.com",
            "client_id": "1000000000001",
            "token_uri": f"{self.url}/token",
        }

    def channel_config(self, **extra: Any) -> dict[str, Any]:
        """A `channels.googlechat` section pointing at this server (key given inline)."""
        import json

        return {
            "credentials": json.dumps(self.service_account()),
            "audience": self.project_number,
            "certsUrl": f"{self.url}/certs",
            "apiBaseUrl": self.url,
            **extra,
        }

    # ---- posting events ---------------------------------------------------------------------

    def sign(self, key: RsaKey | None = None, **claims: Any) -> str:
        """A token as Chat signs it for a project-number audience (`claims` override or, set
        to None, drop)."""
        now = int(time.time())
        base = {"iss": CHAT_ISSUER, "aud": self.project_number, "iat": now - 5, "exp": now + 3600}
        body = token_claims(base, claims)
        signing = key or self.signer
        token: bytes = google_jwt().encode(self._signer(signing), body)
        return token.decode()

    def _signer(self, key: RsaKey) -> Any:
        """google-auth's signer for `key` (made once: parsing the key is slow)."""
        from google.auth import crypt

        with self._lock:
            if key not in self._signers:
                self._signers[key] = crypt.RSASigner.from_string(key.private_pem, key.kid)
            return self._signers[key]

    def event(
        self,
        text: str,
        *,
        user: ChatUser,
        kind: SpaceKind = "DIRECT_MESSAGE",
        mention: bool = False,
        thread: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A MESSAGE event (not posted)."""
        return message_event(
            message_id=f"m{int(time.time() * 1000)}{next(self._ids):04d}",
            user=user,
            text=text,
            kind=kind,
            app_name=self.app_name,
            mention=mention,
            thread=thread,
            attachments=attachments,
        )

    def send(self, text: str, *, user: ChatUser, **kwargs: Any) -> dict[str, Any]:
        """Post a MESSAGE event (raises unless accepted); the event."""
        event = self.event(text, user=user, **kwargs)
        status = self.post(event)
        if status != 200:
            raise AssertionError(f"the app answered {status}")
        return event

    # ---- what the app did -------------------------------------------------------------------

    def messages(self, space: str | None = None) -> list[Posted]:
        """Messages the app created (in one space)."""
        with self._lock:
            return [p for p in self.posted if space is None or p.space == space]

    def texts(self, space: str | None = None) -> list[str]:
        """Their texts, as last patched."""
        return [p.text for p in self.messages(space)]

    def _recent(self) -> str:
        return f"posted: {self.posted[-5:]}"

    # ---- HTTP -------------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/certs", self._certs),
                Route("/token", self._token, methods=["POST"]),
                Route("/v1/spaces/{space}/messages", self._create, methods=["POST"]),
                Route("/v1/spaces/{space}/messages/{message}", self._patch, methods=["PATCH"]),
                Route("/v1/media/{resource:path}", self._media),
            ]
        )

    async def _certs(self, request: Request) -> Response:
        if await self.certs_endpoint.block():
            return JSONResponse({"error": "backendError"}, status_code=500)
        certs = {self.signer.kid: self.signer.certificate_pem()}
        return JSONResponse(certs, headers={"Cache-Control": "public, max-age=20000"})

    async def _token(self, request: Request) -> Response:
        if await self.token_endpoint.block():
            return JSONResponse({"error": "internal_failure"}, status_code=503)
        form = await request.form()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        try:
            claims = google_jwt().decode(
                str(form.get("assertion", "")),
                certs={self.account_key.kid: self.account_key.certificate_pem()},
                audience=[GOOGLE_TOKEN_AUDIENCE, f"{self.url}/token"],
            )
        except ValueError as exc:
            return JSONResponse(
                {"error": "invalid_grant", "error_description": str(exc)}, status_code=400
            )
        if "https://www.googleapis.com/auth/chat.bot" not in str(claims.get("scope", "")):
            return JSONResponse({"error": "invalid_scope"}, status_code=400)
        token = self._issue_token("ya29.")
        return JSONResponse({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def _refusal(self, request: Request, text: str = "") -> Response | None:
        code = self._refused_code(request, 400 if len(text) > TEXT_LIMIT else None)
        if code is None:
            return None
        status = {401: "UNAUTHENTICATED", 400: "INVALID_ARGUMENT"}.get(code, "UNAVAILABLE")
        return JSONResponse({"error": {"code": code, "status": status}}, status_code=code)

    async def _create(self, request: Request) -> Response:
        data = await request.json()
        text = str(data.get("text") or "")
        refused = self._refusal(request, text)
        if refused is not None:
            return refused
        space = f"spaces/{request.path_params['space']}"
        thread = (data.get("thread") or {}).get("name")
        if thread and request.query_params.get("messageReplyOption") is None:
            thread = None  # Chat starts a new thread unless told to reply
        name = f"{space}/messages/app{next(self._ids)}"
        with self._lock:
            self.posted.append(Posted(name=name, space=space, text=text, thread=thread))
        return JSONResponse({"name": name, "text": text, "thread": {"name": thread or name}})

    async def _patch(self, request: Request) -> Response:
        data = await request.json()
        text = str(data.get("text") or "")
        refused = self._refusal(request, text)
        if refused is not None:
            return refused
        if request.query_params.get("updateMask") != "text":
            return JSONResponse({"error": {"code": 400}}, status_code=400)
        name = f"spaces/{request.path_params['space']}/messages/{request.path_params['message']}"
        with self._lock:
            found = [p for p in self.posted if p.name == name]
            if not found:
                return JSONResponse({"error": {"code": 404}}, status_code=404)
            found[0].text, found[0].edits = text, found[0].edits + 1
        return JSONResponse({"name": name, "text": text})

    async def _media(self, request: Request) -> Response:
        if self._refusal(request) is not None:
            return JSONResponse({"error": {"code": 401}}, status_code=401)
        if request.query_params.get("alt") != "media":
            return Response(status_code=404)
        return self._serve_file(request.path_params["resource"])
