"""The submit page's previews (POST /workloads/new/preview/<key>/) and its editor (POST /workloads/new/editor/).

Each preview takes the form being edited (its fields, or its YAML) and answers an HTML fragment, changing nothing:
admission now (tenancy's dry run: the words the workload page shows once submitted), what the cluster receives
(strictly validated), the cost (the rate card's). Scoped as a submission is: one's own queues only; a viewer
without the right to submit gets 403 and previews nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.chargeback import services as chargeback
from apps.core.stored_text import translate_stored
from apps.tenancy import services as tenancy
from apps.tenancy.models import Admission, PriorityTier
from apps.workloads import services
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


def fields(**overrides) -> dict:
    """The form's fields for a one-node H100 job on a/train (what the page posts: no JSON)."""
    data = {
        "kind": "training",
        "mode": "fields",
        "name": "previewed",
        "queue": "a/train",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": "python\ntrain.py",
        "gpu_model": "h100",
        "workers": "1",
        "gpus_per_worker": "8",
        "max_runtime_s": "3600",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def preview(client, key: str, data: dict):
    return client.post(reverse("workloads:submit_preview", args=[key]), data)


def state():
    return (Workload.objects.count(), Admission.objects.count(), AuditEvent.objects.count())


@pytest.fixture
def lender(fleet, personas):
    """Team A1's queue on the same cluster guarantees 8 H100 and lends them while idle; H100 costs 2.50 an hour."""
    admin = fresh(personas.platform_admin)
    tenancy.set_quota(admin, queue=fleet["queue"], gpu_model=fleet["h100"], guaranteed=8)
    tenancy.set_guarantee_cap(admin, tenant=personas.a_team, gpu_model=fleet["h100"], guaranteed=8)
    queue = tenancy.create_queue(admin, tenant=personas.a_team, name="vision")
    tenancy.bind_queue(admin, queue, cluster=fleet["cluster"], namespaces=["a-team-vision"])
    tenancy.set_quota(admin, queue=queue, gpu_model=fleet["h100"], guaranteed=8)
    chargeback.set_rate(admin, gpu_model=fleet["h100"], rate="2.50", effective_from=LONG_AGO)
    return queue


def test_admission_preview_says_what_submitting_would_do_in_the_workload_pages_words(
    fleet, lender, personas, client, django_capture_on_commit_callbacks
):
    client.force_login(fresh(personas.tenant_admin_a))  # may view Team A1: its queue is named
    before = state()
    within = preview(client, "admission", fields()).content.decode()
    assert "Would start now, within guarantee." in within and "within guarantee (8 of 8)" in within
    borrow = preview(client, "admission", fields(workers="2")).content.decode()
    assert "Would start now, borrowing 8 from a-team/vision." in borrow
    wait = preview(client, "admission", fields(workers="3")).content.decode()
    assert "Would wait: needs 24 × H100-80GB-HBM3, 8 free within guarantee." in wait
    assert state() == before  # nothing stored, nothing audited

    # Submitted as it is, the workload's page shows the reason the preview quoted.
    with django_capture_on_commit_callbacks(execute=True):
        workload, _ = services.submit_workload(
            fresh(personas.tenant_admin_a), kind="training", spec=training_spec(name="previewed", workers=3)
        )
    workload.refresh_from_db()
    assert workload.state == "pending"
    assert translate_stored(workload.state_reason) in wait.replace("&#x27;", "'")
    page = client.get(reverse("workloads:workload_detail", args=[workload.pk])).content.decode()
    assert translate_stored(workload.state_reason) in page


def test_a_member_sees_other_tenants_lenders_unnamed(fleet, lender, personas, client):
    client.force_login(fresh(personas.member_a))  # a member of A only: Team A1 is not in view
    borrow = preview(client, "admission", fields(workers="2")).content.decode()
    assert "borrowing 8 from another tenant&#x27;s queue." in borrow and "vision" not in borrow


def test_previews_are_scoped_like_a_submission(fleet, lender, personas, client):
    before = state()
    client.force_login(fresh(personas.viewer_a))  # may view A, may not submit there
    for key in ("admission", "rendering", "cost"):
        refused = preview(client, key, fields())
        assert refused.status_code == 403, key
        body = refused.content.decode()
        assert "You may not submit work to tenant a." in body
        assert "guarantee" not in body and "USD" not in body and "apiVersion" not in body
    client.force_login(fresh(personas.member_b))  # A is not in view at all
    for key in ("admission", "rendering", "cost"):
        hidden = preview(client, key, fields())
        assert hidden.status_code == 404, key
        assert "train" not in hidden.content.decode().replace("a/train", "")
    assert state() == before


def test_a_spec_error_previews_nothing_and_is_sent_for_its_field(fleet, lender, personas, client):
    client.force_login(fresh(personas.member_a))
    response = preview(client, "admission", fields(name="Bad_Name", workers="two"))
    assert response.status_code == 200
    assert "Fix the spec first" in response.content.decode()
    errors = json.loads(response["HX-Trigger"])["spec-errors"]
    assert errors["fields"]["workers"] == ["Not a whole number."]
    # The service's own errors come with their fields too (the name is checked once the numbers can be read).
    errors = json.loads(preview(client, "admission", fields(name="Bad_Name"))["HX-Trigger"])["spec-errors"]
    assert "not a valid name" in errors["fields"]["name"][0]
    cost = preview(client, "cost", fields(name="Bad_Name"))
    assert "Fix the spec first" in cost.content.decode() and "HX-Trigger" not in cost  # sent once, by the first
    # In YAML, the errors are the box's.
    yaml_mode = {"kind": "training", "mode": "yaml", "spec": "name: Bad_Name\nqueue: [oops"}
    errors = json.loads(preview(client, "admission", yaml_mode)["HX-Trigger"])["spec-errors"]
    assert "Not valid YAML" in errors["fields"]["spec"][0]


def test_rendering_preview_shows_what_the_cluster_receives_strictly_validated(fleet, lender, personas, client):
    client.force_login(fresh(personas.member_a))
    body = preview(client, "rendering", fields(env="NCCL_DEBUG=INFO")).content.decode()
    assert "Manifests" in body and "for sim" in body
    assert "Strict validation passed: Kubernetes 1.31–1.35" in body
    assert "kind: Job" in body and "NCCL_DEBUG" in body and "wl0-previewed" in body
    # A MIG slice the simulated cluster's H100 pool offers renders; what the cluster cannot run is refused as the
    # submission refuses it, at the field.
    refused = preview(client, "rendering", fields(**{"sharing.mode": "mig", "sharing.mig_profile": "9g.99gb"}))
    errors = json.loads(preview(client, "admission", fields(**{"sharing.mode": "mig"}))["HX-Trigger"])
    assert "Fix the spec first" in refused.content.decode()
    assert "sharing.mig_profile" in errors["spec-errors"]["fields"]


def test_cost_preview_prices_the_share_with_the_rate_card(fleet, lender, personas, client):
    client.force_login(fresh(personas.member_a))
    body = preview(client, "cost", fields()).content.decode()
    assert "20.00 USD" in body and "8 GPU × 2.50 USD per GPU-hour" in body  # 8 GPUs × 2.50 for its hour
    body = preview(client, "cost", fields(workers="2", max_runtime_s="5400")).content.decode()
    assert "40.00 USD</strong> per hour" in body and "60.00 USD</strong> at most" in body  # 16 GPUs × 1.5 h
    # A tier's own card wins over the model's default card.
    chargeback.set_rate(
        fresh(personas.platform_admin),
        gpu_model=fleet["h100"],
        tier=PriorityTier.objects.get(name="exploratory"),
        rate="1.00",
        effective_from=LONG_AGO,
    )
    body = preview(client, "cost", fields(tier="exploratory")).content.decode()
    assert "8.00 USD" in body and "for tier exploratory" in body


def test_the_editor_turns_fields_into_yaml_and_back(fleet, personas, client):
    client.force_login(fresh(personas.member_a))
    url = reverse("workloads:submit_editor")
    as_yaml = client.post(url, {**fields(env="A=1"), "to": "yaml"}).content.decode()
    assert (
        'data-mode="yaml"' in as_yaml and "tenant: a\nqueue: train" in as_yaml and "env:\n  A: &#x27;1&#x27;" in as_yaml
    )
    text = "name: back\ntenant: a\nqueue: train\ncommand: [python, x.py]\nworkers: 2\nsharing: {mode: whole}\n"
    back = client.post(url, {"kind": "training", "mode": "yaml", "spec": text, "to": "fields"}).content.decode()
    assert 'data-mode="fields"' in back and 'name="workers" id="f-workers" value="2"' in back
    assert '<option value="a/train" selected>' in back and "python\nx.py</textarea>" in back
    broken = client.post(url, {"kind": "training", "mode": "yaml", "spec": "a: [1,", "to": "fields"}).content.decode()
    assert 'data-mode="yaml"' in broken and "Not valid YAML" in broken and "line 1" in broken
    unknown = client.post(url, {"kind": "training", "mode": "yaml", "spec": "name: x\nfoo: 1", "to": "fields"})
    assert "The form has no field for foo: keep editing it as YAML." in unknown.content.decode()
    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    refused = client.post(url, {"kind": "training", "mode": "yaml", "spec": bomb, "to": "fields"}).content.decode()
    assert "anchors and aliases" in refused


def test_submitting_a_bad_spec_gives_the_form_back_with_errors_at_the_fields(fleet, personas, client):
    client.force_login(fresh(personas.member_a))
    url = reverse("workloads:workload_submit")
    response = client.post(url, fields(name="Bad_Name", **{"sharing.mode": "mig"}))
    assert response.status_code == 400, response.content.decode()[-3000:]
    body = response.content.decode()
    assert 'data-errors-for="name"><div>&#x27;Bad_Name&#x27; is not a valid name' in body
    assert 'data-errors-for="sharing.mig_profile"><div>' in body
    assert 'value="Bad_Name"' in body and 'name="gpus_per_worker" id="f-gpus_per_worker" value="8"' in body
    refused = client.post(url, {"kind": "training", "mode": "yaml", "spec": "tenant: a\nqueue: train\nworkers: 0\n"})
    assert refused.status_code == 400
    assert "<div>workers: must be between 1 and 10000, not 0</div>" in refused.content.decode()
    client.force_login(fresh(personas.viewer_a))
    assert client.post(url, fields()).status_code == 403
    assert not Workload.objects.exists()


def test_the_form_offers_only_the_users_queues(fleet, personas, client):
    admin = fresh(personas.platform_admin)
    other = tenancy.create_queue(admin, tenant=personas.b, name="bravo-only")
    tenancy.bind_queue(admin, other, cluster=fleet["cluster"], namespaces=["b-bravo"])
    client.force_login(fresh(personas.member_a))
    page = client.get(reverse("workloads:workload_submit")).content.decode()
    assert '<option value="a/train"' in page and "bravo-only" not in page
    assert 'data-queues="a/train"' in page  # the cluster choice knows which queues are bound to it
    client.force_login(fresh(personas.viewer_a))
    assert 'data-testid="no-queues"' in client.get(reverse("workloads:workload_submit")).content.decode()


def slurm_queue(fleet, personas) -> None:
    """A Slurm cluster "hpc" with one H100 node, and tenant A's queue a/hpc bound to it."""
    from apps.fleet.models import Cluster, Node, NodeState

    admin = fresh(personas.platform_admin)
    slurm = Cluster.objects.create(
        name="hpc",
        kind="slurm",
        connection={
            "partition": "gpu",
            "output_dir": "/shared/out",
            "gres_models": {"h100": "h100"},
            "containers": "pyxis",
        },
    )
    Node.objects.create(
        cluster=slurm, name="h1", gpu_model=fleet["h100"], state=NodeState.READY, gpu_count=8, gpu_allocatable=8
    )
    queue = tenancy.create_queue(admin, tenant=personas.a, name="hpc")
    tenancy.bind_queue(admin, queue, cluster=slurm, namespaces=[], slurm_account="a_hpc")
    tenancy.set_quota(admin, queue=fleet["queue"], gpu_model=fleet["h100"], guaranteed=8)
    tenancy.set_quota(admin, queue=queue, gpu_model=fleet["h100"], guaranteed=8)


def test_a_slurm_cluster_receives_an_sbatch_script(fleet, personas, client):
    """The preview renders for the cluster placement would choose; on Slurm that is the sbatch script, which has no
    schema to validate against (what Slurm cannot run is refused when rendering)."""
    slurm_queue(fleet, personas)
    client.force_login(fresh(personas.member_a))
    body = preview(client, "rendering", fields(queue="a/hpc")).content.decode()
    assert "sbatch script" in body and "for hpc" in body
    assert "#SBATCH --account=a_hpc" in body and "#SBATCH --gres=gpu:h100:8" in body
    assert "An sbatch script has no schema to validate against" in body
    admission = preview(client, "admission", fields(queue="a/hpc")).content.decode()
    assert "Would start now, within guarantee." in admission and "On hpc." in admission


def test_an_inference_service_is_previewed_from_its_fields(fleet, lender, personas, client):
    client.force_login(fresh(personas.member_a))
    page = client.get(reverse("workloads:workload_submit"), {"kind": "inference"}).content.decode()
    assert 'data-testid="section-serving"' in page and 'name="autoscaling.enabled"' in page
    data = {
        "kind": "inference",
        "mode": "fields",
        "name": "chat",
        "queue": "a/train",
        "tier": "online-inference",
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
        "tensor_parallel": "2",
        "replicas": "2",
        "autoscaling.enabled": "on",
        "autoscaling.min_replicas": "1",
        "autoscaling.max_replicas": "3",
    }
    admission = preview(client, "admission", data).content.decode()
    assert "Would start now, within guarantee." in admission and "within guarantee (4 of 8)" in admission
    rendering = preview(client, "rendering", data).content.decode()
    assert "kind: Deployment" in rendering and "ScaledObject" in rendering and "Strict validation passed" in rendering
    cost = preview(client, "cost", data).content.decode()
    assert (
        "10.00 USD</strong> per hour" in cost and "No runtime limit: it runs until cancelled, 240.00 USD a day." in cost
    )


def test_work_that_would_head_its_queue_shows_its_reserved_start(
    fleet, personas, client, django_capture_on_commit_callbacks
):
    """The queue's 16 H100 are held for an hour: 8 more would wait, and hold what they wait for from when that job
    ends (the reservation the next admission pass gives it, in the pass's words)."""
    from apps.tenancy.reservations import show_time

    with django_capture_on_commit_callbacks(execute=True):
        running, _ = services.submit_workload(
            fresh(personas.member_a), kind="training", spec=training_spec(name="holder", workers=2)
        )
    running.refresh_from_db()
    assert running.admission.state == "admitted"
    client.force_login(fresh(personas.member_a))
    body = preview(client, "admission", fields(max_runtime_s="600")).content.decode()
    assert "Would wait: needs 8 × H100-80GB-HBM3, 0 free within guarantee." in body
    assert f"Reserved start ~{show_time(running.admission.ends_at)}:" in body


def test_the_rendering_preview_follows_the_clusters_deployment_targets(fleet, lender, personas, client):
    """The preview renders through the cluster's backend with its settings: a cluster whose training_target is
    trainjob and inference_target kserve shows a TrainJob and an InferenceService, strictly validated."""
    cluster = fleet["cluster"]
    cluster.connection = {**cluster.connection, "training_target": "trainjob", "inference_target": "kserve"}
    cluster.save(update_fields=["connection"])
    client.force_login(fresh(personas.member_a))
    training = preview(client, "rendering", fields()).content.decode()
    assert "kind: TrainJob" in training and "name: torch-distributed" in training
    assert "Strict validation passed" in training
    service = {
        "kind": "inference",
        "mode": "fields",
        "name": "chat",
        "queue": "a/train",
        "tier": "online-inference",
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
        "tensor_parallel": "2",
    }
    rendering = preview(client, "rendering", service).content.decode()
    assert "kind: InferenceService" in rendering and "kserve-container" in rendering
    assert "Strict validation passed" in rendering


def test_routing_and_pools_from_the_form_render_the_router_and_both_pools(fleet, lender, personas, client):
    client.force_login(fresh(personas.member_a))
    page = client.get(reverse("workloads:workload_submit"), {"kind": "inference"}).content.decode()
    assert 'name="routing"' in page and 'name="disaggregation.prefill.replicas"' in page
    data = {
        "kind": "inference",
        "mode": "fields",
        "name": "split",
        "queue": "a/train",
        "tier": "online-inference",
        "engine": "sglang",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "gpu_model": "h100",
        "routing": "cache-aware",
        "disaggregation.prefill.replicas": "1",
        "disaggregation.decode.replicas": "2",
        "disaggregation.decode.gpus_per_replica": "2",
    }
    admission = preview(client, "admission", data).content.decode()
    assert "within guarantee (5 of 8)" in admission  # 1 x 1 prefill + 2 x 2 decode
    rendering = preview(client, "rendering", data).content.decode()
    assert "split-router" in rendering and "split-prefill" in rendering
    assert "--pd-disaggregation" in rendering and "Strict validation passed" in rendering


def test_routing_on_a_slurm_cluster_is_refused_naming_the_field(fleet, personas, client):
    slurm_queue(fleet, personas)
    client.force_login(fresh(personas.member_a))
    data = {
        "kind": "inference",
        "mode": "fields",
        "name": "routed",
        "queue": "a/hpc",
        "tier": "online-inference",
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
        "routing": "cache-aware",
    }
    rendering = preview(client, "rendering", data).content.decode()
    assert "routing" in rendering and "Kubernetes only" in rendering
