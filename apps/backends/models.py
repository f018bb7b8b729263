"""The models of the `backends` app: each backend keeps its own in its package, and they are imported here
so Django registers them under this app (app label `backends`, tables backends_*, one migration history).

Each backend is independent of the others: the simulator's models are in apps/backends/simulator/models.py,
the Kubernetes backend's in apps/backends/kubernetes/models.py. A backend imports its own module, never this one.
"""

from apps.backends.kubernetes.models import KubeCancellation
from apps.backends.simulator.models import (
    ACTIVE_STATES,
    SimAllocation,
    SimCluster,
    SimEvent,
    SimFault,
    SimNode,
    SimWorkload,
)

__all__ = [
    "ACTIVE_STATES",
    "KubeCancellation",
    "SimAllocation",
    "SimCluster",
    "SimEvent",
    "SimFault",
    "SimNode",
    "SimWorkload",
]
