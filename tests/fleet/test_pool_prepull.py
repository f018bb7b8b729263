"""Node pools' image pre-pull lists (docs/inference.md: warm starts): the service, the API, the cluster page's pools
table, what the desired state says about each pool, and the push now."""

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.backends.render import render_kubernetes
from apps.backends.render.prepull import PREPULL_NAMESPACE
from apps.backends.render.validate import validate_objects
from apps.core.errors import Forbidden, InvalidInput
from apps.fleet.models import Node, NodePool
from apps.fleet.services import set_pool_prepull
from apps.tenancy.desired_state import build_desired_state
from tests.utils.personas import fresh

SGLANG = "lmsysorg/sglang:v0.5.3"
VLLM = "vllm/vllm-openai:v0.11.0"


@pytest.fixture
def pool(sim):
    return NodePool.objects.get(cluster=sim, name="h100-training")


def test_a_platform_admin_sets_the_list_with_one_audit_event(pool, personas):
    before = AuditEvent.objects.count()
    set_pool_prepull(fresh(personas.platform_admin), pool, [f" {SGLANG} ", VLLM, SGLANG], reason="warm starts")
    pool.refresh_from_db()
    assert pool.prepull_images == [SGLANG, VLLM]  # trimmed, each once, in order
    event = AuditEvent.objects.get(action="pool.prepull")
    assert AuditEvent.objects.count() == before + 1
    assert (event.before, event.after, event.reason) == (
        {"prepull_images": []},
        {"prepull_images": [SGLANG, VLLM]},
        "warm starts",
    )
    set_pool_prepull(fresh(personas.platform_admin), pool, [SGLANG, VLLM])  # the same list: nothing changes
    assert AuditEvent.objects.count() == before + 1


@pytest.mark.parametrize(
    ("images", "says"),
    [
        (["vllm/vllm-openai"], "has no tag or digest"),
        (["vllm openai:1"], "contains spaces or shell characters"),
        ([f"repo/img:{i}" for i in range(21)], "At most 20 images"),
        ("vllm/vllm-openai:v1", "A list of image references"),
    ],
)
def test_bad_lists_are_refused_naming_the_field_and_nothing_changes(pool, personas, images, says):
    with pytest.raises(InvalidInput) as refused:
        set_pool_prepull(fresh(personas.platform_admin), pool, images)
    assert says in " ".join(refused.value.fields["images"])
    pool.refresh_from_db()
    assert pool.prepull_images == [] and not AuditEvent.objects.filter(action="pool.prepull").exists()


def test_only_platform_admins_set_it(pool, personas):
    for persona in ("oncall", "tenant_admin_a", "member_a"):
        with pytest.raises(Forbidden):
            set_pool_prepull(fresh(personas.user(persona)), pool, [SGLANG])


def test_the_api_lists_pools_and_sets_a_pools_list(sim, pool, personas, api):
    listed = api(fresh(personas.member_a)).get("/api/v1/pools/?cluster=sim").json()
    assert {p["name"] for p in listed["results"]} == {"h100-training", "l40s-inference"}
    assert listed["results"][0]["prepull_images"] == []
    url = f"/api/v1/pools/{pool.pk}/prepull/"
    assert api(fresh(personas.tenant_admin_a)).put(url, {"images": [SGLANG]}, format="json").status_code == 403
    bad = api(fresh(personas.platform_admin)).put(url, {"images": ["nope"]}, format="json")
    assert bad.status_code == 400 and "images" in bad.json()["fields"]
    done = api(fresh(personas.platform_admin)).put(url, {"images": [SGLANG], "reason": "chat"}, format="json")
    assert done.status_code == 200 and done.json()["prepull_images"] == [SGLANG]
    shown = api(fresh(personas.viewer_a)).get(f"/api/v1/pools/{pool.pk}/").json()
    assert (shown["cluster"], shown["gpu_model"], shown["prepull_images"]) == ("sim", "h100", [SGLANG])


def test_push_now_starts_the_quota_push_operation(sim, personas, api):
    assert api(fresh(personas.oncall)).post("/api/v1/clusters/sim/quota-push/", {}, format="json").status_code == 403
    response = api(fresh(personas.platform_admin)).post("/api/v1/clusters/sim/quota-push/", {}, format="json")
    assert response.status_code == 202
    assert (response.json()["kind"], response.json()["params"]["dry_run"]) == ("tenancy.quota-push", False)


def test_the_cluster_pages_pools_table_edits_the_list(sim, pool, personas, client):
    client.force_login(fresh(personas.platform_admin))
    page = client.get(reverse("fleet:cluster_detail", args=["sim"])).content.decode()
    assert 'data-testid="pool-h100-training"' in page and 'data-testid="prepull-form-h100-training"' in page
    response = client.post(
        reverse("fleet:pool_prepull", args=["sim", "h100-training"]), {"images": f"{SGLANG}\r\n\r\n{VLLM}\n"}
    )
    assert response.status_code == 302
    pool.refresh_from_db()
    assert pool.prepull_images == [SGLANG, VLLM]
    page = client.get(reverse("fleet:cluster_detail", args=["sim"])).content.decode()
    assert f"<code>{SGLANG}</code>" in page and "push to sim to apply it" in page
    client.post(reverse("fleet:pool_prepull", args=["sim", "h100-training"]), {"images": "no tag"})
    pool.refresh_from_db()
    assert pool.prepull_images == [SGLANG, VLLM]  # refused: unchanged, the error shown
    client.force_login(fresh(personas.viewer_a))
    page = client.get(reverse("fleet:cluster_detail", args=["sim"])).content.decode()
    assert 'data-testid="pool-h100-training"' in page and "prepull-form-" not in page


def test_the_desired_state_selects_a_pools_nodes_by_its_label_or_its_models_product(sim, pool):
    pool.prepull_images = [SGLANG]
    pool.save()
    state = build_desired_state(sim)
    (found,) = state.prepull
    # The simulator's nodes carry no pool label: every H100 node is in this pool, so the product label selects it.
    assert (found.name, found.images, found.node_labels) == (
        "h100-training",
        (SGLANG,),
        (("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),),
    )
    for node in Node.objects.filter(pool=pool):
        node.labels = {**node.labels, "gpu-console/pool": "h100-training"}
        node.save()
    assert build_desired_state(sim).prepull[0].node_labels == (("gpu-console/pool", "h100-training"),)
    rendered = render_kubernetes(build_desired_state(sim))
    daemon = next(o for o in rendered.objects if o["kind"] == "DaemonSet")
    assert daemon["metadata"]["namespace"] == PREPULL_NAMESPACE
    assert validate_objects(rendered.objects) == []


def test_a_pool_no_label_selects_alone_is_named_in_the_caveats_and_not_rendered(sim, pool):
    pool.prepull_images = [SGLANG]
    pool.save()
    other = Node.objects.filter(pool=pool).first()
    other.pool = NodePool.objects.get(cluster=sim, name="l40s-inference")  # an H100 node outside the pool
    other.save()
    state = build_desired_state(sim)
    assert state.prepull[0].node_labels == ()
    rendered = render_kubernetes(state)
    assert not any(o["kind"] == "DaemonSet" for o in rendered.objects)
    assert any("Pool h100-training lists images to pre-pull, but no node label" in c for c in rendered.caveats)
