"""The tenancy desired state of one cluster, with the quotas a caller pushes in place of the stored ones."""

from __future__ import annotations

from dataclasses import replace

from apps.backends.render.desired import DesiredState, GpuModelRef, QuotaLine
from apps.backends.types import QuotaSpec


def desired_state(cluster, quotas: list[QuotaSpec] | None) -> tuple[DesiredState, list[str]]:
    """`build_desired_state(cluster)`; each queue named in `quotas` gets exactly those lines.

    A queue the quotas name that is not bound to this cluster has no namespace here, so nothing can carry
    its quota: it is reported, not invented.
    """
    from apps.fleet.models import GpuModel
    from apps.tenancy.desired_state import build_desired_state

    state = build_desired_state(cluster)
    if not quotas:
        return state, []
    lines: dict[tuple[str, str], list[QuotaLine]] = {}
    for q in quotas:
        lines.setdefault((q.tenant, q.queue), []).append(
            QuotaLine(q.gpu_model, q.guaranteed, q.borrow_limit, q.lend_limit, q.weight)
        )
    messages = []
    queues = []
    for queue in state.queues:
        wanted = lines.pop((queue.tenant, queue.name), None)
        queues.append(
            queue if wanted is None else replace(queue, quotas=tuple(sorted(wanted, key=lambda line: line.gpu_model)))
        )
    for tenant, name in sorted(lines):
        messages.append(
            f"queue {tenant}/{name} is not bound to cluster {cluster.name}: bind it to a namespace to push its quota"
        )
    models = {m.code: m for m in state.gpu_models}
    needed = {line.gpu_model for queue in queues for line in queue.quotas} - set(models)
    for model in GpuModel.objects.filter(code__in=needed):
        models[model.code] = GpuModelRef(model.code, model.name, (model.product_labels or [model.name])[0], model.code)
    unknown = needed - set(models)
    if unknown:
        messages.append(f"unknown GPU models left out: {', '.join(sorted(unknown))}")
        queues = [replace(q, quotas=tuple(line for line in q.quotas if line.gpu_model in models)) for q in queues]
    state = replace(state, queues=tuple(queues), gpu_models=tuple(models[c] for c in sorted(models)))
    return state, messages
