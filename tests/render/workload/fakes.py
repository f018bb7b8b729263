"""Test helpers: the kubelet's $(VAR) expansion, and fake programs that record the argv they receive."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# A fake program: writes its argv NUL-separated to $RECORD_DIR/<name>.argv (appending a counter when called
# again), its environment to <name>.env, then does what `behaviour` says. The file is claimed with noclobber
# (O_EXCL), so two copies started at once (a Ray head and its workers) never write the same record.
FAKE = """#!/bin/bash
n=0; out="$RECORD_DIR/{name}.argv"
until (set -C; : > "$out") 2>/dev/null; do n=$((n + 1)); out="$RECORD_DIR/{name}.$n.argv"; done
printf '%s\\0' "$@" >> "$out"
env -0 > "${{out%.argv}}.env"
{behaviour}
"""


def kubelet_expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' third_party/forked/golang/expansion.Expand, as the kubelet applies it to command, args
    and env values: `$(NAME)` becomes the variable's value (left as is when undefined), `$$` becomes `$`,
    any other `$` stays."""
    out = []
    i = 0
    while i < len(value):
        char = value[i]
        if char != "$" or i + 1 >= len(value):
            out.append(char)
            i += 1
            continue
        following = value[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            close = value.find(")", i + 2)
            if close == -1:
                out.append("$(")
                i += 2
            else:
                name = value[i + 2 : close]
                out.append(env.get(name, f"$({name})"))
                i = close + 1
        else:
            out.append("$" + following)
            i += 2
    return "".join(out)


def write_fake(bin_dir: Path, name: str, behaviour: str = "") -> None:
    path = bin_dir / name
    path.write_text(FAKE.format(name=name, behaviour=behaviour))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def recorded(record_dir: Path, name: str, call: int = 0) -> list[str]:
    path = record_dir / (f"{name}.argv" if call == 0 else f"{name}.{call}.argv")
    data = path.read_bytes()
    return [part.decode() for part in data.split(b"\0")[:-1]]


def recorded_env(record_dir: Path, name: str) -> dict[str, str]:
    data = (record_dir / f"{name}.env").read_bytes()
    pairs = [item.decode() for item in data.split(b"\0") if item]
    return dict(pair.split("=", 1) for pair in pairs)


def base_env(bin_dir: Path, record_dir: Path, home: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: the fakes first on PATH, then the system's (bash, env, mkdir ...)."""
    return {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "RECORD_DIR": str(record_dir),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        **extra,
    }


def hostile(pwned: Path) -> list[str]:
    """Arguments a shell, sbatch or the kubelet would act on if any of them were interpolated raw."""
    return [
        f"$(touch {pwned})",
        f"`touch {pwned}`",
        f"; touch {pwned}",
        f"&& touch {pwned} &&",
        f"| touch {pwned}",
        f"> {pwned}",
        f"'; touch {pwned}; '",
        f'"; touch {pwned}; "',
        f"\ntouch {pwned}\n",
        "\n#SBATCH --gres=gpu:99\n",
        f"#SBATCH --wrap=touch {pwned}",
        "--",
        "-rf",
        "--nnodes=99",
        "$HOME",
        "${HOME}",
        "$$",
        "$(HOME)",
        "$$(HOME)",
        "$(",
        "\\",
        "\\n",
        "*",
        "~",
        "a b  c",
        "\t",
        "é ☃ \u2028",
        "\x1b[31m\x7f\x85",
        "",
        "%j",
        "!!",
        "{a,b}",
        "$'x'",
    ]
