"""Exit codes a CI step can branch on, and the errors that carry them (docs/cli.md, "Exit codes")."""

from __future__ import annotations

OK = 0  # the command did what it was asked; a waited-for workload succeeded
FAILED = 1  # the workload failed or was preempted; or the console was unreachable / kept failing after the retries
REFUSED = 2  # the workload was cancelled or rejected; or the console refused the request (400/409 on a change)
TIMED_OUT = 3  # --timeout passed while waiting (the workload is left as it is)
USAGE = 4  # a usage error (bad arguments, unreadable file, no such workload or node) or an auth error (401/403)

# The workload states the console reports, and what each means for the exit code once it is final.
FINAL_STATES = {
    "succeeded": OK,
    "failed": FAILED,
    "preempted": FAILED,
    "cancelled": REFUSED,
    "rejected": REFUSED,
}


class GpucError(Exception):
    """A failure to report on stderr and exit with `code`."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class ApiError(GpucError):
    """The console answered with an error: its `message`, `code`, `fields` and `request_id` (docs/api.md, Errors)."""

    def __init__(
        self, status: int, body: object, method: str, path: str, text: str = "", retry_after: float | None = None
    ) -> None:
        self.status = status
        self.retry_after = retry_after  # seconds, when the answer said (Retry-After)
        self.body = body if isinstance(body, dict) else {}
        self.method = method
        self.path = path
        message = self.body.get("message") or self.body.get("error_description") or self.body.get("error")
        if not message:
            snippet = " ".join(text.split())[:200]
            message = f"HTTP {status} from {method} {path}" + (f": {snippet}" if snippet else "")
        super().__init__(str(message), exit_code_for(status, method))

    @property
    def api_code(self) -> str:
        return str(self.body.get("code") or self.body.get("error") or "")

    @property
    def fields(self) -> dict:
        fields = self.body.get("fields")
        return fields if isinstance(fields, dict) else {}

    @property
    def request_id(self) -> str:
        return str(self.body.get("request_id") or "")

    @property
    def detail(self) -> object:
        return self.body.get("detail")


def exit_code_for(status: int, method: str) -> int:
    """401/403 and a missing row are usage or auth errors; a refused change (400/409) is a rejection; a read with
    bad parameters is a usage error; the rest (5xx after the retries, 429 after the retries) a failure."""
    if status in (401, 403, 404):
        return USAGE
    if 400 <= status < 500 and status != 429:
        return REFUSED if method.upper() not in ("GET", "HEAD") else USAGE
    return FAILED


def describe(error: GpucError) -> str:
    """The error as a person reads it: the API's message, then each field's messages, one a line."""
    lines = [f"gpuc: error: {error.message}"]
    if isinstance(error, ApiError):
        code = f", {error.api_code}" if error.api_code else ""
        lines[0] += f" (HTTP {error.status}{code})"
        for name, messages in error.fields.items():
            for message in _flat(messages):
                lines.append(f"  {name}: {message}")
        detail = error.detail
        if isinstance(detail, dict) and isinstance(detail.get("operation"), dict):
            op = detail["operation"]
            lines.append(f"  operation #{op.get('id')} {op.get('kind')} is {op.get('status')} (by {op.get('actor')})")
        if isinstance(detail, dict):  # where else to read what the console cannot give (logs_gone, ...)
            if detail.get("url"):
                lines.append(f"  see: {detail['url']}")
            if detail.get("command"):
                lines.append(f"  on the cluster: {detail['command']}")
        if error.request_id:
            lines.append(f"  request id: {error.request_id}")
    return "\n".join(lines)


def _flat(messages: object) -> list[str]:
    if isinstance(messages, (list, tuple)):
        out: list[str] = []
        for item in messages:
            out.extend(_flat(item))
        return out
    if isinstance(messages, dict):  # nested field errors: "spec": {"workers": ["..."]}
        return [f"{key}: {m}" for key, value in messages.items() for m in _flat(value)]
    return [str(messages)]
