"""Deterministic numbers from a seed: every random-looking value of the simulator comes from here.

Python's `hash()` is salted per process, so it cannot be used: web, worker and beat must derive the
same UUIDs, durations and jitter. BLAKE2b over the joined parts is fast (about 1 µs) and stable.
"""

from __future__ import annotations

import random
from hashlib import blake2b

_SEPARATOR = "\x1f"


def stable_hash(*parts: object, bits: int = 64) -> int:
    """An integer of `bits` bits that depends only on `parts` (their str), the same in every process."""
    digest = blake2b(_SEPARATOR.join(map(str, parts)).encode(), digest_size=bits // 8).digest()
    return int.from_bytes(digest, "big")


def stable_hex(*parts: object, chars: int = 32) -> str:
    return blake2b(_SEPARATOR.join(map(str, parts)).encode(), digest_size=(chars + 1) // 2).hexdigest()[:chars]


def rng(*parts: object) -> random.Random:
    """A private random generator for one decision (one workload, one node), independent of call order."""
    return random.Random(stable_hash(*parts))  # noqa: S311 - reproducible simulation, not secrets


def unit(value: int, shift: int) -> float:
    """The byte of `value` at `shift` as a float in [0, 1): cheap jitter, several per hash."""
    return ((value >> shift) & 0xFF) / 256.0
