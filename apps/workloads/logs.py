"""Where a workload's logs are: the cluster's log system, a command to fetch them, or the simulator's own log.

The console does not store logs. A cluster's `connection.logs_url` (a template) points at the log
system its operators already use (Grafana Loki, Kibana, OpenSearch ...); without one, the cluster's backend
says how to read them there (`Backend.workload_logs`: kubectl, tail of the sbatch output file), or gives the
log itself (simulated clusters produce it from the simulation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from apps.backends.registry import get_backend
from apps.fleet.links import url_template_error
from apps.workloads.models import Workload


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
    backend = get_backend(cluster)
    namespace = _namespace(workload) if backend.namespaced else ""
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
    found = backend.workload_logs(workload.backend_name, str(workload.pk), namespace)
    return Logs(command=found.command, lines=found.lines)
