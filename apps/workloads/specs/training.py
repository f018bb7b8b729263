"""The training job spec: its fields, and the checks between them (a worker's GPUs on one node, the gang, the
elastic range, the "all on one node" topology)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from apps.backends.render.spec import DEFAULT_TIERS, Elastic, TrainingJobSpec, Volume
from apps.backends.types import Sharing, Topology
from apps.core.text import N_
from apps.workloads.specs.checks import argument_error, path_error, program_error
from apps.workloads.specs.common import Claim, Kind, MountPath, Runtime, Tier, WorkloadModel
from apps.workloads.specs.fields import (
    Check,
    Problems,
    SpecModel,
    advanced,
    catalog,
    container,
    described,
    gpus_per_node,
    resources,
)
from apps.workloads.specs.model import MAX_ITEM, MAX_LIST, MAX_VOLUMES, MAX_WORKERS, TOPOLOGIES
from apps.workloads.specs.sharing import SharingModel

Arg = Annotated[str, Field(max_length=MAX_ITEM), Check(argument_error)]


class ElasticModel(SpecModel):
    model_config = ConfigDict(title="Elastic")
    SPEC = Elastic

    min_workers: int = described(N_("Minimum workers"), N_("torchrun runs on down to this many"), ge=1, le=MAX_WORKERS)
    max_workers: int = described(N_("Maximum workers"), N_("torchrun grows up to this many"), ge=1, le=MAX_WORKERS)
    checkpoint_path: Annotated[str, Check(path_error, (("maxLength", 1024),))] = described(
        N_("Checkpoint path"), N_("Where it saves and resumes from (on a volume); set as CHECKPOINT_PATH")
    )

    @model_validator(mode="after")
    def _range(self) -> ElasticModel:
        problems, low, high = Problems(), self.min_workers, self.max_workers
        if low > high:
            problems.add("max_workers", N_("must be at least min_workers (%(low)s), not %(high)s", low=low, high=high))
        problems.check()
        return self


class VolumeModel(SpecModel):
    model_config = ConfigDict(title="Volume")
    SPEC = Volume

    claim: Claim
    mount_path: MountPath
    read_only: bool = described(N_("Read-only"), N_("Mount it read-only"), False)


class TrainingJobModel(WorkloadModel):
    """A distributed training job: `workers` pods (or Slurm nodes), each running torchrun over its GPUs."""

    model_config = ConfigDict(title="TrainingJobSpec")
    KIND = "training"
    SPEC = TrainingJobSpec
    # Nested fields someone may write at the top level; the unknown-field message points at the right place.
    HINTS: ClassVar[dict[str, str]] = {
        **{key: f"sharing.{key}" for key in ("mig_profile", "replicas", "gpumem_mib", "gpucores")},
        **{key: f"elastic.{key}" for key in ("min_workers", "max_workers", "checkpoint_path")},
    }

    kind: Annotated[Literal["training"], Kind] = "training"
    tier: Tier = DEFAULT_TIERS["training"]
    max_runtime_s: Annotated[int, Runtime] = 86_400
    command: list[Arg] = container(
        N_("Command"),
        N_('The program and its arguments, e.g. ["python", "train.py"]'),
        min_length=1,
        max_length=MAX_LIST,
    )
    args: list[Arg] = container(N_("Arguments"), N_("Appended to the command"), [], max_length=MAX_LIST)
    workers: int = resources(N_("Workers"), N_("Pods or Slurm nodes, each running torchrun"), 1, ge=1, le=MAX_WORKERS)
    gpus_per_worker: int = resources(N_("GPUs per worker"), N_("On one node; 1 with a shared GPU"), 1, ge=1, le=64)
    sharing: SharingModel = described(
        N_("GPU sharing"),
        N_('How a worker holds its GPU; "mig" is short for {"mode": "mig"}'),
        SharingModel(),
        "sharing",
    )
    gang_min: int | None = resources(
        N_("Gang minimum"),
        N_("Workers started together; empty: all, or the elastic minimum"),
        None,
        ge=1,
        le=MAX_WORKERS,
    )
    topology: Literal[TOPOLOGIES] = resources(  # type: ignore[valid-type]
        N_("Topology"),
        N_("node: all on one node; nvlink: one NVLink domain; leaf: one leaf switch"),
        Topology.ANY.value,
    )
    elastic: ElasticModel | None = resources(
        N_("Elastic range"), N_("torchrun's elastic range, resuming from checkpoints; empty: a fixed size"), None
    )
    retries: int = advanced(N_("Retries"), N_("Restarts after a failure"), 3, ge=0, le=100)
    progress_timeout_minutes: int | None = advanced(
        N_("Progress timeout (minutes)"),
        N_("Hung when no heartbeat comes for this long (POST /api/v1/workloads/<id>/heartbeat/); empty: none"),
        None,
        ge=1,
        le=10_080,
    )
    volumes: list[VolumeModel] = advanced(
        N_("Volumes"), N_("PersistentVolumeClaims mounted into every worker"), [], max_length=MAX_VOLUMES
    )

    @field_validator("sharing", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {} if value is None else {"mode": value} if isinstance(value, str) else value

    @field_validator("command")
    @classmethod
    def _program(cls, command: list[str]) -> list[str]:
        problems = Problems()
        if problem := program_error(command):
            problems.add((0,), problem)
        problems.check()
        return command

    @field_validator("volumes")
    @classmethod
    def _one_volume_per_path(cls, volumes: list[VolumeModel]) -> list[VolumeModel]:
        problems, seen = Problems(), {}
        for i, volume in enumerate(volumes):
            if (mount := volume.mount_path) in seen:
                used = N_("%(path)r is already the mount path of volumes[%(index)s]", path=mount, index=seen[mount])
                problems.add((i, "mount_path"), used)
            seen.setdefault(mount, i)
        problems.check()
        return volumes

    @field_validator("sharing")
    @classmethod
    def _fits_the_gpus(cls, sharing: SharingModel, info: ValidationInfo) -> SharingModel:
        """The GPU model can be shared this way, and a worker's GPUs are on one node."""
        problems, model, gpus = Problems(), info.data.get("gpu_model"), info.data.get("gpus_per_worker")
        if sharing.share(problems, model, catalog(info)) is not None and gpus is not None:
            per_node = gpus_per_node(info)
            if sharing.mode != Sharing.WHOLE and gpus != 1:
                problems.add(
                    "gpus_per_worker",
                    N_(
                        "with %(mode)s sharing each worker holds part of one GPU: gpus_per_worker must be 1",
                        mode=sharing.mode,
                    ),
                )
            elif sharing.mode == Sharing.WHOLE and gpus > per_node:
                problems.add(
                    "gpus_per_worker",
                    N_(
                        "a worker runs on one node: %(gpus)s GPUs exceed the %(per_node)s GPUs per node "
                        "(%(model)s nodes); use more workers with fewer GPUs each",
                        gpus=gpus,
                        per_node=per_node,
                        model=model or "GPU",
                    ),
                )
        problems.check(info)
        return sharing

    @field_validator("gang_min")
    @classmethod
    def _within_the_workers(cls, gang: int | None, info: ValidationInfo) -> int | None:
        problems, workers = Problems(), info.data.get("workers")
        if gang is not None and workers is not None and gang > workers:
            problems.add(
                "gang_min", N_("at most the %(workers)s workers, not %(gang_min)s", workers=workers, gang_min=gang)
            )
        problems.check(info)
        return gang

    @field_validator("topology")
    @classmethod
    def _on_one_node(cls, topology: str, info: ValidationInfo) -> str:
        """topology "node" puts the whole gang on one node: it must fit there."""
        data, problems = info.data, Problems()
        if topology == Topology.NODE and {"workers", "gpus_per_worker", "sharing"} <= set(data):
            workers, gpus, sharing, model = (
                data["workers"],
                data["gpus_per_worker"],
                data["sharing"],
                data.get("gpu_model"),
            )
            per_node, entry = gpus_per_node(info), catalog(info).get(model) if model else None
            node = N_("%(per_node)s GPUs per node (%(model)s nodes)", per_node=per_node, model=model or "GPU")
            if sharing.mode == Sharing.WHOLE and workers * gpus > per_node:
                problems.add(
                    "topology",
                    N_(
                        "'node' puts all %(workers)s workers on one node: %(workers)s x %(gpus)s = %(total)s GPUs "
                        "exceed the %(node)s",
                        workers=workers,
                        gpus=gpus,
                        total=workers * gpus,
                        node=node,
                    ),
                )
            per_gpu = sharing.per_gpu(entry)
            if sharing.mode != Sharing.WHOLE and workers > per_gpu * per_node:
                problems.add(
                    "topology",
                    N_(
                        "'node' puts all %(workers)s workers on one node, which holds at most %(most)s %(mode)s "
                        "workers (%(per_gpu)s per GPU x %(node)s)",
                        workers=workers,
                        most=per_gpu * per_node,
                        mode=sharing.mode,
                        per_gpu=per_gpu,
                        node=node,
                    ),
                )
        problems.check(info)
        return topology

    @field_validator("elastic")
    @classmethod
    def _holds_the_workers(cls, elastic: ElasticModel | None, info: ValidationInfo) -> ElasticModel | None:
        """An elastic job starts within its range, and its gang is not below the range."""
        problems, workers, gang = Problems(), info.data.get("workers"), info.data.get("gang_min")
        if elastic is not None and workers is not None and not elastic.min_workers <= workers <= elastic.max_workers:
            problems.add(
                "workers",
                N_(
                    "an elastic job starts with %(low)s to %(high)s workers (its elastic range), not %(workers)s",
                    low=elastic.min_workers,
                    high=elastic.max_workers,
                    workers=workers,
                ),
            )
        if elastic is not None and gang is not None and gang < elastic.min_workers:
            problems.add(
                "gang_min",
                N_(
                    "torchrun cannot start below elastic.min_workers (%(min)s); got %(gang_min)s",
                    min=elastic.min_workers,
                    gang_min=gang,
                ),
            )
        problems.check(info)
        return elastic

    def to_spec(self, gpus_per_node: int) -> TrainingJobSpec:
        """The renderers' spec: the share of a GPU and the gang size resolved (all workers, or the elastic minimum)."""
        gang = self.gang_min or (self.elastic.min_workers if self.elastic else self.workers)
        return self.spec(sharing=self.sharing.gpu_sharing(), gang_min=gang)
