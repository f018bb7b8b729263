"""gpuc's own pieces, without a console: the CI-derived key, backoff and Retry-After, the job file, the error
text and exit codes, the progress line, the config file; and the package's promises (no Django, Python 3.9)."""

from __future__ import annotations

import ast
import io
import stat
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from tests.cli.conftest import CLI_DIR

sys.path.insert(0, str(CLI_DIR))

from gpuc import ci, config, errors, http, main, waiting

PACKAGE = CLI_DIR / "gpuc"


def test_the_default_idempotency_key_per_ci_system():
    assert ci.default_idempotency_key({}, "training", "x") is None
    gitlab = {"CI_PROJECT_ID": "77", "CI_JOB_ID": "4711", "GITHUB_RUN_ID": "ignored: GitLab first"}
    assert ci.default_idempotency_key(gitlab, "training", "smoke") == "gpuc:gitlab:77:4711:training:smoke"
    github = {"GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_JOB": "train"}
    assert ci.default_idempotency_key(github, "inference", "chat") == "gpuc:github:123:2:train:inference:chat"
    assert ci.default_idempotency_key({"BUILDKITE_JOB_ID": "0190-ab"}, "training", "t") == (
        "gpuc:buildkite:0190-ab:training:t"
    )
    partial = {"GITHUB_RUN_ID": "123", "GITHUB_JOB": "train"}  # no attempt: not enough to tell runs apart
    assert ci.default_idempotency_key(partial, "training", "t") is None
    long = ci.default_idempotency_key({"BUILDKITE_JOB_ID": "j" * 300}, "training", "t")
    assert len(long) == ci.MAX_KEY and long != ci.default_idempotency_key(
        {"BUILDKITE_JOB_ID": "j" * 299}, "training", "t"
    )


def test_backoff_doubles_within_its_cap_with_jitter():
    assert http.backoff_delay(1, 0.5, rng=lambda: 0.0) == 0.25
    assert http.backoff_delay(1, 0.5, rng=lambda: 1.0) == 0.5
    assert http.backoff_delay(4, 0.5, rng=lambda: 1.0) == 4.0
    assert http.backoff_delay(20, 0.5, cap=30, rng=lambda: 1.0) == 30.0


def test_retry_after_seconds_or_a_date():
    def response(value):
        return httpx.Response(503, headers={"Retry-After": value} if value is not None else {})

    assert http.retry_after(response("7")) == 7.0
    assert http.retry_after(response(None)) is None
    assert http.retry_after(response("soon")) is None
    assert http.retry_after(response("100000")) == http.MAX_RETRY_AFTER_S
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    assert 15 <= http.retry_after(response(later)) <= 20


def test_a_job_file_is_the_api_body_or_a_bare_spec(tmp_path):
    body = tmp_path / "job.yaml"
    body.write_text("kind: inference\nspec:\n  name: chat\n  replicas: 2\n")
    assert main.read_body(str(body), None) == {"kind": "inference", "spec": {"name": "chat", "replicas": 2}}
    bare = tmp_path / "bare.json"
    bare.write_text('{"name": "t", "workers": 1}')
    assert main.read_body(str(bare), None) == {"kind": "training", "spec": {"name": "t", "workers": 1}}
    assert main.read_body(str(bare), "inference")["kind"] == "inference"
    with pytest.raises(errors.GpucError) as clash:
        main.read_body(str(body), "training")
    assert clash.value.code == errors.USAGE
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [\n")
    with pytest.raises(errors.GpucError, match="neither YAML nor JSON"):
        main.read_body(str(broken), None)


def test_errors_print_the_message_and_every_field():
    error = errors.ApiError(
        400,
        {"message": "Invalid input.", "code": "invalid", "fields": {"spec": {"workers": ["too many"]}, "name": ["x"]},
         "request_id": "r-1"},
        "POST",
        "/api/v1/workloads/",
    )  # fmt: skip
    assert errors.describe(error) == (
        "gpuc: error: Invalid input. (HTTP 400, invalid)\n  spec: workers: too many\n  name: x\n  request id: r-1"
    )
    assert error.code == errors.REFUSED
    proxy_page = errors.ApiError(502, None, "GET", "/api/v1/me/", text="<html> Bad   gateway </html>")
    assert proxy_page.message == "HTTP 502 from GET /api/v1/me/: <html> Bad gateway </html>"
    assert proxy_page.code == errors.FAILED
    codes = {(s, m): errors.exit_code_for(s, m) for s in (400, 401, 403, 404, 409, 429, 500) for m in ("GET", "POST")}
    assert codes == {
        (400, "GET"): 4, (400, "POST"): 2, (401, "GET"): 4, (401, "POST"): 4, (403, "GET"): 4, (403, "POST"): 4,
        (404, "GET"): 4, (404, "POST"): 4, (409, "GET"): 4, (409, "POST"): 2, (429, "GET"): 1, (429, "POST"): 1,
        (500, "GET"): 1, (500, "POST"): 1,
    }  # fmt: skip
    assert errors.FINAL_STATES == {"succeeded": 0, "failed": 1, "preempted": 1, "cancelled": 2, "rejected": 2}


def test_usage_errors_exit_4_not_argparse_s_2(capsys):
    with pytest.raises(SystemExit) as exited:
        main.main(["submit", "--timeout", "soon", "-f", "x"])
    assert exited.value.code == errors.USAGE
    assert "not a number" in capsys.readouterr().err


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_the_progress_line_updates_in_place_on_a_terminal_and_by_change_in_a_log():
    log = _Stream(False)
    progress = waiting.Progress(log, clock=iter(range(100)).__next__)
    for state in ("pending", "pending", "running", "running", "succeeded"):
        progress.show("#1 x", state, "why" if state == "pending" else "")
    progress.done()
    assert log.getvalue() == "[1s] #1 x: pending: why\n[3s] #1 x: running\n[5s] #1 x: succeeded\n"
    tty = _Stream(True)
    progress = waiting.Progress(tty, clock=iter(range(100)).__next__)
    progress.show("#1 x", "pending", "a long reason")
    progress.show("#1 x", "running")
    progress.done()
    assert tty.getvalue() == ("\r[0:01] #1 x: pending: a long reason" + "\r[0:02] #1 x: running" + " " * 15 + "\n"), (
        repr(tty.getvalue())
    )


def test_waiting_gives_up_at_the_timeout_with_exit_3():
    now = [0.0]
    polls = []

    def fetch():
        polls.append(now[0])
        return {"id": 5, "name": "x", "state": "pending", "state_reason": "queued"}

    def sleep(seconds):
        now[0] += seconds

    with pytest.raises(errors.GpucError) as timed_out:
        waiting.wait_for_workload(fetch, timeout_s=10, interval_s=4, progress=waiting.Progress(_Stream(False)),
                                  sleep=sleep, clock=lambda: now[0])  # fmt: skip
    assert timed_out.value.code == errors.TIMED_OUT
    assert polls == [0.0, 4.0, 8.0, 10.0]


def test_the_config_file_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUC_CONFIG", str(tmp_path / "dir" / "config.json"))
    path = config.save_file({"url": "https://c", "token": "gpuc_x"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.chmod(0o644)  # a file someone loosened is made private again when rewritten
    config.save_file({"url": "https://c", "token": "gpuc_y"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    monkeypatch.setenv("GPUC_URL", "https://from-env")
    monkeypatch.delenv("GPUC_TOKEN", raising=False)
    target = config.resolve(None, None)
    assert (target.url, target.token, target.url_from, target.token_from) == ("https://from-env", "gpuc_y", "GPUC_URL",
                                                                              "config")  # fmt: skip
    with pytest.raises(errors.GpucError, match="must start with http"):
        config.resolve("console.example.com", None)


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text(), feature_version=(3, 9))  # also: nothing newer than Python 3.9's syntax
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_package_needs_only_httpx_and_pyyaml_and_runs_on_python_3_9():
    modules = sorted(PACKAGE.glob("*.py"))
    assert modules
    third_party = set()
    for module in modules:
        third_party |= _imports(module) - set(sys.stdlib_module_names) - {"gpuc", "__future__"}
        source = module.read_text()
        if module.name not in {"__init__.py", "__main__.py"}:
            # Annotations such as `str | None` are not evaluated on 3.9 only under this import.
            assert "from __future__ import annotations" in source, module
    assert third_party == {"httpx", "yaml"}
    pyproject = (CLI_DIR / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.9"' in pyproject and '"httpx==0.28.1"' in pyproject


def test_why_words_a_reservation_as_the_workload_page_does():
    workload = {"gpu_model": "h100", "cluster": "sim-a"}
    held = {"reserved_gpus": 8.0, "expected_start": "2026-12-01T15:00:00Z", "holds_cluster": True}
    assert main.reservation(workload, held) == (
        "holds 8 × h100; expected start 2026-12-01T15:00:00Z · borrowing work on sim-a that would run past it waits"
    )
    assert main.reservation(workload, {**held, "holds_cluster": False}).endswith("expected start 2026-12-01T15:00:00Z")
    assert main.reservation(workload, {"reserved_gpus": 8.0, "expected_start": None}) == (
        "first in its queue; expected start not known (it waits for work without a runtime limit, or for a reclaim)"
    )


def test_logs_stream_as_they_come_with_the_contract_s_parameters(tmp_path):
    """The client side of GET /api/v1/workloads/{id}/logs/?tail=N&follow=1&worker=K (text/plain, chunked, docs/logs.md):
    what it asks for, and that each chunk reaches stdout when it arrives, not at the end, against a stand-in that
    holds the second chunk back (tests/cli/test_logs.py reads the live console's)."""
    import json as jsonlib
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked = []
    release = threading.Event()

    class Logs(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            asked.append((self.path, self.headers.get("Authorization")))
            if not self.path.startswith("/api/v1/workloads/7/logs/"):  # the workload: its run ended with the log
                body = jsonlib.dumps({"id": 7, "name": "x", "state": "succeeded"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i, line in enumerate(("step 1 loss 2.31\n", "step 2 loss 1.97\n", "done\n")):
                if i == 1:
                    release.wait(10)  # the second chunk only once the test saw the first one printed
                data = line.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Logs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(CLI_DIR),
        "GPUC_TOKEN": "gpuc_t",
        "GPUC_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "GPUC_CONFIG": str(tmp_path / "c.json"),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuc", "logs", "7", "-f", "--tail", "5", "--worker", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        first = process.stdout.readline()
        release.set()
        rest, errors_text = process.communicate(timeout=30)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    assert process.returncode == 0, errors_text
    assert first == b"step 1 loss 2.31\n"  # printed while the stream was still open
    assert rest == b"step 2 loss 1.97\ndone\n"
    assert asked == [
        ("/api/v1/workloads/7/logs/?tail=5&follow=1&worker=1", "Bearer gpuc_t"),
        ("/api/v1/workloads/7/", "Bearer gpuc_t"),  # the stream ended: does it still run? (no: done)
    ], jsonlib.dumps(asked)


def _api(handler, retries=3):
    slept = []
    api = http.Api("https://console.test", "gpuc_t", retries=retries, sleep=slept.append, note=lambda text: None)
    api.client = httpx.Client(transport=httpx.MockTransport(handler), headers=api.client.headers)
    return api, slept


def test_what_is_retried_and_what_is_not():
    calls = []

    def timing_out(request):
        calls.append(request.method)
        raise httpx.ReadTimeout("the answer never came", request=request)

    api, slept = _api(timing_out)
    with pytest.raises(errors.GpucError) as read:
        api.get("/api/v1/workloads/")
    assert read.value.code == errors.FAILED and calls == ["GET"] * 4 and len(slept) == 3
    calls.clear()
    with pytest.raises(errors.GpucError) as posted:  # it may have been carried out: never sent again
        api.post("/api/v1/workloads/1/cancel/", {"reason": "x"})
    assert calls == ["POST"] and "not retried" in posted.value.message
    calls.clear()
    with pytest.raises(errors.GpucError):
        api.post("/api/v1/workloads/", {"kind": "training", "spec": {}}, idempotent=True)  # a keyed submission
    assert calls == ["POST"] * 4

    answers = iter([httpx.Response(502), httpx.Response(201, json={"id": 1})])
    api, slept = _api(lambda request: next(answers))
    assert api.post("/api/v1/workloads/", {}, idempotent=True) == {"id": 1} and len(slept) == 1
    api, _ = _api(lambda request: httpx.Response(503, json={"message": "down", "code": "x"}))
    with pytest.raises(errors.ApiError) as unsafe:
        api.post("/api/v1/nodes/1/cordon/", {"reason": "x"})
    assert unsafe.value.status == 503
    sent = []
    api, slept = _api(lambda request: sent.append(request) or httpx.Response(400, json={"message": "Invalid input."}))
    with pytest.raises(errors.ApiError):
        api.get("/api/v1/workloads/", {"state": "nope", "tenant": None})
    assert len(sent) == 1 and not slept  # a 400 is an answer, not a hiccup
    assert sent[0].url.query == b"state=nope" and sent[0].headers["Authorization"] == "Bearer gpuc_t"


def test_a_redirect_is_reported_not_followed():
    api, _ = _api(lambda request: httpx.Response(301, headers={"Location": "https://console.test/api/v1/me/"}))
    with pytest.raises(errors.GpucError) as moved:
        api.post("/api/v1/workloads/", {})
    assert moved.value.code == errors.USAGE
    assert "redirected (301) to https://console.test/api/v1/me/" in str(moved.value)
