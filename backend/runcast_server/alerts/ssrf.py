"""The SSRF guard for webhooks: resolve once, refuse internal addresses, connect to that address.

``vet(url, allow)`` resolves the URL's host and refuses it when *any* address it resolves
to is loopback, private, link-local, multicast, reserved, unspecified, shared (CGNAT) or a
cloud metadata address -- IPv4 or IPv6, including IPv4-mapped, 6to4, Teredo and NAT64
forms of those -- unless that address lies in the admin's allow list
(``RUNCAST_WEBHOOK_ALLOW_CIDRS``). ``post`` then sends the request to the exact address
it vetted (DNS is not asked again, so a rebinding answer cannot change the target) with
the original ``Host`` header and TLS server name, and never follows redirects. Every
delivery vets again.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
METADATA = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    ipaddress.ip_address("fd00:ec2::254"),  # AWS IPv6
}
EXTRA_BLOCKED = [
    ipaddress.ip_network("100.64.0.0/10"),  # shared address space (CGNAT)
    ipaddress.ip_network("192.0.0.0/24"),
    ipaddress.ip_network("198.18.0.0/15"),
    ipaddress.ip_network("0.0.0.0/8"),
    ipaddress.ip_network("64:ff9b:1::/48"),
]
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(ValueError):
    """A webhook URL that may not be called; ``str()`` says why."""


@dataclass(frozen=True)
class Target:
    url: str  # as given
    scheme: str
    host: str  # as given (for Host and SNI)
    port: int
    ip: IPAddress  # the vetted address to connect to


def parse_allow(spec: str | None) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for part in (spec or "").split(","):
        part = part.strip()
        if part:
            out.append(ipaddress.ip_network(part, strict=False))
    return out


def _embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    # IPv4-compatible (deprecated ::a.b.c.d)
    if int(ip) >> 32 == 0 and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip))
    return None


def forbidden_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` may not be reached (None: a public address)."""
    inner = _embedded_v4(ip)
    if inner is not None:
        why = forbidden_reason(inner)
        return f"{why} (embedded in {ip})" if why else None
    if ip in METADATA:
        return "a cloud metadata address"
    for name in ("loopback", "private", "link_local", "multicast", "reserved", "unspecified", "site_local"):
        if getattr(ip, f"is_{name}", False):
            return f"a {name.replace('_', '-')} address"
    if any(ip.version == net.version and ip in net for net in EXTRA_BLOCKED):
        return "a non-public address"
    if not ip.is_global:
        return "not a global address"
    return None


def resolve(host: str, port: int) -> list[IPAddress]:
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
        return [literal]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Refused(f"cannot resolve {host!r}: {exc}") from None
    out: list[IPAddress] = []
    for *_, sockaddr in infos:
        if not isinstance(sockaddr[0], str):  # (int, bytes): an AF_INET6 address on Python built without IPv6
            continue
        addr = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if addr not in out:
            out.append(addr)
    if not out:
        raise Refused(f"{host!r} resolves to no address")
    return out


def vet(url: str, allow: str | list[Any] | None = None) -> Target:
    """Check a webhook URL now; returns the address to connect to or raises Refused."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Refused("the URL must be http:// or https://")
    if parts.username or parts.password:
        raise Refused("the URL must not carry credentials")
    host = parts.hostname
    if not host:
        raise Refused("the URL has no host")
    port = port or (443 if parts.scheme == "https" else 80)
    nets = parse_allow(allow) if isinstance(allow, str) or allow is None else allow
    addresses = resolve(host, port)
    for ip in addresses:
        why = forbidden_reason(ip)
        if why and not any(ip.version == n.version and ip in n for n in nets):
            raise Refused(f"{host} resolves to {ip}, {why}; webhooks may not reach it")
    return Target(url=url, scheme=parts.scheme, host=host, port=port, ip=addresses[0])


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> httpx.Response:
    """POST ``body`` to the vetted address of ``target`` (no DNS, no redirects, no proxies)."""
    parts = urlsplit(target.url)
    ip = f"[{target.ip}]" if target.ip.version == 6 else str(target.ip)
    pinned = urlunsplit((parts.scheme, f"{ip}:{target.port}", parts.path or "/", parts.query, ""))
    default_port = 443 if target.scheme == "https" else 80
    host_header = target.host if target.port == default_port else f"{target.host}:{target.port}"
    if ":" in target.host and not target.host.startswith("["):
        host_header = f"[{target.host}]" if target.port == default_port else f"[{target.host}]:{target.port}"
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
        request = client.build_request(
            "POST", pinned, content=body, headers={**headers, "Host": host_header}, extensions=extensions
        )
        return client.send(request)
