"""A fake Kubernetes API server over real HTTP for the official client (see server.py for its scope)."""

from tests.backends.k8s_fake.server import FakeKubernetes, Request

__all__ = ["FakeKubernetes", "Request"]
