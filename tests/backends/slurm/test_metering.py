"""Chargeback metering of the real local Slurm cluster: what the console meters equals what sacct accounts.

Slurm's clock counts whole seconds (a job's start and end times, sacct's ElapsedRaw); the metering runs are
interleaved with a burst of short jobs, so runs happen in the same second as jobs start and end.
"""

from __future__ import annotations

import re
import time
from decimal import Decimal

from django.db.models import Sum

from apps.backends.slurm.backend import SlurmBackend
from apps.backends.types import BackendState
from apps.chargeback.metering import meter_cluster
from apps.chargeback.models import MeterWatermark, UsageRecord
from apps.fleet.models import Cluster
from tests.backends.slurm.conftest import connection, sleep_spec, unique, wait_for

BURST = [(1, 1), (2, 2), (1, 2), (2, 1), (1, 1), (3, 2), (1, 1), (2, 2)]  # (seconds of sleep, GPUs) per job


def sacct_gpu_seconds(local_slurm, names: list[str]) -> dict[str, int] | None:
    """GPU-seconds per job as sacct accounts them (ElapsedRaw x gres/gpu of AllocTRES); None until every job
    of `names` is recorded as finished."""
    out = local_slurm.run(
        "sacct", "-X", "-n", "-P", "-a", f"--name={','.join(names)}", "--format=JobName,ElapsedRaw,AllocTRES,State"
    ).stdout
    found = {}
    for line in out.splitlines():
        name, elapsed, tres, state = line.split("|")
        if state != "COMPLETED":
            return None
        found[name] = int(elapsed) * int(re.search(r"gres/gpu=(\d+)", tres).group(1))
    return found if set(found) == set(names) else None


def test_metered_gpu_seconds_equal_saccts_for_a_burst_of_short_jobs(db, local_slurm, cleanup):
    cluster = Cluster.objects.create(name="gpuc", kind="slurm", connection=connection(local_slurm))
    backend = SlurmBackend(cluster)
    MeterWatermark.objects.create(cluster=cluster, metered_until=backend.now())
    names = []
    for seconds, gpus in BURST:
        name = unique(f"meter{seconds}x{gpus}")
        names.append(name)
        cleanup[0].append(name)
        backend.submit(sleep_spec(name, seconds=seconds, gpus_per_worker=gpus))
        assert meter_cluster(cluster.pk).ok  # a run between submissions, in the seconds jobs start in

    def burst_done():
        assert meter_cluster(cluster.pk).ok
        statuses = backend.status(names).values()
        return all(s.state.finished for s in statuses) and statuses

    finished = wait_for(burst_done, "the burst to finish", poll=0.1)
    assert all(s.state == BackendState.SUCCEEDED for s in finished)
    accounted = wait_for(lambda: sacct_gpu_seconds(local_slurm, names), "sacct to record the burst")
    time.sleep(1)  # the metering run below starts in a second after every job's end
    assert meter_cluster(cluster.pk).ok
    rows = UsageRecord.objects.filter(cluster=cluster, backend_id__in=names)
    metered = {
        name: total
        for name, total in rows.values("backend_id")
        .annotate(total=Sum("gpu_seconds"))
        .values_list("backend_id", "total")
    }
    assert metered == {name: Decimal(seconds) for name, seconds in accounted.items()}
    assert sum(metered.values()) == sum(accounted.values())
