"""Fleet pages: clusters, nodes, one node, the GPU model catalog and the capacity view."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Case, Count, F, IntegerField, Q, Value, When
from django.db.models.functions import Greatest
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from apps.accounts.permissions import has_perm
from apps.backends.base import BackendError
from apps.backends.registry import backend_class, get_backend
from apps.core.errors import InvalidInput, ServiceError
from apps.core.forms import apply_service_error
from apps.core.tables import Column
from apps.core.views import ScopedListView
from apps.fleet import services
from apps.fleet.capacity import capacity_by_model
from apps.fleet.exporter_text import per_gpu
from apps.fleet.filtersets import NodeFilterSet
from apps.fleet.forms import ClusterForm
from apps.fleet.models import Cluster, Gpu, GpuModel, Node, NodePool, NodeState
from apps.fleet.owners import WorkloadNames
from apps.operations.models import Operation
from apps.operations.services import start_operation


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def cluster_list(request):
    clusters = Cluster.objects.for_user(request.user, "view").annotate(
        node_count=Count("nodes", filter=~Q(nodes__state=NodeState.VANISHED), distinct=True),
        gpu_count=Count("nodes__gpus", filter=~Q(nodes__state=NodeState.VANISHED)),
    )
    can_administer = has_perm(request.user, "administer")
    form = ClusterForm(request.POST or None) if can_administer else None
    if request.method == "POST" and form is not None and form.is_valid():
        try:
            cluster = services.create_cluster(request.user, **form.cleaned_data)
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(
                request, _("Added cluster %(name)s. Test the connection, then sync.") % {"name": cluster.name}
            )
            return redirect("fleet:cluster_detail", name=cluster.name)
    return render(
        request,
        "fleet/cluster_list.html",
        {"clusters": clusters, "form": form, "capacity": capacity_by_model(Node.objects.all())},
    )


@require_safe
@login_required
def cluster_detail(request, name: str):
    cluster = get_object_or_404(Cluster.objects.for_user(request.user, "view"), name=name)
    nodes = Node.objects.filter(cluster=cluster)
    return render(
        request,
        "fleet/cluster_detail.html",
        {
            "cluster": cluster,
            "capacity": capacity_by_model(nodes),
            "states": dict(nodes.values_list("state").annotate(n=Count("id")).values_list("state", "n")),
            "can_operate": has_perm(request.user, "operate"),
            "can_administer": has_perm(request.user, "administer"),
            "operations": Operation.objects.filter(target_type="fleet.cluster", target_id=str(cluster.pk))[:5],
            "caveats": _caveats(cluster),
            # The drift report, the push preview and the push button: for backends that report drift (Kubernetes).
            "quota_drift": hasattr(get_backend(cluster), "quota_drift"),
            # Its node pools, their pre-pulls and their fabric (docs/networking.md).
            "pools": NodePool.objects.filter(cluster=cluster)
            .select_related("gpu_model")
            .annotate(node_count=Count("nodes", filter=~Q(nodes__state=NodeState.VANISHED)))
            .order_by("name"),
        },
    )


@require_POST
@login_required
def pool_prepull(request, name: str, pool: str):
    """Set the images a node pool pre-pulls (one per line), from the cluster page's pools table."""
    cluster = get_object_or_404(Cluster.objects.for_user(request.user, "view"), name=name)
    found = get_object_or_404(NodePool.objects.for_user(request.user, "view"), cluster=cluster, name=pool)
    images = [line.strip() for line in request.POST.get("images", "").splitlines() if line.strip()]
    try:
        services.set_pool_prepull(request.user, found, images, reason=request.POST.get("reason", ""))
    except ServiceError as exc:
        details = "; ".join(message for messages_ in exc.fields.values() for message in messages_)
        messages.error(request, f"{exc.message} {details}".strip())
    else:
        count = len(found.prepull_images)
        text = ngettext(
            "Pool %(pool)s pre-pulls %(count)s image: push to %(cluster)s to apply it.",
            "Pool %(pool)s pre-pulls %(count)s images: push to %(cluster)s to apply it.",
            count,
        )
        messages.success(request, text % {"pool": found.name, "count": count, "cluster": cluster.name})
    return redirect("fleet:cluster_detail", name=name)


@require_POST
@login_required
def cluster_sync(request, name: str):
    cluster = get_object_or_404(Cluster.objects.for_user(request.user, "view"), name=name)
    try:
        operation = start_operation(
            request.user,
            "fleet.sync",
            target=cluster,
            params={"cluster_id": cluster.pk},
            reason=request.POST.get("reason", ""),
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("fleet:cluster_detail", name=name)
    return redirect("operations:operation_detail", pk=operation.pk)


def _start_cluster_operation(request, name: str, kind: str, params: dict):
    cluster = get_object_or_404(Cluster.objects.for_user(request.user, "view"), name=name)
    try:
        operation = start_operation(
            request.user,
            kind,
            target=cluster,
            params={"cluster_id": cluster.pk, **params},
            reason=request.POST.get("reason", ""),
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("fleet:cluster_detail", name=name)
    return redirect("operations:operation_detail", pk=operation.pk)


@require_POST
@login_required
def cluster_quota_push(request, name: str):
    """Push the desired quota state; with dry_run=1 only show what would change."""
    dry_run = request.POST.get("dry_run") == "1"
    return _start_cluster_operation(request, name, "tenancy.quota-push", {"dry_run": dry_run})


@require_POST
@login_required
def cluster_quota_drift(request, name: str):
    return _start_cluster_operation(request, name, "tenancy.quota-drift", {})


@require_POST
@login_required
def cluster_test_connection(request, name: str):
    cluster = get_object_or_404(Cluster.objects.for_user(request.user, "view"), name=name)
    try:
        report = services.check_connection(request.user, cluster)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        text = f"{report.server_version} {report.message}".strip()
        if report.notes:
            text += " · " + " · ".join(report.notes)
        if report.ok:
            messages.success(request, _("Connection OK: %(details)s") % {"details": text})
        else:
            messages.error(request, _("Connection failed: %(details)s") % {"details": text})
    return redirect("fleet:cluster_detail", name=name)


# Node.gpu_free in SQL, so the list sorts by it.
FREE_GPUS = Case(
    When(unschedulable=False, state=NodeState.READY, then=Greatest(F("gpu_allocatable") - F("gpu_allocated"), 0)),
    default=Value(0),
    output_field=IntegerField(),
)


class NodeListView(ScopedListView):
    model = Node
    filterset_class = NodeFilterSet
    select_related = ("cluster", "pool", "gpu_model")
    template_name = "fleet/node_list.html"
    partial_template_name = "fleet/_node_table.html"
    tenant_field = None
    paginate_by = 100
    poll_seconds = 30
    columns = [
        Column("name", gettext_lazy("Node"), order_by="name"),
        Column("cluster", gettext_lazy("Cluster"), order_by=("cluster__name", "name"), csv="cluster.name"),
        Column("pool", gettext_lazy("Pool"), order_by=("pool__name", "name"), csv="pool.name"),
        Column("gpu_model", gettext_lazy("GPU model"), order_by=("gpu_model__code", "name"), csv="gpu_model.code"),
        Column("state", gettext_lazy("State"), order_by=("state", "unschedulable")),
        Column("cordoned", gettext_lazy("Cordoned"), csv="unschedulable", shown=False),
        Column("gpus", gettext_lazy("GPUs"), order_by="gpu_count", csv="gpu_count", css="text-end"),
        Column("allocated", gettext_lazy("Allocated"), order_by="gpu_allocated", csv="gpu_allocated", css="text-end"),
        Column(
            "free",
            gettext_lazy("Free"),
            order_by=(FREE_GPUS,),
            csv="gpu_free",
            css="text-end",
        ),
        Column("unhealthy", gettext_lazy("Unhealthy"), order_by="gpu_unhealthy", csv="gpu_unhealthy", css="text-end"),
        Column(
            "rack",
            gettext_lazy("Rack / leaf"),
            order_by=("rack", "leaf_switch"),
            csv=lambda n: f"{n.rack}/{n.leaf_switch}",
        ),
    ]
    csv_name = "nodes"

    def is_live(self, rows) -> bool:
        return bool(rows)  # nodes change with every inventory sync and health scrape


@require_safe
@login_required
def node_detail(request, cluster: str, name: str):
    node = get_object_or_404(
        Node.objects.for_user(request.user, "view").select_related("cluster", "pool", "gpu_model"),
        cluster__name=cluster,
        name=name,
    )
    gpus = list(Gpu.objects.filter(node=node).select_related("model").order_by("index"))
    for gpu in gpus:
        gpu.node = node
    names = WorkloadNames.of_gpus(request.user, gpus)
    for gpu in gpus:  # what runs on each, named only where the user may view its tenant
        gpu.shown_allocated_to = names.allocated_to(gpu)
    simulation = get_backend(node.cluster).simulation()
    return render(
        request,
        "fleet/node_detail.html",
        {
            "node": node,
            "gpus": gpus,
            "can_operate": has_perm(request.user, "operate"),
            "can_administer": has_perm(request.user, "administer"),
            "simulated": simulation is not None,
            "faults": simulation.faults_on(node.name) if simulation else [],
            "fault_kinds": simulation.fault_choices() if simulation else [],
        },
    )


@require_POST
@login_required
def node_fault(request, cluster: str, name: str):
    """Inject (or, with `clear=<id>`, clear) a simulated fault on this node (only a simulated cluster has faults)."""
    node = get_object_or_404(
        Node.objects.for_user(request.user, "view").select_related("cluster"), cluster__name=cluster, name=name
    )
    simulator = get_backend(node.cluster).simulation()
    if simulator is None:
        raise Http404("not a simulated cluster")
    reason = request.POST.get("reason", "")[:500]
    try:
        clear = request.POST.get("clear", "")
        if clear:
            if not clear.isdigit():
                raise InvalidInput(_("Which fault? Give its id."), {"clear": _("A fault id.")})
            fault = simulator.fault(int(clear), node.name)
            if fault is None:
                raise Http404("no such fault on this node")
            simulator.clear_fault(request.user, fault, reason)
            messages.success(
                request, _("Cleared %(fault)s. The next sync shows the node's new state.") % {"fault": fault.label}
            )
        else:
            gpu = request.POST.get("gpu", "")
            if gpu and not gpu.isdigit():
                raise InvalidInput(_("GPU must be an index."), {"gpu": _("A number.")})
            fault = simulator.inject_fault(
                request.user, node.name, request.POST.get("kind", ""), int(gpu) if gpu else None, reason
            )
            messages.success(request, _("Injected %(fault)s. The next sync shows its effect.") % {"fault": fault.label})
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("fleet:node_detail", cluster=cluster, name=name)


@require_safe
@login_required
def gpu_models(request):
    models = GpuModel.objects.for_user(request.user, "view").annotate(
        node_count=Count("nodes", filter=~Q(nodes__state=NodeState.VANISHED))
    )
    return render(request, "fleet/gpu_models.html", {"models": models})


@require_safe
@login_required
def capacity(request):
    nodes = Node.objects.for_user(request.user, "view")
    cluster_name = request.GET.get("cluster", "")
    if cluster_name:
        nodes = nodes.filter(cluster__name=cluster_name)
    from apps.fleet.pages import CAPACITY_PANELS

    panels = [(template, context(request, cluster_name)) for template, context in CAPACITY_PANELS]
    return render(
        request,
        "fleet/capacity.html",
        {
            "capacity": capacity_by_model(nodes),
            "clusters": Cluster.objects.for_user(request.user, "view"),
            "cluster_name": cluster_name,
            "panels": [(template, panel) for template, panel in panels if panel is not None],
        },
    )


TELEMETRY_METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_XID_ERRORS",
)


@require_safe
@login_required
def node_telemetry(request, cluster: str, name: str):
    """The node's current DCGM readings, polled by the node page. Read straight from its exporter."""
    node = get_object_or_404(
        Node.objects.for_user(request.user, "view").select_related("cluster"), cluster__name=cluster, name=name
    )
    rows, error = [], ""
    reader = getattr(get_backend(node.cluster), "node_metrics_text", None)
    if reader is None:
        error = _("No DCGM exporter is configured for this cluster yet.")
    else:
        try:
            readings = per_gpu(reader(node.name), TELEMETRY_METRICS)
        except BackendError as exc:
            error = str(exc)
        else:
            rows = [
                {"gpu": gpu, **{metric.rsplit("_", 1)[-1].lower(): value for metric, value in values.items()}}
                for gpu, values in sorted(readings.items(), key=lambda item: int(item[0]))
            ]
    return render(request, "fleet/_node_telemetry.html", {"rows": rows, "error": error})


def _caveats(cluster) -> list[str]:
    """What the cluster's backend cannot express of the quota model (its renderer says; simulated: Kubernetes')."""
    from apps.backends.render import caveats_for

    return caveats_for(backend_class(cluster.kind).renderer, (cluster.connection or {}).get("queueing", "kueue"))
