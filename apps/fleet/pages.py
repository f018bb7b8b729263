"""Cluster pages a higher app contributes under the fleet's URLs.

The fleet sits below tenancy in the layers, so it cannot import tenancy's views; tenancy registers its
cluster pages here in its AppConfig.ready (before the URLconf is first loaded) and `apps/fleet/urls.py`
mounts them under clusters/<name>/ in the fleet's namespace, so their URLs and names stay the fleet's
(e.g. fleet:cluster_desired_state).
"""

from __future__ import annotations

from collections.abc import Callable

# (route under clusters/<str:name>/, view taking (request, name), URL name)
CLUSTER_PAGES: list[tuple[str, Callable, str]] = []


def register_cluster_page(route: str, view: Callable, name: str) -> None:
    """Mount `view` at clusters/<name>/<route> as fleet:<name>; registering the same name again replaces it."""
    CLUSTER_PAGES[:] = [page for page in CLUSTER_PAGES if page[2] != name]
    CLUSTER_PAGES.append((route, view, name))


# (template, context function taking (request, cluster name or "") and returning its context, or None to show
# nothing): panels of the capacity page that a higher app fills (tenancy: the unguaranteed GPUs per cluster).
CAPACITY_PANELS: list[tuple[str, Callable]] = []


def register_capacity_panel(template: str, context: Callable) -> None:
    """Show `template` on the capacity page with `context(request, cluster_name)` as `panel`; one per template."""
    CAPACITY_PANELS[:] = [panel for panel in CAPACITY_PANELS if panel[0] != template]
    CAPACITY_PANELS.append((template, context))
