"""HAMi (GPU sharing by device memory and cores), as its webhook and scheduler extender behave.

- HAMi's device plugin advertises `nvidia.com/gpu` as devices x `deviceSplitCount` (default 10) and registers the
  physical devices in the node annotation `hami.io/node-nvidia-register` (here a JSON list of
  {id, count, devmem, devcore, type, health}); `nvidia.com/gpumem` / `nvidia.com/gpucores` are not node
  resources (https://github.com/Project-HAMi/HAMi/blob/master/docs/config.md,
  https://project-hami.io/docs/userguide/NVIDIA-device/specify-device-memory-usage).
- Its mutating webhook sends every pod that requests HAMi's resources to `schedulerName: hami-scheduler`
  (https://project-hami.io/docs/core-concepts/architecture): a pod that asked for Volcano loses Volcano.
- hami-scheduler is kube-scheduler with HAMi's extender: the resource filter ignores HAMi's per-device resources,
  and the extender needs `nvidia.com/gpu` distinct devices each with the requested memory (`gpumem`, or
  `gpumem-percentage` of the device; the whole device by default) and cores (`gpucores`, percent of a device,
  0 by default) free, and a free share (`count`). A binding records the devices in
  `hami.io/vgpu-devices-allocated` ("<uuid>,NVIDIA,<MiB>,<cores>:" per device, ";" per container).

Simplified: HAMi's own failure reasons are shortened to the names HAMi logs (`NodeInsufficientDevice`,
`CardInsufficientMemory`, `CardInsufficientCore`, `CardTimeSlicingExhausted`); only pods that request
`gpumem`, `gpumem-percentage` or `gpucores` are redirected (HAMi also takes plain `nvidia.com/gpu` pods when its
resource name is `nvidia.com/gpu`; the model leaves those to the default scheduler, for clusters that mix HAMi
nodes with plain ones).
"""

from __future__ import annotations

import json

from tests.backends.k8s_fake import podspec
from tests.backends.k8s_fake.scheduler import KubeScheduler, NodeInfo, Reason, Snapshot

REGISTER = "hami.io/node-nvidia-register"
ALLOCATED = "hami.io/vgpu-devices-allocated"
COUNT, MEMORY, PERCENT, CORES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
)
HAMI_ONLY = (MEMORY, PERCENT, CORES)
SCHEDULER = "hami-scheduler"


def wants_hami(spec: dict) -> bool:
    return any(name in podspec.container_requests(c) for c in spec.get("containers") or [] for name in HAMI_ONLY)


def mutate_pod(pod: dict) -> None:
    """The webhook: a pod asking for HAMi's resources is scheduled by hami-scheduler."""
    if wants_hami(pod["spec"]):
        pod["spec"]["schedulerName"] = SCHEDULER


def devices(node: dict) -> list[dict]:
    raw = (node["metadata"].get("annotations") or {}).get(REGISTER)
    return json.loads(raw) if raw else []


def _used(info: NodeInfo) -> dict[str, dict[str, int]]:
    used: dict[str, dict[str, int]] = {}
    for pod in info.pods:
        for container in ((pod["metadata"].get("annotations") or {}).get(ALLOCATED) or "").split(";"):
            for entry in container.split(":"):
                if entry:
                    uuid, _, mem, cores = entry.split(",")
                    slot = used.setdefault(uuid, {"count": 0, "mem": 0, "cores": 0})
                    slot["count"] += 1
                    slot["mem"] += int(mem)
                    slot["cores"] += int(cores)
    return used


def _assign(pod: dict, info: NodeInfo) -> tuple[list[list[tuple[str, int, int]]] | None, str]:
    """Per container, the devices and (MiB, cores) it gets; or None and HAMi's reason."""
    registered = [d for d in devices(info.node) if d.get("health", True)]
    if not registered:
        return None, "NodeInsufficientDevice"
    used = _used(info)
    plan = []
    for container in pod["spec"].get("containers") or []:
        wanted = podspec.container_requests(container)
        if not any(name in wanted for name in (COUNT, *HAMI_ONLY)):
            plan.append([])
            continue
        count = int(wanted.get(COUNT, 1))
        chosen: list[tuple[str, int, int]] = []
        reason = "NodeInsufficientDevice"
        for device in registered:
            slot = used.get(device["id"], {"count": 0, "mem": 0, "cores": 0})
            mem = int(wanted[MEMORY]) if MEMORY in wanted else int(device["devmem"] * wanted.get(PERCENT, 100) / 100)
            cores = int(wanted.get(CORES, 0))
            if slot["count"] >= device["count"]:
                reason = "CardTimeSlicingExhausted"
            elif device["devmem"] - slot["mem"] < mem:
                reason = "CardInsufficientMemory"
            elif device["devcore"] - slot["cores"] < cores or (cores == 100 and slot["count"]):
                reason = "CardInsufficientCore"
            else:
                chosen.append((device["id"], mem, cores))
                used[device["id"]] = {
                    "count": slot["count"] + 1,
                    "mem": slot["mem"] + mem,
                    "cores": slot["cores"] + cores,
                }
                if len(chosen) == count:
                    break
        if len(chosen) < count:
            return None, reason
        plan.append(chosen)
    return plan, ""


class HamiScheduler(KubeScheduler):
    names = (SCHEDULER,)
    ignored = frozenset(HAMI_ONLY)

    def extra(self, pod: dict, info: NodeInfo, snapshot: Snapshot) -> list[Reason]:
        plan, reason = _assign(pod, info)
        return [] if plan is not None else [Reason(reason, False)]

    def on_bind(self, pod: dict, info: NodeInfo, snapshot: Snapshot) -> None:
        plan, _ = _assign(pod, info)
        text = ";".join(":".join(f"{uuid},NVIDIA,{mem},{cores}" for uuid, mem, cores in c) + ":" for c in plan or [])
        pod["metadata"].setdefault("annotations", {})[ALLOCATED] = text


def register(gpus: int, memory_mib: int, split: int, product: str, node: str) -> str:
    return json.dumps(
        [
            {
                "id": f"GPU-{node}-{i}",
                "count": split,
                "devmem": memory_mib,
                "devcore": 100,
                "type": product,
                "health": True,
            }
            for i in range(gpus)
        ]
    )
