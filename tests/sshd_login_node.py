"""A private sshd on 127.0.0.1 as the Slurm "login node", for the backend's SSH mode (`ssh_host`).

The login node is this machine: sshd lets root in with a key generated here, and gives every session the
local cluster's SLURM_CONF (sshd's SetEnv), as a real login node's default slurm.conf would, and a PATH
with torchrun (a stand-in) for the console's training scripts. openssh-server is installed with apt when
missing, like scripts/slurm-local.sh installs Slurm. The daemon runs in the foreground under pytest and
is stopped by its PID at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
PACKAGES = ("openssh-server", "openssh-client")
PORT = 8801
PRIVSEP_DIR = Path("/run/sshd")  # Debian's sshd refuses to start without it


@dataclass(frozen=True)
class LoginNode:
    host: str  # ssh_host
    port: int
    key: str  # the client's private key
    log: str  # sshd's log (-E)

    def options(self, port: int | None = None) -> list[str]:
        """ssh_options for the backend; `port` points it somewhere else (nothing listening, say)."""
        return [
            "-i",
            self.key,
            "-p",
            str(port or self.port),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
        ]


def _missing_packages() -> list[str]:
    missing = []
    for pkg in PACKAGES:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if "install ok installed" not in status.stdout:
            missing.append(pkg)
    return missing


def _install(packages: list[str]) -> None:
    if os.geteuid() != 0:
        pytest.fail(f"installing {' '.join(packages)} needs root (apt-get)", pytrace=False)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=300"]
    install = [*apt, "install", "-y", "--no-install-recommends", *packages]
    result = subprocess.run(install, capture_output=True, text=True, env=env, timeout=900)
    if result.returncode != 0:
        subprocess.run([*apt, "update"], capture_output=True, text=True, env=env, timeout=900)
        result = subprocess.run(install, capture_output=True, text=True, env=env, timeout=900)
    if result.returncode != 0:
        pytest.fail(f"apt-get install {' '.join(packages)} failed:\n{result.stdout}\n{result.stderr}", pytrace=False)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=60)


def _config(root: Path, slurm_conf: str, path: str) -> Path:
    config = root / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"Port {PORT}",
                f"HostKey {root / 'host_ed25519'}",
                f"AuthorizedKeysFile {root / 'authorized_keys'}",
                f"PidFile {root / 'sshd.pid'}",
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "StrictModes no",
                "UsePAM no",
                "X11Forwarding no",
                "AllowTcpForwarding no",
                "PrintMotd no",
                "LogLevel VERBOSE",
                f"SetEnv SLURM_CONF={slurm_conf} PATH={path}",
                "",
            ]
        )
    )
    return config


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def ssh_login_node(local_slurm):
    """sshd on 127.0.0.1:8801 whose sessions reach the local Slurm cluster; stopped at the end by PID."""
    missing = _missing_packages()
    if missing:
        _install(missing)
    if _listening(PORT):
        pytest.fail(f"127.0.0.1:{PORT} is taken: the test sshd needs it", pytrace=False)
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="gpuc-sshd-"))
    _keygen(root / "host_ed25519")
    _keygen(root / "id_ed25519")
    shutil.copyfile(root / "id_ed25519.pub", root / "authorized_keys")
    # The login node's PATH has torchrun (its stand-in), as a real one's would for the console's training jobs.
    config = _config(root, local_slurm.conf, f"{local_slurm.stand_ins()}:/usr/local/bin:/usr/bin:/bin")
    log = root / "sshd.log"
    check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True, timeout=60)
    if check.returncode != 0:
        pytest.fail(f"sshd rejects its test config: {check.stderr}", pytrace=False)
    daemon = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(log)])
    node = LoginNode(host="root@127.0.0.1", port=PORT, key=str(root / "id_ed25519"), log=str(log))
    try:
        deadline = time.monotonic() + 30
        while not _listening(PORT):
            if daemon.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the test sshd did not start:\n{log.read_text() if log.exists() else ''}", pytrace=False)
            time.sleep(0.1)
        yield node
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
