"""How long a simulated inference replica takes from being scheduled to serving. Pure Python.

A replica's cold start is, in order:

1. the image pull: the engine image's size at REGISTRY_GBPS, unless the node's pool pre-pulls the image (its
   pre-pull finished by then; a pre-pull still going leaves the rest of it);
2. the weights: without `warm`, the replica downloads the model from the Hub (its size at HUB_GBPS) and loads it;
   with `warm`, the service's Job downloads it once from the service's submission on, and every replica loads it
   from the cache volume (CACHE_GBPS) once that download is done;
3. the engine's own start: ENGINE_START_S (CUDA graphs, warm-up), the same for every replica.

The model's size comes from its name: "70B" is 70 billion parameters at 2 bytes (bf16), 1 byte for an FP8 or INT8
model, half a byte for an AWQ / GPTQ / INT4 one; "8x7B" is 56 billion; a name without a size counts as 8B. The
figures are round numbers of their kind (a container registry over a data-centre link, the Hugging Face Hub, a
network cache volume); the simulator does not remember what a node pulled for earlier work, only pre-pulls.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

REGISTRY_GBPS = 0.05  # GB/s an image is pulled at
HUB_GBPS = 0.4  # GB/s the weights download at from the Hugging Face Hub
CACHE_GBPS = 1.5  # GB/s a replica reads weights at from a cache volume (and from its own download)
ENGINE_START_S = 45
# Compressed engine image sizes, by repository (what a pull downloads).
IMAGE_GB = {"vllm/vllm-openai": 9.0, "lmsysorg/sglang": 11.0}
DEFAULT_IMAGE_GB = 8.0
DEFAULT_PARAMS_B = 8.0
_MOE = re.compile(r"(\d+)x(\d+(?:\.\d+)?)b(?![a-z])", re.IGNORECASE)
_SIZE = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z])", re.IGNORECASE)


def image_gb(image: str) -> float:
    name = image.split("@", 1)[0]
    repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return IMAGE_GB.get(repository, DEFAULT_IMAGE_GB)


def pull_s(image: str) -> int:
    return math.ceil(image_gb(image) / REGISTRY_GBPS)


def weights_gb(model: str) -> float:
    """The model's weights in GB, from the size in its name."""
    name = model.rsplit("/", 1)[-1]
    moe = _MOE.search(name)
    size = _SIZE.search(name)
    params = float(moe.group(1)) * float(moe.group(2)) if moe else float(size.group(1)) if size else DEFAULT_PARAMS_B
    lowered = name.lower()
    if any(mark in lowered for mark in ("awq", "gptq", "int4", "4bit")):
        per_param = 0.5
    elif any(mark in lowered for mark in ("fp8", "int8", "8bit")):
        per_param = 1.0
    else:
        per_param = 2.0
    return params * per_param


def download_s(model: str) -> int:
    return math.ceil(weights_gb(model) / HUB_GBPS)


def load_s(model: str) -> int:
    return math.ceil(weights_gb(model) / CACHE_GBPS)


@dataclass(frozen=True)
class ColdStart:
    """One replica's start, in seconds from its scheduling: each part, and when it serves."""

    pull_s: int
    weights_s: int  # waiting for the warm Job, or downloading, then loading
    start_s: int

    @property
    def total_s(self) -> int:
        return self.pull_s + self.weights_s + self.start_s


def cold_start(
    *,
    image: str,
    model: str,
    scheduled: datetime,
    prepulled_at: datetime | None,
    warm_since: datetime | None,
) -> ColdStart:
    """The start of a replica scheduled at `scheduled`. `prepulled_at`: when the node's pool had the image pulled
    (None: it does not pre-pull it); `warm_since`: when the service's warm Job started (None: no warm weights)."""
    pulled = pull_s(image) if prepulled_at is None else _seconds_until(prepulled_at, scheduled)
    if warm_since is None:
        weights = download_s(model) + load_s(model)
    else:
        cached = warm_since + timedelta(seconds=download_s(model))
        waiting = _seconds_until(cached, scheduled + timedelta(seconds=pulled))
        weights = waiting + load_s(model)
    return ColdStart(pulled, weights, ENGINE_START_S)


def _seconds_until(when: datetime, now: datetime) -> int:
    return max(0, math.ceil((when - now).total_seconds()))
