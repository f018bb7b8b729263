"""A minimal OIDC issuer on 127.0.0.1 (discovery document and JWKS over real HTTP, a key made here) for tests that
cannot use the real provider of tests/oidc (whose fixture starts the live server, which flushes the database).
It signs CI-style ID tokens with its key; the console fetches its keys as from any issuer."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


class TinyIssuer:
    def __init__(self):
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        self.jwks = {"keys": [{**public, "kid": "tiny", "alg": "RS256", "use": "sig"}]}
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                documents = {
                    "/.well-known/openid-configuration": {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"},
                    "/jwks": issuer.jwks,
                }
                body = json.dumps(documents.get(self.path, {})).encode()
                self.send_response(200 if self.path in documents else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def token(self, **claims) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "iat": now, "exp": now + 300, **claims}
        return jwt.encode(payload, self._key, algorithm="RS256", headers={"kid": "tiny"})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
