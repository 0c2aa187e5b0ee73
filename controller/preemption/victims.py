"""Victim selection for gang-aware preemption (pure): which lower-priority pods to remove so
that a gated group places minMember (issue 15 item 1).

A gated pod never enters kube-scheduler's queue, so kube-scheduler never preempts for it;
:func:`select_victims` is cogate's own preemption for a whole gang at once. It decides only
(plain records in, a :class:`Preemption` or a :class:`NoPreemption` out); acting on it
(the ``DisruptionTarget`` condition, evictions, holding the freed room) is the shell's.

Rules, each with its source (docs/semantics.md, "Preemption (victim selection)"):

1. **Priority.** The group's priority is the lowest priority of its gated members; only bound,
   non-terminal pods of *strictly* lower priority that are not being deleted and are not members
   of the group are candidates (kube-scheduler DefaultPreemption ``SelectVictimsOnNode``: "pods
   with lower priority than the preemptor"; equal priority never preempts).
2. **preemptionPolicy Never.** A group any of whose plannable members has
   ``spec.preemptionPolicy: Never`` preempts nothing (kube-scheduler
   ``PodEligibleToPreemptOthers``).
3. **Only when it helps.** A group the planner holds whatever the room (an unknown scheduler,
   claims kube-scheduler cannot use yet, unchecked constraints under ``hold``) preempts nothing.
   If the group does not place minMember (members already bound count,
   as the planner counts them) even with every candidate gone, nothing is preempted
   (kube-scheduler: a node where the pod does not fit with all lower-priority pods removed is not
   a candidate; Kueue: a workload is only preempted for if the preemptor then fits). A group that
   fits the free room is never given victims, nor is one whose minMember fits and that waits only
   for the rest of ``spec.minResources`` (:func:`for_min_resources`).
4. **One rule set.** Every fit is the planner's capacity model (:mod:`cogate.controller.planning.capacity`:
   ``Room``/``pack``/``Snapshot``; NodeResourcesFit, taints, node affinity, NodePorts,
   InterPodAffinity, PodTopologySpread), victims taken off with :meth:`~cogate.controller.planning.capacity.Room.vacate`;
   the answer is verified by :func:`~cogate.controller.planning.capacity.pack` on the room
   :meth:`Snapshot.room <cogate.controller.planning.capacity.Snapshot.room>` builds without the victims,
   which is the room ``planner.decide`` plans on once they are gone (room promised to others, which
   victims cannot free, is charged; nominations of lower priority are lent, as the planner does).
5. **Which victims** (kube-scheduler order). Members are placed in free room first (the
   planner's ``pack``); each member still needed then goes to the node whose victims are best by
   ``pickOneNodeForPreemption``: fewest PodDisruptionBudget violations, lowest highest-victim
   priority, lowest sum of priorities, fewest victims, latest start of the highest-priority
   victims (then node order). A node's victims are chosen as ``SelectVictimsOnNode`` does: all
   candidates removed, then reprieved one by one as long as the member still fits, the
   PDB-violating ones first (``filterPodsWithPDBViolation``), each group most important first
   (``util.MoreImportantPod``: higher priority, then earlier ``status.startTime``; a pod not
   started counts as starting now). As kube-scheduler (``calculateNumCandidates``:
   ``MinCandidateNodesPercentage`` 10, ``MinCandidateNodesAbsolute`` 100) at most
   ``max(10% of nodes, 100)`` nodes that can take the member after preemption are compared per
   member (the first in node order, plus every node this selection changed). Finally every victim
   unit is offered a reprieve in the same order (PDB-violating first, most important first): it
   is put back when the members planned on its nodes still fit there.
6. **Gangs.** A bound member of another gang (a :class:`Gang`: its pod-group label names it) is
   taken alone only while that gang keeps at least minMember bound members after all victims;
   otherwise every bound member of that gang is a victim (never a useless half: Kueue preempts
   whole workloads, KEP-5710 workload-aware preemption), and the gang counts as one victim of its
   priority when nodes are compared. A gang with a member of the group's priority or higher is
   never touched.
7. **Deterministic**: victims sorted by (node, namespace, name, uid); ties by node order.

Guarantees (tests/unit/controller/preemption/test_preemption_props.py): the victims suffice (the planner's ``pack``
places minMember on the room without them); no victim has the group's priority or more; no gang
is left partly preempted below its minMember; ``DoesNotFitEvenWithPreemption`` exactly when the
group does not fit with every candidate gone. Minimality is *with respect to the plan*: putting
back any single victim unit (one pod, or a gang taken whole), the returned ``plan`` no longer
holds on that room, or the planner's ``pack`` no longer places minMember there (when the plan
came from the exhaustive fallback below). A different placement of the members might need fewer
victims: finding the fewest is a bin-packing problem, and kube-scheduler too minimises per node
for one pod, not over placements.

Fallback: when the greedy placement above finds no node for enough members, or ``pack`` does not
confirm its answer, the victims are chosen as ``SelectVictimsOnNode`` does at cluster scale:
every candidate removed, then every unit reprieved in the order above while ``pack`` still places
minMember, in rounds until one reprieves none (``pack`` is a heuristic: adding a pod back can make
it succeed where it failed). Its cost grows with the number of candidates times a ``pack``; it is
the exception.

Inputs: the node and pod lists (from scratch, as ``planner.decide`` takes them), or the
incremental planner's view (``view=``: :meth:`PlanningState.bound_view
<cogate.controller.planning.planstate.PlanningState.bound_view>`, the controller's path), on which the rooms
start from the kept free room and no pass reads every pod; the answer is the same
(:func:`select_victims`; tests/unit/controller/preemption/test_preemption_view.py; bench/preemption.py).

Units: requests in the units of :mod:`cogate.controller.model.resources` (CPU millicores, memory
bytes); times in epoch seconds.
"""

from __future__ import annotations

import heapq
import math
from operator import le, sub
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cogate.api import POD_GROUP_LABEL
from cogate.controller.model import minresources as minres
from cogate.controller.planning.capacity import Snapshot, pack, reserve_room
from cogate.controller.planning.room import NodeTable, Room, req_with_pod
from cogate.controller.planning.explanations import held_reason, name_list, plural
from cogate.controller.planning.filters import spec_key
from cogate.controller.planning.planner import classify, members_anti, members_spread
from cogate.controller.planning.planstate import BoundView
from cogate.controller.model.readers import integer, mapping, sections
from cogate.controller.model.records import (HostPort, InvalidObject, LabelSelector, NodeInfo, PodInfo, Promise,
                                       label_selector, member_key)
from cogate.controller.model.verdicts import GroupRequest, PlannerConfig

__all__ = ["Reason", "Budget", "budget_info", "Gang", "Victim", "Preemption", "NoPreemption", "select_victims",
           "for_min_resources",
           "more_important", "candidate_nodes", "MIN_CANDIDATE_NODES_PERCENTAGE", "MIN_CANDIDATE_NODES_ABSOLUTE"]

#: kube-scheduler DefaultPreemptionArgs defaults (``calculateNumCandidates``).
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
#: kube-scheduler ``pickOneNodeForPreemption`` adds ``MaxInt32 + 1`` to each priority it sums, so
#: that negative priorities do not make more victims look cheaper.
_PRIORITY_OFFSET = 2**31


class Reason(StrEnum):
    """Why :func:`select_victims` preempts nothing (``NoPreemption.reason``)."""

    #: The group's plannable members plus its bound ones are fewer than minMember.
    NOT_ENOUGH_MEMBERS = "NotEnoughMembers"
    #: The planner keeps the group gated whatever the room (``explanations.held_reason``: an
    #: unknown scheduler, claims kube-scheduler cannot use yet, unchecked constraints under
    #: ``hold``): victims would go in vain.
    HELD = "Held"
    #: The group places minMember on the free room: nothing to preempt.
    FITS_WITHOUT_PREEMPTION = "FitsWithoutPreemption"
    #: A plannable member has ``spec.preemptionPolicy: Never``.
    PREEMPTION_POLICY_NEVER = "PreemptionPolicyNever"
    #: No bound pod of strictly lower priority can be taken.
    NO_LOWER_PRIORITY_PODS = "NoLowerPriorityPods"
    #: Even with every candidate gone the group does not place minMember.
    DOES_NOT_FIT_EVEN_WITH_PREEMPTION = "DoesNotFitEvenWithPreemption"
    #: minMember fits; the group waits only for the rest of ``spec.minResources``
    #: (:func:`for_min_resources`): no member to place, so nothing is preempted.
    MIN_RESOURCES_ONLY = "MinResourcesOnly"


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as preemption sees it: ``disruptions_allowed`` is
    ``status.disruptionsAllowed``; ``disrupted``: names in ``status.disruptedPods`` (already
    counted by the API server: taking them violates nothing)."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted: frozenset[str] = frozenset()

    def matches(self, pod: PodInfo) -> bool:
        """The budget covers ``pod`` (kube-scheduler ``filterPodsWithPDBViolation``: same
        namespace; a pod without labels, and a nil or empty selector, match nothing)."""
        sel = self.selector
        if pod.namespace != self.namespace or not pod.labels or sel is None:
            return False
        if not sel.match_labels and not sel.match_expressions:
            return False
        return sel.matches(pod.labels)


def budget_info(obj: Mapping[str, Any]) -> Budget:
    """A policy/v1 PodDisruptionBudget (API JSON) as a :class:`Budget`. Raises
    :class:`~cogate.controller.model.records.InvalidObject` naming the field on garbage."""
    meta, spec, status = sections(obj, "poddisruptionbudget")
    ns, name = meta.get("namespace") or "", meta.get("name") or ""
    if not isinstance(ns, str) or not isinstance(name, str):
        raise InvalidObject("metadata.namespace/name: expected strings")
    where = f"poddisruptionbudget {ns}/{name}"
    try:
        selector = label_selector(spec.get("selector"), "spec.selector")
        allowed = integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed")
        disrupted = mapping(status.get("disruptedPods"), "status.disruptedPods")
    except InvalidObject as e:
        raise InvalidObject(f"{where}: {e}") from None
    return Budget(ns, name, selector, allowed, frozenset(str(k) for k in disrupted))


@dataclass(frozen=True)
class Gang:
    """Another PodGroup whose bound members may be victims (its minMember decides whether a member
    may be taken alone, rule 6)."""

    namespace: str
    name: str
    min_member: int


@dataclass(frozen=True)
class Victim:
    """A pod to remove: ``node`` it is bound to; ``breaks_budget``: taking it exceeds a
    PodDisruptionBudget's ``disruptionsAllowed`` (counted over all victims, most important first);
    ``whole_gang``: ``(namespace, name)`` of the gang taken whole it belongs to, else None."""

    pod: PodInfo
    node: str
    breaks_budget: bool
    whole_gang: tuple[str, str] | None


@dataclass(frozen=True)
class Preemption:
    """The victims (sorted by node, namespace, name, uid) and the plan they make room for:
    ``plan`` member uid -> node name (minMember minus the bound members, in the order they were
    placed: with topology spread the order matters, as it does for the planner); ``priority``:
    the group's (its lowest gated member's); ``gangs_taken``: gangs taken whole, sorted;
    ``message``: one line for a condition or an Event."""

    victims: tuple[Victim, ...]
    plan: Mapping[str, str]
    priority: int
    gangs_taken: tuple[tuple[str, str], ...]
    message: str = ""


@dataclass(frozen=True)
class NoPreemption:
    """Nothing is preempted, and why."""

    reason: Reason
    message: str


def for_min_resources(group: GroupRequest, shorts: Sequence[minres.Short]) -> NoPreemption:
    """Rule 3 for a group that places minMember and waits only for the rest of
    ``spec.minResources`` (``GroupVerdict.min_resources_short``): nothing is preempted. The rest
    has no pods yet (the Spark executors are created once the driver runs), so no victim is
    chosen for a member, and victims chosen for an aggregate would free room on nodes no member
    may ever use; scheduler-plugins does not preempt for it either (its PreFilter refuses the pod
    ``UnschedulableAndUnresolvable``, which kube-scheduler's PostFilter preemption skips)."""
    return NoPreemption(Reason.MIN_RESOURCES_ONLY,
                        f"PodGroup {group.namespace}/{group.name} preempts nothing for spec.minResources "
                        f"({minres.short_list(shorts)}): its minMember members fit, and cogate preempts only "
                        "to place members")


def more_important(p: PodInfo) -> tuple[Any, ...]:
    """Sort key, most important first (kube-scheduler ``util.MoreImportantPod``: higher priority,
    then earlier start; ``GetPodStartTime`` takes a pod without ``status.startTime`` as starting
    now, so it comes last), then namespace, name, uid for determinism."""
    return (-p.priority, p.started or math.inf, p.namespace, p.name, p.uid)


def candidate_nodes(n_nodes: int) -> int:
    """How many nodes kube-scheduler's DefaultPreemption compares per preemptor
    (``calculateNumCandidates``: 10% of the nodes, at least 100, at most all)."""
    return min(n_nodes, max(n_nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE))


# -- the selection -----------------------------------------------------------------------------


@dataclass
class _Choice:
    """Victims on one node for one member: ``key`` (``pickOneNodeForPreemption`` order, smaller
    is better), the pods taken alone, the gangs that must go whole."""

    key: tuple[Any, ...]
    slot: int
    alone: list[PodInfo] = field(default_factory=list)
    gangs: list[tuple[str, str]] = field(default_factory=list)


class _Pool:
    """Per member spec: the nodes it may use (``eligible``, ``allowed``), how far the scan in node
    order went (``pos``), the choices found (slot -> :class:`_Choice`), and the point of the touch
    log they are current for (``log_at``)."""

    __slots__ = ("eligible", "allowed", "pos", "choices", "log_at", "heap")

    def __init__(self, eligible: list[int]) -> None:
        self.eligible = eligible
        self.allowed = set(eligible)
        self.pos = 0
        self.choices: dict[int, _Choice] = {}
        self.log_at = 0
        #: (key, slot) of every choice made (a lazy heap: an entry whose slot's choice now has
        #: another key, or none, is dropped when it reaches the top)
        self.heap: list[tuple[tuple[Any, ...], int]] = []

    def best(self) -> _Choice | None:
        """The choice with the smallest key (keys end with the slot: no ties)."""
        heap = self.heap
        while heap:
            key, i = heap[0]
            c = self.choices.get(i)
            if c is not None and c.key == key:
                return c
            heapq.heappop(heap)
        return None


class _Stale(Exception):
    """A cached choice no longer places its member (a change the cache did not see)."""


class _Unit:
    """A victim unit: one pod taken alone, or a gang taken whole (all its bound members)."""

    __slots__ = ("pods", "gang")

    def __init__(self, pods: list[tuple[PodInfo, int]], gang: tuple[str, str] | None) -> None:
        self.pods = pods
        self.gang = gang


class _Selection:
    """The state of one :func:`select_victims` call after the early answers (rules 1 to 3)."""

    def __init__(self, group: GroupRequest, table: NodeTable, room: Room, plannable: list[PodInfo], needed: int,
                 candidates: _Candidates, budgets: Sequence[Budget],
                 gang_pods: Mapping[tuple[str, str], list[tuple[PodInfo, int]]],
                 slack: Mapping[tuple[str, str], int]) -> None:
        self.group = group
        self.table = table
        self.room = room
        self.plannable = plannable
        self.needed = needed
        self.budgets = budgets
        self.gang_pods = gang_pods
        self.slack = slack
        self.by_node = candidates
        self._sorted: set[int] = set()
        self.gang_of: dict[str, tuple[str, str]] = {p.uid: gk for gk, ps in gang_pods.items() for p, _ in ps}
        self._budgets_of: dict[str, tuple[int, ...]] = {}
        self.left = [b.disruptions_allowed for b in budgets]
        #: node slots whose candidates a budget or a gang covers: their cached choices read its count
        self.budget_slots: dict[int, set[int]] = {}
        if budgets:
            for p, i in candidates.pairs():
                for k in self.budgets_of(p):
                    self.budget_slots.setdefault(k, set()).add(i)
        self.gang_slots = {gk: {i for _, i in ps} for gk, ps in gang_pods.items()}
        #: victims taken alone (uid -> (pod, slot)) and gangs taken whole
        self.alone: dict[str, tuple[PodInfo, int]] = {}
        self.whole: set[tuple[str, str]] = set()
        self.alone_per_gang: dict[tuple[str, str], int] = {}
        self.plan: dict[str, int] = {}
        #: node slots in the order their choices went out of date (``_Pool.log_at`` reads from here)
        self.touched: list[int] = []
        self.pools: dict[Any, _Pool] = {}
        self._req: dict[str, dict[str, int]] = {}
        #: resource keys -> uid -> the pod's requests (with ``pods``) of those keys, in that order
        self._vecs: dict[tuple[str, ...], dict[str, tuple[int, ...]]] = {}
        self._members = {m.uid: m for m in plannable}

    # -- budgets
    def budgets_of(self, p: PodInfo) -> tuple[int, ...]:
        got = self._budgets_of.get(p.uid)
        if got is None:
            got = tuple(k for k, b in enumerate(self.budgets) if b.matches(p) and p.name not in b.disrupted)
            self._budgets_of[p.uid] = got
        return got

    def split_by_budget(self, pods: Iterable[PodInfo], left: list[int]) -> tuple[list[PodInfo], list[PodInfo]]:
        """``filterPodsWithPDBViolation``: in the given order, a pod whose matching budget has no
        disruption left violates; otherwise each matching budget is charged one (``left`` changes)."""
        violating: list[PodInfo] = []
        fine: list[PodInfo] = []
        for p in pods:
            bad = False
            for k in self.budgets_of(p):
                if left[k] <= 0:
                    bad = True
                    break
                left[k] -= 1
            (violating if bad else fine).append(p)
        return violating, fine

    # -- one node, one member (SelectVictimsOnNode)
    def _touch(self, i: int) -> None:
        """Node ``i``'s room changed."""
        self._stale(i)

    def _stale(self, i: int) -> None:
        """Node ``i``'s kept choices are out of date (its room, or a budget or gang count they read)."""
        self.touched.append(i)

    def req_of(self, p: PodInfo) -> dict[str, int]:
        r = self._req.get(p.uid)
        if r is None:
            r = self._req[p.uid] = req_with_pod(p.requests)
        return r

    def on_node_candidates(self, i: int) -> list[PodInfo]:
        """Node ``i``'s candidates still on the room, most important first."""
        ps = self.by_node.get(i)
        if not ps:
            return []
        if i not in self._sorted:
            ps.sort(key=more_important)
            self._sorted.add(i)
        return [p for p in ps if p.uid not in self.alone and self.gang_of.get(p.uid) not in self.whole]

    def _charge(self, p: PodInfo) -> None:
        """``p`` is a victim: one disruption less on each budget covering it."""
        for k in self.budgets_of(p):
            self.left[k] -= 1
            for i in self.budget_slots.get(k, ()):
                self._stale(i)

    def on_node(self, m: PodInfo, i: int) -> _Choice | None:
        """The victims on node ``i`` that let ``m`` fit there, or None (no candidate helps)."""
        room = self.room
        spec = room.spec_for(m)
        if room.fits(spec, i):
            return _Choice((0, -math.inf, 0, 0, 0, -math.inf, i), i)
        cands = self.on_node_candidates(i)
        if not cands:
            return None
        if room.anti_active or room.spread is not None or spec.ports or m.required_pod_affinity:
            found = self._victims_on_room(m, i, cands)
        else:
            found = self._victims_by_resources(spec.req_items, i, cands)
        if found is None:
            return None
        victims, violating = found
        bad = {p.uid for p in violating}
        per_gang: dict[tuple[str, str], int] = {}
        for p in victims:
            gk = self.gang_of.get(p.uid)
            if gk is not None:
                per_gang[gk] = per_gang.get(gk, 0) + 1
        gangs = sorted(gk for gk, n in per_gang.items() if self.alone_per_gang.get(gk, 0) + n > self.slack[gk])
        alone = [p for p in victims if self.gang_of.get(p.uid) not in gangs]
        units: list[tuple[int, float, bool]] = [(p.priority, p.started or math.inf, p.uid in bad) for p in alone]
        pods = len(alone)
        for gk in gangs:
            ps = [p for p, _ in self.gang_pods[gk]]
            pods += sum(1 for p in ps if p.uid not in self.alone)
            units.append((max(p.priority for p in ps), min(p.started or math.inf for p in ps),
                          any(p.uid in bad for p in victims if self.gang_of.get(p.uid) == gk)))
        top = max(u[0] for u in units)
        key = (sum(1 for u in units if u[2]), top, sum(u[0] + _PRIORITY_OFFSET for u in units), len(units), pods,
               -min(u[1] for u in units if u[0] == top), i)
        return _Choice(key, i, alone, gangs)

    def _victims_on_room(self, m: PodInfo, i: int, cands: list[PodInfo]
                         ) -> tuple[list[PodInfo], list[PodInfo]] | None:
        """``SelectVictimsOnNode`` on the room itself (every filter): all candidates off, then
        each put back while ``m`` still fits, the budget-violating first. (victims, violating)."""
        room = self.room
        mark = room.mark()
        for p in cands:
            room.vacate(p, i)
        spec = room.spec_for(m)
        if not self._fits(m, spec, i):
            room.rollback(mark)
            return None
        violating, fine = self.split_by_budget(cands, list(self.left))
        victims: list[PodInfo] = []
        for p in violating + fine:
            here = room.mark()
            room.occupy(p, self.req_of(p), p.host_ports, i)
            if not room.fits(spec, i):
                room.rollback(here)
                victims.append(p)
        room.rollback(mark)
        return victims, violating

    def _victims_by_resources(self, need: Sequence[tuple[str, int]], i: int, cands: list[PodInfo]
                              ) -> tuple[list[PodInfo], list[PodInfo]] | None:
        """The same where only NodeResourcesFit can refuse (no host ports, anti-affinity, spread or
        pod affinity in play): the room's arithmetic (:func:`~cogate.controller.planning.capacity.copies`'
        rule, request <= free per resource) without touching the room."""
        keys = tuple(k for k, _ in need)
        vecs = self._vecs.get(keys)
        if vecs is None:
            vecs = self._vecs[keys] = {}
        rows = []
        for p in cands:
            r = vecs.get(p.uid)
            if r is None:  # req_with_pod's numbers: the pods slot 1, a request that is not positive 0
                rq = p.requests
                r = vecs[p.uid] = tuple([1 if k == "pods" else max(rq.get(k, 0), 0) for k in keys])
            rows.append(r)
        free = self.room.free[i]
        # what is left over the member's request, with every candidate gone, per resource of ``keys``
        left = list(map(sub, [sum(col) for col in zip([free.get(k, 0) for k in keys], *rows)], [v for _, v in need]))
        if min(left) < 0:
            return None
        if self.budgets:
            violating, fine = self.split_by_budget(cands, list(self.left))
            order = violating + fine
            rows = [vecs[p.uid] for p in order]
        else:  # split_by_budget without budgets: none violates, the order is kept
            violating, order = [], cands
        victims: list[PodInfo] = []
        if len(left) == 3:  # the usual cpu, memory, pods: the same test, unrolled
            x, y, z = left
            for p, (a, b, c) in zip(order, rows):
                if a <= x and b <= y and c <= z:
                    x -= a
                    y -= b
                    z -= c
                else:
                    victims.append(p)
            return victims, violating
        for p, r in zip(order, rows):
            if all(map(le, r, left)):
                left = list(map(sub, left, r))
            else:
                victims.append(p)
        return victims, violating

    def _fits(self, m: PodInfo, spec: Any, i: int) -> bool:
        if m.required_pod_affinity and i not in spec.eligible:
            return False
        return self.room.fits(spec, i)

    def choose(self, m: PodInfo) -> _Choice | None:
        """The best node for ``m`` (``pickOneNodeForPreemption``) among the first
        :func:`candidate_nodes` nodes in node order that can take it after preemption, and every
        node this selection changed. The choices found are kept per member spec and computed again
        only for nodes whose room, or whose budgets' or gangs' counts, changed since."""
        room = self.room
        spec = room.spec_for(m)
        skey = spec_key(m, room.anti_active, room.spread is not None)
        eligible = spec.eligible
        pool = self.pools.get(skey)
        if pool is None or (pool.eligible is not eligible and pool.eligible != eligible):
            pool = self.pools[skey] = _Pool(eligible)
        want = candidate_nodes(len(self.table.nodes))
        again = set(self.touched[pool.log_at:])
        pool.log_at = len(self.touched)
        for i in sorted(again):
            if i in pool.allowed:
                self._evaluate(pool, m, i)
        while len(pool.choices) < want and pool.pos < len(eligible):
            i = eligible[pool.pos]
            pool.pos += 1
            if i not in pool.choices and i not in again:
                self._evaluate(pool, m, i)
        return pool.best()

    def _evaluate(self, pool: "_Pool", m: PodInfo, i: int) -> None:
        c = self.on_node(m, i)
        if c is None:
            pool.choices.pop(i, None)
        else:
            pool.choices[i] = c
            heapq.heappush(pool.heap, (c.key, i))

    def take(self, m: PodInfo, c: _Choice) -> bool:
        """Remove ``c``'s victims and place ``m`` on its node; False (nothing changed) when ``m``
        does not fit there after all (the room moved)."""
        room = self.room
        mark = room.mark()
        alone = [p for p in c.alone if p.uid not in self.alone and self.gang_of.get(p.uid) not in self.whole]
        per_gang: dict[tuple[str, str], int] = {}
        for p in alone:
            gk = self.gang_of.get(p.uid)
            if gk is not None:
                per_gang[gk] = per_gang.get(gk, 0) + 1
        gangs = sorted(set(c.gangs) | {gk for gk, n in per_gang.items()
                                       if self.alone_per_gang.get(gk, 0) + n > self.slack[gk]})
        gangs = [gk for gk in gangs if gk not in self.whole]
        alone = [p for p in alone if self.gang_of.get(p.uid) not in gangs]
        for gk in gangs:
            self._take_gang(gk)
        for p in alone:
            room.vacate(p, c.slot)
        spec = room.spec_for(m)
        if not self._fits(m, spec, c.slot):
            room.rollback(mark)
            raise _Stale  # the room moved under a cached choice: the caller falls back
        for p in alone:
            self.alone[p.uid] = (p, c.slot)
            gk = self.gang_of.get(p.uid)
            if gk is not None:
                self.alone_per_gang[gk] = self.alone_per_gang.get(gk, 0) + 1
                for i in self.gang_slots[gk]:
                    self._stale(i)
            self._charge(p)
        room.occupy(m, spec.req, spec.ports, c.slot)
        self.plan[m.uid] = c.slot
        self._touch(c.slot)
        return True

    def _take_gang(self, gk: tuple[str, str]) -> None:
        self.whole.add(gk)
        for p, i in self.gang_pods[gk]:
            if p.uid in self.alone:
                del self.alone[p.uid]  # already off the room and counted
            else:
                self.room.vacate(p, i)
                self._charge(p)
            self._touch(i)
        self.alone_per_gang[gk] = 0

    # -- reprieve against the plan
    def units(self) -> list[_Unit]:
        """Victim units in reprieve order: PDB-violating first, then the others, each most
        important first (``SelectVictimsOnNode``'s reprieve order)."""
        units = [_Unit([pi], None) for pi in self.alone.values()]
        units += [_Unit(list(self.gang_pods[gk]), gk) for gk in sorted(self.whole)]
        return _reprieve_order(self, units)

    def put_back(self, pods: Sequence[tuple[PodInfo, int]]) -> bool:
        """Put ``pods`` back on the room; keep it (True) when every member planned on their nodes
        (every planned member while anti-affinity or topology spread is tracked: a pod there can
        matter to a whole topology domain) still fits its planned node, in plan order, else undo
        (False)."""
        room = self.room
        mark = room.mark()
        nodes = {i for _, i in pods}
        everywhere = room.anti_active or room.spread is not None  # a pod can matter to a whole domain
        displaced = [(uid, i) for uid, i in self.plan.items() if everywhere or i in nodes]
        members = self._members
        for uid, i in displaced:
            room.vacate(members[uid], i)
        for p, i in pods:
            room.charge(p, i)
        for uid, i in displaced:
            m = members[uid]
            spec = room.spec_for(m)
            if not self._fits(m, spec, i):
                room.rollback(mark)
                return False
            room.occupy(m, spec.req, spec.ports, i)
        return True

    def reprieve(self) -> None:
        """Offer every victim unit a reprieve against the plan (:meth:`put_back`); once more while
        one was reprieved when topology spread is tracked (adding a pod can lower another node's
        skew, so a refusal is not final)."""
        _reprieve_units(self, self.put_back, repeat=self.room.spread is not None)

    def confirmed(self) -> bool:
        """The planner's ``pack`` places minMember on the room without the victims: the room with
        the planned members taken off again (:meth:`Room.vacate`), which is the room
        ``Snapshot.room`` builds without the victims (tested)."""
        room = self.room
        mark = room.mark()
        members = {m.uid: m for m in self.plannable}
        for uid, i in self.plan.items():
            room.vacate(members[uid], i)
        ok = len(pack(room, self.plannable, self.needed)) >= self.needed
        room.rollback(mark)
        return ok

    def victims(self) -> list[tuple[PodInfo, int, tuple[str, str] | None]]:
        out = [(p, i, None) for p, i in self.alone.values()]
        out += [(p, i, gk) for gk in self.whole for p, i in self.gang_pods[gk]]
        return out


def _reprieve_units(sel: _Selection, back: Callable[[Sequence[tuple[PodInfo, int]]], bool], repeat: bool) -> None:
    """Offer each victim unit in reprieve order to ``back`` (puts pods back and keeps them when the
    group still fits, else undoes): a pod alone, or a gang taken whole (all of it, else as many of
    its members as fit, kept only while the rest stays within the gang's slack). With ``repeat``,
    again until a round reprieves none."""
    while True:
        changed = False
        for u in sel.units():
            if u.gang is None:
                p, _ = u.pods[0]
                if back(u.pods):
                    del sel.alone[p.uid]
                    gk = sel.gang_of.get(p.uid)
                    if gk is not None:
                        sel.alone_per_gang[gk] -= 1
                    changed = True
                continue
            if back(u.pods):
                sel.whole.discard(u.gang)
                changed = True
                continue
            mark = sel.room.mark()
            taken = [pi for pi in sorted(u.pods, key=lambda pi: more_important(pi[0])) if not back([pi])]
            if len(taken) <= sel.slack[u.gang]:
                sel.whole.discard(u.gang)
                for p, i in taken:
                    sel.alone[p.uid] = (p, i)
                sel.alone_per_gang[u.gang] = len(taken)
                changed = True
            else:
                sel.room.rollback(mark)
        if not (changed and repeat):
            return


def _reprieve_order(sel: _Selection, units: list[_Unit]) -> list[_Unit]:
    first = {id(u): min(more_important(p) for p, _ in u.pods) for u in units}
    units.sort(key=lambda u: first[id(u)])
    left = [b.disruptions_allowed for b in sel.budgets]
    bad: set[int] = set()
    for u in units:
        violating, _ = sel.split_by_budget(sorted((p for p, _ in u.pods), key=more_important), left)
        if violating:
            bad.add(id(u))
    return [u for u in units if id(u) in bad] + [u for u in units if id(u) not in bad]


class _Candidates:
    """The candidates (rule 1) of one call, by node slot: ``get(i)`` node ``i``'s (a list the
    selection may sort), :meth:`pairs` all of them as ``(pod, slot)``, ``count`` how many. Built
    from a list (the from-scratch path) or read node by node from a
    :class:`~cogate.controller.planning.planstate.BoundView` when first asked (the fast path)."""

    def __init__(self, count: int, by_node: dict[int, list[PodInfo]],
                 read: Callable[[int], list[PodInfo]] | None = None, slots: Iterable[int] = ()) -> None:
        self.count = count
        self._by_node = by_node
        self._read = read
        self._slots = sorted(slots) if read is not None else sorted(by_node)

    @classmethod
    def listed(cls, candidates: Sequence[tuple[PodInfo, int]]) -> _Candidates:
        by_node: dict[int, list[PodInfo]] = {}
        for p, i in candidates:
            by_node.setdefault(i, []).append(p)
        return cls(len(candidates), by_node)

    def get(self, i: int) -> list[PodInfo] | None:
        ps = self._by_node.get(i)
        if ps is None and self._read is not None:
            ps = self._by_node[i] = self._read(i)
        return ps

    def pairs(self) -> list[tuple[PodInfo, int]]:
        return [(p, i) for i in self._slots for p in (self.get(i) or ())]


def _lent(room: Room, group: GroupRequest) -> Room:
    """``room`` with the nominations below the group's lowest member priority lent (as ``planner.Pass``)."""
    if room.nominations:
        room.lend(min((m.priority for m in group.members), default=0))
        room.commit()
    return room


def _lent_room(snapshot: Snapshot, promised: Sequence[Promise], group: GroupRequest,
               without: Iterable[str] = ()) -> Room:
    """The room the planner plans ``group`` on (``planner.Pass``: bound pods, room promised,
    nominations below the group's lowest member priority lent), without the pods ``without``."""
    return _lent(snapshot.room(promised, frozenset(without)), group)


def _base_room(table: NodeTable, free: Sequence[dict[str, int]], ports: Sequence[list[HostPort]],
               promised: Sequence[Promise], group: GroupRequest) -> Room:
    """The same room on free room already charged with the bound pods (``free``/``ports`` per slot,
    read only: :class:`~cogate.controller.planning.capacity.Room` copies a node's entry before changing it),
    as the incremental planner builds its rooms (``Room(base=...)``)."""
    room = Room(table, False, empty=False, base=(list(free), list(ports)))
    reserve_room(room, table.index, promised)
    return _lent(room, group)


def _fast_path(view: BoundView | None, group: GroupRequest, snapshot: Snapshot | None) -> bool:
    """The view's free room can stand for the bound pods: no required pod anti-affinity on a
    bound pod or a member, no hard topology spread, no required pod affinity on a member (those
    read where every pod sits, so the selection builds a :class:`Snapshot` then)."""
    return (view is not None and snapshot is None and not view.anti_active and not members_anti([group])
            and not members_spread([group]) and not any(m.required_pod_affinity for m in group.members))


def select_victims(group: GroupRequest, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                   promised: Sequence[Promise], budgets: Sequence[Budget], gangs: Sequence[Gang],
                   config: PlannerConfig = PlannerConfig(), *,
                   snapshot: Snapshot | None = None, view: BoundView | None = None) -> Preemption | NoPreemption:
    """The pods to preempt so that ``group`` places minMember, or why none (module docstring,
    rules 1 to 7).

    ``nodes``: every node; ``pods``: as ``planner.decide`` takes them (bound non-terminal pods,
    members included; unbound pods with a nomination become room promised only through
    ``promised``); ``promised``: the room promised to others (``capacity.promised_room``: kept
    reservations and nominations), which victims cannot free; ``budgets``: every
    PodDisruptionBudget (:func:`budget_info`); ``gangs``: the other PodGroups (:class:`Gang`), whose
    bound members are taken alone only within their slack. ``snapshot``: a
    :class:`~cogate.controller.planning.capacity.Snapshot` of exactly these ``nodes`` and ``pods`` built
    already (e.g. the planning pass's), whose ``anti_active``/``spread_active`` cover the group's
    members; it is only read.

    ``view``: the incremental planner's nodes and bound pods
    (:meth:`PlanningState.bound_view <cogate.controller.planning.planstate.PlanningState.bound_view>`);
    ``nodes`` and ``pods`` are then ignored (the view's stand for them). Without required pod
    anti-affinity (on a bound pod or a member), hard topology spread or required pod affinity
    (members), the rooms are built on its free room (a copy of the list of nodes, no pass over
    the pods) and only the candidates of the nodes the selection looks at are read; the room
    with every candidate gone adds, per node, the requests of the priorities below the group's
    (``BoundView.by_priority``) and charges back the few pods that are not candidates. Otherwise
    a :class:`Snapshot` of the view's nodes and pods is built. The answer is the one the call
    without ``view`` gives on ``view.nodes`` and ``view.pods`` (property test
    ``tests/unit/controller/preemption/test_preemption_props.py``). With budgets, the candidates of every node are read
    once (which nodes a budget covers); the exhaustive fallback reads them all too.

    Never raises on well-typed records; deterministic for a given input.
    """
    gate = config.gate_name
    ms = classify(group, gate)
    needed = group.min_member - len(ms.bound)
    me = f"PodGroup {group.namespace}/{group.name}"
    if needed <= 0:
        return NoPreemption(Reason.FITS_WITHOUT_PREEMPTION, f"{me} has {len(ms.bound)} of {group.min_member} bound")
    if len(ms.bound) + len(ms.plannable) < group.min_member:
        return NoPreemption(Reason.NOT_ENOUGH_MEMBERS,
                            f"{me}: {len(ms.bound)} bound and {len(ms.plannable)} plannable of {group.min_member}")
    held = held_reason(ms.gated, config)
    if held:
        return NoPreemption(Reason.HELD, f"{me} preempts nothing: {held}")
    priority = min(m.priority for m in ms.gated)
    fast = view is not None and _fast_path(view, group, snapshot)
    if view is not None and not fast and snapshot is None:
        nodes, pods = view.nodes, view.pods
    if view is not None and fast:
        table = view.table
        room = _base_room(table, view.free, view.ports, promised, group)
    else:
        if snapshot is None:
            snapshot = Snapshot(nodes, pods, members_anti([group]), members_spread([group]))
        table = snapshot.table
        room = _lent_room(snapshot, promised, group)
    plan0 = pack(room, ms.plannable, needed)
    if len(plan0) >= needed:
        return NoPreemption(Reason.FITS_WITHOUT_PREEMPTION,
                            f"{me} fits {len(ms.bound) + len(plan0)} of {group.min_member} without preemption")
    never = [m.name for m in ms.plannable if m.preemption_policy == "Never"]
    if never:
        return NoPreemption(Reason.PREEMPTION_POLICY_NEVER,
                            f"{me} preempts nothing: preemptionPolicy Never on {name_list(sorted(never))}")

    own = {m.uid for m in group.members}
    key = (group.namespace, group.name)
    gang_min = {(g.namespace, g.name): g.min_member for g in gangs if (g.namespace, g.name) != key}
    gang_pods: dict[tuple[str, str], list[tuple[PodInfo, int]]] = {}
    index = table.index
    if view is not None and fast:
        for gk in gang_min:
            if gk[1]:  # member_key: a pod-group label that is not empty, a pod not being deleted
                ps = [(p, index[p.node_name]) for p in view.by_group(*gk) if not p.deleting and p.node_name in index]
                if ps:
                    gang_pods[gk] = ps
    elif gang_min:
        assert snapshot is not None
        for p, i in snapshot.bound:
            gk = member_key(p)
            if gk in gang_min:
                gang_pods.setdefault(gk, []).append((p, i))
    untouchable = {gk for gk, ps in gang_pods.items() if max(p.priority for p, _ in ps) >= priority}
    # Never a member of this group, even one the members' cache does not show yet (the label is
    # read only in the group's namespace), nor of a gang that may not be touched.
    ns, name = key

    def is_candidate(p: PodInfo) -> bool:
        if p.priority >= priority or p.deleting or p.uid in own:
            return False
        g = p.labels.get(POD_GROUP_LABEL)
        return g is None or ((p.namespace != ns or g != name) and (p.namespace, g) not in untouchable)

    gone_room: Callable[[], Room]
    if view is not None and fast:
        candidates, gone_room = _gone_from_view(view, is_candidate, priority, own, key, untouchable, promised, group)
    else:
        assert snapshot is not None
        listed = [(p, i) for p, i in snapshot.bound if is_candidate(p)]
        candidates = _Candidates.listed(listed)
        without = frozenset(p.uid for p, _ in listed)
        gone_room = lambda: _lent_room(snapshot, promised, group, without)  # noqa: E731
    if not candidates.count:
        return NoPreemption(Reason.NO_LOWER_PRIORITY_PODS,
                            f"{me} (priority {priority}) fits {len(ms.bound) + len(plan0)} of {group.min_member} "
                            f"and no bound pod has a lower priority")
    gang_pods = {gk: ps for gk, ps in gang_pods.items() if gk not in untouchable}
    slack = {gk: len(ps) - gang_min[gk] for gk, ps in gang_pods.items()}

    all_gone: Room | None = None

    def does_not_fit() -> NoPreemption | None:
        """Rule 3: DoesNotFitEvenWithPreemption when ``pack`` does not place minMember with every
        candidate gone (builds that room, kept for the exhaustive fallback)."""
        nonlocal all_gone
        all_gone = gone_room()
        mark_all = all_gone.mark()
        best = pack(all_gone, ms.plannable, needed)
        all_gone.rollback(mark_all)
        if len(best) >= needed:
            return None
        return NoPreemption(Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION,
                            f"{me} fits {len(ms.bound) + len(best)} of {group.min_member} even with all "
                            f"{plural(candidates.count, 'pod')} of priority below {priority} gone: preempting nothing")

    # On the fast path with one member spec, pack places min(members, the sum over nodes of how
    # many fit each), which only grows with the room: a confirmed plan proves rule 3's check passes,
    # so it is made only when no plan is confirmed (the same answer, without the room of every
    # candidate gone). Otherwise it comes first, as kube-scheduler's "fits with all removed".
    later = fast and len({spec_key(m, False, False) for m in ms.plannable}) == 1
    if not later:
        no = does_not_fit()
        if no is not None:
            return no

    sel = _Selection(group, table, room, ms.plannable, needed, candidates, budgets, gang_pods, slack)
    sel.plan = dict(plan0)  # pack left its best attempt applied: members in free room
    plan_names: dict[str, str] | None = None
    try:
        for m in ms.plannable:
            if len(sel.plan) >= needed:
                break
            if m.uid in sel.plan:
                continue
            c = sel.choose(m)
            if c is not None:
                sel.take(m, c)
    except _Stale:
        sel.plan = {}
    if len(sel.plan) >= needed:
        sel.reprieve()
        if sel.confirmed():
            plan_names = {uid: table.nodes[i].name for uid, i in sel.plan.items()}
    if plan_names is None:
        if later:
            no = does_not_fit()
            if no is not None:
                return no
        assert all_gone is not None
        sel, plan_names = _exhaustive(group, table, ms.plannable, needed, candidates, budgets, gang_pods, slack,
                                      all_gone)
    return _answer(sel, plan_names, priority, table, budgets, me)


def _gone_from_view(view: BoundView, is_candidate: Callable[[PodInfo], bool], priority: int, own: set[str],
                    key: tuple[str, str], untouchable: set[tuple[str, str]], promised: Sequence[Promise],
                    group: GroupRequest) -> tuple[_Candidates, Callable[[], Room]]:
    """The candidates read from ``view`` node by node (counted from the per-priority sums), and a
    function building the room with every one of them gone
    (the fast path of :func:`select_victims`): per node, the requests of the pods below
    ``priority`` not being deleted (``BoundView.by_priority``) added back, the pods among them that
    are not candidates (the group's own, members of untouchable gangs: found by uid and pod-group
    label) charged again, host ports read again on the nodes that have some; then the room
    promised, lent as ``planner.Pass`` lends it. The room ``Snapshot.room`` builds without them."""
    table = view.table
    index = table.index
    excluded: dict[str, tuple[PodInfo, int]] = {}

    def exclude(ps: Iterable[PodInfo]) -> None:
        for p in ps:
            if p.priority < priority and not p.deleting and p.node_name in index and not is_candidate(p):
                excluded[p.uid] = (p, index[p.node_name])

    exclude(view.by_group(*key))
    for gk in untouchable:
        exclude(view.by_group(*gk))
    exclude(p for p in (view.pod(uid) for uid in own) if p is not None)
    by_priority = view.by_priority_all()
    count = 0
    slots: list[int] = []
    for i, at in enumerate(by_priority):
        if at:
            n = sum(t["pods"] for q, t in at.items() if q < priority)
            if n:
                count += n
                slots.append(i)
    count -= len(excluded)

    def gone() -> Room:
        free = list(view.free)
        ports = list(view.ports)
        for i in slots:
            f = dict(free[i])
            for q, t in by_priority[i].items():
                if q < priority:
                    for k, v in t.items():
                        f[k] = f.get(k, 0) + v
            free[i] = f
            if ports[i]:
                ports[i] = [hp for p in view.on_node(i) if not is_candidate(p) for hp in p.host_ports]
        for p, i in excluded.values():
            f = free[i]  # a copy: the pod is below the priority, so its node was copied above
            for k, v in req_with_pod(p.requests).items():
                f[k] = f.get(k, 0) - v
        room = Room(table, False, empty=False, base=(free, ports))
        reserve_room(room, index, promised)
        return _lent(room, group)

    candidates = _Candidates(count, {}, lambda i: [p for p in view.on_node(i) if is_candidate(p)], slots)
    return candidates, gone


def _exhaustive(group: GroupRequest, table: NodeTable, plannable: list[PodInfo],
                needed: int, candidates: _Candidates, budgets: Sequence[Budget],
                gang_pods: Mapping[tuple[str, str], list[tuple[PodInfo, int]]], slack: Mapping[tuple[str, str], int],
                room: Room) -> tuple[_Selection, dict[str, str]]:
    """The fallback (module docstring): every candidate removed (``room``), then each unit
    reprieved in order while ``pack`` still places minMember; the plan is ``pack``'s."""
    sel = _Selection(group, table, room, plannable, needed, candidates, budgets, gang_pods, slack)
    for p, i in candidates.pairs():
        if sel.gang_of.get(p.uid) is None:
            sel.alone[p.uid] = (p, i)
    sel.whole = set(gang_pods)

    def still_fits() -> bool:
        mark = room.mark()
        ok = len(pack(room, plannable, needed)) >= needed
        room.rollback(mark)
        return ok

    def back(pods: Sequence[tuple[PodInfo, int]]) -> bool:
        mark = room.mark()
        for p, i in pods:
            room.charge(p, i)
        if still_fits():
            return True
        room.rollback(mark)
        return False

    _reprieve_units(sel, back, repeat=True)  # pack is a heuristic: a refusal is not final until nothing changes
    plan = pack(room, plannable, needed)
    kept = list(plan)[:needed]  # the first placed (with topology spread a prefix of the placement stays valid)
    return sel, {uid: table.nodes[plan[uid]].name for uid in kept}


def _answer(sel: _Selection, plan: dict[str, str], priority: int, table: NodeTable, budgets: Sequence[Budget],
            me: str) -> Preemption:
    nodes = table.nodes
    raw = sorted(sel.victims(), key=lambda v: more_important(v[0]))
    left = [b.disruptions_allowed for b in budgets]
    violating, _ = sel.split_by_budget([p for p, _, _ in raw], left)
    bad = {p.uid for p in violating}
    victims = sorted((Victim(p, nodes[i].name, p.uid in bad, gk) for p, i, gk in raw),
                     key=lambda v: (v.node, v.pod.namespace, v.pod.name, v.pod.uid))
    gangs = tuple(sorted(sel.whole))
    top = max((v.pod.priority for v in victims), default=0)
    on = sorted({v.node for v in victims})
    names = [f"{v.pod.namespace}/{v.pod.name}" for v in victims]
    message = (f"preempting {plural(len(victims), 'pod')} ({name_list(names)}) of priority <= {top} on "
               f"{plural(len(on), 'node')} {name_list(on)} to place {me}, priority {priority}")
    if gangs:
        message += f"; whole gangs: {name_list([f'{ns}/{n}' for ns, n in gangs])}"
    if bad:
        message += f"; {plural(len(bad), 'victim')} beyond a PodDisruptionBudget"
    return Preemption(tuple(victims), dict(plan), priority, gangs, message)
