"""The GPU catalog moved down to `apps.backends.catalog` (backends read it and sit below fleet).

Kept as a re-export only until `apps/backends/kubernetes/workloads.py` (the rendering work) imports it from
there; then delete this module.
"""

from apps.backends.catalog import CATALOG, catalog_by_code

__all__ = ["CATALOG", "catalog_by_code"]
