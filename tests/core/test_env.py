"""Settings helpers fail fast with a message naming the variable."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import env_bool, env_int, env_list, env_str, parse_database_url


def test_env_bool(monkeypatch):
    for raw, value in [("1", True), ("yes", True), ("On", True), ("0", False), ("false", False), ("", False)]:
        monkeypatch.setenv("X_FLAG", raw)
        assert env_bool("X_FLAG") is value
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG")
    monkeypatch.delenv("X_FLAG")
    assert env_bool("X_FLAG", True) is True


def test_env_int(monkeypatch):
    monkeypatch.setenv("X_N", "12")
    assert env_int("X_N", 1, minimum=1, maximum=20) == 12
    monkeypatch.setenv("X_N", "twelve")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("X_N", 1)
    monkeypatch.setenv("X_N", "0")
    with pytest.raises(ImproperlyConfigured, match="below the minimum 1"):
        env_int("X_N", 1, minimum=1)


def test_env_str_and_file(monkeypatch, tmp_path):
    monkeypatch.delenv("X_SECRET", raising=False)
    with pytest.raises(ImproperlyConfigured, match="X_SECRET must be set"):
        env_str("X_SECRET")
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET") == "s3cret"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_str("X_SECRET")


def test_env_list(monkeypatch):
    monkeypatch.setenv("X_HOSTS", " a.example, ,b.example ")
    assert env_list("X_HOSTS", []) == ["a.example", "b.example"]


def test_database_url():
    pg = parse_database_url("postgres://u:p%40ss@db.internal:6432/console?sslmode=require")
    assert pg["ENGINE"] == "apps.core.postgresql"
    assert (pg["NAME"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"]) == (
        "console",
        "u",
        "p@ss",
        "db.internal",
        "6432",
    )
    assert pg["OPTIONS"] == {"sslmode": "require", "jit": "off", "server_side_binding": True, "prepare_threshold": 5}
    off = parse_database_url("postgres://h/console?prepare_threshold=none")["OPTIONS"]
    assert off == {"jit": "off", "server_side_binding": True, "prepare_threshold": None}
    client_side = parse_database_url("postgres://h/console?server_side_binding=false")["OPTIONS"]
    assert client_side == {"jit": "off", "server_side_binding": False, "prepare_threshold": None}
    assert parse_database_url("postgres://h/console?jit=on")["OPTIONS"]["jit"] == "on"
    lite = parse_database_url("sqlite:////tmp/x.sqlite3")
    assert lite["ENGINE"] == "django.db.backends.sqlite3" and lite["NAME"] == "/tmp/x.sqlite3"
    for bad in [
        "mysql://x/y",
        "postgres://host/",
        "sqlite://",
        "postgres://h:notaport/db",
        "postgres://h/db?prepare_threshold=soon",
        "postgres://h/db?server_side_binding=maybe",
        "postgres://h/db?jit=sometimes",
    ]:
        with pytest.raises(ImproperlyConfigured):
            parse_database_url(bad)


def test_settings_refuse_missing_secret_key_without_debug():
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "console.settings", "DEBUG": "0"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_env_networks(monkeypatch):
    import ipaddress

    from console.env import env_networks

    monkeypatch.setenv("X_NETS", "10.1.2.3/8, fd00::/8,,127.0.0.1")
    assert env_networks("X_NETS", []) == [
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("fd00::/8"),
        ipaddress.ip_network("127.0.0.1/32"),
    ]
    monkeypatch.setenv("X_NETS", "10.0.0.0/8,intranet")
    with pytest.raises(ImproperlyConfigured, match="X_NETS: 'intranet' is not a network"):
        env_networks("X_NETS", [])
    monkeypatch.delenv("X_NETS")
    assert env_networks("X_NETS", []) == []


def test_env_name_prefix(monkeypatch):
    from console.env import env_name_prefix

    assert env_name_prefix("X_PREFIX", "GPUC_SECRET_") == "GPUC_SECRET_"
    for bad in ("", "gpuc_", "ABC", "A-B_C", "1ABC"):
        monkeypatch.setenv("X_PREFIX", bad)
        with pytest.raises(ImproperlyConfigured, match="X_PREFIX="):
            env_name_prefix("X_PREFIX", "GPUC_SECRET_")


def test_the_settings_know_every_variable_they_read():
    """A cluster's secret_env may never name one of these (apps/core/secrets.py)."""
    from django.conf import settings

    assert {"SECRET_KEY", "SECRET_KEY_FILE", "DATABASE_URL", "DEBUG", "CELERY_BROKER_URL", "METRICS_TOKEN"} <= set(
        settings.SETTINGS_ENV_NAMES
    )
    assert settings.OUTBOUND_ALLOWED_NETWORKS is not None and settings.SECRET_ENV_PREFIX == "GPUC_SECRET_"


def test_the_production_default_allows_no_network():
    """Unset, OUTBOUND_ALLOWED_NETWORKS allows nothing beyond public addresses (the suite widens it in conftest)."""
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "console.settings", "SECRET_KEY": "x" * 50}
    code = "import django; django.setup(); from django.conf import settings; print(settings.OUTBOUND_ALLOWED_NETWORKS)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
