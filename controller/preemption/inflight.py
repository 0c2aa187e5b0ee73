"""A preemption in flight (pure): the record cogate keeps while a gang's victims go, and its rules.

:func:`cogate.controller.preemption.victims.select_victims` decides which pods to remove; the shell
(:class:`cogate.controller.preemption.room.Preempting`) acts on it and keeps one :class:`InFlight`
record in the preempting group's memory (:class:`cogate.controller.preemption.memory.PreemptionMemory`
``in_flight``). This module holds what that record means, as plain functions:

- :func:`start` turns a :class:`~cogate.controller.preemption.victims.Preemption` into the record: the
  victims (uid, name, node, grace period), the plan (member uid -> node), when it started and
  its deadline (:func:`deadline`: the longest victim grace period plus
  :data:`STUCK_SLACK_SECONDS`, as a stuck pin gets a grace before cogate acts);
- :func:`holds` is the room the record holds for the group: one
  :class:`~cogate.controller.model.records.Promise` of kind ``"preempting"`` per planned member still
  gated, holder ``"PodGroup ns/name"``. The planner charges it for every other group and lends it
  to its holder (:meth:`cogate.controller.planning.room.Room.lend`), the mechanism that already lends
  lower-priority nominations: no second one;
- :func:`judge` says, once a pass, what became of it (:class:`Step`): still waiting for victims,
  placed (the planner released the group on the freed room), or ended for a reason that drops the
  record (group deleted; a member's ``status.nominatedNodeName`` cleared or changed by someone
  else, KEP-5278: a higher-priority preemptor took the node; a planned member gone; victims still
  there at the deadline; victims gone but the plan no longer fits, :data:`GONE_RECHECK_SECONDS`
  after they were first seen gone, so that a pass planned on caches a moment behind the victims'
  deletion is not mistaken for it);
- :func:`backoff_seconds`: how long a group waits before it preempts again after a preemption
  that ended without placing it (:data:`BACKOFF_INITIAL_SECONDS` doubling to
  :data:`BACKOFF_MAX_SECONDS`);
- :func:`waiting_message` and the ``Preempting`` condition's texts;
- :func:`new_scheduler_leader` (on kube-scheduler's leader Lease, :func:`scheduler_lease`) and
  :func:`refresh_condition`: when and how the members' nominations are made known again to a
  kube-scheduler that started after cogate nominated them (it registers a gated pod's
  nomination only on an update of the pod, docs/semantics.md "Preemption");
- :func:`rebuild`: the records of preemptions an earlier process left in flight (a restart, a
  leader failover), read back from the cluster: the gated members whose ``nominatedNodeName``
  cogate's field manager owns, and the victims still there marked ``DisruptionTarget`` with
  cogate's reason, whose message names the PodGroup (:func:`cogate.controller.status.notices.disruption_group`).

Times are epoch seconds; requests in the units of :mod:`cogate.controller.model.resources`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from cogate.controller.planning.explanations import name_list, plural
from cogate.controller.planning.filters import static_reason
from cogate.controller.status.notices import disruption_group
from cogate.controller.model.records import NodeInfo, PodInfo, Promise

__all__ = ["STUCK_SLACK_SECONDS", "GONE_RECHECK_SECONDS", "BACKOFF_INITIAL_SECONDS", "BACKOFF_MAX_SECONDS",
           "DEFAULT_GRACE_SECONDS", "VictimRef", "InFlight", "Step", "Judgement", "start", "deadline", "holds",
           "judge", "room_lost", "backoff_seconds", "waiting_message", "holder", "Ignored", "Rebuilt", "rebuild", "regraced",
           "RESUMED", "SCHEDULER_LEASE", "REFRESH_AGAIN_SECONDS", "ROOM_HELD_CONDITION", "SchedulerLease",
           "scheduler_lease", "new_scheduler_leader", "refresh_condition"]

#: Seconds beyond the longest victim grace period before victims still there count as stuck
#: (the kubelet needs a moment after the grace period to report the pod gone).
STUCK_SLACK_SECONDS = 30.0
#: Seconds after every victim was first seen gone before "the plan no longer fits" is concluded
#: (the bound-pods cache and the planner's state are fed by the same watch, a moment apart).
GONE_RECHECK_SECONDS = 1.0
#: Back-off after a preemption that ended without placing the group: 30 s doubling to 300 s.
BACKOFF_INITIAL_SECONDS = 30.0
BACKOFF_MAX_SECONDS = 300.0
#: ``terminationGracePeriodSeconds`` of a pod that does not set it (the API server's default).
DEFAULT_GRACE_SECONDS = 30.0


@dataclass(frozen=True)
class VictimRef:
    """A pod being preempted: identity, the node it frees, its grace period (seconds)."""

    uid: str
    namespace: str
    name: str
    node: str
    grace: float = DEFAULT_GRACE_SECONDS

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class InFlight:
    """A preemption cogate is carrying out for one PodGroup (``namespace``/``name``).

    ``victims`` (sorted by node, namespace, name); ``plan``: member uid -> node name (the room
    held, :func:`holds`); ``requests``: member uid -> its requests then; ``priority``: the group's;
    ``started``/``deadline`` (epoch seconds); ``message``: the selection's line ("preempting 3
    pods (...) of priority <= 100 on nodes n1, n2 to place PodGroup ns/g, priority 1000");
    ``nominated``: planned members seen carrying cogate's nomination (a later change of it is
    someone else's); ``gone_at``: when every victim was first seen gone (None until then)."""

    namespace: str
    name: str
    victims: tuple[VictimRef, ...]
    plan: Mapping[str, str]
    requests: Mapping[str, Mapping[str, int]]
    priority: int
    started: float
    deadline: float
    message: str
    nominated: frozenset[str] = frozenset()
    gone_at: float | None = None
    #: The preemption is for new members of a standing release (issue 37 kind 3): it is placed once
    #: every planned member is ungated, and a planned member the planner ungated is not a change of plan.
    joining: bool = False


class Step(StrEnum):
    """What :func:`judge` found; each ending value is also the reason of ``Preempting=False``."""

    #: Victims are still there (terminating): the group stays gated on its held room.
    WAITING = "Waiting"
    #: Every victim is gone; the next pass decides (the plan is re-checked after a moment).
    VICTIMS_GONE = "VictimsGone"
    #: The group was released (placed on the freed room).
    PLACED = "Placed"
    #: The PodGroup is gone.
    GROUP_DELETED = "PodGroupDeleted"
    #: A planned member's nomination was cleared or changed by someone else.
    NOMINATION_LOST = "NominationLost"
    #: A planned member is no longer a gated member (deleted, released by hand, relabelled).
    PLAN_CHANGED = "PlanChanged"
    #: Victims still there at the deadline.
    VICTIMS_STUCK = "VictimsStuck"
    #: Victims gone, but the group still does not fit (room taken by another pod meanwhile).
    DOES_NOT_FIT_AFTER_PREEMPTION = "DoesNotFitAfterPreemption"
    #: A higher-priority group took over the room this preemption was freeing (issue 37 kind 2).
    SUPERSEDED = "Superseded"

    @property
    def ends(self) -> bool:
        """The record is dropped (and cogate's nominations cleared when members remain)."""
        return self not in (Step.WAITING, Step.VICTIMS_GONE)


@dataclass(frozen=True)
class Judgement:
    """:func:`judge`'s answer: the ``step``, the record to keep (None once it ends), the victims
    still there, and a ``message`` for the condition or an Event."""

    step: Step
    record: InFlight | None
    remaining: tuple[VictimRef, ...] = ()
    message: str = ""
    #: Planned members whose nomination is cogate's and must be cleared (on ends).
    nominated: tuple[str, ...] = field(default=())
    #: The end is no failure of the group's (its room became unusable, a higher priority took it):
    #: it may be chosen again at once, without :func:`backoff_seconds`.
    again: bool = False


def holder(namespace: str, name: str) -> str:
    """``Promise.holder`` of room held for PodGroup ``namespace/name`` (as the planner names it)."""
    return f"PodGroup {namespace}/{name}"


def deadline(started: float, victims: Sequence[VictimRef]) -> float:
    """``started`` + the longest victim grace period + :data:`STUCK_SLACK_SECONDS`."""
    return started + max((v.grace for v in victims), default=0.0) + STUCK_SLACK_SECONDS


def start(namespace: str, name: str, victims: Sequence[tuple[PodInfo, str, float | None]],
          plan: Mapping[str, str], members: Sequence[PodInfo], priority: int, message: str,
          now: float) -> InFlight:
    """The record of a preemption started at ``now``: ``victims`` as ``(pod, node, grace seconds
    or None for the default)``, ``plan`` member uid -> node, the group's ``members`` (their
    requests are kept for :func:`holds`)."""
    refs = tuple(sorted((VictimRef(p.uid, p.namespace, p.name, node,
                                   DEFAULT_GRACE_SECONDS if grace is None else float(grace))
                         for p, node, grace in victims), key=lambda v: (v.node, v.namespace, v.name, v.uid)))
    by_uid = {m.uid: m for m in members}
    requests = {u: dict(by_uid[u].requests) for u in plan if u in by_uid}
    return InFlight(namespace, name, refs, dict(plan), requests, priority, now, deadline(now, refs), message)


def holds(record: InFlight, members: Sequence[PodInfo], gate: str,
          present: Mapping[str, PodInfo] | None = None) -> list[Promise]:
    """The room ``record`` holds: per planned member still gated by ``gate`` (by uid in
    ``members``), a ``"preempting"`` Promise of its requests on its planned node, holder the group
    (its host ports are not held: the member's own would collide with them).

    ``present``: uid -> record of the pods still bound (None: not known, the whole plan is held).
    A victim still there and terminating is charged as a bound pod wherever room is counted (and
    is no candidate for another selection), so on its node the Promises hold only what such victims
    do not already take (each resource reduced by their requests, never below 0, members in plan
    order): what is charged there is the larger of the plan and those victims, never both (issue
    37: two preemptions on one node would otherwise each count the other's room twice, and one
    whose own victims are gone would not fit until the other's went). A victim not yet seen
    terminating is still a candidate for others, so the whole plan stays held against it. The
    ``pods`` slot is held whole."""
    who = holder(record.namespace, record.name)
    left: dict[str, dict[str, int]] = {}
    for v in record.victims:
        p = present.get(v.uid) if present is not None else None
        if p is not None and p.deleting:
            acc = left.setdefault(v.node, {})
            for k, q in p.requests.items():
                acc[k] = acc.get(k, 0) + q
    out = []
    for m in members:
        node = record.plan.get(m.uid)
        if node and m.gated_by(gate) and not m.bound:
            req = dict(record.requests.get(m.uid, m.requests))
            acc = left.get(node)
            if acc:
                for k in req:
                    take = min(req[k], acc.get(k, 0))
                    if take > 0:
                        req[k] -= take
                        acc[k] -= take
            out.append(Promise(m, node, req, (), "preempting", record.priority, who))
    return out


def judge(record: InFlight, members: Sequence[PodInfo] | None, released: bool, present: Mapping[str, PodInfo],
          now: float, gate: str, nodes: Mapping[str, NodeInfo] | None = None,
          ungated: Collection[str] = frozenset()) -> Judgement:
    """What became of ``record`` this pass (rules in the module doc, in this order).

    ``members``: the group's live members (None: the PodGroup is gone); ``released``: the planner
    released the group in this pass or its release stands (ignored for a ``joining`` record, which
    is placed once each planned member is ungated: no longer gated, or in ``ungated``, the uids the
    planner ungates in this pass); ``present``: uid -> record of pods still bound and not terminal
    (a victim among them is still there, terminating or not); ``nodes``: node name -> record (None:
    not checked), for :func:`room_lost`."""
    if members is None:
        return Judgement(Step.GROUP_DELETED, None, message="the PodGroup was deleted")
    ours = tuple(sorted(u for u in record.plan if u in record.nominated))
    if record.joining:
        by_uid = {m.uid: m for m in members}
        released = all(u in ungated or (u in by_uid and not by_uid[u].gated_by(gate)) for u in record.plan)
    if released:
        return Judgement(Step.PLACED, None,
                         message=f"placed on the room freed by {record.message}")
    by_uid = {m.uid: m for m in members}
    seen = set(record.nominated)
    for uid, node in sorted(record.plan.items(), key=lambda kv: kv[1]):
        m = by_uid.get(uid)
        if record.joining and m is not None and (uid in ungated or not m.gated_by(gate)):
            continue  # ungated by the planner on the freed room: that member is placed
        if m is None or not m.gated_by(gate) or m.bound:
            what = "is gone" if m is None else "is no longer gated (released by someone else)"
            return Judgement(Step.PLAN_CHANGED, None, message=f"planned member {m.name if m else uid} {what}; "
                             "planning again", nominated=ours)
        if m.nominated_node == node:
            seen.add(uid)
        elif m.nominated_node or uid in seen:
            now_at = f"changed to {m.nominated_node}" if m.nominated_node else "cleared"
            return Judgement(Step.NOMINATION_LOST, None,
                             message=f"member {m.name}'s nominatedNodeName {node} was {now_at} by someone else "
                                     "(a higher-priority preemptor on that node); planning again",
                             nominated=tuple(u for u in ours if u != uid))
    lost = room_lost(record, members, nodes, gate) if nodes is not None else None
    if lost:
        return Judgement(Step.PLAN_CHANGED, None, message=f"{lost}; planning again at once", nominated=ours,
                         again=True)
    record = replace(record, nominated=frozenset(seen)) if seen != record.nominated else record
    remaining = tuple(v for v in record.victims if v.uid in present)
    if remaining:
        if now >= record.deadline:
            return Judgement(Step.VICTIMS_STUCK, None, remaining,
                             f"{plural(len(remaining), 'victim')} still there {int(now - record.started)}s after "
                             f"the preemption ({name_list([v.ref for v in remaining])}); backing off",
                             nominated=tuple(sorted(seen)))
        record = replace(record, gone_at=None) if record.gone_at is not None else record
        return Judgement(Step.WAITING, record, remaining, waiting_message(record, remaining))
    if record.gone_at is None:
        record = replace(record, gone_at=now)
    elif now - record.gone_at >= GONE_RECHECK_SECONDS:
        return Judgement(Step.DOES_NOT_FIT_AFTER_PREEMPTION, None,
                         message=f"every victim is gone ({plural(len(record.victims), 'pod')}) but the group no "
                                 "longer fits its planned nodes (room taken meanwhile); planning again",
                         nominated=tuple(sorted(seen)))
    return Judgement(Step.VICTIMS_GONE, record, (), f"{record.message}; every victim is gone")


def room_lost(record: InFlight, members: Sequence[PodInfo], nodes: Mapping[str, NodeInfo], gate: str) -> str | None:
    """Why the room ``record`` frees can no longer take its group (issue 37 kind 4), or None: a
    planned node gone from ``nodes``, or one that no longer takes its planned member still gated
    whatever its load (kube-scheduler's load-independent filters, :func:`~cogate.controller.planning.filters.static_reason`:
    cordoned, a taint the member does not tolerate, NotReady, node affinity). Waiting for the
    victims would then be in vain: the preemption ends at once (``PlanChanged``) and the group is
    chosen again, as kube-scheduler's preemptor whose nominated node fails its filters is
    scheduled afresh."""
    by_uid = {m.uid: m for m in members}
    for uid, name in sorted(record.plan.items(), key=lambda kv: (kv[1], kv[0])):
        m = by_uid.get(uid)
        if m is None or not m.gated_by(gate):
            continue
        node = nodes.get(name)
        if node is None:
            return f"planned node {name} is gone"
        why = static_reason(node, m)
        if why is not None:
            return f"planned node {name} no longer takes member {m.name} ({why})"
    return None


def waiting_message(record: InFlight, remaining: Sequence[VictimRef]) -> str:
    """The ``Preempting=True`` text: the selection's line and the victims still terminating."""
    return (f"{record.message}; waiting for {plural(len(remaining), 'victim')} to terminate "
            f"({name_list([v.ref for v in remaining])})")


def backoff_seconds(attempts: int) -> float:
    """Seconds before the ``attempts``-th preemption that ended without placing the group may be
    followed by another: :data:`BACKOFF_INITIAL_SECONDS` doubling, at most :data:`BACKOFF_MAX_SECONDS`."""
    if attempts <= 0:
        return 0.0
    return min(BACKOFF_MAX_SECONDS, BACKOFF_INITIAL_SECONDS * 2 ** (attempts - 1))


#: Said at the end of a rebuilt record's message (and counted as ``preemptions_total{result}``).
RESUMED = "Resumed"


@dataclass(frozen=True)
class Ignored:
    """A pod :func:`rebuild` left out, and why (for the log): ``ref`` ``"ns/name"``."""

    ref: str
    reason: str


@dataclass(frozen=True)
class Rebuilt:
    """:func:`rebuild`'s answer: the ``records`` (sorted by namespace, name), the victims in them
    still to DELETE (uids: marked, not yet being deleted: the earlier process stopped between its
    mark and its DELETE), and the pods ``ignored`` with a reason (sorted)."""

    records: tuple[InFlight, ...] = ()
    to_delete: tuple[str, ...] = ()
    ignored: tuple[Ignored, ...] = ()


def rebuild(members: Mapping[tuple[str, str], Sequence[PodInfo]], pods: Sequence[PodInfo], gate: str,
            reason: str, manager: str, now: float) -> Rebuilt:
    """The preemptions in flight an earlier process left, from what the cluster holds (epoch ``now``).

    ``members``: each existing PodGroup's key -> its live members; ``pods``: the bound pods;
    ``reason``: the ``DisruptionTarget`` reason cogate marks its victims with
    (``PreemptionByCogate``); ``manager``: cogate's field manager (``cogate-controller``).

    - **Planned members**: a member gated by ``gate``, unbound, whose ``status.nominatedNodeName``
      is owned by ``manager`` (``PodInfo.nominated_by``, from ``metadata.managedFields``): only
      cogate's preemption writes it (step 2, before any victim goes); the plan is member -> that
      node. A nomination another manager owns, or whose owner is unknown, is ignored (KEP-5278
      lets other components nominate; their room is theirs, already counted as promised room).
    - A record per PodGroup with a planned member; its ``priority`` is the group's (its lowest gated
      member's, as the selection takes it).
    - **Victims**: bound, non-terminal pods marked ``DisruptionTarget=True`` with ``reason`` whose
      message names that PodGroup (:func:`~cogate.controller.status.notices.disruption_group`), of lower
      priority than the group and not its members. Ignored with a reason: a message naming no
      PodGroup, one naming a group with no planned member (nothing left to finish), a priority
      not below the group's, a member of the group itself.
    - **Times**: ``started`` is the earliest mark (``DisruptionTarget`` ``lastTransitionTime``;
      ``now`` without one); a victim being deleted gets ``grace`` = its ``deletionTimestamp`` -
      ``started`` (the API server sets it to the DELETE's time + the grace period), one not being
      deleted :data:`DEFAULT_GRACE_SECONDS` until its DELETE answers (:func:`regraced`); so the
      deadline is the latest ``deletionTimestamp`` + :data:`STUCK_SLACK_SECONDS`, as
      :func:`deadline` sets it for the earlier process.
    - Every planned member counts as seen nominated (``nominated``): a later change of its
      nomination is someone else's (``NominationLost``), as for the earlier process.
    A record without a victim left (all gone before the restart) holds the room until the next
    pass places the group or :func:`judge` ends it (``DoesNotFitAfterPreemption``)."""
    planned, priority, ignored = _planned_members(members, gate, manager)
    victims, not_victims = _marked_victims(pods, reason, planned, priority)
    records, to_delete = [], []
    for key in sorted(planned):
        record, undeleted = _rebuilt_record(key, planned[key], victims.get(key, []), priority[key], now)
        records.append(record)
        to_delete.extend(undeleted)
    ignored += not_victims
    return Rebuilt(tuple(records), tuple(sorted(to_delete)), tuple(sorted(ignored, key=lambda i: (i.ref, i.reason))))


def _planned_members(members: Mapping[tuple[str, str], Sequence[PodInfo]], gate: str, manager: str
                     ) -> tuple[dict[tuple[str, str], list[PodInfo]], dict[tuple[str, str], int], list[Ignored]]:
    """:func:`rebuild`'s planned members (gated by ``gate``, unbound, nominated by ``manager``) per
    PodGroup that has any, the priority of each such group (its lowest gated member's), and the
    members whose nomination is another writer's, ignored."""
    ignored: list[Ignored] = []
    planned: dict[tuple[str, str], list[PodInfo]] = {}
    priority: dict[tuple[str, str], int] = {}
    for key, ms in members.items():
        gated = [m for m in ms if m.gated_by(gate) and not m.bound]
        for m in gated:
            if not m.nominated_node:
                continue
            if m.nominated_by != manager:
                who = m.nominated_by or "an unknown writer (no managedFields)"
                ignored.append(Ignored(f"{m.namespace}/{m.name}", f"nominatedNodeName {m.nominated_node} was set "
                                                                  f"by {who}, not by {manager}"))
                continue
            planned.setdefault(key, []).append(m)
        if key in planned:
            priority[key] = min(m.priority for m in gated)
    return planned, priority, ignored


def _marked_victims(pods: Sequence[PodInfo], reason: str, planned: Mapping[tuple[str, str], Sequence[PodInfo]],
                    priority: Mapping[tuple[str, str], int]
                    ) -> tuple[dict[tuple[str, str], list[PodInfo]], list[Ignored]]:
    """:func:`rebuild`'s victims per planned PodGroup (bound, non-terminal, marked with ``reason``
    for that group, below its priority, not its members), and the marked pods ignored, with why."""
    ignored: list[Ignored] = []
    victims: dict[tuple[str, str], list[PodInfo]] = {}
    for p in pods:
        if p.disruption != reason or not p.bound or p.terminal:
            continue
        ref = f"{p.namespace}/{p.name}"
        named = disruption_group(p.disruption_message)
        if named is None:
            ignored.append(Ignored(ref, f"marked {reason} but its message names no PodGroup "
                                        f"({p.disruption_message!r})"))
            continue
        key = (named[0], named[1])
        if key not in planned:
            ignored.append(Ignored(ref, f"marked {reason} for PodGroup {key[0]}/{key[1]}, which has no member "
                                        "nominated by cogate (no preemption left to finish)"))
        elif p.namespace == key[0] and p.group == key[1]:
            ignored.append(Ignored(ref, f"marked {reason} for its own PodGroup {key[0]}/{key[1]}"))
        elif p.priority >= priority[key]:
            ignored.append(Ignored(ref, f"marked {reason} for PodGroup {key[0]}/{key[1]}, but its priority "
                                        f"{p.priority} is not below the group's {priority[key]}"))
        else:
            victims.setdefault(key, []).append(p)
    return victims, ignored


def _rebuilt_record(key: tuple[str, str], planned: Sequence[PodInfo], victims: Sequence[PodInfo], priority: int,
                    now: float) -> tuple[InFlight, list[str]]:
    """The record :func:`rebuild` makes for PodGroup ``key`` (its times and plan as its docstring
    says), and the uids of its victims not being deleted yet (their DELETE is still to send)."""
    marks = [p.disruption_since for p in victims if p.disruption_since > 0]
    started = min(marks) if marks else now
    refs = tuple(sorted((VictimRef(p.uid, p.namespace, p.name, p.node_name,
                                   max(0.0, p.deletion_at - started) if p.deleting and p.deletion_at > 0
                                   else DEFAULT_GRACE_SECONDS) for p in victims),
                        key=lambda v: (v.node, v.namespace, v.name, v.uid)))
    ms = sorted(planned, key=lambda m: (m.nominated_node, m.name))
    plan = {m.uid: m.nominated_node for m in ms}
    record = InFlight(key[0], key[1], refs, plan, {m.uid: dict(m.requests) for m in ms}, priority,
                      started, deadline(started, refs), rebuilt_message(key, refs, victims, plan, priority),
                      nominated=frozenset(plan))
    return record, [p.uid for p in victims if not p.deleting]


def rebuilt_message(key: tuple[str, str], refs: Sequence[VictimRef], victims: Sequence[PodInfo],
                    plan: Mapping[str, str], priority: int) -> str:
    """A rebuilt record's line, as the selection's ("preempting 3 pods (ns/a, ns/b, ns/c) of priority
    <= 100 on 2 nodes n1, n2 to place PodGroup ns/g, priority 1000"), naming the victims still there,
    and saying it was resumed."""
    me = f"PodGroup {key[0]}/{key[1]}"
    if not refs:
        nodes = sorted(set(plan.values()))
        return (f"preempting to place {me}, priority {priority}: every victim is gone; holding its members' "
                f"nominated room on {plural(len(nodes), 'node')} {name_list(nodes)} ({RESUMED.lower()} after a "
                "controller restart)")
    top = max(p.priority for p in victims)
    on = sorted({v.node for v in refs})
    return (f"preempting {plural(len(refs), 'pod')} ({name_list([v.ref for v in refs])}) of priority <= {top} on "
            f"{plural(len(on), 'node')} {name_list(on)} to place {me}, priority {priority} "
            f"({RESUMED.lower()} after a controller restart)")


def regraced(record: InFlight, graces: Mapping[str, float], now: float) -> InFlight:
    """``record`` with the victims in ``graces`` (uid -> the grace period, seconds, their DELETE at
    ``now`` answered) given ``grace`` = ``now`` - ``started`` + that, and the deadline again."""
    if not graces:
        return record
    refs = tuple(replace(v, grace=max(0.0, now - record.started) + graces[v.uid]) if v.uid in graces else v
                 for v in record.victims)
    return replace(record, victims=refs, deadline=deadline(record.started, refs))


#: kube-scheduler's leader Lease (``namespace``, ``name``): its ``--leader-elect-resource-namespace``
#: and ``--leader-elect-resource-name`` defaults.
SCHEDULER_LEASE = ("kube-system", "kube-scheduler")
#: Seconds after a new kube-scheduler leader is seen before the nominations are refreshed once
#: more: a kube-scheduler run with ``DelayCacheUntilActive`` lists pods only after it took the
#: Lease, and a refresh it lists with the pod is not an update to it.
REFRESH_AGAIN_SECONDS = 5.0
#: The pod condition cogate writes on a nominated member to refresh its nomination (an update of
#: the pod that kube-scheduler's queue sees; its type is cogate's, so no one else reads it).
ROOM_HELD_CONDITION = "scheduling.x-k8s.io/RoomHeld"


@dataclass(frozen=True)
class SchedulerLease:
    """kube-scheduler's leader Lease as read: ``spec.holderIdentity`` ('' when released or
    unset) and ``spec.leaseTransitions`` (0 when unset)."""

    holder: str = ""
    transitions: int = 0


def scheduler_lease(obj: Mapping[str, object]) -> SchedulerLease:
    """The informer's converter of a ``coordination.k8s.io/v1`` Lease (API JSON); never raises (an
    odd field reads as unset: the Lease is another component's)."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    spec = spec if isinstance(spec, Mapping) else {}
    holder, transitions = spec.get("holderIdentity"), spec.get("leaseTransitions")
    return SchedulerLease(holder if isinstance(holder, str) else "",
                          transitions if isinstance(transitions, int) and not isinstance(transitions, bool) else 0)


def new_scheduler_leader(old: SchedulerLease | None, new: SchedulerLease | None) -> bool:
    """Whether ``new`` names a kube-scheduler leader that ``old`` (the Lease as last seen; None:
    never seen) did not: a new holder, or the same one after a transition. A restarted
    kube-scheduler has a new identity (``hostname_<uuid>``, client-go ``leaderelection``); a
    renewal changes neither field; a released Lease (no holder) leads no one yet."""
    if new is None or not new.holder:
        return False
    return old is None or (new.holder, new.transitions) != (old.holder, old.transitions)


def refresh_condition(record: InFlight, node: str, holder: str, now: str) -> dict[str, str]:
    """The :data:`ROOM_HELD_CONDITION` written on a member nominated to ``node`` for ``record``
    (``now``: RFC 3339; a new ``lastTransitionTime`` each time, so the write changes the pod)."""
    why = f"kube-scheduler {holder} took its Lease" if holder else "a controller restart"
    return {"type": ROOM_HELD_CONDITION, "status": "True", "reason": "NominatedByCogate", "lastTransitionTime": now,
            "message": f"cogate holds room on node {node} for PodGroup {record.namespace}/{record.name} "
                       f"(status.nominatedNodeName); refreshed after {why}"}
