"""Strict validation: every rendered object passes, and the validator catches what a strict server would."""

from __future__ import annotations

import copy
from functools import cache

import pytest
from kubernetes_validate.utils import all_versions

from apps.backends.render import render
from apps.backends.render import rules as rule_set
from apps.backends.render.names import is_dns_label
from apps.backends.render.validate import (
    CRD_DIR,
    K8S_VERSIONS,
    ManifestError,
    check_objects,
    close_schema,
    crd_index,
    is_custom,
    metadata_errors,
    validate_builtin,
    validate_custom,
    validate_objects,
)
from tests.render.states import representative_state

QUEUEINGS = ["kueue", "volcano"]
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
KEDA = "keda.sh/v1alpha1"  # ScaledObject: rendered by apps/backends/render/workload for autoscaled services
TRAINER = "trainer.kubeflow.org/v1alpha1"  # TrainJob: rendered for a cluster whose training_target is trainjob


@cache
def objects(queueing: str) -> tuple[dict, ...]:
    return tuple(render(representative_state(queueing=queueing), "kubernetes").objects)


def of_kind(queueing: str, kind: str) -> list[dict]:
    return [copy.deepcopy(o) for o in objects(queueing) if o["kind"] == kind]


def cluster_queue(**spec) -> dict:
    base = {
        "cohortName": "team-a",
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
            }
        ],
    }
    base.update(spec)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "team-a-train"}, "spec": base}


def gpu(cq: dict) -> dict:
    return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]


# --- rendered objects pass ------------------------------------------------------------------------------


def test_kubernetes_validate_ships_every_version_we_support():
    assert set(K8S_VERSIONS) <= {v.rsplit(".", 1)[0] if v.count(".") == 2 else v for v in all_versions()}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("queueing", QUEUEINGS)
def test_builtin_objects_validate_strictly_on_each_version(queueing, version):
    builtins = [o for o in objects(queueing) if not is_custom(o)]
    assert {o["kind"] for o in builtins} == {"PriorityClass", "Namespace", "ResourceQuota"}
    assert [e for o in builtins for e in validate_builtin(o, [version])] == []


@pytest.mark.parametrize("queueing", QUEUEINGS)
def test_custom_objects_validate_against_their_crds(queueing):
    custom = [o for o in objects(queueing) if is_custom(o)]
    expected = {"kueue": {"WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"}}
    assert {o["kind"] for o in custom} == expected.get(queueing, {"Queue"})
    assert [e for o in custom for e in validate_custom(o)] == []


@pytest.mark.parametrize("queueing", QUEUEINGS)
def test_whole_rendered_set_validates(queueing):
    assert validate_objects(list(objects(queueing))) == []


@pytest.mark.parametrize("queueing", QUEUEINGS)
def test_every_name_is_a_dns_label(queueing):
    for o in objects(queueing):
        assert is_dns_label(o["metadata"]["name"]), o["metadata"]
        assert is_dns_label(o["metadata"].get("namespace", "ok"))


# --- the validator is strict ----------------------------------------------------------------------------


def test_unknown_field_in_a_builtin_fails_on_every_version():
    pc = of_kind("kueue", "PriorityClass")[0]
    pc["descripton"] = "typo"
    errors = validate_builtin(pc)
    assert len(errors) == len(K8S_VERSIONS)
    assert all("'descripton' was unexpected" in e for e in errors)


def test_wrong_type_in_a_builtin_fails():
    pc = of_kind("kueue", "PriorityClass")[0]
    pc["value"] = "1000"
    assert any("is not of type 'integer'" in e for e in validate_builtin(pc, ["1.35"]))


def test_unsupported_kubernetes_version_is_an_error_not_a_skip():
    pc = of_kind("kueue", "PriorityClass")[0]
    assert "does not support" in validate_builtin(pc, ["1.99"])[0]


def test_unknown_field_in_a_custom_object_fails():
    cq = of_kind("kueue", "ClusterQueue")[0]
    cq["spec"]["cohort"] = "research"  # the v1beta1 name, gone in v1beta2
    assert any("'cohort' was unexpected" in e for e in validate_custom(cq))


def test_unknown_field_deep_in_a_custom_object_fails():
    cq = of_kind("kueue", "ClusterQueue")[0]
    gpu(cq)["borrowLimit"] = 4
    assert any("'borrowLimit' was unexpected" in e for e in validate_custom(cq))


def test_enum_pattern_and_int32_are_enforced():
    cq = of_kind("kueue", "ClusterQueue")[0]
    cq["spec"]["preemption"]["withinClusterQueue"] = "Always"
    cq["spec"]["preemption"]["borrowWithinCohort"]["maxPriorityThreshold"] = 2**31
    gpu(cq)["nominalQuota"] = "eight"
    errors = "\n".join(validate_custom(cq))
    assert "'Always' is not one of" in errors
    assert "is not a 'int32'" in errors
    assert "'eight' does not match" in errors


def test_volcano_weight_range_comes_from_the_crd():
    queue = of_kind("volcano", "Queue")[0]
    queue["spec"]["weight"] = 0
    assert any("less than the minimum of 1" in e for e in validate_custom(queue))


def test_custom_object_without_a_vendored_crd_fails():
    assert "no vendored CRD" in validate_custom({"apiVersion": "kueue.x-k8s.io/v1beta9", "kind": "ClusterQueue"})[0]


def test_close_schema_leaves_open_maps_and_preserved_fields_alone():
    schema = {
        "type": "object",
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {}}},
            "maybe": {"type": "string", "nullable": True},
        },
    }
    closed = close_schema(schema)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in closed["properties"]["raw"]
    assert closed["properties"]["maybe"]["type"] == ["string", "null"]
    assert "additionalProperties" not in schema  # the vendored schema is not modified


def test_metadata_checks_scope_names_and_labels():
    lq = of_kind("kueue", "LocalQueue")[0]
    del lq["metadata"]["namespace"]
    assert any("needs metadata.namespace" in e for e in metadata_errors(lq))
    rf = of_kind("kueue", "ResourceFlavor")[0]
    rf["metadata"]["namespace"] = "nlp"
    rf["metadata"]["name"] = "H100"
    rf["metadata"]["labels"]["bad key!"] = "x" * 64
    errors = "\n".join(metadata_errors(rf))
    assert "must not set metadata.namespace" in errors
    assert "'H100' is not a valid ResourceFlavor name" in errors
    assert "is not a qualified name" in errors
    assert "is not a valid label value" in errors


# --- CEL and webhook rules we depend on -------------------------------------------------------------------


def cel_rules(kind: str) -> list[str]:
    """The messages of every CEL rule outside status in the served storage version of a CRD."""
    crd = next(v for (api, k), v in crd_index().items() if k == kind and api in (KUEUE, VOLCANO, KEDA, TRAINER))
    found: list[str] = []

    def walk(node, path):
        if isinstance(node, dict):
            for r in node.get("x-kubernetes-validations", []):
                if not path.startswith(".status"):
                    found.append(r["message"])
            for key, child in (node.get("properties") or {}).items():
                walk(child, f"{path}.{key}")
            for key in ("items", "additionalProperties"):
                if isinstance(node.get(key), dict):
                    walk(node[key], path)

    walk(crd.schema, "")
    return found


@pytest.mark.parametrize(
    "kind",
    [
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "ResourceFlavor",
        "Topology",
        "WorkloadPriorityClass",
        "Queue",
        "TrainJob",
    ],
)
def test_every_cel_rule_of_a_rendered_kind_is_checked_or_knowingly_waived(kind):
    implemented = {r.message for r in rule_set.RULES if r.kind == kind and r.source == "CEL"}
    waived = {message for (k, message) in rule_set.WAIVED if k == kind}
    missing = [m for m in cel_rules(kind) if m not in implemented | waived]
    assert missing == [], f"CEL rules of {kind} neither implemented in rules.py nor waived: {missing}"


def test_cel_rules_we_implement_still_exist_in_the_crds():
    for r in (r for r in rule_set.RULES if r.source == "CEL"):
        assert r.message in cel_rules(r.kind), f"{r.kind}: {r.message!r} is no longer a CEL rule of the CRD"


def test_borrowing_limit_requires_cohort_name():
    cq = cluster_queue()
    del cq["spec"]["cohortName"]
    gpu(cq)["borrowingLimit"] = 4
    assert any("borrowingLimit must be nil when cohort is empty" in e for e in validate_custom(cq))


def test_lending_limit_requires_cohort_name():
    cq = cluster_queue()
    del cq["spec"]["cohortName"]
    gpu(cq)["lendingLimit"] = 4
    assert any("lendingLimit must be nil when cohort is empty" in e for e in validate_custom(cq))


def test_lending_limit_at_most_nominal_quota():
    cq = cluster_queue()
    gpu(cq)["lendingLimit"] = 8
    assert validate_custom(cq) == []
    gpu(cq)["lendingLimit"] = "9"
    assert any("lendingLimit must be less than or equal to the nominalQuota" in e for e in validate_custom(cq))


def test_borrow_within_cohort_needs_reclaim_within_cohort():
    cq = cluster_queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 999}})
    # reclaimWithinCohort defaults to Never, which the CEL rule forbids with a borrowWithinCohort policy
    assert any("reclaimWithinCohort=Never" in e for e in validate_custom(cq))
    cq["spec"]["preemption"]["reclaimWithinCohort"] = "Any"
    assert validate_custom(cq) == []


def test_each_flavor_covers_every_covered_resource():
    cq = cluster_queue()
    cq["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    errors = "\n".join(validate_custom(cq))
    assert "flavors must have the same number of resources as the coveredResources" in errors


def test_resource_names_follow_covered_resources_and_are_non_negative():
    cq = cluster_queue()
    gpu(cq)["name"] = "nvidia.com/gpu-h100"
    gpu(cq)["nominalQuota"] = -1
    errors = "\n".join(validate_custom(cq))
    assert "must match coveredResources[0]" in errors
    assert "must be greater than or equal to 0" in errors


def test_flavor_fungibility_preference_rule():
    cq = cluster_queue(flavorFungibility={"preference": "BorrowingOverPreemption"})
    assert any("preference can only be set" in e for e in validate_custom(cq))
    cq["spec"]["flavorFungibility"].update(whenCanBorrow="TryNextFlavor", whenCanPreempt="TryNextFlavor")
    assert validate_custom(cq) == []


def test_resource_flavor_topology_needs_node_labels():
    rf = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {"topologyName": "dc"}}
    assert any("at least one nodeLabel" in e for e in validate_custom(rf))


def test_cohort_limits_need_a_parent():
    cohort = {
        "apiVersion": KUEUE,
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": cluster_queue()["spec"] | {"cohortName": None},
    }
    del cohort["spec"]["cohortName"]
    gpu(cohort)["borrowingLimit"] = 2
    assert any("borrowingLimit must be nil when parent is empty" in e for e in validate_custom(cohort))


def test_volcano_queue_capability_deserved_guarantee_order():
    queue = {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}}
    queue["spec"].update(deserved={"nvidia.com/gpu-h100": 8}, capability={"nvidia.com/gpu-a100": 4})
    # a capability that omits h100 caps it at 0: the webhook's LessPartly uses zero for missing dimensions
    assert any("deserved should less equal than capability" in e for e in validate_custom(queue))
    queue["spec"].update(capability={"nvidia.com/gpu-h100": 8}, guarantee={"resource": {"nvidia.com/gpu-h100": 9}})
    errors = "\n".join(validate_custom(queue))
    assert "guarantee should less equal than capability" in errors
    assert "guarantee should less equal than deserved" in errors


def test_resource_quota_extended_resources_need_the_requests_prefix():
    rq = of_kind("kueue", "ResourceQuota")[0]
    rq["spec"]["hard"] = {"nvidia.com/gpu": "4", "limits.nvidia.com/gpu": "4", "requests.nvidia.com/gpu": "four"}
    errors = "\n".join(validate_objects([rq], ["1.35"]))
    assert "spec.hard.nvidia.com/gpu: an extended resource is quota'd only as requests.nvidia.com/gpu" in errors
    assert "spec.hard.limits.nvidia.com/gpu" in errors
    assert "'four' is not a quantity" in errors


# --- whole sets -----------------------------------------------------------------------------------------------


def test_references_must_exist_and_come_first():
    objs = list(copy.deepcopy(objects("kueue")))
    lq = next(i for i, o in enumerate(objs) if o["kind"] == "LocalQueue")
    cq = next(
        i
        for i, o in enumerate(objs)
        if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == objs[lq]["spec"]["clusterQueue"]
    )
    objs.insert(0, objs.pop(lq))  # LocalQueue before its Namespace and its ClusterQueue
    errors = "\n".join(rule_set.set_errors(objs))
    assert "which comes later" in errors
    del objs[cq + 1]
    errors = "\n".join(rule_set.set_errors(objs))
    assert "not in the set" in errors


def test_duplicates_are_reported():
    objs = list(objects("volcano"))
    assert any("appears twice" in e for e in rule_set.set_errors([*objs, objs[-1]]))


def test_volcano_hierarchy_children_must_fit_the_parent():
    objs = copy.deepcopy(list(objects("volcano")))
    research = next(o for o in objs if o["kind"] == "Queue" and o["metadata"]["name"] == "research-h100")
    del research["spec"]["capability"]  # an absent capability is zero to the webhook
    research["spec"]["deserved"]["nvidia.com/gpu"] = 1
    errors = "\n".join(rule_set.set_errors(objs))
    assert "Queue research-h100: capability is less than child queue" in errors
    assert "Queue research-h100: sum of children's deserved exceeds the parent's" in errors


def test_check_objects_raises_with_every_error():
    pc = of_kind("kueue", "PriorityClass")[0]
    pc["globalDefault"] = "yes"
    with pytest.raises(ManifestError) as exc:
        check_objects([pc], ["1.31", "1.35"])
    assert len(exc.value.errors) == 2


def test_crds_are_loaded_from_the_package():
    assert CRD_DIR.is_dir() and (CRD_DIR / "SOURCES.md").exists()
    kinds = {k for (_, k) in crd_index()}
    assert {"ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass", "Queue"} <= kinds
    assert {v.file for v in crd_index().values()} == {p.name for p in CRD_DIR.glob("*.yaml")}
