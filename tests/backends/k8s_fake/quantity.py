"""Kubernetes resource quantities, exactly (as fractions), and their canonical text.

https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/ : a number with an optional
binary (Ki, Mi, Gi, Ti, Pi, Ei) or decimal (n, u, m, k, M, G, T, P, E) suffix, or a decimal exponent (1e3).
"""

from __future__ import annotations

import re
from fractions import Fraction

_SUFFIXES: dict[str, Fraction] = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")


def parse(value: object) -> Fraction:
    """The exact value of a quantity ("500m", "80Gi", 8, "1e3"); ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    number = Fraction(match.group(1))
    if match.group(2):
        return number * Fraction(10) ** int(match.group(2)[1:])
    return number * _SUFFIXES[match.group(3) or ""]


def text(resource: str, amount: Fraction) -> str:
    """A quantity as Kubernetes prints it: cpu in cores or millicores, memory in the largest exact binary unit,
    counts as integers (the form Kueue's and the scheduler's messages use)."""
    if resource == "cpu" or amount.denominator != 1:
        milli = amount * 1000
        if amount.denominator == 1:
            return str(amount.numerator)
        return f"{-(-milli.numerator // milli.denominator)}m"
    whole = amount.numerator
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = int(_SUFFIXES[suffix])
            if whole and whole % unit == 0:
                return f"{whole // unit}{suffix}"
    return str(whole)
