"""gpuc's retries, through a tiny HTTP proxy in front of the live server that fails on cue, as a load balancer or a
proxy between a CI runner and the console does: 502/503 while the console restarts, 429 with Retry-After, a lost
answer to a POST the console did carry out. The console itself is real; only the network in between misbehaves."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from apps.workloads.models import Workload
from tests.cli.conftest import write_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


class FlakyProxy:
    """Forwards each request to `upstream`, unless the next step of the script says otherwise:
    ("fail", status, headers): answer that without forwarding (an HTML body, as a proxy's error page);
    ("lose", status): forward, then answer `status` instead of the console's answer (the answer was lost)."""

    def __init__(self, upstream: str, script: list[tuple]) -> None:
        self.upstream = urlsplit(upstream)
        self.script = list(script)
        self.seen: list[tuple[str, str, str]] = []  # method, path, what the proxy did
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                step = proxy.script.pop(0) if proxy.script else ("forward",)
                if step[0] == "fail":
                    proxy.seen.append((self.command, self.path, f"fail {step[1]}"))
                    return self.answer(step[1], {"Content-Type": "text/html", **step[2]}, b"<html>busy</html>")
                status, headers, content = proxy.forward(self.command, self.path, self.headers, body)
                if step[0] == "lose":
                    proxy.seen.append((self.command, self.path, f"lost {status}, answered {step[1]}"))
                    return self.answer(step[1], {"Content-Type": "text/html"}, b"<html>bad gateway</html>")
                proxy.seen.append((self.command, self.path, f"forwarded {status}"))
                return self.answer(status, headers, content)

            def answer(self, status, headers, content):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def forward(self, method, path, headers, body):
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
        sent["Host"] = self.upstream.netloc
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        content = response.read()
        kept = {k: v for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP}
        connection.close()
        return response.status, kept, content

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_a_submission_whose_answer_was_lost_is_retried_and_creates_one_workload(gpuc, console):
    job = write_job(gpuc.home, "retried", as_json=True)
    with FlakyProxy(console.url, [("lose", 502)]) as proxy:
        done = gpuc("submit", "-f", job, "--idempotency-key", "ci-4711-train", "-o", "json",
                    env=gpuc.env(GPUC_URL=proxy.url))  # fmt: skip
    assert done.code == 0, done
    assert [what for _, _, what in proxy.seen] == ["lost 201, answered 502", "forwarded 200"], proxy.seen
    assert "HTTP 502 from POST /api/v1/workloads/; retry 1 of 5" in done.stderr, done
    assert "already submitted (same Idempotency-Key)" in done.stderr
    workload = Workload.objects.get()
    assert (done.json()["id"], workload.name, workload.idempotency_key) == (workload.pk, "retried", "ci-4711-train")


def test_503_then_429_with_retry_after_then_the_answer(gpuc, console):
    script = [("fail", 503, {}), ("fail", 429, {"Retry-After": "1"})]
    with FlakyProxy(console.url, script) as proxy:
        started = time.monotonic()
        listed = gpuc("ls", "-o", "json", env=gpuc.env(GPUC_URL=proxy.url))
        took = time.monotonic() - started
    assert listed.code == 0 and listed.json() == [], listed
    assert [what for _, _, what in proxy.seen] == ["fail 503", "fail 429", "forwarded 200"]
    assert "HTTP 503 from GET /api/v1/workloads/; retry 1 of 5 in " in listed.stderr, listed
    assert "HTTP 429 from GET /api/v1/workloads/; retry 2 of 5 in 1.0 s" in listed.stderr, listed  # Retry-After
    assert took >= 1.0


def test_a_change_without_an_idempotency_key_is_not_retried_on_a_5xx(gpuc, console):
    job = write_job(gpuc.home, "unkeyed")
    with FlakyProxy(console.url, [("fail", 503, {})]) as proxy:
        refused = gpuc("submit", "-f", job, env=gpuc.env(GPUC_URL=proxy.url))
    assert refused.code == 1, refused
    assert "retry" not in refused.stderr and "HTTP 503 from POST /api/v1/workloads/" in refused.stderr, refused
    assert len(proxy.seen) == 1 and not Workload.objects.exists()
    # 429 is different: the rate limit refuses a request before anything is done, so even this one is retried.
    with FlakyProxy(console.url, [("fail", 429, {"Retry-After": "0"})]) as proxy:
        done = gpuc("submit", "-f", job, env=gpuc.env(GPUC_URL=proxy.url))
    assert done.code == 0, done
    assert [what for _, _, what in proxy.seen] == ["fail 429", "forwarded 201"]
    assert Workload.objects.count() == 1


def test_an_unreachable_console_gives_up_after_the_retries(gpuc):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = gpuc("ls", env=gpuc.env(GPUC_URL=f"http://127.0.0.1:{port}", GPUC_RETRIES="2"))
    assert gone.code == 1, gone
    assert gone.stderr.count("ConnectError") == 3 and "gave up after 3 attempts" in gone.stderr, gone
