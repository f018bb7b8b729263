"""Quota push to Slurm: the tenancy desired state as sacctmgr operations, diffed against `sacctmgr show` first.

The caller passes the DesiredState (tenancy builds it); the pusher adds this cluster's own settings (its
GRES type per GPU model, the console's submit user on every queue account). The operations come from the
quota renderer (apps/backends/render/slurm.py: accounts, QOS per tier with
Preempt/PreemptMode, GrpTRES per GPU type, user associations). `plan()` reads what slurmdbd holds and
keeps only the operations that change something, each with a one-line description: that list is the
dry-run diff. `apply()` runs them. The cluster's live configuration (`scontrol show config`, what slurmctld
runs with, not a copy of slurm.conf) says which TRES it accounts: a GPU type missing from its
AccountingStorageTRES is left out of the limits with a message naming it (a limit on a TRES the cluster does
not account never holds), and AccountingStorageEnforce without `limits` is reported. Those checked messages
replace the renderer's generic caveats about both settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from apps.backends.render.desired import DesiredState
from apps.backends.render.slurm import render_slurm
from apps.backends.slurm.cli import Cli
from apps.backends.slurm.settings import SlurmSettings
from apps.backends.types import PushResult

ASSOC_FORMAT = "account,user,parentname,fairshare,grptres,qos,defaultqos"
QOS_FORMAT = "name,priority,preempt,preemptmode"


@dataclass
class Change:
    argv: list[str]
    description: str


@dataclass(frozen=True)
class PlannedChange:
    """One line of a push preview, shaped like the Kubernetes backend's (`action`, `describe()`)."""

    action: str  # "change" or "unchanged"
    text: str = ""

    def describe(self) -> str:
        return self.text


@dataclass
class QuotaPlan:
    """The dry-run diff: what apply() would run, what is already so, and what cannot be pushed."""

    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0
    messages: list[str] = field(default_factory=list)

    def diff(self) -> list[str]:
        return [c.description for c in self.changes]

    def preview(self) -> list[PlannedChange]:
        """The sacctmgr operations a push would run, then one entry per association or QOS already right."""
        return [PlannedChange("change", f"run sacctmgr: {c.description}") for c in self.changes] + [
            PlannedChange("unchanged") for _ in range(self.unchanged)
        ]


def _tres(text: str) -> dict[str, str]:
    """ "gres/gpu=4,gres/gpu:a100=4" -> {...}; a -1 (no limit) is the same as absent."""
    pairs = (item.split("=", 1) for item in text.split(",") if "=" in item)
    return {k.lower(): v for k, v in pairs if v != "-1"}


def _names(text: str) -> set[str]:
    return {n.lower() for n in text.split(",") if n}


class QuotaPusher:
    def __init__(self, cli: Cli, settings: SlurmSettings):
        self.cli = cli
        self.settings = settings

    # What slurmdbd holds

    def _rows(self, *argv: str) -> list[list[str]]:
        out = self.cli.run(["sacctmgr", "-n", "-P", *argv])
        return [line.split("|") for line in out.splitlines() if line.strip()]

    def associations(self) -> dict[tuple[str, str], dict[str, str]]:
        """(account, user) -> settings; user is "" for the account's own association."""
        keys = ASSOC_FORMAT.split(",")
        rows = self._rows("show", "assoc", f"format={ASSOC_FORMAT}", f"cluster={self.settings.cluster}")
        return {(r[0], r[1]): dict(zip(keys, r, strict=False)) for r in rows}

    def account_parents(self) -> dict[str, str]:
        return {account: row["parentname"] for (account, user), row in self.associations().items() if not user}

    def qos(self) -> dict[str, dict[str, str]]:
        keys = QOS_FORMAT.split(",")
        return {r[0]: dict(zip(keys, r, strict=False)) for r in self._rows("show", "qos", f"format={QOS_FORMAT}")}

    def live_config(self) -> dict[str, str]:
        """slurmctld's running configuration, `scontrol show config` ("Name = value" lines)."""
        config = {}
        for line in self.cli.run(["scontrol", "show", "config"]).splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() and " " not in name.strip():
                config[name.strip()] = value.strip()
        return config

    # Plan and apply

    def plan(self, state: DesiredState) -> QuotaPlan:
        # The console's own Slurm user submits every queue's jobs: it needs an association with each account.
        queues = tuple(
            replace(q, users=tuple(sorted({*q.users, self.settings.submit_user}))) if q.slurm_account else q
            for q in state.queues
        )
        # GPU models by this cluster's GRES type names (connection gres_models), where they differ from the code.
        models = tuple(replace(m, slurm_gres_type=self.settings.gres_of(m.code)) for m in state.gpu_models)
        render = render_slurm(replace(state, queues=queues, gpu_models=models))
        assocs, qos, config = self.associations(), self.qos(), self.live_config()
        plan = QuotaPlan(messages=[c for c in render.caveats if c not in render.config_caveats])
        plan.messages += self._config_messages(config, render.tres)
        # https://slurm.schedmd.com/slurm.conf.html#OPT_AccountingStorageTRES: gres/gpu counts GPUs of every type;
        # a type is tracked (and can be limited) only when gres/gpu:<type> is listed as well.
        tres = _names(config.get("AccountingStorageTRES", ""))
        for argv in render.commands:
            argv = self._accounted_only(argv, tres)
            description = self._change(argv[2:], assocs, qos)
            if description is None:
                plan.unchanged += 1
            else:
                plan.changes.append(Change(argv, description))
        return plan

    @staticmethod
    def _config_messages(config: dict[str, str], wanted: list[str]) -> list[str]:
        """What the running configuration lacks for the pushed limits to count, in the admin's terms."""
        messages = []
        accounted = config.get("AccountingStorageTRES", "")
        missing = [t for t in wanted if t.lower() not in _names(accounted)]
        if missing:
            messages.append(
                f"AccountingStorageTRES lacks {','.join(missing)} (scontrol show config: {accounted or '(none)'}): "
                "add them to slurm.conf and restart slurmctld; until then their limits are not pushed"
            )
        enforce = config.get("AccountingStorageEnforce", "")
        if not {"limits", "safe"} & _names(enforce):
            messages.append(
                f"AccountingStorageEnforce is {enforce or '(none)'} (scontrol show config): without limits the "
                "pushed GrpTRES are recorded but never hold"
            )
        return messages

    def apply(self, plan: QuotaPlan) -> PushResult:
        for change in plan.changes:
            # An `add` that lost a race with another push exits 1 with "Nothing new added.": already done.
            result = self.cli.call(change.argv)
            if result.returncode != 0 and "Nothing new added" not in result.stdout:
                raise self.cli.error(change.argv, result)
        return PushResult(applied=len(plan.changes), unchanged=plan.unchanged, messages=plan.diff() + plan.messages)

    def push(self, state: DesiredState) -> PushResult:
        return self.apply(self.plan(state))

    @staticmethod
    def _accounted_only(argv: list[str], tres: set[str]) -> list[str]:
        """The operation without GrpTRES items on TRES the cluster does not account (named in the messages)."""
        out = []
        for arg in argv:
            if arg.startswith("GrpTRES="):
                items = arg.removeprefix("GrpTRES=").split(",")
                kept = [i for i in items if i.split("=")[0].lower() in tres]
                if not kept:
                    continue
                arg = "GrpTRES=" + ",".join(kept)
            out.append(arg)
        return out

    @staticmethod
    def _settings(args: list[str]) -> dict[str, str]:
        return {k.lower(): v for k, _, v in (a.partition("=") for a in args if "=" in a)}

    def _change(self, args: list[str], assocs: dict, qos: dict) -> str | None:
        """What one sacctmgr operation would change, or None when slurmdbd already holds it."""
        verb, entity = args[0], args[1]
        if verb == "add" and entity == "account":
            name, settings = args[2], self._settings(args[3:])
            if (name, "") in assocs:
                return None
            return f"add account {name} under {settings.get('parent', 'root')}"
        if verb == "add" and entity == "qos":
            return None if args[2] in qos else f"add QOS {args[2]}"
        if verb == "add" and entity == "user":
            user, account = args[2], self._settings(args[3:])["account"]
            return None if (account, user) in assocs else f"add user {user} to account {account}"
        if verb == "modify" and entity == "qos":
            name, wanted = args[2], self._settings(args[4:])
            have = qos.get(name, {})
            return self._diff(f"QOS {name}", wanted, have)
        if verb == "modify" and entity == "account":
            name, wanted = args[2], self._settings(args[4:])
            return self._diff(f"account {name}", wanted, assocs.get((name, ""), {}))
        if verb == "modify" and entity == "user":
            where = self._settings(args[3 : args.index("set")])
            wanted = self._settings(args[args.index("set") + 1 :])
            have = assocs.get((where["account"], where["name"]), {})
            return self._diff(f"user {where['name']} in {where['account']}", wanted, have)
        return " ".join(args)  # an operation this diff does not know: always run it

    @staticmethod
    def _diff(what: str, wanted: dict[str, str], have: dict[str, str]) -> str | None:
        changed = []
        for key, value in wanted.items():
            current = have.get(key, "")
            if key == "grptres":
                same = _tres(value) == _tres(current)
            elif key in ("qos", "preempt"):
                same = _names(value) == _names(current)
            else:
                same = value.lower() == current.lower()
            if not same:
                changed.append(f"{key} {current or '(none)'} -> {value}")
        return f"{what}: " + "; ".join(changed) if changed else None
