"""The exporter-text parser against the reference sample's line shapes."""
# ruff: noqa: E501 - exporter lines are long by nature; kept verbatim

from apps.fleet.exporter_text import parse, per_gpu

SAMPLE = """# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-3f1c",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-07",DCGM_FI_DRIVER_VERSION="570.124.06",container="trainer",namespace="ml-train",pod="llm-pretrain-worker-3"} 71
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-8a7d",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",hostname="gpu-node-07"} 34
DCGM_FI_DEV_MEMORY_TEMP{gpu="1",UUID="GPU-8a7d"} 9223372036854775794
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-3f1c",modelName="NVIDIA H100 80GB HBM3"} 612.418000
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-8a7d",modelName="weird \\"quoted\\" name"} 79
broken line without value
"""


def test_parse_only_wanted_and_drops_sentinels():
    rows = list(parse(SAMPLE, {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP"}))
    assert [(n, labels["gpu"], v) for n, labels, v in rows] == [
        ("DCGM_FI_DEV_GPU_TEMP", "0", 71.0),
        ("DCGM_FI_DEV_GPU_TEMP", "1", 34.0),
    ]
    assert rows[0][1]["pod"] == "llm-pretrain-worker-3" and rows[1][1]["hostname"] == "gpu-node-07"


def test_parse_all_and_escaped_labels():
    rows = {(n, labels.get("gpu")): (labels, v) for n, labels, v in parse(SAMPLE)}
    assert rows[("DCGM_FI_DEV_POWER_USAGE", "0")][1] == 612.418
    assert rows[("DCGM_FI_DEV_XID_ERRORS", "1")][0]["modelName"] == 'weird "quoted" name'
    assert ("DCGM_FI_DEV_MEMORY_TEMP", "1") not in rows


def test_per_gpu():
    assert per_gpu(SAMPLE, ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"]) == {
        "0": {"DCGM_FI_DEV_GPU_TEMP": 71.0},
        "1": {"DCGM_FI_DEV_GPU_TEMP": 34.0, "DCGM_FI_DEV_XID_ERRORS": 79.0},
    }


def test_escapes_are_undone_in_one_pass():
    # `\\n` is a backslash and an n, not a newline; `\n` is a newline; an escape the format does not define stays.
    line = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a\\\\nb",pod="x\\ny\\t"} 40\n'
    [(_, labels, _)] = parse(line)
    assert labels["UUID"] == "GPU-a\\nb" and labels["pod"] == "x\ny\\t"
