"""Render the console's desired state as sacctmgr operations for one Slurm cluster.

The result is a list of argument vectors, never a shell string: the Slurm backend runs each with
subprocess (no shell), and `as_script()` only shows them, shell-quoted, for a preview. Every name
that reaches an argument is checked first (accounts, users, QOS, GRES types), so no argument can
start an option or carry a shell metacharacter.

Mapping (reference §3 and §6):
* tenant tree -> accounts, organizations under Slurm's root account, teams under their parent;
* queue       -> an account (queue.slurm_account) under its tenant's account, with
                 GrpTRES = guarantee + borrow limit per GPU type (the absolute maximum: Slurm has no
                 borrowing), -1 (no limit) when borrowing is unlimited, 0 for GPU types outside the
                 queue's quota; the untyped gres/gpu gets the sum when every type is capped;
* guarantee   -> fairshare = guaranteed GPUs x weight (at least 1), an approximation: Slurm has no
                 guarantee;
* tier        -> a QOS with Priority = the tier's value, Preempt = the preemptible tiers below it and
                 PreemptMode=REQUEUE when preemptible; queue accounts list every tier's QOS, the
                 lowest as DefaultQOS, and their users inherit the list;
* queue users -> user associations under the queue account; a per-user cap becomes GrpTRES on each.

Order: accounts (parents first), QOS, then the `modify` lines that set values, then users, so each
command refers only to what exists. Run against a real Slurm 22.05 slurmdbd, every command succeeds on
an empty database, and a replay converges: `add` of an existing account, QOS or user exits 1 with
"Nothing new added." (the caller treats that as done) and the `modify` lines set every value again.
Not converged by a replay: moving an existing account to a new parent, and emptying a QOS's Preempt
list (see `_qos_settings`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from apps.backends.render.caveats import caveats_for, slurm_config_caveats
from apps.backends.render.desired import DesiredState, QueueSpec, QuotaLine
from apps.backends.render.errors import RenderError
from apps.backends.render.model import Plan, build_plan, line_max, queue_label, queue_weight
from apps.backends.render.result import comment_block

SACCTMGR = ("sacctmgr", "-i")  # -i: commit without asking, as a program must
ROOT_ACCOUNT = "root"
UNLIMITED = -1  # sacctmgr: a TRES set to -1 has no limit (and clears an earlier one)

# Accounts and QOS: lower-case letters, digits, '-' and '_'; never a leading '-', which sacctmgr would
# read as an option.
_ACCOUNT = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_USER = re.compile(r"^[a-z_][a-z0-9_.-]*$")  # POSIX-style login names
_GRES_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Patterns are used with fullmatch ("$" alone would let a trailing newline through).
# What any argument may contain: nothing a shell or sacctmgr's own parser would treat specially.
SAFE_ARGUMENT = re.compile(r"^[A-Za-z0-9_./:=,+-]*$")


@dataclass
class SlurmRender:
    """sacctmgr argument vectors in dependency order, and what Slurm cannot express."""

    commands: list[list[str]] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    cluster: str = ""
    # The caveats about slurm.conf settings (AccountingStorageTRES, AccountingStorageEnforce): a push to a live
    # cluster reads its configuration and reports what is actually missing instead of these.
    config_caveats: list[str] = field(default_factory=list)
    # The TRES the limits name: gres/gpu and gres/gpu:<type> of every GPU model.
    tres: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the desired-state page shows: the commands as a script, caveats as comments."""
        return self.as_script()

    def as_script(self) -> str:
        """A readable shell script for the UI preview; each argv shell-quoted with shlex.join."""
        name = re.sub(r"[^A-Za-z0-9_.-]", "?", self.cluster)  # a comment must not be able to end its line
        lines = [
            "#!/bin/sh",
            f"# sacctmgr operations for Slurm cluster {name}, rendered by the GPU console.",
            "# 'add' of an association that already exists is refused by sacctmgr; the 'modify' lines set the values.",
        ]
        if self.caveats:
            lines.append("#")
            lines.append("# Caveats: what Slurm cannot express of the console's model")
            lines.append(comment_block(self.caveats).rstrip("\n"))
        lines.append("")
        lines += [shlex.join(argv) for argv in self.commands]
        return "\n".join(lines) + "\n"


def render_slurm(state: DesiredState) -> SlurmRender:
    """The sacctmgr operations that give one Slurm cluster the console's accounts, limits and QOS."""
    plan = build_plan(state)
    queues = _bound_queues(plan)
    gres = _gres_types(plan)
    _check_tiers(plan)
    fairshare = _fairshare(plan, queues)
    tiers = [tier.name for tier in plan.tiers]

    commands: list[list[str]] = []
    for tenant in plan.tenants:
        _require(_ACCOUNT, tenant.slug, f"tenant {tenant.slug}: slug", "account")
        parent = tenant.parent or ROOT_ACCOUNT
        commands.append(_cmd("add", "account", tenant.slug, f"parent={parent}", f"fairshare={fairshare[tenant.slug]}"))
    for queue in queues:
        account = queue.slurm_account
        commands.append(_cmd("add", "account", account, f"parent={queue.tenant}", f"fairshare={fairshare[account]}"))
    commands += [_cmd("add", "qos", name) for name in tiers]
    commands += [_qos_settings(plan, tier_name) for tier_name in tiers]
    for tenant in plan.tenants:
        commands.append(_cmd("modify", "account", tenant.slug, "set", f"fairshare={fairshare[tenant.slug]}"))
    for queue in queues:
        settings = [f"fairshare={fairshare[queue.slurm_account]}", _grp_tres(plan, queue, gres)]
        if tiers:
            settings += [f"QOS={','.join(tiers)}", f"DefaultQOS={tiers[-1]}"]  # lowest tier unless asked
        commands.append(_cmd("modify", "account", queue.slurm_account, "set", *settings))
    for queue in queues:
        per_user = _per_user_tres(plan, queue, gres)
        for user in sorted(set(queue.users)):
            commands.append(_cmd("add", "user", user, f"account={queue.slurm_account}"))
            if per_user:
                commands.append(
                    _cmd("modify", "user", "where", f"name={user}", f"account={queue.slurm_account}", "set", per_user)
                )
    for argv in commands:  # belt and braces: the checks above should make this unreachable
        bad = [arg for arg in argv if not SAFE_ARGUMENT.fullmatch(arg)]
        if bad:
            raise RenderError("sacctmgr arguments", f"unsafe characters in {bad!r}")

    caveats = caveats_for("slurm")
    tres = ["gres/gpu", *(f"gres/gpu:{gres[code]}" for code in plan.models)]
    needs = f"For this cluster, slurm.conf needs AccountingStorageTRES to include {','.join(tres)}."
    config_caveats = [c for c in caveats if c in slurm_config_caveats()] + [needs]
    caveats.append(needs)
    caveats += plan.weight_caveats(queues, "Slurm fairshare")
    caveats += [
        f"Queue {queue_label(q)} has no Slurm account on this cluster: nothing is rendered for it."
        for q in plan.queues
        if not q.slurm_account
    ]
    return SlurmRender(
        commands=commands, caveats=caveats, cluster=state.cluster, config_caveats=config_caveats, tres=tres
    )


def _cmd(*args: str) -> list[str]:
    return [*SACCTMGR, *args]


def _require(pattern: re.Pattern[str], value: str, where: str, kind: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        allowed = {
            "account": "lower-case letters, digits, '-' and '_', starting with a letter or digit",
            "user": "lower-case letters, digits, '_', '.' and '-', starting with a letter or '_'",
            "gres": "letters, digits, '_', '.' and '-', starting with a letter or digit",
        }[kind]
        raise RenderError(where, f"{value!r} is not a valid Slurm {kind} name ({allowed})")
    return value


def _bound_queues(plan: Plan) -> list[QueueSpec]:
    """Queues with a Slurm account here, each account used once and distinct from tenant accounts."""
    owner: dict[str, str] = {ROOT_ACCOUNT: "Slurm's root account"}
    for tenant in plan.tenants:
        if tenant.slug in owner:
            raise RenderError(f"tenant {tenant.slug}: slug", f"the Slurm account name is taken by {owner[tenant.slug]}")
        owner[tenant.slug] = f"tenant {tenant.slug}"
    bound = []
    for queue in plan.queues:
        if not queue.slurm_account:
            continue
        account = _require(_ACCOUNT, queue.slurm_account, f"queue {queue_label(queue)}: slurm_account", "account")
        if account in owner:
            raise RenderError(
                f"queue {queue_label(queue)}: slurm_account", f"{account!r} is already the account of {owner[account]}"
            )
        owner[account] = f"queue {queue_label(queue)}"
        for user in queue.users:
            _require(_USER, user, f"queue {queue_label(queue)}: user", "user")
        bound.append(queue)
    return bound


def _gres_types(plan: Plan) -> dict[str, str]:
    """GPU model code -> GRES type, checked and one-to-one (two models on one type could not be told apart)."""
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for code, model in plan.models.items():
        gres = _require(_GRES_TYPE, model.slurm_gres_type, f"GPU model {code}: slurm_gres_type", "gres")
        if gres in seen:
            raise RenderError(f"GPU model {code}: slurm_gres_type", f"{gres!r} is also the GRES type of {seen[gres]}")
        seen[gres] = code
        out[code] = gres
    return out


def _check_tiers(plan: Plan) -> None:
    for tier in plan.tiers:
        _require(_ACCOUNT, tier.name, f"tier {tier.name}: name", "account")
        if tier.value < 0:
            raise RenderError(f"tier {tier.name}: value", f"{tier.value} is negative; Slurm QOS priorities start at 0")


def _fairshare(plan: Plan, queues: list[QueueSpec]) -> dict[str, int]:
    """Shares per account: guaranteed GPUs (all models) x weight, at least 1.

    Fair Tree compares siblings, and a tenant's queues and sub-teams are siblings, so both use the same
    unit; a tenant counts every queue below it that has an account here.
    """
    shares: dict[str, int] = {}
    guaranteed: dict[str, int] = {tenant.slug: 0 for tenant in plan.tenants}
    for queue in queues:
        total = sum(line.guaranteed for line in queue.quotas)
        shares[queue.slurm_account] = max(1, round(total * queue_weight(queue)))
        guaranteed[queue.tenant] += total
    for tenant in reversed(plan.tenants):  # children before parents
        if tenant.parent is not None:
            guaranteed[tenant.parent] += guaranteed[tenant.slug]
        shares[tenant.slug] = max(1, round(guaranteed[tenant.slug] * tenant.weight))
    return shares


def _qos_settings(plan: Plan, name: str) -> list[str]:
    tier = next(t for t in plan.tiers if t.name == name)
    settings = [f"Priority={tier.value}"]
    victims = [t.name for t in plan.tiers if t.preemptible and t.value < tier.value]
    # Preempt: the preemptible tiers strictly below. An empty list is left out rather than sent as
    # "Preempt=": on Slurm 22.05 that empty value makes every later Preempt list naming this QOS fail
    # with "QOS Preemption loop detected" (seen against a real slurmdbd).
    if victims:
        settings.append(f"Preempt={','.join(victims)}")
    settings.append(f"PreemptMode={'REQUEUE' if tier.preemptible else 'CLUSTER'}")  # CLUSTER: slurm.conf's
    return _cmd("modify", "qos", name, "set", *settings)


def _grp_tres(plan: Plan, queue: QueueSpec, gres: dict[str, str]) -> str:
    lines: dict[str, QuotaLine] = {line.gpu_model: line for line in queue.quotas}
    typed = []
    maxima: list[int | None] = []
    for code in plan.models:
        line = lines.get(code)
        maximum = 0 if line is None else line_max(line)
        maxima.append(maximum)
        typed.append(f"gres/gpu:{gres[code]}={UNLIMITED if maximum is None else maximum}")
    total = UNLIMITED if any(m is None for m in maxima) else sum(m for m in maxima if m is not None)
    return "GrpTRES=" + ",".join([f"gres/gpu={total}", *typed])


def _per_user_tres(plan: Plan, queue: QueueSpec, gres: dict[str, str]) -> str:
    """GrpTRES for each user association of the queue, or "" when the queue has no per-user cap."""
    caps = {line.gpu_model: line.per_user_limit for line in queue.quotas}
    if all(cap is None for cap in caps.values()):
        return ""
    parts = []
    for code in plan.models:
        if code in caps:
            cap = caps[code]
            parts.append(f"gres/gpu:{gres[code]}={UNLIMITED if cap is None else cap}")
    return "GrpTRES=" + ",".join(parts)
