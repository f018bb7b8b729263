"""Roles and the actions each allows. This table is the whole permission policy; permissions.py applies it."""

from __future__ import annotations

import enum

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Role(models.TextChoices):
    PLATFORM_ADMIN = "platform-admin", _("Platform admin")
    TENANT_ADMIN = "tenant-admin", _("Tenant admin")
    MEMBER = "member", _("Member")
    ONCALL = "on-call", _("On-call")
    VIEWER = "viewer", _("Viewer")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("role", "platform-admin"),
            pgettext_lazy("role", "tenant-admin"),
            pgettext_lazy("role", "member"),
            pgettext_lazy("role", "on-call"),
            pgettext_lazy("role", "viewer"),
        )
    )


class Action(models.TextChoices):
    VIEW = "view", _("View")
    SUBMIT = "submit", _("Submit and cancel workloads, request quota")
    MANAGE = "manage", _("Manage tenant data: members, service accounts, tokens, subtenants")
    OPERATE = "operate", _("Fleet runbook actions: cordon, drain, resume, reset, RMA")
    ADMINISTER = "administer", _("Platform settings: clusters, tenants at the root, rates, tiers, periods")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("permission", "view"),
            pgettext_lazy("permission", "submit"),
            pgettext_lazy("permission", "manage"),
            pgettext_lazy("permission", "operate"),
            pgettext_lazy("permission", "administer"),
        )
    )


ROLE_ACTIONS: dict[str, frozenset[str]] = {
    Role.PLATFORM_ADMIN: frozenset(Action.values),
    Role.TENANT_ADMIN: frozenset({Action.VIEW, Action.SUBMIT, Action.MANAGE}),
    Role.MEMBER: frozenset({Action.VIEW, Action.SUBMIT}),
    # On-call sees every tenant's workloads (to judge a drain's impact) but edits no tenant data.
    Role.ONCALL: frozenset({Action.VIEW, Action.OPERATE}),
    Role.VIEWER: frozenset({Action.VIEW}),
}

# Roles that apply to the whole console, not to one tenant.
GLOBAL_ROLES = frozenset({Role.PLATFORM_ADMIN, Role.ONCALL})
# Roles that must name a tenant.
TENANT_ROLES = frozenset({Role.TENANT_ADMIN, Role.MEMBER})
# Roles whose grant on a tenant also covers its descendants.
SUBTREE_ROLES = frozenset({Role.TENANT_ADMIN})
# A viewer may be global (tenant empty: read-only everywhere) or per tenant.

# What a service account (a CI pipeline) may be given: tenant roles only.
SERVICE_ACCOUNT_ROLE_CHOICES = [(r.value, r.label) for r in (Role.TENANT_ADMIN, Role.MEMBER, Role.VIEWER)]
