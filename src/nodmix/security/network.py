"""Keeping a sandboxed session's `web_fetch` off the local network.

A page the model fetches can tell it to fetch `http://127.0.0.1:<port>/...`, the cloud metadata
address or a router on the LAN. In a sandboxed session `web_fetch` uses `guarded_transport()`,
whose connections go through `GuardedBackend`: it resolves the host itself, refuses the host if
any address it resolves to is not public (loopback, link-local, private, CGNAT, unspecified,
multicast, reserved; an IPv4 address inside an IPv6 one is checked as IPv4), and then connects
to one of the addresses it checked, never resolving again. A DNS name that answers a public
address to the check and a private one to the connection (rebinding) therefore gets nowhere.
Redirects open new connections and are checked the same way. TLS still verifies the
certificate against the host name, since httpcore passes the URL's host as the server name.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

import anyio
import httpcore2
import httpx2

from nodmix.errors import ToolError

_RESOLVE_TIMEOUT_SECONDS = 10.0
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class PrivateAddressError(ToolError):
    """The host is (or resolves to) an address a sandboxed session may not reach."""


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def is_public(address: IPAddress) -> bool:
    """Whether `address` is a public unicast address. An IPv6 address that carries an IPv4
    one (mapped, IPv4-compatible, 6to4, NAT64, Teredo) is public only when that one is: a
    kernel tunnel, relay or translator that unwraps it would otherwise take the connection
    to loopback or the metadata address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local:
            return False
        inner = _embedded_ipv4(address)
        if inner is not None:
            return inner.is_global and not inner.is_multicast
    return address.is_global and not address.is_multicast


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64 or (int(address) >> 32 == 0 and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)  # NAT64, IPv4-compatible
    return None


async def resolve_public(host: str, port: int) -> list[str]:
    """Every address of `host`, all checked to be public.

    Raises:
        PrivateAddressError: One of the addresses is not public.
        OSError: The name does not resolve.
    """
    try:
        literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        with anyio.fail_after(_RESOLVE_TIMEOUT_SECONDS):
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for address in addresses:
        if not is_public(address):
            via = "" if literal is not None else f" (it resolves to {address})"
            raise PrivateAddressError(
                f"web_fetch in a sandboxed session cannot reach {host}{via}: loopback, "
                "link-local and private addresses are refused; set "
                "tools.webFetch.allowPrivateNetwork to true to allow them."
            )
    return list(dict.fromkeys(str(a) for a in addresses))


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """An httpcore network backend that connects only to checked public addresses."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Resolve and check `host`, then connect to the first checked address that answers."""
        try:
            addresses = await resolve_public(host, port)
        except (OSError, TimeoutError) as exc:
            raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from exc
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Unix sockets are local by definition: refused."""
        raise PrivateAddressError("web_fetch in a sandboxed session cannot use a Unix socket.")

    async def sleep(self, seconds: float) -> None:
        """Delegate to the wrapped backend."""
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self) -> None:
        # Environment proxies are ignored: a proxy would make the connection on our behalf,
        # past the check.
        super().__init__(trust_env=False)
        # httpx has no public way to give its pool a network backend; this is the pool it would
        # build, with ours.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            network_backend=GuardedBackend(),
        )


def guarded_transport() -> httpx2.AsyncBaseTransport:
    """An httpx transport whose connections go only to public addresses."""
    return _GuardedTransport()
