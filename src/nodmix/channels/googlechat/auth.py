"""Checking the token Google Chat sends with each request to the app's HTTP endpoint.

Google Chat puts a Google-signed JWT in `Authorization: Bearer ...`; what it looks like
depends on the app's "Authentication Audience" setting, which `channels.googlechat.audience`
mirrors:

- a project number (all digits): a token issued by `chat@system.gserviceaccount.com` for that
  number, signed with the keys at that account's public certificate URL;
- the endpoint URL: a Google ID token for that URL (issuer `accounts.google.com`) whose email
  is `chat@system.gserviceaccount.com`, signed with Google's OAuth certificates.

The signature, `iat`/`exp` (a minute of clock skew) and `aud` are verified by `google-auth`'s
`jwt.decode` against certificates fetched and kept fresh by `SigningKeys`; then the issuer
(and for ID tokens the verified email) is checked here. All before the body is read.
"""

from __future__ import annotations

from typing import Any

from google.auth import exceptions as google_errors
from google.auth import jwt as google_jwt

from nodmix.channels.signing_keys import SigningKeys, bearer_token

CHAT_ISSUER = "chat@system.gserviceaccount.com"
ID_TOKEN_ISSUERS = ("accounts.google.com", "https://accounts.google.com")
PROJECT_CERTS_URL = (
    "https://www.googleapis.com/service_accounts/v1/metadata/x509/chat@system.gserviceaccount.com"
)
ID_TOKEN_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
CLOCK_SKEW_SECONDS = 60


class TokenRefused(Exception):
    """The request's token is missing, malformed, forged, expired or for another audience."""


def project_audience(audience: str) -> bool:
    """A project number (rather than the endpoint URL)."""
    return audience.isdigit()


def default_certs_url(audience: str) -> str:
    """Google's certificates for tokens of this kind of audience."""
    return PROJECT_CERTS_URL if project_audience(audience) else ID_TOKEN_CERTS_URL


def parse_certs(document: Any) -> dict[str, str]:
    """`{kid: PEM certificate}`.

    Raises:
        ValueError: the document holds no certificate.
    """
    if not isinstance(document, dict):
        raise ValueError("the certificate document is not an object")
    found = {str(k): v for k, v in document.items() if isinstance(v, str) and "BEGIN" in v}
    if not found:
        raise ValueError("no certificate in the document")
    return found


class ChatRequestAuth:
    """Checks Google Chat's request tokens for one app."""

    def __init__(self, audience: str, certs_url: str | None = None) -> None:
        self.audience = audience
        self.keys: SigningKeys[str] = SigningKeys(
            certs_url or default_certs_url(audience), parse_certs
        )

    async def check(self, authorization: str | None) -> dict[str, Any]:
        """The claims of a valid `Authorization` header.

        Raises:
            TokenRefused: no valid token for this app.
            KeysUnavailable: the certificates cannot be fetched (answer 503: retried later).
        """
        token = bearer_token(authorization, TokenRefused)
        try:
            header = google_jwt.decode_header(token)
        except (ValueError, google_errors.GoogleAuthError) as exc:
            raise TokenRefused(f"malformed token: {exc}") from None
        kid, cert = await self.keys.signer(header, TokenRefused, "Google Chat's")
        try:
            claims: dict[str, Any] = google_jwt.decode(
                token,
                certs={kid: cert},
                audience=self.audience,
                clock_skew_in_seconds=CLOCK_SKEW_SECONDS,
            )
        except (ValueError, google_errors.GoogleAuthError) as exc:
            raise TokenRefused(str(exc)) from None
        self._check_issuer(claims)
        return claims

    def _check_issuer(self, claims: dict[str, Any]) -> None:
        issuer = claims.get("iss")
        if project_audience(self.audience):
            if issuer != CHAT_ISSUER:
                raise TokenRefused(f"token issued by {issuer!r}, not Google Chat")
            return
        if issuer not in ID_TOKEN_ISSUERS:
            raise TokenRefused(f"ID token issued by {issuer!r}, not Google")
        if claims.get("email") != CHAT_ISSUER or claims.get("email_verified") is not True:
            raise TokenRefused("the ID token is not Google Chat's")
