"""Typed readers for settings that come from the environment.

Each helper fails fast with a message naming the variable and what it accepts, so a typo in a
deployment shows up at start-up instead of as odd behaviour later.
"""

from __future__ import annotations

import ipaddress
import os
import re
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
# Every variable the settings read (with its `_FILE` form): a cluster's `secret_env` may never name one.
READ: set[str] = set()


def env_str(name: str, default: str | None = None) -> str:
    """Return a string variable; a `<NAME>_FILE` variable (Docker/Kubernetes secrets) wins over `<NAME>`."""
    READ.update((name, f"{name}_FILE"))
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            with open(file_path, encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_path!r} cannot be read: {exc}") from exc
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_bool(name: str, default: bool = False) -> bool:
    """Return a boolean variable; anything but a clear yes/no is an error."""
    READ.add(name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return an integer variable within optional bounds."""
    READ.add(name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Return a comma-separated list variable, whitespace trimmed, empty items dropped."""
    READ.add(name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str, default: list[str]) -> list:
    """Return a comma-separated list of CIDR networks (host bits allowed: 10.1.2.3/8 is 10.0.0.0/8)."""
    networks = []
    for item in env_list(name, default):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network such as 10.0.0.0/8 or fd00::/8") from exc
    return networks


def env_name_prefix(name: str, default: str) -> str:
    """Return the start of environment variable names: upper-case letters, digits and _, at least 4 long."""
    value = env_str(name, default)
    if not re.fullmatch(r"[A-Z][A-Z0-9_]{3,63}", value):
        raise ImproperlyConfigured(f"{name}={value!r} must be 4 to 64 of A-Z, 0-9 and _, starting with a letter")
    return value


def parse_database_url(url: str) -> dict:
    """Turn `postgres://user:pass@host:port/name?opt=v` or `sqlite:///path` into a DATABASES entry."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute/path.db, as dj-database-url reads them.
        path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
        if not path:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r} names no SQLite file")
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path,
            # The demo runs web, worker and beat on one file: wait for locks and take the write lock up front.
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    if scheme in {"postgres", "postgresql", "pgsql"}:
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r} names no database")
        options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        options.update(_statement_options(options, url))
        try:
            port = parts.port
        except ValueError as exc:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r} has a bad port") from exc
        return {
            "ENGINE": "apps.core.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": options,
        }
    raise ImproperlyConfigured(f"DATABASE_URL scheme {scheme!r} is not supported; use postgres:// or sqlite:///")


def _statement_options(options: dict, url: str) -> dict:
    """Server-side binding with prepared statements unless the URL turns them off.

    A statement run `prepare_threshold` times on a connection is prepared: PostgreSQL stops parsing and
    planning it (on a submission that was half of PostgreSQL's CPU). Behind a pooler that cannot keep
    prepared statements (PgBouncer in transaction mode before 1.21), add `?prepare_threshold=none`.
    `?jit=on` leaves PostgreSQL's JIT compiler as the server configures it (the console turns it off).
    """
    binding = options.get("server_side_binding", "true").lower()
    if binding not in {"true", "false"}:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r}: server_side_binding must be true or false")
    threshold = options.get("prepare_threshold", "5").lower()
    if threshold != "none" and not threshold.isdigit():
        raise ImproperlyConfigured(f"DATABASE_URL={url!r}: prepare_threshold must be a whole number or none")
    jit = options.get("jit", "off").lower()
    if jit not in {"on", "off"}:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r}: jit must be on or off")
    return {
        "jit": jit,  # PostgreSQL's JIT compiler, off by default (apps/core/postgresql/base.py says why)
        "server_side_binding": binding == "true",
        "prepare_threshold": None if threshold == "none" or binding == "false" else int(threshold),
    }
