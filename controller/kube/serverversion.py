"""At start-up: which release the API server runs, and what cogate cannot do there (issue 29 item 3).

Reads ``/version`` once (:func:`check`), then says, for every feature of
:data:`cogate.controller.model.releases.FEATURES` the release cannot support, what is lost
(a WARNING line each) and exports ``cogate_controller_cluster_feature_supported{feature}``
(1/0); a release older than :data:`~cogate.controller.model.releases.MINIMUM` is refused. The rule
is the pure table in :mod:`cogate.controller.model.releases`.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client

from cogate.controller.model.releases import FEATURES, MINIMUM, Version, parse, unsupported

log = logging.getLogger("cogate.controller")

__all__ = ["TooOld", "check", "report"]


class TooOld(RuntimeError):
    """The API server's release is older than cogate supports (message: which, and why)."""


def report(git_version: str, gauge: Any | None = None) -> Version | None:
    """Log what the release of ``git_version`` cannot support and set ``gauge`` (a labelled
    Gauge ``feature``) to 1/0 per feature; returns the parsed version (None when unreadable:
    logged, every feature then exported as supported, nothing refused).
    Raises :class:`TooOld` below :data:`MINIMUM`."""
    version = parse(git_version)
    if version is None:
        log.warning("cannot read the Kubernetes release from the API server's version %r; assuming it "
                    "supports every feature", git_version)
        missing = []
    elif version < MINIMUM:
        raise TooOld(f"the API server runs Kubernetes {git_version}; cogate needs {MINIMUM[0]}.{MINIMUM[1]} or "
                     "later (scheduling gates and narrowing a gated pod's node affinity are GA from 1.30)")
    else:
        missing = unsupported(version)
        log.info("Kubernetes %s; features this release cannot support: %s", git_version,
                 ", ".join(f.name for f in missing) or "none")
    for f in missing:
        log.warning("Kubernetes %s is older than %d.%d, which %s needs (%s): %s", git_version, f.since[0],
                    f.since[1], f.name, f.source, f.below)
    if gauge is not None:
        for f in FEATURES:
            gauge.labels(f.name).set(0 if f in missing else 1)
    return version


def check(api_client: Any, gauge: Any | None = None) -> Version | None:
    """:func:`report` on the API server's ``/version``; an unreachable or failing ``/version`` is
    logged and treated as unreadable (the informers then say what is wrong). Raises :class:`TooOld`."""
    try:
        git_version = client.VersionApi(api_client).get_code().git_version or ""
    except Exception as exc:  # noqa: BLE001 - start anyway; the informers report the connection
        log.warning("cannot read the API server's version: %s", exc)
        git_version = ""
    return report(git_version, gauge)
