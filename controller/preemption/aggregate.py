"""A group with ``spec.minResources`` preempts for all of it or for nothing (pure; issue 37 kind 9;
docs/semantics.md, "minResources").

:func:`~cogate.controller.preemption.victims.select_victims` chooses victims so that minMember
members fit. For a group with ``spec.minResources`` (the Spark shape: ``minMember: 1``, the
executors only in minResources) that is not enough: with only the driver's room freed, the planner
still refuses the release (the rest of minResources does not fit), so those victims would go in
vain. :func:`widen` takes the answer for the members and, when the rest of minResources does not
fit the room left once its victims are gone and its members placed (summed over the nodes some
present member is eligible for, as the planner's check: :mod:`cogate.controller.model.minresources`),
adds victims among the remaining candidates on those nodes:

* **Units**: a candidate that is a member of a gang the selection may touch (a cogate gang, a
  Kubernetes ``all`` group) is taken with its whole gang (never a gang left below its minimum;
  the slack a gang has is not used here), any other candidate alone. Every candidate already
  passed the selection's rules (lower priority, protected namespaces, untouchable gangs).
* **Order**: units no PodDisruptionBudget covers first (kube-scheduler prefers fewer budget
  violations), each part least important first (``MoreImportantPod`` reversed: lowest priority,
  then latest start), added until the rest fits; victims beyond a budget are marked; then every
  added unit, most important first, is offered a reprieve (put back while the rest still fits).
* **The rest alone**: a group whose minMember members fit the free room but whose rest does not
  (the planner's ``InsufficientCapacity`` with ``min_resources_short``) is given victims for the
  rest alone by the same steps (the answer for its members has none).
* **Or nothing**: when the rest does not fit even with every remaining candidate on those nodes
  gone, the answer is :class:`~cogate.controller.preemption.victims.NoPreemption`
  (``DoesNotFitEvenWithPreemption``): no victim at all, not even the members'.

Units: requests as :mod:`cogate.controller.model.resources` (CPU millicores, bytes, counts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cogate.controller.model import minresources as minres
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.planning.explanations import name_list, plural
from cogate.controller.planning.members import Members, eligible_nodes
from cogate.controller.planning.room import NodeTable, Room, req_with_pod
from cogate.controller.preemption.budgets import Budget
from cogate.controller.preemption.candidates import Candidates
from cogate.controller.preemption.selection import more_important

__all__ = ["widen", "rest_short", "Widened", "nothing_text"]

#: A victim unit: its pods with their node slots, and the gang it is (None: a pod alone).
Unit = tuple[list[tuple[PodInfo, int]], "tuple[str, str] | None"]


def rest_short(room: Room, group: GroupRequest, members: Members,
               placed: Sequence[PodInfo]) -> tuple[minres.Short, ...]:
    """The planner's minResources check on ``room`` with ``placed`` members on it: the resources
    the rest of ``group``'s ``spec.minResources`` lacks (empty without minResources)."""
    if group.min_resources is None:
        return ()
    wanted = minres.asked(dict(group.min_resources), group.min_member)
    counted = [req_with_pod(m.requests) for m in members.bound if not m.terminal]
    counted += [req_with_pod(m.requests) for m in placed]
    nodes = eligible_nodes(room, [m for m in members.present if not m.terminal])
    return minres.shortfall(wanted, counted, minres.free_beyond(room.free, sorted(nodes), wanted))


def _units(candidates: Candidates, taken: set[str], nodes: set[int],
           gang_pods: Mapping[tuple[str, str], Sequence[tuple[PodInfo, int]]], budgets: Sequence[Budget]) -> list[Unit]:
    """The remaining candidates on ``nodes`` as units: those no PodDisruptionBudget covers first,
    each part least important first."""
    gang_of = {p.uid: gk for gk, ps in gang_pods.items() for p, _ in ps}
    units: list[Unit] = []
    seen: set[tuple[str, str]] = set()
    for p, i in candidates.pairs():
        if p.uid in taken or i not in nodes:
            continue
        gk = gang_of.get(p.uid)
        if gk is None:
            units.append(([(p, i)], None))
        elif gk not in seen and not any(q.uid in taken for q, _ in gang_pods[gk]):
            seen.add(gk)
            units.append((list(gang_pods[gk]), gk))
    def guarded(u: Unit) -> bool:
        return any(b.matches(p) and p.name not in b.disrupted for p, _ in u[0] for b in budgets)

    units.sort(key=lambda u: min(more_important(p) for p, _ in u[0]), reverse=True)
    return sorted(units, key=guarded)  # stable: units no PodDisruptionBudget covers first


@dataclass(frozen=True)
class Widened:
    """What :func:`widen` adds: ``victims`` as ``(pod, node name, beyond a PodDisruptionBudget,
    gang taken whole or None)``, most important first; ``gangs``: the gangs taken whole; ``text``:
    the clause for the message."""

    victims: tuple[tuple[PodInfo, str, bool, tuple[str, str] | None], ...]
    gangs: frozenset[tuple[str, str]]
    text: str


def widen(group: GroupRequest, members: Members, victims: Sequence[PodInfo], plan: Mapping[str, str],
          candidates: Candidates, gone_room: Callable[[], Room],
          gang_pods: Mapping[tuple[str, str], Sequence[tuple[PodInfo, int]]], table: NodeTable,
          budgets: Sequence[Budget]) -> Widened | tuple[minres.Short, ...] | None:
    """The victims to add to ``victims`` (those chosen for the members, whose ``plan`` maps member
    uid -> node name) for the rest of ``group``'s ``spec.minResources`` (module doc): None when
    none are needed (no minResources, or the rest fits), the resources still short when even every
    remaining candidate on its nodes gone does not make it fit (then nothing is preempted), else
    the :class:`Widened` set. ``gone_room`` builds the room with every candidate gone (the
    selection's); ``gang_pods``: the gangs the selection may touch with their bound members."""
    if group.min_resources is None:
        return None
    room = gone_room()
    taken = {p.uid for p in victims}
    for p, i in candidates.pairs():
        if p.uid not in taken:
            room.charge(p, i)
    plannable = {m.uid: m for m in members.plannable}
    placed = [plannable[uid] for uid in plan if uid in plannable]
    for m in placed:
        spec = room.spec_for(m)
        room.occupy(m, spec.req, spec.ports, table.index[plan[m.uid]])
    if not rest_short(room, group, members, placed):
        return None
    nodes = eligible_nodes(room, [m for m in members.present if not m.terminal])
    added: list[Unit] = []
    for unit in _units(candidates, taken, nodes, gang_pods, budgets):
        for p, i in unit[0]:
            room.vacate(p, i)
        added.append(unit)
        if not rest_short(room, group, members, placed):
            break
    else:
        return rest_short(room, group, members, placed)
    kept = []
    for unit in sorted(added, key=lambda u: min(more_important(p) for p, _ in u[0])):  # reprieve
        mark = room.mark()
        for p, i in unit[0]:
            room.charge(p, i)
        if rest_short(room, group, members, placed):
            room.rollback(mark)
            kept.append(unit)
    return _widened(victims, kept, table, budgets)


def _widened(victims: Sequence[PodInfo], units: Sequence[Unit], table: NodeTable,
             budgets: Sequence[Budget]) -> Widened:
    """``units`` as victims, those beyond a PodDisruptionBudget marked (counted after ``victims``,
    most important first)."""
    left = [b.disruptions_allowed - sum(1 for p in victims if b.matches(p) and p.name not in b.disrupted)
            for b in budgets]
    extra = sorted(((p, i, gk) for pods, gk in units for p, i in pods), key=lambda t: more_important(t[0]))
    out = []
    for p, i, gk in extra:
        over = False
        for j, b in enumerate(budgets):
            if b.matches(p) and p.name not in b.disrupted:
                over = over or left[j] <= 0
                left[j] -= 1
        out.append((p, table.nodes[i].name, over, gk))
    names = [f"{p.namespace}/{p.name}" for p, *_ in out]
    text = f"{plural(len(out), 'more pod')} ({name_list(names)}) for the rest of spec.minResources"
    return Widened(tuple(out), frozenset(gk for _, gk in units if gk is not None), text)


def nothing_text(me: str, shorts: Sequence[minres.Short]) -> str:
    """The ``DoesNotFitEvenWithPreemption`` message of a group whose rest of minResources does not
    fit even with every candidate on its nodes gone."""
    return (f"{me} would place its minMember members, but the rest of spec.minResources "
            f"({minres.short_list(shorts)}) does not fit even with every lower-priority pod on its nodes gone: "
            "preempting nothing")
