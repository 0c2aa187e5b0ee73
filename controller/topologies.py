"""The topology feature's watch (issue 32 item 1): Kueue ``Topology`` objects, read when the API server
serves them and cogate may list them, never required (:mod:`cogate.controller.kube.features`). Their
``levels[].nodeLabel`` are the levels of constraints read from Kueue's pod annotations
(:func:`cogate.controller.topology.constraints.parse`), so Kueue TAS users keep their definitions.

A Topology CRD installed after the controller started is read once it is served, without a restart:
when no version is served at start-up the informer is started anyway on :func:`until_served`, whose
list is empty while none is served (the informer syncs at once: the controller never waits for
Kueue) and whose watch, meanwhile, asks every :data:`POLL_SECONDS` whether a version is served and
then ends with a 410, so the informer lists again (quietly: no warning every back-off). Forbidden
(RBAC) is final: nothing is watched."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cogate.controller.kube.features import Apis, Feature, InformerSpec, Watches
from cogate.controller.kube.informer import Caches, ListFn, WatchFn, name_key, podgroup_source
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


#: How often a watch waiting for the Topology CRD asks whether it is served (seconds).
POLL_SECONDS = 10.0


def until_served(custom: Any, sleep: Callable[[float], None] = time.sleep,
                 poll: float = POLL_SECONDS) -> tuple[ListFn, WatchFn]:
    """List/watch callables for Kueue Topologies that may not be served yet: the list tries
    :data:`KUEUE_VERSIONS` in order each time and answers ``([], "")`` while none is served (404);
    the watch follows the version the last list found, and while there is none waits
    (:func:`waiting_watch`) until one is. Other errors pass through."""
    from cogate.kube import api_status

    found = {"version": ""}

    def list_fn() -> tuple[list[dict[str, Any]], str]:
        for version in KUEUE_VERSIONS:
            try:
                answer = podgroup_source(custom, KUEUE_GROUP, version, PLURAL)[0]()
            except Exception as exc:  # noqa: BLE001
                if api_status(exc) == 404:
                    continue
                raise
            found["version"] = version
            return answer
        found["version"] = ""
        return [], ""

    def watch_fn(resource_version: str) -> Iterable[dict[str, Any]]:
        if not found["version"]:
            return waiting_watch(custom, sleep, poll)
        return podgroup_source(custom, KUEUE_GROUP, found["version"], PLURAL)[1](resource_version)

    return list_fn, watch_fn


def waiting_watch(custom: Any, sleep: Callable[[float], None], poll: float) -> Iterator[dict[str, Any]]:
    """The watch while no Topology version is served: a BOOKMARK each second (so the informer can
    stop), :func:`served_version` every ``poll`` seconds, and once one is served an ``ERROR`` event of
    code 410, on which the informer lists again (:class:`~cogate.controller.kube.informer.Gone`)."""
    waited = 0.0
    while True:
        sleep(1.0)
        waited += 1.0
        yield {"type": "BOOKMARK", "object": {"metadata": {}}}
        if waited >= poll:
            waited = 0.0
            if served_version(custom)[0]:
                yield {"type": "ERROR", "object": {"code": 410, "message": f"topologies.{KUEUE_GROUP} served now"}}
                return


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """Kueue's Topologies into the caches' ``kueue_topologies``: watched when :func:`served_version`
    finds a version, on :func:`until_served` when none is served yet; nothing when listing them is
    forbidden (logged: constraints then use ``--topology-levels`` or their labels)."""
    version, why = served_version(apis.custom)
    if version:
        source = podgroup_source(apis.custom, KUEUE_GROUP, version, PLURAL)
    elif why == "not served":
        log.info("Kueue Topology objects not served yet: read once their CRD is installed; until then topology "
                 "levels come from --topology-levels, topology.cogate.dev/levels or the labels a constraint names")
        source = until_served(apis.custom)
    else:
        log.info("Kueue Topology objects not read (%s): topology levels come from --topology-levels, "
                 "topology.cogate.dev/levels or the labels a constraint names", why)
        return Watches()
    return Watches((InformerSpec("kueue_topologies", "kueue-topologies", source, name_key, kueue_topology_levels),))


def kueue_levels(caches: Caches) -> list[tuple[str, ...]]:
    """Each cached Kueue Topology's levels, in name order (none without the informer)."""
    if caches.kueue_topologies is None:
        return []
    return [levels for _, levels in sorted(caches.kueue_topologies.snapshot_map().items())]


FEATURE = Feature("topology", informers)
