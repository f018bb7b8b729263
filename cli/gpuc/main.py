"""gpuc's commands (docs/cli.md). Each reads the console through its REST API and maps the outcome to an exit code
(gpuc/errors.py)."""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import yaml

from gpuc import __version__, ci, config
from gpuc import output as out
from gpuc.errors import (
    FAILED,
    FINAL_STATES,
    OK,
    REFUSED,
    USAGE,
    ApiError,
    GpucError,
    describe,
)
from gpuc.http import Api
from gpuc.waiting import Progress, reason_of, wait_for_operation, wait_for_workload

WORKLOADS = "/api/v1/workloads/"
NODE_ACTIONS = ("cordon", "uncordon", "drain", "resume")
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
STATES = ("pending", "admitted", "running", "succeeded", "failed", "preempted", "cancelling", "cancelled", "rejected")
NODE_STATES = ("ready", "not-ready", "down", "vanished", "unknown")


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error; 2 means "cancelled or rejected" here, so usage errors exit 4."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"gpuc: error: {message}\n")


# -- context ---------------------------------------------------------------------------------------------------------


class Context:
    """The parsed arguments and, made on first use, the API client for the console they name."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.fmt = args.output
        self._api: Api | None = None
        self.target: config.Target | None = None

    @property
    def api(self) -> Api:
        if self._api is None:
            self.target = config.resolve(self.args.url, self.args.token)
            self._api = Api(self.target.url, self.target.token, request_id=self.request_id())
        return self._api

    def request_id(self) -> str | None:
        """--request-id, else one per CI job (its audit events are then found by it), else the console's own."""
        if self.args.request_id:
            return self.args.request_id
        job = ci.ci_job(os.environ)
        if job is None:
            return None
        system, ids = job
        return re.sub(r"[^A-Za-z0-9._-]", "-", "-".join(["gpuc", system, *ids]))[:64]

    def close(self) -> None:
        if self._api is not None:
            self._api.close()

    def page_url(self, workload_id: Any) -> str:
        return f"{self.api.url}/workloads/{workload_id}/"

    def emit(self, data: Any) -> bool:
        """Print `data` as JSON or YAML when asked; False when the caller prints its table."""
        if self.fmt in ("json", "yaml"):
            out.dump(data, self.fmt)
            return True
        return False


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- login -----------------------------------------------------------------------------------------------------------


def cmd_login(ctx: Context) -> int:
    args = ctx.args
    stored = config.load_file()
    url = args.url or os.environ.get("GPUC_URL") or stored.get("url")
    if not url:
        raise GpucError("gpuc login needs the console's URL: --url https://console.example.com", USAGE)
    if not url.startswith(("http://", "https://")):
        raise GpucError(f"the console URL must start with http:// or https://, not {url!r}", USAGE)
    url = url.rstrip("/")
    expires_at = None
    if args.oidc_token_env or args.oidc_token_file:
        token, expires_in = exchange(url, _id_token(args), ctx.request_id())
        if expires_in:
            from datetime import datetime, timedelta, timezone

            expires_at = (datetime.now(timezone.utc) + timedelta(seconds=int(expires_in))).isoformat(timespec="seconds")
    else:
        token = args.token or os.environ.get("GPUC_TOKEN") or _prompt_token()
    with Api(url, token, request_id=ctx.request_id()) as api:
        me = api.get("/api/v1/me/")
    data = {"url": url, "token": token, "username": me.get("username")}
    if expires_at:
        data["expires_at"] = expires_at
    path = config.save_file(data)
    scope = ""
    if isinstance(me.get("token"), dict) and me["token"].get("tenant"):
        scope = f" ({me['token'].get('role')} on {me['token']['tenant']})"
    until = f"; the token expires at {expires_at}" if expires_at else ""
    note(f"Logged in to {url} as {me.get('username')}{scope}; saved to {path}{until}")
    return OK


def _id_token(args: argparse.Namespace) -> str:
    if args.oidc_token_env:
        value = os.environ.get(args.oidc_token_env, "").strip()
        if not value:
            raise GpucError(f"the environment variable {args.oidc_token_env} holds no ID token", USAGE)
        return value
    try:
        value = Path(args.oidc_token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise GpucError(f"cannot read the ID token from {args.oidc_token_file}: {exc.strerror}", USAGE) from None
    if not value:
        raise GpucError(f"{args.oidc_token_file} is empty", USAGE)
    return value


def exchange(url: str, id_token: str, request_id: str | None) -> tuple[str, int | None]:
    """RFC 8693 token exchange (docs/sso.md, "CI pipelines"): the CI job's OIDC ID token for a console token."""
    body = {"grant_type": GRANT, "subject_token": id_token, "subject_token_type": ID_TOKEN}
    with Api(url, None, request_id=request_id) as api:
        # Not a change of work: retried on 503 "temporarily_unavailable" (the issuer's keys are unreadable now).
        data = api.json("POST", "/api/v1/token-exchange/", body=body, retry_503=True)
    token = (data or {}).get("access_token")
    if not token:
        raise GpucError(f"the token exchange at {url} answered without an access_token", FAILED)
    return token, data.get("expires_in")


def _prompt_token() -> str:
    # Typed at a hidden prompt, or piped: `printf %s "$TOKEN" | gpuc login --url ...`
    token = getpass.getpass("API token (gpuc_...): ") if sys.stdin.isatty() else sys.stdin.readline()
    token = token.strip()
    if not token:
        raise GpucError("no token given (type it at the prompt, pipe it in, or set GPUC_TOKEN)", USAGE)
    return token


# -- workloads -------------------------------------------------------------------------------------------------------


def read_body(path: str, kind: str | None) -> dict:
    """The submission body from a YAML or JSON file ("-": standard input): `{kind, spec}` as the API takes it,
    or a bare spec with --kind."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise GpucError(f"cannot read {path}: {exc.strerror}", USAGE) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GpucError(f"{path} is neither YAML nor JSON: {exc}", USAGE) from None
    if not isinstance(data, dict):
        raise GpucError(f"{path} must hold a mapping: {{kind: training, spec: {{...}}}}", USAGE)
    if "spec" in data and set(data) <= {"kind", "spec"}:
        body = dict(data)
        if kind and body.get("kind") and kind != body["kind"]:
            raise GpucError(f"{path} says kind {body['kind']!r} but --kind is {kind!r}", USAGE)
        body.setdefault("kind", kind or "training")
    else:
        body = {"kind": kind or "training", "spec": data}
    if not isinstance(body["spec"], dict):
        raise GpucError(f"{path}: `spec` must be a mapping", USAGE)
    return body


def cmd_submit(ctx: Context) -> int:
    args = ctx.args
    body = read_body(args.file, args.kind)
    key = args.idempotency_key
    if key is None:
        key = ci.default_idempotency_key(os.environ, body["kind"], str(body["spec"].get("name") or ""))
    headers = {"Idempotency-Key": key} if key else {}
    api = ctx.api
    # With a key a retried POST returns the same workload, so it is retried like a GET; without one, only where
    # it surely did not arrive.
    response = api.request("POST", WORKLOADS, body=body, headers=headers, idempotent=bool(key))
    workload = response.json()
    replayed = response.headers.get("Idempotent-Replayed") == "true"
    verb = "already submitted (same Idempotency-Key)" if replayed else "submitted"
    keyed = f"; Idempotency-Key {key}" if key else ""
    note(f"{verb}: #{workload['id']} {workload['name']} ({workload['state']}) {ctx.page_url(workload['id'])}{keyed}")
    if args.wait or args.follow or args.timeout is not None:
        workload = _wait(ctx, workload["id"], follow=args.follow)
        return _finish(ctx, workload)
    show_workload(ctx, workload)
    return REFUSED if workload.get("state") == "rejected" else OK


def _wait(ctx: Context, workload_id: Any, *, follow: bool = False) -> dict:
    """Wait for the workload's end (with --follow, stream its logs once it runs); one deadline for both."""
    args = ctx.args
    progress = Progress()
    path = f"{WORKLOADS}{workload_id}/"
    deadline = None if args.timeout is None else time.monotonic() + args.timeout

    def poll(**kwargs: Any) -> dict:
        return wait_for_workload(
            lambda: ctx.api.get(path),
            timeout_s=args.timeout,
            deadline=deadline,
            interval_s=args.interval,
            progress=progress,
            **kwargs,
        )

    if follow:
        started = poll(stop=lambda w: w.get("state") == "running")
        if started.get("state") == "running":
            progress.done()
            follow_logs(
                ctx, workload_id, tail=None, worker=None, interval_s=args.interval, deadline=deadline, quiet=True
            )
    return poll()


def _finish(ctx: Context, workload: dict) -> int:
    show_workload(ctx, workload)
    code = FINAL_STATES.get(workload.get("state"), OK)
    if code != OK:
        note(f"gpuc: workload #{workload['id']} {workload['name']} {workload['state']}: {reason_of(workload) or '-'}")
    return code


def show_workload(ctx: Context, w: dict) -> None:
    if ctx.emit(w):
        return
    admission = w.get("admission") or {}
    placements = "; ".join(
        f"{p.get('node')} GPUs {','.join(str(g) for g in p.get('gpus') or [])}" for p in w.get("placements") or []
    )
    pairs: list[tuple[str, Any]] = [
        ("id", w.get("id")),
        ("name", w.get("name")),
        ("kind", w.get("kind")),
        ("tenant / queue", f"{w.get('tenant')}/{w.get('queue')} (tier {w.get('tier')})"),
        (
            "GPUs",
            f"{out.gpus(w.get('gpus'))} × {w.get('gpu_model')} on {w.get('cluster')} (as {w.get('backend_name')})",
        ),
        ("state", w.get("state")),
        ("reason", w.get("state_reason")),
        ("admission", f"{admission.get('decision')}: {admission.get('reason')}" if admission else None),
        ("placed on", placements),
        ("submitted", f"{w.get('created_at')} by {w.get('created_by') or '-'}"),
        ("started", w.get("started_at")),
        ("finished", w.get("finished_at")),
        ("idempotency key", w.get("idempotency_key")),
        ("page", ctx.page_url(w.get("id"))),
    ]
    out.fields(pairs)
    events = w.get("events")
    if events:
        print("timeline:")
        out.table(events, [("  TIME", lambda e: "  " + str(e.get("time"))), ("KIND", "kind"), ("MESSAGE", "message")])


def cmd_ls(ctx: Context) -> int:
    args = ctx.args
    params = {"state": args.state, "tenant": args.tenant, "kind": args.kind, "cluster": args.cluster, "q": args.name}
    rows = ctx.api.pages(WORKLOADS, params, limit=args.limit)
    if ctx.emit(rows):
        return OK
    out.table(
        rows,
        [
            ("ID", "id"),
            ("NAME", "name"),
            ("TENANT/QUEUE", lambda w: f"{w.get('tenant')}/{w.get('queue')}"),
            ("GPUS", lambda w: f"{out.gpus(w.get('gpus'))}×{w.get('gpu_model')}"),
            ("CLUSTER", "cluster"),
            ("STATE", "state"),
            ("CREATED", "created_at"),
            ("REASON", reason_of),
        ],
        empty="no workloads",
    )
    return OK


def cmd_status(ctx: Context) -> int:
    args = ctx.args
    if args.wait or args.timeout is not None:
        return _finish(ctx, _wait(ctx, args.id))
    show_workload(ctx, ctx.api.get(f"{WORKLOADS}{args.id}/"))
    return OK


def cmd_why(ctx: Context) -> int:
    """Why the workload is where it is, in the words its page shows: the state's reason, the admission's decision
    and reason, a waiting head's reservation, and where it runs."""
    w = ctx.api.get(f"{WORKLOADS}{ctx.args.id}/")
    admission = w.get("admission") or None
    answer = {
        "id": w.get("id"),
        "name": w.get("name"),
        "tenant": w.get("tenant"),
        "queue": w.get("queue"),
        "state": w.get("state"),
        "reason": w.get("state_reason") or "",
        "admission": admission,
        "placements": w.get("placements") or [],
        "page": ctx.page_url(w.get("id")),
    }
    if ctx.emit(answer):
        return OK
    print(f"#{w.get('id')} {w.get('name')} ({w.get('tenant')}/{w.get('queue')}): {w.get('state')}")
    if w.get("state_reason"):
        print(f"  {w['state_reason']}")
    if admission:
        print(f"  admission: {admission.get('decision')}: {admission.get('reason')}")
        if admission.get("state") == "pending" and admission.get("reserved_gpus"):
            print(f"  reservation: {reservation(w, admission)}")
    for p in w.get("placements") or []:
        print(f"  placed on {p.get('node')} GPUs {','.join(str(g) for g in p.get('gpus') or [])}")
    return OK


def reservation(w: dict, admission: dict) -> str:
    """A waiting head's reservation, as the workload page words it."""
    start = admission.get("expected_start")
    if not start:
        return (
            "first in its queue; expected start not known (it waits for work without a runtime limit, or for a reclaim)"
        )
    text = f"holds {out.gpus(admission.get('reserved_gpus'))} × {w.get('gpu_model')}; expected start {start}"
    if admission.get("holds_cluster"):
        text += f" · borrowing work on {w.get('cluster')} that would run past it waits"
    return text


def cmd_cancel(ctx: Context) -> int:
    w = ctx.api.post(f"{WORKLOADS}{ctx.args.id}/cancel/", {"reason": ctx.args.reason})
    note(f"#{w['id']} {w['name']}: {w['state']}")
    show_workload(ctx, w)
    return OK


def cmd_heartbeat(ctx: Context) -> int:
    beat = ctx.api.post(f"{WORKLOADS}{ctx.args.id}/heartbeat/", {})
    note(f"#{ctx.args.id}: heartbeat at {beat['last_heartbeat_at']}")
    return OK


def cmd_logs(ctx: Context) -> int:
    args = ctx.args
    if args.follow:
        follow_logs(ctx, args.id, tail=args.tail, worker=args.worker, interval_s=2.0)
    else:
        _stream_logs(ctx, args.id, follow=False, tail=args.tail, worker=args.worker)
    return OK


def _stream_logs(ctx: Context, workload_id: Any, *, follow: bool, tail: int | None, worker: Any) -> int:
    """One read of GET /api/v1/workloads/{id}/logs/ (text/plain, chunked, docs/logs.md) straight to stdout, each
    chunk as it comes. Returns the bytes written."""
    params = {"tail": tail, "follow": 1 if follow else None, "worker": worker}
    stdout = sys.stdout.buffer
    written = 0
    try:
        with ctx.api.stream(f"{WORKLOADS}{workload_id}/logs/", params) as response:
            for chunk in response.iter_bytes():
                stdout.write(chunk)
                stdout.flush()
                written += len(chunk)
    except (GpucError, BrokenPipeError):
        raise
    except Exception as exc:  # the connection dropped mid-stream
        if not follow:
            raise GpucError(f"the log of #{workload_id} broke off: {exc}", FAILED) from None
        note(f"gpuc: the log of #{workload_id} broke off ({type(exc).__name__}); asking again")
    return written


def follow_logs(
    ctx: Context,
    workload_id: Any,
    *,
    tail: int | None,
    worker: Any,
    interval_s: float,
    deadline: float | None = None,
    quiet: bool = False,
) -> None:
    """Follow the log until the workload stops running. A followed answer also ends at the server's limit
    (LOGS_FOLLOW_MAX_S) or when a connection drops: then, while the workload still runs, ask again for the new
    lines only (tail=0). Nothing logged yet (409 logs_not_ready) is asked again after its Retry-After. `quiet`
    (submit --follow): a log that cannot be read is a note, and the waiting goes on."""
    path = f"{WORKLOADS}{workload_id}/"
    read_before = False
    while True:
        try:
            _stream_logs(ctx, workload_id, follow=True, tail=0 if read_before else tail, worker=worker)
            read_before = True
        except ApiError as exc:
            if exc.api_code != "logs_not_ready" and not quiet:
                raise
            if exc.api_code != "logs_not_ready":
                note(f"gpuc: no log to follow: {exc.message}; waiting for the end instead")
                return
            pause = exc.retry_after if exc.retry_after is not None else interval_s
        else:
            pause = interval_s
        state = ctx.api.get(path).get("state")
        if state in FINAL_STATES or (read_before and state not in ("pending", "admitted", "running")):
            return
        if deadline is not None and time.monotonic() + pause >= deadline:
            return  # the caller's wait reports the timeout
        time.sleep(pause)


# -- quota -----------------------------------------------------------------------------------------------------------


def cmd_quota(ctx: Context) -> int:
    args = ctx.args
    rows = ctx.api.pages(
        "/api/v1/quotas/", {"queue__tenant__slug": args.tenant, "gpu_model__code": args.gpu_model}, limit=None
    )
    if ctx.emit(rows):
        return OK
    out.table(
        rows,
        [
            ("QUEUE", "queue"),
            ("MODEL", "gpu_model"),
            ("GUARANTEED", "guaranteed"),
            ("USED", lambda q: q.get("used_text") or q.get("used")),
            ("BORROWED", "borrowed"),
            ("LENT", "lent"),
            ("BORROW LIMIT", "borrow_limit"),
            ("LEND LIMIT", "lend_limit"),
            ("WEIGHT", "weight"),
        ],
        empty="no quotas" + (f" for tenant {args.tenant}" if args.tenant else ""),
    )
    return OK


# -- nodes -----------------------------------------------------------------------------------------------------------


def cmd_nodes_ls(ctx: Context) -> int:
    args = ctx.args
    params = {
        "cluster": args.cluster,
        "state": args.state,
        "model": args.gpu_model,
        "q": args.name,
        "cordoned": None if args.cordoned is None else str(args.cordoned).lower(),
    }
    rows = ctx.api.pages("/api/v1/nodes/", params, limit=args.limit)
    if ctx.emit(rows):
        return OK
    out.table(
        rows,
        [
            ("ID", "id"),
            ("CLUSTER", "cluster"),
            ("NAME", "name"),
            ("POOL", "pool"),
            ("MODEL", "gpu_model"),
            ("STATE", "state"),
            ("CORDONED", "unschedulable"),
            ("GPUS", "gpu_count"),
            ("ALLOCATED", "gpu_allocated"),
            ("FREE", "gpu_free"),
            ("UNHEALTHY", "gpu_unhealthy"),
            ("REASON", "state_reason"),
        ],
        empty="no nodes",
    )
    return OK


def resolve_node(api: Api, ref: str, cluster: str | None) -> dict:
    """A node by id (a number) or by name (with --cluster when two clusters have one of that name)."""
    if ref.isdigit():
        return api.get(f"/api/v1/nodes/{ref}/")
    rows = api.pages("/api/v1/nodes/", {"q": ref, "cluster": cluster}, limit=None)
    exact = [n for n in rows if n.get("name") == ref]
    where = f" on cluster {cluster}" if cluster else ""
    if not exact:
        raise GpucError(f"no node named {ref!r}{where} (gpuc nodes ls lists them)", USAGE)
    if len(exact) > 1:
        clusters = ", ".join(sorted(str(n.get("cluster")) for n in exact))
        raise GpucError(f"{len(exact)} nodes are named {ref!r} (on {clusters}): say which with --cluster", USAGE)
    return exact[0]


def cmd_node_action(ctx: Context) -> int:
    args = ctx.args
    action = args.nodes_command
    if not args.dry_run and not (args.reason or "").strip():
        raise GpucError(f"gpuc nodes {action} needs --reason: say why (it goes into the audit log)", USAGE)
    api = ctx.api
    node = resolve_node(api, args.node, args.cluster)
    body: dict[str, Any] = {"reason": args.reason or "", "dry_run": bool(args.dry_run)}
    if args.incident is not None:
        body["incident"] = args.incident
    result = api.post(f"/api/v1/nodes/{node['id']}/{action}/", body)
    if args.dry_run:
        if not ctx.emit(result):
            show_impact(result)
        return OK
    note(
        f"{action} {node['name']} on {node.get('cluster')}: operation #{result.get('id')} {result.get('kind')} "
        f"{result.get('status')}"
    )
    if args.wait or args.timeout is not None:
        result = wait_for_operation(
            lambda: api.get(f"/api/v1/operations/{result['id']}/"),
            timeout_s=args.timeout,
            interval_s=args.interval,
            progress=Progress(),
        )
    if not ctx.emit(result):
        show_operation(result)
    return FAILED if result.get("status") == "failed" else OK


def show_impact(impact: dict) -> None:
    print(f"{impact.get('action')} {impact.get('node')} on {impact.get('cluster')}: a preview, nothing was changed")
    evicted = impact.get("evicted") or []
    if evicted:
        print(f"evicts {len(evicted)} workload{'s' if len(evicted) != 1 else ''}:")
        out.table(
            evicted,
            [
                ("  ID", lambda w: f"  #{w.get('id')}"),
                ("TENANT/NAME", lambda w: f"{w.get('tenant')}/{w.get('name')}"),
                ("KIND", "kind"),
                ("TIER", "tier"),
                ("GPUS", lambda w: out.gpus(w.get("gpus"))),
                ("STATE", "state"),
            ],
        )
    else:
        print("evicts nothing")
    below = impact.get("tenants_below_guarantee") or []
    if below:
        print("queues that fall below their guarantee:")
        for q in below:
            print(
                f"  {q.get('tenant')}/{q.get('queue')} {q.get('gpu_model')}: {out.gpus(q.get('running_now'))} → "
                f"{out.gpus(q.get('running_after'))} running of {q.get('guaranteed')} guaranteed"
            )
    capacity = impact.get("capacity_left") or []
    if capacity:
        print("free GPUs in the cluster:")
        for c in capacity:
            replace = c.get("evicted_gpus_to_replace")
            extra = f" ({out.gpus(replace)} evicted GPUs to place again)" if replace else ""
            print(f"  {c.get('gpu_model')}: {c.get('free_now')} now, {c.get('free_after')} after{extra}")
    for warning in impact.get("warnings") or []:
        print(f"warning: {warning}")


def show_operation(op: dict) -> None:
    pairs = [
        ("operation", f"#{op.get('id')} {op.get('kind')}"),
        ("status", op.get("status")),
        ("target", op.get("target_label")),
        ("by", op.get("actor")),
        ("reason", op.get("reason")),
    ]
    if op.get("steps_total"):
        pairs.append(("progress", f"{op.get('steps_done')} of {op.get('steps_total')} {op.get('steps_label') or ''}"))
    if op.get("error"):
        pairs.append(("error", op.get("error")))
    out.fields(pairs)


# -- the parser ------------------------------------------------------------------------------------------------------


def _globals(parser: argparse.ArgumentParser, top: bool) -> None:
    """The global options, accepted before or after the command (after it, only when given)."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    group = parser.add_argument_group("global options")
    group.add_argument("--url", default=default(None), help="the console, e.g. https://console.example.com (GPUC_URL)")
    group.add_argument(
        "--token", default=default(None), help="an API token, gpuc_... (GPUC_TOKEN; prefer the variable)"
    )
    group.add_argument(
        "-o",
        "--output",
        choices=("table", "json", "yaml"),
        default=default("table"),
        help="table for people (the default), json or yaml for programs",
    )
    group.add_argument(
        "--request-id", default=default(None), help="X-Request-ID for the audit log (default: one per CI job)"
    )


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0: {text!r}")
    return value


def _wait_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--wait", action="store_true", help=f"wait until the {what} ends; exit with its outcome")
    parser.add_argument(
        "--timeout", type=_positive, default=None, metavar="S", help="give up waiting after S seconds (exit 3)"
    )
    parser.add_argument(
        "--interval", type=_positive, default=5.0, metavar="S", help="seconds between polls while waiting (5)"
    )


def build_parser() -> Parser:
    parser = Parser(
        prog="gpuc",
        description="The GPU console's command line. Exit codes: 0 succeeded, 1 failed, 2 cancelled or rejected, "
        "3 timed out waiting, 4 usage or auth error (docs/cli.md).",
    )
    parser.add_argument("--version", action="version", version=f"gpuc {__version__}")
    _globals(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True

    def command(name: str, help_text: str, **kwargs: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text, **kwargs)
        _globals(sub, top=False)
        return sub

    login = command("login", "save the console's URL and a token in the config file")
    source = login.add_mutually_exclusive_group()
    source.add_argument("--oidc-token-env", metavar="VAR", help="exchange the CI job's OIDC ID token in $VAR")
    source.add_argument("--oidc-token-file", metavar="FILE", help="exchange the OIDC ID token in FILE")
    login.set_defaults(run=cmd_login)

    submit = command("submit", "submit a training job or inference service")
    submit.add_argument("-f", "--file", required=True, help="the spec, YAML or JSON ({kind, spec} or a bare spec); -")
    submit.add_argument("--kind", choices=("training", "inference"), help="the kind of a bare spec (training)")
    submit.add_argument("--idempotency-key", metavar="K", help="default: derived from the CI job (none outside CI)")
    submit.add_argument("--follow", action="store_true", help="stream its logs once it runs, then wait for the end")
    _wait_options(submit, "workload")
    submit.set_defaults(run=cmd_submit)

    ls = command("ls", "list workloads, newest first")
    ls.add_argument("--state", choices=STATES)
    ls.add_argument("--tenant", metavar="SLUG")
    ls.add_argument("--kind", choices=("training", "inference"))
    ls.add_argument("--cluster")
    ls.add_argument("--name", help="name contains")
    ls.add_argument("--limit", type=int, default=100, help="at most this many (100)")
    ls.set_defaults(run=cmd_ls)

    status = command("status", "one workload: state, reason, placement, timeline")
    status.add_argument("id", type=int)
    _wait_options(status, "workload")
    status.set_defaults(run=cmd_status)

    logs = command("logs", "a workload's logs")
    logs.add_argument("id", type=int)
    logs.add_argument("-f", "--follow", action="store_true", help="keep streaming until the workload ends")
    logs.add_argument("--tail", type=int, metavar="N", help="the last N lines of each worker (the console's 200)")
    logs.add_argument("--worker", metavar="K", help="one worker's logs (its index)")
    logs.set_defaults(run=cmd_logs)

    cancel = command("cancel", "cancel a workload")
    cancel.add_argument("id", type=int)
    cancel.add_argument("--reason", required=True, help="why (kept on the workload and in the audit log)")
    cancel.set_defaults(run=cmd_cancel)

    heartbeat = command("heartbeat", "report a running job's progress (its spec's progress_timeout_minutes)")
    heartbeat.add_argument("id", type=int)
    heartbeat.set_defaults(run=cmd_heartbeat)

    quota = command("quota", "GPU quotas per queue and model, with what is used, borrowed and lent now")
    quota.add_argument("--tenant", metavar="SLUG")
    quota.add_argument("--gpu-model", metavar="CODE", help="e.g. h100")
    quota.set_defaults(run=cmd_quota)

    why = command("why", "why a workload waits (or where it runs), as its page says")
    why.add_argument("id", type=int)
    why.set_defaults(run=cmd_why)

    nodes = command("nodes", "GPU nodes and the runbook actions")
    node_commands = nodes.add_subparsers(dest="nodes_command", metavar="ACTION", parser_class=Parser)
    node_commands.required = True
    nodes_ls = node_commands.add_parser("ls", help="list nodes")
    _globals(nodes_ls, top=False)
    nodes_ls.add_argument("--cluster")
    nodes_ls.add_argument("--state", choices=NODE_STATES)
    nodes_ls.add_argument("--gpu-model", metavar="CODE")
    nodes_ls.add_argument("--name", help="name contains")
    cordoned = nodes_ls.add_mutually_exclusive_group()
    cordoned.add_argument("--cordoned", dest="cordoned", action="store_const", const=True, default=None)
    cordoned.add_argument("--not-cordoned", dest="cordoned", action="store_const", const=False)
    nodes_ls.add_argument("--limit", type=int, default=None, help="at most this many (all)")
    nodes_ls.set_defaults(run=cmd_nodes_ls)
    for action in NODE_ACTIONS:
        sub = node_commands.add_parser(action, help=f"{action} a node, with a reason (--dry-run: the impact only)")
        _globals(sub, top=False)
        sub.add_argument("node", help="the node's name (or its id)")
        sub.add_argument("--reason", help="why (required, except with --dry-run)")
        sub.add_argument("--dry-run", action="store_true", help="print the impact preview; change nothing")
        sub.add_argument("--cluster", help="the node's cluster, when two have a node of that name")
        sub.add_argument("--incident", type=int, metavar="ID", help="the incident this action answers")
        _wait_options(sub, "operation")
        sub.set_defaults(run=cmd_node_action)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    ctx = Context(args)
    try:
        return args.run(ctx)
    except GpucError as exc:
        print(describe(exc), file=sys.stderr, flush=True)
        if isinstance(exc, ApiError) and exc.status == 401 and ctx.target is not None:
            print(f"  (token from {ctx.target.token_from}; log in again or set GPUC_TOKEN)", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("\ngpuc: interrupted (nothing was cancelled)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `gpuc logs 42 | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return OK
    finally:
        ctx.close()


if __name__ == "__main__":
    sys.exit(main())
