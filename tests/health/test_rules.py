"""Every default rule fires on what it watches, says why in one sentence, and can be tuned into a new version."""

from datetime import UTC, datetime

import pytest

from apps.audit.models import AuditEvent
from apps.core.errors import Forbidden, InvalidInput
from apps.health.models import Rule, RuleSet
from apps.health.rules import DEFAULT_RULES, compile_rules, evaluate_gpu, exporter_down, missing_gpus
from apps.health.services.rulesets import active_ruleset, compiled_rules, tune_rule
from tests.utils.personas import fresh

AT = datetime(2026, 11, 30, 12, 3, 15, tzinfo=UTC)
RULES = compile_rules(DEFAULT_RULES, 1)


def fire(now, before=None, seconds=15.0):
    return {f.rule: f for f in evaluate_gpu(RULES, "gpu-07", "3", "GPU-abc", now, before, seconds, AT)}


def test_xid_classes():
    fatal = fire({"DCGM_FI_DEV_XID_ERRORS": 79})["xid-fatal"]
    assert (fatal.severity, fatal.action, fatal.cause) == ("fatal", "drain", "xid-79")
    assert fatal.text == "DCGM_FI_DEV_XID_ERRORS = 79 on GPU 3 (UUID GPU-abc) of node gpu-07 at 12:03:15"
    for code in (74, 48, 64, 95, 119, 120, 140, 143):
        found = fire({"DCGM_FI_DEV_XID_ERRORS": code})
        assert any(f.action in {"drain", "cordon"} for f in found.values()), code
    app = fire({"DCGM_FI_DEV_XID_ERRORS": 13})["xid-application"]
    assert (app.severity, app.action) == ("info", "record")
    repeated = fire({"DCGM_FI_DEV_XID_ERRORS": 13, "DCGM_EXP_XID_ERRORS_COUNT:13": 3})["xid-application"]
    assert (repeated.severity, repeated.action) == ("critical", "cordon") and "repeated 3 times" in repeated.text
    assert fire({"DCGM_FI_DEV_XID_ERRORS": 0}) == {}


def test_memory_rules():
    dbe = fire({"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 2})["ecc-dbe-volatile"]
    assert dbe.text.startswith("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL = 2 (> 0) on GPU 3")
    assert fire({"DCGM_FI_DEV_ROW_REMAP_FAILURE": 1})["row-remap-failure"].action == "request-rma"
    pages = fire({"DCGM_FI_DEV_RETIRED_SBE": 40, "DCGM_FI_DEV_RETIRED_DBE": 23})["retired-pages"]
    assert "DCGM_FI_DEV_RETIRED_SBE + DCGM_FI_DEV_RETIRED_DBE = 63 (≥ 63)" in pages.text
    assert "retired-pages" not in fire({"DCGM_FI_DEV_RETIRED_SBE": 62})


def test_counter_rates_need_a_previous_scrape_and_survive_resets():
    crc = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    assert "nvlink-crc" not in fire({crc: 10_000})  # no time base yet
    fast = fire({crc: 3000}, {crc: 1000}, 15)["nvlink-crc"]
    assert fast.value == pytest.approx(133.333, abs=0.01) and "133.3/second (≥ 100/second)" in fast.text
    assert "nvlink-crc" not in fire({crc: 2000}, {crc: 1000}, 15)  # 66/s
    replay = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"
    assert "nvlink-replay-recovery" in fire({replay: 5}, {replay: 4})
    assert "nvlink-replay-recovery" in fire({replay: 3}, {replay: 900})  # reset: counts from zero
    pcie = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    assert "pcie-replay" in fire({pcie: 13}, {pcie: 10}, 15)  # 12/min
    assert "pcie-replay" not in fire({pcie: 12}, {pcie: 10}, 15)  # 8/min is not above 8


def test_clock_events():
    thermal = fire({"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0x48})["thermal-slowdown"]
    assert thermal.severity == "warning" and "0x48 (HW thermal 0x40 set)" in thermal.text
    assert fire({"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0x80})["power-brake"].severity == "warning"
    assert fire({"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0x1}) == {}


def test_node_rules():
    missing = missing_gpus(RULES, "gpu-07", {"0": "GPU-a", "5": "GPU-f"}, {"0"}, AT)
    assert [f.text for f in missing] == [
        "GPU 5 (UUID GPU-f) is in the inventory of node gpu-07 but missing from its exporter at 12:03:15"
    ]
    assert exporter_down(RULES, "gpu-07", 1, "refused", AT) == []
    down = exporter_down(RULES, "gpu-07", 2, "unreachable: refused", AT)[0]
    assert down.severity == "warning" and "did not answer 2 scrapes in a row (last: unreachable: refused)" in down.text


@pytest.mark.django_db
def test_admins_tune_thresholds_into_a_new_version(personas):
    v1 = active_ruleset()
    assert v1.version == 1 and v1.rules.count() == len(DEFAULT_RULES)
    with pytest.raises(Forbidden):
        tune_rule(fresh(personas.oncall), "pcie-replay", severity="critical")
    with pytest.raises(InvalidInput) as bad:
        tune_rule(fresh(personas.platform_admin), "pcie-replay", params={"metrics": [], "per": "minute", "value": 8})
    assert bad.value.fields == {"metrics": ["a non-empty list of metric names"]}
    params = {**Rule.objects.get(ruleset=v1, key="pcie-replay").params, "value": 20}
    v2 = tune_rule(fresh(personas.platform_admin), "pcie-replay", params=params, reason="noisy links on rack 4")
    assert v2.version == 2 and RuleSet.objects.count() == 2
    assert Rule.objects.get(ruleset=v2, key="pcie-replay").params["value"] == 20
    assert Rule.objects.get(ruleset=v1, key="pcie-replay").params["value"] == 8  # history stays
    event = AuditEvent.objects.get(action="health.rules.tune")
    assert event.before["pcie-replay"]["params"]["value"] == 8 and event.reason == "noisy links on rack 4"
    compiled = compiled_rules()
    assert compiled.version == 2
    pcie = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    assert evaluate_gpu(compiled, "n", "0", "u", {pcie: 13}, {pcie: 10}, 15, AT) == []  # 12/min ≤ 20
