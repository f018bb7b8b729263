"""A workload's log from its pods, through the API server's pod log endpoint.

`GET /api/v1/namespaces/{namespace}/pods/{name}/log` with `container`, `tailLines` and `follow=true` (the Pod API
reference, "read log of the specified Pod":
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#read-log-read-log-of-the-specified-pod).
The answer is the container's output as text; with `follow` the API server keeps it open and sends lines as the
container writes them, and ends it when the container stops. Refusals are Status objects: 404 for a pod that does
not exist, 400 for a pod of several containers asked without `container` ("a container name must be specified for
pod ..., choose one of: [...]") and for a container that has not started ("container "c" in pod "p" is waiting to
start: ContainerCreating", the kubelet's words relayed). A pod not bound to a node yet answers an empty log.

The workload's pods are found by the console's workload label, and each is one worker: the completion index of an
Indexed Job's pod, the task index of a Volcano Job's; an inference service's replica is its LeaderWorkerSet group's
leader (worker-index 0), or a Deployment's pod in the order they were created. The log read is the first
container's, the one the renderer names (`trainer`, `engine`), so a sidecar injected beside it is never mixed in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from apps.backends.base import BackendError, LogsNotReady
from apps.backends.kubernetes import pods as podinfo
from apps.backends.kubernetes.api import KubeApi
from apps.backends.kubernetes.resources import POD
from apps.backends.logstream import Closing, Feed, lines_of, merged
from apps.backends.render.workload.common import WORKLOAD_LABEL, short_name
from apps.backends.types import LogSource

# Labels that number a training job's pods (https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode,
# https://volcano.sh/en/docs/vcjob/: Volcano labels each pod with its task's index).
INDEX_LABELS = ("batch.kubernetes.io/job-completion-index", "volcano.sh/task-index")
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
READ_BYTES = 64 * 1024


def _created(pod: dict) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return meta.get("creationTimestamp") or "", meta.get("name", "")


def _index(pod: dict, *keys: str) -> int | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for key in keys:
        value = labels.get(key, "")
        if value.isdigit():
            return int(value)
    return None


def workers_of(pods: list[dict], kind: str) -> dict[int, dict]:
    """Worker number -> its pod: the newest pod of each index (a failed pod's replacement has the same index)."""
    found: dict[int, dict] = {}
    if kind == "inference":
        leaders = [p for p in pods if _index(p, LWS_WORKER) in (None, 0)]
        grouped = [p for p in leaders if _index(p, LWS_GROUP) is not None]
        if grouped:
            numbered = [(_index(p, LWS_GROUP), p) for p in grouped]
        else:  # a Deployment's pods have no number: their order of creation
            numbered = list(enumerate(sorted(leaders, key=_created)))
    else:
        numbered = [(_index(p, *INDEX_LABELS), p) for p in pods]
        if any(number is None for number, _ in numbered):
            numbered = list(enumerate(sorted(pods, key=_created)))
    for number, pod in sorted(numbered, key=lambda item: (_live(item[1]), *_created(item[1]))):
        found[number] = pod  # of several with one number, a live one wins over a finished one, then the newest
    return found


def _live(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in podinfo.FINISHED


def container_of(pod: dict) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return containers[0].get("name", "")


def not_started(pod: dict) -> str:
    """Why `pod` has no log to read yet ('' when its container has started): not bound to a node, or its
    container waiting (its reason, as the kubelet gives it)."""
    name = (pod.get("metadata") or {}).get("name", "")
    if not (pod.get("spec") or {}).get("nodeName"):
        return f"pod {name} is not scheduled yet"
    container = container_of(pod)
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != container:
            continue
        state = status.get("state") or {}
        if "running" in state or "terminated" in state or "terminated" in (status.get("lastState") or {}):
            return ""
        reason = (state.get("waiting") or {}).get("reason") or "waiting"
        return f'container "{container}" in pod "{name}" is waiting to start: {reason}'
    return f"pod {name} is starting"


class PodLogs:
    """The log of one workload's pods on one cluster."""

    def __init__(self, api: KubeApi, source: LogSource, *, trainjobs: bool = False):
        self.api = api
        self.source = source
        self.trainjobs = trainjobs  # the cluster's training target is trainjob: a job's pods may be a TrainJob's

    def pods(self) -> dict[int, dict]:
        """This run's pods by worker (a requeued workload's earlier runs carry the same workload label)."""
        ns, name = self.source.namespace, short_name(self.source.name)
        listed = self.api.list(
            POD.path(namespace=ns),
            f"list the pods of {ns}/{name}",
            labelSelector=f"{WORKLOAD_LABEL}={self.source.workload_id}",
        )
        mine = [p for p in listed if podinfo.owner_name(p) == name]
        if not mine and self.trainjobs and self.source.kind != "inference":
            # A Kubeflow TrainJob's pods carry its JobSet's label, not the console's (docs/targets.md).
            mine = self.api.list(
                POD.path(namespace=ns),
                f"list the pods of TrainJob {ns}/{name}",
                labelSelector=f"{podinfo.JOBSET_LABEL}={name}",
            )
        return workers_of(mine, self.source.kind)

    def open(self, pod: dict, *, tail: int, follow: bool):
        """The open log response of `pod` (LogsNotReady when the API server says its container has not started)."""
        meta = pod["metadata"]
        query = {"container": container_of(pod), "tailLines": str(tail)}
        if follow:
            query["follow"] = "true"
        path = POD.path(meta["name"], meta.get("namespace") or self.source.namespace) + "/log"
        try:
            return self.api.stream(path, f"read the log of pod {meta['name']}", query=query, follow=follow)
        except BackendError as exc:
            if getattr(exc, "code", 0) == 400 and "waiting to start" in str(exc):
                raise LogsNotReady(str(exc)) from exc
            raise

    def stream(self, *, tail: int, follow: bool, worker: int | None, until: float | None) -> Iterator[str]:
        source = self.source
        pods = self.pods()
        if worker is not None:
            if worker not in pods:
                raise LogsNotReady(
                    f"worker {worker} of {source.name} has no pod on the cluster (not created yet, or deleted)"
                )
            pods = {worker: pods[worker]}
        if not pods:
            raise LogsNotReady(f"{source.name} has no pods on the cluster (not started yet, or deleted since)")
        waiting = {number: why for number, pod in pods.items() if (why := not_started(pod))}
        ready = {number: pod for number, pod in sorted(pods.items()) if number not in waiting}
        if not ready:
            raise LogsNotReady(next(iter(waiting.values())))
        if follow:
            return self._follow(ready, tail, worker, until)
        return self._read(ready, tail, worker)

    def _read(self, pods: dict[int, dict], tail: int, worker: int | None) -> Iterator[str]:
        """Each pod's last lines, pod after pod; the first pod is asked before this returns (its refusal is the
        whole answer's)."""
        numbers = list(pods)
        first = self.open(pods[numbers[0]], tail=tail, follow=False)

        def lines() -> Iterator[str]:
            response = first
            for position, number in enumerate(numbers):
                if position:
                    try:
                        response = self.open(pods[number], tail=tail, follow=False)
                    except LogsNotReady:
                        continue  # stopped being readable since: the others still are
                prefix = self.source.prefix(number, worker)
                try:
                    for line in lines_of(iter(lambda r=response: r.read1(READ_BYTES), b"")):
                        yield prefix + line
                finally:
                    response.close()  # never back to the pool half read (a reader that went away)

        return Closing(lines(), first.close)

    def _follow(self, pods: dict[int, dict], tail: int, worker: int | None, until: float | None) -> Iterator[str]:
        """Every pod's stream, opened before this returns and read on threads; the API server ends each when its
        container stops, and the merge ends when all have (or at `until`)."""
        responses = {}
        try:
            for number, pod in pods.items():
                try:
                    responses[number] = self.open(pod, tail=tail, follow=True)
                except LogsNotReady:
                    if len(pods) == 1:
                        raise
        except BaseException:
            for response in responses.values():
                response.close()
            raise
        if not responses:
            raise LogsNotReady(f"no container of {self.source.name} has started")
        feeds = [_feed(self.source.prefix(number, worker), response) for number, response in responses.items()]
        # Closed unread, the merge never starts (nor its `finally`): the streams opened here are closed all the same.
        return Closing(merged(feeds, until=until), lambda: [feed.stop() for feed in feeds])


def _feed(prefix: str, response) -> Feed:
    """One pod's followed log, read on the merge's thread; stopping it shuts the socket down under that read."""
    stopped = []

    def read() -> Iterator[str]:
        try:
            yield from lines_of(iter(lambda: response.read1(READ_BYTES), b""))
        except Exception:
            if stopped:
                return  # the merge stopped it: an interrupted read is the expected end
            raise

    def stop() -> None:
        stopped.append(True)
        with contextlib.suppress(Exception):
            response.shutdown()  # unblocks a read waiting on the socket in another thread
        with contextlib.suppress(Exception):
            response.close()

    return Feed(prefix, read, stop)
