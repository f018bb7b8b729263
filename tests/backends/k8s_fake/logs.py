"""The pod log subresource: `GET /api/v1/namespaces/{namespace}/pods/{name}/log`, written from the documentation.

The Pod API reference, "read log of the specified Pod"
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#read-log-read-log-of-the-specified-pod):
the answer is the container's output as text (`Content-Type: text/plain`); `container` "defaults to only
container if there is one container in the pod"; `tailLines` is "the number of lines from the end of the logs to
show"; `follow` "follow[s] the log stream of the pod": the answer stays open (chunked) and carries each line as the
container writes it, until the container stops (the kubelet stops following a container that is no longer
running: `kubectl logs -f` returns when the pod's process exits).

Refusals, as the API server words them (its pod registry's LogLocation, and the kubelet's container log checks,
which the API server relays as a 400 BadRequest Status carrying the kubelet's text: kubectl prints them as
`Error from server (BadRequest): container "x" in pod "y" is waiting to start: ContainerCreating`,
https://github.com/kubernetes/kubernetes/issues/55958, https://github.com/kubernetes/kubectl/issues/1612):

- a pod that does not exist: 404 NotFound `pods "<name>" not found`;
- no `container` and several containers: 400 `a container name must be specified for pod <name>, choose one of:
  [<a> <b>]` (with ` or one of the init containers: [<i>]` when it has init containers); a container the pod does
  not have: 400 `container <c> is not valid for pod <name>`;
- a pod not bound to a node yet: 200 with an empty log (the API server has no kubelet to ask);
- a container with no status yet: 400 `container "<c>" in pod "<name>" is not available`; a container waiting:
  400 `container "<c>" in pod "<name>" is waiting to start: <reason>` (`ErrImagePull`: "image can't be pulled",
  `ImagePullBackOff`: "trying and failing to pull image");
- a negative `tailLines`: 422 Invalid (PodLogOptions validation).

What a container writes is kept per pod (by uid) and container while the pod exists; tests make a running
container write lines with `FakeKubernetes.write_log`, as the program in it would print them. Not emulated:
`previous`, `sinceSeconds`, `sinceTime`, `timestamps`, `limitBytes` and `insecureSkipTLSVerifyBackend`; a request
with one is refused with a 400 saying so, so that a client relying on one cannot pass here unnoticed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tests.backends.k8s_fake.store import ApiError

LOG_PATH = re.compile(r"/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/log/?")
NOT_EMULATED = ("previous", "sinceSeconds", "sinceTime", "timestamps", "limitBytes", "insecureSkipTLSVerifyBackend")
WAITING_WORDS = {
    "ErrImagePull": "image can't be pulled",
    "ImagePullBackOff": "trying and failing to pull image",
}
POLL_S = 0.05


def _names(containers: list[dict]) -> str:
    return " ".join(c.get("name", "") for c in containers)


def container_for(pod: dict, asked: str) -> str:
    """The container a log request reads, or the API server's 400 (LogLocation)."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if not asked:
        if len(containers) == 1:
            return containers[0]["name"]
        if not containers:
            raise ApiError(400, "BadRequest", f"a container name must be specified for pod {name}")
        message = f"a container name must be specified for pod {name}, choose one of: [{_names(containers)}]"
        if spec.get("initContainers"):
            message += f" or one of the init containers: [{_names(spec['initContainers'])}]"
        raise ApiError(400, "BadRequest", message)
    every = [*containers, *(spec.get("initContainers") or []), *(spec.get("ephemeralContainers") or [])]
    if asked not in {c.get("name") for c in every}:
        raise ApiError(400, "BadRequest", f"container {asked} is not valid for pod {name}")
    return asked


def _status(pod: dict, container: str) -> dict | None:
    status = pod.get("status") or {}
    for entry in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]:
        if entry.get("name") == container:
            return entry
    return None


def check_started(pod: dict, container: str) -> None:
    """The kubelet's refusal for a container with nothing to read yet (validateContainerLogStatus)."""
    name = pod["metadata"]["name"]
    entry = _status(pod, container)
    if entry is None:
        raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is not available')
    state = entry.get("state") or {}
    if "running" in state or "terminated" in state or "terminated" in (entry.get("lastState") or {}):
        return
    reason = (state.get("waiting") or {}).get("reason", "")
    if reason:
        words = WAITING_WORDS.get(reason, reason)
        raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: {words}')
    raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start - no logs yet')


def is_running(pod: dict, container: str) -> bool:
    entry = _status(pod, container) or {}
    return "running" in (entry.get("state") or {}) and (pod.get("status") or {}).get("phase") == "Running"


def tail_lines(query: dict[str, str], name: str) -> int | None:
    raw = query.get("tailLines")
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "BadRequest", f'tailLines: Invalid value: "{raw}": not an integer') from None
    if value < 0:
        raise ApiError(
            422,
            "Invalid",
            f'PodLogOptions "{name}" is invalid: tailLines: Invalid value: {value}: must be greater than or equal to 0',
        )
    return value


def unsupported(query: dict[str, str]) -> None:
    for key in NOT_EMULATED:
        if key in query:
            raise ApiError(400, "BadRequest", f"the fake API server does not emulate the log parameter {key}")


def encode(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode()


def follow(fake, uid: str, key: tuple[str, str, str], sent: int) -> Iterator[bytes]:
    """New lines of a running container as it writes them, until it stops, its pod goes or the server stops.
    The control plane keeps running meanwhile (`tick`), as a real cluster's does while a client follows."""
    ns, name, container = key
    while True:
        with fake.lock:
            fake.tick()
            lines = fake.logs.get((uid, container), [])
            new, sent = lines[sent:], len(lines)
            pod = fake.store.bucket(fake.resource("", "v1", "pods")).get((ns, name))
            over = (
                pod is None
                or pod["metadata"].get("uid") != uid
                or not is_running(pod, container)
                or fake._stopping.is_set()
            )
            if not new and not over:
                fake.log_written.wait(timeout=POLL_S)
                continue
        if new:
            yield encode(new)
        elif over:
            return
