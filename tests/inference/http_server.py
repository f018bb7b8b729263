"""A real local HTTP server for engine /metrics tests (ports 8780-8799 only): answers, stalls, or goes away."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTS = range(8780, 8800)


@contextmanager
def serve():
    """`server.routes[path] = text` answers 200 with it; `server.delay` stalls every answer that many seconds."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            time.sleep(server.delay)
            body = server.routes.get(self.path)
            data = (body if body is not None else "not found\n").encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = None
    for port in PORTS:
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            break
        except OSError:
            continue
    assert server is not None, "no free port in 8780-8799"
    server.daemon_threads = True
    server.routes, server.delay = {}, 0.0
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stopped = False

    def stop():
        nonlocal stopped
        if not stopped:
            server.shutdown()
            server.server_close()
            stopped = True

    server.stop = stop
    try:
        yield server
    finally:
        stop()
