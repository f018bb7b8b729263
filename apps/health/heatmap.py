"""The overview's GPU utilization heatmap, grouped in SQL: computed from the health rows, or kept per cluster.

Nodes are ordered by cluster and name; runs of `group` consecutive nodes of one cluster share a column, and each
cell is one GPU index over them: mean, min, max and the number of readings (nodes whose exporter does not answer
give none). Grouping every GPU of 102,400 at each view cost the overview ~150 ms (a window over 12,800 nodes, the
join to their health rows, ~100,000 cells grouped to 1,300), so each ingestion cycle also keeps its cluster's
cells (`UtilizationHeatmap`, in the transaction that writes the health rows) and the overview reads those: ten
rows for ten clusters. A cluster's stored cells are used only while its nodes are still the ones they were
computed for (their number and the sums of their ids and squared ids, which the overview's capacity statement
counts anyway) and the fleet still puts as many nodes in a column; any other cluster is computed here as before,
in the same statement.
"""

from __future__ import annotations

import json
import math

from django.db import connection
from django.db.models import Count, F, Window
from django.db.models.functions import RowNumber

HEATMAP_COLUMNS = 160  # about 8 px per column at 1440 px: more nodes than this share a column

# A heatmap row: (cluster name, column, first node, last node, nodes in the cluster, first node id, GPU index,
# mean, min, max, readings); the stored cells are the same without the cluster's name.
CELL_FIELDS = ("col", "first_node", "last_node", "in_cluster", "node_id", "gpu", "mean", "low", "high", "readings")


def group_size(node_count: int, columns: int = HEATMAP_COLUMNS) -> int:
    """Nodes to a column: 1 up to `columns` nodes, more beyond (the same in SQL: `_GROUP_SQL`)."""
    return max(1, math.ceil(node_count / columns))


# (join, GPU index, utilization) over a health row's utilization by GPU (`NodeHealth.gpu_util`, {index: value},
# written at ingest), in each database's JSON dialect. On PostgreSQL, OFFSET 0 keeps the lateral subquery whole, so
# the grouping sorts numbers, not each GPU's JSON. The small document is stored inline: reading each node's whole
# readings (`gpus`, ~6 kB, compressed) instead cost 670 ms at 12,800 nodes against 1,280 documents' 45 ms.
_GPU_CELLS = {
    "postgresql": (
        "LEFT JOIN LATERAL (SELECT key::int AS gpu, (value #>> '{}')::float AS util "
        "FROM jsonb_each(h.gpu_util) OFFSET 0) g ON TRUE",
        "g.gpu",
        "g.util",
    ),
    "sqlite": (
        "LEFT JOIN json_each(h.gpu_util) g",
        "CAST(g.key AS INTEGER)",
        "g.value",
    ),
}


def _ranked(nodes):
    """`nodes` with GPUs that have not vanished, each with its place in its cluster by name and the cluster's count."""
    from apps.fleet.models import NodeState

    ranked = (
        nodes.exclude(state=NodeState.VANISHED)
        .filter(gpu_count__gt=0)
        .order_by()
        .annotate(
            node_id=F("id"),
            node_name=F("name"),
            cluster_name=F("cluster__name"),
            pos=Window(RowNumber(), partition_by=[F("cluster_id")], order_by=F("name").asc()),
            in_cluster=Window(Count("id"), partition_by=[F("cluster_id")]),
        )
        .values("node_id", "node_name", "cluster_id", "cluster_name", "pos", "in_cluster")
    )
    return ranked.query.sql_with_params()


def _cells_sql(
    inner: str, where: str = "TRUE", cluster_column: str = "MAX(r.cluster_name), ", group: str = "%s"
) -> str:
    join, gpu, util = _GPU_CELLS[connection.vendor]
    return f"""
        SELECT {cluster_column}(r.pos - 1) / {group} AS col, MIN(r.node_name), MAX(r.node_name), MAX(r.in_cluster),
               MIN(r.node_id), {gpu} AS gpu, AVG({util}), MIN({util}), MAX({util}), COUNT({util})
        FROM ({inner}) r
        LEFT JOIN health_nodehealth h ON h.node_id = r.node_id AND h.exporter_up
        {join}
        WHERE {where}
        GROUP BY r.cluster_id, col, gpu
    """  # noqa: S608 - only our own compiled SQL and constants are interpolated; values are parameters


def computed_rows(nodes, group: int) -> list[tuple]:
    """The heatmap's rows for `nodes`, grouped from every node's health row now (one statement)."""
    inner, params = _ranked(nodes)
    with connection.cursor() as cursor:
        cursor.execute(_cells_sql(inner), [group, *params])
        return cursor.fetchall()


# One cluster's cells as a JSON array of arrays (PostgreSQL): what is stored, and what the overview computes for a
# cluster whose stored cells do not hold. `{where}` picks the cluster.
_CLUSTER_CELLS = (
    "SELECT COALESCE(jsonb_agg(jsonb_build_array({fields}) ORDER BY c.col, c.gpu), '[]'::jsonb) "
    "FROM ({cells}) c({names})"
)


def _cluster_cells_sql(inner: str, where: str, group: str = "%s") -> str:
    return _CLUSTER_CELLS.format(
        cells=_cells_sql(inner, where, cluster_column="", group=group),
        fields=", ".join(f"c.{name}" for name in CELL_FIELDS),
        names=", ".join(CELL_FIELDS),
    )


def rows(nodes, group: int, node_sets: dict[int, tuple[int, int, int]] | None = None) -> list[tuple]:
    """The heatmap's rows for `nodes` (as `computed_rows`), from the cells the health cycles stored where they hold.

    `node_sets`: per cluster, (nodes, sum of ids, sum of squared ids) of `nodes` with GPUs that have not vanished
    (`capacity_by_model(..., node_sets=...)` counts them). Without them, or on SQLite, everything is computed. One
    statement either way."""
    if node_sets is None or connection.vendor != "postgresql":
        return computed_rows(nodes, group)
    if not node_sets:
        return []
    inner, params = _ranked(nodes)
    ids = list(node_sets)
    # A cluster's stored cells if they were grouped as now for the same nodes, else its cells computed (COALESCE
    # evaluates the subquery only for those; the window's partition key takes the cluster's filter inside).
    sql = f"""
        SELECT k.name, COALESCE(s.cells, ({_cluster_cells_sql(inner, "r.cluster_id = w.cluster_id")}))
        FROM unnest(%s::bigint[], %s::bigint[], %s::numeric[], %s::numeric[]) w(cluster_id, nodes, id_sum, id_sq)
        JOIN fleet_cluster k ON k.id = w.cluster_id
        LEFT JOIN health_utilizationheatmap s ON s.cluster_id = w.cluster_id AND s.group_size = %s
            AND s.nodes = w.nodes AND s.id_sum = w.id_sum AND s.id_sq = w.id_sq
    """  # noqa: S608 - only our own compiled SQL and constants are interpolated; values are parameters
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                group,
                *params,
                ids,
                [node_sets[c][0] for c in ids],
                [node_sets[c][1] for c in ids],
                [node_sets[c][2] for c in ids],
                group,
            ],
        )
        found = cursor.fetchall()
    # Django hands jsonb over as its text (the fields parse it): parsed here, ~1,300 cells at 12,800 nodes.
    return [_row(name, cell) for name, cells in found for cell in json.loads(cells)]


def _row(cluster: str, cell: list) -> tuple:
    """A stored cell as the computed row: JSON gives 50 for the mean 50.0, the heatmap shows floats."""
    col, first, last, in_cluster, node_id, gpu, mean, low, high, readings = cell
    if mean is not None:
        mean, low, high = float(mean), float(low), float(high)
    return cluster, col, first, last, in_cluster, node_id, gpu, mean, low, high, readings


# The fleet's nodes to a column, as `group_size` computes it from the overview's node count.
_GROUP_SQL = "SELECT GREATEST(1, (COUNT(*) + %s - 1) / %s) FROM fleet_node WHERE state <> %s AND gpu_count > 0"


def store_heatmap(cluster_id: int) -> None:
    """Keep `cluster_id`'s heatmap cells as grouped now (PostgreSQL; elsewhere the overview computes them): run by
    each ingestion cycle after it wrote the cluster's health rows, in the same transaction."""
    from apps.fleet.models import Node, NodeState

    if connection.vendor != "postgresql":
        return
    inner, params = _ranked(Node.objects.filter(cluster_id=cluster_id))
    cells = _cluster_cells_sql(inner, "TRUE", group="(SELECT size FROM g)")
    sql = f"""
        WITH g(size) AS ({_GROUP_SQL})
        INSERT INTO health_utilizationheatmap (cluster_id, group_size, nodes, id_sum, id_sq, cells, computed_at)
        SELECT %s, (SELECT size FROM g), f.nodes, f.id_sum, f.id_sq, ({cells}), now()
        FROM (SELECT COUNT(*), COALESCE(SUM(id), 0), COALESCE(SUM(id * id), 0) FROM fleet_node
              WHERE cluster_id = %s AND state <> %s AND gpu_count > 0) f(nodes, id_sum, id_sq)
        ON CONFLICT (cluster_id) DO UPDATE SET group_size = EXCLUDED.group_size, nodes = EXCLUDED.nodes,
            id_sum = EXCLUDED.id_sum, id_sq = EXCLUDED.id_sq, cells = EXCLUDED.cells, computed_at = EXCLUDED.computed_at
    """  # noqa: S608 - only our own compiled SQL and constants are interpolated; values are parameters
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                HEATMAP_COLUMNS,
                HEATMAP_COLUMNS,
                NodeState.VANISHED,
                cluster_id,
                *params,  # the cells' group is the fleet's (g), computed in the statement
                cluster_id,
                NodeState.VANISHED,
            ],
        )
