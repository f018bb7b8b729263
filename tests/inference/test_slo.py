"""SLO targets (tenant admins, audited, validated) and multi-window burn-rate alerts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.errors import Forbidden, InvalidInput
from apps.inference.models import AlertState, ServiceAlert, ServiceSlo, TelemetrySample
from apps.inference.services import set_slo
from apps.inference.slo import burn_rates, evaluate_slos
from tests.inference.conftest import run_service
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db
STEP = timedelta(seconds=15)


def _samples(workload, start, count: int, slow_share: float) -> list:
    """`count` scrape intervals from `start`: 100 requests and 5,000 tokens each, `slow_share` of them over target."""
    return [
        TelemetrySample(
            workload=workload,
            time=start + i * STEP,
            requests=100,
            ttft_slow=100 * slow_share,
            tokens=5000,
            tpot_slow=0,
        )
        for i in range(count)
    ]


def _replay(workload, start, good_minutes: int, bad_minutes: int, after_minutes: int = 0) -> list[int]:
    """Store samples interval by interval and evaluate after each, as the scrape cycle does; returns fired counts."""
    fired = []
    plan = [(good_minutes, 0.0), (bad_minutes, 1.0), (after_minutes, 0.0)]
    at = start
    for minutes, share in plan:
        for sample in _samples(workload, at, minutes * 4, share):
            sample.save()
            fired.append(evaluate_slos([workload.pk], sample.time))
        at += timedelta(minutes=minutes)
    return fired


def test_a_sustained_breach_fires_each_window_pair_once_then_resolves(
    serving, personas, django_capture_on_commit_callbacks
):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    start = timezone.now() - timedelta(hours=2)
    fired = _replay(workload, start, good_minutes=60, bad_minutes=20, after_minutes=40)
    assert sum(fired) == 2  # fast and slow burn, once each, over 80 evaluations of a sustained breach
    alerts = {a.window: a for a in ServiceAlert.objects.filter(workload=workload, sli="ttft")}
    assert set(alerts) == {"fast", "slow"}
    assert alerts["fast"].burn_short == pytest.approx(100)  # all slow over 5 min against a 1 % budget
    # 40 minutes later the short windows are clean again: both resolved.
    assert all(a.state == AlertState.RESOLVED and a.resolved_at for a in alerts.values())
    actions = list(AuditEvent.objects.filter(action__startswith="inference.alert").values_list("action", flat=True))
    assert sorted(actions) == ["inference.alert.fired"] * 2 + ["inference.alert.resolved"] * 2
    event = AuditEvent.objects.filter(action="inference.alert.fired").first()
    assert event.actor_label == "system" and event.tenant_id == personas.a.pk


def test_alerts_reach_on_call_and_the_owning_tenants_channels(serving, personas, django_capture_on_commit_callbacks):
    from apps.notifications.models import Notification, NotificationChannel

    NotificationChannel.objects.create(kind="webhook", target="https://chat.example/oncall")
    NotificationChannel.objects.create(tenant=personas.a, kind="email", target="llm-team@example.com")
    NotificationChannel.objects.create(tenant=personas.b, kind="email", target="other@example.com")
    workload = run_service(personas, django_capture_on_commit_callbacks)
    _replay(workload, timezone.now() - timedelta(hours=2), good_minutes=60, bad_minutes=10)
    sent = Notification.objects.filter(subject__contains="SLO fired")
    assert len(sent) == 4  # the fast and the slow pair fired, each to both channels; tenant B hears nothing
    assert {(n.target, n.audience) for n in sent} == {
        ("https://chat.example/oncall", "on-call"),
        ("llm-team@example.com", "owners"),
    }
    assert "Time to first token is burning its error budget" in sent[0].text


def test_a_short_blip_does_not_fire(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    start = timezone.now() - timedelta(hours=2)
    fired = _replay(workload, start, good_minutes=60, bad_minutes=2, after_minutes=10)
    assert sum(fired) == 0 and not ServiceAlert.objects.exists()
    # It did burn: the 5-minute window crossed the threshold, the hour did not.
    end = start + timedelta(minutes=62)
    rates = burn_rates([workload.pk], end)[workload.pk]
    assert rates[("ttft", 300)] > 14.4 > rates[("ttft", 3600)]


def test_a_service_slow_from_its_first_scrape_fires_once_it_has_five_minutes(
    serving, personas, django_capture_on_commit_callbacks
):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    fired = _replay(workload, timezone.now() - timedelta(hours=1), good_minutes=0, bad_minutes=10)
    # Samples at 0, 15, ... s: the fast pair is judged from the sample 5 minutes after the first (the 21st).
    assert fired.index(1) == 20 and sum(fired) == 1
    assert ServiceAlert.objects.get().window == "fast"


def test_burn_rate_uses_the_service_objective(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    now = timezone.now()
    TelemetrySample.objects.bulk_create(_samples(workload, now - timedelta(minutes=4), 16, 0.05))
    assert burn_rates([workload.pk], now)[workload.pk][("ttft", 300)] == pytest.approx(5.0)  # 5 % / 1 %
    set_slo(fresh(personas.tenant_admin_a), workload, objective=0.9)
    assert burn_rates([workload.pk], now)[workload.pk][("ttft", 300)] == pytest.approx(0.5)  # 5 % / 10 %


def test_tenant_admin_sets_slo_with_one_audit_event(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    before = AuditEvent.objects.count()
    slo = set_slo(fresh(personas.tenant_admin_a), workload, ttft_target_s=1.5, reason="chat UX")
    assert (slo.ttft_target_s, slo.tpot_target_s, slo.objective) == (1.5, ServiceSlo.DEFAULT_TPOT_S, 0.99)
    assert AuditEvent.objects.count() == before + 1
    event = AuditEvent.objects.latest("id")
    assert (event.action, event.reason, event.before["ttft_target_s"], event.after["ttft_target_s"]) == (
        "inference.slo.set",
        "chat UX",
        2.0,
        1.5,
    )


@pytest.mark.parametrize("who", ["member_a", "viewer_a", "member_b", "oncall"])
def test_only_tenant_admins_set_slos(serving, personas, django_capture_on_commit_callbacks, who):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    with pytest.raises(Forbidden):
        set_slo(fresh(personas.user(who)), workload, ttft_target_s=1.0)
    assert not ServiceSlo.objects.exists()


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"ttft_target_s": 0}, "ttft_target_s"),
        ({"ttft_target_s": float("nan")}, "ttft_target_s"),
        ({"tpot_target_s": 11}, "tpot_target_s"),
        ({"objective": 1.0}, "objective"),
        ({"objective": True}, "objective"),
        ({}, "ttft_target_s"),
    ],
)
def test_slo_values_are_checked(serving, personas, django_capture_on_commit_callbacks, values, field):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    with pytest.raises(InvalidInput) as caught:
        set_slo(fresh(personas.tenant_admin_a), workload, **values)
    assert field in caught.value.fields


def test_prune_keeps_the_retention_window(serving, personas, django_capture_on_commit_callbacks, settings):
    from apps.inference.services import prune_samples

    settings.INFERENCE_TELEMETRY_RETENTION_DAYS = 2
    workload = run_service(personas, django_capture_on_commit_callbacks)
    now = timezone.now()
    TelemetrySample.objects.bulk_create(
        [TelemetrySample(workload=workload, time=now - timedelta(days=d)) for d in (0.5, 1.9, 2.1, 5)]
    )
    assert prune_samples(now) == 2
    assert TelemetrySample.objects.count() == 2
