"""A scripted Microsoft Teams on a real socket: the Bot Connector service, the token issuer
that signs the activities it posts, and the OAuth token endpoint bots get their own token from.

- `GET /v1/.well-known/openidconfiguration` and `/v1/.well-known/keys`: the Bot Framework's
  OpenID metadata and its key set (endorsed for `msteams`); `keys_endpoint` switches them
  `down` (500) or makes them `hang`;
- `POST /botframework.com/oauth2/v2.0/token`: the client-credentials grant (the App ID and
  password checked) handing out bot tokens;
- `/teams/v3/conversations/{id}/activities[/{activityId}]`: the Bot Connector REST API
  (`POST` sends, `PUT` updates), each call checked for a token it issued, refused with 413
  over Teams' size limit, and made to fail with `fail_next`;
- `/teams/attachments/{id}` (the bot's token needed) and `/files/{id}` (pre-authorised).

Tests post activities to the gateway as Teams does, signed like the Bot Connector signs them::

    with ScriptedTeams() as teams:  # channels.msteams: teams.channel_config()
        teams.endpoint = gateway.url + "/channels/msteams/messages"
        teams.send("hello", user=ANN)
        teams.wait_for(lambda: teams.texts(ANN.personal_conversation))
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodmix.testing.bot_platform import ScriptedBotPlatform, token_claims
from nodmix.testing.msteams_payloads import ConversationKind, TeamsUser, message_activity
from nodmix.testing.signing import Outage, RsaKey

ISSUER = "https://api.botframework.com"
MAX_ACTIVITY_BYTES = 28 * 1024


@dataclass
class Sent:
    """An activity the bot sent (its text as edited last)."""

    id: str
    conversation: str
    type: str
    text: str
    attachments: list[dict[str, Any]] = field(default_factory=list)
    edits: int = 0


class ScriptedTeams(ScriptedBotPlatform):
    """Teams for one bot (`endpoint`: where activities are posted, the gateway's messaging
    endpoint). Thread-safe for test code."""

    def __init__(
        self,
        *,
        app_id: str = "00000000-0000-4000-8000-00000000b07",
        app_password: str = "app-secret",
        tenant: str = "tenant-1",
        bot_name: str = "Nodmix",
    ) -> None:
        super().__init__()
        self.app_id, self.app_password, self.tenant = app_id, app_password, tenant
        self.bot_name = bot_name
        self.key = RsaKey("bf-key-1")
        self.endorsements = ["msteams"]
        self.keys_endpoint = Outage()
        self.sent: list[Sent] = []

    # ---- addresses --------------------------------------------------------------------------

    @property
    def service_url(self) -> str:
        """The Bot Connector's service URL (sent in every activity)."""
        return f"{self.url}/teams/"

    @property
    def bot_id(self) -> str:
        """The bot's id in conversations."""
        return f"28:{self.app_id}"

    def channel_config(self, **extra: Any) -> dict[str, Any]:
        """A `channels.msteams` section pointing at this server."""
        return {
            "appId": self.app_id,
            "appPassword": self.app_password,
            "openIdMetadataUrl": f"{self.url}/v1/.well-known/openidconfiguration",
            "tokenUrl": f"{self.url}/botframework.com/oauth2/v2.0/token",
            **extra,
        }

    # ---- posting activities -----------------------------------------------------------------

    def sign(self, key: RsaKey | None = None, alg: str = "RS256", **claims: Any) -> str:
        """A token as the Bot Connector signs it (`claims` override or, set to None, drop)."""
        import jwt  # PyJWT: the Teams extra

        now = int(time.time())
        base = {"iss": ISSUER, "aud": self.app_id, "serviceurl": self.service_url}
        body = token_claims({**base, "nbf": now - 5, "iat": now - 5, "exp": now + 3600}, claims)
        signing = key or self.key
        return jwt.encode(body, signing.private, algorithm=alg, headers={"kid": signing.kid})

    def activity(
        self,
        text: str,
        *,
        user: TeamsUser,
        kind: ConversationKind = "personal",
        mention: bool = False,
        thread: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A message activity (not posted)."""
        return message_activity(
            activity_id=str(int(time.time() * 1000) * 100 + next(self._ids)),
            service_url=self.service_url,
            user=user,
            bot_id=self.bot_id,
            bot_name=self.bot_name,
            text=text,
            kind=kind,
            tenant=self.tenant,
            mention=mention,
            thread=thread,
            attachments=attachments,
        )

    def send(self, text: str, *, user: TeamsUser, **kwargs: Any) -> dict[str, Any]:
        """Post a message activity (raises unless accepted); the activity."""
        activity = self.activity(text, user=user, **kwargs)
        status = self.post(activity)
        if status != 200:
            raise AssertionError(f"the bot answered {status}")
        return activity

    # ---- what the bot did -------------------------------------------------------------------

    def messages(self, conversation: str | None = None) -> list[Sent]:
        """Messages the bot sent (to one conversation, thread included in its id)."""
        with self._lock:
            return [
                s
                for s in self.sent
                if s.type == "message" and (conversation is None or s.conversation == conversation)
            ]

    def texts(self, conversation: str | None = None) -> list[str]:
        """Their texts, as last edited."""
        return [s.text for s in self.messages(conversation)]

    def typing_count(self, conversation: str) -> int:
        """Typing activities sent to a conversation."""
        with self._lock:
            return sum(
                1 for s in self.sent if s.type == "typing" and s.conversation == conversation
            )

    def _recent(self) -> str:
        return f"sent: {self.sent[-5:]}"

    # ---- HTTP -------------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/.well-known/openidconfiguration", self._metadata),
                Route("/v1/.well-known/keys", self._keys),
                Route("/botframework.com/oauth2/v2.0/token", self._token, methods=["POST"]),
                Route(
                    "/teams/v3/conversations/{conversation}/activities",
                    self._send,
                    methods=["POST"],
                ),
                Route(
                    "/teams/v3/conversations/{conversation}/activities/{activity}",
                    self._activity_call,
                    methods=["POST", "PUT"],
                ),
                Route("/teams/attachments/{file}", self._attachment),
                Route("/files/{file}", self._file),
            ]
        )

    async def _metadata(self, request: Request) -> Response:
        if await self.keys_endpoint.block():
            return JSONResponse({"error": "unavailable"}, status_code=500)
        return JSONResponse(
            {
                "issuer": ISSUER,
                "jwks_uri": f"{self.url}/v1/.well-known/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            }
        )

    async def _keys(self, request: Request) -> Response:
        if await self.keys_endpoint.block():
            return JSONResponse({"error": "unavailable"}, status_code=500)
        key = self.key.jwk(endorsements=list(self.endorsements), x5t=self.key.kid)
        return JSONResponse({"keys": [key]}, headers={"Cache-Control": "max-age=86400"})

    async def _token(self, request: Request) -> Response:
        if await self.token_endpoint.block():
            return JSONResponse({"error": "temporarily_unavailable"}, status_code=503)
        form = await request.form()
        if form.get("grant_type") != "client_credentials" or form.get("scope") != (
            "https://api.botframework.com/.default"
        ):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        if form.get("client_id") != self.app_id or form.get("client_secret") != self.app_password:
            return JSONResponse(
                {"error": "invalid_client", "error_description": "AADSTS7000215: Invalid secret"},
                status_code=401,
            )
        token = self._issue_token()
        return JSONResponse({"token_type": "Bearer", "expires_in": 3599, "access_token": token})

    def _refusal(self, request: Request, body: bytes) -> Response | None:
        code = self._refused_code(request, 413 if len(body) > MAX_ACTIVITY_BYTES else None)
        if code is None:
            return None
        reason = {401: "Unauthorized", 413: "MessageSizeTooBig"}.get(code, "ServiceError")
        return JSONResponse({"error": {"code": reason, "message": reason}}, status_code=code)

    async def _send(self, request: Request) -> Response:
        body = await request.body()
        refused = self._refusal(request, body)
        if refused is not None:
            return refused
        return self._record(request, await request.json())

    def _record(self, request: Request, data: dict[str, Any]) -> Response:
        sent = Sent(
            id=f"1{int(time.time() * 1000)}{next(self._ids):04d}",
            conversation=request.path_params["conversation"],
            type=str(data.get("type")),
            text=str(data.get("text") or ""),
            attachments=list(data.get("attachments") or []),
        )
        with self._lock:
            self.sent.append(sent)
        return JSONResponse({"id": sent.id}, status_code=201)

    async def _activity_call(self, request: Request) -> Response:
        body = await request.body()
        refused = self._refusal(request, body)
        if refused is not None:
            return refused
        data = await request.json()
        activity_id = request.path_params["activity"]
        if request.method == "POST":  # a reply: recorded as a message in the conversation
            return self._record(request, data)
        with self._lock:
            found = [s for s in self.sent if s.id == activity_id]
            if not found:
                return JSONResponse({"error": {"code": "NotFound"}}, status_code=404)
            found[0].text = str(data.get("text") or "")
            found[0].edits += 1
        return JSONResponse({"id": activity_id})

    async def _attachment(self, request: Request) -> Response:
        if self._refusal(request, b"") is not None:
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return self._serve_file(request.path_params["file"])

    async def _file(self, request: Request) -> Response:
        return self._serve_file(request.path_params["file"])
