"""dcgm-exporter text (and Prometheus query results) turned into per-GPU readings. Pure Python, no Django.

The exporter prints one line per (metric, GPU): `NAME{gpu="3",UUID="GPU-…",…} value`. Every metric of
one GPU repeats the same label text, so labels are parsed once per distinct label text and cached:
the per-line work is two string searches, a dict lookup and a float(). Only the metrics asked for
are converted. What the exporter may or may not ship is tolerated:

- `Hostname` or `hostname` (renamed on dcgm-exporter main in 2026), `UUID` or `uuid` (--use-old-namespace);
- MIG instances (`GPU_I_PROFILE`, `GPU_I_ID`): readings stay per physical GPU (the largest value of its
  instances, which is what health rules want), and the instances are listed;
- pod labels (`pod`/`namespace`, or `pod_name`/`pod_namespace` in the old namespace);
- `DCGM_EXP_XID_ERRORS_COUNT{xid="…"}` becomes the series `DCGM_EXP_XID_ERRORS_COUNT:<xid>`;
- values above 1e18 are DCGM's "not supported" sentinels and are dropped (counted);
- a malformed line is counted (first few kept for the report) and the rest of the scrape is used.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SENTINEL = 1e18
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*\Z")
MALFORMED_EXAMPLES = 3


@dataclass(slots=True)
class GpuReading:
    """One physical GPU's values in one scrape, with the identity the exporter gave it."""

    index: str
    uuid: str = ""
    model_name: str = ""
    hostname: str = ""
    pod: str = ""
    namespace: str = ""
    mig: list[str] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class ParsedScrape:
    gpus: dict[str, GpuReading] = field(default_factory=dict)
    samples: int = 0
    malformed: int = 0
    sentinels: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def hostname(self) -> str:
        for gpu in self.gpus.values():
            if gpu.hostname:
                return gpu.hostname
        return ""

    def bad(self, line: str) -> None:
        self.malformed += 1
        if len(self.examples) < MALFORMED_EXAMPLES:
            self.examples.append(line[:200])


class MalformedLabels(ValueError):
    pass


def parse_labels(text: str) -> dict[str, str]:
    """`k="v",…` into a dict; anything that is not a well-formed label list raises MalformedLabels."""
    out: dict[str, str] = {}
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise MalformedLabels(text)
        value = match.group(2)
        if "\\" in value:
            value = value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        out[match.group(1)] = value
        pos = match.end()
    return out


# What a distinct label text resolves to: (the GPU's reading, suffix for the series name or None to skip).
_Target = tuple[GpuReading | None, str]


def _target(labels: dict[str, str], gpus: dict[str, GpuReading]) -> _Target:
    index = labels.get("gpu")
    if index is None:
        return None, ""  # not a per-GPU series (NVSwitch, the exporter's own): skipped, not malformed
    reading = gpus.get(index)
    if reading is None:
        reading = gpus[index] = GpuReading(index=index)
    reading.uuid = reading.uuid or labels.get("UUID") or labels.get("uuid") or labels.get("gpu_uuid", "")
    reading.model_name = reading.model_name or labels.get("modelName") or labels.get("model_name", "")
    reading.hostname = reading.hostname or labels.get("Hostname") or labels.get("hostname", "")
    pod = labels.get("pod") or labels.get("pod_name", "")
    if pod and not reading.pod:
        reading.pod = pod
        reading.namespace = labels.get("namespace") or labels.get("pod_namespace", "")
    profile = labels.get("GPU_I_PROFILE")
    if profile is not None:
        instance = f"{profile}#{labels.get('GPU_I_ID', '')}"
        if instance not in reading.mig:
            reading.mig.append(instance)
    xid = labels.get("xid")
    return reading, f":{xid}" if xid is not None else ""


def parse_exporter(text: str, wanted: Iterable[str] | None = None) -> ParsedScrape:
    """Parse one exporter's /metrics text, keeping the `wanted` metric names (all when None)."""
    names = frozenset(wanted) if wanted is not None else None
    out = ParsedScrape()
    gpus = out.gpus
    cache: dict[str, _Target] = {}
    for line in text.split("\n"):
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        if brace == -1:
            # A series without labels (not per GPU): check its shape only.
            parts = line.split()
            if len(parts) < 2 or not _NAME.match(parts[0]):
                if line.strip():
                    out.bad(line)
                continue
            out.samples += 1
            continue
        end = line.rfind("}")
        name = line[:brace]
        if end < brace or not name:
            out.bad(line)
            continue
        out.samples += 1
        if names is not None and name not in names:
            continue
        label_text = line[brace + 1 : end]
        target = cache.get(label_text)
        if target is None:
            try:
                target = _target(parse_labels(label_text), gpus)
            except MalformedLabels:
                out.bad(line)
                continue
            cache[label_text] = target
        reading, suffix = target
        if reading is None:
            continue
        rest = line[end + 1 :].split()
        try:
            value = float(rest[0])
        except (IndexError, ValueError):
            out.bad(line)
            continue
        if value != value or abs(value) > SENTINEL:  # NaN, or DCGM's "not supported"
            out.sentinels += 1
            continue
        key = name + suffix if suffix else name
        values = reading.values
        if key in values and reading.mig:
            values[key] = max(values[key], value)
        else:
            values[key] = value
    return out


def parse_prometheus(result: list[dict], wanted: Iterable[str] | None = None) -> dict[str, ParsedScrape]:
    """A Prometheus instant-query vector (`data.result`) of DCGM_* series, grouped by host: {hostname: scrape}.

    Series without a Hostname/hostname label cannot be tied to a node and are counted as malformed
    under the host "" (reported, not fatal).
    """
    names = frozenset(wanted) if wanted is not None else None
    hosts: dict[str, ParsedScrape] = {}
    for series in result:
        metric = series.get("metric") if isinstance(series, dict) else None
        sample = series.get("value") if isinstance(series, dict) else None
        if not isinstance(metric, dict) or not isinstance(sample, list) or len(sample) != 2:
            hosts.setdefault("", ParsedScrape()).bad(str(series))
            continue
        host = metric.get("Hostname") or metric.get("hostname") or ""
        scrape = hosts.setdefault(host, ParsedScrape())
        if not host:
            scrape.bad(str(metric)[:200])
            continue
        scrape.samples += 1
        name = metric.get("__name__", "")
        if names is not None and name not in names:
            continue
        reading, suffix = _target({k: str(v) for k, v in metric.items()}, scrape.gpus)
        if reading is None:
            continue
        try:
            value = float(sample[1])
        except (TypeError, ValueError):
            scrape.bad(str(series)[:200])
            continue
        if math.isnan(value) or abs(value) > SENTINEL:
            scrape.sentinels += 1
            continue
        key = name + suffix
        reading.values[key] = max(reading.values[key], value) if key in reading.values else value
    return hosts
