"""The test kit (as Kueue's ``pkg/util/testingjobs`` and kube-scheduler's
``pkg/scheduler/testing/wrappers.go``): one chainable builder per object kind
(:mod:`tests.builders.objects`), an in-memory fake of the client APIs the controller calls and
informers over it (:mod:`tests.builders.fakes`), and two reconcilers wired to them
(:mod:`tests.builders.rigs`): :class:`Harness` (a scripted ``decide``) and :class:`World` (the
real planner). Import every name from here: ``from tests.builders import pod, World``.

- :func:`pod`, :func:`node`, :func:`podgroup`, :func:`claim`: chainable builders, e.g.
  ``pod("a").group("g").req(cpu="2").gated().on("n1").priority(10)``, ending in ``.raw()`` (API
  JSON as a watch delivers it) or ``.info()`` (the record, through the controller's own converter:
  :func:`~cogate.controller.model.records.pod_info`, ``node_info``, ``group_object``,
  ``device_claim_info``); :func:`group_request`: a :class:`GroupRequest` over built members;
- :func:`raw_pod`, :func:`raw_pg`, :func:`ready_node`: the API JSON most shell tests start from
  (thin wrappers of the builders);
- :class:`FakeCluster`: ``CoreV1Api`` + ``CustomObjectsApi`` subset, pods patched with real
  JSON Patch semantics, scripted HTTP errors (:class:`ApiError`), a shared call log;
  :class:`StatusCluster`: plus nodes and the pod status subresource (nominations, marks);
- :func:`informer`: an :class:`~cogate.controller.kube.informer.Informer` listed once from items;
  :func:`caches_from`: the four informers of a pass over item sources;
- :class:`Harness` and :func:`verdict`: a reconciler pass against the fakes, ``decide`` scripted;
- :class:`World`: a reconciler with the real planner over a :class:`StatusCluster`, the informers
  relisted from it around every pass (the watch's view).
"""

from tests.builders.fakes import ApiError, FakeCluster, StatusCluster, bound_convert, caches_from, informer
from tests.builders.objects import (CREATED, GATE, HOSTNAME, NS, ClaimBuilder, NodeBuilder, PodBuilder,
                                    PodGroupBuilder, claim, group_request, iso, node, pod, podgroup, raw_pg,
                                    raw_pod, ready_node)
from tests.builders.rigs import RELAYED, T0, Harness, World, pinned, verdict

__all__ = [
    "ApiError",
    "FakeCluster",
    "StatusCluster",
    "bound_convert",
    "caches_from",
    "informer",
    "CREATED",
    "GATE",
    "HOSTNAME",
    "NS",
    "ClaimBuilder",
    "NodeBuilder",
    "PodBuilder",
    "PodGroupBuilder",
    "claim",
    "group_request",
    "iso",
    "node",
    "pod",
    "podgroup",
    "raw_pg",
    "raw_pod",
    "ready_node",
    "RELAYED",
    "T0",
    "Harness",
    "World",
    "pinned",
    "verdict",
]
