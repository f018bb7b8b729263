"""Requests to the API server through the official client, with paging and one error mapping.

Every call goes through `KubeApi.request`: the official client's ApiClient (authentication, TLS, the
connection pool), JSON read without the client's model deserialisation (much faster on 20,000 pods),
and errors translated into the backend's retryable / permanent errors with a message that says what
was being done, what the API server answered and what to check.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.backends.base import BackendError, NotFoundError, PermanentBackendError, RetryableBackendError
from apps.core.outbound import OutboundRefused

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
FIELD_MANAGER = "gpu-console"


def _status_of(exc: ApiException) -> dict:
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    return body if isinstance(body, dict) else {}


def _not_kubernetes(cluster: str, why: object) -> PermanentBackendError:
    return PermanentBackendError(
        f"cluster {cluster}: read the server version: the answer to /version is not a Kubernetes API server's "
        f"({why}); check api_url"
    )


def translate(exc: Exception, what: str, cluster: str) -> BackendError:
    """The backend error for a failed call (`what`: e.g. "cordon node gpu-1").

    API errors also carry `code`, `reason` (the Status reason) and `causes`, for callers that branch on them.
    """
    where = f"cluster {cluster}: {what}"
    if isinstance(exc, OutboundRefused):
        return PermanentBackendError(f"{where}: {exc}")
    if isinstance(exc, ApiException):
        status = _status_of(exc)
        code = exc.status or 0
        message = status.get("message") or exc.reason or ""
        causes = "; ".join(c.get("message", "") for c in (status.get("details") or {}).get("causes", []) if c)
        detail = f"{message} ({causes})" if causes else message
        if code == 0:
            return PermanentBackendError(f"{where}: TLS or request error: {exc.reason}; check ca_file / the kubeconfig")
        if code == 401:
            error = PermanentBackendError(
                f"{where}: the API server rejected the credentials (401 Unauthorized): check the token or "
                "kubeconfig the cluster's secret_env names"
            )
        elif code == 403:
            error = PermanentBackendError(
                f"{where}: not allowed (403 Forbidden): {detail}; the console's account needs the ClusterRole in "
                "deploy/kubernetes/base/rbac.yaml"
            )
        elif code == 404:
            error = NotFoundError(f"{where}: not found (404): {detail}")
        elif code == 409:
            retry = status.get("reason") == "Conflict"  # a stale resourceVersion; AlreadyExists is not retryable
            error = BackendError(f"{where}: conflict (409): {detail}", retryable=retry)
        elif code == 410:
            error = RetryableBackendError(f"{where}: the list expired while paging (410 Gone): {detail}")
        elif code in (400, 415, 422):
            error = PermanentBackendError(f"{where}: the API server refused the request ({code}): {detail}")
        elif code == 429:
            error = RetryableBackendError(f"{where}: throttled or refused for now (429): {detail}")
        elif code >= 500:
            error = RetryableBackendError(f"{where}: the API server failed ({code}): {detail}")
        else:
            error = PermanentBackendError(f"{where}: unexpected answer {code}: {detail}")
        error.code = code
        error.reason = status.get("reason", "")
        error.causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes", []) if c]
        return error
    if isinstance(exc, urllib3.exceptions.TimeoutError) and not isinstance(exc, urllib3.exceptions.NewConnectionError):
        return RetryableBackendError(f"{where}: the API server did not answer in time ({exc})")
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        reason = exc.reason
        # NewConnectionError subclasses ConnectTimeoutError in urllib3: test for a refused connection first.
        if isinstance(reason, urllib3.exceptions.TimeoutError) and not isinstance(
            reason, urllib3.exceptions.NewConnectionError
        ):
            return RetryableBackendError(f"{where}: the API server did not answer in time ({reason})")
        return RetryableBackendError(f"{where}: cannot reach the API server at {exc.url or ''}: {reason}")
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return RetryableBackendError(f"{where}: connection to the API server failed: {exc}")
    raise exc


_HEAD = re.compile(rb'^\s*\{[^\[]*?"metadata"\s*:\s*(\{[^{}]*\})')
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]*)"')


def peek_continue(data: bytes) -> str | None:
    """A list answer's continue token from its first 2 kB ("" when its metadata has none), or None when the
    metadata is not there (then the caller reads it from the parsed answer)."""
    head = _HEAD.match(data[:2048])
    if head is None:
        return None
    token = _CONTINUE.search(head.group(1))
    return token.group(1).decode() if token else ""


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while big answers are parsed, reduced and dropped page by page.

    Parsed JSON (and what the inventory makes of it) holds no reference cycles, so a collection in the meantime
    finds nothing to free; but every one walks the objects being made (about 30,000 containers in a page of 500
    pods): for a list of 20,000 pods that was about half the time of parsing. Each page is freed by reference
    counting when the next replaces it; collection resumes afterwards (unless something else had turned it off)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class KubeApi:
    """One cluster's API server. Thin: paths in, JSON out."""

    def __init__(self, client: k8s.ApiClient, cluster_name: str, timeout: float = 30.0, page_size: int = 500):
        self.client = client
        self.cluster_name = cluster_name
        self.timeout = timeout
        self.page_size = page_size

    def request(
        self,
        method: str,
        path: str,
        what: str,
        *,
        query: dict | None = None,
        body: object = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> dict:
        data = self.request_raw(method, path, what, query=query, body=body, content_type=content_type, timeout=timeout)
        return self.decode(data, what)

    def request_raw(
        self,
        method: str,
        path: str,
        what: str,
        *,
        query: dict | None = None,
        body: object = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> bytes:
        """The answer's body, unparsed (errors translated as `request` does)."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = self.client.call_api(
                path,
                method,
                query_params=[(k, v) for k, v in (query or {}).items() if v not in (None, "")],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=self._timeout(timeout),
            )
            return response.data
        except (ApiException, urllib3.exceptions.HTTPError, OSError, OutboundRefused) as exc:
            raise translate(exc, what, self.cluster_name) from exc

    def decode(self, data: bytes, what: str) -> dict:
        try:
            return json.loads(data) if data else {}
        except ValueError as exc:
            raise RetryableBackendError(
                f"cluster {self.cluster_name}: {what}: the API server's answer is not JSON ({exc})"
            ) from exc

    def stream(self, path: str, what: str, *, query: dict | None = None, follow: bool = False):
        """GET `path` and return the open response, its body unread (a pod's log): the status is checked (an error
        is translated as `request` does), the body is the caller's to read and close. A followed stream has no read
        timeout (it is quiet while the pod is); the caller stops it (`shutdown()` from another thread)."""
        read = None if follow else self.timeout
        try:
            return self.client.call_api(
                path,
                "GET",
                query_params=[(k, v) for k, v in (query or {}).items() if v not in (None, "")],
                header_params={"Accept": "text/plain, */*"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(float(self.timeout), read),
            )
        except (ApiException, urllib3.exceptions.HTTPError, OSError, OutboundRefused) as exc:
            raise translate(exc, what, self.cluster_name) from exc

    def _timeout(self, seconds: float | None) -> tuple[float, float]:
        # (connect, read): the client ignores a plain float, and an int would be a total that cuts off a
        # slow but progressing list page.
        value = float(seconds or self.timeout)
        return (value, value)

    def get(self, path: str, what: str) -> dict:
        return self.request("GET", path, what)

    def get_or_none(self, path: str, what: str) -> dict | None:
        try:
            return self.get(path, what)
        except NotFoundError:
            return None

    def pages(self, path: str, what: str, **selectors: str) -> Iterator[list[dict]]:
        """Pages of a list (`limit` / `continue`), so a big list is never one response."""
        token = ""
        while True:
            query = {"limit": self.page_size, "continue": token, **selectors}
            answer = self.request("GET", path, what, query=query)
            yield answer.get("items") or []
            token = (answer.get("metadata") or {}).get("continue") or ""
            if not token:
                return

    def list(self, path: str, what: str, **selectors: str) -> list[dict]:
        return [item for page in self.pages(path, what, **selectors) for item in page]

    def list_at(self, path: str, what: str, **selectors: str) -> tuple[list[dict], str]:
        """The list and its resourceVersion (the first page's: a paged list is one snapshot), to watch from."""
        items: list[dict] = []
        version = ""
        for page, page_version in self.pages_at(path, what, **selectors):
            items.extend(page)
            version = page_version
        return items, version

    def pages_at(self, path: str, what: str, **selectors: str) -> Iterator[tuple[list[dict], str]]:
        """Pages of a list, each with the list's resourceVersion (the first page's: a paged list is one snapshot).

        The next page is asked for while this one is parsed and used (the server prepares it meanwhile): its
        continue token is read from the answer's head, where the API server writes `metadata` before `items`.
        A caller that keeps only what it needs of each page holds one page at a time, not the whole list."""
        version = ""

        def fetch(token: str) -> bytes:
            return self.request_raw("GET", path, what, query={"limit": self.page_size, "continue": token, **selectors})

        with ThreadPoolExecutor(1) as pool:
            page = pool.submit(fetch, "")
            while page is not None:
                data = page.result()
                token = peek_continue(data)
                page = pool.submit(fetch, token) if token else None
                answer = self.decode(data, what)
                del data
                meta = answer.get("metadata") or {}
                version = version or str(meta.get("resourceVersion") or "")
                if token is None and meta.get("continue"):  # not in the head: ask after parsing
                    page = pool.submit(fetch, meta["continue"])
                yield answer.get("items") or [], version
                del answer

    def apply(self, obj: dict, path: str, what: str, *, dry_run: bool = False) -> dict:
        """Server-side apply as the console's field manager; forced, since the console owns what it renders."""
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request("PATCH", path, what, query=query, body=obj, content_type=APPLY)

    def version(self) -> str:
        """The server's gitVersion through the client's VersionApi."""
        try:
            info = k8s.VersionApi(self.client).get_code(_request_timeout=self._timeout(None))
        except (ApiException, urllib3.exceptions.HTTPError, OSError, OutboundRefused) as exc:
            raise translate(exc, "read the server version", self.cluster_name) from exc
        except (ValueError, TypeError) as exc:  # the client's model refuses an answer without Kubernetes' fields
            raise _not_kubernetes(self.cluster_name, exc) from exc
        version = getattr(info, "git_version", None)
        if not isinstance(version, str) or not version:
            raise _not_kubernetes(self.cluster_name, "no gitVersion")
        return version
