"""Signing keys for the scripted platforms that sign what they post (Teams, Google Chat): an
RSA key pair with its public JWK and a self-signed X.509 certificate, and an outage switch for
the endpoints that publish them.

`cryptography` comes with the channels' extras (`nodmix[msteams]`, `nodmix[googlechat]`), so it
is imported where a key is made, not when this module is."""

from __future__ import annotations

import base64
import datetime
import time
from typing import TYPE_CHECKING, Any, Literal

import anyio

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

Mode = Literal["up", "down", "hang"]
HANG_SECONDS = 60.0


class RsaKey:
    """A 2048-bit RSA key pair named `kid`."""

    def __init__(self, kid: str) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.kid = kid
        self.private: RSAPrivateKey = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    @property
    def private_pem(self) -> str:
        """The private key, PKCS#8 PEM."""
        from cryptography.hazmat.primitives import serialization

        return self.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    def jwk(self, **extra: Any) -> dict[str, Any]:
        """The public key as a JWK (`extra` adds members such as `endorsements`)."""
        numbers = self.private.public_key().public_numbers()
        return {
            "kty": "RSA",
            "use": "sig",
            "kid": self.kid,
            "n": _b64(numbers.n),
            "e": _b64(numbers.e),
            **extra,
        }

    def certificate_pem(self, subject: str = "nodmix-test") -> str:
        """A self-signed certificate of the public key (what Google publishes per key id)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import NameOID

        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.private.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .sign(self.private, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM).decode()


class Outage:
    """How an endpoint behaves: `up`, `down` (answers 500) or `hang` (never answers, until
    switched back or `HANG_SECONDS` pass)."""

    def __init__(self) -> None:
        self.mode: Mode = "up"
        self.refused = 0
        self.served = 0

    async def block(self) -> bool:
        """Wait while hanging; True when the request should fail (down)."""
        deadline = time.monotonic() + HANG_SECONDS
        while self.mode == "hang" and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        if self.mode != "up":
            self.refused += 1
            return True
        self.served += 1
        return False


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
