"""What both servers (webhook, controller) export besides their own metrics, and the catalogue of a registry.

- :func:`register_common`: ``cogate_build_info{version, python_version}`` (always 1; the
  Prometheus "info" convention, e.g. ``prometheus_build_info``), and the process metrics of
  ``prometheus_client``'s own collectors: ``process_cpu_seconds_total``,
  ``process_resident_memory_bytes``, ``process_virtual_memory_bytes``,
  ``process_open_fds``, ``process_max_fds``, ``process_start_time_seconds`` (ProcessCollector,
  read from ``/proc`` at each scrape, Linux only), ``python_info`` (PlatformCollector) and
  ``python_gc_*`` (GCCollector). These are the names every Prometheus client library exports,
  so the usual dashboards and alerts work on them.
- :func:`catalogue`: every metric family a registry exports (name, type, help, labels) for the
  reference page (docs/reference/metrics.md) and the check of the chart's alert rules and
  dashboard against what the code exports.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, Gauge, PlatformCollector, ProcessCollector

from cogate import __version__

__all__ = ["BUILD_INFO", "MetricInfo", "register_common", "catalogue", "series_names"]

#: The build-info gauge's name (both servers).
BUILD_INFO = "cogate_build_info"


def register_common(registry: CollectorRegistry) -> Gauge:
    """Add the build-info gauge and the process, platform and garbage-collector collectors to
    ``registry`` (a registry holds each name once: call once per registry; ``ValueError``
    otherwise, from ``prometheus_client``). Returns the build-info gauge."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    info = Gauge(BUILD_INFO, "Always 1; the labels say which cogate build (version) runs on which Python "
                 "(python_version, e.g. 3.11.9).", ["version", "python_version"], registry=registry)
    info.labels(__version__, platform.python_version()).set(1)
    return info


@dataclass(frozen=True)
class MetricInfo:
    """One metric family as exported: ``name`` (without the ``_total`` a counter's samples add),
    ``type`` (``counter``, ``gauge``, ``histogram``, ...), ``help``, ``labels`` (declared label
    names, without ``le``)."""

    name: str
    type: str
    help: str
    labels: tuple[str, ...]


def _declared_labels(collector: Any) -> tuple[str, ...] | None:
    # prometheus_client keeps a metric's declared label names only in ``_labelnames`` (a labelled
    # metric without children exports no sample to read them from); collectors of our own say
    # them in ``labelnames``.
    names = getattr(collector, "labelnames", None) or getattr(collector, "_labelnames", None)
    return tuple(names) if names is not None else None


def catalogue(registry: CollectorRegistry, collectors: list[Any] = ()) -> list[MetricInfo]:
    """The metric families of ``registry``, sorted by name. Labels come from ``collectors`` (the
    metric objects the code made: declared label names, also those with no child yet) and
    otherwise from the samples exported now."""
    declared: dict[str, tuple[str, ...]] = {}
    for c in collectors:
        labels = _declared_labels(c)
        if labels is not None:
            for fam in c.describe():
                declared[fam.name] = labels
    out = []
    for fam in registry.collect():
        labels = declared.get(fam.name)
        if labels is None:
            seen: dict[str, None] = {}
            for s in fam.samples:
                seen.update((k, None) for k in s.labels if k not in ("le", "quantile"))
            labels = tuple(seen)
        out.append(MetricInfo(fam.name, fam.type, fam.documentation, labels))
    return sorted(out, key=lambda m: m.name)


def series_names(info: MetricInfo) -> tuple[str, ...]:
    """The sample names a family exports in the text format (what a PromQL query names): a counter
    ``<name>_total`` (and ``<name>_created``), a histogram ``<name>_bucket``, ``_sum``, ``_count``
    (and ``_created``), an info ``<name>_info``, a summary ``<name>``, ``_sum``, ``_count``; else
    ``<name>``."""
    n = info.name
    return {
        "counter": (n + "_total", n + "_created"),
        "histogram": (n + "_bucket", n + "_sum", n + "_count", n + "_created"),
        "summary": (n, n + "_sum", n + "_count", n + "_created"),
        "info": (n + "_info",),
    }.get(info.type, (n,))
