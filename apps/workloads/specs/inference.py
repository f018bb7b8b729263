"""The inference service spec: engine, parallelism that fits whole nodes, probes, autoscaling, shutdown, weights."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, ValidationInfo, field_validator, model_validator

from apps.backends.render.spec import (
    DEFAULT_IMAGES,
    DEFAULT_PROMETHEUS,
    DEFAULT_TIERS,
    ROUTING,
    TRANSFER_BACKENDS,
    Autoscaling,
    Disaggregation,
    InferenceServiceSpec,
    Pool,
    Readiness,
    Shutdown,
    Warm,
    Weights,
)
from apps.core.text import N_
from apps.workloads.specs.checks import model_error, under, url_error
from apps.workloads.specs.common import Claim, Image, Kind, MountPath, Tier, WorkloadModel
from apps.workloads.specs.fields import Check, Problems, SpecModel, described, gpus_per_node, null_is_default, serving
from apps.workloads.specs.model import CONSOLE_PORTS, ENGINE_FLAGS, ENGINES, MAX_EXTRA_ARGS
from apps.workloads.specs.training import Arg


class ReadinessModel(SpecModel):
    model_config = ConfigDict(title="Readiness")
    SPEC = Readiness

    initial_delay_s: int = described(
        N_("Initial delay (s)"), N_("How long loading the weights may take"), 600, ge=0, le=7200
    )
    period_s: int = described(N_("Period (s)"), N_("How often health is checked"), 10, ge=1, le=300)


class AutoscalingModel(SpecModel):
    model_config = ConfigDict(title="Autoscaling")
    SPEC = Autoscaling

    enabled: bool = described(N_("Enabled"), N_("Replicas follow the engine's waiting requests (KEDA)"), False)
    min_replicas: int = described(N_("Minimum replicas"), N_("At least 1: one stays warm"), 1, ge=0, le=1000)
    max_replicas: int | None = described(N_("Maximum replicas"), N_("Required when enabled"), None, ge=1, le=1000)
    waiting_threshold: int = described(
        N_("Waiting threshold"), N_("Waiting requests per replica before one more is added"), 5, ge=1, le=100_000
    )
    prometheus_server_address: Annotated[str, Check(url_error, (("maxLength", 2048),))] = described(
        N_("Prometheus address"), N_("Where KEDA reads the engine's metrics"), DEFAULT_PROMETHEUS
    )

    @model_validator(mode="after")
    def _range(self) -> AutoscalingModel:
        problems, low, high = Problems(), self.min_replicas, self.max_replicas
        if low == 0:
            # With no replica, no engine reports a waiting queue: the metric stays 0 and the service never wakes.
            problems.add("min_replicas", N_("at least 1: scaling on the engine's own queue cannot wake from zero"))
        if self.enabled and high is None:
            problems.add("max_replicas", N_("required when autoscaling is enabled"))
        if low and high is not None and low > high:
            problems.add(
                "max_replicas", N_("must be at least min_replicas (%(low)s), not %(high)s", low=low, high=high)
            )
        problems.check()
        return self


class ShutdownModel(SpecModel):
    model_config = ConfigDict(title="Shutdown")
    SPEC = Shutdown

    termination_grace_period_s: int = described(
        N_("Termination grace period (s)"), N_("From SIGTERM to the end of the pod"), 120, ge=1, le=3600
    )
    drain_seconds: int = described(N_("Drain (s)"), N_("For the requests in flight"), 60, ge=0, le=3600)

    @model_validator(mode="after")
    def _drain_within_grace(self) -> ShutdownModel:
        problems, grace, drain = Problems(), self.termination_grace_period_s, self.drain_seconds
        if drain + 10 > grace:
            problems.add(
                "drain_seconds",
                N_(
                    "must leave at least 10 s of the %(grace)s s termination grace period for the engine to exit "
                    "after SIGTERM: at most %(most)s, not %(drain)s",
                    grace=grace,
                    most=max(grace - 10, 0),
                    drain=drain,
                ),
            )
        problems.check()
        return self


class WeightsModel(SpecModel):
    model_config = ConfigDict(title="Weights")
    SPEC = Weights

    claim: Claim
    mount_path: MountPath = "/models"


class WarmModel(SpecModel):
    model_config = ConfigDict(title="Warm weights")
    SPEC = Warm

    claim: Claim


# The ports a disaggregated engine opens beside its API: SGLang's bootstrap server on prefill engines
# (--disaggregation-bootstrap-port, default 8998: docs.sglang.io/advanced_features/pd_disaggregation.html) and
# vLLM's NIXL side channel (VLLM_NIXL_SIDE_CHANNEL_PORT, default 5600: docs.vllm.ai/en/latest/features/
# nixl_connector_usage.html).
PD_PORTS = {
    "sglang": (8998, N_("SGLang's disaggregation bootstrap port")),
    "vllm": (5600, N_("vLLM's NIXL side channel")),
}


class PoolModel(SpecModel):
    model_config = ConfigDict(title="Pool")
    SPEC = Pool

    replicas: int = described(N_("Replicas"), N_("Engines of this pool"), 1, ge=1, le=1000)
    gpus_per_replica: int | None = described(
        N_("GPUs per replica"), N_("Its tensor parallel size; empty: the service's tensor_parallel"), None, ge=1, le=64
    )
    autoscaling: AutoscalingModel = described(
        N_("Autoscaling"), N_("This pool follows its own engines' queue"), AutoscalingModel()
    )

    _null_objects = field_validator("autoscaling", mode="before")(null_is_default)

    @field_validator("autoscaling")
    @classmethod
    def _holds_the_replicas(cls, scaling: AutoscalingModel, info: ValidationInfo) -> AutoscalingModel:
        problems, replicas = Problems(), info.data.get("replicas")
        if scaling.enabled and replicas is not None and not scaling.min_replicas <= replicas <= scaling.max_replicas:  # type: ignore[operator]
            problems.add(
                "replicas",
                N_(
                    "the starting replicas must be within autoscaling's %(low)s..%(high)s, not %(replicas)s",
                    low=scaling.min_replicas,
                    high=scaling.max_replicas,
                    replicas=replicas,
                ),
            )
        problems.check(info)
        return scaling


class DisaggregationModel(SpecModel):
    model_config = ConfigDict(title="Disaggregation")
    SPEC = Disaggregation

    prefill: PoolModel = described(N_("Prefill pool"), N_("Engines that process prompts (compute-bound)"))
    decode: PoolModel = described(N_("Decode pool"), N_("Engines that generate tokens (memory-bound)"))
    transfer_backend: Literal[TRANSFER_BACKENDS] | None = described(  # type: ignore[valid-type]
        N_("KV transfer backend"),
        N_(
            "How the KV cache moves from prefill to decode; vLLM: nixl (NixlConnector), required; SGLang: "
            "mooncake (its default) or nixl"
        ),
        None,
    )


class InferenceServiceModel(WorkloadModel):
    """An OpenAI-compatible serving deployment of one model with vLLM or SGLang."""

    model_config = ConfigDict(title="InferenceServiceSpec")
    KIND = "inference"
    SPEC = InferenceServiceSpec
    # Nested fields someone may write at the top level; the unknown-field message points at the right place.
    HINTS: ClassVar[dict[str, str]] = {
        **{key: f"autoscaling.{key}" for key in ("min_replicas", "max_replicas", "waiting_threshold")},
        "initial_delay_s": "readiness.initial_delay_s",
        **{key: f"shutdown.{key}" for key in ("drain_seconds", "termination_grace_period_s")},
    }

    kind: Annotated[Literal["inference"], Kind] = "inference"
    tier: Tier = DEFAULT_TIERS["inference"]
    image: Image = DEFAULT_IMAGES["vllm"]  # or the engine's: see _engine_image
    engine: Literal[ENGINES] = serving(N_("Engine"), N_("The serving engine"), "vllm")  # type: ignore[valid-type]
    model: Annotated[str, Check(model_error)] = serving(
        N_("Model"),
        N_("A Hugging Face model id (org/name), or an absolute path on the weights volume"),
        schema={"maxLength": 1024},
    )
    tensor_parallel: int = serving(N_("Tensor parallel"), N_("GPUs each layer is split over"), 1, ge=1, le=256)
    pipeline_parallel: int = serving(N_("Pipeline parallel"), N_("Stages the layers are split into"), 1, ge=1, le=64)
    data_parallel: int = serving(N_("Data parallel"), N_("SGLang: engine copies in a replica"), 1, ge=1, le=64)
    replicas: int = serving(N_("Replicas"), N_("Independent copies of the service"), 1, ge=1, le=1000)
    max_model_len: int | None = serving(
        N_("Maximum context length"), N_("In tokens; empty: the model's own"), None, ge=16, le=10_000_000
    )
    gpu_memory_utilization: float = serving(
        N_("GPU memory utilization"), N_("The share of GPU memory the engine may use"), 0.9, gt=0, le=1
    )
    port: int = serving(N_("Port"), N_("The port of its OpenAI-compatible API"), 8000, ge=1, le=65535)
    readiness: ReadinessModel = serving(N_("Readiness"), N_("When a replica counts as ready"), ReadinessModel())
    autoscaling: AutoscalingModel = serving(
        N_("Autoscaling"), N_("Replicas follow the engine's queue"), AutoscalingModel()
    )
    shutdown: ShutdownModel = serving(N_("Shutdown"), N_("Graceful stop: drain, then exit"), ShutdownModel())
    weights: WeightsModel | None = serving(
        N_("Weights volume"), N_("A claim with the weights, mounted read-only"), None
    )
    warm: WarmModel | None = serving(
        N_("Warm weights"),
        N_("A Job downloads the model into a cache claim once; replicas mount it and start when it is complete"),
        None,
    )
    extra_args: list[Arg] = serving(
        N_("Extra engine arguments"),
        N_("Passed as they are; not the flags these fields set"),
        [],
        max_length=MAX_EXTRA_ARGS,
    )

    routing: Literal[ROUTING] = serving(  # type: ignore[valid-type]
        N_("Routing"),
        N_(
            "round-robin: a Service spreads requests; cache-aware: the engine's router sends a prompt to the replica "
            "that holds its prefix"
        ),
        "round-robin",
    )
    disaggregation: DisaggregationModel | None = serving(
        N_("Prefill/decode disaggregation"),
        N_("Prefill and decode as separate pools with the router in PD mode between them"),
        None,
    )

    _null_objects = field_validator("readiness", "autoscaling", "shutdown", mode="before")(null_is_default)

    @model_validator(mode="before")
    @classmethod
    def _engine_image(cls, data: Any) -> Any:
        """Without an image, the engine's pinned release."""
        if isinstance(data, dict) and "image" not in data and isinstance(data.get("engine"), str):
            return {**data, "image": DEFAULT_IMAGES.get(data["engine"], DEFAULT_IMAGES["vllm"])}
        return data

    @field_validator("data_parallel")
    @classmethod
    def _replica_on_whole_nodes(cls, dp: int, info: ValidationInfo) -> int:
        """A replica larger than a node uses whole nodes (a LeaderWorkerSet group); data_parallel is SGLang's."""
        problems, engine, per_node = Problems(), info.data.get("engine"), gpus_per_node(info)
        if engine == "vllm" and dp != 1:
            problems.add("data_parallel", N_("data_parallel is an SGLang option; with vLLM scale out with replicas"))
        gpus = _gpus_per_replica(info.data, dp)
        if gpus is not None and gpus > per_node and gpus % per_node:
            product = "tensor_parallel x pipeline_parallel" + (" x data_parallel" if engine == "sglang" else "")
            problems.add(
                "tensor_parallel",
                N_(
                    "%(product)s = %(gpus)s GPUs per replica spans nodes of %(per_node)s GPUs: a multi-node replica "
                    "uses whole nodes, so it must be a multiple of %(per_node)s",
                    product=product,
                    gpus=gpus,
                    per_node=per_node,
                ),
            )
        elif gpus is not None and gpus > per_node and engine == "sglang" and dp > 1:
            problems.add(
                "data_parallel", N_("a multi-node SGLang replica runs with data_parallel 1; scale out with replicas")
            )
        problems.check(info)
        return dp

    @field_validator("port")
    @classmethod
    def _not_the_engines_own(cls, port: int, info: ValidationInfo) -> int:
        """A multi-node replica's engine listens on its own ports too."""
        problems, gpus = Problems(), _gpus_per_replica(info.data, info.data.get("data_parallel"))
        if gpus is not None and gpus > gpus_per_node(info) and port in CONSOLE_PORTS:
            problems.add("port", N_("%(port)s is %(use)s; pick another port", port=port, use=CONSOLE_PORTS[port]))
        problems.check(info)
        return port

    @field_validator("autoscaling")
    @classmethod
    def _holds_the_replicas(cls, scaling: AutoscalingModel, info: ValidationInfo) -> AutoscalingModel:
        problems, replicas = Problems(), info.data.get("replicas")
        low, high = scaling.min_replicas, scaling.max_replicas
        if scaling.enabled and replicas is not None and not low <= replicas <= high:  # type: ignore[operator]
            problems.add(
                "replicas",
                N_(
                    "the starting replicas must be within autoscaling's %(low)s..%(high)s, not %(replicas)s",
                    low=low,
                    high=high,
                    replicas=replicas,
                ),
            )
        problems.check(info)
        return scaling

    @field_validator("weights")
    @classmethod
    def _holds_the_model(cls, weights: WeightsModel | None, info: ValidationInfo) -> WeightsModel | None:
        problems, model = Problems(), info.data.get("model")
        if weights is not None and model is not None and model.startswith("/") and not under(model, weights.mount_path):
            problems.add(
                "model",
                N_(
                    "%(model)r is not under the weights volume's mount path %(mount)r",
                    model=model,
                    mount=weights.mount_path,
                ),
            )
        problems.check(info)
        return weights

    @field_validator("warm")
    @classmethod
    def _downloads_a_model_id(cls, warm: WarmModel | None, info: ValidationInfo) -> WarmModel | None:
        """The Job downloads a Hugging Face model id into its own claim: not a path on a volume, not beside a
        weights claim (the engine reads its weights from one place)."""
        problems, model = Problems(), info.data.get("model")
        if warm is not None and model is not None and model.startswith("/"):
            problems.add(
                "warm",
                N_("warm downloads a Hugging Face model id (org/name); %(model)r is a path on a volume", model=model),
            )
        if warm is not None and info.data.get("weights") is not None:
            problems.add(
                "warm",
                N_(
                    "the engine reads its weights from one claim: weights names one already filled, warm fills its "
                    "own; set one of them"
                ),
            )
        problems.check(info)
        return warm

    @field_validator("extra_args")
    @classmethod
    def _not_the_consoles_flags(cls, args: list[str], info: ValidationInfo) -> list[str]:
        problems, flags = Problems(), ENGINE_FLAGS.get(info.data.get("engine"), frozenset())
        for i, arg in enumerate(args):
            if (flag := arg.split("=", 1)[0].replace("_", "-")) in flags:
                problems.add((i,), N_("%(flag)s is set by the console from the spec's own fields", flag=flag))
        problems.check()
        return args

    @field_validator("routing")
    @classmethod
    def _router_finds_single_node_replicas(cls, routing: str, info: ValidationInfo) -> str:
        """The router sends each request to one engine pod: a replica spanning nodes (a LeaderWorkerSet group) is
        not rendered behind it."""
        problems, gpus = Problems(), _gpus_per_replica(info.data, info.data.get("data_parallel"))
        if routing != "round-robin" and gpus is not None and gpus > gpus_per_node(info):
            problems.add(
                "routing",
                N_(
                    "cache-aware routing runs replicas of one node: %(gpus)s GPUs per replica span nodes of "
                    "%(per_node)s GPUs",
                    gpus=gpus,
                    per_node=gpus_per_node(info),
                ),
            )
        problems.check(info)
        return routing

    @field_validator("disaggregation")
    @classmethod
    def _pools_can_split(cls, split: DisaggregationModel | None, info: ValidationInfo) -> DisaggregationModel | None:
        """What a prefill/decode split needs: one-node pools of tensor parallel engines, per-pool scaling, and a KV
        transfer the engine has."""
        if split is None:
            return None
        problems, data, per_node = Problems(), info.data, gpus_per_node(info)
        engine = data.get("engine")
        if data.get("pipeline_parallel") not in (None, 1):
            problems.add("pipeline_parallel", N_("a disaggregated pool runs tensor parallel engines: must be 1"))
        if data.get("data_parallel") not in (None, 1):
            problems.add("data_parallel", N_("a disaggregated pool runs tensor parallel engines: must be 1"))
        if data.get("replicas") not in (None, 1):
            problems.add(
                "replicas",
                N_("with disaggregation each pool sets its own: disaggregation.prefill.replicas and .decode.replicas"),
            )
        scaling = data.get("autoscaling")
        if scaling is not None and scaling.enabled:
            problems.add(
                ("autoscaling", "enabled"),
                N_(
                    "with disaggregation each pool scales on its own queue: disaggregation.prefill.autoscaling and "
                    ".decode.autoscaling"
                ),
            )
        tp = data.get("tensor_parallel")
        for role, pool in (("prefill", split.prefill), ("decode", split.decode)):
            gpus = pool.gpus_per_replica or tp
            if gpus is not None and gpus > per_node:
                field = "gpus_per_replica" if pool.gpus_per_replica else "tensor_parallel"
                path = ("disaggregation", role, field) if pool.gpus_per_replica else ("tensor_parallel",)
                problems.add(
                    path,
                    N_(
                        "a %(role)s replica runs on one node: at most %(per_node)s GPUs, not %(gpus)s (%(field)s)",
                        role=role,
                        per_node=per_node,
                        gpus=gpus,
                        field=field,
                    ),
                )
        if engine == "vllm" and split.transfer_backend is None:
            problems.add(
                ("disaggregation", "transfer_backend"),
                N_("vLLM moves the KV cache through a KV-transfer connector: set it to nixl (NixlConnector)"),
            )
        elif engine == "vllm" and split.transfer_backend != "nixl":
            problems.add(
                ("disaggregation", "transfer_backend"),
                N_("the console renders vLLM's NixlConnector: nixl, not %(backend)s", backend=split.transfer_backend),
            )
        port = data.get("port")
        if engine in PD_PORTS and port == PD_PORTS[engine][0]:
            problems.add("port", N_("%(port)s is %(use)s; pick another port", port=port, use=PD_PORTS[engine][1]))
        problems.check(info)
        return split

    def to_spec(self, gpus_per_node: int) -> InferenceServiceSpec:
        spec = self.spec(gpus_per_node=gpus_per_node)
        if spec.disaggregation and self.disaggregation and self.disaggregation.transfer_backend is None:
            # SGLang's own default (--disaggregation-transfer-backend mooncake); vLLM must name its connector.
            spec = replace(spec, disaggregation=replace(spec.disaggregation, transfer_backend="mooncake"))
        return spec


def _gpus_per_replica(data: dict, dp: int | None) -> int | None:
    """tensor_parallel x pipeline_parallel (x data_parallel with SGLang), or None while one of them is invalid."""
    engine, tp, pp = data.get("engine"), data.get("tensor_parallel"), data.get("pipeline_parallel")
    if engine is None or tp is None or pp is None or (engine == "sglang" and dp is None):
        return None
    return tp * pp * (dp if engine == "sglang" else 1)
