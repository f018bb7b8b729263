"""The default Idempotency-Key of a submission made inside a CI job (docs/cli.md, "Idempotency").

A CI job that runs `gpuc submit` twice (a retried script step, a runner that lost its connection and ran the job
again under the same id) must submit once. The key is made of the CI system's ids for this job run, which stay
the same for every attempt of the step and change when a person retries the job (GitLab and Buildkite give a
retried job a new id; GitHub Actions counts GITHUB_RUN_ATTEMPT), plus the workload's kind and name, so that
a job submitting two different workloads gets two. Outside CI there is no default: every submit is new.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

MAX_KEY = 200  # the console's limit (apps/workloads/services/submission.py)

# Each CI system: its marker and the variables that name one run of one job. Documented at
# GitLab: https://docs.gitlab.com/ci/variables/predefined_variables/ (CI_JOB_ID, CI_PROJECT_ID),
# GitHub: https://docs.github.com/en/actions/learn-github-actions/variables (GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT,
#   GITHUB_JOB), Buildkite: https://buildkite.com/docs/pipelines/environment-variables (BUILDKITE_JOB_ID).
SYSTEMS = (
    ("gitlab", ("CI_PROJECT_ID", "CI_JOB_ID")),
    ("github", ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB")),
    ("buildkite", ("BUILDKITE_JOB_ID",)),
)


def ci_job(env: Mapping[str, str]) -> tuple[str, list[str]] | None:
    """The CI system and its ids for this job run, or None outside CI (or when a variable is missing)."""
    for system, names in SYSTEMS:
        values = [env.get(name, "").strip() for name in names]
        if all(values):
            return system, values
    return None


def default_idempotency_key(env: Mapping[str, str], kind: str, name: str) -> str | None:
    job = ci_job(env)
    if job is None:
        return None
    system, ids = job
    key = ":".join(["gpuc", system, *ids, kind, name or "-"])
    if len(key) > MAX_KEY:  # a very long GITHUB_JOB or name: keep it unique, within the limit
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        key = key[: MAX_KEY - len(digest) - 1] + ":" + digest
    return key
