"""The kubelet's image pulls (https://kubernetes.io/docs/concepts/containers/images/), modelled when a fake is
given pull times (`FakeKubernetes(image_pull_s=...)`; without them every image is there at once, as before).

- imagePullPolicy defaulting (section "Image pull policy"): Always for an image without a tag or tagged `:latest`
  and without a digest, else IfNotPresent.
- IfNotPresent pulls only an image the node does not hold (`node.status.images`); Always asks the registry, which
  costs no download when the node holds the image; Never leaves a missing image waiting with ErrImageNeverPull.
- Pulls are serial per node: the kubelet's default `serializeImagePulls: true`
  (https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/). A pull starts when the node's previous
  one ends; a pod needing an image that is already being pulled waits for that pull.
- While its images are pulled the pod is Pending, its containers waiting with reason ContainerCreating
  (PodInitializing when it has init containers), and the kubelet records the Normal events Pulling and Pulled.
  A pulled image joins the node's `status.images`.

Not modelled: image garbage collection, pull secrets and registry errors, maxParallelImagePulls.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta


def pull_policy(container: dict) -> str:
    if container.get("imagePullPolicy"):
        return container["imagePullPolicy"]
    image = container.get("image", "")
    name = image.split("@", 1)[0]
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""
    return "Always" if "@" not in image and tag in ("", "latest") else "IfNotPresent"


def node_images(node: dict) -> set[str]:
    return {name for entry in (node.get("status") or {}).get("images") or [] for name in entry.get("names") or []}


class ImagePuller:
    """The pulls of every node's kubelet; `seconds(image)` is how long one pull of `image` takes."""

    def __init__(self, seconds: Callable[[str], float]):
        self.seconds = seconds
        self.done_at: dict[tuple[str, str], datetime] = {}  # (node, image) -> when its pull ends
        self.free_at: dict[str, datetime] = {}  # node -> when its puller is free

    def waiting(self, plane, pod: dict, now: datetime) -> str:
        """Why `pod`'s containers cannot start yet ('' when every image is on its node): its pulls are started (or
        finished) here, in container order."""
        node_name = pod["spec"]["nodeName"]
        node = next((n for n in plane.store.all("", "nodes") if n["metadata"]["name"] == node_name), None)
        if node is None:
            return ""
        have = node_images(node)
        containers = [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]
        reason = ""
        for container in containers:
            image = container.get("image", "")
            if not image or image in have:
                continue
            if pull_policy(container) == "Never":
                reason = reason or "ErrImageNeverPull"
                continue
            key = (node_name, image)
            if key not in self.done_at:
                start = max(now, self.free_at.get(node_name, now))
                self.done_at[key] = self.free_at[node_name] = start + timedelta(seconds=self.seconds(image))
                plane.event(now, pod, "Pulling", f'Pulling image "{image}"', kind="Normal")
            if self.done_at[key] <= now:
                took = self.seconds(image)
                node.setdefault("status", {}).setdefault("images", []).append({"names": [image], "sizeBytes": 0})
                plane.save(plane.nodes, node)
                have.add(image)
                plane.event(now, pod, "Pulled", f'Successfully pulled image "{image}" in {took:g}s', kind="Normal")
            else:
                reason = reason or ("PodInitializing" if pod["spec"].get("initContainers") else "ContainerCreating")
        return reason
