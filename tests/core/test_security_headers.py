"""Content-Security-Policy without inline scripts, HSTS with secure cookies (issue 20: "No CSP, no HSTS")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from tests.utils.personas import fresh

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))


def directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {name: values for name, *values in (part.split() for part in header.split(";") if part.strip())}


def test_pages_send_a_csp_that_allows_no_inline_script_but_their_own_nonce(personas, client):
    client.force_login(fresh(personas.platform_admin))
    response = client.get(reverse("chargeback:overview"))  # a page with an inline script (its chart's data)
    assert response.status_code == 200
    policy = directives(response)
    scripts = policy["script-src"]
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts and "'self'" in scripts
    (nonce,) = [value[len("'nonce-") : -1] for value in scripts if value.startswith("'nonce-")]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    inline = re.findall(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)([^>]*)>", response.content.decode())
    assert inline and all(f'nonce="{nonce}"' in attrs for attrs in inline)
    # A new nonce for every response.
    assert nonce not in client.get(reverse("chargeback:overview"))["Content-Security-Policy"]


def test_the_api_and_login_page_carry_the_policy_too(db, client):
    assert "script-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]
    assert "default-src 'self'" in client.get("/api/v1/tenants/")["Content-Security-Policy"]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT / "templates")))
def test_no_template_has_an_inline_script_without_the_nonce_or_an_inline_handler(template):
    text = template.read_text()
    for attrs in re.findall(r"<script\b([^>]*)>", text):
        if "src=" in attrs or "application/json" in attrs:
            continue
        assert 'nonce="{{ CSP_NONCE }}"' in attrs, f"{template.name}: inline <script{attrs}> without the CSP nonce"
    handlers = re.findall(r"<[^>]*\s(on[a-z]+)=", text)
    assert not handlers, f"{template.name}: inline event handlers {handlers} (the CSP blocks them: use static/js)"
    assert "javascript:" not in text


def test_hsts_is_sent_over_https_when_cookies_are_secure(db, client, settings):
    settings.SECURE_HSTS_SECONDS = 31_536_000
    assert client.get("/accounts/login/", secure=True)["Strict-Transport-Security"] == "max-age=31536000"
    assert "Strict-Transport-Security" not in client.get("/accounts/login/")


def settings_value(name: str, **env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key not in {"DEBUG", "SESSION_COOKIE_SECURE"}}
    environment.update(env)
    probe = f"from django.conf import settings; print(settings.{name})"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**environment, "DJANGO_SETTINGS_MODULE": "console.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


def test_hsts_follows_secure_cookies_and_its_max_age_is_a_setting():
    assert settings_value("SECURE_HSTS_SECONDS") == "31536000"  # DEBUG off: cookies secure by default
    assert settings_value("SECURE_HSTS_SECONDS", SECURE_HSTS_SECONDS="600") == "600"
    assert settings_value("SECURE_HSTS_SECONDS", SESSION_COOKIE_SECURE="0") == "0"
    assert settings_value("SECURE_HSTS_SECONDS", DEBUG="1") == "0"  # the demo on plain http
