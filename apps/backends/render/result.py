"""What the Kubernetes renderer returns, and its YAML form for previews and golden files."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import yaml


class _Dumper(yaml.SafeDumper):
    """SafeDumper that indents block sequences under their key, as kubectl prints them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def comment_block(lines: list[str], width: int = 100) -> str:
    """Caveats as '#' comment lines, wrapped, one bullet each."""
    out = []
    for line in lines:
        out.append(textwrap.fill(line, width=width, initial_indent="# - ", subsequent_indent="#   "))
    return "\n".join(out) + "\n" if out else ""


@dataclass
class RenderResult:
    """Kubernetes objects for server-side apply, dependencies first, and what the backend cannot express."""

    objects: list[dict] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the desired-state page shows: the YAML with its caveats."""
        return self.to_yaml()

    def to_yaml(self, *, with_caveats: bool = True) -> str:
        """A multi-document YAML stream; the caveats lead as comments so a preview shows them first."""
        head = ""
        if with_caveats and self.caveats:
            head = "# Caveats: what this backend cannot express of the console's model\n" + comment_block(self.caveats)
        body = yaml.dump_all(
            self.objects,
            Dumper=_Dumper,
            sort_keys=False,
            default_flow_style=False,
            explicit_start=True,
            width=1000,  # never fold long strings: keeps output byte-stable and grep-able
            allow_unicode=True,
        )
        return head + body
