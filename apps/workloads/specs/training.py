"""Training job fields: GPU sharing, gang and topology fit, elastic range, volumes."""

from __future__ import annotations

from fractions import Fraction

from apps.backends.render.spec import Elastic, GpuSharing, TrainingJobSpec, Volume
from apps.backends.shares import hami_share, mig_share, time_slice_share, to_units
from apps.backends.types import Sharing, Topology
from apps.core.text import N_
from apps.workloads.specs.checks import check_volume, image_error, mig_per_gpu, mig_profiles, path_error
from apps.workloads.specs.model import (
    MAX_ITEM,
    MAX_LIST,
    MAX_RUNTIME_S,
    MAX_VOLUMES,
    MAX_WORKERS,
    SHARING_MODES,
    TOPOLOGIES,
)
from apps.workloads.specs.reader import Errors, Reader, type_name


def _parse_sharing(reader: Reader, errors: Errors, catalog: dict[str, dict], model: str | None) -> GpuSharing | None:
    entry = catalog.get(model) if model else None
    raw, present = reader.get("sharing", None)
    if not present or raw is None:
        return GpuSharing()
    if isinstance(raw, str):  # shorthand: "whole" == {"mode": "whole"}
        raw = {"mode": raw}
    sub = Reader(raw, "sharing", errors, ("mode", "mig_profile", "replicas", "gpumem_mib", "gpucores"))
    if not sub.ok:
        return None
    mode = sub.string("mode", Sharing.WHOLE.value)
    if mode not in SHARING_MODES:
        if mode is not None:
            errors.add(
                "sharing.mode", N_("%(value)r is not one of %(allowed)s", value=mode, allowed=", ".join(SHARING_MODES))
            )
        return None
    mig_profile = sub.string("mig_profile", "")
    replicas = sub.integer("replicas", None, lo=2, hi=64, nullable=True)
    gpumem = sub.integer("gpumem_mib", None, lo=1, hi=1 << 20, nullable=True)
    gpucores = sub.integer("gpucores", None, lo=1, hi=100, nullable=True)
    extra = {
        Sharing.MIG: ("mig_profile",),
        Sharing.TIME_SLICE: ("replicas",),
        Sharing.HAMI: ("gpumem_mib", "gpucores"),
        Sharing.WHOLE: (),
    }
    for key in ("mig_profile", "replicas", "gpumem_mib", "gpucores"):
        if key in sub.data and sub.data[key] not in (None, "") and key not in extra[Sharing(mode)]:
            errors.add(
                f"sharing.{key}", N_("applies to %(applies)s sharing, not %(mode)r", applies=_mode_of(key), mode=mode)
            )
    share = Fraction(1)
    if mode == Sharing.MIG:
        profiles = mig_profiles(entry) if entry else {}
        if entry is not None and not profiles:
            capable = ", ".join(sorted(code for code, e in catalog.items() if e.get("mig_profiles"))) or N_("none")
            errors.add(
                "sharing.mode",
                N_("%(model)s does not support MIG; MIG-capable models: %(capable)s", model=model, capable=capable),
            )
            return None
        if not mig_profile:
            errors.add("sharing.mig_profile", N_("required with MIG sharing, e.g. 1g.10gb or 3g.40gb"))
            return None
        if entry is not None and mig_profile not in profiles:
            errors.add(
                "sharing.mig_profile",
                N_(
                    "%(model)s has no MIG profile %(profile)r; profiles: %(profiles)s",
                    model=model,
                    profile=mig_profile,
                    profiles=", ".join(profiles),
                ),
            )
            return None
        if entry is not None:
            share = mig_share(entry.get("mig_profiles"), mig_profile)
    elif mode == Sharing.TIME_SLICE:
        if replicas is None:
            if "replicas" not in sub.data:
                errors.add(
                    "sharing.replicas",
                    N_("required with time-slice sharing: the replicas per GPU of the node pool (2-64)"),
                )
            return None
        share = time_slice_share(replicas)
    elif mode == Sharing.HAMI:
        for key, value in (("gpumem_mib", gpumem), ("gpucores", gpucores)):
            if value is None and key not in sub.data:
                errors.add(
                    f"sharing.{key}",
                    N_("required with HAMi sharing (gpumem_mib: device memory in MiB; gpucores: percent)"),
                )
        if gpumem is None or gpucores is None:
            return None
        memory = int((entry or {}).get("memory_mib") or 0)
        if memory and gpumem > memory:
            errors.add(
                "sharing.gpumem_mib",
                N_(
                    "%(gpumem)s MiB is more than the %(memory)s MiB of a %(model)s GPU",
                    gpumem=gpumem,
                    memory=memory,
                    model=model,
                ),
            )
            return None
        share = hami_share(memory, gpumem, gpucores)
    # One definition of the share (apps/backends/shares.py): what quota, admission and chargeback count.
    return GpuSharing(mode, mig_profile or "", replicas, gpumem, gpucores, round(float(share), 6), to_units(share))


def _mode_of(key: str) -> str:
    return {"mig_profile": "MIG", "replicas": N_("time-slice"), "gpumem_mib": "HAMi", "gpucores": "HAMi"}[key]


def _per_gpu(sharing: GpuSharing, entry: dict | None) -> int:
    """Workers of this sharing mode one GPU holds (for the "all on one node" check)."""
    if sharing.mode == Sharing.MIG and entry:
        profile = mig_profiles(entry).get(sharing.mig_profile)
        return mig_per_gpu(profile, round(int(entry.get("memory_mib") or 0) / 1024)) if profile else 1
    if sharing.mode == Sharing.TIME_SLICE:
        return sharing.replicas or 1
    if sharing.mode == Sharing.HAMI and entry and sharing.gpumem_mib and sharing.gpucores:
        return max(1, min(int(entry.get("memory_mib") or 0) // sharing.gpumem_mib, 100 // sharing.gpucores))
    return 1


def parse_training(
    reader: Reader, errors: Errors, common: dict, catalog: dict[str, dict], gpus_per_node: int
) -> TrainingJobSpec | None:
    model = common["gpu_model"]
    entry = catalog.get(model) if model else None
    image = reader.string("image")
    if image is not None and (problem := image_error(image)):
        errors.add("image", problem)
    command = reader.strings("command", max_items=MAX_LIST, max_len=MAX_ITEM)
    if command == [] and reader.ok:  # absent or empty
        errors.add("command", N_('the program to run is required, e.g. ["python", "train.py"]'))
    elif command and (not command[0] or command[0].startswith("-")):
        errors.add("command[0]", N_("the program name cannot be empty or start with '-'"))
    args = reader.strings("args", max_items=MAX_LIST, max_len=MAX_ITEM)
    workers = reader.integer("workers", 1, lo=1, hi=MAX_WORKERS)
    gpus_per_worker = reader.integer("gpus_per_worker", 1, lo=1, hi=64)
    sharing = _parse_sharing(reader, errors, catalog, model)
    topology = reader.string("topology", Topology.ANY.value)
    if topology is not None and topology not in TOPOLOGIES:
        errors.add("topology", N_("%(value)r is not one of %(allowed)s", value=topology, allowed=", ".join(TOPOLOGIES)))
        topology = None
    max_runtime = reader.integer("max_runtime_s", 86_400, lo=60, hi=MAX_RUNTIME_S)
    retries = reader.integer("retries", 3, lo=0, hi=100)
    elastic = _parse_elastic(reader, errors, workers)
    volumes = _parse_volumes(reader, errors)
    gang_min = reader.integer("gang_min", None, lo=1, hi=MAX_WORKERS, nullable=True)

    if sharing is not None and gpus_per_worker is not None:
        if sharing.mode != Sharing.WHOLE and gpus_per_worker != 1:
            errors.add(
                "gpus_per_worker",
                N_(
                    "with %(mode)s sharing each worker holds part of one GPU: gpus_per_worker must be 1",
                    mode=str(sharing.mode),
                ),
            )
        elif sharing.mode == Sharing.WHOLE and gpus_per_worker > gpus_per_node:
            errors.add(
                "gpus_per_worker",
                N_(
                    "a worker runs on one node: %(gpus)s GPUs exceed the %(per_node)s GPUs per node "
                    "(%(model)s nodes); use more workers with fewer GPUs each",
                    gpus=gpus_per_worker,
                    per_node=gpus_per_node,
                    model=model or "GPU",
                ),
            )
    if workers is not None and gang_min is not None and gang_min > workers:
        errors.add(
            "gang_min", N_("at most the %(workers)s workers, not %(gang_min)s", workers=workers, gang_min=gang_min)
        )
    if elastic is not None and gang_min is not None and gang_min < elastic.min_workers:
        errors.add(
            "gang_min",
            N_(
                "torchrun cannot start below elastic.min_workers (%(min)s); got %(gang_min)s",
                min=elastic.min_workers,
                gang_min=gang_min,
            ),
        )
    if (
        topology == Topology.NODE
        and workers
        and sharing is not None
        and gpus_per_worker
        and not errors.has("gpus_per_worker")
    ):
        _check_one_node(errors, workers, gpus_per_worker, sharing, entry, model, gpus_per_node)
    if errors.fields:
        return None
    assert workers is not None and sharing is not None  # no errors: every field parsed
    resolved_gang = gang_min if gang_min is not None else (elastic.min_workers if elastic else workers)
    return TrainingJobSpec(
        name=common["name"],
        tenant=common["tenant"],
        queue=common["queue"],
        tier=common["tier"],
        image=image,  # type: ignore[arg-type]
        command=command,  # type: ignore[arg-type]
        args=args,  # type: ignore[arg-type]
        env=common["env"],
        workers=workers,
        gpus_per_worker=gpus_per_worker,  # type: ignore[arg-type]
        gpu_model=model,
        sharing=sharing,
        gang_min=resolved_gang,
        topology=topology,  # type: ignore[arg-type]
        max_runtime_s=max_runtime,  # type: ignore[arg-type]
        elastic=elastic,
        retries=retries,  # type: ignore[arg-type]
        volumes=volumes,  # type: ignore[arg-type]
        cpu=common["cpu"],
        memory_gib=common["memory_gib"],
        tolerations=common["tolerations"],  # type: ignore[arg-type]
        secret_env=common["secret_env"],  # type: ignore[arg-type]
        cluster=common["cluster"],
    )


def _check_one_node(
    errors: Errors,
    workers: int,
    gpus_per_worker: int,
    sharing: GpuSharing,
    entry: dict | None,
    model: str | None,
    gpus_per_node: int,
) -> None:
    """topology "node" puts the whole gang on one node: it must fit there."""
    node = N_("%(per_node)s GPUs per node (%(model)s nodes)", per_node=gpus_per_node, model=model or "GPU")
    if sharing.mode == Sharing.WHOLE:
        if workers * gpus_per_worker > gpus_per_node:
            errors.add(
                "topology",
                N_(
                    "'node' puts all %(workers)s workers on one node: %(workers)s x %(gpus)s = %(total)s GPUs "
                    "exceed the %(node)s",
                    workers=workers,
                    gpus=gpus_per_worker,
                    total=workers * gpus_per_worker,
                    node=node,
                ),
            )
        return
    per_gpu = _per_gpu(sharing, entry)
    if workers > per_gpu * gpus_per_node:
        errors.add(
            "topology",
            N_(
                "'node' puts all %(workers)s workers on one node, which holds at most %(most)s %(mode)s workers "
                "(%(per_gpu)s per GPU x %(node)s)",
                workers=workers,
                most=per_gpu * gpus_per_node,
                mode=str(sharing.mode),
                per_gpu=per_gpu,
                node=node,
            ),
        )


def _parse_elastic(reader: Reader, errors: Errors, workers: int | None) -> Elastic | None:
    sub = reader.obj("elastic", ("min_workers", "max_workers", "checkpoint_path"))
    if sub is None or not sub.ok:
        return None
    low = sub.integer("min_workers", lo=1, hi=MAX_WORKERS)
    high = sub.integer("max_workers", lo=1, hi=MAX_WORKERS)
    checkpoint = sub.string("checkpoint_path")
    if checkpoint is not None and (problem := path_error(checkpoint)):
        errors.add("elastic.checkpoint_path", problem)
    if low is not None and high is not None and low > high:
        errors.add(
            "elastic.max_workers", N_("must be at least min_workers (%(low)s), not %(high)s", low=low, high=high)
        )
        return None
    if low is not None and high is not None and workers is not None and not low <= workers <= high:
        errors.add(
            "workers",
            N_(
                "an elastic job starts with %(low)s to %(high)s workers (its elastic range), not %(workers)s",
                low=low,
                high=high,
                workers=workers,
            ),
        )
    if low is None or high is None or checkpoint is None:
        return None
    return Elastic(low, high, checkpoint)


def _parse_volumes(reader: Reader, errors: Errors) -> list[Volume] | None:
    raw, present = reader.get("volumes", [])
    if not present:
        return []
    if not isinstance(raw, list):
        errors.add("volumes", N_("must be a list of {claim, mount_path, read_only}, not %(type)s", type=type_name(raw)))
        return None
    if len(raw) > MAX_VOLUMES:
        errors.add("volumes", N_("at most %(max)s volumes, not %(count)s", max=MAX_VOLUMES, count=len(raw)))
        return None
    out: list[Volume] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        where = f"volumes[{i}]"
        sub = Reader(item, where, errors, ("claim", "mount_path", "read_only"))
        if not sub.ok:
            continue
        claim, mount, read_only = sub.string("claim"), sub.string("mount_path"), sub.boolean("read_only", False)
        check_volume(errors, where, claim, mount)
        if mount is not None and mount in seen:
            errors.add(
                f"{where}.mount_path",
                N_("%(path)r is already the mount path of volumes[%(index)s]", path=mount, index=seen[mount]),
            )
        if mount is not None:
            seen.setdefault(mount, i)
        if claim is not None and mount is not None and read_only is not None:
            out.append(Volume(claim, mount, read_only))
    return out if len(out) == len(raw) else None
