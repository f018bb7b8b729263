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

from apps.fleet.exporter_text import unescape_label

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


# A label text without backslashes is split at its quotes: what lies between two values (`,name=`) repeats in every
# label text of the exporter, so each such separator is checked once and its label name remembered. A text with an
# escape goes through the label pattern instead. Both accept exactly what `_LABEL` repeated to the end accepts.
_FIRST_SEPARATOR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*\Z")
_SEPARATOR = re.compile(r"\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*\Z")
_LAST_SEPARATOR = re.compile(r"\s*,?\Z")
_SEPARATORS_KEPT = 4096
_separators: tuple[dict[str, str | None], dict[str, str | None]] = ({}, {})  # the first one's, the others'


def _label_name(separator: str, first: bool) -> str | None:
    """The label name a separator introduces, None if it is not one (the first has no comma, the others one)."""
    known = _separators[0 if first else 1]
    name = known.get(separator, "")
    if name == "":
        match = (_FIRST_SEPARATOR if first else _SEPARATOR).match(separator)
        name = match.group(1) if match else None
        if len(known) >= _SEPARATORS_KEPT:
            known.clear()
        known[separator] = name
    return name


def parse_labels(text: str) -> dict[str, str]:
    """`k="v",…` into a dict; anything that is not a well-formed label list raises MalformedLabels. Escapes in
    values are undone as the text format defines them (`\\\\`, `\\"`, `\\n`; any other backslash stays)."""
    text = text.rstrip()
    if "\\" in text:
        return _parse_escaped_labels(text)
    parts = text.split('"')
    last = len(parts) - 1
    if last % 2 or not _LAST_SEPARATOR.match(parts[last]):
        raise MalformedLabels(text)
    out: dict[str, str] = {}
    for i in range(0, last, 2):
        name = _label_name(parts[i], i == 0)
        if name is None:
            raise MalformedLabels(text)
        out[name] = parts[i + 1]
    return out


def _parse_escaped_labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise MalformedLabels(text)
        out[match.group(1)] = unescape_label(match.group(2))
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


# Converted sample values by their text: a fleet's exporters print the same few hundred texts (0, temperatures,
# clocks, whole percentages) over and over, so most lines cost a dict lookup instead of float(). `_SKIP` marks NaN and
# DCGM's sentinels. Bounded: emptied when full (counters, whose texts rarely repeat, would fill it).
_SKIP = object()
_VALUES_KEPT = 8192
_values: dict[str, float | object] = {}


def _value(raw: str) -> float | object | None:
    """The sample value after a line's `}`: the first field (a timestamp may follow), `_SKIP`, or None if unreadable."""
    try:
        value = float(raw)
    except ValueError:
        fields = raw.split()
        try:
            value = float(fields[0])
        except (IndexError, ValueError):
            return None
    else:  # only a plain value is kept: one with a timestamp rarely repeats
        if len(_values) >= _VALUES_KEPT:
            _values.clear()
        _values[raw] = value if -SENTINEL <= value <= SENTINEL else _SKIP
    return value if -SENTINEL <= value <= SENTINEL else _SKIP  # NaN fails both comparisons


def parse_exporter(text: str, wanted: Iterable[str] | None = None) -> ParsedScrape:
    """Parse one exporter's /metrics text, keeping the `wanted` metric names (all when None).

    One pass over the lines; a line of a wanted series costs two partitions, a lookup of its label text (parsed
    once per distinct text) and a lookup of its value's text. tests/health/test_parsing_properties.py holds it
    equal to prometheus_client's parser."""
    lines = text.split("\n")
    if wanted is None:
        wanted = {line.partition("{")[0] for line in lines}
    names = frozenset(name for name in wanted if name and name[0] != "#")  # a comment is never a series
    out = ParsedScrape()
    gpus = out.gpus
    targets: dict[str, tuple[dict[str, float], str, list[str]] | None] = {}
    values_by_text = _values
    samples = sentinels = 0
    for line in lines:
        name, brace, rest = line.partition("{")
        if not brace or name not in names:
            # A comment, an empty line, a series not wanted or without labels: only counted (or found malformed).
            if not line or line[0] == "#":
                continue
            if brace:
                if not name or "}" not in rest:
                    out.bad(line)
                    continue
            else:
                parts = line.split()
                if len(parts) < 2 or not _NAME.match(parts[0]):
                    if parts:
                        out.bad(line)
                    continue
            samples += 1
            continue
        label_text, end, raw = rest.rpartition("}")
        if not end:
            out.bad(line)
            continue
        samples += 1
        target = targets.get(label_text)
        if target is None:
            if label_text in targets:
                continue  # not a per-GPU series
            try:
                reading, suffix = _target(parse_labels(label_text), gpus)
            except MalformedLabels:
                out.bad(line)
                continue
            target = targets[label_text] = (reading.values, suffix, reading.mig) if reading is not None else None
            if target is None:
                continue
        value = values_by_text.get(raw)
        if value is None:
            value = _value(raw)
            if value is None:
                out.bad(line)
                continue
        if value is _SKIP:  # NaN, or DCGM's "not supported"
            sentinels += 1
            continue
        values, suffix, mig = target
        key = name + suffix if suffix else name
        if mig and key in values:
            values[key] = max(values[key], value)
        else:
            values[key] = value
    out.samples = samples
    out.sentinels = sentinels
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
