"""`manage.py simulate`: create, advance, fault (and --clear), status; errors as CommandError."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.audit.models import AuditEvent
from apps.backends.models import SimCluster, SimFault
from apps.fleet.models import Cluster

pytestmark = pytest.mark.django_db


def simulate(*args: str) -> str:
    out = StringIO()
    call_command("simulate", *args, stdout=out)
    return out.getvalue()


CREATE = ["create", "--name", "demo", "--nodes", "32", "--gpus-per-node", "8"]
MODELS = ["--models", "h100:0.5,a100:0.3,l40s:0.2", "--seed", "7"]


def test_end_to_end():
    out = simulate(*CREATE, *MODELS, "--hostname-label", "hostname")
    assert "Created simulated cluster demo: 32 nodes × 8 GPUs (h100 16, a100 10, l40s 6), seed 7" in out
    cluster = Cluster.objects.get(name="demo")
    assert cluster.kind == "simulated" and cluster.connection["hostname_label"] == "hostname"

    assert "Simulated time is now" in simulate("advance", "--cluster", "demo", "--minutes", "30")
    assert SimCluster.objects.get(cluster=cluster).clock_offset_s == 1800

    assert "Injected xid79 on gpu-0003/gpu2" in simulate(
        "fault", "--cluster", "demo", "--node", "gpu-0003", "--kind", "xid79", "--gpu", "2"
    )
    simulate("fault", "--cluster", "demo", "--node", "gpu-0004", "--kind", "node-down")
    status = simulate("status", "--cluster", "demo")
    assert "demo (simulated): 32 nodes × 8 GPUs" in status
    assert "offset +30 min" in status
    assert "nodes 32: 0 cordoned, 1 down" in status
    assert "1 unhealthy, 0 warning, 8 unknown" in status
    assert "active faults: 2" in status and "xid79 on gpu-0003/gpu2" in status

    assert "Cleared xid79 on gpu-0003/gpu2" in simulate(
        "fault", "--cluster", "demo", "--node", "gpu-0003", "--kind", "xid79", "--gpu", "2", "--clear"
    )
    assert SimFault.objects.filter(cleared_at__isnull=True).count() == 1
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor_label"))
    assert actions == [
        ("cluster.create", "system"),
        ("simulator.time.advance", "system"),
        ("simulator.fault.inject", "system"),
        ("simulator.fault.inject", "system"),
        ("simulator.fault.clear", "system"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create", "--name", "x", "--nodes", "0"], "nodes: nodes must be a positive whole number"),
        (["create", "--name", "x", "--nodes", "2", "--models", "x100:1"], "unknown model 'x100'"),
        (["create", "--name", "x", "--nodes", "2", "--models", "h100:0.5,a100:0.4"], "sum to 1"),
        (["create", "--name", "x", "--nodes", "2", "--models", "h100"], "--models: write each model as code:fraction"),
        (["advance", "--cluster", "nowhere", "--minutes", "5"], "No cluster 'nowhere'"),
        (["advance", "--cluster", "demo", "--minutes", "-5"], "Advance by more than 0"),
        (["fault", "--cluster", "demo", "--node", "gpu-0099", "--kind", "xid79"], "No node 'gpu-0099'"),
        (["fault", "--cluster", "demo", "--node", "gpu-0001", "--kind", "xid79", "--gpu", "9"], "No GPU 9"),
        (["fault", "--cluster", "demo", "--node", "gpu-0001", "--kind", "xid79", "--clear"], "No active xid79 fault"),
        (["fault", "--cluster", "demo", "--node", "gpu-0001", "--kind", "meteor"], "invalid choice: 'meteor'"),
        (CREATE, "already exists"),
    ],
)
def test_errors_are_command_errors(args, message):
    simulate(*CREATE, "--models", "h100:1")
    with pytest.raises(CommandError) as caught:
        simulate(*args)
    assert message in str(caught.value)


def test_refuses_clusters_that_are_not_simulated():
    Cluster.objects.create(name="k8s", kind="kubernetes")
    with pytest.raises(CommandError, match="not a simulated one"):
        simulate("status", "--cluster", "k8s")
