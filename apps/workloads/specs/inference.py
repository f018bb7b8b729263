"""Inference service fields: engine, parallelism that fits whole nodes, probes, autoscaling, shutdown, weights."""

from __future__ import annotations

from apps.backends.render.spec import (
    DEFAULT_IMAGES,
    DEFAULT_PROMETHEUS,
    Autoscaling,
    InferenceServiceSpec,
    Readiness,
    Shutdown,
    Weights,
)
from apps.core.text import N_
from apps.workloads.specs.checks import URL, check_model, check_volume, image_error, under
from apps.workloads.specs.model import CONSOLE_PORTS, ENGINE_FLAGS, ENGINES, MAX_EXTRA_ARGS, MAX_ITEM, MAX_RUNTIME_S
from apps.workloads.specs.reader import Errors, Reader


def parse_inference(
    reader: Reader, errors: Errors, common: dict, catalog: dict[str, dict], gpus_per_node: int
) -> InferenceServiceSpec | None:
    engine = reader.string("engine", "vllm")
    if engine is not None and engine not in ENGINES:
        errors.add("engine", N_("%(value)r is not one of %(allowed)s", value=engine, allowed=", ".join(ENGINES)))
        engine = None
    image = reader.string("image", DEFAULT_IMAGES.get(engine or "vllm"))
    if image is not None and (problem := image_error(image)):
        errors.add("image", problem)
    model = reader.string("model")
    if model is not None:
        check_model(errors, model)
    tp = reader.integer("tensor_parallel", 1, lo=1, hi=256)
    pp = reader.integer("pipeline_parallel", 1, lo=1, hi=64)
    dp = reader.integer("data_parallel", 1, lo=1, hi=64)
    replicas = reader.integer("replicas", 1, lo=1, hi=1000)
    max_len = reader.integer("max_model_len", None, lo=16, hi=10_000_000, nullable=True)
    utilization = reader.number("gpu_memory_utilization", 0.9)
    if utilization is not None and not 0 < utilization <= 1:
        errors.add(
            "gpu_memory_utilization", N_("must be above 0 and at most 1, not %(value)s", value=f"{utilization:g}")
        )
    port = reader.integer("port", 8000, lo=1, hi=65535)
    max_runtime = reader.integer("max_runtime_s", None, lo=60, hi=MAX_RUNTIME_S, nullable=True)
    readiness = _parse_readiness(reader)
    shutdown = _parse_shutdown(reader, errors)
    weights = _parse_weights(reader, errors)
    extra_args = reader.strings("extra_args", max_items=MAX_EXTRA_ARGS, max_len=MAX_ITEM)
    if engine is not None and extra_args:
        for i, arg in enumerate(extra_args):
            flag = arg.split("=", 1)[0].replace("_", "-")
            if flag in ENGINE_FLAGS[engine]:
                errors.add(
                    f"extra_args[{i}]", N_("%(flag)s is set by the console from the spec's own fields", flag=flag)
                )

    if engine == "vllm" and dp not in (None, 1):
        errors.add("data_parallel", N_("data_parallel is an SGLang option; with vLLM scale out with replicas"))
    gpus = None
    if tp is not None and pp is not None and dp is not None and engine is not None:
        gpus = tp * pp * (dp if engine == "sglang" else 1)
        product = "tensor_parallel x pipeline_parallel" + (" x data_parallel" if engine == "sglang" else "")
        if gpus > gpus_per_node and gpus % gpus_per_node:
            errors.add(
                "tensor_parallel",
                N_(
                    "%(product)s = %(gpus)s GPUs per replica spans nodes of %(per_node)s GPUs: a multi-node replica "
                    "uses whole nodes, so it must be a multiple of %(per_node)s",
                    product=product,
                    gpus=gpus,
                    per_node=gpus_per_node,
                ),
            )
        elif engine == "sglang" and gpus > gpus_per_node and dp > 1:
            errors.add(
                "data_parallel", N_("a multi-node SGLang replica runs with data_parallel 1; scale out with replicas")
            )
        if gpus > gpus_per_node and port in CONSOLE_PORTS:
            errors.add("port", N_("%(port)s is %(use)s; pick another port", port=port, use=CONSOLE_PORTS[port]))
    if weights is not None and model is not None and model.startswith("/") and not under(model, weights.mount_path):
        errors.add(
            "model",
            N_(
                "%(model)r is not under the weights volume's mount path %(mount)r",
                model=model,
                mount=weights.mount_path,
            ),
        )
    autoscaling = _parse_autoscaling(reader, errors, replicas)
    if errors.fields:
        return None
    return InferenceServiceSpec(
        name=common["name"],
        tenant=common["tenant"],
        queue=common["queue"],
        tier=common["tier"],
        engine=engine,  # type: ignore[arg-type]
        model=model,  # type: ignore[arg-type]
        image=image,  # type: ignore[arg-type]
        gpu_model=common["gpu_model"],
        tensor_parallel=tp,  # type: ignore[arg-type]
        pipeline_parallel=pp,  # type: ignore[arg-type]
        data_parallel=dp,  # type: ignore[arg-type]
        replicas=replicas,  # type: ignore[arg-type]
        max_model_len=max_len,
        gpu_memory_utilization=utilization,  # type: ignore[arg-type]
        port=port,  # type: ignore[arg-type]
        readiness=readiness,  # type: ignore[arg-type]
        autoscaling=autoscaling,  # type: ignore[arg-type]
        shutdown=shutdown,  # type: ignore[arg-type]
        weights=weights,
        extra_args=extra_args,  # type: ignore[arg-type]
        env=common["env"],
        cpu=common["cpu"],
        memory_gib=common["memory_gib"],
        tolerations=common["tolerations"],  # type: ignore[arg-type]
        secret_env=common["secret_env"],  # type: ignore[arg-type]
        max_runtime_s=max_runtime,
        gpus_per_node=gpus_per_node,
        cluster=common["cluster"],
    )


def _parse_readiness(reader: Reader) -> Readiness | None:
    sub = reader.obj("readiness", ("initial_delay_s", "period_s"))
    if sub is None:
        return Readiness()
    delay = sub.integer("initial_delay_s", Readiness.initial_delay_s, lo=0, hi=7200)
    period = sub.integer("period_s", Readiness.period_s, lo=1, hi=300)
    return Readiness(delay, period) if delay is not None and period is not None else None


def _parse_shutdown(reader: Reader, errors: Errors) -> Shutdown | None:
    sub = reader.obj("shutdown", ("termination_grace_period_s", "drain_seconds"))
    if sub is None:
        return Shutdown()
    grace = sub.integer("termination_grace_period_s", Shutdown.termination_grace_period_s, lo=1, hi=3600)
    drain = sub.integer("drain_seconds", Shutdown.drain_seconds, lo=0, hi=3600)
    if grace is None or drain is None:
        return None
    if drain + 10 > grace:
        errors.add(
            "shutdown.drain_seconds",
            N_(
                "must leave at least 10 s of the %(grace)s s termination grace period for the engine to exit after "
                "SIGTERM: at most %(most)s, not %(drain)s",
                grace=grace,
                most=max(grace - 10, 0),
                drain=drain,
            ),
        )
        return None
    return Shutdown(grace, drain)


def _parse_weights(reader: Reader, errors: Errors) -> Weights | None:
    sub = reader.obj("weights", ("claim", "mount_path"))
    if sub is None or not sub.ok:
        return None
    claim, mount = sub.string("claim"), sub.string("mount_path", Weights.mount_path)
    check_volume(errors, "weights", claim, mount)
    return Weights(claim, mount) if claim is not None and mount is not None else None


def _parse_autoscaling(reader: Reader, errors: Errors, replicas: int | None) -> Autoscaling | None:
    sub = reader.obj(
        "autoscaling", ("enabled", "min_replicas", "max_replicas", "waiting_threshold", "prometheus_server_address")
    )
    if sub is None:
        return Autoscaling()
    enabled = sub.boolean("enabled", False)
    low = sub.integer("min_replicas", 1, lo=0, hi=1000)
    high = sub.integer("max_replicas", None, lo=1, hi=1000, nullable=True)
    threshold = sub.integer("waiting_threshold", Autoscaling.waiting_threshold, lo=1, hi=100_000)
    address = sub.string("prometheus_server_address", DEFAULT_PROMETHEUS)
    if address is not None and not URL.fullmatch(address):
        errors.add(
            "autoscaling.prometheus_server_address",
            N_("%(address)r is not an http(s)://host[:port][/path] URL", address=address),
        )
    if low == 0:
        # With no replica, no engine reports a waiting queue: the metric stays 0 and the service never wakes.
        errors.add(
            "autoscaling.min_replicas", N_("at least 1: scaling on the engine's own queue cannot wake from zero")
        )
    if enabled and high is None and "max_replicas" not in sub.data:
        errors.add("autoscaling.max_replicas", N_("required when autoscaling is enabled"))
    if low and high is not None and low > high:
        errors.add(
            "autoscaling.max_replicas", N_("must be at least min_replicas (%(low)s), not %(high)s", low=low, high=high)
        )
    elif enabled and low and high is not None and replicas is not None and not low <= replicas <= high:
        errors.add(
            "replicas",
            N_(
                "the starting replicas must be within autoscaling's %(low)s..%(high)s, not %(replicas)s",
                low=low,
                high=high,
                replicas=replicas,
            ),
        )
    if None in (enabled, low, threshold, address):
        return None
    return Autoscaling(enabled, low, high, threshold, address)  # type: ignore[arg-type]
