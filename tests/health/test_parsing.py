"""The exporter parser on what real exporters print: label spellings, MIG, pods, sentinels, broken lines."""
# ruff: noqa: E501 - exporter lines are long by nature; kept verbatim

from apps.health.parsing import parse_exporter, parse_prometheus

NEW = """# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="gpu-07",DCGM_FI_DRIVER_VERSION="570.124.06",container="trainer",namespace="ml-train",pod="llm-3"} 71
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-bbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",hostname="gpu-07"} 34
DCGM_FI_DEV_MEMORY_TEMP{gpu="1",UUID="GPU-bbb",hostname="gpu-07"} 9223372036854775794
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbb",hostname="gpu-07"} 79
DCGM_EXP_XID_ERRORS_COUNT{gpu="1",UUID="GPU-bbb",hostname="gpu-07",window_size_in_ms="300000",xid="13"} 4
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaa",hostname="gpu-07"} 612.418000
"""

OLD = """DCGM_FI_DEV_GPU_TEMP{gpu="0",uuid="GPU-ccc",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="gpu-08",pod_name="p",pod_namespace="ns"} 40
"""

MIG = """DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-ddd",device="nvidia0",modelName="NVIDIA A100",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="gpu-09"} 20
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-ddd",device="nvidia0",modelName="NVIDIA A100",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="gpu-09"} 90
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-ddd",device="nvidia0",modelName="NVIDIA A100",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="gpu-09"} 0
"""

BROKEN = """DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aaa",Hostname="n"} 50
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-bbb",Hostname="n" 51
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID=GPU-ccc} 52
DCGM_FI_DEV_GPU_TEMP{gpu="3",UUID="GPU-ddd",Hostname="n"} hot
garbage
dcgm_exporter_up 1
DCGM_FI_DEV_GPU_TEMP{gpu="4",UUID="GPU-eee",Hostname="n"} 54 1700000000000
"""


def test_new_spellings_pods_sentinels_and_xid_counts():
    scrape = parse_exporter(NEW)
    gpu0, gpu1 = scrape.gpus["0"], scrape.gpus["1"]
    assert (gpu0.uuid, gpu0.hostname, gpu0.pod, gpu0.namespace) == ("GPU-aaa", "gpu-07", "llm-3", "ml-train")
    assert gpu0.values == {"DCGM_FI_DEV_GPU_TEMP": 71.0, "DCGM_FI_DEV_POWER_USAGE": 612.418}
    assert gpu1.pod == "" and gpu1.values["DCGM_FI_DEV_XID_ERRORS"] == 79
    assert gpu1.values["DCGM_EXP_XID_ERRORS_COUNT:13"] == 4
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in gpu1.values and scrape.sentinels == 1
    assert scrape.hostname == "gpu-07" and scrape.malformed == 0


def test_old_namespace_labels():
    gpu = parse_exporter(OLD).gpus["0"]
    assert (gpu.uuid, gpu.hostname, gpu.pod, gpu.namespace) == ("GPU-ccc", "gpu-08", "p", "ns")


def test_mig_instances_stay_on_their_gpu():
    gpu = parse_exporter(MIG).gpus["0"]
    assert gpu.mig == ["3g.40gb#1", "3g.40gb#2"]
    assert gpu.values["DCGM_FI_DEV_GPU_UTIL"] == 90  # the busiest instance
    assert gpu.values["DCGM_FI_DEV_XID_ERRORS"] == 0


def test_malformed_lines_are_counted_and_the_rest_kept():
    scrape = parse_exporter(BROKEN)
    assert sorted(scrape.gpus) == ["0", "3", "4"] and scrape.gpus["3"].values == {}  # seen, its value unreadable
    assert scrape.gpus["4"].values["DCGM_FI_DEV_GPU_TEMP"] == 54  # a trailing timestamp is allowed
    assert scrape.malformed == 4
    assert scrape.examples[0].startswith('DCGM_FI_DEV_GPU_TEMP{gpu="1"') and len(scrape.examples) == 3


def test_only_wanted_metrics_and_missing_counters():
    scrape = parse_exporter(NEW, {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"})
    assert scrape.gpus["1"].values == {"DCGM_FI_DEV_XID_ERRORS": 79}
    assert scrape.samples == 6  # every sample line is counted, parsed or not


def test_prometheus_vector_grouped_by_host():
    result = [
        {
            "metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "2", "UUID": "GPU-x", "Hostname": "gpu-01"},
            "value": [1, "79"],
        },
        {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "2", "UUID": "GPU-x", "hostname": "gpu-01"},
            "value": [1, "40"],
        },
        {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "0", "uuid": "GPU-y", "Hostname": "gpu-02"},
            "value": [1, "9.3e18"],
        },
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "0"}, "value": [1, "40"]},
        {"bogus": True},
    ]
    hosts = parse_prometheus(result)
    assert hosts["gpu-01"].gpus["2"].values == {"DCGM_FI_DEV_XID_ERRORS": 79.0, "DCGM_FI_DEV_GPU_TEMP": 40.0}
    assert hosts["gpu-02"].sentinels == 1 and hosts["gpu-02"].gpus["0"].values == {}
    assert hosts[""].malformed == 2
