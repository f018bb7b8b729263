"""The `topology_scheduler` and `volcano_tiers` settings (docs/targets.md): what a training job and the quota
objects become with Kueue's TAS or Volcano's HyperNodes, strictly validated, and the settings refused by name."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apps.backends.render import render_kubernetes as render_quota
from apps.backends.render.errors import RenderError
from apps.backends.render.validate import validate_objects
from apps.backends.render.workload import WorkloadContext, kubernetes_context, render_kubernetes, validation_errors
from apps.backends.render.workload.context import topology_scheduler_errors
from apps.workloads.specs import parse_spec
from apps.workloads.submission_context import catalog
from tests.render.states import representative_state

LEAF = "gpu-console/leaf-switch"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


def spec(db_catalog, **fields):
    body = {
        "name": "gang",
        "tenant": "acme",
        "queue": "train",
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "workers": 4,
        "gpus_per_worker": 8,
        "gpu_model": "h100",
        "max_runtime_s": 3600,
        **fields,
    }
    return parse_spec("training", body, db_catalog)


@pytest.fixture
def db_catalog(db):
    return catalog()


def context(levels=None) -> WorkloadContext:
    return WorkloadContext(
        name="gang",
        workload_id="7",
        queue="acme-train",
        tier="training",
        gpu_model="h100",
        product_label="NVIDIA-H100-80GB-HBM3",
        namespace="acme-train",
        topology_levels=levels,
    )


def job_of(rendered) -> dict:
    return next(o for o in rendered.objects if o["kind"] == "Job")


def test_kueue_tas_replaces_the_pod_affinity_with_the_required_topology(db_catalog):
    settings = {"queueing": "kueue", "topology_scheduler": "kueue-tas"}
    rendered = render_kubernetes(spec(db_catalog, topology="leaf"), kubernetes_context(context(), settings))
    template = job_of(rendered)["spec"]["template"]
    assert template["metadata"]["annotations"] == {REQUIRED: LEAF}
    assert "affinity" not in template["spec"]
    assert validation_errors(rendered) == []
    assert any("Kueue's Topology Aware Scheduling" in c for c in rendered.caveats)
    anywhere = render_kubernetes(spec(db_catalog), kubernetes_context(context(), settings))
    assert job_of(anywhere)["spec"]["template"]["metadata"]["annotations"] == {UNCONSTRAINED: "true"}


def test_console_keeps_todays_pod_affinity(db_catalog):
    rendered = render_kubernetes(spec(db_catalog, topology="leaf"), kubernetes_context(context(), {}))
    template = job_of(rendered)["spec"]["template"]
    assert "annotations" not in template["metadata"]
    assert template["spec"]["affinity"]["podAffinity"]


def test_a_level_the_models_topology_lacks_is_refused_naming_the_field(db_catalog):
    settings = {"queueing": "kueue", "topology_scheduler": "kueue-tas"}
    with pytest.raises(RenderError) as refused:
        render_kubernetes(
            spec(db_catalog, topology="leaf"), kubernetes_context(context(("kubernetes.io/hostname",)), settings)
        )
    assert refused.value.field == "topology"


def test_volcano_tiers_set_the_jobs_highest_tier(db_catalog):
    settings = {"queueing": "volcano", "topology_scheduler": "volcano-hypernodes", "volcano_tiers": {"leaf": 3}}
    rendered = render_kubernetes(spec(db_catalog, topology="leaf"), kubernetes_context(context(), settings))
    job = next(o for o in rendered.objects if o["kind"] == "Job")
    assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 3}
    assert validation_errors(rendered) == []


@pytest.mark.parametrize(
    ("connection", "problem"),
    [
        ({"topology_scheduler": "slurm"}, "topology_scheduler: 'slurm' is not one of"),
        ({"queueing": "volcano", "topology_scheduler": "kueue-tas"}, "needs queueing 'kueue'"),
        ({"queueing": "kueue", "topology_scheduler": "volcano-hypernodes"}, "needs queueing 'volcano'"),
        ({"topology_scheduler": "kueue-tas", "training_target": "trainjob"}, "carry no scheduling gates"),
        ({"queueing": "kueue", "volcano_tiers": {"leaf": 2}}, "volcano_tiers: HyperNode tiers are Volcano's"),
        ({"queueing": "volcano", "volcano_tiers": {"leaf": 0}}, "volcano_tiers.leaf: 0 is not a HyperNode tier"),
        ({"queueing": "volcano", "volcano_tiers": {"nvlink": 3}}, "volcano_tiers.nvlink: tier 3 is above"),
    ],
)
def test_settings_that_contradict_the_cluster_are_refused_by_name(connection, problem):
    assert any(problem in e for e in topology_scheduler_errors(connection)), topology_scheduler_errors(connection)


def test_kueue_tas_quota_objects_are_strictly_valid():
    base = representative_state()
    leafed = tuple(
        replace(n, labels={**n.labels, LEAF: "leaf-a"}) if n.name.startswith("h100") else n for n in base.nodes
    )
    settings = replace(base.settings, topology_scheduler="kueue-tas")
    objects = render_quota(replace(base, nodes=leafed, settings=settings)).objects
    topologies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Topology"}
    assert [lv["nodeLabel"] for lv in topologies["h100"]["spec"]["levels"]] == [LEAF, "kubernetes.io/hostname"]
    assert [lv["nodeLabel"] for lv in topologies["a100"]["spec"]["levels"]] == ["kubernetes.io/hostname"]
    flavors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceFlavor"}
    assert flavors["h100"]["spec"]["topologyName"] == "h100"
    assert all("topologyName" not in f["spec"] for name, f in flavors.items() if name not in ("h100", "a100", "l40s"))
    assert validate_objects(objects) == []
