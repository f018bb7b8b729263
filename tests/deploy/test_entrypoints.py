"""Every command the deployments run exists in the image the Dockerfile builds, as the user it runs as.

The image is python:3.11-slim (a Debian base: python, sh) with `pip install .` (the console scripts of the pinned
dependencies: gunicorn, celery) and the source tree in /app (manage.py, the `console` package). Commands of the
Kubernetes overlays' console containers (and their exec probes) and of docker-compose.yml's console services are
checked against that, and their user and port against the Dockerfile's.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib

import pytest
import yaml
from django.core.management import get_commands

from tests.deploy.conftest import OVERLAYS, ROOT
from tests.deploy.manifests import console_pods, containers

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def dockerfile(pattern: str) -> str:
    match = re.search(pattern, DOCKERFILE, re.MULTILINE)
    assert match, f"the Dockerfile has no {pattern!r}"
    return match.group(1)


def pinned_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[\[=<>!~ ]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}


def problems(argv: list[str]) -> list[str]:
    """What of `argv` the image would not run ([] when it would)."""
    program, args = argv[0], argv[1:]
    if program == "sh":  # the base image's shell: check the command it runs
        assert args[0] == "-c"
        return problems(args[1].split())
    if program == "python":
        if not dockerfile(r"^FROM (python:\S+)").startswith("python:3.11"):
            return ["the image is not python:3.11"]
        if args[0] != "manage.py" or not (ROOT / "manage.py").is_file():
            return [f"python {args[0]}: not the image's manage.py"]
        return [] if args[1] in get_commands() else [f"manage.py has no command {args[1]}"]
    if program in {"gunicorn", "celery"}:
        if program not in pinned_dependencies() or "pip install ." not in DOCKERFILE:
            return [f"{program} is not installed by the Dockerfile's pip install ."]
        if program == "gunicorn":
            return [] if importlib.util.find_spec(args[0]) else [f"gunicorn: no module {args[0]}"]
        app = args[args.index("-A") + 1]
        if not (ROOT / app / "celery.py").is_file():
            return [f"celery -A {app}: no {app}/celery.py"]
        return [] if args[2] in {"worker", "beat", "inspect"} else [f"celery {args[2]}: not a command used here"]
    return [f"{program}: not in the image"]


def kubernetes_commands(objects: list[dict]) -> list[tuple[str, list[str]]]:
    out = []
    for owner, pod in console_pods(objects):
        for container in containers(pod):
            where = f"{owner['metadata']['name']}/{container['name']}"
            out.append((where, container["command"] + container.get("args", [])))
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if "exec" in container.get(probe, {}):
                    out.append((f"{where} {probe}", container[probe]["exec"]["command"]))
    return out


def compose_commands() -> list[tuple[str, list[str]]]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return [(name, s["command"]) for name, s in compose["services"].items() if s.get("build") == "."]


def test_the_checks_refuse_what_the_image_lacks():
    assert problems(["python", "manage.py", "wait_for_migrations"]) == []
    assert problems(["python", "manage.py", "no_such_command"]) == ["manage.py has no command no_such_command"]
    assert problems(["uwsgi", "--ini", "x"]) == ["uwsgi: not in the image"]
    assert problems(["celery", "-A", "nowhere", "worker"]) == ["celery -A nowhere: no nowhere/celery.py"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubernetes_commands_exist_in_the_image(rendered, overlay):
    commands = kubernetes_commands(rendered[overlay])
    assert len(commands) >= 9
    for where, argv in commands:
        assert problems(argv) == [], where


def test_compose_commands_exist_in_the_image():
    commands = compose_commands()
    assert {name for name, _ in commands} == {"migrate", "web", "worker", "beat"}
    for where, argv in commands:
        assert problems(argv) == [], where


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_run_as_the_image_user_on_its_port(rendered, overlay):
    uid = int(dockerfile(r"useradd .*--uid (\d+)"))
    gid = int(dockerfile(r"groupadd .*--gid (\d+)"))
    port = int(dockerfile(r"^EXPOSE (\d+)"))
    assert dockerfile(r"^USER (\S+)") == "console"
    for owner, pod in console_pods(rendered[overlay]):
        context = pod["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid), owner["metadata"]["name"]
    web = next(o for o, _ in console_pods(rendered[overlay]) if o["metadata"]["name"] == "gpu-console-web")
    (container,) = web["spec"]["template"]["spec"]["containers"]
    assert [p["containerPort"] for p in container["ports"]] == [port]
    assert f"0.0.0.0:{port}" in container["command"]
    # The image run bare serves the way the Deployment runs it.
    cmd = [part.strip().strip('"') for part in dockerfile(r"^CMD \[(.*)\]").split(",")]
    assert cmd == container["command"]
