"""Configuration services: where a cluster's telemetry comes from, and where notifications go."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.db import transaction
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event, snapshot
from apps.backends.registry import get_backend
from apps.core.errors import InvalidInput
from apps.core.outbound import url_error
from apps.health.models import IsolationPolicy, Severity, SourceKind, TelemetrySource
from apps.notifications.models import ChannelKind, NotificationChannel


def _http_url(value: str, field: str) -> None:
    """An http(s) URL the outbound policy lets the console call; a host with placeholders ({node}) is checked on
    every call instead (apps/core/outbound.py)."""
    url = value.replace("{node}", "node").replace("{cluster}", "cluster")
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise InvalidInput(
            _("%(field)s must be an http(s) URL.") % {"field": field}, {field: _("An http:// or https:// URL.")}
        )
    problem = url_error(url, resolve_names="{" not in urlsplit(value).netloc)
    if problem:
        raise InvalidInput(_("%(field)s: %(problem)s") % {"field": field, "problem": problem}, {field: problem})


def configure_source(
    actor,
    cluster,
    *,
    kind: str,
    url_pattern: str = "",
    prometheus_url: str = "",
    timeout_s: float = 5.0,
    enabled: bool = True,
    reason: str = "",
) -> TelemetrySource:
    """Set how a cluster's DCGM telemetry is read (platform admins)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins configure telemetry sources."))
    if kind not in SourceKind.values:
        raise InvalidInput(
            _("Unknown source kind %(kind)s.") % {"kind": repr(kind)},
            {"kind": _("One of: %(values)s.") % {"values": ", ".join(SourceKind.values)}},
        )
    if kind == SourceKind.EXPORTER:
        if "{node}" not in url_pattern:
            raise InvalidInput(_("The URL pattern must contain {node}."), {"url_pattern": _("Must contain {node}.")})
        _http_url(url_pattern, "url_pattern")
    if kind == SourceKind.PROMETHEUS:
        _http_url(prometheus_url, "prometheus_url")
    if kind == SourceKind.SIMULATOR and not get_backend(cluster).telemetry_in_process:
        raise InvalidInput(_("Only simulated clusters have a simulator."), {"kind": _("Not for this cluster.")})
    if not 0.1 <= float(timeout_s) <= 60:
        raise InvalidInput(_("The timeout is 0.1 to 60 seconds."), {"timeout_s": _("0.1 to 60.")})
    with transaction.atomic():
        source = TelemetrySource.objects.select_for_update().filter(cluster=cluster).first()
        before = snapshot(source, ["kind", "url_pattern", "prometheus_url", "timeout_s", "enabled"]) if source else None
        source = source or TelemetrySource(cluster=cluster)
        source.kind, source.url_pattern, source.prometheus_url = kind, url_pattern, prometheus_url
        source.timeout_s, source.enabled = float(timeout_s), enabled
        source.save()
        after = snapshot(source, ["kind", "url_pattern", "prometheus_url", "timeout_s", "enabled"])
        record_event(actor, "health.source.configure", source, reason=reason, before=before, after=after)
    return source


def add_channel(actor, *, kind: str, target: str, tenant=None, reason: str = "") -> NotificationChannel:
    """Add a notification destination: on-call's (no tenant; platform admins) or a tenant's (its managers)."""
    if tenant is None:
        require(actor, Action.ADMINISTER, None, _("Only platform admins set on-call's channels."))
    else:
        require(actor, Action.MANAGE, tenant, _("You may not manage tenant %(slug)s.") % {"slug": tenant.slug})
    if kind not in ChannelKind.values:
        raise InvalidInput(
            _("Unknown channel kind %(kind)s.") % {"kind": repr(kind)},
            {"kind": _("One of: %(values)s.") % {"values": ", ".join(ChannelKind.values)}},
        )
    if kind == ChannelKind.WEBHOOK:
        _http_url(target, "target")
    elif "@" not in target or len(target) > 254:
        raise InvalidInput(_("Give an e-mail address."), {"target": _("An e-mail address.")})
    with transaction.atomic():
        channel = NotificationChannel.objects.create(tenant=tenant, kind=kind, target=target)
        record_event(actor, "health.channel.add", channel, tenant=tenant, reason=reason, after=snapshot(channel))
    return channel


def remove_channel(actor, channel: NotificationChannel, *, reason: str = "") -> None:
    if channel.tenant_id is None:
        require(actor, Action.ADMINISTER, None, _("Only platform admins change on-call's channels."))
    else:
        require(
            actor,
            Action.MANAGE,
            channel.tenant,
            _("You may not manage tenant %(slug)s.") % {"slug": channel.tenant.slug},
        )
    with transaction.atomic():
        record_event(
            actor, "health.channel.remove", channel, tenant=channel.tenant, reason=reason, before=snapshot(channel)
        )
        channel.delete()


def set_isolation_policy(
    actor,
    pool=None,
    *,
    cordon_severities: list[str],
    drain_severities: list[str],
    max_nodes_per_hour: int,
    max_percent_per_hour: float,
    enabled: bool = True,
    reason: str = "",
) -> IsolationPolicy:
    """Set a pool's automatic isolation (or the default for pools without their own, `pool` None)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins set isolation policies."))
    for field, values in (("cordon_severities", cordon_severities), ("drain_severities", drain_severities)):
        bad = [v for v in values if v not in Severity.values]
        if bad or len(set(values)) != len(values):
            raise InvalidInput(
                _("%(field)s: unknown or repeated severities %(bad_or_values)s.")
                % {"field": field, "bad_or_values": bad or values},
                {field: _("From: %(values)s.") % {"values": ", ".join(Severity.values)}},
            )
    if isinstance(max_nodes_per_hour, bool) or not isinstance(max_nodes_per_hour, int) or max_nodes_per_hour < 0:
        raise InvalidInput(
            _("max_nodes_per_hour is a whole number, 0 or more."), {"max_nodes_per_hour": _("0 or more.")}
        )
    if not 0 <= float(max_percent_per_hour) <= 100:
        raise InvalidInput(_("max_percent_per_hour is 0 to 100."), {"max_percent_per_hour": _("0 to 100.")})
    values = {
        "cordon_severities": sorted(cordon_severities, key=Severity.values.index),
        "drain_severities": sorted(drain_severities, key=Severity.values.index),
        "max_nodes_per_hour": max_nodes_per_hour,
        "max_percent_per_hour": float(max_percent_per_hour),
        "enabled": enabled,
    }
    with transaction.atomic():
        policy = IsolationPolicy.objects.select_for_update().filter(pool=pool).first()
        before = snapshot(policy, list(values)) if policy else None
        if policy is None:
            policy = IsolationPolicy(pool=pool)
        for key, value in values.items():
            setattr(policy, key, value)
        policy.save()
        record_event(actor, "health.policy.set", policy, reason=reason, before=before, after=values)
    return policy
