"""Rule set versions: the defaults, tuning by platform admins (each change is a new version), the rules in force."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event
from apps.core.errors import Conflict, InvalidInput, NotFound
from apps.health.models import Rule, RuleSet
from apps.health.rules import DEFAULT_RULES, CompiledRules, RuleError, RuleSpec, compile_rules, validate

_compiled: dict[int, CompiledRules] = {}


def _spec(rule: Rule) -> RuleSpec:
    return RuleSpec(
        key=rule.key,
        cause=rule.cause,
        title=rule.title,
        kind=rule.kind,
        params=rule.params,
        severity=rule.severity,
        action=rule.action,
        enabled=rule.enabled,
    )


def active_ruleset() -> RuleSet:
    """The newest rule set version; the defaults are written as version 1 the first time."""
    ruleset = RuleSet.objects.order_by("-version").first()
    return ruleset if ruleset is not None else seed_default_rules()


def seed_default_rules() -> RuleSet:
    """Write the default rules as version 1 (the system; idempotent when two workers race)."""
    try:
        with transaction.atomic():
            ruleset = RuleSet.objects.create(version=1, note="default rules")
            Rule.objects.bulk_create(
                Rule(
                    ruleset=ruleset,
                    key=r.key,
                    cause=r.cause,
                    title=r.title,
                    kind=r.kind,
                    params=r.params,
                    severity=r.severity,
                    action=r.action,
                    enabled=r.enabled,
                )
                for r in DEFAULT_RULES
            )
            record_event(None, "health.rules.seed", ruleset, after={"rules": [r.key for r in DEFAULT_RULES]})
    except IntegrityError:
        pass  # another worker wrote version 1 first
    return RuleSet.objects.get(version=1)


def compiled_rules() -> CompiledRules:
    """The rules in force, compiled once per version and process (one query to learn the version)."""
    ruleset = active_ruleset()
    compiled = _compiled.get(ruleset.version)
    if compiled is None:
        compiled = compile_rules([_spec(r) for r in ruleset.rules.all()], ruleset.version)
        _compiled.clear()
        _compiled[ruleset.version] = compiled
    return compiled


TUNABLE = ("severity", "action", "enabled", "params")


def tune_rule(actor, key: str, *, note: str = "", reason: str = "", **changes) -> RuleSet:
    """Change one rule (severity, action, enabled, params): writes the next rule set version. Platform admins."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins tune health rules."))
    unknown = set(changes) - set(TUNABLE)
    if unknown:
        raise InvalidInput(_("These fields cannot be changed."), dict.fromkeys(unknown, _("Cannot be changed.")))
    current = active_ruleset()
    rules = list(current.rules.all())
    target = next((r for r in rules if r.key == key), None)
    if target is None:
        raise NotFound(
            _("No rule %(key)s in rules v%(version)s.") % {"key": repr(key), "version": current.version},
            {"key": _("No such rule.")},
        )
    before = {field: getattr(target, field) for field in TUNABLE}
    after = {**before, **{k: v for k, v in changes.items() if v is not None}}
    if after == before:
        raise InvalidInput(_("Nothing changes."), {"params": _("Change a value first.")})
    try:
        validate(target.kind, after["params"], after["severity"], after["action"])
    except RuleError as exc:
        raise InvalidInput(
            _("Invalid rule %(key)s: %(field)s must be %(message)s.")
            % {"key": key, "field": exc.field, "message": exc.message},
            {exc.field: exc.message},
        ) from exc
    with transaction.atomic():
        try:
            with transaction.atomic():
                ruleset = RuleSet.objects.create(
                    version=current.version + 1,
                    note=note or f"{key}: {', '.join(sorted(k for k in after if after[k] != before[k]))} changed",
                    created_by=actor if getattr(actor, "pk", None) else None,
                )
        except IntegrityError as exc:
            raise Conflict(_("Someone else changed the rules just now; reload and try again.")) from exc
        copies = []
        for rule in rules:
            rule.pk, rule.ruleset = None, ruleset
            if rule.key == key:
                for field, value in after.items():
                    setattr(rule, field, value)
            copies.append(rule)
        Rule.objects.bulk_create(copies)
        record_event(
            actor,
            "health.rules.tune",
            ruleset,
            reason=reason,
            before={"version": current.version, key: before},
            after={"version": ruleset.version, key: after},
        )
    return ruleset
