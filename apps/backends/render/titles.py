"""What the pages call a renderer's output, in the active language: a page asks by the backend's `renderer`
instead of branching on the cluster's kind. English marked for makemessages, as the caveats are."""

from __future__ import annotations

from apps.backends.render.caveats import _in_active_language, gettext_noop

WORKLOAD = {"kubernetes": gettext_noop("Manifests"), "slurm": gettext_noop("sbatch script")}
QUOTA = {"kubernetes": gettext_noop("Kubernetes objects (%(queueing)s)"), "slurm": gettext_noop("sacctmgr commands")}


def workload_title(renderer: str) -> str:
    """The heading of a workload's rendering ("Manifests", "sbatch script")."""
    return _in_active_language([WORKLOAD[renderer]])[0]


def quota_title(renderer: str, queueing: str) -> str:
    """What the desired quota state is rendered as ("sacctmgr commands", "Kubernetes objects (kueue)")."""
    return _in_active_language([QUOTA[renderer]])[0] % {"queueing": queueing}
