"""The outbound policy: which addresses the console may open an HTTP connection to on a user's say-so.

Every URL that comes from the console's configuration (webhooks, a Kubernetes cluster's `api_url`, Slurm's
`restd_url`, telemetry exporters and Prometheus, inference engines' metrics) is fetched through this module:

* the host is resolved once, every address it resolves to is checked, and the connection goes to a checked
  address (never a second lookup, so a name cannot resolve to a public address for the check and to a private
  one for the connection); the Host header, TLS SNI and certificate check still use the name;
* refused unless `settings.OUTBOUND_ALLOWED_NETWORKS` (CIDRs, from the environment) contains the address:
  loopback, private (RFC 1918, fc00::/7), link-local and cloud metadata addresses, unspecified, and every other
  address that is not globally routable; IPv4 addresses inside IPv6 (mapped, compatible, 6to4, NAT64) count as
  the IPv4 address they carry;
* redirects are never followed, and no HTTP proxy from the environment is used (it would make the connection).

The policy is the deployment's: no tenant or console setting widens it. `url_error` is the check at save time
(a clear message for the form or the API); the fetch itself (`urlopen`, `pin_pool_manager`) checks again, so an
address that changed since, or a row saved before the policy, is still refused (OutboundRefused).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import urllib.request
from urllib.parse import urlsplit

import urllib3
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata services outside the link-local range (Alibaba; AWS's IPv6 one, also inside fc00::/7).
METADATA = {ipaddress.ip_address("100.100.100.200"), ipaddress.ip_address("fd00:ec2::254")}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")


class OutboundRefused(ValueError):
    """The outbound policy refuses this URL or address (not a transport failure: retrying will not help)."""


def _embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64), else the address itself."""
    if ip.version == 4:
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _kind(ip: IPAddress) -> str:
    """Why `ip` is not a public address ('' when it is one)."""
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local (cloud metadata) address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global or ip.is_multicast:
        return "not a public address"
    return ""


_POLICY = "the outbound policy refuses it (only the deployment's OUTBOUND_ALLOWED_NETWORKS can allow it)"


def _refusal(ip: IPAddress | str) -> tuple[str, str]:
    """(the address as shown, why it is refused), or ("", "") when the policy allows it."""
    raw = ipaddress.ip_address(ip.split("%", 1)[0] if isinstance(ip, str) else ip)
    effective = _embedded_ipv4(raw)
    if any(effective in net for net in settings.OUTBOUND_ALLOWED_NETWORKS if net.version == effective.version):
        return "", ""
    kind = _kind(effective)
    if not kind:
        return "", ""
    return (str(raw) if raw == effective else f"{raw} (that is {effective})"), kind


def address_error(ip: IPAddress | str) -> str:
    """Why the policy refuses a connection to `ip` ('' when it allows it)."""
    shown, kind = _refusal(ip)
    return f"{shown} is {kind}; {_POLICY}" if kind else ""


def resolve(host: str, port: int) -> list[tuple]:
    """Every address `host` resolves to, as getaddrinfo results, each allowed by the policy; OutboundRefused
    naming the first refused one (a name with one private address among public ones is refused)."""
    host = host.strip("[]")
    try:
        found = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except UnicodeError as exc:
        raise OutboundRefused(f"{host!r} is not a valid host name") from exc
    for *_, sockaddr in found:
        shown, kind = _refusal(sockaddr[0])
        if kind:
            if _literal(host):
                raise OutboundRefused(f"{shown} is {kind}; {_POLICY}")
            raise OutboundRefused(f"{host} resolves to {shown}, {kind}; {_POLICY}")
    return found


def connect(host: str, port: int, timeout=None, source_address=None, socket_options=()) -> socket.socket:
    """A connected socket to a checked address of `host` (the one lookup is the one checked)."""
    error: OSError | None = None
    for family, kind, proto, _name, sockaddr in resolve(host, port):
        sock = socket.socket(family, kind, proto)
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
            if isinstance(timeout, int | float) and not isinstance(timeout, bool):
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"{host} resolves to no address")


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def url_error(url: str, *, resolve_names: bool = True) -> str:
    """Why the console may not call `url` ('' if it may): not http(s), or a host the policy refuses. A host
    name that does not resolve now is accepted (it is checked again on every call); `resolve_names=False`
    checks only literal addresses and `localhost` (a template whose host has placeholders)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or ""
    except ValueError as exc:
        return f"not a valid URL: {exc}"
    if parts.scheme not in ("http", "https") or not host:
        return "must be an http:// or https:// URL"
    if parts.username or parts.password:
        return "must not carry a user name or password (put secrets in secret_env)"
    if not resolve_names and not _literal(host) and host != "localhost" and not host.endswith(".localhost"):
        return ""
    try:
        resolve(host, port)
    except OutboundRefused as exc:
        return str(exc)
    except OSError:
        return ""  # not resolvable now: the call checks again
    return ""


#
# urllib.request: webhooks, telemetry, inference metrics, slurmrestd
#


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise OutboundRefused(
            f"{req.full_url} answered HTTP {code}, a redirect to {newurl}: redirects are not followed"
        )


def _pinned(connection_class):
    def make(host, **kwargs):
        conn = connection_class(host, **kwargs)
        conn._create_connection = lambda address, timeout=None, source_address=None: connect(
            address[0], address[1], timeout, source_address
        )
        return conn

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(_pinned(http.client.HTTPConnection), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_pinned(http.client.HTTPSConnection), req, context=self._context)


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _HTTPHandler, _HTTPSHandler, _NoRedirect)


def urlopen(request: urllib.request.Request | str, timeout: float):
    """`urllib.request.urlopen` under the policy: checked address, no redirects, no proxy. Raises
    OutboundRefused (before any connection) besides urllib's own errors."""
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise OutboundRefused(f"{url!r} is not an http:// or https:// URL")
    return _opener.open(request, timeout=timeout)


#
# urllib3: the Kubernetes client
#


class _PinnedHTTPConnection(urllib3.connection.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        try:
            return connect(self._dns_host, self.port, self.timeout, self.source_address, self.socket_options)
        except OutboundRefused:
            raise
        except TimeoutError as exc:
            raise urllib3.exceptions.ConnectTimeoutError(self, f"Connection to {self.host} timed out") from exc
        except OSError as exc:
            raise urllib3.exceptions.NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc


class _PinnedHTTPSConnection(_PinnedHTTPConnection, urllib3.connection.HTTPSConnection):
    pass


class _PinnedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _PinnedHTTPConnection


class _PinnedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _PinnedHTTPSConnection


def pin_pool_manager(manager: urllib3.PoolManager) -> urllib3.PoolManager:
    """Make a urllib3 PoolManager connect under the policy (its pools are made on first use)."""
    if isinstance(manager, urllib3.ProxyManager):
        raise OutboundRefused("an HTTP proxy would make the connection; the outbound policy cannot check it")
    manager.pool_classes_by_scheme = {"http": _PinnedHTTPPool, "https": _PinnedHTTPSPool}
    return manager
