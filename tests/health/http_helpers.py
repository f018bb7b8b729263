"""A real local HTTP server for exporter, Prometheus and webhook tests (ports 8740-8759 only)."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTS = range(8740, 8760)


@contextmanager
def serve(routes: dict | None = None):
    """Serve GET `routes` {path: (status, body)} and record POSTed JSON bodies in `server.received`."""
    routes = routes if routes is not None else {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            status, body = routes.get(self.path.split("?")[0], (404, "not found\n"))
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            server.queries.append(self.path)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            payload = json.loads(self.rfile.read(length) or b"null")
            status = routes.get("POST " + self.path, (200, "ok"))[0]
            server.received.append((self.path, self.headers.get("Content-Type"), payload))
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = None
    for port in PORTS:
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            break
        except OSError:
            continue
    assert server is not None, "no free port in 8740-8759"
    server.received, server.queries = [], []
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
