"""Who is calling: the client's address (behind proxies the operator trusts) and whether a browser's
``Origin`` is this server's own.

Behind a reverse proxy every connection comes from the proxy. `TrustedProxies` (``serve
--forwarded-allow-ips``, like uvicorn's option of that name) lists the proxies whose
``X-Forwarded-For`` and ``X-Forwarded-Proto`` headers are believed: only when the direct peer is one of
them is the right-most address of ``X-Forwarded-For`` that is not itself a trusted proxy taken as the
client. A header from any other peer is ignored, so a client cannot choose its own address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    """Addresses and networks (``10.0.0.1``, ``10.0.0.0/8``, ``::1``) of trusted proxies; ``*`` trusts
    every peer (only where nothing but the proxy can reach the server). Empty: no proxy is trusted."""

    def __init__(self, entries: Iterable[str] = ()) -> None:
        self.any = False
        self.networks: list[_Network] = []
        for entry in entries:
            for part in str(entry).split(","):
                part = part.strip()
                if part == "*":
                    self.any = True
                elif part:
                    try:
                        self.networks.append(ipaddress.ip_network(part, strict=False))
                    except ValueError:
                        raise ValueError(f"not an IP address or network: {part!r}") from None

    def __bool__(self) -> bool:
        return self.any or bool(self.networks)

    def trusts(self, address: str) -> bool:
        if self.any:
            return True
        try:
            ip = ipaddress.ip_address(address.strip().strip("[]"))
        except ValueError:
            return False
        return any(ip in network for network in self.networks)


def _header_values(scope: Mapping[str, Any], name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers", ()) if k == name]


def _peer(scope: Mapping[str, Any]) -> str:
    return str((scope.get("client") or ("unknown", 0))[0])


def client_address(scope: Mapping[str, Any], trusted: TrustedProxies) -> str:
    """The client's address: the direct peer, unless that is a trusted proxy; then the right-most
    ``X-Forwarded-For`` entry that is not a trusted proxy (the left-most when all are)."""
    peer = _peer(scope)
    if not trusted or not trusted.trusts(peer):
        return peer
    chain = [part.strip() for value in _header_values(scope, b"x-forwarded-for")
             for part in value.split(",") if part.strip()]
    for address in reversed(chain):
        if not trusted.trusts(address):
            return address
    return chain[0] if chain else peer


def request_scheme(scope: Mapping[str, Any], trusted: TrustedProxies) -> str:
    """``http`` or ``https`` as the client sees it: ``X-Forwarded-Proto`` from a trusted proxy, else the
    connection's own scheme."""
    if trusted and trusted.trusts(_peer(scope)):
        values = [part.strip().lower() for value in _header_values(scope, b"x-forwarded-proto")
                  for part in value.split(",") if part.strip()]
        if values and values[-1] in DEFAULT_PORTS:
            return values[-1]
    return "https" if scope.get("scheme") in ("https", "wss") else "http"


def _host_port(value: str, scheme: str) -> tuple[str, int] | None:
    """(lower-case host, port) of a Host header value, the scheme's port when none is given."""
    try:
        parts = urlsplit(f"{scheme}://{value.strip()}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path:
        return None
    return parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def same_origin(origin: str, scope: Mapping[str, Any], trusted: TrustedProxies) -> bool:
    """Whether a browser's ``Origin`` is the origin the request was sent to: the same scheme, host and
    port (the Host header, already checked against the allow-list; the scheme as `request_scheme`)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path or parts.query or parts.username:
        return False
    if scheme != request_scheme(scope, trusted):
        return False
    hosts = _header_values(scope, b"host")
    own = _host_port(hosts[0], scheme) if len(hosts) == 1 else None
    return own == (parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme])
