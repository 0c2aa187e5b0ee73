"""kube-scheduler's PodTopologySpread Filter as a pure model (hard constraints only).

Source: kubernetes v1.36 ``pkg/scheduler/framework/plugins/podtopologyspread``
(``filtering.go``: ``calPreFilterState``, ``Filter``, ``minMatchNum``; ``common.go``:
``filterTopologySpreadConstraints``, ``matchNodeInclusionPolicies``,
``nodeLabelsMatchSpreadConstraints``, ``countPodsMatchSelector``). For an incoming pod ``p``
and each of its ``whenUnsatisfiable: DoNotSchedule`` constraints ``c``
(:class:`cogate.controller.model.records.TopologySpreadConstraint`; ``ScheduleAnyway`` only scores
and never blocks, so it is not modelled):

* **selector**: ``c.labelSelector`` with ``key In [value]`` added for each
  ``matchLabelKeys`` key present in ``p``'s labels (MatchLabelKeysInPodTopologySpread, on
  by default; the API server's selector merge of 1.34+ adds the same requirements, so a
  second merge changes nothing). A missing selector matches no pod; an empty one (``{}``,
  nothing merged) matches every pod but counts none (``countPodsMatchSelector`` returns 0
  for an empty selector), so only ``p`` itself matches it.
* **domains**: the values of ``c.topologyKey`` on every node (cordoned, tainted and NotReady
  ones included) that carries *all* of ``p``'s constraint topology keys and passes the
  inclusion policies: ``nodeAffinityPolicy`` Honor (default) keeps only nodes matching
  ``p``'s ``nodeSelector`` and required node affinity, Ignore keeps all;
  ``nodeTaintsPolicy`` Ignore (default) keeps all, Honor drops nodes with a NoSchedule or
  NoExecute taint ``p`` does not tolerate (the node's taints as the API shows them).
* **counts**: per domain, the pods on those nodes in ``p``'s namespace, not terminating
  (``deletionTimestamp`` unset), whose labels match the selector. cogate counts bound
  pods, reserved pods (released members not bound yet) and the members planned earlier in
  the same decision, i.e. what kube-scheduler will see once they are bound.
* **filter** for a node ``n``: ``n`` must carry ``c.topologyKey`` (else "missing required
  label"); ``skew = count[n's domain] + (1 if the selector matches p else 0) - min``, where
  ``min`` is the smallest count over the domains, or 0 when there are fewer domains than
  ``minDomains`` (default 1); ``n`` passes when ``skew <= maxSkew`` for every constraint.

**Pinned members.** cogate pins a planned member by narrowing its required node affinity to
the planned node. kube-scheduler evaluates the pinned pod with that affinity, so with
``nodeAffinityPolicy: Honor`` its only domain is the planned node, counting the pods on that
node alone: ``min`` is that count while ``minDomains <= 1`` (the check always passes), and 0
when ``minDomains > 1``, where the check becomes ``pods on the node + self <= maxSkew``. The
planner requires both: the constraint as written (the user's spread) and, for ``Honor``
constraints with ``minDomains > 1``, the pinned form (what kube-scheduler will enforce);
:data:`PINNED_SKEW` names the second. The check is stricter, never looser, for members that
end up released without a pin.

System default constraints (``defaultConstraints`` of the scheduler profile) apply only to
pods without constraints and are ``ScheduleAnyway`` by default, so they never filter.

Shapes: nodes are :class:`~cogate.controller.model.records.NodeInfo` referred to by index into the
``nodes`` sequence given to :class:`Tracker`; pods are
:class:`~cogate.controller.model.records.PodInfo`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cogate.controller.model.records import LabelSelector, NodeInfo, PodInfo, TopologySpreadConstraint

__all__ = ["Selector", "merged_selector", "node_included", "Tracker", "MISSING_LABEL", "SKEW", "PINNED_SKEW"]

#: Reasons :meth:`Tracker.reason` gives (texts kube-scheduler uses, shortened).
MISSING_LABEL = "topology spread (missing topology label)"
SKEW = "topology spread (maxSkew)"
PINNED_SKEW = "topology spread (maxSkew with minDomains, the planned node as the only domain)"
#: ``math.MaxInt32``: criticalPaths' initial MatchNum, the minimum when no domain exists.
_NO_DOMAIN_MIN = 2**31 - 1


class Selector:
    """A constraint's label selector with ``matchLabelKeys`` merged (``labels.Selector``)."""

    __slots__ = ("base", "extra", "key")

    def __init__(self, base: LabelSelector | None, extra: tuple[tuple[str, str], ...]) -> None:
        self.base = base
        self.extra = extra
        self.key = (base, extra)

    @property
    def nothing(self) -> bool:
        """``labels.Nothing()``: a missing selector (merging keeps it Nothing)."""
        return self.base is None

    @property
    def empty(self) -> bool:
        """``Selector.Empty()``: ``{}`` with nothing merged; matches all, counts none."""
        return self.base is not None and not self.extra and not self.base.match_labels and \
            not self.base.match_expressions

    def matches(self, labels: Any) -> bool:
        if self.base is None:
            return False
        return all(labels.get(k) == v for k, v in self.extra) and self.base.matches(labels)


def merged_selector(c: TopologySpreadConstraint, pod: PodInfo) -> Selector:
    """``filterTopologySpreadConstraints``: ``c``'s selector plus ``matchLabelKeys`` with ``pod``'s values
    (keys the pod does not carry are skipped)."""
    extra = tuple(sorted((k, pod.labels[k]) for k in set(c.match_label_keys) if k in pod.labels))
    return Selector(c.label_selector, extra)


def _untolerated(node: NodeInfo, pod: PodInfo) -> bool:
    """``FindMatchingUntoleratedTaint`` with ``DoNotScheduleTaintsFilterFunc`` (NoSchedule, NoExecute)."""
    for t in node.taints:
        if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in pod.tolerations):
            return True
    return False


def _affinity_matches(node: NodeInfo, pod: PodInfo) -> bool:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)``: nodeSelector and required terms."""
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return False
    return not pod.required_node_affinity or any(t.matches(node) for t in pod.required_node_affinity)


def node_included(c: TopologySpreadConstraint, pod: PodInfo, node: NodeInfo) -> bool:
    """Whether ``node`` is a domain of ``c`` for ``pod``: it carries every topology key of the pod's
    constraints and passes ``c``'s ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``."""
    if any(x.topology_key not in node.labels for x in pod.topology_spread):
        return False
    if c.node_affinity_policy != "Ignore" and not _affinity_matches(node, pod):
        return False
    if c.node_taints_policy == "Honor" and _untolerated(node, pod):
        return False
    return True


class _View:
    """Counts per domain of one (namespace, selector, topology key, eligible nodes) combination."""

    __slots__ = ("ns", "sel", "dom", "counts", "_min")

    def __init__(self, ns: str, sel: Selector, dom: list[str | None]) -> None:
        self.ns = ns
        self.sel = sel
        self.dom = dom
        self.counts: dict[str, int] = {d: 0 for d in dom if d is not None}
        self._min: int | None = None

    def counts_pod(self, pod: PodInfo) -> bool:
        return pod.namespace == self.ns and not pod.deleting and not self.sel.empty and self.sel.matches(pod.labels)

    def add(self, pod: PodInfo, i: int, delta: int) -> None:
        d = self.dom[i]
        if d is not None and self.counts_pod(pod):
            self.counts[d] += delta
            self._min = None

    def min(self, min_domains: int) -> int:
        if len(self.counts) < min_domains:
            return 0
        if self._min is None:
            self._min = min(self.counts.values(), default=_NO_DOMAIN_MIN)
        return self._min


class Tracker:
    """Pods per node as kube-scheduler's PodTopologySpread sees them, for one planning state.

    :meth:`add` / :meth:`pop` record pods placed on node indexes (LIFO, for the planner's
    undo log); :meth:`allows` is the Filter for an incoming pod. Count views are built
    lazily per (namespace, merged selector, topology key, inclusion) and kept current.
    """

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self.nodes = nodes
        self.pods: list[tuple[PodInfo, int]] = []
        self._views: dict[tuple[Any, ...], _View] = {}
        self._plans: dict[tuple[Any, ...], list[tuple[TopologySpreadConstraint, _View, bool, _View | None]]] = {}

    def add(self, pod: PodInfo, i: int) -> None:
        """``pod`` now sits on node ``i``."""
        self.pods.append((pod, i))
        for v in self._views.values():
            v.add(pod, i, 1)

    def pop(self) -> None:
        """Undo the last :meth:`add`."""
        pod, i = self.pods.pop()
        for v in self._views.values():
            v.add(pod, i, -1)

    def remove(self, pod: PodInfo, i: int) -> int:
        """``pod`` (uid) no longer sits on node ``i`` (a preemption victim); returns its position in
        the record for :meth:`insert` (the undo), -1 when it was not counted."""
        for j in range(len(self.pods) - 1, -1, -1):
            other, k = self.pods[j]
            if k == i and other.uid == pod.uid:
                del self.pods[j]
                for v in self._views.values():
                    v.add(other, i, -1)
                return j
        return -1

    def insert(self, j: int, pod: PodInfo, i: int) -> None:
        """Undo a :meth:`remove` that returned ``j``."""
        self.pods.insert(j, (pod, i))
        for v in self._views.values():
            v.add(pod, i, 1)

    def _view(self, ns: str, sel: Selector, key: str, dom: list[str | None]) -> _View:
        vkey = (ns, sel.key, key, tuple(d is not None for d in dom))
        view = self._views.get(vkey)
        if view is None:
            view = _View(ns, sel, dom)
            for other, i in self.pods:
                view.add(other, i, 1)
            self._views[vkey] = view
        return view

    def _constraints(self, pod: PodInfo) -> list[tuple[TopologySpreadConstraint, _View, bool, _View | None]]:
        key = (pod.namespace, pod.topology_spread, tuple(sorted(pod.labels.items())), tuple(sorted(
            pod.node_selector.items())), pod.required_node_affinity, pod.tolerations)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        plan = []
        for c in pod.topology_spread:
            sel = merged_selector(c, pod)
            dom = [n.labels.get(c.topology_key) if node_included(c, pod, n) else None for n in self.nodes]
            view = self._view(pod.namespace, sel, c.topology_key, dom)
            per_node = None
            if c.node_affinity_policy != "Ignore" and c.min_domains > 1:
                per_node = self._view(pod.namespace, sel, "\x00node", [str(i) for i in range(len(self.nodes))])
            plan.append((c, view, sel.matches(pod.labels), per_node))
        self._plans[key] = plan
        return plan

    def reason(self, pod: PodInfo, i: int) -> str | None:
        """Why the Filter rejects node ``i`` for ``pod`` (:data:`MISSING_LABEL`, :data:`SKEW`), or None."""
        if not pod.topology_spread:
            return None
        labels = self.nodes[i].labels
        if any(c.topology_key not in labels for c in pod.topology_spread):
            return MISSING_LABEL
        plan = self._constraints(pod)
        for c, view, self_match, _ in plan:
            skew = view.counts.get(labels[c.topology_key], 0) + self_match - view.min(c.min_domains)
            if skew > c.max_skew:
                return SKEW
        for c, _, self_match, per_node in plan:
            if per_node is not None and per_node.counts[str(i)] + self_match > c.max_skew:
                return PINNED_SKEW
        return None

    def allows(self, pod: PodInfo, i: int) -> bool:
        """kube-scheduler's ``Filter``: ``pod`` may go to node ``i`` now."""
        return self.reason(pod, i) is None

    def load(self, pod: PodInfo, i: int) -> int:
        """Sum over ``pod``'s constraints of the matching pods in node ``i``'s domain (lower
        spreads better; the planner tries such nodes first)."""
        labels = self.nodes[i].labels
        return sum(view.counts.get(labels.get(c.topology_key, ""), 0) for c, view, _, _ in self._constraints(pod))

