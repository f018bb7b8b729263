"""Tenant pages: the tree, one tenant with its members and children, create and edit; and a cluster's desired
quota state (mounted under the fleet's URLs, see apps/fleet/pages.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_safe

from apps.accounts.models import Membership, Tenant
from apps.accounts.permissions import allowed_tenant_ids, has_perm
from apps.backends.registry import backend_class
from apps.backends.render import RenderError, caveats_for
from apps.backends.render import render as render_state
from apps.backends.render.titles import quota_title
from apps.backends.shares import format_share
from apps.core.errors import ServiceError
from apps.core.forms import apply_service_error
from apps.core.tables import Column
from apps.core.views import ScopedListView
from apps.fleet.models import Cluster
from apps.tenancy import services
from apps.tenancy.desired_state import build_desired_state
from apps.tenancy.filtersets import TenantFilterSet
from apps.tenancy.forms import TenantForm


class TenantListView(ScopedListView):
    model = Tenant
    filterset_class = TenantFilterSet
    select_related = ("parent",)
    template_name = "tenancy/tenant_list.html"
    tenant_field = None
    columns = [
        Column("name", gettext_lazy("Name"), order_by="name"),
        Column("slug", gettext_lazy("Slug"), order_by="slug"),
        Column("parent", gettext_lazy("Parent"), order_by="parent__name", csv="parent.slug"),
        Column("created", gettext_lazy("Created"), order_by="created_at", csv="created_at"),
    ]
    csv_name = "tenants"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        context["can_create"] = has_perm(user, "administer") or bool(allowed_tenant_ids(user, "manage"))
        return context


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def tenant_create(request):
    form = TenantForm(request.POST or None, user=request.user, initial={"parent": request.GET.get("parent")})
    if request.method == "POST" and form.is_valid():
        try:
            tenant = services.create_tenant(request.user, **form.cleaned_data)
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(request, _("Created tenant %(name)s.") % {"name": tenant.name})
            return redirect("tenancy:tenant_detail", slug=tenant.slug)
    return render(request, "tenancy/tenant_form.html", {"form": form, "title": _("New tenant")})


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def tenant_detail(request, slug: str):
    tenant = get_object_or_404(Tenant.objects.for_user(request.user, "view").select_related("parent"), slug=slug)
    can_manage = has_perm(request.user, "manage", tenant)
    form = None
    if can_manage:
        form = TenantForm(request.POST or None, instance=tenant, user=request.user)
        form.fields["parent"].queryset = form.fields["parent"].queryset.exclude(path__startswith=tenant.path)
        if request.method == "POST" and form.is_valid():
            data = dict(form.cleaned_data)
            reason = data.pop("reason", "")
            fresh = Tenant.objects.get(pk=tenant.pk)  # the form mutated `tenant`; the service diffs from the DB
            try:
                tenant = services.update_tenant(request.user, fresh, reason=reason, **data)
            except ServiceError as exc:
                apply_service_error(form, exc)
            else:
                messages.success(request, _("Saved."))
                return redirect("tenancy:tenant_detail", slug=tenant.slug)
    return render(
        request,
        "tenancy/tenant_detail.html",
        {
            "tenant": tenant,
            "form": form,
            "can_manage": can_manage and tenant.archived_at is None,
            "can_archive": has_perm(request.user, "administer"),
            "children": Tenant.objects.for_user(request.user, "view").filter(parent=tenant),
            "memberships": Membership.objects.filter(tenant=tenant).select_related("user")[:200],
            "ancestors": Tenant.objects.filter(id__in=tenant.ancestor_ids()[:-1]).order_by("path"),
            **_quota_context(tenant),
        },
    )


@require_http_methods(["POST"])
@login_required
def tenant_archive(request, slug: str):
    """Archive the tenant, or unarchive an archived one (platform admins; the detail page's button)."""
    tenant = get_object_or_404(Tenant.objects.for_user(request.user, "view"), slug=slug)
    change = services.unarchive_tenant if tenant.archived_at else services.archive_tenant
    try:
        tenant = change(request.user, tenant, reason=request.POST.get("reason", ""))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("Archived %(name)s.") % {"name": tenant.name}
            if tenant.archived_at
            else _("Unarchived %(name)s.") % {"name": tenant.name},
        )
    return redirect("tenancy:tenant_detail", slug=tenant.slug)


def _quota_context(tenant: Tenant) -> dict:
    """Quota use per GPU model for the tenant's subtree, its queues, guarantee caps and pending claims with reasons."""
    from apps.tenancy.admission import UNLIMITED
    from apps.tenancy.models import Admission, AdmissionState, GuaranteeCap, Queue
    from apps.tenancy.snapshot import build_snapshot

    snapshot, _unused = build_snapshot(with_capacity=False)
    subtree_queues = {
        q.pk: q for q in Queue.objects.filter(tenant__path__startswith=tenant.path).select_related("tenant")
    }
    per_model: dict[str, dict] = {}
    rows = []
    for (queue_id, code), q in sorted(snapshot.quotas.items(), key=lambda item: (item[0][1], item[0][0])):
        if queue_id not in subtree_queues:
            continue
        total = per_model.setdefault(
            code, {"model": snapshot.model_names.get(code, code), "guaranteed": 0, "used": 0, "borrowed": 0, "lent": 0}
        )
        for key in ("guaranteed", "used", "borrowed", "lent"):
            total[key] += getattr(q, key)
        rows.append(
            {
                "queue": subtree_queues[queue_id],
                "model": snapshot.model_names.get(code, code),
                "code": code,
                "state": q,
                "borrow": "∞" if q.borrow_limit == UNLIMITED else format_share(int(q.borrow_limit), snapshot.unit),
            }
        )
    return {
        "quota_totals": list(per_model.values()),
        "quota_rows": rows,
        "queues": list(subtree_queues.values()),
        "guarantee_caps": GuaranteeCap.objects.filter(tenant=tenant).select_related("gpu_model"),
        "pending": Admission.objects.filter(queue__in=subtree_queues, state=AdmissionState.PENDING)
        .select_related("queue__tenant", "gpu_model", "tier")
        .order_by("-tier__value", "submitted_at")[:50],
    }


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def queue_detail(request, pk: int):
    """One queue: its quota per model with use, bindings, claims (admitted with lenders, pending with reasons)."""
    from apps.tenancy.admission import POOL, UNLIMITED
    from apps.tenancy.forms import QuotaForm
    from apps.tenancy.models import Admission, AdmissionState, Queue
    from apps.tenancy.services import preview_quota, set_quota
    from apps.tenancy.snapshot import build_snapshot

    queue = get_object_or_404(Queue.objects.for_user(request.user, "view").select_related("tenant"), pk=pk)
    form = QuotaForm(request.POST or None)
    impact = None
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        confirm, reason = data.pop("confirm"), data.pop("reason")
        try:
            if request.POST.get("action") == "preview":
                impact = preview_quota(request.user, queue, data.pop("gpu_model"), **data)
            else:
                _quota, applied = set_quota(request.user, queue=queue, confirm=confirm, reason=reason, **data)
                messages.success(request, _("Quota saved. Impact: %(impact)s.") % {"impact": applied["text"]})
                return redirect("tenancy:queue_detail", pk=queue.pk)
        except ServiceError as exc:
            apply_service_error(form, exc)
            impact = exc.data.get("impact")
    snapshot, _unused = build_snapshot(with_capacity=False)
    quotas = [
        {
            "model": snapshot.model_names.get(code, code),
            "state": q,
            "borrow": "∞" if q.borrow_limit == UNLIMITED else format_share(int(q.borrow_limit), snapshot.unit),
        }
        for (queue_id, code), q in snapshot.quotas.items()
        if queue_id == queue.pk
    ]
    claims = (
        Admission.objects.filter(queue=queue)
        .exclude(state=AdmissionState.RELEASED)
        .select_related("gpu_model", "tier")
        .order_by("state", "-tier__value", "submitted_at")[:200]
    )
    lenders = {str(q.pk): str(q) for q in Queue.objects.select_related("tenant")}
    lenders[str(POOL)] = _("unguaranteed capacity")
    return render(
        request,
        "tenancy/queue_detail.html",
        {
            "queue": queue,
            "quotas": quotas,
            "claims": claims,
            "lenders": lenders,
            "bindings": queue.bindings.select_related("cluster"),
            "can_manage": has_perm(request.user, "manage", queue.tenant),
            "form": form,
            "impact": impact,
        },
    )


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def quota_requests(request):
    """Quota requests: tenant admins file them, platform admins approve (in full or part) or reject."""
    from apps.tenancy.forms import QuotaDecisionForm, QuotaRequestForm
    from apps.tenancy.models import QuotaRequest
    from apps.tenancy.services import decide_quota_request, request_quota

    # A link from a tenant's queue row ("request more") preselects the queue and the GPU model.
    initial = {key: request.GET[key] for key in ("queue", "gpu_model") if request.GET.get(key)}
    form = QuotaRequestForm(
        request.POST if request.POST.get("action") == "request" else None, user=request.user, initial=initial
    )
    if request.method == "POST" and request.POST.get("action") == "request" and form.is_valid():
        try:
            request_quota(request.user, **form.cleaned_data)
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(request, _("Request filed; a platform admin will decide it."))
            return redirect("tenancy:quota_requests")
    if request.method == "POST" and request.POST.get("action") == "decide":
        decision = QuotaDecisionForm(request.POST)
        if decision.is_valid():
            data = decision.cleaned_data
            target = get_object_or_404(QuotaRequest.objects.for_user(request.user, "view"), pk=data.pop("request_id"))
            try:
                decided = decide_quota_request(request.user, target, **data)
            except ServiceError as exc:
                messages.error(request, exc.message)
            else:
                messages.success(
                    request, _("Request %(id)s: %(state)s.") % {"id": decided.pk, "state": decided.get_state_display()}
                )
            return redirect("tenancy:quota_requests")
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in decision.errors.items()))
    rows = QuotaRequest.objects.for_user(request.user, "view").select_related(
        "queue__tenant", "gpu_model", "requested_by", "decided_by"
    )[:200]
    return render(
        request,
        "tenancy/quota_requests.html",
        {
            "requests": rows,
            "form": form,
            "can_decide": has_perm(request.user, "administer"),
            "can_request": bool(form.fields["queue"].queryset.exists()),
        },
    )


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def tiers(request):
    """Priority tiers; platform admins edit them."""
    from apps.tenancy.forms import TierForm
    from apps.tenancy.models import PriorityTier
    from apps.tenancy.services import update_tier

    if request.method == "POST":
        tier_id = request.POST.get("tier", "")
        tier = get_object_or_404(PriorityTier, pk=int(tier_id) if tier_id.isdigit() else 0)
        form = TierForm(request.POST)
        if form.is_valid():
            data = dict(form.cleaned_data)
            reason = data.pop("reason")
            try:
                update_tier(request.user, tier, reason=reason, **data)
            except ServiceError as exc:
                messages.error(request, exc.message)
            else:
                messages.success(request, _("Saved tier %(name)s.") % {"name": tier.name})
        else:
            messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("tenancy:tiers")
    return render(
        request,
        "tenancy/tiers.html",
        {"tiers": PriorityTier.objects.all(), "can_edit": has_perm(request.user, "administer")},
    )


@require_safe
@login_required
def cluster_desired_state(request, name: str):
    """What the console wants on this cluster for its tenants, queues, quotas and tiers, in the backend's terms
    (its renderer's: Slurm's sacctmgr commands, or Kubernetes objects; a simulated cluster shows Kubernetes')."""
    cluster = get_object_or_404(Cluster.objects.for_user(request.user, "view"), name=name)
    kind = backend_class(cluster.kind).renderer
    # Every tenant's queues and quotas are the cluster's; a user who may not view them all sees their tenants' part.
    tenant_ids = allowed_tenant_ids(request.user, "view")
    state = build_desired_state(cluster, tenant_ids)
    text, error = "", ""
    try:
        text = render_state(state, kind).text
    except RenderError as exc:
        error = str(exc)
    return render(
        request,
        "fleet/cluster_desired_state.html",
        {
            "cluster": cluster,
            "title": quota_title(kind, state.queueing),
            "text": text,
            "error": error,
            "caveats": caveats_for(kind, state.queueing),
            "queues": len(state.queues),
            "partial": tenant_ids is not None,
        },
    )
