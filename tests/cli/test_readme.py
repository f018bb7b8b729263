"""The README's CI section shows a pipeline logging in with its own OIDC identity on GitLab CI and on GitHub Actions,
with the snippets of docs/cli.md (the same text: they cannot drift apart), and the README keeps its two set-up
commands."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_ci_section_shows_the_oidc_login_for_gitlab_and_github_as_docs_cli_md_does():
    readme = (ROOT / "README.md").read_text()
    cli_doc = (ROOT / "docs" / "cli.md").read_text()
    snippets = _blocks(_section(readme, "A CI pipeline with a token"), "yaml")
    pipelines = [yaml.safe_load(s) for s in snippets]
    gitlab = next(p["train"] for p in pipelines if "id_tokens" in p.get("train", {}))
    (variable, asked), = gitlab["id_tokens"].items()  # fmt: skip
    assert asked["aud"] == "https://console.example.com"
    assert f"gpuc login --url https://console.example.com --oidc-token-env {variable}" in gitlab["script"]
    github = next(p for p in pipelines if "permissions" in p)
    assert github["permissions"]["id-token"] == "write"
    script = "\n".join(step.get("run", "") for step in github["jobs"]["train"]["steps"])
    assert "$ACTIONS_ID_TOKEN_REQUEST_URL&audience=$GPUC_URL" in script and "gpuc login --oidc-token-file" in script
    for snippet in snippets:
        if "id_tokens" in snippet or "id-token: write" in snippet:
            assert f"```yaml\n{snippet}```" in cli_doc, f"not in docs/cli.md as it is in the README:\n{snippet}"


def test_the_readme_sets_up_with_exactly_two_commands():
    quick_start = _section((ROOT / "README.md").read_text(), "Quick start")
    assert _blocks(quick_start, "sh") == ["make demo\n", "make test\n"]
