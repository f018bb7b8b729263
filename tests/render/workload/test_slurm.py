"""sbatch scripts: directives from validated values only, and hostile input runs as exactly the given argv.

The execution tests run the rendered script with bash (its #SBATCH lines are comments to bash) with fake
`srun`, `torchrun`, `scontrol`, `curl` and engine programs first on PATH. Each fake records the argv it
received, NUL-separated, so the test compares lists, not strings.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from apps.backends.render.errors import RenderError
from apps.backends.render.spec import SecretEnv
from apps.backends.render.workload import render_slurm
from apps.backends.render.workload.engines import engine_argv
from apps.backends.render.workload.network import Fabric
from apps.backends.render.workload.slurm import slurm_time
from apps.workloads.specs import DEFAULT_IMAGES, ENGINES, apply_overrides, parse_spec
from apps.workloads.specs.model import ENGINE_FLAGS
from tests.render.workload.cases import CATALOG, SERVE, SMALL, TRAINING, slurm_context
from tests.render.workload.fakes import base_env, hostile, recorded, recorded_env, write_fake

SLURM_ENV = {"SLURM_JOB_NODELIST": "gpu-[01-02]", "SLURM_NNODES": "2", "SLURM_JOB_ID": "4711", "SLURM_NODEID": "0"}
# srun: record, drop srun's own options (the renderer writes each as one --option=value word), run the rest.
SRUN = 'while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"'
# torchrun: record, then run what follows its "--" (torchrun --no-python does that).
TORCHRUN = 'while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"'
SCONTROL = "printf 'gpu-01\\ngpu-02\\n'"


def train(**overrides):
    return parse_spec("training", apply_overrides(TRAINING, overrides), CATALOG)


def serve(**overrides):
    return parse_spec("inference", apply_overrides(SERVE, overrides), CATALOG)


def directives(script: str) -> list[str]:
    """The #SBATCH lines sbatch reads: those before the first line that is neither a comment nor blank."""
    found = []
    for line in script.split("\n")[1:]:
        if line.startswith("#SBATCH"):
            found.append(line)
        elif line.strip() and not line.startswith("#"):
            break
    return found


@pytest.fixture
def sandbox(tmp_path):
    """(bin dir, record dir, run) with the fakes installed; run(script) executes it with bash."""
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    write_fake(bin_dir, "srun", SRUN)
    write_fake(bin_dir, "torchrun", TORCHRUN)
    write_fake(bin_dir, "scontrol", SCONTROL)
    write_fake(bin_dir, "train")

    def run(script: str, **env: str) -> subprocess.CompletedProcess:
        path = tmp_path / "job.sh"
        path.write_text(script)
        environment = base_env(bin_dir, record, tmp_path, **{**SLURM_ENV, **env})
        return subprocess.run(["bash", str(path)], env=environment, cwd=tmp_path, capture_output=True, timeout=60)

    return bin_dir, record, run


# --- hostile input runs exactly the given argv ------------------------------------------------------------------


def test_hostile_training_command_args_and_env_run_exactly_as_given(tmp_path, sandbox):
    _, record, run = sandbox
    pwned = tmp_path / "pwned"
    values = hostile(pwned)
    env = {f"HOSTILE_{i}": value for i, value in enumerate(values)}
    spec = train(command=["train", *values], args=["--", *values], env=env)
    script = render_slurm(spec, slurm_context()).script

    result = run(script)

    assert result.returncode == 0, result.stderr.decode()
    assert recorded(record, "train") == [*values, "--", *values]
    assert recorded(record, "torchrun") == [
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=gpu-01:29500",
        "--rdzv-id=4711",
        "--max-restarts=0",
        "--no-python",
        "--",
        "train",
        *values,
        "--",
        *values,
    ]
    assert recorded(record, "srun")[:2] == ["--kill-on-bad-exit=1", "torchrun"]
    seen = recorded_env(record, "train")
    assert {name: seen[name] for name in env if name in seen} == {n: v for n, v in env.items()}
    assert not pwned.exists()
    assert not list(tmp_path.glob("*HOME*")) and not (tmp_path / ">").exists()


def test_no_user_value_can_add_or_end_a_directive(tmp_path):
    values = hostile(tmp_path / "pwned")
    spec = train(command=["train", *values], args=values, env={f"V{i}": v for i, v in enumerate(values)})
    script = render_slurm(spec, slurm_context()).script
    lines = script.split("\n")
    sbatch_lines = [line for line in lines if line.startswith("#SBATCH")]
    assert sbatch_lines == directives(script)  # every #SBATCH line is in the header
    assert len(sbatch_lines) == 10
    # No value introduces a line of its own: every line starts with something the renderer wrote.
    starts = (
        "#",
        "set -euo pipefail",
        "export V",
        "export NCCL_DEBUG=",
        "export WANDB_PROJECT=",
        "mapfile ",
        "head_node=",
    )
    body = [line for line in lines if line]
    assert all(line.startswith((*starts, "srun --kill-on-bad-exit=1 torchrun ")) for line in body), body
    assert len([line for line in body if line.startswith("export ")]) == len(values) + 2


def test_hostile_inference_arguments_run_exactly_and_a_dead_engine_fails_the_job(tmp_path, sandbox):
    bin_dir, record, run = sandbox
    pwned = tmp_path / "pwned"
    values = [v for v in hostile(pwned) if v]
    # The engine "loads", answers /health (the fake curl sees the marker), serves a moment and dies.
    write_fake(bin_dir, "vllm", f"touch {tmp_path}/healthy\nsleep 0.3\nexit 0")
    write_fake(bin_dir, "curl", f'[ -e "{tmp_path}/healthy" ]')
    spec = serve(extra_args=values, env={"HOSTILE": values[0]}, readiness={"initial_delay_s": 30, "period_s": 1})
    script = render_slurm(spec, slurm_context()).script

    result = run(script)

    assert result.returncode == 1, result.stderr.decode()
    assert b"the engine is healthy" in result.stdout
    assert b"the engine stopped (status 0); a service is not meant to exit" in result.stderr
    assert recorded(record, "vllm") == engine_argv(spec)[1:]
    assert recorded(record, "curl") == ["-fsS", "-o", "/dev/null", "http://127.0.0.1:8000/health"]
    assert recorded_env(record, "vllm")["HOSTILE"] == values[0]
    assert not pwned.exists()


def test_an_engine_that_never_gets_healthy_fails_with_its_status(tmp_path, sandbox):
    bin_dir, _, run = sandbox
    write_fake(bin_dir, "vllm", "exit 3")
    write_fake(bin_dir, "curl", "exit 7")
    script = render_slurm(serve(readiness={"initial_delay_s": 30, "period_s": 1}), slurm_context()).script
    result = run(script)
    assert result.returncode == 3
    assert b"the engine exited (status 3) before it became healthy" in result.stderr


def test_an_engine_that_misses_its_loading_budget_is_stopped(tmp_path, sandbox):
    bin_dir, _, run = sandbox
    write_fake(bin_dir, "vllm", "exec sleep 30")  # exec: the TERM the script sends reaches the sleeper
    write_fake(bin_dir, "curl", "exit 7")
    script = render_slurm(serve(readiness={"initial_delay_s": 1, "period_s": 1}), slurm_context()).script
    result = run(script)
    assert result.returncode == 1
    assert b"was not healthy after 1 s" in result.stderr


def test_sglang_across_nodes_gets_its_rank_from_slurm(tmp_path, sandbox):
    bin_dir, record, run = sandbox
    pwned = tmp_path / "pwned"
    flags = ENGINE_FLAGS["sglang"]
    values = [v for v in hostile(pwned) if v and v.split("=")[0] not in flags]
    write_fake(bin_dir, "python3", f"touch {tmp_path}/healthy\nsleep 0.3")
    write_fake(bin_dir, "curl", f'[ -e "{tmp_path}/healthy" ]')
    spec = serve(
        engine="sglang",
        image="lmsysorg/sglang:v0.5.3",
        tensor_parallel=16,
        extra_args=values,
        autoscaling=None,
        readiness={"initial_delay_s": 30, "period_s": 1},
    )
    result = run(render_slurm(spec, slurm_context()).script, SLURM_NODEID="1")
    assert result.returncode == 1, result.stderr.decode()
    assert recorded(record, "python3") == engine_argv(spec, distributed=("2", "1", "gpu-01:20000"))[1:]
    assert not pwned.exists()


def test_vllm_across_nodes_starts_ray_then_the_engine_on_the_head(tmp_path, sandbox):
    bin_dir, record, run = sandbox
    values = [v for v in hostile(tmp_path / "pwned") if v]
    write_fake(bin_dir, "ray")
    write_fake(bin_dir, "python3", 'echo "$SLURM_NNODES"')  # every node has joined the Ray cluster
    write_fake(bin_dir, "vllm", f"touch {tmp_path}/healthy\nsleep 0.3")
    write_fake(bin_dir, "curl", f'[ -e "{tmp_path}/healthy" ]')
    spec = serve(
        tensor_parallel=8,
        pipeline_parallel=2,
        extra_args=values,
        autoscaling=None,
        readiness={"initial_delay_s": 30, "period_s": 1},
    )
    rendered = render_slurm(spec, slurm_context())
    result = run(rendered.script)
    assert result.returncode == 1, result.stderr.decode()
    assert recorded(record, "vllm") == engine_argv(spec, ray=True)[1:]
    ray_calls = sorted([recorded(record, "ray", 0), recorded(record, "ray", 1)])
    assert ray_calls == [
        ["start", "--address=gpu-01:6379", "--disable-usage-stats", "--block"],
        ["start", "--head", "--port=6379", "--disable-usage-stats", "--block"],
    ]
    assert rendered.argv_preview[-len(engine_argv(spec, ray=True)) :] == engine_argv(spec, ray=True)


# --- directives -----------------------------------------------------------------------------------------------


def test_training_directives():
    assert directives(render_slurm(train(), slurm_context()).script) == [
        "#SBATCH --job-name=pretrain-8b",
        "#SBATCH --account=acme_train",
        "#SBATCH --qos=training",
        "#SBATCH --partition=gpu",
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gres=gpu:a100:8",
        "#SBATCH --time=2-00:00:00",
        "#SBATCH --output=/var/log/gpu-console/pretrain-8b-%j.out",
        "#SBATCH --requeue",
    ]
    options = directives(render_slurm(train(cpu=32, memory_gib=500, retries=0), slurm_context()).script)
    assert {"#SBATCH --cpus-per-task=32", "#SBATCH --mem=500G", "#SBATCH --no-requeue"} <= set(options)


def test_sharing_and_topology_on_slurm():
    mig = parse_spec(
        "training", apply_overrides(SMALL, {"sharing": {"mode": "mig", "mig_profile": "1g.10gb"}}), CATALOG
    )
    assert "#SBATCH --gres=gpu:a100_1g.10gb:1" in directives(render_slurm(mig, slurm_context()).script)
    site = render_slurm(mig, slurm_context(mig_gres_type="1g.10gb")).script
    assert "#SBATCH --gres=gpu:1g.10gb:1" in directives(site)
    sliced = parse_spec("training", apply_overrides(SMALL, {"sharing": {"mode": "time-slice", "replicas": 4}}), CATALOG)
    rendered = render_slurm(sliced, slurm_context())
    assert "#SBATCH --gres=shard:1" in directives(rendered.script) and "--nproc-per-node=1" in rendered.script
    mps = parse_spec("training", apply_overrides(SMALL, {"sharing": {"mode": "mps", "replicas": 4}}), CATALOG)
    rendered = render_slurm(mps, slurm_context())
    assert "#SBATCH --gres=mps:25" in directives(rendered.script) and "--nproc-per-node=1" in rendered.script
    assert not any(d.startswith("#SBATCH --gres=gpu") for d in directives(rendered.script))  # gpu and mps: never both
    hami = parse_spec(
        "training", apply_overrides(SMALL, {"sharing": {"mode": "hami", "gpumem_mib": 1000, "gpucores": 10}}), CATALOG
    )
    with pytest.raises(RenderError) as caught:
        render_slurm(hami, slurm_context())
    assert caught.value.field == "sharing.mode"
    leaf = directives(render_slurm(train(topology="leaf"), slurm_context()).script)
    assert "#SBATCH --switches=1" in leaf
    one_node = render_slurm(train(workers=2, gpus_per_worker=4, topology="node"), slurm_context())
    assert {"#SBATCH --nodes=1", "#SBATCH --gres=gpu:a100:8"} <= set(directives(one_node.script))
    assert "--nnodes=1 --nproc-per-node=8" in one_node.script
    with pytest.raises(RenderError, match="topology"):
        render_slurm(replace(sliced, workers=2, topology="node"), slurm_context())


@pytest.mark.parametrize(("replicas", "count"), [(2, 50), (4, 25), (5, 20), (10, 10), (20, 5), (25, 4)])
def test_an_mps_replica_on_slurm_is_its_whole_percentage_of_a_gpu(replicas, count):
    """gres/mps counts 100 per GPU (https://slurm.schedmd.com/gres.html#MPS_Management): 1/replicas of a GPU is
    mps:100/replicas, exactly what the console's quota and chargeback count."""
    spec = parse_spec("training", apply_overrides(SMALL, {"sharing": {"mode": "mps", "replicas": replicas}}), CATALOG)
    rendered = render_slurm(spec, slurm_context())
    assert f"#SBATCH --gres=mps:{count}" in directives(rendered.script)
    assert any(c.startswith(f"MPS: gres/mps:{count} per worker, {count}% of one GPU") for c in rendered.caveats)


@pytest.mark.parametrize("replicas", [3, 6, 7, 8, 16, 48])
def test_an_mps_replica_that_is_no_whole_percentage_is_refused_on_slurm(replicas):
    """mps:33 for 3 replicas would give each job less than the third quota counts (and mps:34 fits only two on a
    GPU): refused, naming the field and the replica counts that work."""
    spec = parse_spec("training", apply_overrides(SMALL, {"sharing": {"mode": "mps", "replicas": replicas}}), CATALOG)
    with pytest.raises(RenderError) as caught:
        render_slurm(spec, slurm_context())
    assert caught.value.field == "sharing.replicas"
    assert f"{replicas} replicas are not a whole percentage each; use 2, 4, 5, 10, 20, 25" in str(caught.value)


def test_elastic_training_asks_for_a_node_range():
    spec = train(workers=4, elastic={"min_workers": 2, "max_workers": 6, "checkpoint_path": "/ckpt/run"})
    script = render_slurm(spec, slurm_context()).script
    assert "#SBATCH --nodes=2-6" in directives(script)
    assert "torchrun --nnodes=2:6" in script and "--max-restarts=2" in script
    assert "export CHECKPOINT_PATH=/ckpt/run" in script


def test_inference_directives_and_replicas_as_an_array():
    script = render_slurm(serve(autoscaling=None, max_runtime_s=3600), slurm_context()).script
    assert directives(script) == [
        "#SBATCH --job-name=llama-70b",
        "#SBATCH --account=acme_train",
        "#SBATCH --qos=training",
        "#SBATCH --partition=gpu",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gres=gpu:a100:4",
        "#SBATCH --time=0-01:00:00",
        "#SBATCH --array=0-1",
        "#SBATCH --output=/var/log/gpu-console/llama-70b-%A_%a.out",
    ]
    one = directives(render_slurm(serve(autoscaling=None, replicas=1), slurm_context()).script)
    assert not any("--array" in d or "--time" in d for d in one)  # a service without max runtime: no limit
    multi = render_slurm(serve(tensor_parallel=8, pipeline_parallel=2, autoscaling=None), slurm_context())
    assert {"#SBATCH --nodes=2", "#SBATCH --gres=gpu:a100:8"} <= set(directives(multi.script))
    assert any("no autoscaling" in c for c in render_slurm(serve(), slurm_context()).caveats)


def test_caveats_are_comments_in_the_script():
    rendered = render_slurm(serve(), slurm_context())
    assert "# Caveats:" in rendered.script and rendered.caveats
    assert all(not line.startswith("#SBATCH") for line in rendered.script.split("\n") if "Caveat" in line)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"account": "acme\n#SBATCH --qos=high"}, "account"),
        ({"account": "-A"}, "account"),
        ({"qos": "high prio"}, "qos"),
        ({"qos": "HIGH"}, "qos"),
        ({"partition": "gpu;reboot"}, "partition"),
        ({"partition": ""}, "partition"),
        ({"gres_type": "a100 "}, "gres_type"),
        ({"gres_type": ""}, "gres_type"),
        ({"mig_gres_type": "1g 10gb"}, "mig_gres_type"),
        ({"output_dir": "logs"}, "output_dir"),
        ({"output_dir": "/var/log/../tmp"}, "output_dir"),
        ({"output_dir": "/var/log/%u"}, "output_dir"),
        ({"output_dir": "/var/log gpu"}, "output_dir"),
        ({"job_name": "Job Name"}, "job_name"),
        ({"rdzv_port": 0}, "rdzv_port"),
    ],
)
def test_values_for_directives_are_validated(override, field):
    with pytest.raises(RenderError) as caught:
        render_slurm(train(), slurm_context(**override))
    assert caught.value.field == field


def test_hand_built_specs_cannot_reach_a_directive_or_an_export():
    with pytest.raises(RenderError, match="job_name"):
        render_slurm(replace(train(), name="x\n#SBATCH --gres=gpu:99"), slurm_context())
    with pytest.raises(RenderError, match="env"):
        render_slurm(replace(train(), env={"A=1; touch /tmp/x; B": "1"}), slurm_context())
    with pytest.raises(TypeError):
        render_slurm(object(), slurm_context())  # type: ignore[arg-type]


SECRET = [{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}]


@pytest.mark.parametrize("make", [train, serve])
def test_secret_references_are_refused_by_name_where_the_cluster_keeps_no_secrets(make):
    """Without the cluster's secrets_dir there is nowhere to read the value from: refused naming the field and
    the setting, never run without the variable."""
    with pytest.raises(RenderError) as caught:
        render_slurm(make(secret_env=SECRET), slurm_context())
    assert caught.value.field == "secret_env" and "secrets_dir" in caught.value.reason


def test_a_secret_reaches_the_job_from_the_nodes_secrets_dir_and_never_the_script(tmp_path, sandbox):
    _, record, run = sandbox
    secrets = tmp_path / "secrets"
    (secrets / "hf-token").mkdir(parents=True)
    value = "hf_$(touch pwned) 'quoted' \\n; rm -rf /"
    (secrets / "hf-token" / "token").write_text(value)
    script = render_slurm(train(command=["train"], secret_env=SECRET), slurm_context(secrets_dir=str(secrets))).script
    assert "hf_" not in script  # the script names the file, never the value

    result = run(script)

    assert result.returncode == 0, result.stderr.decode()
    assert recorded_env(record, "train")["HF_TOKEN"] == value
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(("secret", "key"), [("..", "token"), ("hf", ".."), ("hf", "../../etc/shadow"), ("a/b", "k")])
def test_a_hand_built_secret_reference_cannot_leave_the_secrets_dir(secret, key):
    spec = replace(train(), secret_env=[SecretEnv(name="HF_TOKEN", secret=secret, key=key)])
    with pytest.raises(RenderError) as caught:
        render_slurm(spec, slurm_context(secrets_dir="/etc/gpu-console/secrets"))
    assert caught.value.field == "secret_env[0]"


def test_a_missing_secret_stops_the_job_before_it_starts(tmp_path, sandbox):
    _, record, run = sandbox
    script = render_slurm(serve(secret_env=SECRET), slurm_context(secrets_dir=str(tmp_path / "none"))).script

    result = run(script)

    assert result.returncode == 1
    assert f"secret_env HF_TOKEN: cannot read {tmp_path}/none/hf-token/token" in result.stderr.decode()
    assert not list(record.glob("srun*"))  # nothing ran


def test_slurm_time_format():
    assert [slurm_time(s) for s in (60, 3661, 86_400, 172_800 + 59)] == [
        "0-00:01:00",
        "0-01:01:01",
        "1-00:00:00",
        "2-00:00:59",
    ]


def test_argv_preview_is_the_main_step():
    rendered = render_slurm(train(args=["--x", "a b"]), slurm_context())
    assert rendered.argv_preview[:3] == ["srun", "--kill-on-bad-exit=1", "torchrun"]
    assert "--rdzv-endpoint=$head_node:29500" in rendered.argv_preview
    assert rendered.argv_preview[-4:] == ["-m", "train", "--x", "a b"]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_script_is_valid_bash(tmp_path, engine):
    image = DEFAULT_IMAGES[engine]
    specs = [
        train(),
        train(elastic={"min_workers": 2, "max_workers": 4, "checkpoint_path": "/c"}),
        serve(engine=engine, image=image),
        serve(engine=engine, image=image, tensor_parallel=16, autoscaling=None),
    ]
    for i, spec in enumerate(specs):
        path = tmp_path / f"{i}.sh"
        path.write_text(render_slurm(spec, slurm_context()).script)
        subprocess.run(["bash", "-n", str(path)], check=True)


def test_sbatch_test_only_accepts_the_scripts(tmp_path, local_slurm):
    """On the local Slurm cluster (4 nodes x 8 a100, partition gpu, no container runtime: containers "none"):
    sbatch --test-only takes every script."""
    partition = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()[0]
    ctx = slurm_context(account="root", qos="normal", partition=partition, output_dir=str(tmp_path))
    for spec in [train(), train(workers=2, gpus_per_worker=4), serve(autoscaling=None, replicas=1)]:
        spec = replace(spec, cpu=None, memory_gib=None)
        path = Path(tmp_path) / "job.sh"
        path.write_text(render_slurm(spec, ctx).script)
        result = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0 and "to start at" in result.stderr, result.stderr


def test_a_pyxis_script_on_the_local_cluster_where_pyxis_is_not_loaded(tmp_path, local_slurm):
    """What Slurm does with the pyxis script where the plugin is not loaded, as on the local cluster (Debian
    packages neither pyxis nor enroot). sbatch reads only the #SBATCH lines, so --test-only accepts the
    script: it cannot tell. The job then fails at its srun line, refused by srun itself; the connection test
    is what catches this before any job (srun --help lists no --container-image)."""
    partition = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()[0]
    ctx = slurm_context(account="root", qos="normal", partition=partition, output_dir=str(tmp_path), containers="pyxis")
    spec = train(workers=1, gpus_per_worker=1, volumes=[], command=["true"], args=[])
    spec = replace(spec, cpu=None, memory_gib=None)
    path = tmp_path / "job.sh"
    path.write_text(render_slurm(spec, ctx).script)
    test_only = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True, timeout=30)
    assert test_only.returncode == 0 and "to start at" in test_only.stderr, test_only.stderr
    assert "--container-image" not in subprocess.run(["srun", "--help"], capture_output=True, text=True).stdout

    ran = subprocess.run(["sbatch", "--parsable", "--wait", str(path)], capture_output=True, text=True, timeout=120)
    assert ran.returncode != 0
    job_id = ran.stdout.strip().split(";")[0]
    output = (tmp_path / f"{spec.name}-{job_id}.out").read_text()
    assert "srun: unrecognized option '--container-image=nvcr.io#nvidia/pytorch:24.08-py3'" in output


def test_hostile_training_job_runs_exactly_on_real_slurm(tmp_path, local_slurm):
    """sbatch -> srun on two nodes -> torchrun (a recording stand-in) -> the program: exact argv and env."""
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    write_fake(bin_dir, "torchrun", TORCHRUN)
    write_fake(bin_dir, "train")
    pwned = tmp_path / "pwned"
    values = hostile(pwned)
    spec = train(workers=2, gpus_per_worker=2, command=["train", *values], args=values, env={"HOSTILE": values[0]})
    partition = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()[0]
    ctx = slurm_context(account="root", qos="normal", partition=partition, output_dir=str(tmp_path))
    (tmp_path / "job.sh").write_text(render_slurm(spec, ctx).script)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "RECORD_DIR": str(record)}
    result = subprocess.run(
        ["sbatch", "--parsable", "--wait", str(tmp_path / "job.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for call in (0, 1):  # one torchrun, so one program, per node
        assert recorded(record, "train", call) == [*values, *values]
    assert recorded_env(record, "train")["HOSTILE"] == values[0]
    assert recorded(record, "torchrun")[:3] == ["--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d"]
    assert not pwned.exists()


def test_an_infiniband_job_on_two_real_nodes_reads_the_nccl_environment_on_each(tmp_path, local_slurm):
    """sbatch -> srun on two nodes of the local cluster -> torchrun -> the program, which records its environment and
    locked-memory limit on each node: the pool's NCCL settings reach every rank (the spec's own NCCL variable wins),
    and the script warns on stderr exactly when the job's locked-memory limit is not unlimited."""
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    write_fake(bin_dir, "torchrun", TORCHRUN)
    write_fake(bin_dir, "train", 'ulimit -l > "$RECORD_DIR/memlock.$SLURM_NODEID"')
    fabric = Fabric(kind="infiniband", nccl_ib_hca="=mlx5_0:1,mlx5_1:1", nccl_socket_ifname="=lo", pool="gpu")
    spec = train(workers=2, gpus_per_worker=2, command=["train"], args=[], env={"NCCL_DEBUG": "INFO"}, volumes=[])
    spec = replace(spec, cpu=None, memory_gib=None)
    partition = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()[0]
    ctx = slurm_context(account="root", qos="normal", partition=partition, output_dir=str(tmp_path), fabric=fabric)
    (tmp_path / "job.sh").write_text(render_slurm(spec, ctx).script)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "RECORD_DIR": str(record)}
    result = subprocess.run(
        ["sbatch", "--parsable", "--wait", str(tmp_path / "job.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    ranks = [recorded_env(record, name) for name in ("train", "train.1")]
    assert sorted(rank["SLURM_NODEID"] for rank in ranks) == ["0", "1"]  # one torchrun per node, on two nodes
    assert len({rank["SLURMD_NODENAME"] for rank in ranks}) == 2
    for rank in ranks:
        assert rank["NCCL_IB_DISABLE"] == "0"
        assert rank["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
        assert rank["NCCL_SOCKET_IFNAME"] == "=lo"
        assert rank["NCCL_DEBUG"] == "INFO"
    job_id = result.stdout.strip().split(";")[0]
    output = (tmp_path / f"{spec.name}-{job_id}.out").read_text()
    limited = (record / "memlock.0").read_text().strip() != "unlimited"
    assert ("the locked-memory limit is" in output) == limited, output


def test_a_fabric_gres_the_cluster_does_not_have_is_refused_by_sbatch(tmp_path, local_slurm):
    """The fabric's GRES is a #SBATCH directive Slurm checks: the local cluster configures only GresTypes=gpu, so
    sbatch refuses a job asking for ib:1 at submission, as a site whose pools declare a GRES it lacks would see."""
    partition = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()[0]
    fabric = Fabric(kind="infiniband", slurm_gres="ib:1", pool="gpu")
    ctx = slurm_context(account="root", qos="normal", partition=partition, output_dir=str(tmp_path), fabric=fabric)
    spec = replace(train(workers=2, gpus_per_worker=2, volumes=[]), cpu=None, memory_gib=None)
    path = tmp_path / "job.sh"
    path.write_text(render_slurm(spec, ctx).script)
    assert "#SBATCH --gres=gpu:a100:2,ib:1" in path.read_text()
    result = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "Invalid generic resource (gres) specification" in result.stderr, result.stderr
    path.write_text(render_slurm(spec, replace(ctx, fabric=replace(fabric, slurm_gres=""))).script)
    result = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "to start at" in result.stderr, result.stderr


# --- containers: pyxis, "none", or refused ------------------------------------------------------------------

PYXIS = {"containers": "pyxis", "volume_dirs": {"datasets": "/lustre/datasets", "checkpoints": "/lustre/ckpt"}}


def test_without_a_container_runtime_an_image_is_refused_naming_the_field_and_the_setting():
    for spec in (train(), serve()):
        with pytest.raises(RenderError) as caught:
            render_slurm(spec, slurm_context(containers=""))
        assert caught.value.field == "image"
        assert 'containers: "pyxis"' in caught.value.reason and spec.image in caught.value.reason
    with pytest.raises(RenderError) as caught:
        render_slurm(train(), slurm_context(containers="docker"))
    assert caught.value.field == "containers"
    none = render_slurm(train(), slurm_context(containers="none"))
    assert "--container" not in none.script
    assert any("image nvcr.io/nvidia/pytorch:24.08-py3 is not used" in c for c in none.caveats)


def test_pyxis_runs_every_step_in_the_image_with_the_volumes_mounted(tmp_path, sandbox):
    """srun gets pyxis's options as separate words (https://github.com/NVIDIA/pyxis/wiki/Usage): the image as
    an enroot URI (registry before '#') and each volume as SRC:DST[:ro] from the cluster's volume_dirs."""
    _, record, run = sandbox
    rendered = render_slurm(train(command=["train"], args=["--steps", "1"]), slurm_context(**PYXIS))
    assert run(rendered.script).returncode == 0
    srun = recorded(record, "srun")
    assert srun[:3] == [
        "--kill-on-bad-exit=1",
        "--container-image=nvcr.io#nvidia/pytorch:24.08-py3",
        "--container-mounts=/lustre/datasets:/data:ro,/lustre/ckpt:/ckpt",
    ]
    assert srun[3] == "torchrun" and rendered.argv_preview[:4] == ["srun", *srun[:3]]
    served = render_slurm(serve(), slurm_context(containers="pyxis", volume_dirs={"llama-weights": "/lustre/llama"}))
    assert "--container-image=vllm/vllm-openai:v0.11.0 --container-mounts=/lustre/llama:/models:ro vllm" in (
        served.script
    )


@pytest.mark.parametrize(
    ("image", "uri"),
    [
        ("nvcr.io/nvidia/pytorch:24.08-py3", "nvcr.io#nvidia/pytorch:24.08-py3"),
        ("registry.local:5000/team/img:1.0", "registry.local:5000#team/img:1.0"),
        ("localhost/img:1", "localhost#img:1"),
        ("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.0"),
        ("busybox:1.36", "busybox:1.36"),
    ],
)
def test_images_become_enroot_uris(image, uri):
    script = render_slurm(train(image=image, volumes=[]), slurm_context(containers="pyxis")).script
    assert f"--container-image={uri}" in script


@pytest.mark.parametrize(
    ("spec", "context", "field"),
    [
        (lambda: train(image="nvcr.io/nvidia/pytorch@sha256:" + "a" * 64), PYXIS, "image"),
        (lambda: train(), {"containers": "pyxis", "volume_dirs": {"datasets": "/lustre/datasets"}}, "volumes"),
        (
            lambda: train(),
            {"containers": "pyxis", "volume_dirs": {**PYXIS["volume_dirs"], "datasets": "/a:b"}},
            "volume_dirs",
        ),
        (
            lambda: train(),
            {"containers": "pyxis", "volume_dirs": {**PYXIS["volume_dirs"], "datasets": "/a,/b"}},
            "volume_dirs",
        ),
        (lambda: serve(), {"containers": "pyxis"}, "weights"),
        (lambda: serve(tensor_parallel=16, autoscaling=None, weights=None), PYXIS, "tensor_parallel"),
    ],
    ids=["digest", "unmapped-claim", "colon-in-dir", "comma-in-dir", "unmapped-weights", "multi-node-vllm"],
)
def test_what_pyxis_cannot_take_is_refused_by_name(spec, context, field):
    with pytest.raises(RenderError) as caught:
        render_slurm(spec(), slurm_context(**context))
    assert caught.value.field == field


def test_multi_node_sglang_runs_in_the_image_on_every_node():
    spec = serve(engine="sglang", image=DEFAULT_IMAGES["sglang"], tensor_parallel=16, autoscaling=None, weights=None)
    script = render_slurm(spec, slurm_context(containers="pyxis")).script
    assert "srun --kill-on-bad-exit=1 --container-image=lmsysorg/sglang:v0.5.3 bash -c " in script
