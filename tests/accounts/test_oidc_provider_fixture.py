"""The OpenID provider fixture refuses to run the SSO tests without a fitting Node.js: it fails, naming what to
install, rather than skipping them (a skip would drop single sign-on from `make test` without anyone noticing)."""

from __future__ import annotations

import pytest

from tests.oidc_provider import node_js


def test_a_missing_node_fails_naming_what_to_install():
    with pytest.raises(pytest.fail.Exception, match=r"Node\.js is missing: .*install Node\.js 20\.19 or later and npm"):
        node_js(which=lambda name: None)


def test_a_node_too_old_for_oidc_provider_fails_naming_its_version(tmp_path):
    old = tmp_path / "node"
    old.write_text("#!/bin/sh\necho v18.19.0\n")
    old.chmod(0o755)
    with pytest.raises(pytest.fail.Exception, match=r"Node\.js v18\.19\.0 \(.*\) is too old for oidc-provider 9"):
        node_js(which=lambda name: str(old))


def test_the_machine_s_node_is_taken():
    assert node_js().endswith("node")
