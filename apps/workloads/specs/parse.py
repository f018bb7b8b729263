"""`parse_spec`: JSON-ish input to a validated spec, or one SpecError with every field's messages."""

from __future__ import annotations

from apps.backends.render.spec import DEFAULT_TIERS, Spec
from apps.core.text import N_
from apps.workloads.specs.checks import check_dns_label, check_env
from apps.workloads.specs.inference import parse_inference
from apps.workloads.specs.model import KINDS, SpecError
from apps.workloads.specs.reader import Errors, Reader
from apps.workloads.specs.secret_env import parse_secret_env
from apps.workloads.specs.tolerations import parse_tolerations
from apps.workloads.specs.training import parse_training

_COMMON = (
    "kind",
    "name",
    "tenant",
    "queue",
    "tier",
    "image",
    "env",
    "secret_env",
    "gpu_model",
    "cpu",
    "memory_gib",
    "max_runtime_s",
    "tolerations",
    "cluster",
)
_TRAINING_FIELDS = (
    *_COMMON,
    "command",
    "args",
    "workers",
    "gpus_per_worker",
    "sharing",
    "gang_min",
    "topology",
    "elastic",
    "retries",
    "volumes",
)
_INFERENCE_FIELDS = (
    *_COMMON,
    "engine",
    "model",
    "tensor_parallel",
    "pipeline_parallel",
    "data_parallel",
    "replicas",
    "max_model_len",
    "gpu_memory_utilization",
    "port",
    "readiness",
    "autoscaling",
    "shutdown",
    "weights",
    "extra_args",
)


# Nested fields someone may write at the top level; the unknown-field message points at the right place.
_HINTS = {
    "training": {
        "mig_profile": "sharing.mig_profile",
        "replicas": "sharing.replicas",
        "gpumem_mib": "sharing.gpumem_mib",
        "gpucores": "sharing.gpucores",
        "min_workers": "elastic.min_workers",
        "max_workers": "elastic.max_workers",
        "checkpoint_path": "elastic.checkpoint_path",
    },
    "inference": {
        "min_replicas": "autoscaling.min_replicas",
        "max_replicas": "autoscaling.max_replicas",
        "waiting_threshold": "autoscaling.waiting_threshold",
        "initial_delay_s": "readiness.initial_delay_s",
        "drain_seconds": "shutdown.drain_seconds",
        "termination_grace_period_s": "shutdown.termination_grace_period_s",
    },
}


def parse_spec(kind: str, data: dict, catalog: dict[str, dict], gpus_per_node: int = 8) -> Spec:
    """Build a spec from JSON-ish input; raise SpecError listing every field error at once.

    `catalog` maps GPU model codes to catalog entries (memory_mib, mig_profiles, ...); `gpus_per_node` is
    the node size a gang must fit (the GPU model's nodes in the target cluster).
    """
    errors = Errors()
    if kind not in KINDS:
        raise SpecError({"kind": [N_("%(value)r is not one of %(allowed)s", value=kind, allowed=", ".join(KINDS))]})
    if not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be a positive integer, not {gpus_per_node!r}")
    allowed = _TRAINING_FIELDS if kind == "training" else _INFERENCE_FIELDS
    reader = Reader(data, "", errors, allowed, _HINTS[kind])
    if reader.ok and "kind" in reader.data and reader.data["kind"] != kind:
        errors.add(
            "kind", N_("the spec says %(said)r but is submitted as %(kind)r", said=reader.data["kind"], kind=kind)
        )
    common = _parse_common(reader, errors, kind, catalog)
    if kind == "training":
        spec = parse_training(reader, errors, common, catalog, gpus_per_node)
    else:
        spec = parse_inference(reader, errors, common, catalog, gpus_per_node)
    if errors.fields or spec is None:
        raise SpecError(errors.fields or {"spec": [N_("invalid")]})
    return spec


def _parse_common(reader: Reader, errors: Errors, kind: str, catalog: dict[str, dict]) -> dict:
    out = {
        "name": reader.string("name"),
        "tenant": reader.string("tenant"),
        "queue": reader.string("queue"),
        "tier": reader.string("tier", DEFAULT_TIERS[kind]),
        "gpu_model": reader.string("gpu_model"),
        "env": check_env(errors, reader),
        "cpu": reader.integer("cpu", None, lo=1, hi=1024, nullable=True),
        "memory_gib": reader.integer("memory_gib", None, lo=1, hi=16_384, nullable=True),
        "tolerations": parse_tolerations(reader, errors),
        "cluster": reader.string("cluster", "") or "",
    }
    out["secret_env"] = parse_secret_env(reader, errors, out["env"])
    check_dns_label(errors, "name", out["name"])
    check_dns_label(errors, "tenant", out["tenant"], N_("tenant slug"))
    check_dns_label(errors, "queue", out["queue"], N_("queue name"))
    check_dns_label(errors, "tier", out["tier"], N_("tier name"))
    if out["cluster"]:
        check_dns_label(errors, "cluster", out["cluster"], N_("cluster name"))
    model = out["gpu_model"]
    if model is not None and model not in catalog:
        known = ", ".join(sorted(catalog)) or N_("none")
        errors.add("gpu_model", N_("unknown GPU model %(model)r; known: %(known)s", model=model, known=known))
    return out
