"""A Slurm cluster's connection settings: `Cluster.connection` keys, and the secret named by `secret_env`.

Keys (all optional; docs/configuration.md lists them with examples):

* slurm_cluster Slurm's ClusterName (slurm.conf), default: the console cluster's name
* mode          "cli" (default): every call runs Slurm's commands; "rest": reads, submission and cancel go
                through slurmrestd, the rest (node updates, sacct, sacctmgr) through the CLI
* restd_url     slurmrestd's base URL, e.g. http://slurm-head:6820 (mode "rest")
* restd_user    the user the JWT belongs to (X-SLURM-USER-NAME), default "root"; the JWT itself is the value
                of the environment variable `Cluster.secret_env` names (never stored in the database)
* ssh_host      run the CLI on this login node over SSH (e.g. "console@login01"); empty: run it locally
* ssh_options   extra ssh arguments, e.g. ["-i", "/etc/gpu-console/id_ed25519", "-p", "2222"], from an
                allow-list (slurm/ssh.py: never an option that runs a command on the console's host)
* slurm_conf    SLURM_CONF for the local CLI (empty: Slurm's default /etc/slurm/slurm.conf)
* partition     partition of the jobs the console submits, default "gpu" (their account and QOS are the queue's
                and the tier's, from the render context)
* output_dir    directory for job output files on the cluster's shared file system, default /var/log/gpu-console
* job_path      PATH of jobs submitted by the local CLI, default /usr/local/bin:/usr/bin:/bin
* submit_user   the Slurm user the console's jobs run as; quota push gives it an association with every queue
                account (default: restd_user in mode "rest", the user of ssh_host, or the local user)
* gres_models   GRES type -> console GPU model code where they differ, e.g. {"a100_80g": "a100"}
* containers    how jobs run the spec's image: "pyxis" (srun --container-image, the pyxis SPANK plugin with
                enroot) or "none" (on the nodes' own software, the image unused); unset, a spec with an image
                is refused (it is never run without its image silently)
* volume_dirs   with pyxis: a volume's claim -> the directory on the shared file system mounted at its
                mount_path, e.g. {"datasets": "/lustre/datasets"}
* secrets_dir   a directory on the compute nodes holding secrets as <secret>/<key> files (e.g.
                /etc/gpu-console/secrets, readable by the job's user only); a spec's secret_env item
                {name, secret, key} sets the variable from that file when the job starts. Unset: specs with
                secret_env are refused
* timeout_s     bound on every command or request, default 30
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass, field

from apps.backends.base import PermanentBackendError
from apps.backends.render.workload.containers import CONTAINERS
from apps.backends.slurm.ssh import ssh_host_error, ssh_options_errors
from apps.core.secrets import SecretEnvRefused, read_secret_env

MODES = ("cli", "rest")
CONSOLE_PREFIX = "console: "  # the console's node reasons start with this; it resumes only those nodes
DEFAULT_OUTPUT_DIR = "/var/log/gpu-console"  # job output files (the sbatch script's --output); where logs are
_ABSOLUTE_DIR = re.compile(r"(/(?!\.\.?(/|$))[A-Za-z0-9._-]+)+/?")


@dataclass(frozen=True)
class SlurmSettings:
    cluster: str  # Slurm's ClusterName
    mode: str = "cli"
    restd_url: str = ""
    restd_user: str = "root"
    token: str = ""
    ssh_host: str = ""
    ssh_options: tuple[str, ...] = ()
    slurm_conf: str = ""
    partition: str = "gpu"
    output_dir: str = DEFAULT_OUTPUT_DIR
    job_path: str = "/usr/local/bin:/usr/bin:/bin"
    gres_models: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    submit_user: str = ""
    containers: str = ""
    volume_dirs: dict[str, str] = field(default_factory=dict)
    secrets_dir: str = ""

    @classmethod
    def of(cls, cluster) -> SlurmSettings:
        conn = dict(cluster.connection or {})
        mode = conn.get("mode") or ("rest" if conn.get("restd_url") else "cli")
        if mode not in MODES:
            raise PermanentBackendError(f"connection.mode {mode!r} is not one of {', '.join(MODES)}")
        token = ""
        if mode == "rest":
            if not conn.get("restd_url"):
                raise PermanentBackendError("connection.restd_url is required with mode 'rest'")
            if not cluster.secret_env:
                raise PermanentBackendError("mode 'rest' needs secret_env: the environment variable holding the JWT")
            try:
                token = read_secret_env(cluster.secret_env)
            except SecretEnvRefused as exc:
                raise PermanentBackendError(str(exc)) from exc
            if not token:
                raise PermanentBackendError(f"the environment variable {cluster.secret_env} (the JWT) is not set")
        ssh_host = conn.get("ssh_host") or ""
        if ssh_host and (problem := ssh_host_error(ssh_host)):
            raise PermanentBackendError(f"connection.ssh_host: {problem}")
        restd_user = str(conn.get("restd_user") or "root")
        default_user = restd_user if mode == "rest" else ssh_host.rpartition("@")[0] or getpass.getuser()
        options = conn.get("ssh_options") or []
        if problems := ssh_options_errors(options):
            raise PermanentBackendError(f"connection.ssh_options: {'; '.join(problems)}")
        containers = conn.get("containers") or ""
        if containers and containers not in CONTAINERS:
            raise PermanentBackendError(f"connection.containers {containers!r} is not one of {', '.join(CONTAINERS)}")
        volume_dirs = conn.get("volume_dirs") or {}
        if not isinstance(volume_dirs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.startswith("/") for k, v in volume_dirs.items()
        ):
            raise PermanentBackendError("connection.volume_dirs must map claim names to absolute directories")
        secrets_dir = conn.get("secrets_dir") or ""
        if secrets_dir and (not isinstance(secrets_dir, str) or not _ABSOLUTE_DIR.fullmatch(secrets_dir)):
            raise PermanentBackendError(
                "connection.secrets_dir must be an absolute directory of letters, digits and / . _ - (no ..)"
            )
        return cls(
            cluster=str(conn.get("slurm_cluster") or cluster.name),
            mode=mode,
            restd_url=str(conn.get("restd_url", "")).rstrip("/"),
            restd_user=restd_user,
            token=token,
            ssh_host=ssh_host,
            ssh_options=tuple(options),
            slurm_conf=str(conn.get("slurm_conf", "")),
            partition=str(conn.get("partition") or "gpu"),
            output_dir=str(conn.get("output_dir") or DEFAULT_OUTPUT_DIR),
            job_path=str(conn.get("job_path") or "/usr/local/bin:/usr/bin:/bin"),
            gres_models=dict(conn.get("gres_models") or {}),
            timeout_s=float(conn.get("timeout_s") or 30),
            submit_user=str(conn.get("submit_user") or default_user),
            containers=containers,
            volume_dirs=dict(volume_dirs),
            secrets_dir=secrets_dir.rstrip("/"),
        )

    def model_of(self, gres_type: str) -> str:
        """The console GPU model code of a GRES type."""
        return self.gres_models.get(gres_type, gres_type)

    def gres_of(self, model: str) -> str:
        """The GRES type of a console GPU model code."""
        for gres, code in self.gres_models.items():
            if code == model:
                return gres
        return model
