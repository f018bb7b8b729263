"""The GPU models the console knows out of the box, with the strings each appears under.

`product_labels` are values of the GPU Feature Discovery label `nvidia.com/gpu.product` (spaces
become dashes); `dcgm_names` are dcgm-exporter's `modelName`. MIG profiles are NVIDIA's for that
part: (profile, compute slices of 7, memory GB).

Pure data, here below fleet because the backends read it (a node's GPU model from its labels, the
simulator's hardware); fleet seeds its GpuModel table from it (migration fleet 0002).
"""

from __future__ import annotations

_A100_H100_MIG = [
    ("1g.10gb", 1, 10),
    ("1g.20gb", 1, 20),
    ("2g.20gb", 2, 20),
    ("3g.40gb", 3, 40),
    ("4g.40gb", 4, 40),
    ("7g.80gb", 7, 80),
]
_H200_MIG = [
    ("1g.18gb", 1, 18),
    ("1g.35gb", 1, 35),
    ("2g.35gb", 2, 35),
    ("3g.71gb", 3, 71),
    ("4g.71gb", 4, 71),
    ("7g.141gb", 7, 141),
]

CATALOG = [
    {
        "name": "A100-SXM4-80GB",
        "code": "a100",
        "memory_mib": 81920,
        "vendor": "NVIDIA",
        "product_labels": ["NVIDIA-A100-SXM4-80GB"],
        "dcgm_names": ["NVIDIA A100-SXM4-80GB"],
        "mig_profiles": _A100_H100_MIG,
        "tdp_watts": 400,
        "nvlink": True,
    },
    {
        "name": "H100-80GB-HBM3",
        "code": "h100",
        "memory_mib": 81559,
        "vendor": "NVIDIA",
        "product_labels": ["NVIDIA-H100-80GB-HBM3"],
        "dcgm_names": ["NVIDIA H100 80GB HBM3"],
        "mig_profiles": _A100_H100_MIG,
        "tdp_watts": 700,
        "nvlink": True,
    },
    {
        "name": "H200-141GB",
        "code": "h200",
        "memory_mib": 143771,
        "vendor": "NVIDIA",
        "product_labels": ["NVIDIA-H200", "NVIDIA-H200-141GB-HBM3"],
        "dcgm_names": ["NVIDIA H200"],
        "mig_profiles": _H200_MIG,
        "tdp_watts": 700,
        "nvlink": True,
    },
    {
        "name": "L20-48GB",
        "code": "l20",
        "memory_mib": 46068,
        "vendor": "NVIDIA",
        "product_labels": ["NVIDIA-L20"],
        "dcgm_names": ["NVIDIA L20"],
        "mig_profiles": [],
        "tdp_watts": 275,
        "nvlink": False,
    },
    {
        "name": "L40S-48GB",
        "code": "l40s",
        "memory_mib": 46068,
        "vendor": "NVIDIA",
        "product_labels": ["NVIDIA-L40S"],
        "dcgm_names": ["NVIDIA L40S"],
        "mig_profiles": [],
        "tdp_watts": 350,
        "nvlink": False,
    },
    {
        "name": "RTX-4090-24GB",
        "code": "rtx4090",
        "memory_mib": 24564,
        "vendor": "NVIDIA",
        "product_labels": ["NVIDIA-GeForce-RTX-4090"],
        "dcgm_names": ["NVIDIA GeForce RTX 4090"],
        "mig_profiles": [],
        "tdp_watts": 450,
        "nvlink": False,
    },
]


def catalog_by_code() -> dict[str, dict]:
    return {entry["code"]: entry for entry in CATALOG}
