"""A fake Kubernetes API server over real HTTP for the official client (see server.py for its scope), with a
semantic model of the control plane behind it (cluster.py: Kueue, Volcano, kube-scheduler, HAMi, LWS, KEDA)."""

from tests.backends.k8s_fake.kueue import KueueConfig
from tests.backends.k8s_fake.server import FakeKubernetes, Request

__all__ = ["FakeKubernetes", "KueueConfig", "Request"]
