"""The chaos soak's invariants (issue 35): pure functions over the recorded event log.

The soak (:mod:`soak`) watches every pod, PodGroup and node of the cluster and appends one
record per state it sees (:class:`PodState`, :class:`GroupState`, :class:`NodeState`), with the
time it arrived (``t``, seconds on the soak's monotonic clock) and the object's
``resourceVersion``; the fault injector appends a :class:`Fault` per fault and the sampler a
:class:`Sample` of each controller replica's RSS. Each check below reads that log and returns
:class:`Violation` values (empty: the invariant held). None does I/O; the soak calls them every
few seconds over the log so far (continuously, not only at the end) and once more at the end.

The rules and their bounds (seconds, the soak's settings; :data:`BOUNDS`):

- :func:`partly_bound`: a gang never has ``0 < bound < minMember`` members bound for longer than
  ``partly_bound`` (60 s: kube-scheduler binding a released group, plus a controller failover
  mid-release: the Lease's 15 s, a new process's start and its first pass). A group that lost a
  member meanwhile (deleted, deleting or Failed: the soak's churn, a deleted node) is re-forming
  and not judged until it is whole again or empty.
- :func:`gate_without_release`: a pod seen with cogate's gate is seen without it only while its
  PodGroup records a release (``Released=True``) within ``release_record`` (60 s) of it, or while
  its PodGroup does not exist (strays are cogate's to ungate, docs/semantics.md); a removal is
  judged once the log runs ``release_record`` past it (the record may follow the gate's removal).
- :func:`released_twice`: no group has two releases (distinct ``lastTransitionTime`` of a True
  ``Released``) for one ``metadata.generation`` unless a member was lost between them: from the
  first release's own time (its ``lastTransitionTime``, when the controller decided it; the record
  of it may come seconds later) to the second's record.
- :func:`overcommitted`: no two gangs pinned to the same room: per node, the CPU requests of the
  live gang members (pods of a PodGroup) bound there and of those pinned there unbound never
  exceed allocatable for longer than ``overcommit`` (5 s: the watch streams of different pods
  arrive in their own order). Pods of no PodGroup are left out: kube-scheduler may bind one into
  room cogate has just planned (cogate's view is a moment old, or cut off by a fault), and the
  pinned member then waits and is placed again or preempts (docs/semantics.md, "After the
  release"); a gang left partly bound by that is :func:`partly_bound`'s.
- :func:`victims_in_vain`: a group that cogate preempted pods for (their ``DisruptionTarget``
  names it) has ``minMember`` bound within ``victims`` (180 s) of the first mark, unless it lost a
  member, was deleted, or a node was deleted or cordoned meanwhile (the preemption then ends as
  ``PlanChanged``, docs/semantics.md).
- :func:`nominated_left`: a ``status.nominatedNodeName`` that cogate's field manager owns stays
  only on a pod that waits: unbound, not ended, and (while gated) its group ``Preempting=True``;
  else for at most ``nominated`` (30 s), counted again from the end of any fault that cut or
  stopped the controllers' access to kube-apiserver meanwhile (:data:`CONTROL_FAULTS`).
- :func:`status_mismatches` (the end): every PodGroup's ``status.scheduled`` and
  ``status.running`` equal the live members bound and Running (the controller's counting rule,
  :func:`cogate.controller.status.status.count_members`); the soak asks this every 2 s after the
  faults stop, up to ``converge`` (120 s).
- :func:`memory_unbounded`: each controller process's RSS stays under ``rss_limit`` (400 MiB) and,
  past its first ``rss_warmup`` (300 s: informers filling, the first passes), its last quarter's
  median is at most 1.5 x its first quarter's + 32 MiB.

- :func:`partly_bound` also judges role minimums (docs/semantics.md, "Roles"): a group whose
  PodGroup states ``cogate.dev/role-minimums`` is partly bound while some member is bound and a
  role has fewer bound than its minimum, with the same bound and exemption.
- :func:`provisioned_fitting`: no ProvisioningRequest for a gang that fits. A request first seen
  at ``t`` for a group that opted out (``cogate.dev/provisioning: "false"``) is a violation at
  once; for any other group, when the group fitted the current nodes without a break since
  ``t_fit`` and ``t`` is past :func:`allowed_until` (``t_fit``, ``provreq_fit``: 10 s, the
  controller's view catching up, counted again after each control fault). "Fits" is judged
  conservatively (so a violation is certain): the members still needed for minMember (minus those
  bound) fit, one per ``cpu`` of free room, on the nodes of the group's pool (``PodState.pool``,
  the members' ``cogate-soak`` node selector; '' = the untainted ``node`` pool) after the live
  pods bound or pinned there, cordoned and deleted nodes left out, and after every gated member
  of each waiting group of that pool before it in the planner's order (priority, then age) is
  charged first.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

#: The bounds of the rules above (seconds; ``rss_limit`` bytes).
BOUNDS: dict[str, float] = {"partly_bound": 60.0, "release_record": 60.0, "overcommit": 5.0, "victims": 180.0,
                            "nominated": 30.0, "provreq_fit": 10.0, "converge": 120.0, "rss_limit": 400 * 2**20,
                            "rss_warmup": 300.0}

#: The node pool of pods that select none (``PodState.pool`` ''): the soak's own untainted nodes.
DEFAULT_POOL = "node"

TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodState:
    """One state of a pod. ``group``: its PodGroup label ('' none); ``node``: spec.nodeName ('' unbound);
    ``pin``: the one node its required node affinity names ('' none); ``nominated``: status.nominatedNodeName,
    ``nominated_by_cogate``: owned by cogate's field manager; ``disruption``: ``ns/group`` its
    cogate ``DisruptionTarget`` names ('' none); ``cpu``: requests in millicores; ``gone``: deleting or deleted;
    ``role``: its ``soak-role`` label ('' none); ``pool``: its ``cogate-soak`` node selector ('' none);
    ``priority``: spec.priority."""

    t: float
    rv: int
    ns: str
    name: str
    uid: str
    group: str = ""
    gated: bool = False
    node: str = ""
    pin: str = ""
    phase: str = "Pending"
    cpu: int = 0
    nominated: str = ""
    nominated_by_cogate: bool = False
    disruption: str = ""
    gone: bool = False
    released_t: float | None = None
    role: str = ""
    pool: str = ""
    priority: int = 0

    @property
    def ref(self) -> str:
        return f"{self.ns}/{self.name}"


@dataclass(frozen=True)
class GroupState:
    """One state of a PodGroup: ``released_at``: lastTransitionTime of a True Released ('' not released);
    ``released_t``: that time on the records' clock (``None``: not known), which comes before ``t``
    by as long as the pass took to write it; ``preempting``: Preempting=True;
    ``scheduled``/``running``: its status counts; ``gone``: deleted; ``role_minimums``: its
    ``cogate.dev/role-minimums`` as ``(role, minimum)`` pairs, sorted; ``opted_out``: annotated
    ``cogate.dev/provisioning: "false"``."""

    t: float
    rv: int
    ns: str
    name: str
    uid: str
    generation: int = 1
    min_member: int = 1
    released_at: str = ""
    preempting: bool = False
    scheduled: int = 0
    running: int = 0
    gone: bool = False
    released_t: float | None = None
    role_minimums: tuple[tuple[str, int], ...] = ()
    opted_out: bool = False

    @property
    def ref(self) -> str:
        return f"{self.ns}/{self.name}"


@dataclass(frozen=True)
class NodeState:
    """One state of a node: allocatable CPU (millicores), cordoned, deleted, ``pool``: its ``cogate-soak`` label;
    ``blocked``: not Ready, or tainted NoSchedule/NoExecute by a key other than ``cogate-soak`` (the scaled
    pool's own taint, which its gangs tolerate)."""

    t: float
    name: str
    cpu: int = 0
    cordoned: bool = False
    gone: bool = False
    pool: str = ""
    blocked: bool = False


@dataclass(frozen=True)
class ProvReqState:
    """One state of a ProvisioningRequest: ``group``: its ``cogate.dev/podgroup`` label; ``gone``: deleted."""

    t: float
    ns: str
    name: str
    group: str = ""
    gone: bool = False


@dataclass(frozen=True)
class Fault:
    """A fault injected at ``t`` for ``seconds`` (0: instant): ``kind`` (e.g. ``sigkill-controller``), ``detail``.
    ``seconds`` -1: the fault began and has not ended yet (the injector logs one such record when it
    starts a fault; the record with its duration follows when it ends)."""

    t: float
    kind: str
    detail: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Sample:
    """RSS (bytes) of the process ``who`` at ``t``."""

    t: float
    who: str
    rss: int


@dataclass(frozen=True)
class Violation:
    """A broken invariant: which, when (log time), about what (``ns/name``), and why."""

    invariant: str
    t: float
    ref: str
    message: str


Record = PodState | GroupState | NodeState | ProvReqState | Fault | Sample


def _bounds(bounds: Mapping[str, float] | None) -> dict[str, float]:
    return {**BOUNDS, **(bounds or {})}


def _ordered(log: Iterable[Record], kind: type) -> list[Any]:
    return sorted((r for r in log if isinstance(r, kind)), key=lambda r: (r.t, getattr(r, "rv", 0)))


def _end(log: Sequence[Record]) -> float:
    return max((r.t for r in log), default=0.0)


def _groups_at(log: Sequence[Record]) -> dict[tuple[str, str], list[GroupState]]:
    out: dict[tuple[str, str], list[GroupState]] = defaultdict(list)
    for g in _ordered(log, GroupState):
        out[(g.ns, g.name)].append(g)
    return out


def _group_before(states: Sequence[GroupState], t: float) -> GroupState | None:
    last = None
    for g in states:
        if g.t > t:
            break
        last = g
    return last


# ----------------------------------------------------------------------- gang timelines

@dataclass
class _Timeline:
    """A group's bound count over time: (t, bound, lost) per member change; ``lost``: a member was lost then;
    ``roles``: after the same change, the bound members per role (members of no role left out)."""

    points: list[tuple[float, int, bool]] = field(default_factory=list)
    roles: list[dict[str, int]] = field(default_factory=list)


def timelines(log: Sequence[Record]) -> dict[tuple[str, str], _Timeline]:
    """Per group (``ns``, ``name``): the number of live members with a node after each member change."""
    live: dict[tuple[str, str], dict[str, tuple[bool, str]]] = defaultdict(dict)
    out: dict[tuple[str, str], _Timeline] = defaultdict(_Timeline)
    for p in _ordered(log, PodState):
        if not p.group:
            continue
        key = (p.ns, p.group)
        members = live[key]
        lost = p.gone or p.phase == "Failed"
        if lost:
            members.pop(p.uid, None)
        else:
            members[p.uid] = (bool(p.node), p.role)
        roles: dict[str, int] = defaultdict(int)
        for bound, role in members.values():
            if role:
                roles[role] += bound
        out[key].points.append((p.t, sum(b for b, _ in members.values()), lost))
        out[key].roles.append(dict(roles))
    return out


def _short_roles(g: GroupState, roles: Mapping[str, int]) -> list[str]:
    """The roles of ``g`` with fewer members bound than their minimum, as ``role a of b``."""
    return [f"role {r} {roles.get(r, 0)} of {m}" for r, m in g.role_minimums if roles.get(r, 0) < m]


def partly_bound(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """Gangs partly bound (``0 < bound < minMember``, or some bound while a role is below its minimum) longer
    than ``partly_bound`` s without losing a member."""
    limit = _bounds(bounds)["partly_bound"]
    groups = _groups_at(log)
    end = _end(log)
    out = []
    for key, tl in timelines(log).items():
        states = groups.get(key)
        if not states:
            continue
        since: float | None = None
        excused = False
        reported = False
        for (t, bound, lost), roles in zip([*tl.points, (end, None, False)], [*tl.roles, {}]):
            g = _group_before(states, t) or states[0]
            if since is not None and not excused and not reported and t - since > limit:
                out.append(Violation("partly_bound", since + limit, f"{key[0]}/{key[1]}",
                                     f"{last_bound} of minMember {g.min_member} bound{last_short} for more than "
                                     f"{limit:.0f} s (since t={since:.1f})"))
                reported = True
            if bound is None:
                break
            short = _short_roles(g, roles) if bound else []
            partial = 0 < bound < g.min_member or bool(short)
            if not partial:
                since, excused, reported = None, False, False
            elif since is None:
                since, excused, reported = t, lost, False
            excused = excused or lost
            last_bound, last_short = bound, (f" ({', '.join(short)})" if short else "")
    return out


def gate_without_release(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """Pods seen gated, then ungated, with no recorded release of their existing group nearby; a removal less
    than ``release_record`` s before the log's end is not judged yet (the record of its release may follow)."""
    window = _bounds(bounds)["release_record"]
    groups = _groups_at(log)
    end = _end(log)
    gated: set[str] = set()
    done: set[str] = set()
    out = []
    for p in _ordered(log, PodState):
        if p.gone or p.uid in done:
            continue
        if p.gated:
            gated.add(p.uid)
            continue
        if p.uid not in gated:
            continue
        done.add(p.uid)
        states = groups.get((p.ns, p.group), [])
        now = _group_before(states, p.t)
        if not states or now is None or now.gone:
            continue  # no PodGroup (yet, or any more): a stray
        if any(g.released_at and abs(g.t - p.t) <= window for g in states) or p.t + window > end:
            continue
        out.append(Violation("gate_without_release", p.t, p.ref,
                             f"gate removed (rv {p.rv}) while PodGroup {p.ns}/{p.group} recorded no release "
                             f"within {window:.0f} s"))
    return out


def released_twice(log: Sequence[Record]) -> list[Violation]:
    """Two releases of one generation of a group with no member lost between them."""
    lost_at: dict[tuple[str, str], list[float]] = defaultdict(list)
    for key, tl in timelines(log).items():
        lost_at[key] = [t for t, _, lost in tl.points if lost]
    out = []
    for key, states in _groups_at(log).items():
        seen: dict[tuple[str, int], tuple[str, float]] = {}
        for g in states:
            if not g.released_at:
                continue
            k = (g.uid, g.generation)
            prev = seen.get(k)
            since = g.t if g.released_t is None else min(g.t, g.released_t)
            if prev is None:
                seen[k] = (g.released_at, since)
                continue
            if prev[0] == g.released_at:
                continue
            if not any(prev[1] <= t <= g.t for t in lost_at[key]):
                out.append(Violation("released_twice", g.t, g.ref,
                                     f"released again for generation {g.generation} (Released at {prev[0]}, then "
                                     f"{g.released_at}) with no member lost between"))
            seen[k] = (g.released_at, since)
    return out


def overcommitted(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """Nodes whose bound and pinned live gang members request more CPU than allocatable for longer than
    ``overcommit`` s (pods of no PodGroup left out: module doc)."""
    grace = _bounds(bounds)["overcommit"]
    events = sorted((r for r in log if isinstance(r, (PodState, NodeState))), key=lambda r: (r.t, getattr(r, "rv", 0)))
    nodes: dict[str, int] = {}
    where: dict[str, tuple[str, int]] = {}
    since: dict[str, float] = {}
    reported: set[tuple[str, float]] = set()
    out = []

    def check(t: float) -> None:
        load: dict[str, int] = defaultdict(int)
        for node, cpu in where.values():
            load[node] += cpu
        for node, cap in nodes.items():
            over = load.get(node, 0) > cap
            if over and node not in since:
                since[node] = t
            elif not over:
                since.pop(node, None)
            start = since.get(node)
            if start is not None and t - start > grace and (node, start) not in reported:
                reported.add((node, start))
                out.append(Violation("overcommitted", t, node, f"{load[node]}m CPU of gang members bound or pinned on a node of "
                                     f"{cap}m allocatable for more than {grace:.0f} s (since t={start:.1f})"))

    for r in events:
        if isinstance(r, NodeState):
            if r.gone:
                nodes.pop(r.name, None)
                since.pop(r.name, None)
            else:
                nodes[r.name] = r.cpu
        else:
            target = r.node or r.pin
            if r.gone or r.phase in TERMINAL or not target or not r.group:
                where.pop(r.uid, None)
            else:
                where[r.uid] = (target, r.cpu)
        check(r.t)
    check(_end(log))
    return out


def victims_in_vain(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """Groups cogate preempted for that did not reach minMember bound within ``victims`` s of the first mark."""
    limit = _bounds(bounds)["victims"]
    end = _end(log)
    marks: dict[tuple[str, str], float] = {}
    for p in _ordered(log, PodState):
        if p.disruption and "/" in p.disruption:
            ns, name = p.disruption.split("/", 1)
            marks.setdefault((ns, name), p.t)
    groups = _groups_at(log)
    tls = timelines(log)
    node_faults = [r.t for r in _ordered(log, NodeState) if r.gone or r.cordoned]
    out = []
    for key, t0 in marks.items():
        deadline = t0 + limit
        if deadline > end:
            continue  # not judged yet
        states = groups.get(key, [])
        if not states or any(g.gone and g.t <= deadline for g in states):
            continue
        min_member = (_group_before(states, deadline) or states[-1]).min_member
        points = [pt for pt in tls.get(key, _Timeline()).points if t0 <= pt[0] <= deadline]
        if any(b >= min_member for _, b, _ in points):
            continue
        if any(lost for _, _, lost in points) or any(t0 <= t <= deadline for t in node_faults):
            continue
        out.append(Violation("victims_in_vain", deadline, f"{key[0]}/{key[1]}",
                             f"pods were preempted for it at t={t0:.1f} but it had not minMember {min_member} bound "
                             f"{limit:.0f} s later"))
    return out


#: Faults that cut, slow or stop the controllers' access to kube-apiserver: while one lasts cogate cannot
#: clear what it wrote (a killed leader's successor also waits out the Lease).
CONTROL_FAULTS = ("sigkill-controller", "sigstop-controller", "proxy-", "restart-kube-apiserver")


def control_faults(log: Sequence[Record]) -> list[tuple[float, float]]:
    """``(start, end)`` of the :data:`CONTROL_FAULTS` in ``log``, oldest first; a fault begun and not
    ended yet (only its ``seconds`` -1 record) ends at infinity."""
    faults = [f for f in _ordered(log, Fault) if f.kind.startswith(CONTROL_FAULTS)]
    ended = {(f.t, f.kind) for f in faults if f.seconds >= 0}
    return sorted((f.t, f.t + f.seconds) if f.seconds >= 0 else (f.t, float("inf"))
                  for f in faults if f.seconds >= 0 or (f.t, f.kind) not in ended)


def allowed_until(t0: float, grace: float, faults: Sequence[tuple[float, float]]) -> float:
    """The end of a ``grace``-second allowance begun at ``t0``, counted again from the end of every control
    fault (:func:`control_faults`) that began before the allowance ran out and ended after ``t0``."""
    until = t0 + grace
    for start, end in faults:
        if start <= until and end >= t0:
            until = max(until, end + grace)
    return until


def nominated_left(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """cogate's nominatedNodeName on a pod that does not wait (bound, ended, or gated while its group is not
    preempting) for longer than ``nominated`` s, counted again from the end of each control fault that
    overlaps (:func:`allowed_until`); judged over every such stretch, whether it ended or still lasts."""
    grace = _bounds(bounds)["nominated"]
    groups = _groups_at(log)
    faults = control_faults(log)
    since: dict[str, float] = {}
    out = []
    last: dict[str, PodState] = {}

    def judge(p: PodState, t0: float, t1: float) -> None:
        until = allowed_until(t0, grace, faults)
        if t1 > until:
            out.append(Violation("nominated_left", until, p.ref,
                                 f"cogate's nominatedNodeName {p.nominated} left since t={t0:.1f} on a pod that does "
                                 f"not wait (node {p.node or '-'}, phase {p.phase}, gated {p.gated})"))

    for p in _ordered(log, PodState):
        before = last.get(p.uid)
        last[p.uid] = p
        g = _group_before(groups.get((p.ns, p.group), []), p.t)
        idle = p.gated and not (g is not None and not g.gone and g.preempting)
        bad = p.nominated_by_cogate and bool(p.nominated) and not p.gone and (
            bool(p.node) or p.phase in TERMINAL or idle)
        if bad:
            since.setdefault(p.uid, p.t)
        elif p.uid in since and before is not None:
            judge(before, since.pop(p.uid), p.t)
    end = _end(log)
    for uid, t0 in since.items():
        judge(last[uid], t0, end)
    return out


class _Room:
    """The replayed state :func:`provisioned_fitting` judges: nodes, live pods, PodGroups, their age."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.pods: dict[str, PodState] = {}
        self.groups: dict[tuple[str, str], GroupState] = {}
        self.first: dict[tuple[str, str], float] = {}

    def add(self, r: Record) -> bool:
        """Take record ``r``; False when it changes nothing a fit depends on (e.g. a pod's phase Pending -> Running)."""
        if isinstance(r, NodeState):
            if r.gone:
                self.nodes.pop(r.name, None)
            else:
                self.nodes[r.name] = r
        elif isinstance(r, PodState):
            before = self.pods.pop(r.uid, None)
            if not (r.gone or r.phase in TERMINAL):
                self.pods[r.uid] = r
                if before is not None and (before.node, before.pin, before.gated, before.cpu, before.pool) == (
                        r.node, r.pin, r.gated, r.cpu, r.pool):
                    return False
        elif isinstance(r, GroupState):
            key = (r.ns, r.name)
            self.groups[key] = r
            self.first.setdefault(key, r.t)
            if r.gone:
                self.first.pop(key, None)
        return True

    def waiting(self) -> dict[tuple[str, str], list[PodState]]:
        """Gated live members per PodGroup that exists and records no release."""
        out: dict[tuple[str, str], list[PodState]] = defaultdict(list)
        for p in self.pods.values():
            g = self.groups.get((p.ns, p.group))
            if p.group and p.gated and not p.node and g is not None and not g.gone and not g.released_at:
                out[(p.ns, p.group)].append(p)
        return out

    def fitting(self) -> set[tuple[str, str]]:
        """The waiting groups (not opted out) whose members still needed for minMember fit their pool (module
        doc: judged conservatively)."""
        waiting = self.waiting()
        judged = [k for k in waiting if not self.groups[k].opted_out]
        if not judged:
            return set()
        load: dict[str, int] = defaultdict(int)
        bound: dict[tuple[str, str], int] = defaultdict(int)
        for p in self.pods.values():
            if p.node or p.pin:
                load[p.node or p.pin] += p.cpu
            if p.node and p.group:
                bound[(p.ns, p.group)] += 1
        return {k for k in judged if self._fits(k, waiting, load, bound[k])}

    def _fits(self, key: tuple[str, str], waiting: Mapping[tuple[str, str], list[PodState]],
              load: Mapping[str, int], bound: int) -> bool:
        gated = waiting[key]
        need = self.groups[key].min_member - bound
        if len(gated) < need:
            return False
        pool = gated[0].pool or DEFAULT_POOL
        cpu = max(1, max(p.cpu for p in gated))
        slots = sum(max(0, n.cpu - load.get(n.name, 0)) // cpu for n in self.nodes.values()
                    if n.pool == pool and not n.cordoned and not n.blocked)
        def order(k: tuple[str, str]) -> tuple[int, float]:  # the planner's: priority, then age
            return -max(p.priority for p in waiting[k]), self.first.get(k, 0.0)
        older = [k for k, pods in waiting.items() if k != key and (pods[0].pool or DEFAULT_POOL) == pool
                 and order(k) < order(key)]
        charged = sum(max(1, -(-p.cpu // cpu)) for k in older for p in waiting[k])
        return slots - charged >= need


def provisioned_fitting(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """ProvisioningRequests for a group that opted out, or that fitted the current nodes long enough before
    the request was first seen (module doc: ``provreq_fit`` s, counted again after each control fault)."""
    grace = _bounds(bounds)["provreq_fit"]
    faults = control_faults(log)
    room = _Room()
    fit_since: dict[tuple[str, str], float] = {}
    seen: set[tuple[str, str]] = set()
    out = []
    for r in sorted((r for r in log if isinstance(r, (PodState, GroupState, NodeState, ProvReqState))),
                    key=lambda r: (r.t, getattr(r, "rv", 0))):
        if isinstance(r, ProvReqState):
            if r.gone or (r.ns, r.name) in seen:
                continue
            seen.add((r.ns, r.name))
            key = (r.ns, r.group)
            g = room.groups.get(key)
            if g is not None and g.opted_out:
                out.append(Violation("provisioned_fitting", r.t, f"{r.ns}/{r.group}",
                                     f"ProvisioningRequest {r.name} for a PodGroup annotated "
                                     "cogate.dev/provisioning: \"false\""))
            elif key in fit_since and allowed_until(fit_since[key], grace, faults) < r.t:
                out.append(Violation("provisioned_fitting", r.t, f"{r.ns}/{r.group}",
                                     f"ProvisioningRequest {r.name} for a gang that fitted the current nodes "
                                     f"since t={fit_since[key]:.1f}"))
            continue
        if not room.add(r):
            continue
        fitting = room.fitting()
        for key in list(fit_since):
            if key not in fitting:
                fit_since.pop(key)
        for key in fitting:
            fit_since.setdefault(key, r.t)
    return out


def status_mismatches(groups: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
                      label: str) -> list[str]:
    """PodGroups (API objects) whose ``status.scheduled``/``status.running`` differ from their live members
    (pods labelled ``label`` = the group's name, same namespace, not deleting): bound ones and Running ones."""
    truth: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for p in pods:
        meta = p.get("metadata") or {}
        group = (meta.get("labels") or {}).get(label)
        if not group or meta.get("deletionTimestamp"):
            continue
        c = truth[(meta.get("namespace", ""), group)]
        c[0] += bool((p.get("spec") or {}).get("nodeName"))
        c[1] += (p.get("status") or {}).get("phase") == "Running"
    out = []
    for g in groups:
        meta = g.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        st = g.get("status") or {}
        want = truth.get(key, [0, 0])
        have = [int(st.get("scheduled") or 0), int(st.get("running") or 0)]
        if have != want:
            out.append(f"{key[0]}/{key[1]}: status scheduled/running {have[0]}/{have[1]}, members bound/Running "
                       f"{want[0]}/{want[1]}")
    return out


def memory_unbounded(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """Controller processes whose RSS passed ``rss_limit`` or grew past their warm-up (last quarter's median >
    1.5 x first's + 32 MiB)."""
    limit, warmup = _bounds(bounds)["rss_limit"], _bounds(bounds)["rss_warmup"]
    per: dict[str, list[Sample]] = defaultdict(list)
    for s in _ordered(log, Sample):
        per[s.who].append(s)
    out = []
    for who, samples in per.items():
        peak = max(samples, key=lambda s: s.rss)
        if peak.rss > limit:
            out.append(Violation("memory_unbounded", peak.t, who,
                                 f"RSS {peak.rss / 2**20:.0f} MiB above {limit / 2**20:.0f} MiB"))
        steady = [s for s in samples if s.t - samples[0].t >= warmup]
        if len(steady) >= 8:
            q = len(steady) // 4
            first = statistics.median(s.rss for s in steady[:q])
            last = statistics.median(s.rss for s in steady[-q:])
            if last > 1.5 * first + 32 * 2**20:
                out.append(Violation("memory_unbounded", steady[q - 1].t, who,
                                     f"RSS grew from {first / 2**20:.0f} MiB (first quarter's median after "
                                     f"{warmup:.0f} s) to {last / 2**20:.0f} MiB (last quarter's)"))
    return out


def read_log(lines: Iterable[str]) -> list[Record]:
    """The records of an event log as the soak writes it (one JSON object a line, ``type``: the record's
    class name, the rest its fields); unknown types are skipped."""
    kinds = {c.__name__: c for c in (PodState, GroupState, NodeState, ProvReqState, Fault, Sample)}
    out: list[Record] = []
    for line in lines:
        if line.strip():
            d = json.loads(line)
            cls = kinds.get(d.pop("type", ""))
            if cls is not None:
                known = {f.name for f in fields(cls)}
                values = {k: v for k, v in d.items() if k in known}
                if "role_minimums" in values:  # JSON lists back to the record's tuples
                    values["role_minimums"] = tuple(tuple(x) for x in values["role_minimums"])
                out.append(cls(**values))
    return out


def check(log: Sequence[Record], bounds: Mapping[str, float] | None = None) -> list[Violation]:
    """Every invariant over the log (all but :func:`status_mismatches`, which reads the API at the end)."""
    return sorted([*partly_bound(log, bounds), *gate_without_release(log, bounds), *released_twice(log),
                   *overcommitted(log, bounds), *victims_in_vain(log, bounds), *nominated_left(log, bounds),
                   *provisioned_fitting(log, bounds), *memory_unbounded(log, bounds)], key=lambda v: (v.t, v.invariant, v.ref))


def around(log: Sequence[Record], v: Violation, seconds: float = 10.0, limit: int = 40) -> list[Record]:
    """The records within ``seconds`` of violation ``v`` that concern its object (or any fault), at most ``limit``."""
    name = v.ref.split("/", 1)[-1]

    def concerns(r: Record) -> bool:
        if isinstance(r, Fault):
            return True
        if isinstance(r, PodState):
            return name in (r.group, r.name, r.node, r.pin)
        if isinstance(r, GroupState):
            return r.name == name
        if isinstance(r, NodeState):
            return r.name == name
        if isinstance(r, ProvReqState):
            return r.group == name
        return False
    near = [r for r in log if abs(r.t - v.t) <= seconds and concerns(r)]
    return sorted(near, key=lambda r: r.t)[-limit:]
