"""What "Test connection" says of the cluster's GPU setup against its settings: where the nodes show one device
plugin setup and the connection settings assume another, the console's pods or quota objects would not fit.

Pure: node dicts from the API and the cluster's `connection` settings in, notes out.

* HAMi registers its nodes with the annotation hami.io/node-nvidia-register (https://github.com/Project-HAMi/HAMi,
  docs/develop/protocol.md); with Kueue the console needs `hami_node_labels` to find those nodes' pool.
* The stock NVIDIA device plugin advertises nvidia.com/gpu; a renamed per-model resource (nvidia.com/gpu-<model>)
  must be declared with `volcano_per_model_resources`, and the other way round.
* Volcano's vGPU device plugin advertises volcano.sh/vgpu-number
  (https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_volcano_vgpu.md).
"""

from __future__ import annotations

from apps.backends.render.objects import GPU_RESOURCE
from apps.backends.render.pools import VGPU_NUMBER

HAMI_NODE_ANNOTATION = "hami.io/node-nvidia-register"
SHOWN = 3


def _names(nodes: list[dict]) -> str:
    names = sorted(n["metadata"]["name"] for n in nodes)
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _capacity(node: dict) -> dict:
    return (node.get("status") or {}).get("capacity") or {}


def setup_notes(nodes: list[dict], settings: dict) -> list[str]:
    queueing = settings.get("queueing", "kueue")
    notes = []
    hami = [n for n in nodes if HAMI_NODE_ANNOTATION in ((n.get("metadata") or {}).get("annotations") or {})]
    labels = settings.get("hami_node_labels") or {}
    if queueing == "kueue" and hami and not labels:
        notes.append(
            f"HAMi runs on {_names(hami)} but hami_node_labels is not set: HAMi workloads are refused until it names "
            "the labels HAMi's device plugin runs on (its chart's default is gpu=on)"
        )
    elif queueing == "kueue" and hami and isinstance(labels, dict):
        matching = [n for n in hami if all(n["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())]
        if not matching:
            shown = ", ".join(f"{k}={v}" for k, v in labels.items())
            notes.append(f"no node HAMi runs on ({_names(hami)}) carries hami_node_labels {shown}")
    if queueing != "volcano":
        return notes
    renamed = [n for n in nodes if any(r.startswith(GPU_RESOURCE + "-") for r in _capacity(n))]
    if renamed and not settings.get("volcano_per_model_resources"):
        notes.append(
            f"{_names(renamed)} advertise per-model GPU resources (nvidia.com/gpu-<model>): set "
            "volcano_per_model_resources, or the console's pods, which request nvidia.com/gpu, will not fit them"
        )
    if settings.get("volcano_per_model_resources") and not renamed:
        notes.append(
            "volcano_per_model_resources is set but no node advertises nvidia.com/gpu-<model>: the console's pods "
            "would stay Insufficient"
        )
    if settings.get("volcano_vgpu") and not any(VGPU_NUMBER in _capacity(n) for n in nodes):
        notes.append(f"volcano_vgpu is set but no node advertises {VGPU_NUMBER}: HAMi workloads would never schedule")
    return notes
