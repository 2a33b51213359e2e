"""Checking the Bot Framework's token on each activity Teams posts to the gateway.

The Bot Connector signs a JWT for every request (`Authorization: Bearer ...`). Following the
Bot Framework's authentication rules, a request is accepted only when the token:

- is RS256-signed by a key listed in the Bot Framework's OpenID metadata (`jwks_uri`), and
  that key is endorsed for the activity's channel (`msteams`);
- was issued by `https://api.botframework.com` for this bot (`aud` is its App ID);
- is within its validity period (5 minutes of clock skew allowed);
- names, in its `serviceUrl` claim, the service URL the activity asks replies to go to (so a
  token for one service cannot send the bot's own token to another).

The token is checked from the headers alone, before the body is read; the body's channel and
service URL are then checked against what the token said (`TokenGrant.admits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jwt

from nodmix.channels.signing_keys import SigningKeys, bearer_token

ISSUER = "https://api.botframework.com"
DEFAULT_METADATA_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
CLOCK_SKEW_SECONDS = 300


class TokenRefused(Exception):
    """The request's token is missing, malformed, forged, expired or not for this bot."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One key of the Bot Framework's key set, with the channels it is endorsed for."""

    key: jwt.PyJWK
    endorsements: frozenset[str]


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """What a valid token allows: activities of these channels for this service URL."""

    service_url: str
    endorsements: frozenset[str]

    def admits(self, channel_id: str, service_url: str) -> bool:
        """The activity's channel is endorsed and its service URL is the token's."""
        return channel_id in self.endorsements and _same_url(service_url, self.service_url)


def parse_jwks(document: Any) -> dict[str, SigningKey]:
    """`{kid: key}` of a JWKS document; keys the library cannot use are skipped.

    Raises:
        ValueError: the document has no usable RSA key.
    """
    found: dict[str, SigningKey] = {}
    for entry in document.get("keys", []) if isinstance(document, dict) else []:
        if not isinstance(entry, dict) or entry.get("kty") != "RSA" or "kid" not in entry:
            continue
        try:
            key = jwt.PyJWK(entry, algorithm="RS256")
        except jwt.PyJWTError:
            continue
        endorsed = entry.get("endorsements") or []
        found[str(entry["kid"])] = SigningKey(
            key, frozenset(str(e) for e in endorsed if isinstance(e, str))
        )
    if not found:
        raise ValueError("no RSA signing key in the key set")
    return found


class BotFrameworkAuth:
    """Checks Bot Connector tokens for one bot."""

    def __init__(self, app_id: str, metadata_url: str = DEFAULT_METADATA_URL) -> None:
        self.app_id = app_id
        self.keys: SigningKeys[SigningKey] = SigningKeys(metadata_url, parse_jwks, discovery=True)

    async def check(self, authorization: str | None) -> TokenGrant:
        """The grant of a valid `Authorization` header.

        Raises:
            TokenRefused: the header does not carry a valid token for this bot.
            KeysUnavailable: the signing keys cannot be fetched (answer 503: retried later).
        """
        token = bearer_token(authorization, TokenRefused)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"malformed token: {exc}") from None
        _, key = await self.keys.signer(header, TokenRefused, "a Bot Framework key")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                audience=self.app_id,
                issuer=ISSUER,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise TokenRefused(str(exc)) from None
        service_url = claims.get("serviceurl") or claims.get("serviceUrl")
        if not isinstance(service_url, str) or not service_url:
            raise TokenRefused("the token names no serviceUrl")
        return TokenGrant(service_url, key.endorsements)


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()
