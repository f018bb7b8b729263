"""What apps show on a workload's page and beside the submit form, registered in their AppConfig.ready.

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


@dataclass(frozen=True)
class SubmitPreview:
    """A live preview beside the submit form: `key` names its endpoint (/workloads/new/preview/<key>/), `title` its
    heading (marked for translation), `template` renders `context(user, prepared)` as `preview` (`prepared`: the
    spec checked as a submission checks it, apps/workloads/services/submission.py::PreparedSubmission)."""

    key: str
    title: str
    template: str
    context: Callable[..., dict]
    order: int = 0


_previews: list[SubmitPreview] = []


def register_submit_preview(
    key: str, title: str, template: str, context: Callable[..., dict], *, order: int = 0
) -> None:
    """Show a preview beside the submit form, refreshed as the spec is edited (once per key). The submit page
    knows nothing of what it shows: the admission decision and the rendering are the workloads app's own
    (WorkloadsConfig.ready), the cost is chargeback's (ChargebackConfig.ready). `order` places it (low first)."""
    if all(p.key != key for p in _previews):
        _previews.append(SubmitPreview(key, title, template, context, order))
        _previews.sort(key=lambda p: p.order)


def submit_previews() -> list[SubmitPreview]:
    return list(_previews)


def submit_preview(key: str) -> SubmitPreview | None:
    return next((p for p in _previews if p.key == key), None)
