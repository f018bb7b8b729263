"""The Slurm renderer: sacctmgr argument vectors, their order, their safety, and what Slurm cannot express."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from apps.backends.render import RenderError, render_slurm
from apps.backends.render.desired import GpuModelRef, QueueSpec, TenantSpec, TierSpec
from apps.backends.render.slurm import SAFE_ARGUMENT
from tests.render.states import QUEUES, representative_state, with_queues


@pytest.fixture(scope="module")
def commands() -> list[list[str]]:
    return render_slurm(representative_state()).commands


def index(commands: list[list[str]], *prefix: str) -> int:
    """Position of the first command starting with sacctmgr -i <prefix...>."""
    return next(i for i, argv in enumerate(commands) if argv[2 : 2 + len(prefix)] == list(prefix))


def settings(commands: list[list[str]], *prefix: str) -> dict[str, str]:
    argv = commands[index(commands, *prefix)]
    return dict(arg.split("=", 1) for arg in argv[argv.index("set") + 1 :])


def test_every_command_is_an_sacctmgr_argv_that_commits_without_prompting(commands):
    assert commands
    assert all(argv[:2] == ["sacctmgr", "-i"] and all(isinstance(a, str) for a in argv) for argv in commands)


def test_account_tree_parents_first(commands):
    adds = [argv[4:] for argv in commands if argv[2:4] == ["add", "account"]]
    assert adds[:7] == [
        ["product", "parent=root", "fairshare=1"],
        ["serving", "parent=product", "fairshare=1"],
        ["research", "parent=root", "fairshare=88"],  # (24 + 12 + 8) GPUs x weight 2
        ["nlp", "parent=research", "fairshare=8"],
        ["vision", "parent=research", "fairshare=36"],
        ["vision-3d", "parent=vision", "fairshare=12"],
        ["nerf", "parent=vision-3d", "fairshare=18"],  # 12 x 1.5
    ]
    # queue accounts under their tenant's account; fairshare = guaranteed GPUs x queue weight
    assert adds[7:] == [
        ["nlp_ft", "parent=nlp", "fairshare=8"],
        ["vision_train", "parent=vision", "fairshare=24"],
        ["nerf_exp", "parent=nerf", "fairshare=16"],  # 12 x 1.333
    ]
    created: set[str] = {"root"}
    for account, parent, _ in adds:
        assert parent.removeprefix("parent=") in created
        created.add(account)


def test_grp_tres_is_the_absolute_maximum_per_gpu_type(commands):
    # h100 16 + 8; a100 unlimited (-1 also clears an earlier cap); l40s outside the quota: 0
    assert settings(commands, "modify", "account", "vision_train")["GrpTRES"] == (
        "gres/gpu=-1,gres/gpu:h100=24,gres/gpu:a100=-1,gres/gpu:l40s=0"
    )
    # every type capped: the untyped total is capped too
    assert settings(commands, "modify", "account", "nlp_ft")["GrpTRES"] == (
        "gres/gpu=8,gres/gpu:h100=8,gres/gpu:a100=0,gres/gpu:l40s=0"
    )


def test_one_qos_per_tier_with_preempt_lists(commands):
    assert [argv[4] for argv in commands if argv[2:4] == ["add", "qos"]] == [
        "online-inference",
        "periodic",
        "training",
        "exploratory",
    ]
    qos = {argv[4]: dict(a.split("=", 1) for a in argv[6:]) for argv in commands if argv[2:4] == ["modify", "qos"]}
    assert qos == {
        "online-inference": {"Priority": "1000", "Preempt": "periodic,training,exploratory", "PreemptMode": "CLUSTER"},
        "periodic": {"Priority": "800", "Preempt": "training,exploratory", "PreemptMode": "REQUEUE"},
        "training": {"Priority": "500", "Preempt": "exploratory", "PreemptMode": "REQUEUE"},
        # nothing to preempt: no "Preempt=" at all (an empty value breaks later Preempt lists on Slurm 22.05)
        "exploratory": {"Priority": "100", "PreemptMode": "REQUEUE"},
    }
    # a non-preemptible tier is in no Preempt list
    assert all("online-inference" not in q.get("Preempt", "").split(",") for q in qos.values())


def test_queue_accounts_get_every_tier_with_the_lowest_as_default(commands):
    for account in ("nlp_ft", "vision_train", "nerf_exp"):
        s = settings(commands, "modify", "account", account)
        assert s["QOS"] == "online-inference,periodic,training,exploratory"
        assert s["DefaultQOS"] == "exploratory"
    assert index(commands, "modify", "qos") > index(commands, "add", "qos")
    assert index(commands, "modify", "account") > max(i for i, a in enumerate(commands) if a[2:4] == ["modify", "qos"])


def test_users_come_last_and_per_user_caps_become_user_grp_tres(commands):
    users = [argv[2:] for argv in commands if argv[3] == "user"]
    assert users == [
        ["add", "user", "dave", "account=nlp_ft"],
        ["add", "user", "erin", "account=nlp_ft"],
        ["add", "user", "alice", "account=vision_train"],
        ["add", "user", "bob", "account=vision_train"],
        ["add", "user", "carol", "account=nerf_exp"],
        [
            "modify",
            "user",
            "where",
            "name=carol",
            "account=nerf_exp",
            "set",
            "GrpTRES=gres/gpu:a100=2,gres/gpu:l40s=-1",
        ],
    ]
    assert index(commands, "add", "user") > max(i for i, a in enumerate(commands) if a[3] == "account")


def test_queue_without_slurm_account_is_skipped_with_a_caveat():
    result = render_slurm(representative_state())
    assert not any("serving" in arg and "online" in arg for argv in result.commands for arg in argv)
    assert any("serving/online has no Slurm account" in c for c in result.caveats)


def test_caveats_state_what_slurm_cannot_express():
    text = "\n".join(render_slurm(representative_state()).caveats)
    for needle in [
        "no lend limit",
        "no guarantee",
        "AccountingStorageEnforce=limits",
        "AccountingStorageTRES to include gres/gpu,gres/gpu:h100,gres/gpu:a100,gres/gpu:l40s",
        "keeps its GPUs",
        "unrelated to preemption",
    ]:
        assert needle in text


# --- safety ------------------------------------------------------------------------------------------------


def test_no_argument_carries_a_shell_metacharacter(commands):
    for argv in commands:
        for arg in argv:
            assert SAFE_ARGUMENT.fullmatch(arg), arg
            assert not arg.startswith("-") or arg == "-i"


def test_script_is_the_argv_shell_quoted_line_by_line(commands):
    script = render_slurm(representative_state()).as_script()
    lines = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert [shlex.split(line) for line in lines] == commands
    assert script.startswith("#!/bin/sh\n")


def test_cluster_name_cannot_break_out_of_the_script_comment():
    script = render_slurm(representative_state(cluster="east\nrm -rf /")).as_script()
    assert "\nrm -rf /" not in script
    assert all(line.startswith(("#", "sacctmgr ")) or not line for line in script.splitlines())


def bad(state, message: str) -> None:
    with pytest.raises(RenderError) as exc:
        render_slurm(state)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    "account",
    [
        "Team_A",
        "team a",
        "team;rm",
        "$(reboot)",
        "-team",
        "_team",
        "team`id`",
        "t\nx",
        "team\n",
        "tëam",
        "team/a",
        "a,b",
        "a=b",
    ],
)
def test_bad_account_names_are_rejected(account):
    bad(
        with_queues(representative_state(), QueueSpec("nlp", "q", slurm_account=account)),
        "is not a valid Slurm account name",
    )


@pytest.mark.parametrize("user", ["Alice", "al ice", "bob;id", "-x", "$USER", "a,b", "a=b", "", "bob\n"])
def test_bad_user_names_are_rejected(user):
    bad(
        with_queues(representative_state(), QueueSpec("nlp", "q", slurm_account="nlp_q", users=(user,))),
        "not a valid Slurm user",
    )


@pytest.mark.parametrize("gres", ["h100,gres/gpu=0", "h 100", "h100:8", "", "-h"])
def test_bad_gres_types_are_rejected(gres):
    state = representative_state()
    models = (GpuModelRef("h100", "H100", "NVIDIA-H100", gres), *state.gpu_models[1:])
    bad(replace(state, gpu_models=models), "not a valid Slurm gres name")


def test_two_models_on_one_gres_type_are_rejected():
    state = representative_state()
    models = (*state.gpu_models, GpuModelRef("h100-sxm", "H100 SXM", "NVIDIA-H100-SXM", "h100"))
    bad(replace(state, gpu_models=models), "also the GRES type of h100")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: with_queues(
                s, QueueSpec("nlp", "a", slurm_account="x"), QueueSpec("nlp", "b", slurm_account="x")
            ),
            "already the account of queue nlp/a",
        ),
        (
            lambda s: with_queues(s, QueueSpec("nlp", "a", slurm_account="vision")),
            "already the account of tenant vision",
        ),
        (lambda s: with_queues(s, QueueSpec("nlp", "a", slurm_account="root")), "Slurm's root account"),
        (lambda s: replace(s, tenants=(*s.tenants, TenantSpec("root", "Root", None))), "taken by Slurm's root account"),
        (lambda s: replace(s, tiers=(TierSpec("neg", -5, True, True),)), "Slurm QOS priorities start at 0"),
    ],
)
def test_rejects_what_slurm_cannot_take(change, message):
    bad(change(representative_state()), message)


def test_queue_without_quota_lines_is_capped_at_zero():
    state = with_queues(representative_state(), *QUEUES, QueueSpec("nlp", "idle", slurm_account="nlp_idle", quotas=()))
    commands = render_slurm(state).commands
    assert settings(commands, "modify", "account", "nlp_idle")["GrpTRES"] == (
        "gres/gpu=0,gres/gpu:h100=0,gres/gpu:a100=0,gres/gpu:l40s=0"
    )
    assert settings(commands, "modify", "account", "nlp_idle")["fairshare"] == "1"
