"""Where gpuc finds the console and its token: flags, then GPUC_URL / GPUC_TOKEN, then the config file.

The file is ~/.config/gpuc/config.json ($XDG_CONFIG_HOME/gpuc/config.json when that is set), or $GPUC_CONFIG:
`{"url": "...", "token": "gpuc_...", "username": "...", "expires_at": "..."}`, written by `gpuc login` with mode
0600 in a directory of mode 0700 (it holds a bearer token). A CI job sets GPUC_URL and GPUC_TOKEN and needs no
login step (and no file).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpuc.errors import USAGE, GpucError


def config_path() -> Path:
    explicit = os.environ.get("GPUC_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gpuc" / "config.json"


def load_file() -> dict:
    path = config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise GpucError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise GpucError(f"{path} is not JSON: fix it or log in again (gpuc login)") from None
    if not isinstance(data, dict):
        raise GpucError(f"{path} must hold a JSON object: fix it or log in again (gpuc login)")
    return data


def save_file(data: dict) -> Path:
    """Write the config atomically, readable by its owner only (0600; the directory 0700 when gpuc makes it)."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config-", dir=str(path.parent))  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


@dataclass
class Target:
    url: str
    token: str | None
    url_from: str
    token_from: str


def resolve(url_flag: str | None, token_flag: str | None, *, need_token: bool = True) -> Target:
    """The console and token in force: a flag wins over the environment, which wins over the file."""
    stored = load_file()
    url, url_from = _first(("--url", url_flag), ("GPUC_URL", os.environ.get("GPUC_URL")), ("config", stored.get("url")))
    token, token_from = _first(
        ("--token", token_flag), ("GPUC_TOKEN", os.environ.get("GPUC_TOKEN")), ("config", stored.get("token"))
    )
    if not url:
        raise GpucError(
            "no console URL: pass --url, set GPUC_URL, or run `gpuc login --url https://console.example.com`", USAGE
        )
    if not url.startswith(("http://", "https://")):
        raise GpucError(f"the console URL must start with http:// or https://, not {url!r} (from {url_from})", USAGE)
    if need_token and not token:
        raise GpucError("no API token: set GPUC_TOKEN, pass --token, or run `gpuc login`", USAGE)
    return Target(url=url.rstrip("/"), token=token, url_from=url_from, token_from=token_from)


def _first(*candidates: tuple[str, str | None]) -> tuple[str | None, str]:
    for source, value in candidates:
        if value:
            return value.strip(), source
    return None, ""
