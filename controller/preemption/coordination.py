"""Preemptions side by side (pure, issue 37 kinds 1 to 3): which may run at once, when a higher
priority takes over a lower one's room, and the request new members of a standing release preempt for.

The shell (:class:`cogate.controller.preemption.room.Preempting`) keeps one
:class:`~cogate.controller.preemption.inflight.InFlight` record per preempting PodGroup; these rules
say how the records of different groups meet:

- **Concurrent, never overlapping** (kind 1). Preemptions run at once whenever their victims and
  their room do not overlap, as kube-scheduler's asynchronous preemption (KEP-4832) runs the
  preemptions of independent pods concurrently. A selection is made with the room every other
  preemption in flight holds charged (:func:`held_room`: a ``preempting``
  :class:`~cogate.controller.model.records.Promise`, never lent to another group), and its answer is
  not acted on while one of its victims is another preemption's (:func:`clashes`, over
  :func:`claimed`): victims go terminating at once, and a selection made before the watch shows
  them terminating would count them again. So every plan fits together with every other plan
  on the room left once all their victims are gone
  (tests/unit/controller/preemption/test_coordination_props.py). A victim that never terminates
  holds up only the preemption it belongs to, until its deadline
  (:func:`~cogate.controller.preemption.inflight.deadline`).
- **Priority inversion** (kind 2, :func:`takeover`). A group that no selection places on the room
  left by the others' held room may take over the preemptions in flight of **strictly lower**
  priority whose room it needs: their victims count as gone and their held room as free, as
  kube-scheduler's preemptor ignores the nominations of lower-priority pods
  (``addGENominatedPods``: only those of equal or higher priority count). The preemptions taken
  over end (``Superseded``: their nominations cleared, so nothing of the lower gang binds there);
  the new record waits for their victims on its planned nodes as its own.
- **New members of a standing release** (kind 3, :func:`joining_request`). A released group's
  gated members the planner finds no room for (``GroupVerdict.waiting``: a replacement of an
  evicted member, a scale-up, an executor created later) may preempt as an ungated pod of their
  priority would, capped at the group's own priority (its lowest member's), with the same victim
  rules (:func:`~cogate.controller.preemption.victims.select_victims`: another gang never left below
  its minimum, nothing preempted in vain).

Units: requests in the units of :mod:`cogate.controller.model.resources`; times in epoch seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from cogate.controller.model.nativegroups import NativeGroup
from cogate.controller.model.records import NodeInfo, PodInfo, Promise
from cogate.controller.model.verdicts import GroupRequest, PlannerConfig
from cogate.controller.planning.capacity import Snapshot, pack
from cogate.controller.planning.explanations import name_list, plural
from cogate.controller.planning.planner import classify, members_anti, members_spread
from cogate.controller.preemption import inflight
from cogate.controller.preemption.budgets import Budget
from cogate.controller.preemption.candidates import lent_room
from cogate.controller.preemption.victims import Gang, NoPreemption, Preemption, Reason, Victim, select_victims

__all__ = ["TAKEOVER_RECORDS", "claimed", "clashes", "held_room", "joining_request", "joining_targets",
           "Takeover", "takeover", "taken_over_message", "start_takeover", "no_takeover", "Waiting", "Chosen",
           "Choice", "choose"]

#: At most this many lower-priority preemptions are tried for one takeover (each try is one selection).
TAKEOVER_RECORDS = 3


def claimed(records: Iterable[inflight.InFlight]) -> dict[str, str]:
    """Victim uid -> ``"ns/name"`` of the PodGroup whose preemption in flight it is a victim of."""
    return {v.uid: f"{r.namespace}/{r.name}" for r in records for v in r.victims}


def clashes(p: Preemption, taken: Mapping[str, str]) -> list[str]:
    """The victims of ``p`` that another preemption in flight already has (``taken``, from
    :func:`claimed`), as ``"ns/pod (PodGroup ns/g's)"``, sorted; empty: ``p`` may start now."""
    return sorted(f"{v.pod.namespace}/{v.pod.name} (PodGroup {taken[v.pod.uid]}'s)" for v in p.victims
                  if v.pod.uid in taken)


def held_room(records: Iterable[tuple[inflight.InFlight, Sequence[PodInfo]]], gate: str,
              present: Mapping[str, PodInfo] | None = None) -> list[Promise]:
    """The room every record holds (:func:`inflight.holds` over ``(record, its group's live members)``,
    less what its victims still there take: ``present``, uid -> pod), charged for every other
    group's selection (never lent: a ``preempting`` Promise is lent only to its holder)."""
    return [q for rec, members in records for q in inflight.holds(rec, members, gate, present)]


def joining_request(group: GroupRequest, waiting: Sequence[str], gate: str, target: int | None = None
                    ) -> GroupRequest | None:
    """The request a standing release's new members preempt for (kind 3), or None when none waits.

    ``waiting``: the names of the group's gated members the planner found no room for
    (``GroupVerdict.waiting``). The request's members are those, each with its priority capped at
    the group's (the lowest priority among all its members: a new member never preempts above its
    group's); its minMember is ``target`` (default: all of them). The group's own bound members
    are not in it (they are not to be placed) but stay bound pods of the room and are never
    victims (the pod-group label names the group)."""
    names = set(waiting)
    new = [m for m in group.members if m.name in names and m.gated_by(gate) and not m.bound]
    if not new:
        return None
    cap = min(m.priority for m in group.members)
    new = [replace(m, priority=cap) if m.priority > cap else m for m in new]
    return replace(group, members=tuple(new), min_member=len(new) if target is None else target, released=False)


def joining_targets(group: GroupRequest, waiting: Sequence[str], gate: str) -> list[int]:
    """How many of the waiting new members a selection asks for, in order: all of them, then (when
    fewer) the number still missing to minMember (bound members and members ungated now counted,
    at least 1): as many new members placed as preemption can, the gang's minimum first."""
    names = set(waiting)
    gated_waiting = [m for m in group.members if m.name in names and m.gated_by(gate) and not m.bound]
    if not gated_waiting:
        return []
    others = sum(1 for m in group.members if m.name not in names)
    short = max(1, group.min_member - others)
    return [len(gated_waiting)] + ([short] if short < len(gated_waiting) else [])


@dataclass(frozen=True)
class Takeover:
    """A takeover (kind 2): ``taken``, the lower-priority preemptions in flight that end; ``plan``
    member uid -> node; ``victims``, the group's own new victims (may be empty); ``inherited``, the
    victims of ``taken`` still there on the planned nodes (already terminating: the record waits for
    them); ``priority`` the group's; ``message`` one line for a condition or an Event."""

    taken: tuple[inflight.InFlight, ...]
    plan: Mapping[str, str]
    victims: tuple[Victim, ...]
    inherited: tuple[inflight.VictimRef, ...]
    priority: int
    message: str


def takeover(group: GroupRequest, lower: Sequence[inflight.InFlight], nodes: Sequence[NodeInfo],
             pods: Sequence[PodInfo], promised: Sequence[Promise], budgets: Sequence[Budget], gangs: Sequence[Gang],
             config: PlannerConfig = PlannerConfig(), *, protected: frozenset[str] = frozenset(),
             natives: Sequence[NativeGroup] = ()) -> Takeover | None:
    """The takeover that places ``group``, or None (module doc, kind 2).

    ``lower``: preemptions in flight of priorities strictly below the group's (others are ignored);
    ``nodes``, ``pods`` (bound non-terminal pods), ``promised`` (room promised to others, the room
    the preemptions in flight hold included), ``budgets``, ``gangs``, ``config``, ``protected``,
    ``natives`` (Kubernetes' own PodGroups) as
    :func:`~cogate.controller.preemption.victims.select_victims` takes them. The records are tried
    lowest priority first, then the latest started, growing one at a time (at most
    :data:`TAKEOVER_RECORDS`): with theirs victims gone and their held room free, a selection
    (or, when the group then fits without victims, the planner's ``pack``) places minMember. Of the
    records tried, only those with a victim or held room on a planned node are taken (end)."""
    ms = [m for m in group.members if m.gated_by(config.gate_name)]
    if not ms:
        return None
    priority = min(m.priority for m in ms)
    order = sorted((r for r in lower if r.priority < priority), key=lambda r: (r.priority, -r.started, r.namespace,
                                                                               r.name))
    for k in range(1, min(len(order), TAKEOVER_RECORDS) + 1):
        tried = order[:k]
        gone = {v.uid for r in tried for v in r.victims}
        holders = {inflight.holder(r.namespace, r.name) for r in tried}
        rest = [p for p in pods if p.uid not in gone]
        free = [q for q in promised if not (q.preempting and q.holder in holders)]
        found = select_victims(group, nodes, rest, free, budgets, gangs, config, protected=protected, natives=natives)
        if isinstance(found, Preemption):
            return _taken(group, tried, found.plan, found.victims, priority, found.message)
        if found.reason is Reason.FITS_WITHOUT_PREEMPTION:
            plan = _fits(group, nodes, rest, free, config)
            if plan is not None:
                return _taken(group, tried, plan, (), priority, "")
    return None


def _fits(group: GroupRequest, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo], promised: Sequence[Promise],
          config: PlannerConfig) -> dict[str, str] | None:
    """The planner's plan for ``group`` on the room of ``nodes`` and ``pods`` with ``promised``
    charged (lent as the planner lends it), member uid -> node, or None when minMember is not placed."""
    members = classify(group, config.gate_name)
    needed = group.min_member - len(members.bound)
    snapshot = Snapshot(nodes, pods, members_anti([group]), members_spread([group]))
    placed = pack(lent_room(snapshot, promised, group), members.plannable, needed)
    if len(placed) < needed:
        return None
    names = snapshot.table.nodes
    return {uid: names[i].name for uid, i in placed.items()}


def _taken(group: GroupRequest, tried: Sequence[inflight.InFlight], plan: Mapping[str, str],
           victims: Sequence[Victim], priority: int, message: str) -> Takeover | None:
    """The :class:`Takeover` of ``plan``: the records of ``tried`` with a victim or held room on a
    planned node, their victims there, and the message."""
    on = set(plan.values())
    taken = tuple(r for r in tried if on & ({v.node for v in r.victims} | set(r.plan.values())))
    if not taken:
        return None
    inherited = tuple(sorted((v for r in taken for v in r.victims if v.node in on),
                             key=lambda v: (v.node, v.namespace, v.name, v.uid)))
    me = f"PodGroup {group.namespace}/{group.name}"
    whose = name_list([f"PodGroup {r.namespace}/{r.name} (priority {r.priority})" for r in taken])
    nodes = sorted(on)
    took = f"taking over the room {whose} was freeing on {plural(len(nodes), 'node')} {name_list(nodes)}"
    if message:
        message = f"{message}; {took}"
    else:
        message = f"{took} to place {me}, priority {priority}"
    if inherited:
        message += f" ({plural(len(inherited), 'victim')} of theirs still terminating)"
    return Takeover(taken, dict(plan), tuple(victims), inherited, priority, message)


def taken_over_message(record: inflight.InFlight, by: GroupRequest, priority: int, nodes: Iterable[str]) -> str:
    """The ``Superseded`` end of ``record``: who took its room, where."""
    on = sorted(set(nodes) & (set(record.plan.values()) | {v.node for v in record.victims}))
    return (f"PodGroup {by.namespace}/{by.name} (priority {priority}) took over the room this preemption was "
            f"freeing on {plural(len(on), 'node')} {name_list(on)} (a higher priority does not count a lower "
            "one's nominations, as kube-scheduler's preemption); planning again")


def start_takeover(t: Takeover, group: GroupRequest, now: float) -> inflight.InFlight:
    """The record of takeover ``t`` started at ``now``: its own victims (default grace until the
    DELETE answers) and the inherited ones, whose grace is what is left of theirs
    (their record's start + grace - ``now``), so the deadline covers both."""
    rec = inflight.start(group.namespace, group.name, [(v.pod, v.node, None) for v in t.victims], t.plan,
                         group.members, t.priority, t.message, now)
    starts = {v.uid: r.started for r in t.taken for v in r.victims}
    inherited = tuple(replace(v, grace=max(0.0, starts[v.uid] + v.grace - now)) for v in t.inherited)
    refs = tuple(sorted(rec.victims + inherited, key=lambda v: (v.node, v.namespace, v.name, v.uid)))
    return replace(rec, victims=refs, deadline=inflight.deadline(now, refs))


def no_takeover(found: NoPreemption) -> bool:
    """Whether a selection's answer leaves room for a takeover: it found no victims enough
    (``DoesNotFitEvenWithPreemption``, ``NoLowerPriorityPods``), where lower-priority preemptions'
    room might be what the group lacks."""
    return found.reason in (Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION, Reason.NO_LOWER_PRIORITY_PODS)


@dataclass(frozen=True)
class Waiting:
    """A group that may start a preemption this pass: ``key`` ``(namespace, name)``; ``requests``,
    the requests to select for, in order (one, or a standing release's new members at each target:
    :func:`joining_request`); ``joining``: new members of a standing release (kind 3)."""

    key: tuple[str, str]
    requests: tuple[GroupRequest, ...]
    joining: bool = False


@dataclass(frozen=True)
class Chosen:
    """A preemption to start: the ``record`` (held from the next pass on), the ``victims`` to mark
    and delete (a takeover's inherited victims are in the record only: they are terminating), and
    the records ``taken`` over with why (each ends ``Superseded``)."""

    key: tuple[str, str]
    record: inflight.InFlight
    victims: tuple[Victim, ...]
    taken: tuple[tuple[inflight.InFlight, str], ...] = ()


@dataclass
class Choice:
    """:func:`choose`'s answer: the preemptions to ``start`` (in order), the ``notes``
    (``NoPreemption``) of groups whose selection preempted nothing, the groups whose selection chose
    another preemption's victims (``clashed``: key -> the victims named; chosen again next pass,
    once the watch shows them terminating)."""

    start: list[Chosen] = field(default_factory=list)
    notes: dict[tuple[str, str], NoPreemption] = field(default_factory=dict)
    clashed: dict[tuple[str, str], list[str]] = field(default_factory=dict)


#: ``select(request, promised)``: :func:`~cogate.controller.preemption.victims.select_victims` over
#: the cluster the shell reads (nodes, bound pods, budgets, the other gangs), ``promised`` given.
Select = Callable[[GroupRequest, Sequence[Promise]], "Preemption | NoPreemption"]
#: ``take(request, lower, promised)``: :func:`takeover` over the same cluster.
Take = Callable[[GroupRequest, Sequence[inflight.InFlight], Sequence[Promise]], "Takeover | None"]


def choose(waiting: Sequence[Waiting], flying: Mapping[tuple[str, str], tuple[inflight.InFlight, Sequence[PodInfo]]],
           promised: Sequence[Promise], select: Select, take: Take | None, gate: str, now: float,
           limit: int, present: Mapping[str, PodInfo] | None = None) -> Choice:
    """The preemptions to start this pass (module doc), for ``waiting`` in the order given
    (highest priority first), at most ``limit`` groups selected for.

    ``flying``: the preemptions in flight, key -> (record, the group's live members); ``promised``:
    room promised to others (reservations, nominations), to which the room every preemption in
    flight or chosen here holds is added before each selection (less what their victims still
    there and terminating take: ``present``, uid -> pod); ``take``: None disables takeovers.
    A selection whose victims another preemption has is not started (:func:`clashes`); one that
    finds no victims enough may take over lower-priority preemptions (:func:`takeover`), which
    then leave ``flying`` for the rest of the pass."""
    out = Choice()
    live = dict(flying)
    held = list(promised)
    for w in waiting[:limit]:
        others = [live[k] for k in live if k != w.key]
        room = held + held_room(others, gate, present)
        taken = claimed(rec for rec, _ in others)
        found: Preemption | NoPreemption | None = None
        for r in w.requests:
            found = select(r, room)
            if isinstance(found, Preemption) or found.reason is not Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION:
                break
        if found is None:
            continue
        r = w.requests[0] if not isinstance(found, Preemption) else r
        if isinstance(found, Preemption):
            clash = clashes(found, taken)
            if clash:
                out.clashed[w.key] = clash
                continue
            rec = inflight.start(*w.key, [(v.pod, v.node, None) for v in found.victims], found.plan, r.members,
                                 found.priority, _joined(found.message, r, w.joining), now)
            chosen = Chosen(w.key, replace(rec, joining=w.joining), found.victims)
        else:
            chosen = _taking(w, r, found, others, room, taken, take, now)
            if chosen is None:
                out.notes[w.key] = found
                continue
        out.start.append(chosen)
        for rec, _ in chosen.taken:
            live.pop((rec.namespace, rec.name), None)
        live[w.key] = (chosen.record, r.members)
    return out


def _taking(w: Waiting, r: GroupRequest, found: NoPreemption,
            others: Sequence[tuple[inflight.InFlight, Sequence[PodInfo]]], room: Sequence[Promise],
            taken: Mapping[str, str], take: Take | None, now: float) -> Chosen | None:
    """A takeover (kind 2) for a group whose selection found no victims enough, when one places it
    and its own victims are no other preemption's; else None."""
    if take is None or w.joining or not no_takeover(found):
        return None
    t = take(r, [rec for rec, _ in others], room)
    if t is None:
        return None
    gone = {v.uid for rec in t.taken for v in rec.victims}
    if any(v.pod.uid in taken and v.pod.uid not in gone for v in t.victims):
        return None
    rec = start_takeover(t, r, now)
    return Chosen(w.key, rec, t.victims,
                  tuple((x, taken_over_message(x, r, t.priority, t.plan.values())) for x in t.taken))


def _joined(message: str, r: GroupRequest, joining: bool) -> str:
    """The selection's line, naming the new members of a standing release (kind 3)."""
    if not joining:
        return message
    return f"{message} (new members of its standing release: {name_list(sorted(m.name for m in r.members))})"
