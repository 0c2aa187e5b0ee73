"""Node filters that read one node and one pod (pure), and the keys that say what they read.

kube-scheduler's load-independent filters, which :mod:`cogate.controller.planning.capacity` applies
once per node and member spec (its static filter cache) and
:func:`cogate.controller.planning.capacity.pinned_node_problems` to a pinned node:

* NodeUnschedulable: a cordoned node only with a toleration of
  ``node.kubernetes.io/unschedulable:NoSchedule``; nodes that are not Ready are
  excluded (stricter than the scheduler, which relies on the not-ready taint).
* TaintToleration: NoSchedule and NoExecute taints must be tolerated;
  PreferNoSchedule never blocks.
* NodeAffinity: ``nodeSelector`` and required node affinity
  (:meth:`cogate.controller.model.records.NodeSelectorTerm.matches`).
* VolumeBinding, bound claims: the required node affinity of each bound PV
  (``PodInfo.volume_node_affinity``, filled in by the shell;
  :func:`cogate.controller.model.volumes.node_reason` checks it).

:func:`static_reason` names the first filter a node fails (``"not Ready"``,
``"taint key=value"``, ``"nodeSelector"``, ...): waiting messages count nodes per reason.

InterPodAffinity terms, which the room evaluates against the pods on a node
(:class:`cogate.controller.planning.room.Room`): :func:`domain` is a node's topology domain
for a key (a node without the topology label is not in any domain, except
``kubernetes.io/hostname``, which falls back to the node name: stricter);
:func:`term_matches` says whether a term selects a pod (a required anti-affinity term with
a non-empty ``namespaceSelector``, whose Namespace labels are not known here, is taken to
match pods of every namespace: stricter).

:func:`static_key` and :func:`spec_key` are what the filters read of a pod: members with
equal keys get equal answers, so they share one cached result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from cogate.controller.model import volumes as _volumes
from cogate.controller.model.records import (
    HOSTNAME_LABEL,
    UNSCHEDULABLE_TAINT_KEY,
    HostPort,
    NodeInfo,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodInfo,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)

__all__ = ["domain", "term_matches", "static_reason", "StaticKey", "SpecKey", "static_key", "spec_key"]


def domain(node: NodeInfo, key: str) -> str | None:
    """``node``'s topology domain for label ``key``: the label's value; None when the node has
    no such label, except ``kubernetes.io/hostname``, which falls back to the node name."""
    v = node.labels.get(key)
    if v is None and key == HOSTNAME_LABEL:
        return "\x00node:" + node.name
    return v


def _term_namespaces_match(term: PodAffinityTerm, owner_ns: str, ns: str, *, anti: bool) -> bool:
    if term.namespace_selector is not None:
        sel = term.namespace_selector
        if not sel.match_labels and not sel.match_expressions:
            return True  # {} selects every namespace
        if anti:
            return True  # unknown namespace labels: assume it matches (stricter)
        return ns in term.namespaces
    return ns in (term.namespaces or (owner_ns,))


def term_matches(term: PodAffinityTerm, owner_ns: str, pod: PodInfo, *, anti: bool) -> bool:
    """Whether ``term`` of a pod in namespace ``owner_ns`` selects ``pod``: its label selector
    (none selects nothing) and its namespaces (``namespaces``, else ``owner_ns``; a
    ``namespaceSelector`` ``{}`` selects all; a non-empty one matches every namespace for a
    required anti-affinity term, ``anti``, and only the listed ``namespaces`` for affinity:
    both stricter)."""
    if term.label_selector is None:
        return False
    if not _term_namespaces_match(term, owner_ns, pod.namespace, anti=anti):
        return False
    return term.label_selector.matches(pod.labels)


def _blocking_taint(node: NodeInfo, pod: PodInfo) -> Taint | None:
    for t in node.taints:
        if t.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tol.tolerates(t) for tol in pod.tolerations):
            return t
    return None


def static_reason(node: NodeInfo, pod: PodInfo) -> str | None:
    """Why ``node`` can never take ``pod`` regardless of load, or None."""
    if not node.ready:
        return "not Ready"
    if node.unschedulable:
        cordon = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
        if not any(tol.tolerates(cordon) for tol in pod.tolerations):
            return "unschedulable (cordoned)"
    t = _blocking_taint(node, pod)
    if t is not None:
        kv = f"{t.key}={t.value}" if t.value else t.key
        return f"taint {kv}"
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return "nodeSelector"
    if pod.required_node_affinity and not any(term.matches(node) for term in pod.required_node_affinity):
        return "node affinity"
    return _volumes.node_reason(node, pod)  # hook: bound PVs' node affinity (kube-scheduler VolumeBinding)


_V = TypeVar("_V", str, int)


def _items_key(m: Mapping[str, _V]) -> tuple[tuple[str, _V], ...]:
    return tuple(sorted(m.items()))


#: What the load-independent filters (NodeUnschedulable, TaintToleration, NodeAffinity, VolumeBinding's
#: PV node affinity) look at: nodeSelector, required node affinity, tolerations, bound PVs' node affinity.
StaticKey = tuple[
    tuple[tuple[str, str], ...],
    tuple[NodeSelectorTerm, ...],
    tuple[Toleration, ...],
    tuple[tuple[NodeSelectorTerm, ...], ...],
]
#: Everything the filters read from a member: members with equal keys share one
#: :class:`cogate.controller.planning.room.Spec`.
SpecKey = tuple[
    StaticKey,
    tuple[tuple[str, int], ...],
    tuple[HostPort, ...],
    str,
    tuple[PodAffinityTerm, ...],
    tuple[PodAffinityTerm, ...],
    tuple[tuple[str, str], ...],
    tuple[TopologySpreadConstraint, ...],
]


def static_key(pod: PodInfo) -> StaticKey:
    """What :func:`static_reason` reads from ``pod``: equal keys, equal eligible nodes."""
    return (
        _items_key(pod.node_selector),
        pod.required_node_affinity,
        pod.tolerations,
        pod.volume_node_affinity,
    )


def spec_key(pod: PodInfo, anti_active: bool, spread_active: bool = False) -> SpecKey:
    """What the filters read from ``pod``: members with equal keys share one
    :class:`cogate.controller.planning.room.Spec` (labels only while anti-affinity or topology
    spread is in play)."""
    return (
        static_key(pod),
        _items_key(pod.requests),
        pod.host_ports,
        pod.namespace,
        pod.required_pod_anti_affinity,
        pod.required_pod_affinity,
        _items_key(pod.labels) if anti_active or spread_active else (),
        pod.topology_spread,
    )
