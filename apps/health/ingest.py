"""One ingestion and evaluation cycle for one cluster: read, parse, evaluate, persist, hand findings on.

Per cycle the database sees a constant number of statements whatever the fleet size: one read of the
nodes, their GPUs and their last health rows, one bulk upsert of the health rows, one bulk insert of
the minute's rollups when the minute turns, updates for incidents that are still firing or have
gone quiet, and the cluster's heatmap cells for the overview (`apps/health/heatmap.py`). Only findings
that are new on a node go to the incident service (one node at a time).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

import orjson
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.backends.registry import get_backend
from apps.fleet.models import Cluster, Gpu, Node, NodeState
from apps.health.heatmap import store_heatmap
from apps.health.models import (
    SEVERITY_RANK,
    Incident,
    NodeHealth,
    NodeRollup,
    NodeStatus,
    SourceKind,
    TelemetrySource,
)
from apps.health.parsing import ParsedScrape
from apps.health.rules import (
    FOLDED_METRICS,
    HUNG_JOB,
    CompiledRules,
    Finding,
    evaluate_gpu,
    exporter_down,
    missing_gpus,
)
from apps.health.sources import Outcome, ScrapeError

logger = logging.getLogger(__name__)

CYCLE_LEASE = timedelta(minutes=5)
_HEALTH_FIELDS = [
    "status",
    "scraped_at",
    "exporter_up",
    "consecutive_failures",
    "last_error",
    "samples",
    "malformed",
    "gpus",
    "gpu_util",
    "counters",
    "acc_minute",
    "acc",
    "firing",
]
_STATUS_BY_SEVERITY = {0: NodeStatus.OK, 1: NodeStatus.WARNING, 2: NodeStatus.CRITICAL, 3: NodeStatus.FATAL}


@dataclass
class CycleResult:
    cluster: str
    nodes: int = 0
    unreachable: int = 0
    samples: int = 0
    malformed: int = 0
    sentinels: int = 0
    findings: int = 0
    new_findings: int = 0
    rollups: int = 0
    duration_ms: int = 0
    skipped: bool = False
    error: str = ""


def default_source(cluster: Cluster) -> TelemetrySource:
    """The cluster's source row; a cluster whose backend has its own telemetry (a simulated one) gets one reading
    it in process (the system's bookkeeping)."""
    source = TelemetrySource.objects.filter(cluster=cluster).first()
    if source is None and get_backend(cluster).telemetry_in_process:
        source, _ = TelemetrySource.objects.get_or_create(cluster=cluster, defaults={"kind": SourceKind.SIMULATOR})
    return source


def _claim(source: TelemetrySource) -> bool:
    now = timezone.now()
    return (
        TelemetrySource.objects.filter(
            Q(cycle_started_at__isnull=True) | Q(cycle_started_at__lt=now - CYCLE_LEASE), pk=source.pk
        ).update(cycle_started_at=now)
        == 1
    )


def collect(source: TelemetrySource, cluster: Cluster, nodes: list[str], wanted) -> dict[str, Outcome]:
    from apps.health import sources

    if source.kind == SourceKind.EXPORTER:
        return sources.scrape_exporters(source.url_pattern, cluster.name, nodes, wanted, source.timeout_s)
    if source.kind == SourceKind.PROMETHEUS:
        return sources.query_prometheus(source.prometheus_url, nodes, wanted, source.timeout_s)
    return sources.read_in_process(cluster, nodes, wanted)


def run_cycle(cluster_id: int, at: datetime | None = None) -> CycleResult:
    """Read the cluster's telemetry (outside any transaction), then ingest it. Skipped if a cycle runs.
    `at` is when the readings count as taken (now; tests stepping through simulated minutes give theirs)."""
    from apps.health.services.rulesets import compiled_rules

    cluster = Cluster.objects.get(pk=cluster_id)
    source = default_source(cluster)
    if source is None or not source.enabled:
        return CycleResult(cluster=cluster.name, skipped=True, error="no telemetry source configured")
    if not _claim(source):
        return CycleResult(cluster=cluster.name, skipped=True)
    started = time.monotonic()
    try:
        compiled = compiled_rules()
        nodes = list(Node.objects.filter(cluster=cluster).exclude(state=NodeState.VANISHED).values_list("id", "name"))
        # What the cycle compares with is read before the scrape, not after it: once the telemetry is in, only the
        # rules stand between a fault and its cordon (issue 23: scrape finished → cordon applied ≤ 1 s).
        state = load_state(cluster, [node_id for node_id, _ in nodes])
        outcomes = collect(source, cluster, [name for _, name in nodes], compiled.metrics)
        result = ingest(cluster, nodes, outcomes, compiled, at or timezone.now(), state)
        result.duration_ms = int((time.monotonic() - started) * 1000)
        _record_source(source, result, outcomes)
        return result
    finally:
        TelemetrySource.objects.filter(pk=source.pk).update(cycle_started_at=None)


def _record_source(source: TelemetrySource, result: CycleResult, outcomes: dict[str, Outcome]) -> None:
    malformed = {
        node: [outcome.malformed, outcome.examples[0] if outcome.examples else ""]
        for node, outcome in outcomes.items()
        if isinstance(outcome, ParsedScrape) and outcome.malformed
    }
    errors = sorted({o.message for o in outcomes.values() if isinstance(o, ScrapeError)})
    TelemetrySource.objects.filter(pk=source.pk).update(
        last_cycle_at=timezone.now(),
        last_duration_ms=result.duration_ms,
        last_nodes=result.nodes,
        last_unreachable=result.unreachable,
        last_samples=result.samples,
        last_malformed=result.malformed,
        last_sentinels=result.sentinels,
        malformed_by_node=dict(sorted(malformed.items(), key=lambda item: -item[1][0])[:50]),
        last_error="; ".join(errors)[:2000],
    )


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _sample(gpus: dict) -> list:
    """This scrape's entry in the minute's accumulator: [the folded metrics' names, {gpu index: their values}] (None
    where a GPU did not report one). PostgreSQL appends it to the node's accumulator (`upsert_health`), so the
    accumulator is read only when the minute turns, never on an ordinary scrape."""
    return [FOLDED_METRICS, {index: [gpu["v"].get(metric) for metric in FOLDED_METRICS] for index, gpu in gpus.items()}]


def _rollup(acc: list | dict) -> dict:
    """{gpu index: {metric: [min, mean, max]}} of a minute's accumulator: its scrapes' samples, folded in the order
    they were taken. A row written before samples were appended holds one folded accumulator first ({index: {metric:
    [min, sum, max, n]}}), which is carried on."""
    cells: dict[str, dict[str, list]] = {}
    for entry in [acc] if isinstance(acc, dict) else acc:
        if isinstance(entry, dict):
            for index, per in entry.items():
                cells.setdefault(index, {}).update((metric, list(cell)) for metric, cell in per.items())
            continue
        names, by_gpu = entry
        for index, values in by_gpu.items():
            per = cells.setdefault(index, {})
            for metric, value in zip(names, values, strict=True):
                if value is None:
                    continue
                cell = per.get(metric)
                if cell is None:
                    per[metric] = [value, value, value, 1]
                else:
                    if value < cell[0]:
                        cell[0] = value
                    if value > cell[2]:
                        cell[2] = value
                    cell[1] += value
                    cell[3] += 1
    return {
        index: {metric: [cell[0], round(cell[1] / cell[3], 4), cell[2]] for metric, cell in per.items()}
        for index, per in cells.items()
    }


def _minute_rollups(turned: dict[int, datetime]) -> list[NodeRollup]:
    """The rollup rows of the minutes that ended on these nodes ({node id: that minute}): their accumulators are read
    here, once a minute, and a minute in which no GPU reported writes none."""
    rollups = []
    for node_id, acc in NodeHealth.objects.filter(node_id__in=list(turned)).values_list("node_id", "acc"):
        data = _rollup(acc)
        if data:
            rollups.append(NodeRollup(node_id=node_id, minute=turned[node_id], data=data))
    return rollups


@dataclass
class CycleState:
    """What a cycle compares the scrape with: each node's last health row and the GPUs the inventory expects."""

    previous: dict[int, tuple]
    expected: dict[int, dict[str, str]]


def load_state(cluster: Cluster, ids: list[int]) -> CycleState:
    # `counters`, not `gpus`: the rules compare only counters with the last scrape, and a node whose exporter does
    # not answer keeps its last readings in the database (upsert_health), so the readings need not be read here.
    # Nor the minute's accumulator: PostgreSQL appends each scrape to it, and it is read when the minute turns.
    previous = {
        row[0]: row
        for row in NodeHealth.objects.filter(node_id__in=ids).values_list(
            "node_id", "scraped_at", "counters", "acc_minute", "firing", "consecutive_failures"
        )
    }
    expected: dict[int, dict[str, str]] = defaultdict(dict)
    for node_id, index, uuid in Gpu.objects.filter(node__cluster=cluster).values_list("node_id", "index", "uuid"):
        expected[node_id][str(index)] = uuid
    return CycleState(previous, expected)


def ingest(
    cluster: Cluster,
    nodes: list[tuple[int, str]],
    outcomes: dict[str, Outcome],
    compiled: CompiledRules,
    at,
    state: CycleState | None = None,
) -> CycleResult:
    """Evaluate every node's outcome against the rules and persist the health rows, rollups and findings.

    A node with new findings goes to the incident service as soon as it is evaluated, not after the whole fleet:
    its cordon (HEALTH_CORDON_INLINE) does not wait for the rules to run over every other node. `state` is read
    here when the caller did not read it before the scrape."""
    result = CycleResult(cluster=cluster.name, nodes=len(nodes))
    if state is None:
        state = load_state(cluster, [node_id for node_id, _ in nodes])
    previous, expected = state.previous, state.expected
    previous_metrics = compiled.previous
    failed: set[int] = set()
    minute = _minute(at)
    rows: list[NodeHealth] = []
    turned: dict[int, datetime] = {}  # nodes whose accumulated minute ended: {node id: that minute}
    firing_causes: dict[int, set[str]] = {}
    silent: set[int] = set()
    for node_id, name in nodes:
        outcome = outcomes.get(name) or ScrapeError("not scraped")
        prev = previous.get(node_id)
        prev_scraped, prev_counters, acc_minute, prev_firing, prev_failures = (
            prev[1:] if prev else (None, {}, None, [], 0)
        )
        if isinstance(outcome, ScrapeError):
            result.unreachable += 1
            silent.add(node_id)
            failures = prev_failures + 1
            findings = exporter_down(compiled, name, failures, outcome.message, at)
            row = NodeHealth(
                node_id=node_id,
                status=NodeStatus.SUSPECT,
                scraped_at=prev_scraped,
                exporter_up=False,
                consecutive_failures=failures,
                last_error=outcome.message[:500],
                samples=0,
                malformed=0,
                gpus={},  # not written: the last readings stay visible, marked stale by scraped_at (upsert_health)
                gpu_util={},
                counters=prev_counters,
                acc_minute=acc_minute,  # the accumulator is left as it is (upsert_health)
                acc=[],
            )
        else:
            result.samples += outcome.samples
            result.malformed += outcome.malformed
            result.sentinels += outcome.sentinels
            seconds = (at - prev_scraped).total_seconds() if prev_scraped else 0.0
            gpus = {}
            counters = {}
            findings = []
            for index, reading in outcome.gpus.items():
                values = reading.values
                findings.extend(
                    evaluate_gpu(compiled, name, index, reading.uuid, values, prev_counters.get(index), seconds, at)
                )
                counters[index] = {metric: values[metric] for metric in previous_metrics if metric in values}
                gpus[index] = {
                    "uuid": reading.uuid,
                    "pod": reading.pod,
                    "namespace": reading.namespace,
                    "mig": reading.mig,
                    "v": reading.values,
                }
            findings.extend(missing_gpus(compiled, name, expected.get(node_id, {}), set(outcome.gpus), at))
            if acc_minute is not None and acc_minute != minute:
                turned[node_id] = acc_minute
            rank = max((SEVERITY_RANK[f.severity] for f in findings), default=0)
            row = NodeHealth(
                node_id=node_id,
                status=_STATUS_BY_SEVERITY[rank],
                scraped_at=at,
                exporter_up=True,
                consecutive_failures=0,
                last_error="",
                samples=outcome.samples,
                malformed=outcome.malformed,
                gpus=gpus,
                gpu_util=gpu_utilization(gpus),
                counters=counters,
                acc_minute=minute,
                acc=[_sample(gpus)],  # appended to the minute's, or starts the new minute's (upsert_health)
            )
        keys = sorted({f.key for f in findings})
        row.firing = keys
        rows.append(row)
        result.findings += len(findings)
        firing_causes[node_id] = {f.cause for f in findings}
        old = set(prev_firing)
        new = [f for f in findings if f.key not in old]
        if new:
            result.new_findings += len(new)
            # the whole picture of the node, not only what is new
            failed |= _open_incidents({node_id: findings}, compiled.version, at)
    for row in rows:
        if row.node_id in failed:  # retry next cycle: keep what fired before as not yet handled
            row.firing = list(previous[row.node_id][4]) if row.node_id in previous else []
    rollups = _minute_rollups(turned) if turned else []
    with transaction.atomic():
        upsert_health(rows)
        if rollups:
            insert_rollups(rollups)
        _touch_incidents(firing_causes, silent, at)
        # The overview's heatmap cells of this cluster, from the rows just written (one statement, ~25 ms at 1,280
        # nodes): the overview reads them instead of grouping every GPU of the fleet on each view.
        store_heatmap(cluster.pk)
    result.rollups = len(rollups)
    return result


def _copy_insert(table: str, columns: list[str], rows: list[list], tail: str) -> None:
    """COPY `rows` into a temporary table shaped like `table`'s `columns`, then INSERT … SELECT … `tail`.
    Binding ~1,280 JSON documents as query parameters costs seconds; COPY a fraction of that (PostgreSQL)."""
    names = ", ".join(columns)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE health_stage ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA")  # noqa: S608
        with cursor.cursor.copy(f"COPY health_stage ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {table} {tail.format(names=names)}")
        cursor.execute("DROP TABLE health_stage")


UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"


def gpu_utilization(gpus: dict) -> dict:
    """{gpu index: utilization} of a health row's `gpus` readings (GPUs without the reading left out)."""
    return {
        index: gpu["v"][UTILIZATION] for index, gpu in gpus.items() if gpu.get("v", {}).get(UTILIZATION) is not None
    }


def upsert_health(rows: list[NodeHealth]) -> None:
    """Write the cycle's health rows in one statement (COPY on PostgreSQL; Django's bulk upsert elsewhere). A node
    whose exporter did not answer keeps its last readings (`gpus`): they stay visible, marked stale by scraped_at.

    The minute's accumulator (`acc`) is appended to, not rewritten: a row's `acc` holds this scrape's sample, which
    joins the stored ones while the minute is the same and replaces them when it turned (the cycle read them for the
    rollup first); a node whose exporter did not answer keeps its accumulator and minute."""
    if connection.vendor != "postgresql":
        _upsert_health_generic(rows)
        return
    json_fields = {"gpus", "gpu_util", "counters", "acc", "firing"}
    fields = ["node_id", *_HEALTH_FIELDS]
    values = [[_dumps(getattr(r, f)) if f in json_fields else getattr(r, f) for f in fields] for r in rows]
    table = NodeHealth._meta.db_table
    kept_when_down = {
        "gpus": "EXCLUDED.gpus",
        "acc_minute": "EXCLUDED.acc_minute",
        "acc": f"CASE WHEN {table}.acc_minute = EXCLUDED.acc_minute THEN {table}.acc || EXCLUDED.acc "
        "ELSE EXCLUDED.acc END",
    }
    updates = ", ".join(
        f"{f} = CASE WHEN EXCLUDED.exporter_up THEN {kept_when_down[f]} ELSE {table}.{f} END"
        if f in kept_when_down
        else f"{f} = EXCLUDED.{f}"
        for f in _HEALTH_FIELDS
    )
    _copy_insert(
        table,
        fields,
        values,
        "({names}, isolated_by) SELECT {names}, '' FROM health_stage "  # noqa: S608 - column names from the model
        f"ON CONFLICT (node_id) DO UPDATE SET {updates}",
    )


def _upsert_health_generic(rows: list[NodeHealth]) -> None:
    """upsert_health for databases without COPY (SQLite in development): the accumulators that are appended to are
    read and written whole."""
    up = [r for r in rows if r.exporter_up]
    stored = {
        node_id: (minute, acc)
        for node_id, minute, acc in NodeHealth.objects.filter(node_id__in=[r.node_id for r in up]).values_list(
            "node_id", "acc_minute", "acc"
        )
    }
    for row in up:
        minute, acc = stored.get(row.node_id, (None, []))
        if minute is not None and minute == row.acc_minute:
            row.acc = ([acc] if isinstance(acc, dict) else acc) + row.acc
    kept_when_down = {"gpus", "acc_minute", "acc"}
    for is_up, fields in ((True, _HEALTH_FIELDS), (False, [f for f in _HEALTH_FIELDS if f not in kept_when_down])):
        NodeHealth.objects.bulk_create(
            [r for r in rows if r.exporter_up is is_up],
            update_conflicts=True,
            unique_fields=["node"],
            update_fields=fields,
            batch_size=500,
        )


def insert_rollups(rollups: list[NodeRollup]) -> None:
    """The minute's rollup rows; a minute already written (a retried cycle) is left as it is."""
    if connection.vendor != "postgresql":
        NodeRollup.objects.bulk_create(rollups, ignore_conflicts=True, batch_size=500)
        return
    values = [[r.node_id, r.minute, _dumps(r.data)] for r in rollups]
    _copy_insert(
        NodeRollup._meta.db_table,
        ["node_id", "minute", "data"],
        values,
        "({names}) SELECT {names} FROM health_stage ON CONFLICT (node_id, minute) DO NOTHING",
    )


def _dumps(value) -> str:
    # orjson: 7-10 x json's encoder on the cycle's documents (measured on 1,280 nodes' readings; its loads was not
    # faster on them, so reading stays with json)
    return orjson.dumps(value).decode()


def _open_incidents(new_by_node: dict[int, list[Finding]], version: int, at) -> set[int]:
    """Hand new findings to the incident service, node by node; returns nodes whose handling failed."""
    from apps.health.services.incidents import record_findings

    failed = set()
    for node_id, findings in new_by_node.items():
        try:
            record_findings(node_id, findings, version, at)
        except Exception:  # one node's failure must not stop the others; its findings are retried next cycle
            logger.exception("recording findings of node %s failed", node_id)
            failed.add(node_id)
    return failed


def _touch_incidents(firing_causes: dict[int, set[str]], silent: set[int], at) -> None:
    """Open incidents still firing get `last_seen_at` (and lose `clean_since`); quiet ones get `clean_since`.

    A node whose exporter did not answer proves nothing: its incidents are not marked quiet (only its
    exporter-down incident, if any, is firing).
    """
    firing = Q()
    for node_id, causes in firing_causes.items():
        if causes:
            firing |= Q(node_id=node_id, cause__in=causes)
    # A hung job's incident is the job's, not its lead node's: the minute's hung-job check marks it (health/hung.py).
    open_here = Incident.objects.open().filter(node_id__in=list(firing_causes)).exclude(rule_key=HUNG_JOB)
    if firing:
        open_here.filter(firing).update(last_seen_at=at, clean_since=None)
    quiet = open_here.exclude(node_id__in=silent).filter(clean_since__isnull=True)
    (quiet.exclude(firing) if firing else quiet).update(clean_since=at)
