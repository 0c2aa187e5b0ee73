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
   fits the free room is never given victims; a group with ``spec.minResources`` is given victims
   for all of it (its members and the rest) or none (:mod:`cogate.controller.preemption.aggregate`).
4. **One rule set.** Every fit is the planner's capacity model (:mod:`cogate.controller.planning.capacity`:
   ``Room``/``pack``/``Snapshot``; NodeResourcesFit, taints, node affinity, NodePorts,
   InterPodAffinity, PodTopologySpread), victims taken off with :meth:`~cogate.controller.planning.room.Room.vacate`;
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
8. **Protected namespaces.** A pod in a namespace of ``protected`` (``--protected-namespace``;
   the chart: its release namespace, where cogate's own webhook and controller run, and
   ``controller.protectedNamespaces``) is never a victim, whatever its priority, nor is a gang of
   such a namespace (``candidate_rule``, the one place of the rule). A group that would place
   minMember only if such pods went says so (``OnlyProtectedPods``) instead of
   ``NoLowerPriorityPods`` or ``DoesNotFitEvenWithPreemption``: its waiting is cogate's own
   safety rule, not the cluster's size (docs/operations/pod-safety.md).
9. **Kubernetes' own gangs, and the cheapest units** (issue 39; KEP-5710 workload-aware preemption).
   A ``scheduling.k8s.io`` PodGroup in disruption mode ``all`` (``natives``) is one victim unit: all
   its bound pods go or none does, at its PodGroup's priority (:mod:`cogate.controller.preemption.units`);
   it is never touched when that priority, or one of its pods', is the group's or more. Mode
   ``single``, and a PodGroup not known, leaves its pods ordinary victims. A unit of which a node
   needed only part is named in the message (``skipped`` or ``taken whole``). When the candidates
   are few, the answer of rule 5 is replaced by the cheapest admissible combination of units
   (:mod:`cogate.controller.preemption.cheapest`: fewest PodDisruptionBudget violations, lowest
   highest unit priority, fewest pods, lowest sum of unit priorities) on which ``pack`` places
   minMember; none of its units is in vain.

Guarantees (tests/unit/controller/preemption/test_preemption_props.py): the victims suffice (the planner's ``pack``
places minMember on the room without them); no victim has the group's priority or more, nor sits
in a protected namespace (tests/unit/controller/preemption/test_protected.py); no gang
is left partly preempted below its minMember; ``DoesNotFitEvenWithPreemption`` exactly when the
group does not fit with every candidate gone. Minimality is *with respect to the plan*: putting
back any single victim unit (one pod, or a gang taken whole), the returned ``plan`` no longer
holds on that room, or the planner's ``pack`` no longer places minMember there (when the plan
came from the exhaustive fallback below or rule 9's search). Where the candidates are few (rule 9)
the victims are the cheapest admissible set on which ``pack`` places minMember
(tests/unit/controller/preemption/test_preemption_oracle.py compares with every subset); beyond,
a different placement of the members might need fewer victims: finding the fewest is a
bin-packing problem, and kube-scheduler too minimises per node for one pod, not over placements.

Fallback: when the greedy placement above finds no node for enough members, or ``pack`` does not
confirm its answer, the victims are chosen as ``SelectVictimsOnNode`` does at cluster scale:
every candidate removed, then every unit reprieved in the order above while ``pack`` still places
minMember, in rounds until one reprieves none (``pack`` is a heuristic: adding a pod back can make
it succeed where it failed). Its cost grows with the number of candidates times a ``pack``; it is
the exception.

Steps: :func:`select_victims` reads as a table of contents, one function of this module per step
(kube-scheduler ``Evaluator.Preempt``'s step in brackets; cogate has no extenders, and acting on
the answer is :mod:`cogate.controller.preemption.room`'s):

1. :func:`_eligible` [1) eligible]: minMember not yet bound, enough members, not held (rule 3);
   the group's priority (rule 1);
2. :func:`_free_room` [0) fetch]: the room the planner plans the group on (rule 4), the members that
   fit its free room placed on it;
3. :func:`_fits_without_preemption` (rule 3) and :func:`_policy_never` (rule 2);
4. :func:`_find_candidates` [2) find candidates] (rules 1 and 6: lower-priority pods, the gangs that
   may be touched, their slack; :mod:`cogate.controller.preemption.candidates`), and
   :func:`_with_every_candidate_gone` (rule 3: DoesNotFitEvenWithPreemption; first, unless
   :func:`_all_gone_check_waits`);
5. :func:`_select` [4) select]: per member the node whose victims are best, the reprieve and
   ``pack``'s confirmation (rules 5, 6 and 4; :mod:`cogate.controller.preemption.selection`), else
   :func:`_fallback` (the exhaustive fallback below); then :func:`_cheapest` (rule 9);
6. :func:`_answer` (rule 7): the :class:`Preemption`.

PodDisruptionBudgets are read by :mod:`cogate.controller.preemption.budgets`.

Inputs: the node and pod lists (from scratch, as ``planner.decide`` takes them), or the
incremental planner's view (``view=``: :meth:`PlanningState.bound_view
<cogate.controller.planning.planstate.PlanningState.bound_view>`, the controller's path), on which the rooms
start from the kept free room and no pass reads every pod; the answer is the same
(:func:`select_victims`; tests/unit/controller/preemption/test_preemption_view.py; bench/preemption.py).

Units: requests in the units of :mod:`cogate.controller.model.resources` (CPU millicores, memory
bytes); times in epoch seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from cogate.controller.model import minresources as minres
from cogate.controller.planning.capacity import Snapshot, pack
from cogate.controller.planning.room import NodeTable, Room
from cogate.controller.planning.explanations import held_reason, name_list, plural
from cogate.controller.model.words import fits_of
from cogate.controller.planning.filters import spec_key
from cogate.controller.planning.planner import Members, classify, members_anti, members_spread
from cogate.controller.planning.planstate import BoundView
from cogate.controller.model.records import NodeInfo, PodInfo, Promise
from cogate.controller.model.verdicts import GroupRequest, PlannerConfig
from cogate.controller.preemption.aggregate import Widened, nothing_text, rest_short, widen
from cogate.controller.preemption.budgets import Budget
from cogate.controller.preemption.candidates import (Candidates, base_room, candidate_rule, fast_path, gang_members,
                                                     gone_from_view, lent_room)
from cogate.controller.preemption.cheapest import MAX_CANDIDATES, as_selection, cheaper, cost_of
from cogate.controller.preemption.selection import Selection, Stale, exhaustive, more_important
from cogate.controller.preemption.units import NO_SLACK, NativeUnits, bound_of_namespaces, native_units, skipped_text, unit_name
from cogate.controller.model.nativegroups import Mode, NativeGroup

__all__ = ["Reason", "Gang", "Victim", "Preemption", "NoPreemption", "select_victims"]


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
    #: Only taking pods of protected namespaces (rule 8) would place minMember: nothing is preempted.
    ONLY_PROTECTED_PODS = "OnlyProtectedPods"
    #: A group of a set of PodGroups, not released: preempting for it alone could be in vain
    #: (:func:`cogate.controller.preemption.sets.alone`).
    IN_SET = "InSet"
    #: The victims found would leave a role below its minimum (:func:`cogate.controller.preemption.sets.with_roles`).
    ROLE_MINIMUMS = "RoleMinimums"


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


def select_victims(group: GroupRequest, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                   promised: Sequence[Promise], budgets: Sequence[Budget], gangs: Sequence[Gang],
                   config: PlannerConfig = PlannerConfig(), *,
                   snapshot: Snapshot | None = None, view: BoundView | None = None,
                   protected: frozenset[str] = frozenset(),
                   natives: Sequence[NativeGroup] = ()) -> Preemption | NoPreemption:
    """The pods to preempt so that ``group`` places minMember, or why none (module docstring,
    rules 1 to 8).

    ``nodes``: every node; ``pods``: as ``planner.decide`` takes them (bound non-terminal pods,
    members included; unbound pods with a nomination become room promised only through
    ``promised``); ``promised``: the room promised to others (``capacity.promised_room``: kept
    reservations and nominations), which victims cannot free; ``budgets``: every
    PodDisruptionBudget (:func:`~cogate.controller.preemption.budgets.budget_info`); ``gangs``:
    the other PodGroups (:class:`Gang`), whose bound members are taken alone only within their
    slack. ``snapshot``: a
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

    ``natives``: Kubernetes' own PodGroups
    (:class:`~cogate.controller.model.nativegroups.NativeGroup`, read where the API is served;
    empty where it is not): those in mode ``all`` are victim units (rule 9).

    ``protected``: namespaces whose pods are never victims (rule 8). On the fast path their pods
    are read from :meth:`BoundView.in_namespace <cogate.controller.planning.planstate.BoundView.in_namespace>`
    (the controller's state indexes them), else found by a pass over the view's pods.

    Never raises on well-typed records; deterministic for a given input.
    """
    pre = _eligible(group, config)
    if isinstance(pre, NoPreemption):
        return pre
    rooms = _free_room(pre, nodes, pods, promised, snapshot, view)
    no = _fits_without_preemption(pre, rooms) or _policy_never(pre)
    if no is not None:
        return no
    found = _find_candidates(pre, rooms, gangs, protected, natives)
    if isinstance(found, NoPreemption):
        return _only_protected(pre, rooms, gangs, protected, found, natives)
    all_gone: Room | None = None
    if not _all_gone_check_waits(pre, rooms):
        all_gone, no = _with_every_candidate_gone(pre, found)
        if no is not None:
            return _only_protected(pre, rooms, gangs, protected, no, natives)
    sel, plan = _select(pre, rooms, found, budgets)
    if plan is None:
        answer = _fallback(pre, rooms, found, budgets, all_gone)
        if isinstance(answer, NoPreemption):
            return _only_protected(pre, rooms, gangs, protected, answer, natives)
        sel, plan = answer
    sel, plan = _cheapest(pre, rooms, found, sel, plan)
    answer = _answer(sel, plan, pre.priority, rooms.table, budgets, pre.me, found.natives)
    return _whole_min_resources(pre, rooms, found, budgets, answer)


# -- the steps of select_victims ---------------------------------------------------------------


@dataclass(frozen=True)
class _Preemptor:
    """The group asking for room (step 1, :func:`_eligible`): its ``members`` as the planner
    counts them (``planner.classify``), how many more to place (``needed``: minMember minus the
    bound ones), its ``priority`` (its lowest gated member's, rule 1) and its name in messages
    (``me``)."""

    group: GroupRequest
    members: Members
    needed: int
    priority: int
    me: str


@dataclass(frozen=True)
class _Rooms:
    """The room the planner plans the group on (rule 4; step 2, :func:`_free_room`): ``table``
    its nodes, ``room`` with the members that fit it already placed (``placed``: uid -> node slot,
    ``pack``'s best attempt, left applied); ``view`` on the fast path
    (:func:`~cogate.controller.preemption.candidates.fast_path`), else ``snapshot``;
    ``promised``: the room promised to others."""

    table: NodeTable
    room: Room
    placed: dict[str, int]
    promised: Sequence[Promise]
    view: BoundView | None
    snapshot: Snapshot | None


@dataclass(frozen=True)
class _Found:
    """The candidates (rules 1 and 6; step 4, :func:`_find_candidates`): ``candidates`` by node,
    ``gone_room`` builds the room with every one of them gone; ``gang_pods``: the bound members of
    the gangs that may be touched, ``slack``: how many of each may go alone (its bound members
    minus its minMember; a native ``all`` group's is ``units.NO_SLACK``); ``natives``: the native
    ``all`` groups (rule 9), whose unit priorities the selection reads."""

    candidates: Candidates
    gone_room: Callable[[], Room]
    gang_pods: dict[tuple[str, str], list[tuple[PodInfo, int]]]
    slack: dict[tuple[str, str], int]
    natives: NativeUnits = NativeUnits()


def _eligible(group: GroupRequest, config: PlannerConfig) -> _Preemptor | NoPreemption:
    """Step 1 (``PodEligibleToPreemptOthers``): minMember not yet bound, enough members to reach
    it, the planner does not hold the group whatever the room (rule 3); the group's priority (rule 1)."""
    ms = classify(group, config.gate_name)
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
    return _Preemptor(group, ms, needed, min(m.priority for m in ms.gated), me)


def _free_room(pre: _Preemptor, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo], promised: Sequence[Promise],
               snapshot: Snapshot | None, view: BoundView | None) -> _Rooms:
    """Step 2 (rule 4): the room the planner plans the group on, on the view's free room (the
    fast path) or on a :class:`Snapshot` (the one given, else one of ``view``'s nodes and pods,
    else of ``nodes`` and ``pods``), with as many members placed on it as fit (``pack``)."""
    group = pre.group
    fast = view is not None and fast_path(view, group, snapshot)
    if view is not None and fast:
        table = view.table
        room = base_room(table, view.free, view.ports, promised, group)
    else:
        if view is not None and snapshot is None:
            nodes, pods = view.nodes, view.pods
        if snapshot is None:
            snapshot = Snapshot(nodes, pods, members_anti([group]), members_spread([group]))
        table = snapshot.table
        room = lent_room(snapshot, promised, group)
    placed = pack(room, pre.members.plannable, pre.needed)  # left applied: the members in free room
    return _Rooms(table, room, placed, promised, view if fast else None, None if fast else snapshot)


def _fits_without_preemption(pre: _Preemptor, rooms: _Rooms) -> NoPreemption | None:
    """Step 3, rule 3: the group places minMember on the free room: nothing to preempt."""
    if len(rooms.placed) < pre.needed:
        return None
    if rest_short(rooms.room, pre.group, pre.members, [m for m in pre.members.plannable if m.uid in rooms.placed]):
        return None  # the rest of spec.minResources does not fit: preempted for by aggregate.widen
    return NoPreemption(Reason.FITS_WITHOUT_PREEMPTION,
                        f"{pre.me} {fits_of(len(pre.members.bound) + len(rooms.placed), pre.group.min_member)} "
                        "without preemption")


def _policy_never(pre: _Preemptor) -> NoPreemption | None:
    """Step 3, rule 2: a plannable member with ``spec.preemptionPolicy: Never``
    (``PodEligibleToPreemptOthers``)."""
    never = [m.name for m in pre.members.plannable if m.preemption_policy == "Never"]
    if not never:
        return None
    return NoPreemption(Reason.PREEMPTION_POLICY_NEVER,
                        f"{pre.me} preempts nothing: preemptionPolicy Never on {name_list(sorted(never))}")


def _find_candidates(pre: _Preemptor, rooms: _Rooms, gangs: Sequence[Gang],
                     protected: frozenset[str], natives: Sequence[NativeGroup] = ()) -> _Found | NoPreemption:
    """Step 4 (rules 1, 6, 8 and 9): the bound pods of strictly lower priority outside ``protected``
    namespaces that may be taken, the other gangs' bound members (a gang with a member of the
    group's priority or higher, or of a protected namespace, is never touched) and their slack, the
    native ``all`` groups' units (:func:`~cogate.controller.preemption.units.native_units`);
    NoLowerPriorityPods when there is none."""
    group, priority = pre.group, pre.priority
    own = {m.uid for m in group.members}
    key = (group.namespace, group.name)
    gang_min = {(g.namespace, g.name): g.min_member for g in gangs if (g.namespace, g.name) != key}
    gang_pods = gang_members(gang_min, rooms.table.index, view=rooms.view, snapshot=rooms.snapshot)
    untouchable = {gk for gk, ps in gang_pods.items()
                   if gk[0] in protected or max(p.priority for p, _ in ps) >= priority}
    units = _native_units(natives, rooms, priority, protected)
    untouchable |= units.untouchable
    is_candidate = candidate_rule(priority, own, key, untouchable, protected)
    gone_room: Callable[[], Room]
    if rooms.view is not None:
        candidates, gone_room = gone_from_view(rooms.view, is_candidate, priority, own, key, untouchable,
                                               rooms.promised, group, protected, units.held)
    else:
        snapshot = rooms.snapshot
        assert snapshot is not None
        listed = [(p, i) for p, i in snapshot.bound if is_candidate(p)]
        candidates = Candidates.listed(listed)
        without = frozenset(p.uid for p, _ in listed)
        gone_room = lambda: lent_room(snapshot, rooms.promised, group, without)  # noqa: E731
    if not candidates.count:
        return NoPreemption(Reason.NO_LOWER_PRIORITY_PODS,
                            f"{pre.me} (priority {priority}) {fits_of(len(pre.members.bound) + len(rooms.placed), group.min_member)}"
                            " and no bound pod has a lower priority")
    gang_pods = {gk: ps for gk, ps in gang_pods.items() if gk not in untouchable}
    slack = {gk: len(ps) - gang_min[gk] for gk, ps in gang_pods.items()}
    gang_pods.update(units.pods)
    slack.update({gk: NO_SLACK for gk in units.pods})
    return _Found(candidates, gone_room, gang_pods, slack, units)


def _native_units(natives: Sequence[NativeGroup], rooms: _Rooms, priority: int,
                  protected: frozenset[str]) -> NativeUnits:
    """Rule 9: the native ``all`` groups' units, their pods read in their namespaces only."""
    if not any(g.mode is Mode.ALL for g in natives):
        return NativeUnits()
    spaces = {g.namespace for g in natives if g.mode is Mode.ALL}
    bound = bound_of_namespaces(spaces, rooms.table.index, view=rooms.view,
                                bound=rooms.snapshot.bound if rooms.snapshot is not None else ())
    return native_units(natives, bound, priority, protected)


def _only_protected(pre: _Preemptor, rooms: _Rooms, gangs: Sequence[Gang], protected: frozenset[str],
                    no: NoPreemption, natives: Sequence[NativeGroup] = ()) -> NoPreemption:
    """Rule 8's report: when nothing outside the ``protected`` namespaces makes room
    (``no``: NoLowerPriorityPods or DoesNotFitEvenWithPreemption), whether every lower-priority
    pod gone, protected ones included, would place minMember; then ``OnlyProtectedPods`` names
    the namespaces, else ``no`` stands. Costs one more ``pack`` on the room with every candidate
    gone, only for a group that preempts nothing while protected namespaces are set."""
    if not protected or no.reason not in (Reason.NO_LOWER_PRIORITY_PODS, Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION):
        return no
    found = _find_candidates(pre, rooms, gangs, frozenset(), natives)
    if isinstance(found, NoPreemption):
        return no
    _, still = _with_every_candidate_gone(pre, found)
    if still is not None:
        return no
    return NoPreemption(Reason.ONLY_PROTECTED_PODS,
                        f"{pre.me} (priority {pre.priority}) {fits_of(len(pre.members.bound) + len(rooms.placed), pre.group.min_member)}"
                        f"; only preempting pods in the protected namespaces "
                        f"{name_list(sorted(protected))} would make room, and cogate never preempts those: "
                        "preempting nothing")


def _with_every_candidate_gone(pre: _Preemptor, found: _Found) -> tuple[Room, NoPreemption | None]:
    """Step 4, rule 3 (kube-scheduler: a node where the pod does not fit with all lower-priority
    pods removed is not a candidate): the room with every candidate gone (kept for the exhaustive
    fallback) and DoesNotFitEvenWithPreemption when ``pack`` does not place minMember on it."""
    all_gone = found.gone_room()
    mark_all = all_gone.mark()
    best = pack(all_gone, pre.members.plannable, pre.needed)
    all_gone.rollback(mark_all)
    if len(best) >= pre.needed:
        return all_gone, None
    return all_gone, NoPreemption(
        Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION,
        f"{pre.me} {fits_of(len(pre.members.bound) + len(best), pre.group.min_member)} even with all "
        f"{plural(found.candidates.count, 'pod')} of priority below {pre.priority} gone: preempting nothing")


def _all_gone_check_waits(pre: _Preemptor, rooms: _Rooms) -> bool:
    """Whether :func:`_with_every_candidate_gone` may wait until no plan is confirmed: on the fast
    path with one member spec, ``pack`` places min(members, the sum over nodes of how many fit
    each), which only grows with the room, so a confirmed plan proves rule 3's check passes (the
    same answer, without building the room of every candidate gone). Otherwise the check comes
    first, as kube-scheduler's "fits with all removed"."""
    return rooms.view is not None and len({spec_key(m, False, False) for m in pre.members.plannable}) == 1


def _select(pre: _Preemptor, rooms: _Rooms, found: _Found, budgets: Sequence[Budget]
            ) -> tuple[Selection, dict[str, str] | None]:
    """Step 5 (rules 5, 6 and 4): each member still needed after the free room goes to the node
    whose victims are best (``pickOneNodeForPreemption``, :meth:`Selection.choose
    <cogate.controller.preemption.selection.Selection.choose>`), then every victim unit is offered
    a reprieve against the plan, and ``pack`` must confirm the plan on the room without the
    victims. The plan (member uid -> node name) is None when no node takes enough members, a kept
    choice went stale, or ``pack`` does not confirm it: then :func:`_fallback`."""
    needed = pre.needed
    sel = Selection(pre.group, rooms.table, rooms.room, pre.members.plannable, needed, found.candidates, budgets,
                    found.gang_pods, found.slack, found.natives.priority)
    sel.plan = dict(rooms.placed)  # pack left its best attempt applied: members in free room
    try:
        for m in pre.members.plannable:
            if len(sel.plan) >= needed:
                break
            if m.uid in sel.plan:
                continue
            c = sel.choose(m)
            if c is not None:
                sel.take(m, c)
    except Stale:
        sel.plan = {}
    if len(sel.plan) < needed:
        return sel, None
    sel.reprieve()
    if not sel.confirmed():
        return sel, None
    return sel, {uid: rooms.table.nodes[i].name for uid, i in sel.plan.items()}


def _fallback(pre: _Preemptor, rooms: _Rooms, found: _Found, budgets: Sequence[Budget],
              all_gone: Room | None) -> tuple[Selection, dict[str, str]] | NoPreemption:
    """Step 5 when :func:`_select` confirms no plan: rule 3's check if it waited
    (:func:`_all_gone_check_waits`; ``all_gone`` is None then), then the exhaustive fallback
    (:func:`~cogate.controller.preemption.selection.exhaustive`) on the room with every candidate
    gone."""
    if all_gone is None:
        all_gone, no = _with_every_candidate_gone(pre, found)
        if no is not None:
            return no
    return exhaustive(pre.group, rooms.table, pre.members.plannable, pre.needed, found.candidates, budgets,
                      found.gang_pods, found.slack, all_gone, found.natives.priority)


def _cheapest(pre: _Preemptor, rooms: _Rooms, found: _Found, sel: Selection, plan: dict[str, str]
              ) -> tuple[Selection, dict[str, str]]:
    """Step 5, rule 9: a combination of victim units strictly cheaper than the answer so far, when
    the candidates are few (:func:`~cogate.controller.preemption.cheapest.cheaper`); else the answer
    stands."""
    if found.candidates.count > MAX_CANDIDATES:
        return sel, plan  # the search's bound, checked before any cost is computed
    bound = cost_of(sel, (p for p, _ in sel.alone.values()), sel.whole)
    better = cheaper(sel, bound, found.gone_room, pre.members.plannable, pre.needed)
    if better is None:
        return sel, plan
    choice, slots = better
    nodes = rooms.table.nodes
    return as_selection(sel, choice, slots), {uid: nodes[i].name for uid, i in slots.items()}


def _whole_min_resources(pre: _Preemptor, rooms: _Rooms, found: _Found, budgets: Sequence[Budget],
                         answer: Preemption) -> Preemption | NoPreemption:
    """Step 6, ``spec.minResources``: the answer widened to the rest of it, or nothing at all
    (:func:`~cogate.controller.preemption.aggregate.widen`)."""
    more = widen(pre.group, pre.members, [v.pod for v in answer.victims], answer.plan, found.candidates,
                 found.gone_room, found.gang_pods, rooms.table, budgets)
    if more is None:
        return answer
    if not isinstance(more, Widened):
        return NoPreemption(Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION, nothing_text(pre.me, more))
    victims = sorted(list(answer.victims) + [Victim(*v) for v in more.victims],
                     key=lambda v: (v.node, v.pod.namespace, v.pod.name, v.pod.uid))
    return Preemption(tuple(victims), answer.plan, answer.priority, tuple(sorted(set(answer.gangs_taken) | more.gangs)),
                      f"{answer.message}; {more.text}")


def _answer(sel: Selection, plan: dict[str, str], priority: int, table: NodeTable, budgets: Sequence[Budget],
            me: str, natives: NativeUnits = NativeUnits()) -> Preemption:
    """Step 6 (rule 7): the :class:`Preemption`: the victims sorted by (node, namespace, name,
    uid), each marked when it is beyond a PodDisruptionBudget (counted over all victims, most
    important first), the gangs taken whole, and its one-line message."""
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
        message += f"; whole gangs: {name_list([unit_name(gk) for gk in gangs])}"
    skipped = skipped_text(sel.half, natives, sel.whole)
    if skipped:
        message += f"; {skipped}"
    if bad:
        message += f"; {plural(len(bad), 'victim')} beyond a PodDisruptionBudget"
    return Preemption(tuple(victims), dict(plan), priority, gangs, message)
