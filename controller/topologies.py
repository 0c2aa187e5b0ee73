"""The topology feature's watch (issue 32 item 1): Kueue ``Topology`` objects, read when the API server
serves them and cogate may list them, never required (:mod:`cogate.controller.kube.features`). Their
``levels[].nodeLabel`` are the levels of constraints read from Kueue's pod annotations
(:func:`cogate.controller.topology.constraints.parse`), so Kueue TAS users keep their definitions.

A Topology CRD installed after the controller started is seen after its restart (the check below runs
once, at start-up), as for the other optional kinds."""

from __future__ import annotations

import logging
from typing import Any

from cogate.controller.kube.features import Apis, Feature, InformerSpec, Watches
from cogate.controller.kube.informer import Caches, name_key, podgroup_source
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.topology.constraints import kueue_topology_levels

log = logging.getLogger("cogate.controller")

KUEUE_GROUP = "kueue.x-k8s.io"
#: Newest first: the first the API server serves is watched.
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
PLURAL = "topologies"


def served_version(custom: Any) -> tuple[str, str]:
    """``(version, why not)``: the first of :data:`KUEUE_VERSIONS` whose ``topologies`` cogate can list
    (a list of one object), else ``("", the last answer)``."""
    from cogate.kube import api_status

    why = ""
    for version in KUEUE_VERSIONS:
        try:
            custom.list_cluster_custom_object(KUEUE_GROUP, version, PLURAL, limit=1, _request_timeout=10)
            return version, ""
        except Exception as exc:  # noqa: BLE001
            status = api_status(exc)
            why = ("not served" if status == 404 else "forbidden (RBAC: list and watch topologies.kueue.x-k8s.io)"
                   if status == 403 else f"cannot list: {exc}")
    return "", why


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """Kueue's Topologies into the caches' ``kueue_topologies`` when :func:`served_version` finds a
    version; nothing otherwise (logged: constraints then use ``--topology-levels`` or their labels)."""
    version, why = served_version(apis.custom)
    if not version:
        log.info("Kueue Topology objects not read (%s): topology levels come from --topology-levels, "
                 "topology.cogate.dev/levels or the labels a constraint names", why)
        return Watches()
    source = podgroup_source(apis.custom, KUEUE_GROUP, version, PLURAL)
    return Watches((InformerSpec("kueue_topologies", "kueue-topologies", source, name_key, kueue_topology_levels),))


def kueue_levels(caches: Caches) -> list[tuple[str, ...]]:
    """Each cached Kueue Topology's levels, in name order (none without the informer)."""
    if caches.kueue_topologies is None:
        return []
    return [levels for _, levels in sorted(caches.kueue_topologies.snapshot_map().items())]


FEATURE = Feature("topology", informers)
