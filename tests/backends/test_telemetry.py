"""The simulated dcgm-exporter text: exact format, labels, values that follow the load, speed."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.backends.simulator import reports
from apps.backends.simulator.engine import Engine
from apps.backends.simulator.hardware import MODELS
from apps.backends.simulator.telemetry import METRIC_NAMES, METRICS
from apps.backends.types import Sharing
from tests.backends.helpers import make_cluster, samples, scrape_text, spec, value

pytestmark = pytest.mark.django_db

REQUIRED = {
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
}
LINE = re.compile(
    r'^(?P<name>DCGM_FI_[A-Z_]+)\{gpu="(?P<gpu>\d+)",UUID="GPU-[0-9a-f-]{36}",pci_bus_id="00000000:[0-9A-F]{2}:00\.0",'
    r'device="nvidia(?P=gpu)",modelName="(?P<model>[^"]+)",(?P<host>Hostname|hostname)="(?P<node>[^"]+)",'
    r'DCGM_FI_DRIVER_VERSION="570\.124\.06"(?:,container="main",namespace="(?P<ns>[^"]+)",pod="(?P<pod>[^"]+)")?\} '
    r"(?P<value>-?\d+(?:\.\d{6})?)$"
)


@pytest.fixture
def busy():
    """Node gpu-0001 (H100): GPUs 0-3 run one worker of team-a's `train`; GPUs 4-7 idle."""
    cluster, backend = make_cluster("tele", nodes=1, seed=11)
    backend.submit(spec("train", gpus_per_worker=4, duration_s=3600))
    return cluster, backend


def test_every_metric_and_line_has_the_exporters_shape(busy):
    cluster, _ = busy
    text = scrape_text(cluster, "gpu-0001")
    assert set(METRIC_NAMES) >= REQUIRED
    lines = text.splitlines()
    for name, kind, help_, is_float in METRICS:
        header = lines.index(f"# HELP {name} {help_}")
        assert lines[header + 1] == f"# TYPE {name} {kind}"
        body = lines[header + 2 : header + 10]
        assert [LINE.match(line).group("gpu") for line in body] == [str(i) for i in range(8)], body
        for line in body:
            match = LINE.match(line)
            assert match.group("name") == name
            assert match.group("model") == "NVIDIA H100 80GB HBM3"
            assert match.group("host") == "Hostname" and match.group("node") == "gpu-0001"
            assert ("." in match.group("value")) is is_float, line  # %f for doubles, %d for integers
    assert len(lines) == len(METRICS) * 10


def test_prometheus_parser_reads_it_back(busy):
    cluster, _ = busy
    families = {f.name: f for f in text_string_to_metric_families(scrape_text(cluster, "gpu-0001"))}
    assert set(families) == set(METRIC_NAMES)
    assert families["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].type == "counter"
    assert families["DCGM_FI_DEV_GPU_TEMP"].type == "gauge"
    assert all(len(f.samples) == 8 for f in families.values())


def test_pods_on_gpus_in_use_only(busy):
    cluster, _ = busy
    parsed = samples(scrape_text(cluster, "gpu-0001"))
    for gpu in range(8):
        labels, _ = parsed[("DCGM_FI_DEV_GPU_UTIL", str(gpu))]
        if gpu < 4:
            assert (labels["namespace"], labels["pod"], labels["container"]) == ("team-a", "train-0", "main")
        else:
            assert "pod" not in labels and "namespace" not in labels


def test_lowercase_hostname_label():
    cluster, _ = make_cluster("lower", nodes=1, hostname_label="hostname")
    labels, _ = samples(scrape_text(cluster, "gpu-0001"))[("DCGM_FI_DEV_GPU_TEMP", "0")]
    assert labels["hostname"] == "gpu-0001" and "Hostname" not in labels


def test_values_follow_the_load(busy):
    cluster, _ = busy
    text = scrape_text(cluster, "gpu-0001")
    h100 = MODELS["h100"]
    for gpu in range(4):  # busy
        assert 85 <= value(text, "DCGM_FI_DEV_GPU_UTIL", gpu) <= 100
        assert 0.8 * h100.tdp_watts <= value(text, "DCGM_FI_DEV_POWER_USAGE", gpu) <= h100.tdp_watts
        assert 60 <= value(text, "DCGM_FI_DEV_GPU_TEMP", gpu) <= 80
        used = value(text, "DCGM_FI_DEV_FB_USED", gpu)
        assert 0.8 * h100.memory_mib <= used <= h100.memory_mib
        assert used + value(text, "DCGM_FI_DEV_FB_FREE", gpu) == h100.memory_mib
        assert value(text, "DCGM_FI_DEV_SM_CLOCK", gpu) > 1800
        assert 0.8 < value(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gpu) <= 1.0
        assert (
            0 < value(text, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu) < value(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gpu)
        )
    for gpu in range(4, 8):  # idle
        assert value(text, "DCGM_FI_DEV_GPU_UTIL", gpu) == 0
        assert 30 <= value(text, "DCGM_FI_DEV_POWER_USAGE", gpu) <= 70
        assert 30 <= value(text, "DCGM_FI_DEV_GPU_TEMP", gpu) <= 35
        assert value(text, "DCGM_FI_DEV_FB_USED", gpu) == 0
        assert value(text, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", gpu) == 0x1  # idle
        assert value(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gpu) == 0
        assert value(text, "DCGM_FI_DEV_XID_ERRORS", gpu) == 0


def test_fractional_load_shows_partial_use():
    cluster, backend = make_cluster("partial", nodes=1, models={"a100": 1.0})
    backend.submit(spec("slice", sharing=Sharing.MIG, mig_profile="1g.10gb"))
    backend.submit(spec("half", sharing=Sharing.TIME_SLICE, gpu_fraction=0.5))
    text = scrape_text(cluster, "gpu-0001")
    assert 10 <= value(text, "DCGM_FI_DEV_GPU_UTIL", 0) <= 15  # 1/7 of a GPU
    assert 40 <= value(text, "DCGM_FI_DEV_GPU_UTIL", 1) <= 50  # half a GPU
    assert value(text, "DCGM_FI_DEV_FB_USED", 0) < value(text, "DCGM_FI_DEV_FB_USED", 1)
    assert samples(text)[("DCGM_FI_DEV_GPU_UTIL", "0")][0]["pod"] == "slice-0"


def test_an_mps_gpu_shows_its_load_but_no_pod():
    """DCGM-Exporter cannot associate metrics with containers on a GPU the device plugin shares with MPS
    (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html#limitations)."""
    cluster, backend = make_cluster("mps-tele", nodes=1, models={"l40s": 1.0})
    backend.submit(spec("replicas", workers=2, sharing=Sharing.MPS, gpu_fraction=0.25))
    backend.submit(spec("sliced", sharing=Sharing.TIME_SLICE, gpu_fraction=0.5))
    text = scrape_text(cluster, "gpu-0001")
    assert 40 <= value(text, "DCGM_FI_DEV_GPU_UTIL", 0) <= 50  # two quarters of GPU 0
    assert "pod" not in samples(text)[("DCGM_FI_DEV_GPU_UTIL", "0")][0]
    assert samples(text)[("DCGM_FI_DEV_GPU_UTIL", "1")][0]["pod"] == "sliced-0"


def test_load_ends_when_the_workload_does(busy):
    cluster, backend = busy
    backend.advance(3600)
    text = scrape_text(cluster, "gpu-0001")
    assert value(text, "DCGM_FI_DEV_GPU_UTIL", 0) == 0
    assert "pod=" not in text


def test_same_minute_same_text_and_counters_grow(busy):
    cluster, backend = busy
    with Engine.open(cluster) as engine:
        first, again = reports.node_metrics(engine, "gpu-0001"), reports.node_metrics(engine, "gpu-0001")
    assert first == again
    backend.advance(600)
    later = scrape_text(cluster, "gpu-0001")
    assert later != first
    for gpu in range(8):
        assert value(later, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu) > value(
            first, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu
        )


def test_other_models_render_their_own_names():
    cluster, _ = make_cluster("pcie", nodes=1, gpus=2, models={"l40s": 1.0})
    text = scrape_text(cluster, "gpu-0001")
    labels, _ = samples(text)[("DCGM_FI_DEV_GPU_TEMP", "1")]
    assert labels["modelName"] == "NVIDIA L40S" and labels["pci_bus_id"] == "00000000:2A:00.0"
    assert value(text, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 0) == 0


def test_fleet_rendering_matches_per_node_rendering(busy):
    """Speed (≤ 5 ms a node) is measured in bench/fleet_bench.py; timed assertions flake on a loaded machine."""
    cluster, _ = busy
    with Engine.open(cluster) as engine:
        one = reports.node_metrics(engine, "gpu-0001")
        everything = reports.fleet_metrics(engine)
    assert everything["gpu-0001"] == one
    assert set(everything) == {"gpu-0001"}


PCIE = ("DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES")
NVLINK = ("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES")


def test_traffic_follows_the_load_and_nvlink_only_when_the_shape_says(busy):
    cluster, _ = busy
    text = scrape_text(cluster, "gpu-0001")
    for metric in PCIE:
        assert all(value(text, metric, gpu) > 1e9 for gpu in range(4))  # a busy training GPU moves GB/s
        assert all(value(text, metric, gpu) < 1e5 for gpu in range(4, 8))  # idle: housekeeping only
    assert not any(metric in text for metric in NVLINK)  # off in dcgm-exporter's default counters
    wired, backend = make_cluster("wired", nodes=1, seed=11, nvlink_traffic=True)
    backend.submit(spec("train", gpus_per_worker=4, duration_s=3600))
    text = scrape_text(wired, "gpu-0001")
    for metric in NVLINK:
        assert value(text, metric, 0) > 1e10 and value(text, metric, 7) == 0


def test_a_hung_run_keeps_its_memory_and_goes_quiet_an_idle_phase_then_works():
    from apps.backends.simulator.specs import HANG_LABEL, IDLE_PHASE_LABEL

    cluster, backend = make_cluster("hangs", nodes=1, seed=3)
    backend.submit(spec("stuck", gpus_per_worker=4, duration_s=3600, labels={HANG_LABEL: "120"}))
    backend.submit(spec("loader", gpus_per_worker=4, duration_s=3600, labels={IDLE_PHASE_LABEL: "300"}))
    text = scrape_text(cluster, "gpu-0001")
    stuck = {s: samples(text)[("DCGM_FI_DEV_GPU_UTIL", str(s))][0]["pod"].startswith("stuck") for s in range(8)}
    busy_gpu, loading_gpu = min(g for g, s in stuck.items() if s), min(g for g, s in stuck.items() if not s)
    assert value(text, "DCGM_FI_DEV_GPU_UTIL", busy_gpu) > 80 and value(text, "DCGM_FI_DEV_GPU_UTIL", loading_gpu) == 0
    backend.advance(150)  # past the hang; the loader still loads
    text = scrape_text(cluster, "gpu-0001")
    for gpu in (busy_gpu, loading_gpu):
        assert value(text, "DCGM_FI_DEV_GPU_UTIL", gpu) == 0
        assert value(text, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu) == 0
        assert sum(value(text, metric, gpu) for metric in PCIE) < 1e5
        assert value(text, "DCGM_FI_DEV_FB_USED", gpu) > 0.8 * MODELS["h100"].memory_mib  # memory stays held
    backend.advance(200)  # the loader's data is in: it works; the hung run stays hung
    text = scrape_text(cluster, "gpu-0001")
    assert value(text, "DCGM_FI_DEV_GPU_UTIL", loading_gpu) > 80 and value(text, "DCGM_FI_DEV_GPU_UTIL", busy_gpu) == 0
    dump = backend.stack_dump("team-a", "stuck-0", "gpu-0001", "stuck")
    assert (
        "all_reduce" in dump
        and "ncclProxyProgress" in dump
        and dump == backend.stack_dump("team-a", "stuck-0", "gpu-0001", "stuck")
    )


def test_behaviour_labels_are_checked():
    from apps.backends.base import PermanentBackendError
    from apps.backends.simulator.specs import HANG_LABEL

    _, backend = make_cluster("labels", nodes=1)
    with pytest.raises(PermanentBackendError, match="sim/hang-after-s must be a whole number"):
        backend.submit(spec("bad", labels={HANG_LABEL: "soon"}))
