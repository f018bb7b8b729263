"""What apps above workloads show on a workload's page, registered in their AppConfig.ready.

Workloads sits below chargeback in the layers and imports nothing of it, yet a workload's page shows what
the workload cost. An app with something to show registers a status panel: a template and a function that
gives it its context (a dict, seen by the template as `panel`). The status block, which polls itself while
the workload runs, renders each panel in the order the apps registered them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apps.workloads.models import Workload


@dataclass(frozen=True)
class StatusPanel:
    template: str
    context: Callable[[Workload], dict]


_panels: list[StatusPanel] = []


def register_status_panel(template: str, context: Callable[[Workload], dict]) -> None:
    """Show `template` in every workload's status block, with `context(workload)` as `panel` (once per template)."""
    if all(p.template != template for p in _panels):
        _panels.append(StatusPanel(template, context))


def status_panels(workload: Workload) -> list[dict]:
    """The registered panels for `workload`: each its context plus the `template` to render it with."""
    return [{**p.context(workload), "template": p.template} for p in _panels]
