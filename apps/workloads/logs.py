"""Where a workload's logs are: the cluster's log system, a command to fetch them, or the simulator's own log.

The console does not store logs. A cluster's `connection.logs_url` (a template) points at the log
system its operators already use (Grafana Loki, Kibana, OpenSearch ...); without one, the page says
how to read them on the cluster. Simulated clusters produce their log from the simulation itself.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from urllib.parse import quote

from apps.fleet.links import url_template_error
from apps.workloads.models import Workload

DEFAULT_SLURM_OUTPUT_DIR = "/var/log/gpu-console"


@dataclass
class Logs:
    url: str = ""  # an external log system's page for this workload
    command: str = ""  # how to read the logs on the cluster when there is no log system configured
    lines: list[str] = field(default_factory=list)  # the log itself (simulated clusters)


def _namespace(workload: Workload) -> str:
    from apps.tenancy.models import QueueBinding

    binding = QueueBinding.objects.filter(queue=workload.queue, cluster=workload.cluster).first()
    return ((binding.namespaces if binding else []) or [workload.tenant.slug])[0]


def logs_for(workload: Workload) -> Logs:
    cluster = workload.cluster
    connection = cluster.connection or {}
    namespace = _namespace(workload) if cluster.kind == "kubernetes" else ""
    template = connection.get("logs_url", "")
    if template and not url_template_error(template):
        values = {
            "name": workload.backend_name,
            "namespace": namespace,
            "workload_id": str(workload.pk),
            "tenant": workload.tenant.slug,
            "queue": workload.queue.full_name,
            "cluster": cluster.name,
        }
        return Logs(url=template.format(**{k: quote(v, safe="") for k, v in values.items()}))
    if cluster.kind == "kubernetes":
        from apps.workloads.render.common import WORKLOAD_LABEL

        selector = f"{WORKLOAD_LABEL}={workload.pk}"
        argv = ["kubectl", "logs", "-n", namespace, "-l", selector, "--all-containers", "--prefix", "--tail=200"]
        return Logs(command=shlex.join(argv))
    if cluster.kind == "slurm":
        output_dir = connection.get("output_dir", DEFAULT_SLURM_OUTPUT_DIR)
        # The sbatch script writes <output_dir>/<name>-<job id>.out; the glob finds it without the job id.
        return Logs(command=f"tail -n 200 {shlex.quote(f'{output_dir}/{workload.backend_name}')}-*.out")
    if cluster.kind == "simulated":
        return Logs(lines=_simulated_lines(workload))
    return Logs()


def _simulated_lines(workload: Workload) -> list[str]:
    """The simulated run as a log: submission, each worker's placement, and how it ended."""
    from apps.backends.models import SimAllocation, SimWorkload

    sim_workload = SimWorkload.objects.filter(sim__cluster=workload.cluster, name=workload.backend_name).first()
    if sim_workload is None:
        return []

    def stamp(when) -> str:
        return when.isoformat(timespec="seconds")

    entries = [(sim_workload.submitted_at, 0, f"submitted to {workload.cluster.name} as {sim_workload.name}")]
    for a in SimAllocation.objects.filter(workload=sim_workload).order_by("started_at", "worker"):
        gpus = ",".join(str(i) for i in a.gpu_indexes)
        detail = f" ({a.mig_profile})" if a.mig_profile else ""
        entries.append((a.started_at, 1, f"worker {a.worker} started on {a.node} GPUs {gpus}{detail}"))
        if a.ended_at:
            entries.append((a.ended_at, 2, f"worker {a.worker} stopped on {a.node}"))
    if sim_workload.finished_at:
        reason = f": {sim_workload.reason}" if sim_workload.reason else ""
        entries.append((sim_workload.finished_at, 3, f"{sim_workload.state}{reason}"))
    return [f"{stamp(when)} {text}" for when, _, text in sorted(entries, key=lambda e: (e[0], e[1]))]
