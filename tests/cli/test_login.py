"""gpuc login: a token typed (or piped) in, or a CI job's OIDC ID token exchanged for one; the config file it
writes (mode 0600); GPUC_URL and GPUC_TOKEN over the file."""

from __future__ import annotations

import json
import stat

import pytest

from apps.accounts import federation
from apps.accounts import services as accounts
from apps.accounts.models import ApiToken
from apps.workloads.models import Workload
from tests.cli.conftest import write_job
from tests.utils.personas import fresh

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

AUDIENCE = "https://console.example.test"


def test_login_with_a_piped_token_writes_a_private_config_the_environment_overrides(gpuc, console):
    bare = gpuc.env(GPUC_URL=None, GPUC_TOKEN=None, GPUC_CONFIG=None)  # the default place: ~/.config/gpuc
    refused = gpuc("login", "--url", console.url, env=bare, stdin="gpuc_wrong\n")
    assert refused.code == 4 and "Invalid API token." in refused.stderr, refused
    path = gpuc.home / ".config" / "gpuc" / "config.json"
    assert not path.exists()

    done = gpuc("login", "--url", console.url + "/", env=bare, stdin=console.personas.token_a_raw + "\n")
    assert done.code == 0, done
    assert f"Logged in to {console.url} as ci-a (member on a); saved to {path}" in done.stderr, done
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    stored = json.loads(path.read_text())
    assert stored == {"url": console.url, "token": console.personas.token_a_raw, "username": "ci-a"}

    listed = gpuc("ls", env=bare)  # no flags, no variables: the file
    assert listed.code == 0 and listed.stdout == "no workloads\n", listed
    overridden = gpuc("ls", env={**bare, "GPUC_TOKEN": "gpuc_revoked-or-whatever"})
    assert overridden.code == 4 and "token from GPUC_TOKEN" in overridden.stderr, overridden
    flag = gpuc("ls", "--token", "gpuc_from-the-flag", env={**bare, "GPUC_TOKEN": console.personas.token_a_raw})
    assert flag.code == 4 and "token from --token" in flag.stderr, flag


@pytest.fixture
def trust(oidc_provider, console):
    federation.forget()
    yield accounts.create_federated_trust(
        fresh(console.personas.tenant_admin_a),
        service_account=console.personas.ci_a,
        issuer=oidc_provider.issuer,
        audience=AUDIENCE,
        conditions={"project_path": "ml/llm-train", "ref_protected": True},
        max_minutes=10,
    )
    federation.forget()


def _job_token(provider, **claims) -> str:
    return provider.ci_id_token(
        **{
            "aud": AUDIENCE,
            "sub": "project_path:ml/llm-train:ref_type:branch:ref:main",
            "project_path": "ml/llm-train",
            "ref": "main",
            "ref_protected": "true",
            **claims,
        }
    )


def test_login_exchanges_the_ci_job_s_id_token(gpuc, console, oidc_provider, trust):
    env = gpuc.env(GPUC_TOKEN=None, CONSOLE_ID_TOKEN=_job_token(oidc_provider))
    done = gpuc("login", "--oidc-token-env", "CONSOLE_ID_TOKEN", env=env)  # the URL from GPUC_URL
    assert done.code == 0, done
    assert "as ci-a (member on a)" in done.stderr and "the token expires at" in done.stderr, done
    stored = json.loads((gpuc.home / "gpuc-config.json").read_text())
    issued = ApiToken.objects.get(user=console.personas.ci_a, name__startswith="token exchange")
    assert stored["token"].startswith(issued.prefix) and stored["username"] == "ci-a"
    submitted = gpuc("submit", "-f", write_job(gpuc.home, "federated"), env=env)
    assert submitted.code == 0, submitted
    assert Workload.objects.get(name="federated").created_by == console.personas.ci_a

    # From a file; and a job of another project gets the console's one answer for every refusal: exit 4.
    (gpuc.home / "id-token").write_text(_job_token(oidc_provider, project_path="ml/other") + "\n")
    refused = gpuc("login", "--oidc-token-file", gpuc.home / "id-token", env=env)
    assert refused.code == 4, refused
    assert "gpuc: error: The subject token is not accepted. (HTTP 401, invalid_grant)" in refused.stderr, refused
    empty = gpuc("login", "--oidc-token-env", "NOT_SET", env=env)
    assert empty.code == 4 and "NOT_SET holds no ID token" in empty.stderr, empty
