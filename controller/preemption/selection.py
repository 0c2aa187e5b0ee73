"""The choice of victims node by node (pure), for :func:`cogate.controller.preemption.victims.select_victims`
(its module docstring, rules 5 and 6): kube-scheduler DefaultPreemption's ``SelectVictimsOnNode``
(all candidates off, then reprieved one by one, the PodDisruptionBudget-violating first, each most
important first) and ``pickOneNodeForPreemption`` (which node's victims are best) over the planner's
room (:class:`~cogate.controller.planning.room.Room`), gangs whole or within their slack;
the reprieve of every victim unit against the plan, the check that ``pack`` confirms it, and the
exhaustive fallback (:func:`exhaustive`).

:class:`Selection` is the state of one call; its helpers (``_Choice``, ``_Pool``, ``_Unit``) are
this module's own. Units: requests in the units of :mod:`cogate.controller.model.resources`.
"""

from __future__ import annotations

import heapq
import math
from operator import le, sub
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cogate.controller.planning.capacity import pack
from cogate.controller.planning.room import NodeTable, Room, req_with_pod
from cogate.controller.planning.filters import spec_key
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.preemption.budgets import Budget
from cogate.controller.preemption.candidates import Candidates

__all__ = ["more_important", "candidate_nodes", "MIN_CANDIDATE_NODES_PERCENTAGE", "MIN_CANDIDATE_NODES_ABSOLUTE",
           "Selection", "Stale", "exhaustive"]

#: kube-scheduler DefaultPreemptionArgs defaults (``calculateNumCandidates``).
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
#: kube-scheduler ``pickOneNodeForPreemption`` adds ``MaxInt32 + 1`` to each priority it sums, so
#: that negative priorities do not make more victims look cheaper.
_PRIORITY_OFFSET = 2**31


def more_important(p: PodInfo) -> tuple[Any, ...]:
    """Sort key, most important first (kube-scheduler ``util.MoreImportantPod``: higher priority,
    then earlier start; ``GetPodStartTime`` takes a pod without ``status.startTime`` as starting
    now, so it comes last), then namespace, name, uid for determinism."""
    return (-p.priority, p.started or math.inf, p.namespace, p.name, p.uid)


def candidate_nodes(n_nodes: int) -> int:
    """How many nodes kube-scheduler's DefaultPreemption compares per preemptor
    (``calculateNumCandidates``: 10% of the nodes, at least 100, at most all)."""
    return min(n_nodes, max(n_nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE))


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


class Stale(Exception):
    """A cached choice no longer places its member (a change the cache did not see)."""


class _Unit:
    """A victim unit: one pod taken alone, or a gang taken whole (all its bound members)."""

    __slots__ = ("pods", "gang")

    def __init__(self, pods: list[tuple[PodInfo, int]], gang: tuple[str, str] | None) -> None:
        self.pods = pods
        self.gang = gang


class Selection:
    """The state of one :func:`~cogate.controller.preemption.victims.select_victims` call after
    the early answers (rules 1 to 3): the room as victims go and members are placed on it."""

    def __init__(self, group: GroupRequest, table: NodeTable, room: Room, plannable: list[PodInfo], needed: int,
                 candidates: Candidates, budgets: Sequence[Budget],
                 gang_pods: Mapping[tuple[str, str], list[tuple[PodInfo, int]]],
                 slack: Mapping[tuple[str, str], int],
                 unit_priority: Mapping[tuple[str, str], int] | None = None) -> None:
        self.group = group
        #: gang key -> the unit's priority where it is not its pods' highest (a native ``all`` group:
        #: its PodGroup's, :mod:`cogate.controller.preemption.units`)
        self.unit_priority = unit_priority or {}
        #: native ``all`` groups of which a node needed only part: key -> the fewest pods needed
        self.half: dict[tuple[str, str], int] = {}
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
        for gk in gangs:
            if gk in self.unit_priority and per_gang[gk] < len(self.gang_pods[gk]):
                self.half[gk] = min(self.half.get(gk, per_gang[gk]), per_gang[gk])
        alone = [p for p in victims if self.gang_of.get(p.uid) not in gangs]
        units: list[tuple[int, float, bool]] = [(p.priority, p.started or math.inf, p.uid in bad) for p in alone]
        pods = len(alone)
        for gk in gangs:
            ps = [p for p, _ in self.gang_pods[gk]]
            pods += sum(1 for p in ps if p.uid not in self.alone)
            units.append((self.unit_priority.get(gk, max(p.priority for p in ps)), min(p.started or math.inf for p in ps),
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
            raise Stale  # the room moved under a cached choice: the caller falls back
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


def _reprieve_units(sel: Selection, back: Callable[[Sequence[tuple[PodInfo, int]]], bool], repeat: bool) -> None:
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


def _reprieve_order(sel: Selection, units: list[_Unit]) -> list[_Unit]:
    first = {id(u): min(more_important(p) for p, _ in u.pods) for u in units}
    units.sort(key=lambda u: first[id(u)])
    left = [b.disruptions_allowed for b in sel.budgets]
    bad: set[int] = set()
    for u in units:
        violating, _ = sel.split_by_budget(sorted((p for p, _ in u.pods), key=more_important), left)
        if violating:
            bad.add(id(u))
    return [u for u in units if id(u) in bad] + [u for u in units if id(u) not in bad]


def exhaustive(group: GroupRequest, table: NodeTable, plannable: list[PodInfo],
               needed: int, candidates: Candidates, budgets: Sequence[Budget],
               gang_pods: Mapping[tuple[str, str], list[tuple[PodInfo, int]]], slack: Mapping[tuple[str, str], int],
               room: Room, unit_priority: Mapping[tuple[str, str], int] | None = None
               ) -> tuple[Selection, dict[str, str]]:
    """The fallback (:mod:`cogate.controller.preemption.victims` docstring): every candidate
    removed (``room``), then each unit reprieved in order while ``pack`` still places minMember;
    the plan is ``pack``'s."""
    sel = Selection(group, table, room, plannable, needed, candidates, budgets, gang_pods, slack, unit_priority)
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
