"""What a Slurm cluster's `ssh_host` and `ssh_options` may be: a login node and the options of a plain connection.

ssh runs on the console's host, so an option that runs a command there (ProxyCommand, LocalCommand with
PermitLocalCommand, KnownHostsCommand, Match exec), reads another configuration (-F, Include), forwards ports,
the agent or X11, or writes files (-E, ControlPath) would hand the console's host to whoever edits a cluster.
Only the options below are accepted, each value from a narrow alphabet; anything else is refused by name when
the cluster is saved and again before ssh runs.

ProxyJump (-J) is refused too: a jump host is a second ssh connection configured from the database. A site that
needs one sets it in the ssh configuration of the console's user (~/.ssh/config), which the deployment owns.
"""

from __future__ import annotations

import re

_PATH = r"[A-Za-z0-9._/~+-]+"
_NUMBER = r"[0-9]{1,5}"
_YES_NO = r"yes|no"
# -o options (case-insensitive, as ssh reads them) and the values each accepts.
OPTIONS = {
    "identityfile": _PATH,
    "identitiesonly": _YES_NO,
    "certificatefile": _PATH,
    "port": _NUMBER,
    "user": r"[A-Za-z0-9._][A-Za-z0-9._-]*",
    "stricthostkeychecking": r"yes|no|accept-new|off",
    "userknownhostsfile": _PATH,
    "globalknownhostsfile": _PATH,
    "hostkeyalias": r"[A-Za-z0-9._-]+",
    "checkhostip": _YES_NO,
    "connecttimeout": _NUMBER,
    "connectionattempts": _NUMBER,
    "serveraliveinterval": _NUMBER,
    "serveralivecountmax": _NUMBER,
    "tcpkeepalive": _YES_NO,
    "compression": _YES_NO,
    "addressfamily": r"any|inet|inet6",
    "loglevel": r"QUIET|FATAL|ERROR|INFO|VERBOSE|DEBUG|DEBUG1|DEBUG2|DEBUG3",
}
# Flags with a value (-i FILE, -p PORT, -l USER) and flags alone.
VALUE_FLAGS = {"i": "identityfile", "p": "port", "l": "user"}
SWITCHES = {"4", "6", "C", "q"}

_HOST = re.compile(
    r"(?:[A-Za-z0-9._][A-Za-z0-9._-]{0,63}@)?"  # the user, never starting with '-'
    r"(?:[A-Za-z0-9_][A-Za-z0-9._-]{0,252}|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)"  # a name or IPv4, or an IPv6 address
)


def ssh_host_error(host) -> str:
    """Why `host` is not a login node ssh may be given ('' if fine): [user@]name or address, never an option."""
    if not isinstance(host, str) or not _HOST.fullmatch(host):
        return (
            f"{host!r} is not [user@]host: letters, digits, '.', '_' and '-' (not first), or an IP address; "
            "no spaces, options or shell characters"
        )
    return ""


def _value_error(option: str, value: str) -> str:
    if not re.fullmatch(OPTIONS[option], value, flags=re.IGNORECASE if option == "loglevel" else 0):
        return f"{value!r} is not a value ssh_options accepts for {option}"
    return ""


def _option_error(text: str) -> str:
    key, sep, value = text.partition("=")
    if not sep:
        key, _, value = text.partition(" ")
    key, value = key.strip(), value.strip()
    if key.lower() not in OPTIONS:
        return f"-o {key} is not allowed (allowed: {', '.join(sorted(OPTIONS))})"
    return _value_error(key.lower(), value)


def ssh_options_errors(options) -> list[str]:
    """What is wrong with `options` (a list of ssh arguments) under the allow-list ([] if nothing)."""
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        return ["must be a list of strings"]
    errors: list[str] = []
    i = 0
    while i < len(options):
        arg = options[i]
        i += 1
        if len(arg) < 2 or arg[0] != "-" or arg[1] == "-":
            errors.append(f"{arg!r} is not an ssh option (the host is ssh_host)")
            continue
        flag, attached = arg[1], arg[2:]
        if flag in SWITCHES and not attached:
            continue
        if flag not in VALUE_FLAGS and flag != "o":
            errors.append(f"-{flag} is not allowed (allowed: -4, -6, -C, -q, -i, -p, -l and -o options)")
            continue
        if not attached:
            if i >= len(options):
                errors.append(f"-{flag} needs a value")
                continue
            attached = options[i]
            i += 1
        problem = _option_error(attached) if flag == "o" else _value_error(VALUE_FLAGS[flag], attached)
        if problem:
            errors.append(problem)
    return errors
