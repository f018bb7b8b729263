"""slurmrestd (OpenAPI v0.0.38, JWT auth): reads, job submission and cancel.

v0.0.38 takes a job as a JSON description plus the script; it does not read the script's #SBATCH lines,
so `job_properties()` translates the directives the console's renderers write into that description and
refuses any other (naming it) rather than dropping it. What v0.0.38 cannot express (--nodelist,
--switches) is a PermanentBackendError that says to use mode "cli".
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request

from apps.backends.base import PermanentBackendError, RetryableBackendError
from apps.backends.slurm.cli import UNREACHABLE
from apps.backends.slurm.settings import SlurmSettings
from apps.core.outbound import OutboundRefused, urlopen

API = "slurm/v0.0.38"
DB_API = "slurmdb/v0.0.38"
NOTHING_FOUND = 9003  # slurmdb's "error" for an empty answer
_DIRECTIVE = re.compile(r"^#SBATCH\s+--(?P<option>[a-z-]+)(?:=(?P<value>\S+))?\s*$")


class Rest:
    def __init__(self, settings: SlurmSettings):
        self.settings = settings

    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(  # noqa: S310  (the admin's restd_url; outbound.urlopen checks it)
            f"{self.settings.restd_url}/{path if path.startswith(DB_API) else f'{API}/{path}'}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={
                "X-SLURM-USER-NAME": self.settings.restd_user,
                "X-SLURM-USER-TOKEN": self.settings.token,
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urlopen(request, timeout=self.settings.timeout_s) as response:
                return json.loads(response.read() or b"{}")
        except OutboundRefused as exc:
            raise PermanentBackendError(f"slurmrestd {method} {path}: {exc}") from exc
        except urllib.error.HTTPError as exc:
            raise self._error(method, path, exc.code, exc.read()) from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise RetryableBackendError(f"slurmrestd at {self.settings.restd_url} did not answer: {exc}") from exc

    def _error(self, method: str, path: str, status: int, raw: bytes):
        try:
            errors = json.loads(raw).get("errors") or []
            message = "; ".join(str(e.get("error") or e.get("description")) for e in errors if e) or raw.decode()
        except ValueError:
            message = raw.decode(errors="replace")
        message = f"slurmrestd {method} {path}: HTTP {status}: {message.strip()}"
        if status in (401, 403):
            return PermanentBackendError(message + " (check restd_user and the JWT)")
        if any(marker in message.lower() for marker in UNREACHABLE) or status in (502, 503, 504):
            return RetryableBackendError(message)
        if method == "GET" and status >= 500:
            return RetryableBackendError(message)
        return PermanentBackendError(message)

    def get(self, path: str) -> dict:
        return self._request("GET", path)

    def accounting(self, names: list[str], lookback: str) -> list[dict]:
        """Jobs of these names from slurmdbd (sacct's view), via /slurmdb/v0.0.38/jobs."""
        query = urllib.parse.urlencode({"job_name": ",".join(names), "start_time": lookback})
        try:
            return self._request("GET", f"{DB_API}/jobs?{query}").get("jobs") or []
        except PermanentBackendError as exc:
            if "Nothing found" in str(exc):
                return []
            raise

    def submit(self, script: str, settings: SlurmSettings) -> int:
        answer = self._request("POST", "job/submit", {"job": job_properties(script, settings), "script": script})
        if answer.get("job_id"):
            # With a job id, "errors" are what sbatch prints as information, e.g. 2068 "Required node not
            # available" for a job that waits for drained nodes: the job was accepted and pends.
            return int(answer["job_id"])
        errors = [e for e in answer.get("errors") or [] if e]
        raise PermanentBackendError(f"slurmrestd job/submit: {errors or answer}")

    def cancel(self, job_id: str) -> None:
        self._request("DELETE", f"job/{job_id}")


def _minutes(value: str) -> int:
    """Slurm time ("D-HH:MM:SS", "HH:MM:SS", "MM:SS" or minutes) -> whole minutes, rounded up."""
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if len(parts) == 1:
        return int(days or 0) * 1440 + parts[0]
    while len(parts) < 3:
        parts.insert(0, 0)
    seconds = ((int(days or 0) * 24 + parts[0]) * 60 + parts[1]) * 60 + parts[2]
    return math.ceil(seconds / 60)


def _mebibytes(value: str) -> int:
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    number, unit = (value[:-1], value[-1].upper()) if value[-1].isalpha() else (value, "M")
    return math.ceil(float(number) * units[unit])


def job_properties(script: str, settings: SlurmSettings) -> dict:
    """The v0.0.38 job description of a script's #SBATCH lines (those before its first command)."""
    job: dict = {
        "partition": settings.partition,
        "current_working_directory": settings.output_dir,
        "environment": {"PATH": settings.job_path},
    }
    for line in script.split("\n")[1:]:
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        match = _DIRECTIVE.match(line)
        if not line.startswith("#SBATCH"):
            continue
        if not match:
            raise PermanentBackendError(f"cannot read the directive {line!r}")
        option, value = match["option"], match["value"] or ""
        if option == "job-name":
            job["name"] = value
        elif option in ("account", "qos", "partition", "gres", "array"):
            job[option] = value
        elif option == "nodes":
            low, _, high = value.partition("-")
            job["nodes"] = [int(low), int(high or low)]
        elif option == "ntasks-per-node":
            job["tasks_per_node"] = int(value)
        elif option == "cpus-per-task":
            job["cpus_per_task"] = int(value)
        elif option == "mem":
            job["memory_per_node"] = _mebibytes(value)
        elif option == "time":
            job["time_limit"] = _minutes(value)
        elif option == "output":
            job["standard_output"] = value
        elif option in ("requeue", "no-requeue"):
            job["requeue"] = option == "requeue"
        else:
            raise PermanentBackendError(
                f"slurmrestd v0.0.38 cannot take #SBATCH --{option}; submit through the CLI (connection mode 'cli')"
            )
    if "nodes" in job and "tasks_per_node" in job and job["nodes"][0] == job["nodes"][1]:
        job["tasks"] = job["nodes"][0] * job["tasks_per_node"]
    return job
