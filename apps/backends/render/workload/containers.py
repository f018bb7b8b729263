"""How a Slurm job runs the spec's container image: the `srun` options of pyxis, or an explicit "none".

pyxis (https://github.com/NVIDIA/pyxis/wiki/Usage) is a SPANK plugin that adds options to srun:
`--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH` (an enroot URI, imported with enroot) and
`--container-mounts=SRC:DST[:FLAGS][,SRC:DST...]` (flags joined by '+', e.g. "ro"). Without
`--container-workdir` a pyxis task starts in the image's WORKDIR (pyxis issue #119), as a Kubernetes container
without workingDir does, so none is set. The options exist only where the plugin is loaded: on a cluster without
it, srun refuses them ("srun: unrecognized option '--container-image=...'") when the job runs; sbatch does not
read the srun lines of a script, so `sbatch --test-only` cannot tell.

A cluster's `containers` setting decides: "pyxis" renders the image (and the volumes mapped in `volume_dirs`),
"none" runs on the nodes' own software and says in the script that the image is not used, and no setting
refuses a spec with an image, naming the field and the setting, rather than silently dropping the image.
"""

from __future__ import annotations

import re

from apps.backends.render.errors import RenderError
from apps.backends.render.names import path_error
from apps.backends.render.spec import InferenceServiceSpec, Spec, TrainingJobSpec
from apps.backends.render.workload.context import SlurmContext

CONTAINERS = ("pyxis", "none")
# enroot's own URI grammar (src/docker.sh, docker::import): docker://[USER@][REGISTRY#]IMAGE[:TAG] with IMAGE
# [a-z0-9/._-]+ and TAG [A-Za-z0-9._:-]+; it has no digest form.
_ENROOT_IMAGE = re.compile(r"[a-z0-9][a-z0-9/._-]*")
_ENROOT_TAG = re.compile(r"[A-Za-z0-9._:-]+")
_REGISTRY = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]+)?")


def not_configured(image: str) -> RenderError:
    return RenderError(
        "image",
        f"{image!r} cannot run on this Slurm cluster: its connection settings name no container runtime. "
        'Set containers: "pyxis" to run the image with pyxis/enroot (srun --container-image), or containers: '
        '"none" if jobs run on the nodes\' own software without it',
    )


def enroot_uri(image: str) -> str:
    """A Docker image reference as pyxis/enroot names it: nvcr.io/nvidia/pytorch:24.08-py3 ->
    nvcr.io#nvidia/pytorch:24.08-py3 (enroot reads a registry only before '#'; Docker Hub needs none)."""
    if "@" in image:
        raise RenderError(
            "image", f"{image!r} is pinned by digest; pyxis/enroot image URIs take a tag ([REGISTRY#]IMAGE[:TAG])"
        )
    first, slash, rest = image.partition("/")
    registry, path = (first, rest) if slash and ("." in first or ":" in first or first == "localhost") else ("", image)
    name, colon, tag = path.partition(":")
    if (
        (registry and not _REGISTRY.fullmatch(registry))
        or not _ENROOT_IMAGE.fullmatch(name)
        or (colon and not _ENROOT_TAG.fullmatch(tag))
    ):
        raise RenderError("image", f"{image!r} is not an image reference enroot can import")
    return f"{registry}#{path}" if registry else path


def _mount(field: str, claim: str, mount_path: str, read_only: bool, ctx: SlurmContext) -> str:
    host = ctx.volume_dirs.get(claim)
    if not host:
        raise RenderError(
            field,
            f"claim {claim!r} has no directory on this Slurm cluster: add it to the connection's volume_dirs "
            '(claim -> directory on the shared file system) for containers: "pyxis" to mount it',
        )
    for what, path in (("volume_dirs", host), (f"{field}: mount_path", mount_path)):
        problem = path_error(path)
        if problem or "," in path or ":" in path:  # pyxis separates mounts with ',' and fields with ':'
            raise RenderError(what, problem or f"{path!r}: ',' and ':' cannot appear in a pyxis mount")
    return f"{host}:{mount_path}" + (":ro" if read_only else "")


def _mounts(spec: Spec, ctx: SlurmContext) -> list[str]:
    if isinstance(spec, TrainingJobSpec):
        return [_mount("volumes", v.claim, v.mount_path, v.read_only, ctx) for v in spec.volumes]
    if isinstance(spec, InferenceServiceSpec) and spec.weights:
        return [_mount("weights", spec.weights.claim, spec.weights.mount_path, True, ctx)]
    return []


def container_options(spec: Spec, ctx: SlurmContext) -> tuple[list[str], list[str]]:
    """srun options that run a step in the spec's image (each one argument, to be shell-quoted), and caveats."""
    if not spec.image:
        return [], []
    if ctx.containers == "none":
        caveats = [f"containers 'none': the job runs on the nodes' own software; the image {spec.image} is not used"]
        if isinstance(spec, TrainingJobSpec) and spec.volumes:  # inference says so of its weights itself
            caveats.append("containers 'none': the volumes are not mounted; the job sees the nodes' file systems")
        return [], caveats
    if ctx.containers == "pyxis":
        options = [f"--container-image={enroot_uri(spec.image)}"]
        mounts = _mounts(spec, ctx)
        if mounts:
            options.append(f"--container-mounts={','.join(mounts)}")
        return options, ["containers 'pyxis': every srun step runs in the image (the pyxis SPANK plugin with enroot)"]
    if ctx.containers:
        raise RenderError("containers", f"{ctx.containers!r} is not one of {', '.join(CONTAINERS)}")
    raise not_configured(spec.image)
