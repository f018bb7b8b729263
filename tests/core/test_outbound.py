"""The outbound policy (apps/core/outbound.py) under the production default: no network allowed beyond public
addresses. tests/conftest.py allows loopback for the suite's fake servers; every test here puts the default back
(`production` fixture) or allows exactly what it needs."""

from __future__ import annotations

import ipaddress
import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3

from apps.core import outbound
from apps.core.outbound import OutboundRefused, address_error, url_error, urlopen

REFUSED = [
    ("169.254.169.254", "link-local"),
    ("100.100.100.200", "metadata"),
    ("fd00:ec2::254", "metadata"),
    ("fe80::1", "link-local"),
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("100.64.0.1", "not a public"),  # shared address space (carrier-grade NAT)
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:169.254.169.254", "link-local"),
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:0.0.0.0", "unspecified"),
    ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
    ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
    ("::10.0.0.1", "private"),  # IPv4-compatible
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "172.32.0.1", "192.169.0.1"]


@pytest.fixture
def production(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    return settings


@pytest.fixture
def resolver(monkeypatch):
    """Names resolve to what `resolver.answers[name]` says (one answer per lookup, the last one repeating; an
    answer is an address or a list of them); every lookup is counted. Other names resolve as usual."""
    real = socket.getaddrinfo
    answers: dict[str, list[str]] = {}
    lookups: list[str] = []

    def fake(host, port, family=0, type=0, proto=0, flags=0):
        if host not in answers:
            return real(host, port, family, type, proto, flags)
        lookups.append(host)
        answer = answers[host][min(len(lookups) - 1, len(answers[host]) - 1)]
        out = []
        for address in [answer] if isinstance(answer, str) else answer:
            v4 = ipaddress.ip_address(address).version == 4
            sockaddr = (address, port) if v4 else (address, port, 0, 0)
            family = socket.AF_INET if v4 else socket.AF_INET6
            out.append((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
        return out

    monkeypatch.setattr(outbound.socket, "getaddrinfo", fake)
    fake.answers, fake.lookups = answers, lookups
    return fake


@contextmanager
def server(status: int = 200, location: str = ""):
    """A loopback HTTP server that answers every request with `status` (and `Location`), recording them."""
    seen: list[tuple[str, str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            seen.append((self.command, self.path, self.headers.get("Host")))
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.seen = seen
    httpd.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_non_public_addresses_are_refused(production, address, kind):
    assert kind in address_error(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(production, address):
    assert address_error(address) == ""


def test_the_setting_allows_networks_and_only_those(production):
    production.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")]
    assert address_error("10.0.0.1") == address_error("10.200.3.4") == address_error("fd12::1") == ""
    assert address_error("::ffff:10.0.0.1") == ""  # the same address, mapped
    assert "private" in address_error("192.168.1.1") and "private" in address_error("fc00::1")
    assert "link-local" in address_error("169.254.169.254") and "loopback" in address_error("127.0.0.1")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local"),
        ("http://10.0.0.1/hook", "10.0.0.1 is a private"),
        ("http://localhost:6379/", "localhost resolves to 127.0.0.1"),  # Redis answers there
        ("http://[::1]:8080/", "::1 is a loopback"),
        ("http://[::ffff:169.254.169.254]/", "is a link-local"),
        ("http://0.0.0.0:8000/", "unspecified"),
    ],
)
def test_urlopen_refuses_before_connecting(production, monkeypatch, url, named):
    def no_connection(*args, **kwargs):
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(outbound.socket, "socket", no_connection)
    with pytest.raises(OutboundRefused, match=named.replace(".", r"\.").replace("[", r"\[")):
        urlopen(url, timeout=2)
    assert named.split(" is ")[0].split(" resolves")[0] in url_error(url)


def test_a_name_resolving_to_a_private_address_is_refused(production, resolver):
    resolver.answers["hooks.internal.example"] = ["10.1.2.3"]
    with pytest.raises(OutboundRefused, match=r"hooks\.internal\.example resolves to 10\.1\.2\.3, a private"):
        urlopen("https://hooks.internal.example/x", timeout=2)
    assert "10.1.2.3" in url_error("https://hooks.internal.example/x")
    # One private address among public ones is enough to refuse.
    resolver.answers["mixed.example"] = [["8.8.8.8", "192.168.0.7"]]
    assert "mixed.example resolves to 192.168.0.7, a private" in url_error("http://mixed.example/")
    resolver.answers["public.example"] = [["8.8.8.8", "2606:4700:4700::1111"]]
    assert url_error("http://public.example/") == ""


def test_the_address_checked_is_the_address_connected_to(production, resolver):
    """DNS rebinding: the first lookup of a name answers an allowed address, later ones a private one. The
    connection goes to the address of the one lookup that was checked, with the name in the Host header."""
    production.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]
    resolver.answers["rebind.example"] = ["127.0.0.1", "10.0.0.1"]
    with server() as httpd:
        with urlopen(f"http://rebind.example:{httpd.port}/metrics", timeout=5) as response:
            assert response.status == 200 and response.read() == b"ok"
        assert httpd.seen == [("GET", "/metrics", f"rebind.example:{httpd.port}")]
    assert resolver.lookups == ["rebind.example"]
    # The next connection looks up again, gets the private address and is refused.
    with pytest.raises(OutboundRefused, match=r"rebind\.example resolves to 10\.0\.0\.1"):
        urlopen("http://rebind.example:1/metrics", timeout=5)


def test_redirects_are_never_followed(production):
    """Even to an allowed address; a redirect to a private one would otherwise reach it."""
    production.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]
    with server(302, location="http://10.0.0.1/internal") as httpd:
        with pytest.raises(OutboundRefused, match=r"a redirect to http://10\.0\.0\.1/internal: redirects are not"):
            urlopen(f"http://127.0.0.1:{httpd.port}/hook", timeout=5)
        assert len(httpd.seen) == 1
    with server(307, location="/elsewhere") as httpd:
        with pytest.raises(OutboundRefused, match="redirects are not followed"):
            urlopen(f"http://127.0.0.1:{httpd.port}/hook", timeout=5)
        assert [path for _, path, _ in httpd.seen] == ["/hook"]


def test_no_proxy_from_the_environment_makes_the_connection(production, monkeypatch):
    """A proxy would connect to the target itself, unchecked; the policy's requests never use one."""
    production.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]
    with server(200) as target, server(200) as proxy:
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        with urlopen(f"http://127.0.0.1:{target.port}/x", timeout=5) as response:
            assert response.status == 200
        assert proxy.seen == [] and len(target.seen) == 1


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://example.com/x", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http://user:pw@example.com/", "user name or password"),
        ("http://example.com:99999/", "not a valid URL"),
    ],
)
def test_url_error_names_the_problem(production, url, problem):
    assert problem in url_error(url)


def test_urlopen_refuses_other_schemes(production):
    with pytest.raises(OutboundRefused, match="not an http"):
        urlopen("file:///etc/passwd", timeout=1)


def test_a_host_with_placeholders_is_left_to_the_call(production):
    assert url_error("http://node.x.svc:9400/metrics", resolve_names=False) == ""
    assert "loopback" in url_error("http://localhost:9400/metrics", resolve_names=False)
    assert "private" in url_error("http://10.0.0.9:9400/metrics", resolve_names=False)


def _certificate(tmp_path, name: str) -> tuple[str, str]:
    import shutil
    import subprocess

    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    argv += ["-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={name}"]
    subprocess.run(
        [*argv, "-addext", f"subjectAltName=DNS:{name}"],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


@contextmanager
def tls_server(cert: str, key: str):
    """An HTTPS server on loopback that records the SNI name each handshake sent."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    with server() as httpd:
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        httpd.sni = names
        yield httpd


def test_tls_checks_the_name_and_sends_it_while_connecting_to_the_checked_address(
    production, resolver, tmp_path, monkeypatch
):
    """The connection goes to the pinned address, yet SNI and the certificate check use the URL's name, for
    urllib (webhooks, telemetry, slurmrestd) and urllib3 (the Kubernetes client)."""
    import ssl
    import urllib.error

    cert, key = _certificate(tmp_path, "api.example")
    production.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]
    resolver.answers["api.example"] = ["127.0.0.1"]
    resolver.answers["other.example"] = ["127.0.0.1"]
    monkeypatch.setattr(ssl, "_create_default_https_context", lambda: ssl.create_default_context(cafile=cert))
    with tls_server(cert, key) as httpd:
        with urlopen(f"https://api.example:{httpd.port}/hook", timeout=5) as response:
            assert response.status == 200
        assert httpd.sni == ["api.example"] and httpd.seen[-1][2] == f"api.example:{httpd.port}"
        with pytest.raises(urllib.error.URLError, match="certificate verify failed"):
            urlopen(f"https://other.example:{httpd.port}/hook", timeout=5)  # the same address, another name
        manager = outbound.pin_pool_manager(urllib3.PoolManager(ca_certs=cert))
        assert manager.request("GET", f"https://api.example:{httpd.port}/apis", retries=False).status == 200
        assert httpd.sni[-1] == "api.example" and httpd.seen[-1][2] == f"api.example:{httpd.port}"
    assert resolver.lookups.count("api.example") == 2  # one lookup per connection, none by urllib or urllib3


def test_urllib3_connections_are_checked(production):
    manager = outbound.pin_pool_manager(urllib3.PoolManager())
    with pytest.raises(OutboundRefused, match=r"169\.254\.169\.254 is a link-local"):
        manager.request("GET", "http://169.254.169.254/latest/meta-data/", retries=False)
    with pytest.raises(OutboundRefused, match="proxy"):
        outbound.pin_pool_manager(urllib3.ProxyManager("http://proxy.example:3128"))
