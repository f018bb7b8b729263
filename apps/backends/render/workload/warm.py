"""Warm weights for an inference service (`warm: {claim}`): a Job fills a cache volume before the replicas load it.

Without it every new replica downloads the model from the Hugging Face Hub itself, minutes for a 70B model, on
every scale-up. With it:

* a batch/v1 Job `<name>-warm` runs the engine's own image once, downloads the model with `huggingface_hub`'s
  `snapshot_download` into the claim (a Hugging Face cache: HF_HOME on the claim), and writes a marker file for
  the model when the download is complete. The marker is per model, so a claim reused for another model is not
  taken as ready. The Job needs no GPU and carries no queue label, so neither Kueue (which manages only Jobs
  naming a LocalQueue unless `manageJobsWithoutQueueName` is set: https://kueue.sigs.k8s.io/docs/tasks/run/jobs/)
  nor the GPU quota holds it. `backoffLimit` retries a broken download
  (https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-backoff-failure-policy).
* every engine pod mounts the claim read-only at WARM_MOUNT with HF_HOME there and HF_HUB_OFFLINE=1, and an init
  container waits for the marker before the engine starts
  (https://kubernetes.io/docs/concepts/workloads/pods/init-containers/): the first replicas start as soon as the
  download is done, later ones (a scale-up, a rescheduled pod) load from the volume at once.

The claim must exist in the workload's namespace and be mountable by the Job and by every engine pod at the same
time: ReadWriteMany, or ReadOnlyMany for the engines with the Job run first (the rendering's caveat says so).
"""

from __future__ import annotations

from apps.backends.render.spec import InferenceServiceSpec
from apps.backends.render.workload.common import (
    ROLE_LABEL,
    console_labels,
    env_list,
    kube_literal,
    meta,
    selector,
)
from apps.backends.render.workload.context import RenderContext

WARM_ROLE = "warm"
WARM_MOUNT = "/model-cache"  # the claim in the Job and in the engine pods; HF_HOME
WARM_VOLUME = "warm-weights"
MARKER_DIR = ".gpu-console"
WARM_BACKOFF = 4
WARM_CPU, WARM_MEMORY = "2", "8Gi"
WAIT_CPU, WAIT_MEMORY = "50m", "64Mi"
WAIT_PERIOD_S = 10
MODEL_ENV = "GPU_CONSOLE_WARM_MODEL"
MARKER_ENV = "GPU_CONSOLE_WARM_MARKER"

# The download, in the engine's image (both ship huggingface_hub): values come from the environment, never from
# the program text, so no model id needs quoting.
DOWNLOAD = (
    "import os, pathlib\n"
    "from huggingface_hub import snapshot_download\n"
    f"snapshot_download(os.environ['{MODEL_ENV}'])\n"
    f"marker = pathlib.Path(os.environ['{MARKER_ENV}'])\n"
    "marker.parent.mkdir(parents=True, exist_ok=True)\n"
    "marker.touch()\n"
)
WAIT = (
    f'until [ -f "${MARKER_ENV}" ]; do\n'
    f'  echo "waiting for the weights of ${MODEL_ENV}: the warm Job writes ${MARKER_ENV} when they are complete"\n'
    f"  sleep {WAIT_PERIOD_S}\n"
    "done\n"
)


def job_name(name: str) -> str:
    return f"{name}-warm"


def marker(spec: InferenceServiceSpec) -> str:
    """The file the Job writes once the model is in the cache: named as the Hub cache names the model's folder."""
    return f"{WARM_MOUNT}/{MARKER_DIR}/models--{spec.model.replace('/', '--')}.complete"


def engine_env() -> dict[str, str]:
    """What an engine reading the warmed cache needs: the cache, and no download of its own."""
    return {"HF_HOME": WARM_MOUNT, "HF_HUB_OFFLINE": "1"}


def volume(spec: InferenceServiceSpec, *, read_only: bool) -> dict:
    assert spec.warm is not None
    claim: dict = {"claimName": spec.warm.claim}
    if read_only:
        claim["readOnly"] = True
    return {"name": WARM_VOLUME, "persistentVolumeClaim": claim}


def mount(*, read_only: bool) -> dict:
    out: dict = {"name": WARM_VOLUME, "mountPath": WARM_MOUNT}
    if read_only:
        out["readOnly"] = True
    return out


def _marker_env(spec: InferenceServiceSpec) -> list[dict]:
    return [{"name": MODEL_ENV, "value": kube_literal(spec.model)}, {"name": MARKER_ENV, "value": marker(spec)}]


def wait_container(spec: InferenceServiceSpec) -> dict:
    """The engine pod's init container: it ends once the Job has marked the model complete."""
    return {
        "name": "wait-for-weights",
        "image": spec.image,
        "command": ["sh", "-c", kube_literal(WAIT)],
        "env": _marker_env(spec),
        "resources": {"requests": {"cpu": WAIT_CPU, "memory": WAIT_MEMORY}, "limits": {"memory": WAIT_MEMORY}},
        "volumeMounts": [mount(read_only=True)],
    }


def warm_job(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> dict:
    """The Job that downloads the model into the claim (the spec's env and Secret references too: HF_TOKEN for a
    gated model, a proxy or HF_ENDPOINT for a mirror)."""
    env = {**spec.env, "HF_HOME": WARM_MOUNT}
    container = {
        "name": "download",
        "image": spec.image,
        "command": ["python3", "-c", kube_literal(DOWNLOAD)],
        "env": _marker_env(spec) + env_list(env, spec.secret_env),
        "resources": {"requests": {"cpu": WARM_CPU, "memory": WARM_MEMORY}, "limits": {"memory": WARM_MEMORY}},
        "volumeMounts": [mount(read_only=False)],
    }
    labels = {**console_labels(spec, ctx), **selector(ctx), ROLE_LABEL: WARM_ROLE}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(job_name(name), ctx, console_labels(spec, ctx)),
        "spec": {
            "backoffLimit": WARM_BACKOFF,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "priorityClassName": ctx.priority_class,
                    "containers": [container],
                    "volumes": [volume(spec, read_only=False)],
                },
            },
        },
    }


def caveats(spec: InferenceServiceSpec, name: str) -> list[str]:
    if spec.warm is None:
        return []
    return [
        f"Warm weights: the Job {job_name(name)} downloads {spec.model} into the claim {spec.warm.claim}, which must "
        "exist in the namespace and be mountable by the Job and every replica at once (ReadWriteMany); the replicas "
        f"wait in their init container until {marker(spec)} exists. A gated model needs HF_TOKEN in secret_env; "
        "the Job carries no queue label, so the cluster's Kueue must not manage Jobs without one "
        "(manageJobsWithoutQueueName)."
    ]
