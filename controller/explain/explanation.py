"""Why a PodGroup waits, from one snapshot of the cluster (pure): the controller's pass, run dry.

:func:`explain` takes a :class:`World` (what the controller's informers would hold: nodes, bound
and nominated pods, PodGroups, labelled pods, ResourceQuotas, PodDisruptionBudgets, as plain
records) and answers for one PodGroup with the controller's own rules, never a copy of them:

1. the planner's input as a pass builds it (:func:`~cogate.controller.status.inputs.members_by_group`,
   :func:`~cogate.controller.status.inputs.build_group_requests`, reservations of released, unbound
   members :func:`~cogate.controller.status.inputs.restored_reservations`, as after a restart);
2. one decision over every group (:class:`~cogate.controller.planning.planner.Pass` and
   :func:`~cogate.controller.planning.planner.run_pass`: exactly ``planner.decide``), the verdict's
   notes added as the reconciler adds them (a quota that refuses members:
   :func:`~cogate.controller.model.quota.explain_waiting`; pods Kubernetes gang-schedules itself:
   :func:`~cogate.controller.release.native.explain`);
3. the ``Released`` condition the controller would write
   (:func:`~cogate.controller.status.status.compute_all`): its reason and message are the answer's
   ``condition``, word for word;
4. what fits where: a released group's plan (``GroupVerdict.release``), else the planner's best
   attempt (:func:`~cogate.controller.planning.capacity.pack` on the pass's room, undone);
5. per node group (nodes of one shape: allocatable, labels but the hostname, taints, cordon,
   readiness) the first shortfall of the first member left out, by the planner's filters
   (:func:`~cogate.controller.planning.filters.static_reason`, then ``Room.fits`` resource by
   resource: "cpu: needs 3, 1 free");
6. with ``extra_nodes``: the same decision with those nodes added (``--add-nodes``);
7. with ``preemption``: the controller's victim selection
   (:func:`~cogate.controller.preemption.victims.select_victims`), dry, for a group the controller
   would preempt for (``InsufficientCapacity``, not released; a group waiting for the rest of
   ``spec.minResources`` too: :meth:`Preempting._start_one <cogate.controller.preemption.room.Preempting>`),
   on the request the reconciler hands it (:func:`~cogate.controller.planning.fenced.fence_requests`:
   the gang's topology domain, kept off the domains exclusive gangs hold).

Left out (said in docs/explain.md): what an owner that can never complete the group adds to a
``WaitingForMembers`` message (it reads the owner through the API), a preemption or ProvisioningRequest
already in flight (the controller's memory), and a refused release's back-off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cogate.controller.model import quota as quota_mod
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.model.resources import format_quantity
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.controller.planning.capacity import Snapshot, nominated_pods, pack, promised_room
from cogate.controller.planning.fenced import fence_requests
from cogate.controller.planning.filters import static_reason
from cogate.controller.planning.members import classify, members_anti, members_spread
from cogate.controller.planning.planner import Pass, run_pass
from cogate.controller.planning.room import Room
from cogate.controller.preemption import inflight
from cogate.controller.preemption.victims import Gang, NoPreemption, Preemption, select_victims
from cogate.controller.release import native
from cogate.controller.status import conditions as cond_mod
from cogate.controller.status import status as status_mod
from cogate.controller.status.inputs import GroupObject, build_group_requests, members_by_group, restored_reservations

__all__ = ["World", "NodeGroup", "WhatIf", "Explanation", "explain", "node_groups", "HOSTNAME_LABELS"]

#: Node labels that differ per node and so do not split node groups.
HOSTNAME_LABELS = frozenset({"kubernetes.io/hostname"})


@dataclass(frozen=True)
class World:
    """What the controller's informers hold, as records: ``nodes`` (``records.node_info``, with their
    DRA device resources), ``pods`` (bound non-terminal pods and unbound ones kube-scheduler
    nominated a node for: ``planner.decide``'s ``pods``), ``groups`` (``inputs.group_object``),
    ``members`` (``records.pod_info`` of every labelled pod, volumes and device requests resolved),
    ``quotas`` (``quota.quota_info``), ``budgets`` (``budgets.budget_info``), ``natives``
    (Kubernetes' own PodGroups, ``nativegroups.native_group``: victim units)."""

    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    groups: tuple[GroupObject, ...]
    members: tuple[PodInfo, ...]
    quotas: tuple[Any, ...] = ()
    budgets: tuple[Any, ...] = ()
    natives: tuple[Any, ...] = ()


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one shape (:func:`node_groups`): ``nodes`` (names, sorted), ``shape`` (one line:
    allocatable, distinguishing labels, taints), ``room_for``: how many more of the first member left
    out fit there now (resources alone, summed over the nodes it passes), ``shortfall``: why it fits
    none of them ('' when it fits one)."""

    nodes: tuple[str, ...]
    shape: str
    room_for: int
    shortfall: str


@dataclass(frozen=True)
class WhatIf:
    """What a change would make of the group: ``change`` (one line), ``starts`` (it would be
    released), ``reason``/``message`` (the ``Released`` condition then, or the preemption's answer),
    ``victims`` (``namespace/name on node``, preemption only)."""

    change: str
    starts: bool
    reason: str
    message: str
    victims: tuple[str, ...] = ()


@dataclass(frozen=True)
class Explanation:
    """The answer for PodGroup ``namespace/name``. ``starts``: released now or would be by this
    pass (exit 0 of ``cogate explain``); ``released``: the release is already recorded (the verdict
    line says "released", not "would start"); ``phase``: the status phase the controller would write;
    ``condition``: the ``Released`` condition it would write (``type``, ``status``, ``reason``,
    ``message``); ``placements``: (member, node) the plan puts where ('' = released unpinned);
    ``left_out``: members the plan leaves gated; ``node_groups``: :class:`NodeGroup` per shape;
    ``preemption``/``add_nodes``: :class:`WhatIf` (None when not asked or not applicable)."""

    namespace: str
    name: str
    min_member: int
    starts: bool
    phase: str
    condition: Mapping[str, str]
    placements: tuple[tuple[str, str], ...]
    left_out: tuple[str, ...]
    node_groups: tuple[NodeGroup, ...]
    preemption: WhatIf | None = None
    add_nodes: WhatIf | None = None
    notes: tuple[str, ...] = field(default=())
    released: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML data (``-o json|yaml``)."""
        def what_if(w: WhatIf | None) -> dict[str, Any] | None:
            return None if w is None else {"change": w.change, "starts": w.starts, "reason": w.reason,
                                           "message": w.message, "victims": list(w.victims)}
        return {
            "podGroup": f"{self.namespace}/{self.name}", "minMember": self.min_member, "starts": self.starts,
            "released": self.released, "phase": self.phase, "condition": dict(self.condition),
            "placements": [{"member": m, "node": n} for m, n in self.placements],
            "leftOut": list(self.left_out),
            "nodeGroups": [{"nodes": list(g.nodes), "shape": g.shape, "roomFor": g.room_for,
                            "shortfall": g.shortfall} for g in self.node_groups],
            "preemption": what_if(self.preemption), "addNodes": what_if(self.add_nodes), "notes": list(self.notes),
        }


@dataclass
class _Planned:
    """One dry pass: its requests, the ``Pass`` (its room after every group), the decision."""

    requests: list[GroupRequest]
    run: Pass
    verdicts: dict[tuple[str, str], GroupVerdict]
    reservations: tuple[Any, ...]
    #: ``Decision.excluded``: nodes preemption may not use per group (exclusive gangs' domains).
    excluded: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)


def _plan(world: World, nodes: Sequence[NodeInfo], now: float, config: ReconcilerConfig) -> _Planned:
    """The controller's pass over ``world`` (on ``nodes``), dry: ``planner.decide`` in its two steps."""
    members = members_by_group(world.members)
    requests = build_group_requests(world.groups, members, config.gate_name, config.topology_levels)
    reservations = restored_reservations(requests, now, config.reservation_ttl_seconds)
    snapshot = Snapshot(nodes, world.pods, members_anti(requests), members_spread(requests))
    run = Pass(snapshot, requests, reservations, now, config.planner_config)
    decision = run_pass(run, requests)
    return _Planned(requests, run, {(v.namespace, v.name): v for v in decision.verdicts}, decision.reservations,
                    decision.excluded)


def _noted(world: World, verdict: GroupVerdict, request: GroupRequest) -> GroupVerdict:
    """The notes the reconciler adds to a verdict before its status is computed."""
    verdict = quota_mod.explain_waiting(verdict, request, list(world.quotas))
    natives = native.ignored_by_group([p for p in world.members if p.native])
    return native.explain(verdict, natives.get((request.namespace, request.name), ()))


def _condition(g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float,
               config: ReconcilerConfig) -> tuple[str, dict[str, str]]:
    """The phase and the ``Released`` condition ``status.compute_all`` gives (as the reconciler computes them)."""
    computed = status_mod.compute_all(g.pg, request.members, verdict, now, config.gate_name)
    for c in computed.status.conditions:
        if c.type == cond_mod.CONDITION_RELEASED:
            return computed.status.phase or "Pending", {"type": c.type, "status": c.status, "reason": c.reason or "",
                                                        "message": c.message or ""}
    return computed.status.phase or "Pending", {"type": cond_mod.CONDITION_RELEASED, "status": "Unknown",
                                                "reason": str(verdict.outcome), "message": verdict.message}


def _starts(phase: str, verdict: GroupVerdict) -> bool:
    return Outcome(verdict.outcome).releases or phase in ("Scheduling", "Scheduled", "Running", "Finished")


def _released(phase: str, verdict: GroupVerdict) -> bool:
    """The release is recorded already (the planner keeps it, or the phase implies minMember placed)."""
    return Outcome(verdict.outcome) is Outcome.ALREADY_RELEASED or phase in ("Scheduled", "Running", "Finished")


#: The note of a released group none of whose members exists (docs/semantics.md "Generations").
NO_MEMBER_NOTE = ("no member of the group exists: its release ended, and the members created next are decided "
                  "again as a whole, all or nothing")


def explain(world: World, namespace: str, name: str, now: float, config: ReconcilerConfig = ReconcilerConfig(), *,
            extra_nodes: Sequence[NodeInfo] = (), preemption: bool = True) -> Explanation:
    """The answer for PodGroup ``namespace/name`` in ``world`` at ``now`` (epoch seconds) with the
    controller's ``config`` (module doc). ``extra_nodes``: nodes to add for ``--add-nodes`` (none:
    not asked); ``preemption``: run the victim selection when it applies. Raises ``LookupError``
    when ``world`` has no such PodGroup. Deterministic; never writes anything."""
    groups = {g.key: g for g in world.groups}
    key = (namespace, name)
    g = groups.get(key)
    if g is None:
        raise LookupError(f"PodGroup {namespace}/{name} not found")
    planned = _plan(world, world.nodes, now, config)
    request = next(r for r in planned.requests if (r.namespace, r.name) == key)
    verdict = _noted(world, planned.verdicts[key], request)
    phase, condition = _condition(g, request, verdict, now, config)
    starts = _starts(phase, verdict)
    # a topology gang's best attempt stays inside the domain it may use, as its preemption does
    fenced = fence_requests([verdict], {key: request}, planned.excluded)[key]
    placements, left_out, groups_out = _where(planned.run, fenced, verdict, world.nodes, config)
    what_nodes = _with_nodes(world, key, now, config, extra_nodes) if extra_nodes else None
    victims = (_preempt(world, planned, request, verdict, config)
               if preemption and not starts and config.preemption else None)
    released = _released(phase, verdict)
    notes = (NO_MEMBER_NOTE,) if released and not request.members else ()
    return Explanation(namespace, name, request.min_member, starts, phase, condition, placements, left_out,
                       groups_out, victims, what_nodes, notes, released)


def _where(run: Pass, request: GroupRequest, verdict: GroupVerdict, nodes: Sequence[NodeInfo],
           config: ReconcilerConfig) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[NodeGroup, ...]]:
    """(member, node) placed, members left out, node groups (module doc, steps 4 and 5)."""
    ms = classify(request, config.gate_name)
    names = {m.uid: m.name for m in request.members}
    placed = [(m.name, m.node_name) for m in ms.bound if m.node_name]
    if Outcome(verdict.outcome).releases:
        placed += [(names.get(uid, uid), node) for uid, node in verdict.release.items()]
        out = [m for m in ms.plannable if m.name in set(verdict.waiting)]
        return tuple(placed), tuple(m.name for m in out), node_groups(run.room, nodes, out[:1]) if out else ()
    room = run.room
    mark = room.mark()
    try:
        plan = pack(room, ms.plannable, max(request.min_member - len(ms.bound), 0))
        index = {i: n.name for i, n in enumerate(room.table.nodes)}
        placed += [(names[uid], index[i]) for uid, i in plan.items()]
        out = [m for m in ms.plannable if m.uid not in plan]
        return tuple(placed), tuple(m.name for m in out), node_groups(room, nodes, out[:1]) if out else ()
    finally:
        room.rollback(mark)


def _shape_key(n: NodeInfo) -> tuple[Any, ...]:
    labels = tuple(sorted((k, v) for k, v in n.labels.items() if k not in HOSTNAME_LABELS))
    return (tuple(sorted(n.allocatable.items())), labels, tuple(sorted(map(str, n.taints))), n.unschedulable, n.ready)


def _shape_text(n: NodeInfo, labels: Iterable[tuple[str, str]]) -> str:
    alloc = ", ".join(f"{k} {format_quantity(k, v)}" for k, v in sorted(n.allocatable.items()))
    parts = [alloc]
    if labels:
        parts.append("labels " + ",".join(f"{k}={v}" for k, v in labels))
    if n.taints:
        parts.append("taints " + ",".join(str(t) for t in n.taints))
    if n.unschedulable:
        parts.append("cordoned")
    if not n.ready:
        parts.append("not Ready")
    return "; ".join(parts)


def node_groups(room: Room, nodes: Sequence[NodeInfo], members: Sequence[PodInfo]) -> tuple[NodeGroup, ...]:
    """Nodes grouped by shape (:data:`HOSTNAME_LABELS` aside; labels every node shares are not
    printed), each with how many more of ``members[0]`` fit there on ``room`` and, when none does,
    its first shortfall: the first load-independent filter that fails on every node of the group
    (:func:`~cogate.controller.planning.filters.static_reason`), else the first requested resource
    (by name) that no node of the group has free ("cpu: needs 3, 1 free": the most free on one
    node), else "host ports, pod (anti-)affinity or topology spread". No member: room_for 0, no
    shortfall."""
    index = {n.name: i for i, n in enumerate(room.table.nodes)}
    by_shape: dict[tuple[Any, ...], list[NodeInfo]] = {}
    for n in sorted(nodes, key=lambda n: n.name):
        by_shape.setdefault(_shape_key(n), []).append(n)
    common = set.intersection(*(set(k[1]) for k in by_shape)) if by_shape else set()
    out = []
    for key, group in by_shape.items():
        slots = [index[n.name] for n in group if n.name in index]
        room_for, shortfall = _room_for(room, group, slots, members[0]) if members else (0, "")
        out.append(NodeGroup(tuple(n.name for n in group), _shape_text(group[0], [kv for kv in key[1] if kv not in common]),
                             room_for, shortfall))
    return tuple(out)


def _room_for(room: Room, group: Sequence[NodeInfo], slots: Sequence[int], m: PodInfo) -> tuple[int, str]:
    statics = [static_reason(n, m) for n in group]
    if all(s is not None for s in statics):
        return 0, str(statics[0])
    spec = room.spec_for(m)
    open_slots = [i for i, s in zip(slots, statics) if s is None]
    fitting = [i for i in open_slots if room.fits(spec, i)]
    if fitting:
        return sum(max(room.copies(spec, i), 1) for i in fitting), ""
    for k, v in spec.req_items:
        best = max(room.free[i].get(k, 0) for i in open_slots)
        if best < v:
            return 0, f"{k}: needs {format_quantity(k, v)}, {format_quantity(k, max(best, 0))} free"
    return 0, "host ports, pod (anti-)affinity or topology spread"


def _with_nodes(world: World, key: tuple[str, str], now: float, config: ReconcilerConfig,
                extra: Sequence[NodeInfo]) -> WhatIf:
    """The decision again with ``extra`` nodes added (module doc, step 6)."""
    planned = _plan(world, [*world.nodes, *extra], now, config)
    request = next(r for r in planned.requests if (r.namespace, r.name) == key)
    verdict = _noted(world, planned.verdicts[key], request)
    g = next(g for g in world.groups if g.key == key)
    phase, condition = _condition(g, request, verdict, now, config)
    names = ", ".join(n.name for n in extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
    return WhatIf(f"{len(extra)} more node{'s' if len(extra) != 1 else ''} ({names})",
                  _starts(phase, verdict), condition["reason"], condition["message"])


def _preempt(world: World, planned: _Planned, request: GroupRequest, verdict: GroupVerdict,
             config: ReconcilerConfig) -> WhatIf | None:
    """The controller's victim selection, dry (module doc, step 7); None when it would not run one."""
    if request.released or Outcome(verdict.outcome) is not Outcome.INSUFFICIENT_CAPACITY:
        return None
    if not any(m.gated_by(config.gate_name) for m in request.members):
        return None
    member = {m.uid: (m, r) for r in planned.requests for m in r.members}
    kept = [(res, member[res.pod_uid][0]) for res in planned.reservations if res.pod_uid in member]
    holders = {res.pod_uid: inflight.holder(member[res.pod_uid][1].namespace, member[res.pod_uid][1].name)
               for res, _ in kept}
    promised = promised_room(kept, nominated_pods(world.pods), holders)
    gangs = [Gang(r.namespace, r.name, r.min_member) for r in planned.requests
             if (r.namespace, r.name) != (request.namespace, request.name)]
    key = (request.namespace, request.name)  # the domain and the exclusive gangs' holds, as the reconciler does
    request = fence_requests([verdict], {key: request}, planned.excluded)[key]
    result = select_victims(request, world.nodes, world.pods, promised, list(world.budgets), gangs,
                            config.planner_config, natives=list(world.natives))
    if isinstance(result, NoPreemption):
        return WhatIf("preemption", False, str(result.reason), result.message)
    assert isinstance(result, Preemption)
    victims = tuple(f"{v.pod.namespace}/{v.pod.name} on {v.node}" for v in result.victims)
    return WhatIf("preemption", True, "Preempting", result.message, victims)
