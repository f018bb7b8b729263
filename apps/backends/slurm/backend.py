"""SlurmBackend: the Backend interface over a Slurm cluster (CLI, optionally slurmrestd for reads and submission).

The console's id for a job is its name (`WorkloadSpec.name`, unique per cluster): submission is idempotent
by it (looked up only when an earlier attempt may have reached Slurm, see `submit`), and status/cancel look
jobs up by it. Slurm's numeric job id is kept in the result's reason and
events ("Slurm job 42"), and status/cancel also accept a numeric id.

What Slurm lacks, and how it is bridged (test_connection lists it):
* cordon = DRAIN with the console's reason (running jobs finish); drain = that plus requeueing (or, for
  jobs that cannot be requeued, cancelling) what runs on the node;
* resume only ever clears a reason the console set ("console: ..."); a node an admin drained is reported
  as such and left alone;
* taints are kept as node features taint:<key>=<value>:<effect>; Slurm does not keep jobs off them;
* node updates, accounting and quota go through scontrol, sacct and sacctmgr (slurmrestd v0.0.38 has no
  node update).
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cached_property

from apps.backends.base import Backend, NotFoundError, PermanentBackendError, RetryableBackendError
from apps.backends.render.desired import DesiredState
from apps.backends.render.spec import Spec
from apps.backends.render.workload import RenderedScript, WorkloadContext
from apps.backends.slurm import parse
from apps.backends.slurm.accounts import QuotaPusher
from apps.backends.slurm.cli import Cli
from apps.backends.slurm.script import render_script, sbatch_script
from apps.backends.slurm.settings import CONSOLE_PREFIX, DEFAULT_OUTPUT_DIR, SlurmSettings
from apps.backends.slurm.ssh import ssh_host_error, ssh_options_errors
from apps.backends.types import (
    BackendState,
    ConnectionReport,
    DrainResult,
    Inventory,
    LogSource,
    PushResult,
    SubmitResult,
    Taint,
    UsageRecord,
    WorkloadLogs,
    WorkloadSpec,
    WorkloadStatus,
)
from apps.core.outbound import url_error

CANCEL_VERIFY_S = 10.0  # how long cancel waits for Slurm to show the job cancelled
ACCOUNTING_LOOKBACK_DAYS = 30
NOTHING_FOUND = 9003  # sacct --json's "error" for an empty answer  # how far back a name is looked up in accounting


class SlurmBackend(Backend):
    """A Slurm 22.05+ cluster: sbatch/squeue/sinfo/scontrol/scancel/sacct/sacctmgr, locally or over SSH,
    with slurmrestd (JWT) for reads, submission and cancel in mode "rest"."""

    kind = "slurm"
    renderer = "slurm"

    # The connection settings are read on first use, so creating the backend never fails: the console asks it
    # questions that need no connection (its clock, where logs are) even when its settings are wrong.

    @classmethod
    def connection_errors(cls, connection: dict) -> list[str]:
        """ssh_host and ssh_options from the allow-list (slurm/ssh.py), restd_url under the outbound policy."""
        problems = []
        if connection.get("ssh_host") and (problem := ssh_host_error(connection["ssh_host"])):
            problems.append(f"ssh_host: {problem}")
        problems += [f"ssh_options: {problem}" for problem in ssh_options_errors(connection.get("ssh_options") or [])]
        if connection.get("restd_url") and (problem := url_error(str(connection["restd_url"]))):
            problems.append(f"restd_url: {problem}")
        return problems

    @cached_property
    def settings(self) -> SlurmSettings:
        return SlurmSettings.of(self.cluster)

    @cached_property
    def cli(self) -> Cli:
        return Cli(self.settings)

    @cached_property
    def rest(self):
        if self.settings.mode != "rest":
            return None
        from apps.backends.slurm.rest import Rest

        return Rest(self.settings)

    # Reads

    def _json(self, argv: list[str]) -> dict:
        out = self.cli.run(argv)
        try:
            data = json.loads(out)
        except ValueError as exc:
            raise PermanentBackendError(f"{argv[0]} --json printed no JSON: {out[:200]!r}") from exc
        errors = [e for e in data.get("errors") or [] if e and e.get("error_number") != NOTHING_FOUND]
        if errors:
            # A read that fails has no side effect and an unreachable controller reads as "Unspecified
            # error" (-1) here: trying again later is right.
            text = "; ".join(f"{e.get('source', '')}: {e.get('description') or e.get('error')}" for e in errors)
            raise RetryableBackendError(f"{argv[0]} failed ({text}); is the Slurm controller up?")
        return data

    def _nodes(self) -> list[dict]:
        if self.rest:
            return self.rest.get("nodes")["nodes"]
        return self._json(["sinfo", "--json"])["nodes"]

    def _jobs(self) -> list[dict]:
        """Every job the controller holds (pending, running, and finished within MinJobAge)."""
        if self.rest:
            return self.rest.get("jobs")["jobs"]
        return self._json(["squeue", "--json"])["jobs"]

    def _node(self, name: str) -> dict:
        for node in self._nodes():
            if node["name"] == name:
                return node
        raise NotFoundError(f"Slurm has no node {name!r} on cluster {self.settings.cluster}")

    def _accounting(self, names: list[str]) -> list[dict]:
        if not names:
            return []
        if self.rest:
            return self.rest.accounting(names, f"now-{ACCOUNTING_LOOKBACK_DAYS}days")
        out = self._json(
            ["sacct", "--json", "-X", "-a", f"--name={','.join(names)}", "-S", f"now-{ACCOUNTING_LOOKBACK_DAYS}days"]
        )
        return out["jobs"]

    @staticmethod
    def _latest(jobs: list[dict], key: str, value) -> dict | None:
        matching = [j for j in jobs if j.get(key) == value]
        return max(matching, key=lambda j: j.get("job_id", 0)) if matching else None

    def _find(self, backend_id: str, jobs: list[dict] | None = None) -> dict | None:
        """The newest job of this name (or id) the controller holds: from `jobs` when given, else one lookup."""
        if jobs is None and not self.rest:
            return self._lookup(backend_id)
        jobs = self._jobs() if jobs is None else jobs
        if backend_id.isdigit():
            return self._latest(jobs, "job_id", int(backend_id))
        return self._latest(jobs, "name", backend_id)

    def _lookup(self, backend_id: str) -> dict | None:
        """One job by name or id with squeue's own filter and plain output: about 10x cheaper than listing
        every job as JSON once the controller holds hundreds (what submit and cancel would otherwise pay)."""
        selector = f"--jobs={backend_id}" if backend_id.isdigit() else f"--name={backend_id}"
        argv = ["squeue", "--noheader", "--states=all", selector, "--format=%A|%T|%r|%j"]
        result = self.cli.call(argv)
        if result.returncode != 0:
            if "Invalid job id" in result.stderr:
                return None
            raise self.cli.error(argv, result)
        jobs = []
        for line in result.stdout.splitlines():
            job_id, state, reason, name = [*line.split("|", 3), "", "", ""][:4]
            if job_id.isdigit():
                jobs.append({"job_id": int(job_id), "job_state": state, "state_reason": reason, "name": name})
        return max(jobs, key=lambda j: j["job_id"]) if jobs else None

    # Connection and inventory

    def test_connection(self) -> ConnectionReport:
        try:
            ping = self.cli.run(["scontrol", "ping"])
            version = self.cli.run(["sinfo", "--version"]).strip()
            if self.rest:
                self.rest.get("ping")
        except (RetryableBackendError, PermanentBackendError) as exc:
            return ConnectionReport(ok=False, message=str(exc))
        notes = [
            "node updates (drain, resume, cordon, taints) go through scontrol: slurmrestd v0.0.38 has no node update",
            "accounting (usage) comes from sacct and quota is pushed with sacctmgr",
            "Slurm has no taints: they are kept as node features taint:<key>=<value>:<effect>, which do not keep"
            " jobs off a node; cordon or drain does",
            "the console resumes only nodes whose reason starts with 'console: '; nodes drained by an admin or"
            " taken out by slurmctld (not responding, failed prolog) stay",
        ]
        where = f"over SSH on {self.settings.ssh_host}" if self.settings.ssh_host else "locally"
        notes.append(
            f"reads, submission and cancel via slurmrestd at {self.settings.restd_url}"
            if self.rest
            else f"every call runs Slurm's CLI {where}"
        )
        features = {
            "gang": True,
            "mig": True,
            "time-slicing": True,
            "mps": True,
            "hami": False,
            "rest": bool(self.rest),
        }
        ok, message = "is UP" in ping, ping.strip()
        if self.settings.containers == "pyxis":
            # A SPANK plugin's options are listed by `srun --help` only where plugstack.conf loads it
            # (https://github.com/NVIDIA/pyxis/wiki/Usage): without it every job's srun line is refused.
            features["pyxis"] = "--container-image" in self.cli.call(["srun", "--help"]).stdout
            if not features["pyxis"]:
                ok = False
                message += (
                    "; containers is 'pyxis' but srun here has no --container-image: the pyxis SPANK plugin is not"
                    " loaded (plugstack.conf), so every job would fail at its srun line"
                )
        elif not self.settings.containers:
            notes.append("no container runtime set (connection containers): specs with an image are refused")
        return ConnectionReport(ok=ok, server_version=version, message=message, features=features, notes=notes)

    def inventory(self) -> Inventory:
        nodes, jobs = self._nodes(), self._jobs()
        held = parse.allocations(jobs)
        return Inventory(nodes=[parse.node_info(n, self.settings, held) for n in nodes], taken_at=self.now())

    # Workloads

    def render(self, spec: Spec, context: WorkloadContext) -> RenderedScript:
        return render_script(spec, context, self.settings)

    def submit(self, spec: WorkloadSpec) -> SubmitResult:
        """sbatch the rendered script under the job name `spec.name`, idempotently by that name.

        On a first attempt (`spec.first_attempt`: nothing can have submitted this name yet) the script goes
        straight to sbatch. Otherwise an earlier attempt may have reached Slurm without its outcome being
        recorded (a worker killed between sbatch and recording, an sbatch that timed out): the name is looked
        up in the controller first (squeue --name, about 10 ms), and in accounting (sacct, about 90 ms) only
        when the controller no longer holds it (a job finished more than MinJobAge ago)."""
        script = sbatch_script(spec, self.settings)
        if not spec.first_attempt:
            existing = self._find(spec.name) or self._latest(self._accounting([spec.name]), "name", spec.name)
            if existing is not None:
                status = self._status_of(existing, spec.name)
                return SubmitResult(spec.name, status.state, f"Slurm job {existing['job_id']} (already submitted)")
        if self.rest:
            job_id = self.rest.submit(script, self.settings)
        else:
            out = self.cli.run(["sbatch", "--parsable", f"--chdir={self.settings.output_dir}"], stdin=script)
            job_id = int(out.strip().split(";")[0])
        # A new job pends until the next scheduling pass; reading it back would cost a full job listing.
        return SubmitResult(spec.name, BackendState.PENDING, f"Slurm job {job_id}")

    def _status_of(self, job: dict, backend_id: str, exits: dict[int, str] | None = None) -> WorkloadStatus:
        if exits is None:
            exits = self._exit_codes([job])
        exit_text = exits.get(job.get("job_id"))
        if "job_state" in job:
            return parse.job_status(job, backend_id, exit_text)
        return parse.accounting_status(job, backend_id, exit_text)

    def _exit_codes(self, jobs: list[dict]) -> dict[int, str]:
        """Job id -> exit as sacct reports it ("exit code 3", "signal 15"), for the failed jobs among `jobs` that
        accounting has as finished: one `sacct` call (its text; 22.05's --json and slurmdb report a normal exit
        as 0). Empty when there is none or accounting does not answer: the controller's exit is used then."""
        ids = sorted(
            {j["job_id"] for j in jobs if isinstance(j.get("job_id"), int) and parse.raw_state(j) in parse.EXIT_STATES}
        )
        if not ids:
            return {}
        argv = [
            "sacct",
            "-X",
            "-n",
            "-P",
            "-a",
            f"--jobs={','.join(map(str, ids))}",
            "--format=JobIDRaw,State,ExitCode",
        ]
        try:
            result = self.cli.call(argv)
        except (RetryableBackendError, PermanentBackendError):
            return {}
        exits = {}
        for line in result.stdout.splitlines() if result.returncode == 0 else []:
            job_id, state, code = [*line.split("|"), "", ""][:3]
            finished = parse.JOB_STATES.get((state.split() or [""])[0], BackendState.UNKNOWN).finished
            text = parse.sacct_exit(code)
            if job_id.isdigit() and finished and text:
                exits[int(job_id)] = text
        return exits

    def status(self, backend_ids: list[str]) -> dict[str, WorkloadStatus]:
        jobs = self._jobs()
        found = {i: self._find(i, jobs) for i in backend_ids}
        missing = [i for i, job in found.items() if job is None and not i.isdigit()]
        if missing:
            past = self._accounting(missing)
            found.update({i: self._latest(past, "name", i) for i in missing})
        exits = self._exit_codes([job for job in found.values() if job])
        return {
            i: self._status_of(job, i, exits)
            if job
            else WorkloadStatus(i, BackendState.UNKNOWN, "Slurm has no such job")
            for i, job in found.items()
        }

    def cancel(self, backend_id: str) -> WorkloadStatus:
        """scancel, then verify: scancel exits 0 even for an id Slurm does not know."""
        job = self._find(backend_id)
        if job is None:
            past = [] if backend_id.isdigit() else self._accounting([backend_id])
            job = self._latest(past, "name", backend_id)
            if job is None:
                raise NotFoundError(f"Slurm has no job {backend_id!r}")
        status = self._status_of(job, backend_id)
        if status.state.finished:
            return status
        job_id = str(job["job_id"])
        if self.rest:
            self.rest.cancel(job_id)
        else:
            self.cli.run(["scancel", job_id])
        deadline = time.monotonic() + CANCEL_VERIFY_S
        while True:
            job = self._find(job_id)
            status = self._status_of(job, backend_id) if job else status
            if job is None or status.state == BackendState.CANCELLED or status.state.finished:
                return status
            if time.monotonic() > deadline:
                raise RetryableBackendError(f"scancel {job_id}: Slurm still shows the job {status.state}")
            time.sleep(0.2)

    def stream_logs(
        self, source: LogSource, *, tail: int, follow: bool, worker: int | None, until: float | None = None
    ) -> Iterator[str]:
        """The job's output file through the CLI's runner (apps/backends/slurm/logs.py)."""
        from apps.backends.slurm.logs import JobLogs

        return JobLogs(self.cli, self.settings, source).stream(tail=tail, follow=follow, worker=worker, until=until)

    # Node operations

    def _update_node(self, name: str, *settings: str) -> None:
        self.cli.run(["scontrol", "update", f"NodeName={name}", *settings])

    @staticmethod
    def _console_reason(reason: str, default: str) -> str:
        reason = " ".join((reason or default).split())  # one line: Slurm keeps the reason as given
        return reason if reason.startswith(CONSOLE_PREFIX) else CONSOLE_PREFIX + reason

    def cordon(self, node: str, reason: str = "") -> None:
        current = self._node(node)
        if parse.node_unschedulable(current) and not parse.drained_by_console(current.get("reason") or ""):
            return  # already drained by an admin: keep their reason
        self._update_node(node, "State=DRAIN", f"Reason={self._console_reason(reason, 'cordoned')}")

    def uncordon(self, node: str) -> None:
        self.resume(node)

    def drain(self, node: str, reason: str = "") -> DrainResult:
        self.cordon(node, reason or "drained")
        evicted = []
        for job in self._jobs():
            if parse.JOB_STATES.get(str(job.get("job_state", "")).upper()) != BackendState.RUNNING:
                continue
            if node not in parse.hostnames(job.get("nodes") or ""):
                continue
            job_id = str(job["job_id"])
            result = self.cli.call(["scontrol", "requeue", job_id])
            if result.returncode != 0:  # not requeueable (--no-requeue): it has to stop
                self.cli.run(["scancel", job_id])
            evicted.append(job.get("name") or job_id)
        return DrainResult(node=node, evicted=evicted)

    def resume(self, node: str) -> None:
        current = self._node(node)
        if not parse.node_unschedulable(current):
            return
        reason = current.get("reason") or ""
        if parse.reason_source(current) == "slurmctld":
            raise PermanentBackendError(
                f"slurmctld took {node} out of service ({reason or 'not responding'}); the console resumes only "
                "nodes it drained itself"
            )
        if not parse.drained_by_console(reason):
            by = current.get("reason_set_by_user") or "an administrator"
            raise PermanentBackendError(
                f"{node} was drained by {by} outside the console ({reason or 'no reason given'}); "
                "the console resumes only nodes it drained itself"
            )
        self._update_node(node, "State=RESUME")

    def _set_features(self, node: str, features: list[str]) -> None:
        value = ",".join(features)
        self._update_node(node, f"AvailableFeatures={value}", f"ActiveFeatures={value}")

    def taint(self, node: str, taint: Taint) -> None:
        current = self._node(node)
        feature = f"{parse.TAINT_FEATURE}{taint.key}={taint.value}:{taint.effect}"
        kept = [f for f in (current.get("features") or "").split(",") if f and f != feature]
        kept = [f for f in kept if not f.startswith(f"{parse.TAINT_FEATURE}{taint.key}=")]
        self._set_features(node, [*kept, feature])

    def untaint(self, node: str, key: str) -> None:
        current = self._node(node)
        features = [f for f in (current.get("features") or "").split(",") if f]
        kept = [f for f in features if not f.startswith(f"{parse.TAINT_FEATURE}{key}=")]
        if kept != features:
            self._set_features(node, kept)

    # Quota and usage

    def push_quota(self, state: DesiredState) -> PushResult:
        return self.quota_pusher().push(state)

    def quota_plan(self, state: DesiredState) -> list:
        """What a push of `state` would change, diffed against `sacctmgr show`, changing nothing."""
        pusher = self.quota_pusher()
        return pusher.plan(state).preview()

    def quota_pusher(self) -> QuotaPusher:
        """Dry-run (`plan`) and apply (`push`) a tenancy DesiredState, with the diff in between."""
        return QuotaPusher(self.cli, self.settings)

    def now(self) -> datetime:
        """Slurm's clock: whole seconds, as its job start and end times (and sacct's ElapsedRaw) count them. A
        metering run's watermark in this clock loses no fraction of a job that starts in the same second."""
        return datetime.now(tz=UTC).replace(microsecond=0)

    def usage_since(self, since: datetime) -> list[UsageRecord]:
        """GPU time per job: allocated gres/gpu x elapsed, clipped to [since, now), in Slurm's whole seconds.

        The controller's view first (current even when slurmdbd lags behind, as it does under load), then
        accounting (sacct) for the jobs the controller no longer holds. `now` is read before either, so a
        job that starts or ends after it is reported by the next run from `now` on: run after run, a job's
        pieces add up to its end - start, sacct's ElapsedRaw."""
        now = self.now()
        spans: dict[int, tuple[dict, str, float, datetime | None, datetime | None]] = {}
        for job in self._jobs():
            raw = parse.raw_state(job)
            state = parse.JOB_STATES.get(raw, BackendState.UNKNOWN)
            if state in (BackendState.PENDING, BackendState.UNKNOWN):
                continue
            gres_type, gpus = parse.tres_gpus(job.get("tres_alloc_str") or "")
            # A COMPLETING job has ended (its end_time is set); a running one's end_time is its time limit.
            ended = state.finished or raw == "COMPLETING"
            end = parse.epoch(job.get("end_time")) if ended else now
            spans[job["job_id"]] = (job, gres_type, gpus, parse.epoch(job.get("start_time")), end)
        start = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        for job in self._json(["sacct", "--json", "-X", "-a", "-S", start, "-E", "now"])["jobs"]:
            if job.get("job_id") not in spans:
                times = job.get("time") or {}
                gres_type, gpus = parse.gpu_tres(job)
                spans[job["job_id"]] = (
                    job,
                    gres_type,
                    gpus,
                    parse.epoch(times.get("start")),
                    parse.epoch(times.get("end")),
                )
        parents = QuotaPusher(self.cli, self.settings).account_parents()
        records = []
        for job, gres_type, gpus, begin, end in spans.values():
            if not gpus or begin is None:
                continue
            begin, end = max(begin, since), min(end or now, now)
            if end <= begin:
                continue
            account = job.get("account") or ""
            records.append(
                UsageRecord(
                    backend_id=job.get("name") or str(job.get("job_id")),
                    tenant=parents.get(account, account),
                    queue=account,
                    gpu_model=self.settings.model_of(gres_type) if gres_type else "gpu",
                    gpu_fraction=gpus,
                    start=begin,
                    end=end,
                )
            )
        return records

    # What the console asks besides the scheduler calls

    def workload_logs(self, name: str, workload_id: str, namespace: str = "") -> WorkloadLogs:
        output_dir = (self.cluster.connection or {}).get("output_dir", DEFAULT_OUTPUT_DIR)
        # The sbatch script writes <output_dir>/<name>-<job id>.out; the glob finds it without the job id.
        return WorkloadLogs(command=f"tail -n 200 {shlex.quote(f'{output_dir}/{name}')}-*.out")
