"""Preemption and new nodes together (pure; issue 37 kind 5): the pods whose room a gang may count
as gone when it asks cluster-autoscaler for nodes.

A gang that needs both (evict low-priority pods, balloons for instance, that hold spare room, and
add a node) does not fit even with preemption (victim selection answers
``DoesNotFitEvenWithPreemption``), so it asks for new nodes; asked for every member the current
room cannot hold, a node group whose maximum is below the whole gang but above what is really
missing refuses it (``CapacityIsNotFound``) and the gang never starts. The rules
(docs/semantics.md, "Preemption and the cluster autoscaler together"):

1. **Preemption first, for what it can free; new nodes for the rest.** With ``--preemption`` on,
   the members the gang asks new nodes for are those still unplaced when every pod preemption
   may evict for it (:func:`evictable`) is counted as gone (``provreq.shortfalls(gone=...)``):
   the shortfall after preemption. Why this combination is the cheaper one: evicting a pod of
   lower priority costs no money and no minutes of node start-up, and is what kube-scheduler
   does before cluster-autoscaler adds a node (cluster-autoscaler ignores pods that preemption
   can place, and counts pods below ``--expendable-pods-priority-cutoff`` as gone in its own
   simulation); a node is added only for members that no eviction can place.
2. **No victim in vain.** Nothing is evicted while the nodes are asked for: the gang still does
   not fit even with preemption, so victim selection keeps answering
   ``DoesNotFitEvenWithPreemption``. Once the request is ``Provisioned`` and its nodes are
   Ready, the gang fits with preemption, and the preemption room evicts only the victims then
   needed (fewest PodDisruptionBudget violations first, as always); if the scale-up fails, no
   pod was evicted for it.
3. **One victim rule.** The pods counted as gone are exactly victim selection's candidates
   (:func:`~cogate.controller.preemption.candidates.candidate_rule`): bound, of strictly lower
   priority than the gang's lowest gated member, not being deleted, not the gang's own, not of a
   gang with a member of that priority or more, nor of a native ``all`` PodGroup that may not be
   touched, nor in a protected namespace; none when a member says ``preemptionPolicy: Never``.
   PodDisruptionBudgets do not take a pod out (kube-scheduler violates a budget when it must,
   preferring nodes with fewer violations; so does victim selection): a budget-protected balloon
   counts as gone too, and the selection run after the nodes came prefers victims that break no
   budget.

Units: none (pods in, uids out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cogate.controller.model.nativegroups import NativeGroup
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.planning.planner import classify
from cogate.controller.preemption.candidates import candidate_rule
from cogate.controller.preemption.units import native_units

__all__ = ["evictable"]


def evictable(group: GroupRequest, pods: Sequence[PodInfo], gangs: Mapping[tuple[str, str], int], gate: str, *,
              protected: frozenset[str] = frozenset(), natives: Sequence[NativeGroup] = ()) -> tuple[PodInfo, ...]:
    """The bound pods of ``pods`` that preemption may evict for ``group`` (module doc, rule 3),
    in ``pods``' order. ``pods``: bound non-terminal pods (others are skipped); ``gangs``: every
    PodGroup as ``(namespace, name) -> minMember`` (the group itself is skipped); ``gate``: the
    scheduling gate's name; ``protected``: namespaces never preempted (``--protected-namespace``);
    ``natives``: Kubernetes' own PodGroups. Empty when the group has no gated member, or a
    plannable member says ``preemptionPolicy: Never``. Never raises on well-typed records."""
    ms = classify(group, gate)
    if not ms.gated or any(m.preemption_policy == "Never" for m in ms.plannable):
        return ()
    priority = min(m.priority for m in ms.gated)
    key = (group.namespace, group.name)
    bound = [p for p in pods if p.bound and not p.terminal]
    untouchable: set[tuple[str, str]] = set()
    for p in bound:
        gk = (p.namespace, p.group)
        if p.group and gk != key and gk in gangs and not p.deleting and (p.priority >= priority or p.namespace in protected):
            untouchable.add(gk)  # victim selection's rule 6: such a gang is never touched
    units = native_units(natives, ((p, 0) for p in bound), priority, protected)
    untouchable |= units.untouchable
    is_candidate = candidate_rule(priority, {m.uid for m in group.members}, key, untouchable, protected)
    held = {p.uid for p in units.held}
    return tuple(p for p in bound if p.uid not in held and is_candidate(p))
