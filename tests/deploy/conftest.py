"""The Kubernetes manifests as `kubectl kustomize` renders them, once per test session (tests/deploy)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("dev", "production")


def render(overlay: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.fail(
            "kubectl is not on PATH: these tests render deploy/kubernetes with `kubectl kustomize` (client only, "
            "offline). Install it (Debian: apt-get install kubectl from the Kubernetes apt repository, or the "
            "kubernetes-client package) and run again."
        )
    done = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl kustomize overlays/{overlay} failed:\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    """overlay name -> its objects."""
    return {overlay: render(overlay) for overlay in OVERLAYS}


@pytest.fixture(scope="session")
def cached_schemas():
    """kubernetes-validate reads its (large) JSON schemas from disk on every call; read each once this session."""
    import kubernetes_validate.utils as kv_utils

    original = kv_utils.schema_contents
    kv_utils.schema_contents = functools.lru_cache(maxsize=None)(original)
    yield
    kv_utils.schema_contents = original
