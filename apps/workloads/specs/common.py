"""The fields both kinds have, each declared once (type, checks, bounds, title, help text, form section), and the
checks between them: the kind, the GPU model in the catalog, Secret references beside env, repeated tolerations.
A kind's model may change a field's default (tier, image, max_runtime_s): those fields are typed here, with
their title and help text, and given their default there."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from apps.backends.render.workload.network import NETWORKS
from apps.core.text import N_, Text
from apps.workloads.specs.checks import (
    DNS_LABEL,
    ENV_NAME,
    dns_label_error,
    env_name_error,
    env_value_error,
    image_error,
    mount_error,
)
from apps.workloads.specs.fields import (
    CHECK,
    Check,
    Problems,
    SpecModel,
    advanced,
    basics,
    catalog,
    container,
    described,
    null_is_default,
    resources,
)
from apps.workloads.specs.model import MAX_ENV, MAX_ENV_VALUE, MAX_RUNTIME_S, NAME_MAX
from apps.workloads.specs.secret_env import MAX_SECRET_ENV, SecretEnvModel, secret_env_problems
from apps.workloads.specs.tolerations import MAX_TOLERATIONS, TolerationModel


def label(what: Text) -> Check:
    """A DNS-1123 label; `what` names it in the message ("tenant slug"), marked with N_."""
    return Check(dns_label_error(what), (("maxLength", NAME_MAX), ("pattern", f"^{DNS_LABEL}$")))


def _cluster_error(value: str) -> Text | None:
    return dns_label_error(N_("cluster name"))(value) if value else None


Kind = basics(N_("Kind"), N_("training or inference; when given, the kind it is submitted as"))
Tier = Annotated[
    str, label(N_("tier name")), basics(N_("Priority tier"), N_("Its priority and whether it may be preempted"))
]
Image = Annotated[
    str,
    Check(image_error, (("maxLength", 512),)),
    container(N_("Container image"), N_("Pinned: [registry[:port]/]repository:tag or @sha256: digest")),
]
Runtime = resources(N_("Maximum runtime (s)"), N_("It ends TIMED_OUT when it reaches it"), ge=60, le=MAX_RUNTIME_S)
Claim = Annotated[
    str, label(N_("PersistentVolumeClaim name")), described(N_("Claim"), N_("A PersistentVolumeClaim of its namespace"))
]
MountPath = Annotated[
    str, Check(mount_error, (("maxLength", 1024),)), described(N_("Mount path"), N_("An absolute path"))
]
EnvName = Annotated[str, Check(env_name_error, (("maxLength", 128), ("pattern", f"^{ENV_NAME}$")))]
EnvValue = Annotated[str, Check(env_value_error, (("maxLength", MAX_ENV_VALUE),))]


class WorkloadModel(SpecModel):
    """The fields and checks a training job and an inference service share. Defaults are validated too: the
    checks between fields run on a field left out as on one given."""

    model_config = ConfigDict(validate_default=True)
    KIND: ClassVar[str]

    kind: Annotated[str, Kind]  # each kind's model: its own Literal, and its default
    name: Annotated[str, label(N_("name"))] = basics(N_("Name"), N_("A DNS-1123 label, unique in its queue"))
    tenant: Annotated[str, label(N_("tenant slug"))] = basics(N_("Tenant"), N_("The slug of the tenant it runs for"))
    queue: Annotated[str, label(N_("queue name"))] = basics(N_("Queue"), N_("The tenant's queue whose quota it uses"))
    tier: Tier
    image: Image
    env: dict[EnvName, EnvValue] = container(
        N_("Environment"),
        N_("NAME: value in every container; the console's own names are reserved"),
        {},
        max_length=MAX_ENV,
    )
    secret_env: list[SecretEnvModel] = container(
        N_("Secret environment"),
        N_("Variables whose values stay in Kubernetes Secrets of its namespace"),
        [],
        max_length=MAX_SECRET_ENV,
    )
    gpu_model: str = resources(N_("GPU model"), N_("A GPU model of the catalog, e.g. h100"), schema={"maxLength": 20})
    cpu: int | None = resources(N_("CPU cores"), N_("Per worker or pod; empty: the default"), None, ge=1, le=1024)
    memory_gib: int | None = resources(
        N_("Memory (GiB)"), N_("Per worker or pod; empty: the default"), None, ge=1, le=16_384
    )
    max_runtime_s: Annotated[int | None, Runtime] = None
    tolerations: list[TolerationModel] = advanced(
        N_("Tolerations"), N_("Taints it tolerates besides its node pool's"), [], max_length=MAX_TOLERATIONS
    )
    cluster: Annotated[str, Check(_cluster_error, (("maxLength", NAME_MAX),))] = basics(
        N_("Cluster"), N_("One of the queue's clusters; empty: placement picks one"), ""
    )
    network: Literal[NETWORKS] = advanced(  # type: ignore[valid-type]
        N_("Network"),
        N_(
            "How its ranks talk between nodes: auto (RDMA when it spans nodes of an InfiniBand or RoCE pool, TCP "
            "on an Ethernet pool), rdma (required: refused on a pool without an RDMA fabric) or tcp (sockets only)"
        ),
        "auto",
    )

    _nulls = field_validator("tolerations", "secret_env", mode="before")(null_is_default)

    @field_validator("kind", mode="before")
    @classmethod
    def _submitted_as(cls, value: Any) -> Any:
        if value != cls.KIND:
            said = N_("the spec says %(said)r but is submitted as %(kind)r", said=value, kind=cls.KIND)
            raise PydanticCustomError(CHECK, "{message}", {"message": said})
        return value

    @field_validator("gpu_model")
    @classmethod
    def _in_catalog(cls, model: str, info: ValidationInfo) -> str:
        known = catalog(info)
        if model not in known:
            listed = ", ".join(sorted(known)) or N_("none")
            unknown = N_("unknown GPU model %(model)r; known: %(known)s", model=model, known=listed)
            raise PydanticCustomError(CHECK, "{message}", {"message": unknown})
        return model

    @field_validator("secret_env")
    @classmethod
    def _one_value_each(cls, items: list[SecretEnvModel], info: ValidationInfo) -> list[SecretEnvModel]:
        problems = Problems()
        secret_env_problems(problems, items, info.data.get("env", {}))
        problems.check()
        return items

    @field_validator("tolerations")
    @classmethod
    def _once_each(cls, items: list[TolerationModel]) -> list[TolerationModel]:
        return [item for i, item in enumerate(items) if item not in items[:i]]
