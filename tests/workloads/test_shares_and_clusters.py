"""Issue 19 through submission (PostgreSQL, the simulator): a shared GPU counts its exact share of quota, on the
pages and in chargeback alike; a spec may name its cluster; placement picks among the queue's clusters and says
why; platform admins see the unguaranteed capacity on the capacity page."""

from fractions import Fraction

import pytest
from django.urls import reverse

from apps.backends.shares import SHARE_UNITS
from apps.chargeback.fractions import worker_share
from apps.fleet.models import GpuModel, Node
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.tenancy import services as tenancy
from apps.tenancy.snapshot import build_snapshot
from apps.workloads import services
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db


def submit(personas, capture, **spec) -> Workload:
    with capture(execute=True):
        workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(**spec))
    return workload


def test_a_one_seventh_mig_job_takes_one_seventh_of_a_gpu_of_quota(
    fleet, personas, client, django_capture_on_commit_callbacks
):
    """Issue 19 item 2: a 1/7 MIG job moved its queue from "6 of 16" to "7 of 16"; chargeback metered 0.428571429."""
    capture = django_capture_on_commit_callbacks
    submit(personas, capture, name="six", workers=6, gpus_per_worker=1)
    mig = submit(personas, capture, name="slice", gpus_per_worker=1, sharing={"mode": "mig", "mig_profile": "1g.10gb"})
    assert mig.admission.gpus == Fraction(1, 7) and mig.admission.gpu_units == SHARE_UNITS // 7
    assert mig.admission.reason == "within guarantee (6 1/7 of 16)"
    snapshot, _tiers = build_snapshot(with_capacity=False)
    assert snapshot.quotas[(fleet["queue"].pk, "h100")].used == 6 * SHARE_UNITS + SHARE_UNITS // 7
    # Chargeback prices the same share: one definition of it.
    assert worker_share(mig.spec["sharing"], 1, fleet["h100"]) == mig.admission.gpus
    client.force_login(personas.platform_admin)
    page = client.get(reverse("tenancy:queue_detail", args=[fleet["queue"].pk])).content.decode()
    assert '<td class="text-end">6 1/7</td>' in page and "1/7 × h100" in page
    workload_page = client.get(reverse("workloads:workload_detail", args=[mig.pk])).content.decode()
    assert 'data-testid="workload-gpus">1/7 × ' in workload_page


def test_an_mps_job_counts_its_replicas_share_and_runs_them_on_one_mps_gpu(
    fleet, personas, django_capture_on_commit_callbacks
):
    """Issue 24 item 5: an MPS replica is 1/replicas of a GPU in quota and chargeback, as a time-slice replica is;
    the simulator runs the job's replicas as clients of one GPU's MPS server."""
    from apps.backends.simulator.models import SimAllocation

    sharing = {"mode": "mps", "replicas": 4}
    mps = submit(
        personas, django_capture_on_commit_callbacks, name="eval", gpus_per_worker=1, workers=3, sharing=sharing
    )
    assert mps.admission.gpus == Fraction(3, 4) and mps.admission.gpu_units == 3 * SHARE_UNITS // 4
    assert 3 * worker_share(mps.spec["sharing"], 1, fleet["h100"]) == mps.admission.gpus
    assert worker_share(mps.spec["sharing"], 1, fleet["h100"]) == worker_share(
        {"mode": "time-slice", "replicas": 4}, 1, fleet["h100"]
    )
    held = SimAllocation.objects.filter(workload__name=mps.backend_name, ended_at__isnull=True)
    assert sorted((a.worker, a.mode, a.share) for a in held) == [(0, "mps", 0.25), (1, "mps", 0.25), (2, "mps", 0.25)]
    assert len({(a.node, tuple(a.gpu_indexes)) for a in held}) == 1


def test_a_spec_may_name_one_of_its_queues_clusters(fleet, personas, api):
    client = api(fresh(personas.member_a))
    response = client.post(
        "/api/v1/workloads/", {"kind": "training", "spec": training_spec(cluster="elsewhere")}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert "cluster" in body["fields"] and "its clusters: sim" in body["message"], body
    assert not Workload.objects.exists()
    response = client.post(
        "/api/v1/workloads/", {"kind": "training", "spec": training_spec(cluster="sim")}, format="json"
    )
    assert response.status_code == 201 and response.json()["cluster"] == "sim"


@pytest.fixture
def two_clusters(fleet, personas):
    """The queue is bound to "sim" and to "sim-b" (4 more nodes of H100); its guarantee stays 16."""
    admin = fresh(personas.platform_admin)
    other = create_simulated_cluster(
        None, "sim-b", {"nodes": 2, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 4}
    )
    assert sync_inventory(other.pk).ok
    tenancy.bind_queue(admin, fleet["queue"], cluster=other, namespaces=["a-train"])
    return {**fleet, "other": other}


def test_placement_picks_where_it_fits_now_and_says_why(two_clusters, personas, django_capture_on_commit_callbacks):
    """Issue 19 item 3: the first bound cluster by name won, full or not."""
    Node.objects.filter(cluster=two_clusters["cluster"]).update(unschedulable=True)  # "sim" has no free H100
    workload = submit(personas, django_capture_on_commit_callbacks, name="where")
    assert workload.cluster == two_clusters["other"] and workload.admission.cluster == two_clusters["other"]
    assert workload.state_reason == (
        "within guarantee (8 of 16); on sim-b (free within guarantee now, per cluster: sim-b 16, sim 0)"
    )
    # Named, it goes where it is told, and waits there.
    named = submit(personas, django_capture_on_commit_callbacks, name="there", cluster="sim")
    assert named.cluster == two_clusters["cluster"] and named.state == "pending"
    assert "capacity: only 0 H100-80GB-HBM3 free on sim" in named.state_reason


def test_borrowing_stays_within_the_cluster(two_clusters, personas, django_capture_on_commit_callbacks):
    """A queue bound only to "sim" cannot lend to work on "sim-b"."""
    admin = fresh(personas.platform_admin)
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.b, gpu_model=h100, guaranteed=16)
    lender = tenancy.create_queue(admin, tenant=personas.b, name="lender")
    tenancy.bind_queue(admin, lender, cluster=two_clusters["cluster"], namespaces=["b-lender"])
    tenancy.set_quota(admin, queue=lender, gpu_model=h100, guaranteed=16)
    tenancy.set_quota(admin, queue=two_clusters["queue"], gpu_model=h100, guaranteed=0, borrow_limit=16)
    # On sim-b no queue guarantees anything: it borrows unguaranteed capacity there, never the lender's.
    on_b = submit(personas, django_capture_on_commit_callbacks, name="on-b", cluster="sim-b")
    assert on_b.admission.borrowed_from == {"-1": 8 * SHARE_UNITS}
    assert on_b.state_reason == "0 within guarantee + 8 borrowed (8 of it unguaranteed capacity)"
    # On sim the lender's guarantee covers every H100: nothing is unguaranteed, it borrows from the lender.
    on_sim = submit(personas, django_capture_on_commit_callbacks, name="on-sim", cluster="sim")
    assert on_sim.state in {"admitted", "running"}
    assert on_sim.admission.borrowed_from == {str(lender.pk): 8 * SHARE_UNITS}


def test_platform_admins_see_unguaranteed_capacity(fleet, personas, client, django_capture_on_commit_callbacks):
    """Issue 19 item 4: GPUs outside every guarantee are lendable, and admins see them."""
    client.force_login(personas.platform_admin)
    page = client.get(reverse("fleet:capacity")).content.decode()
    table = page[page.index('data-testid="unguaranteed-capacity"') :]
    rows = [
        [cell.split(">")[-1] for cell in row.split("</td>")[:-1]] for row in table.split('<tr data-cluster="sim">')[1:]
    ]
    # sim: 16 H100 (2 of 4 nodes), all of them guaranteed to "train"; 16 A100, none guaranteed.
    assert rows == [
        ["sim", "A100-SXM4-80GB", "16", "0", "16", "0", "16"],
        ["sim", "H100-80GB-HBM3", "16", "16", "0", "0", "0"],
    ]
    client.force_login(personas.member_a)
    assert 'data-testid="unguaranteed-capacity"' not in client.get(reverse("fleet:capacity")).content.decode()
