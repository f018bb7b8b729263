"""The real OpenID provider (tests/oidc/provider.mjs, panva's oidc-provider on Node.js) as a session fixture.

The first test that asks for `oidc_provider` starts it on a free port of 127.0.0.1 (after `npm ci` in tests/oidc
when its node_modules is missing, so `make test` installs it by itself) and the end of the session stops it by
its PID, as tests/slurm_cluster.py does for the Slurm cluster. Without Node.js (or with one too old) they fail, saying
what to install: they never skip.

The console client's redirect URIs are the live test server's and the Django test client's (`testserver`): the
fixture starts pytest-django's `live_server` first so the provider knows its port.
"""

from __future__ import annotations

import base64
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "oidc"
CALLBACK = "/oidc/callback/"
LOGGED_OUT = "/accounts/login/"
TEST_CLIENT_ORIGIN = "http://testserver"
# The accounts of tests/oidc/provider.mjs (ACCOUNTS there).
MIN_NODE = (20, 19)  # oidc-provider 9 (tests/oidc/package.json "engines")
PASSWORDS = {"alice": "alice-pass", "bob": "bob-pass", "carol": "carol-pass", "dave": "dave-pass"}


@dataclass(frozen=True)
class OidcProvider:
    issuer: str
    pid: int
    control_token: str
    client_id: str = "console"
    client_secret: str = "console-test-secret"
    ci_client_id: str = "ci-runner"
    ci_client_secret: str = "ci-runner-test-secret"

    def discovery(self) -> dict:
        with urllib.request.urlopen(f"{self.issuer}/.well-known/openid-configuration", timeout=10) as response:
            return json.load(response)

    def ci_id_token(self, **claims) -> str:
        """A CI-style ID token signed with the provider's published key (the custom grant of provider.mjs):
        `aud`, `sub`, `project_path`, `ref`, `ref_protected`, ..., `exp_in` (seconds; negative: expired),
        `iss_override`, `nonce`."""
        body = urllib.parse.urlencode({"grant_type": "urn:gpuc:test:ci-id-token", **claims}).encode()
        basic = base64.b64encode(f"{self.ci_client_id}:{self.ci_client_secret}".encode()).decode()
        request = urllib.request.Request(
            f"{self.issuer}/token", data=body, headers={"Authorization": f"Basic {basic}"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)["id_token"]

    def set_groups(self, account: str, groups: list[str]) -> None:
        """Change an account's `groups` claim, as the IdP's admin would between two log-ins."""
        self.set_claims(account, groups=groups)

    def set_claims(self, account: str, **claims) -> dict:
        """Change an account's `groups`, `email` or `name` claims (those given), as the IdP's admin would between
        two log-ins; the account's three claims as they are now."""
        request = urllib.request.Request(
            f"{self.issuer}/_test/accounts/{account}",
            data=json.dumps(claims).encode(),
            headers={"Authorization": f"Bearer {self.control_token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def log_in(self, client, account: str) -> str:
        """Log `account` in through this provider with Django's test `client`: the console's log-in start, the
        provider's authorization endpoint, its sign-in page (a fresh provider session: the password is asked),
        its consent step, then the console's callback with the code. Returns where the callback sent the person."""
        from django.urls import reverse

        start = client.get(reverse("oidc:login"))
        assert start.status_code == 302, start
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(), _NoRedirects())
        url, form = start["Location"], None
        for _step in range(10):
            if url.startswith(TEST_CLIENT_ORIGIN + CALLBACK):
                callback = client.get(url.removeprefix(TEST_CLIENT_ORIGIN))
                assert callback.status_code == 302, callback
                return callback["Location"]
            with browser.open(urllib.request.Request(url, data=form), timeout=10) as answer:
                page, status, location = answer.read().decode(), answer.status, answer.headers.get("Location")
            form = None
            if location:
                url = urllib.parse.urljoin(url, location)
            elif status == 200 and 'name="password"' in page:  # the sign-in page: its form posts to this URL
                form = urllib.parse.urlencode({"login": account, "password": PASSWORDS[account]}).encode()
            else:
                raise AssertionError(f"the provider answered {status} at {url}:\n{page[:2000]}")
        raise AssertionError(f"no callback to the console after 10 steps at the provider (last: {url})")

    def settings(self) -> dict:
        """The console's settings for this provider (apply with pytest-django's `settings` fixture)."""
        return {
            "OIDC_ISSUER_URL": self.issuer,
            "OIDC_CLIENT_ID": self.client_id,
            "OIDC_CLIENT_SECRET": self.client_secret,
        }


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Each redirect is a step `log_in` takes itself: the last one goes to the console, not to the provider."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None

    def http_error_302(self, req, fp, code, msg, headers):
        return fp

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _npm_ci() -> None:
    if (HERE / "node_modules" / "oidc-provider").is_dir():
        return
    npm = shutil.which("npm")
    if not npm:
        pytest.fail("npm is missing: the SSO tests install tests/oidc with `npm ci`", pytrace=False)
    result = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        pytest.fail(f"npm ci in tests/oidc failed:\n{result.stdout}\n{result.stderr}", pytrace=False)


def _first_line(process: subprocess.Popen, timeout_s: float) -> str:
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    ready = selector.select(timeout_s)
    selector.close()
    return process.stdout.readline() if ready else ""


def node_js(which=shutil.which) -> str:
    """The machine's Node.js, recent enough for oidc-provider; a failure that says what to install otherwise. Never a
    skip: every machine that runs this suite has Node.js (the machine's, not one a test downloads), and a missing one
    would silently drop the SSO tests from `make test`."""
    node = which("node")
    install = "install Node.js 20.19 or later and npm (Debian 12's own nodejs is 18: too old)"
    if not node:
        pytest.fail(f"Node.js is missing: the SSO tests run the OpenID provider (tests/oidc) on it; {install}",
                    pytrace=False)  # fmt: skip
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    if tuple(int(part) for part in re.findall(r"\d+", version)[:2]) < MIN_NODE:
        pytest.fail(f"Node.js {version} ({node}) is too old for oidc-provider 9 (tests/oidc); {install}",
                    pytrace=False)  # fmt: skip
    return node


@pytest.fixture(scope="session")
def oidc_provider(live_server):
    node = node_js()
    _npm_ci()
    env = {
        **os.environ,
        "OIDC_TEST_REDIRECT_URIS": f"{live_server.url}{CALLBACK},{TEST_CLIENT_ORIGIN}{CALLBACK}",
        "OIDC_TEST_POST_LOGOUT_URIS": f"{live_server.url}{LOGGED_OUT},{TEST_CLIENT_ORIGIN}{LOGGED_OUT}",
    }
    process = subprocess.Popen(
        [node, str(HERE / "provider.mjs")],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = _first_line(process, 30)
    if not line:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        pytest.fail("the OpenID provider (tests/oidc/provider.mjs) did not start within 30 s", pytrace=False)
    started = json.loads(line)
    provider = OidcProvider(issuer=started["issuer"], pid=process.pid, control_token=started["control_token"])
    try:
        yield provider
    finally:
        os.kill(provider.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(provider.pid, signal.SIGKILL)
            process.wait(10)


def use_provider(settings, provider: OidcProvider) -> None:
    """Point the console at `provider` for one test (pytest-django's `settings` fixture undoes it), as the
    environment would: the OIDC_* settings and the provider's origin in the CSP's form-action (log-out)."""
    from apps.accounts.sso import discovery

    for name, value in provider.settings().items():
        setattr(settings, name, value)
    policy = {**settings.CONTENT_SECURITY_POLICY, "DIRECTIVES": dict(settings.CONTENT_SECURITY_POLICY["DIRECTIVES"])}
    policy["DIRECTIVES"]["form-action"] = [*policy["DIRECTIVES"]["form-action"], provider.issuer]
    settings.CONTENT_SECURITY_POLICY = policy
    discovery.forget()
