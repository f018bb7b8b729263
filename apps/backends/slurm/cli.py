"""Slurm's commands, run locally or over SSH on a login node, with their failures classified.

Never a shell string: each command is an argument vector. Over SSH the remote login shell does parse the
command line, so it is sent as `shlex.join(argv)` (every argument one quoted word). A controller or
slurmdbd that does not answer is a RetryableBackendError; any other refusal is a PermanentBackendError
carrying Slurm's own message.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from apps.backends.base import PermanentBackendError, RetryableBackendError
from apps.backends.slurm.settings import SlurmSettings

# What Slurm's commands print when the controller or slurmdbd cannot be reached (22.05's wording).
UNREACHABLE = (
    "unable to contact slurm controller",
    "slurm_persist_conn_open",
    "socket timed out",
    "connection refused",
    "zero bytes were transmitted",
    "communication connection failure",
    "unable to establish a connection",
    "connection timed out",
    "problem talking to the database",
    "slurmdbd not responding",
    "unable to connect to database",
    "slurm controller not responding",
)
SSH_FAILED = 255  # ssh's own exit status: the login node did not answer


class Cli:
    def __init__(self, settings: SlurmSettings):
        self.settings = settings

    def argv(self, argv: list[str]) -> list[str]:
        if not self.settings.ssh_host:
            return argv
        remote = shlex.join(["env", "TZ=UTC", *argv])  # times given to sacct are UTC, as locally
        return ["ssh", "-o", "BatchMode=yes", *self.settings.ssh_options, self.settings.ssh_host, remote]

    def env(self) -> dict[str, str]:
        """A clean environment: the console's own variables (secrets) never reach Slurm or a job."""
        env = {"PATH": self.settings.job_path, "LANG": "C.UTF-8", "TZ": "UTC", "HOME": os.environ.get("HOME", "/")}
        if self.settings.slurm_conf:
            env["SLURM_CONF"] = self.settings.slurm_conf
        return env

    def run(self, argv: list[str], *, stdin: str | None = None, ok: tuple[int, ...] = (0,)) -> str:
        """stdout of the command; its failure raised as a backend error."""
        result = self.call(argv, stdin=stdin)
        if result.returncode in ok:
            return result.stdout
        raise self.error(argv, result)

    def call(self, argv: list[str], *, stdin: str | None = None) -> subprocess.CompletedProcess:
        # No input: /dev/null, never the caller's stdin, which ssh would otherwise read and forward.
        given = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
        try:
            return subprocess.run(  # noqa: S603  (an argument vector, no shell)
                self.argv(argv),
                **given,
                capture_output=True,
                text=True,
                timeout=self.settings.timeout_s,
                env=self.env(),
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RetryableBackendError(f"{argv[0]} did not answer within {self.settings.timeout_s:g} s") from exc
        except FileNotFoundError as exc:
            raise PermanentBackendError(f"{exc.filename} is not installed where the console runs") from exc

    def error(self, argv: list[str], result: subprocess.CompletedProcess):
        message = (result.stderr or result.stdout).strip() or f"{argv[0]} exited with status {result.returncode}"
        if self.settings.ssh_host and result.returncode == SSH_FAILED:
            return RetryableBackendError(f"ssh to {self.settings.ssh_host} failed: {message}")
        if any(marker in message.lower() for marker in UNREACHABLE):
            return RetryableBackendError(message)
        return PermanentBackendError(message)
