"""Services for memberships, service accounts and API tokens. Each writes exactly one audit event."""

from __future__ import annotations

import logging
import re
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.models import ApiToken, Membership, MembershipSource, User, token_digest
from apps.accounts.permissions import forget_scope, grantable_roles, has_perm, require, require_live, scope_for
from apps.accounts.roles import GLOBAL_ROLES, ROLE_ACTIONS, TENANT_ROLES, Action, Role
from apps.audit.services import record_event, snapshot
from apps.core.errors import Conflict, Forbidden, InvalidInput

logger = logging.getLogger(__name__)

#
# Memberships
#


def _check_role_for_tenant(role: str, tenant) -> None:
    if role not in Role.values:
        raise InvalidInput(
            _("Unknown role %(role)s.") % {"role": repr(role)},
            {"role": _("Choose one of: %(values)s.") % {"values": ", ".join(Role.values)}},
        )
    if role in GLOBAL_ROLES and tenant is not None:
        raise InvalidInput(
            _("%(role)s is a console-wide role.") % {"role": role},
            {"tenant": _("Leave empty for a console-wide role.")},
        )
    if role in TENANT_ROLES and tenant is None:
        raise InvalidInput(_("%(role)s needs a tenant.") % {"role": role}, {"tenant": _("Required for this role.")})


def _require_grantable(actor, role: str, tenant) -> None:
    if role not in grantable_roles(actor, tenant):
        where = _("tenant %(slug)s") % {"slug": tenant.slug} if tenant is not None else _("the whole console")
        raise Forbidden(_("You may not grant %(role)s on %(where)s.") % {"role": role, "where": where})
    require_live(tenant)


def grant_membership(actor, *, user: User, tenant, role: str, reason: str = "") -> Membership:
    """Give `user` a role on `tenant` (None: console-wide)."""
    _check_role_for_tenant(role, tenant)
    _require_grantable(actor, role, tenant)
    with transaction.atomic():
        try:
            with transaction.atomic():
                membership = Membership.objects.create(user=user, tenant=tenant, role=role)
        except IntegrityError as exc:
            raise Conflict(
                _("%(username)s already has a role there; change it instead.") % {"username": user.username},
                {"user": _("Already a member.")},
            ) from exc
        record_event(actor, "membership.grant", membership, tenant=tenant, reason=reason, after=snapshot(membership))
    forget_scope(user)
    return membership


def _refuse_removing_last_platform_admin(membership: Membership) -> None:
    if membership.role != Role.PLATFORM_ADMIN:
        return
    others = Membership.objects.filter(role=Role.PLATFORM_ADMIN, user__is_active=True).exclude(pk=membership.pk)
    if (
        not others.exists()
        and not User.objects.filter(is_superuser=True, is_active=True).exclude(pk=membership.user_id).exists()
    ):
        raise Conflict(_("This is the last platform admin; grant the role to someone else first."))


def _refuse_idp_membership(membership: Membership) -> None:
    if membership.source == "idp":
        raise Conflict(
            _(
                "This membership comes from the identity provider's groups: change the person's groups or the "
                "group mappings instead."
            )
        )


def change_membership_role(actor, membership: Membership, *, role: str, reason: str = "") -> Membership:
    """Change the role of an existing membership."""
    _check_role_for_tenant(role, membership.tenant)
    _require_grantable(actor, membership.role, membership.tenant)
    _require_grantable(actor, role, membership.tenant)
    _refuse_idp_membership(membership)
    if role != membership.role:
        _refuse_removing_last_platform_admin(membership)
    with transaction.atomic():
        before = snapshot(membership)
        membership.role = role
        membership.save(update_fields=["role"])
        record_event(
            actor,
            "membership.change",
            membership,
            tenant=membership.tenant,
            reason=reason,
            before=before,
            after=snapshot(membership),
        )
    forget_scope(membership.user)
    return membership


def revoke_membership(actor, membership: Membership, *, reason: str = "") -> None:
    """Take a role away. Platform admins cannot remove the last platform admin."""
    _require_grantable(actor, membership.role, membership.tenant)
    _refuse_idp_membership(membership)
    _refuse_removing_last_platform_admin(membership)
    with transaction.atomic():
        record_event(
            actor, "membership.revoke", membership, tenant=membership.tenant, reason=reason, before=snapshot(membership)
        )
        membership.delete()
    forget_scope(membership.user)


#
# Service accounts
#


def create_service_account(actor, *, username: str, tenant, role: str = Role.MEMBER, reason: str = "") -> User:
    """A tokens-only user owned by `tenant`, with one role there, for CI pipelines."""
    require(actor, Action.MANAGE, tenant, _("You may not manage tenant %(slug)s.") % {"slug": tenant.slug})
    if role in GLOBAL_ROLES:
        raise InvalidInput(
            _("Service accounts get tenant roles only."), {"role": _("Choose tenant-admin, member or viewer.")}
        )
    _check_role_for_tenant(role, tenant)
    _require_grantable(actor, role, tenant)
    account = User(username=username, is_service_account=True, owner_tenant=tenant)
    account.set_unusable_password()
    try:
        account.full_clean(exclude=["password"])
    except ValidationError as exc:
        raise InvalidInput(_("Invalid service account."), exc.message_dict) from exc
    with transaction.atomic():
        account.save()
        Membership.objects.create(user=account, tenant=tenant, role=role)
        record_event(
            actor,
            "service_account.create",
            account,
            tenant=tenant,
            reason=reason,
            after={**snapshot(account, ["id", "username", "owner_tenant"]), "role": role},
        )
    return account


#
# API tokens
#


def _covered(holder: User, tenant, role: str) -> bool:
    """Does `holder` (ignoring any token it is acting through) have every action of `role` on `tenant`?"""
    scope = scope_for(holder)
    return ROLE_ACTIONS[role] <= scope.actions_on(tenant.pk if tenant is not None else None)


def issue_token(
    actor, *, user: User, name: str, tenant=None, role: str, expires_in_days: int | None = None, reason: str = ""
) -> tuple[ApiToken, str]:
    """Create a token for `user` (yourself, or a service account of a tenant you manage). Returns (row, raw token).

    The raw token is returned once and never stored; only its SHA-256 digest is kept.
    """
    if not name or len(name) > 100:
        raise InvalidInput(_("Give the token a name of 1 to 100 characters."), {"name": _("1 to 100 characters.")})
    _check_role_for_tenant(role, tenant)
    # Every token expires: by default after the longest lifetime allowed; a longer one is refused, not capped,
    # so a pipeline never holds a token that dies sooner than it asked for without being told.
    max_days = settings.API_TOKEN_MAX_LIFETIME_DAYS
    if expires_in_days is None:
        expires_in_days = max_days
    if not 1 <= expires_in_days <= max_days:
        raise InvalidInput(
            _("Expiry must be 1 to %(max_token_days)s days (the console's longest token lifetime).")
            % {"max_token_days": max_days},
            {"expires_in_days": _("1 to %(max_token_days)s.") % {"max_token_days": max_days}},
        )
    if user.pk != actor.pk:
        if not user.is_service_account:
            raise Forbidden(_("You can only create tokens for yourself or for a service account."))
        require(
            actor,
            Action.MANAGE,
            user.owner_tenant,
            _("You may not manage tenant %(slug)s.") % {"slug": user.owner_tenant.slug},
        )
    if getattr(actor, "api_token", None) is not None and not has_perm(actor, Action.MANAGE, tenant):
        # A token may mint tokens only where it could manage; never a wider one than itself.
        raise Forbidden(_("An API token cannot create a token wider than its own scope."))
    if not _covered(user, tenant, role):
        where = tenant.slug if tenant is not None else _("the whole console")
        raise Forbidden(
            _("%(username)s does not hold %(role)s on %(where)s; a token cannot exceed its user's rights.")
            % {"username": user.username, "role": role, "where": where}
        )
    raw = settings.API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(days=expires_in_days)
    with transaction.atomic():
        token = ApiToken.objects.create(
            name=name,
            user=user,
            tenant=tenant,
            role=role,
            prefix=raw[:12],
            digest=token_digest(raw),
            created_by=actor if actor.pk else None,
            expires_at=expires_at,
        )
        record_event(actor, "token.create", token, tenant=tenant, reason=reason, after=snapshot(token))
    return token, raw


def revoke_token(actor, token: ApiToken, *, reason: str = "") -> ApiToken:
    """Revoke a token now. Your own, a service account's of a tenant you manage, or, for platform admins, anyone's
    (a leaked token of a person who is away). Audited as "token.revoke", naming the token's user."""
    if token.user_id != actor.pk and not has_perm(actor, Action.ADMINISTER):
        owner = token.user.owner_tenant
        if not (token.user.is_service_account and owner is not None and has_perm(actor, Action.MANAGE, owner)):
            raise Forbidden(_("You may not revoke this token."))
    if token.revoked_at is not None:
        raise Conflict(_("This token is already revoked."))
    with transaction.atomic():
        # Compare-and-set so two concurrent revokes write one event.
        updated = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        if updated != 1:
            raise Conflict(_("This token is already revoked."))
        before = snapshot(token)
        token.refresh_from_db()
        record_event(
            actor,
            "token.revoke",
            token,
            tenant=token.tenant,
            reason=reason,
            before=before,
            after={**snapshot(token), "owner": token.user.get_username()},
        )
    return token


#
# People
#


def create_user(actor, *, username: str, password: str | None = None, email: str = "", reason: str = "") -> User:
    """Create a person's account (platform admins; `actor=None` is the bootstrap of the first admin)."""
    if actor is not None:
        require(actor, Action.ADMINISTER, None, _("Only platform admins create users."))
    user = User(username=username, email=email)
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as exc:
        raise InvalidInput(_("Invalid user."), exc.message_dict) from exc
    with transaction.atomic():
        user.save()
        record_event(actor, "user.create", user, reason=reason, after=snapshot(user, ["id", "username", "email"]))
    return user


def bootstrap_platform_admin(*, username: str, password: str) -> User:
    """Create (or reset) the first platform admin; used by `make demo`. One audit event, actor "system"."""
    with transaction.atomic():
        user = User.objects.filter(username=username).first()
        created = user is None
        if created:
            user = User(username=username, is_staff=True, is_superuser=True)
        user.set_password(password)
        user.is_active = user.is_staff = user.is_superuser = True
        user.save()
        Membership.objects.get_or_create(user=user, tenant=None, role=Role.PLATFORM_ADMIN)
        record_event(None, "user.bootstrap_admin", user, reason="demo set-up" if created else "demo password reset")
    return user


#
# Sessions
#


def record_login(user: User) -> None:
    """Browser log-ins are security events too."""
    with transaction.atomic():
        record_event(user, "user.login", user)


def record_lockout(username: str, ip_address: str, *, failures: int) -> None:
    """A user name locked out of logging in from one address after too many failures (apps.accounts.lockout)."""
    user = User.objects.filter(username=username).first()
    with transaction.atomic():
        record_event(
            None,
            "user.lockout",
            user,
            target_type="accounts.user",
            target_label=username[:300],
            after={
                "username": username,
                "ip_address": ip_address,
                "failures": failures,
                "cooloff_minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
            },
        )


def record_logout(user: User) -> None:
    with transaction.atomic():
        record_event(user, "user.logout", user)


#
# Single sign-on (apps/accounts/sso)
#

_PROFILE = ["email", "first_name", "last_name"]


def _profile_from_claims(claims: dict) -> dict:
    """E-mail and name from standard OpenID Connect claims, cut to the columns' lengths."""
    name = str(claims.get("name") or "").strip()
    first, _, last = name.partition(" ")
    email = claims.get("email") if isinstance(claims.get("email"), str) else ""
    return {
        "email": email[:254],
        "first_name": str(claims.get("given_name") or first)[:150],
        "last_name": str(claims.get("family_name") or last)[:150],
    }


def create_sso_user(*, username: str, subject: str, claims: dict) -> User:
    """A person's account, made at their first log-in through the identity provider (no local password)."""
    user = User(username=username, oidc_subject=subject, **_profile_from_claims(claims))
    user.set_unusable_password()
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as exc:
        raise InvalidInput(_("The identity provider's user name cannot be used."), exc.message_dict) from exc
    with transaction.atomic():
        user.save()
        record_event(
            None,
            "user.create",
            user,
            reason="first log-in through the identity provider",
            after={**snapshot(user, ["id", "username", "email"]), "source": "oidc", "issuer": settings.OIDC_ISSUER_URL},
        )
    return user


# Groups kept from a log-in (for the group mappings page's preview), at most this many of at most 255 characters.
IDP_GROUPS_KEPT = 1000


def allow_sso_link(actor, user: User, *, reason: str = "") -> User:
    """Let `user`, a local account, be taken over by the identity provider identity of the same user name at its
    next single sign-on log-in (`link_sso_user`). Platform admins only; one audit event."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins link accounts to the identity provider."))
    if user.is_service_account:
        raise InvalidInput(_("A service account does not log in: give it a federated trust instead."))
    if user.oidc_subject:
        raise Conflict(_("%(name)s is linked to the identity provider already.") % {"name": user.username})
    with transaction.atomic():
        user.oidc_link_pending = True
        user.save(update_fields=["oidc_link_pending"])
        record_event(actor, "user.allow_oidc_link", user, reason=reason, after={"oidc_link_pending": True})
    return user


def link_sso_user(user: User, *, subject: str) -> User:
    """The log-in that takes over a local account a platform admin allowed (`allow_sso_link`): from now on the
    person is found by `subject`, and their password no longer works. One audit event by the console."""
    with transaction.atomic():
        user.oidc_subject = subject
        user.oidc_link_pending = False
        user.set_unusable_password()
        user.save(update_fields=["oidc_subject", "oidc_link_pending", "password"])
        record_event(
            None,
            "user.link_oidc",
            user,
            reason="first log-in through the identity provider after a platform admin allowed the link",
            after={"username": user.username, "issuer": settings.OIDC_ISSUER_URL},
        )
    return user


def record_sso_login(user: User, claims: dict, groups: list[str]) -> User:
    """A log-in through the identity provider: e-mail and name refreshed from its claims, the groups it sent kept
    (the group mappings page previews what they give), one audit event."""
    groups = sorted({g[:255] for g in groups})[:IDP_GROUPS_KEPT]
    with transaction.atomic():
        before = snapshot(user, _PROFILE)
        for field, value in _profile_from_claims(claims).items():
            setattr(user, field, value)
        user.idp_groups = groups
        user.save(update_fields=[*_PROFILE, "idp_groups"])
        after = snapshot(user, _PROFILE)
        record_event(
            user,
            "user.login_oidc",
            user,
            before=before if before != after else None,
            after={**after, "issuer": settings.OIDC_ISSUER_URL, "groups": groups},
        )
    return user


#
# Roles from identity provider groups
#

IDP_REASON = "identity provider groups at log-in"


def _check_group_mapping(group: str, tenant, role: str) -> None:
    from apps.accounts.group_mappings import pattern_regex

    group = group.strip()
    if not group:
        raise InvalidInput(_("Name a group or a pattern."), {"group": _("Required.")})
    placeholders = set(re.findall(r"\{[^}]*\}", group))
    if placeholders - {"{tenant}", "{role}"}:
        raise InvalidInput(
            _("A pattern may use {tenant} and {role} only."), {"group": _("Use {tenant} and {role} only.")}
        )
    pattern_regex(group)
    if "{role}" in group:
        if role:
            raise InvalidInput(_("The pattern names the role."), {"role": _("Leave empty: {role} gives it.")})
        if tenant is not None:
            raise InvalidInput(_("A pattern gives roles on the tenants it names."), {"tenant": _("Leave empty.")})
        return
    if "{tenant}" in group:
        if tenant is not None:
            raise InvalidInput(_("A pattern gives roles on the tenants it names."), {"tenant": _("Leave empty.")})
        if role not in TENANT_ROLES and role != Role.VIEWER:
            raise InvalidInput(
                _("A {tenant} pattern needs a tenant role."),
                {"role": _("Choose tenant-admin, member or viewer.")},
            )
        return
    _check_role_for_tenant(role, tenant)


def create_group_mapping(actor, *, group: str, tenant=None, role: str = "", reason: str = ""):
    """A group (or pattern) that gives a role at single sign-on log-ins. Platform admins only."""
    from apps.accounts.models import GroupMapping

    require(actor, Action.ADMINISTER, None, _("Only platform admins map identity provider groups to roles."))
    _check_group_mapping(group, tenant, role)
    with transaction.atomic():
        try:
            with transaction.atomic():
                mapping = GroupMapping.objects.create(group=group.strip(), tenant=tenant, role=role)
        except IntegrityError as exc:
            raise Conflict(_("This group is mapped already."), {"group": _("Already mapped.")}) from exc
        record_event(actor, "group_mapping.create", mapping, tenant=tenant, reason=reason, after=snapshot(mapping))
    return mapping


def delete_group_mapping(actor, mapping, *, reason: str = "") -> None:
    """Remove a mapping: the roles it gave go at each person's next log-in."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins map identity provider groups to roles."))
    with transaction.atomic():
        record_event(
            actor, "group_mapping.delete", mapping, tenant=mapping.tenant, reason=reason, before=snapshot(mapping)
        )
        mapping.delete()


def sync_idp_memberships(user: User, groups: list[str]) -> None:
    """Make `user`'s identity-provider memberships what their groups give today: each grant, change and removal
    is one audit event (actor: the console). Memberships granted by hand are never touched; a group giving a role
    where a hand-made membership exists gives nothing there. The last platform admin is kept (and logged)."""
    from apps.accounts.group_mappings import plan_memberships, roles_from_groups

    wanted = roles_from_groups(groups)
    with transaction.atomic():
        held = {m.tenant_id: m for m in Membership.objects.select_for_update().filter(user=user).order_by("pk")}
        for step in plan_memberships(held, wanted):
            membership, grant = step.held, step.grant
            if step.change == "revoke":
                try:
                    _refuse_removing_last_platform_admin(membership)
                except Conflict:
                    logger.warning("kept %s's platform-admin membership: the last platform admin", user.username)
                    continue
                record_event(
                    None,
                    "membership.revoke",
                    membership,
                    tenant=membership.tenant,
                    reason=f"{IDP_REASON}: no group gives it any more",
                    before=snapshot(membership),
                )
                membership.delete()
            elif step.change == "change":
                before = snapshot(membership)
                membership.role = grant.role
                membership.save(update_fields=["role"])
                record_event(
                    None,
                    "membership.change",
                    membership,
                    tenant=membership.tenant,
                    reason=f"{IDP_REASON}: group {grant.group}",
                    before=before,
                    after=snapshot(membership),
                )
            elif step.change == "grant":
                membership = Membership.objects.create(
                    user=user, tenant_id=step.tenant_id, role=grant.role, source=MembershipSource.IDP
                )
                record_event(
                    None,
                    "membership.grant",
                    membership,
                    tenant=membership.tenant,
                    reason=f"{IDP_REASON}: group {grant.group}",
                    after=snapshot(membership),
                )
    forget_scope(user)


#
# Workload identity federation: CI pipelines exchange their OIDC ID token for a console token (docs/sso.md)
#


def _check_trust(service_account: User, issuer: str, audience: str, conditions, max_minutes: int) -> None:
    from apps.core import outbound

    if not service_account.is_service_account or service_account.owner_tenant is None:
        raise InvalidInput(_("Only a service account can trust an issuer."), {"service_account": _("Not one.")})
    issuer = issuer.strip()
    problem = outbound.url_error(issuer) if issuer else _("Required.")
    if problem:
        raise InvalidInput(
            _("The issuer URL cannot be used: %(problem)s") % {"problem": problem}, {"issuer": str(problem)}
        )
    if not audience.strip():
        raise InvalidInput(_("Name the audience the tokens must carry."), {"audience": _("Required.")})
    if not isinstance(conditions, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str | bool) for k, v in conditions.items()
    ):
        raise InvalidInput(
            _("Conditions are an object of claim names to exact values (strings or booleans)."),
            {"conditions": _("Claim → string or boolean.")},
        )
    limit = settings.TOKEN_EXCHANGE_MAX_MINUTES
    if not 1 <= max_minutes <= limit:
        raise InvalidInput(
            _("A token lifetime is 1 to %(limit)s minutes.") % {"limit": limit},
            {"max_minutes": _("1 to %(limit)s.") % {"limit": limit}},
        )


def create_federated_trust(
    actor,
    *,
    service_account: User,
    issuer: str,
    audience: str,
    conditions: dict | None = None,
    max_minutes: int = 15,
    enabled: bool = True,
    reason: str = "",
):
    """Let `service_account` be used by ID tokens of `issuer` carrying `audience` and the `conditions`' claims."""
    from apps.accounts.models import FederatedTrust

    conditions = {} if conditions is None else conditions
    _check_trust(service_account, issuer, audience, conditions, max_minutes)
    tenant = service_account.owner_tenant
    require(actor, Action.MANAGE, tenant, _("You may not manage tenant %(slug)s.") % {"slug": tenant.slug})
    with transaction.atomic():
        trust = FederatedTrust.objects.create(
            service_account=service_account,
            issuer=issuer.strip(),
            audience=audience.strip(),
            conditions=conditions,
            max_minutes=max_minutes,
            enabled=enabled,
        )
        record_event(actor, "federated_trust.create", trust, tenant=tenant, reason=reason, after=snapshot(trust))
    return trust


def delete_federated_trust(actor, trust, *, reason: str = "") -> None:
    tenant = trust.service_account.owner_tenant
    require(actor, Action.MANAGE, tenant, _("You may not manage tenant %(slug)s.") % {"slug": tenant.slug})
    with transaction.atomic():
        record_event(actor, "federated_trust.delete", trust, tenant=tenant, reason=reason, before=snapshot(trust))
        trust.delete()


def exchange_token(trust, claims: dict) -> tuple[ApiToken, str]:
    """Issue a short-lived token for the trust's service account (its tenant and role), after `federation.verify`
    accepted `claims`. Audited as "token.exchange" with the claims that matched."""
    account = trust.service_account
    membership = account.memberships.filter(tenant_id=account.owner_tenant_id).first()
    if membership is None:
        raise Forbidden(_("The service account holds no role on its tenant."))
    minutes = min(trust.max_minutes, settings.TOKEN_EXCHANGE_MAX_MINUTES)
    raw = settings.API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    matched = {name: claims.get(name) for name in ["iss", "sub", "aud", *trust.conditions]}
    with transaction.atomic():
        token = ApiToken.objects.create(
            name=f"token exchange: {str(claims.get('sub', ''))[:70]}",
            user=account,
            tenant=membership.tenant,
            role=membership.role,
            prefix=raw[:12],
            digest=token_digest(raw),
            created_by=None,
            expires_at=timezone.now() + timedelta(minutes=minutes),
        )
        record_event(
            account,
            "token.exchange",
            token,
            tenant=membership.tenant,
            after={**snapshot(token), "trust": trust.pk, "claims": matched},
        )
    return token, raw


def record_refused_exchange(reason: str, claims: dict | None) -> None:
    """A refused exchange: why (for the operators; the caller is told nothing), and never the token."""
    # Unverified, so anyone's words: kept short.
    unverified = {k: str((claims or {})[k])[:300] for k in ("iss", "sub", "aud") if k in (claims or {})}
    with transaction.atomic():
        record_event(
            None,
            "token.exchange_refused",
            None,
            target_type="accounts.federatedtrust",
            target_label=str(unverified.get("iss", ""))[:300],
            after={"reason": reason, "unverified_claims": unverified},
        )
