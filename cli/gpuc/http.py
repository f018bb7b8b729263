"""The console's REST API over httpx, with the retries a CI job needs (docs/cli.md, "Retries").

What is retried, with exponential backoff and jitter (or the server's Retry-After, when it sends one):
- idempotent requests (GET, and a submission that carries an Idempotency-Key: the console returns the same
  workload for a repeated key) on a connection error, a timeout, 429 and 5xx (not 501 or 505);
- any other request only where it surely did nothing: the connection could not be made, or 429 (the rate limit
  refuses a request before any view runs).
A 503 answered by the token exchange ("temporarily_unavailable", the issuer's keys cannot be read now) is retried
too: the exchange starts no work, and the console asks the pipeline to retry rather than fail (docs/sso.md).
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

import httpx

from gpuc import __version__
from gpuc.errors import FAILED, USAGE, ApiError, GpucError

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 507, 508, 509, 520, 521, 522, 523, 524})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
DEFAULT_RETRIES = 5
BASE_DELAY_S = 0.5
MAX_DELAY_S = 30.0
MAX_RETRY_AFTER_S = 300.0


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise GpucError(f"{name} must be a number, not {os.environ[name]!r}.") from None


def backoff_delay(attempt: int, base: float = BASE_DELAY_S, cap: float = MAX_DELAY_S, rng=random.random) -> float:
    """The wait before retry `attempt` (1, 2, ...): base × 2^(attempt-1), capped, with "equal jitter" (half
    fixed, half random) so that many CI jobs failing at once do not come back in step."""
    ceiling = min(cap, base * (2 ** (attempt - 1)))
    return ceiling / 2 + rng() * ceiling / 2


def retry_after(response: httpx.Response) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None when absent or unreadable."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return min(max(when.timestamp() - time.time(), 0.0), MAX_RETRY_AFTER_S)


class Api:
    """One console: its base URL and a bearer token (None for the token exchange)."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        request_id: str | None = None,
        retries: int | None = None,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.request_id = request_id
        self.retries = int(_env_number("GPUC_RETRIES", DEFAULT_RETRIES)) if retries is None else retries
        self.base_delay = _env_number("GPUC_RETRY_BASE_S", BASE_DELAY_S)
        self.sleep = sleep
        self.note = note or (lambda text: print(f"gpuc: {text}", file=sys.stderr, flush=True))
        headers = {"User-Agent": f"gpuc/{__version__}", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if request_id:
            headers["X-Request-ID"] = request_id
        # trust_env: a CI runner's HTTPS_PROXY / NO_PROXY and SSL_CERT_FILE apply, as they do for curl.
        self.client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0), trust_env=True)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------------------------------------

    def get(self, path: str, params: dict | None = None) -> Any:
        return self.json("GET", path, params=params)

    def post(self, path: str, body: dict | None = None, *, headers: dict | None = None, idempotent: bool = False):
        return self.json("POST", path, body=body, headers=headers, idempotent=idempotent)

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise GpucError(
                f"{method} {path} answered {response.status_code} with a body that is not JSON "
                f"({response.headers.get('content-type', 'no content type')}): is {self.url} the console?",
                FAILED,
            ) from None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        body: dict | None = None,
        form: dict | None = None,
        headers: dict | None = None,
        idempotent: bool | None = None,
        retry_503: bool = False,
    ) -> httpx.Response:
        """Send one request, retrying as the module says; an error answer raises ApiError."""
        method = method.upper()
        safe = method in IDEMPOTENT_METHODS if idempotent is None else idempotent
        content = None
        send_headers = dict(headers or {})
        if body is not None:
            # YAML may hold dates; the API takes them as ISO strings.
            content = json.dumps(body, default=str).encode()
            send_headers["Content-Type"] = "application/json"
        clean = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        attempt = 0
        while True:
            try:
                response = self.client.request(
                    method, self.url + path, params=clean, content=content, data=form, headers=send_headers
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # never reached the console: always safe
                error: Exception = exc
                response = None
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                if not safe:
                    raise GpucError(
                        f"{method} {path}: {_describe(exc)}; not retried (the request may have been carried out: "
                        "check before running it again)",
                        FAILED,
                    ) from None
                error = exc
                response = None
            except httpx.HTTPError as exc:  # an invalid URL, unsupported protocol, ...
                raise GpucError(f"{method} {self.url}{path}: {_describe(exc)}") from None
            if response is not None:
                retryable = response.status_code == 429 or (
                    response.status_code in RETRY_STATUSES and (safe or (retry_503 and response.status_code == 503))
                )
                if 300 <= response.status_code < 400:  # httpx follows none: a POST must not silently become a GET
                    where = response.headers.get("Location", "elsewhere")
                    raise GpucError(
                        f"{method} {self.url}{path} was redirected ({response.status_code}) to {where}: set the "
                        "console URL (--url, GPUC_URL) to where it points",
                        USAGE,
                    )
                if response.status_code < 400:
                    return response
                if not retryable or attempt >= self.retries:
                    raise _api_error(response, method, path)
                wait = retry_after(response)
                why = f"HTTP {response.status_code}"
            else:
                if attempt >= self.retries:
                    raise GpucError(
                        f"{method} {self.url}{path}: {_describe(error)} (gave up after {attempt + 1} attempts)", FAILED
                    )
                wait = None
                why = _describe(error)
            attempt += 1
            delay = wait if wait is not None else backoff_delay(attempt, self.base_delay)
            self.note(f"{why} from {method} {path}; retry {attempt} of {self.retries} in {delay:.1f} s")
            self.sleep(delay)

    @contextmanager
    def stream(self, path: str, params: dict | None = None) -> Iterator[httpx.Response]:
        """A streamed GET (logs). Connection errors, 429 and 5xx before the body starts are retried like any GET;
        once the body flows, an error ends the stream (the caller decides what to do)."""
        clean = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        # No read timeout: a followed log may be quiet for a long time between lines.
        timeout = httpx.Timeout(30.0, connect=10.0, read=None)
        attempt = 0
        while True:
            request = self.client.build_request(
                "GET", self.url + path, params=clean, headers={"Accept": "text/plain"}, timeout=timeout
            )
            try:
                response = self.client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                if attempt >= self.retries:
                    raise GpucError(f"GET {self.url}{path}: {_describe(exc)}", FAILED) from None
                wait, why = None, _describe(exc)
            else:
                if response.status_code < 400:
                    try:
                        yield response
                    finally:
                        response.close()
                    return
                response.read()
                response.close()
                if response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    raise _api_error(response, "GET", path)
                wait, why = retry_after(response), f"HTTP {response.status_code}"
            attempt += 1
            delay = wait if wait is not None else backoff_delay(attempt, self.base_delay)
            self.note(f"{why} from GET {path}; retry {attempt} of {self.retries} in {delay:.1f} s")
            self.sleep(delay)

    def pages(self, path: str, params: dict | None = None, limit: int | None = None) -> list[dict]:
        """Every row of a paginated list (page by page, by number), or the first `limit`."""
        rows: list[dict] = []
        page = 1
        size = min(limit or 1000, 1000)
        while True:
            data = self.get(path, {**(params or {}), "page": page, "page_size": size})
            if isinstance(data, list):  # an unpaginated list (the GPU model catalog)
                return data[:limit] if limit else data
            rows.extend(data.get("results", []))
            if not data.get("next") or (limit and len(rows) >= limit):
                return rows[:limit] if limit else rows
            page += 1


def _api_error(response: httpx.Response, method: str, path: str) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    return ApiError(
        response.status_code,
        body,
        method,
        path,
        text="" if body is not None else response.text,
        retry_after=retry_after(response),
    )


def _describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
