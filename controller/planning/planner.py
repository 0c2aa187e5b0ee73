"""Gang admission planner (pure): which PodGroups may lose their scheduling gate now.

``decide`` takes a snapshot (nodes, bound pods, groups, reservations, clock) and
returns one :class:`GroupVerdict` per group plus the reservations to keep. It does
no I/O and is deterministic for a given input.

This module is the decision sequence: the order in which groups are judged, the rules that
give each verdict, pins and reservations. The rest of the planner lives beside it (the names
the shell uses are re-exported here, ``__all__``): the vocabulary
(:mod:`cogate.controller.model.verdicts`: :class:`GroupRequest`, :class:`PlannerConfig`,
:class:`GroupVerdict`, :class:`Outcome`, :class:`Decision`); where a member fits, the
capacity model (:mod:`cogate.controller.planning.capacity`: kube-scheduler's NodeResourcesFit,
NodePorts, InterPodAffinity and PodTopologySpread on a room per node, and the packing
heuristic; :mod:`cogate.controller.planning.filters`: the load-independent filters NodeUnschedulable,
TaintToleration, NodeAffinity and VolumeBinding's bound PVs' node affinity); and the wording
of what a waiting group lacks (:mod:`cogate.controller.planning.explanations`). A group whose members'
required pod affinity no bound pod satisfies on any node gets ``Unschedulable``.

Pins and reservations: a planned member is pinned to its node and reserved only when it
names :data:`DEFAULT_SCHEDULER` and has no unchecked constraint (``PodInfo.unplanned``);
otherwise its ``release`` entry is ``''`` (kube-scheduler, or its own scheduler, places it)
and no reservation is made. A gated member naming a scheduler outside
``PlannerConfig.scheduler_names`` holds its group (``Unschedulable``), as do claims
kube-scheduler cannot use yet (``PodInfo.volume_problems``, from
:mod:`cogate.controller.model.volumes`: VolumeBinding) and an unchecked constraint with
``PlannerConfig.unchecked == "hold"``.

Order, backfill and starvation:

* Released groups (``GroupRequest.released``: a release that still stands, see
  :func:`cogate.controller.status.status.release_stands`) are handled first: a new
  gated member (replacement, Job pod, rollout surge pod) is ungated once the
  planner finds it room, towards that node (reserved); until then it stays
  gated and the verdict names it in ``waiting`` with what it lacks. The shell
  stops passing ``released=True`` once the release ended (timed out, failed,
  fewer than minMember left of it: ``status.release_end``), so members that
  come back gated then are planned as a gang again.
* Other groups follow by priority (highest member ``spec.priority``) descending,
  then ``created`` (oldest first), then namespace/name.
* A group that cannot be placed even on the empty eligible nodes (bound pods
  and reservations ignored, except the group's own bound members, which keep
  their room on their nodes) is ``ExceedsClusterCapacity``; ``Unschedulable``
  and ``WaitingForMembers`` groups are skipped the same way: none blocks others.
* A group that fits the empty cluster but not the current one does not block
  later groups (backfill) until it has waited ``starvation_seconds`` since it
  became complete (``max(created, created of its minMember-th oldest
  member)``). From then on it is *starving* and **no later (unreleased) group
  is released** while it waits: the simplest policy that guarantees no later
  group takes room it needs (holding only the currently free room would let
  later groups take fragments the starving group needs as more room frees).
  The block is scoped to the room the starving group could use: a later group
  none of whose members is eligible (load-independent filters) for a node the
  starving group's members are eligible for takes nothing from it and is judged
  as usual (``_Scope``; when either group has required pod anti-affinity every
  node counts, since a pod elsewhere can forbid a whole topology domain). Each
  starving group blocks within its scope; released groups' new members are not
  blocked.

Reservations: room of members released by an earlier decision stays reserved
until the pod is bound (it appears bound in ``pods`` and is counted there), is
deleted (its uid is no longer a member of any given group nor a bound pod; so
pass every group to ``decide``) or becomes terminal. While the member is pinned
to the reserved node and unbound (:func:`cogate.controller.planning.patches.awaiting_bind`:
our gate gone, required node affinity naming that node) the reservation holds
however long kube-scheduler takes: the pod will bind there and nowhere else, so
the room is taken whether kube-scheduler is slow, stopped or busy. Otherwise (the
release patch not applied yet, or the member released unpinned under placement
``free``, where kube-scheduler may bind it elsewhere) it lapses once ``expires``
passes (``now + reservation_ttl_seconds`` at release). A reservation whose pod is
still gated in a group that is not released is dropped: that release never took
effect and is planned afresh. A gated member of a released group that still has
a reservation is ungated again towards its reserved node.

Room promised (:func:`cogate.controller.planning.capacity.promised_room`): the reservations
kept and the nominations of unbound pods in ``pods`` (``PodInfo.nominated_node``,
kube-scheduler's ``status.nominatedNodeName``) are one list of
:class:`~cogate.controller.model.records.Promise`, charged on the room before any group is
planned. A nomination counts only against members of its priority or lower: for a
group whose lowest member priority is above a nomination's, that nomination's
resources are lent to the group while it is planned (``Room.lend``/``repay``).
Room held for a preempting group (``Promise`` kind ``"preempting"``, passed as ``decide``'s
``promised``: the plan of a preemption in flight, :mod:`cogate.controller.preemption.inflight`) counts
against every other group and is lent to its holder the same way.

Replicas sharing a PodGroup (:mod:`cogate.controller.model.replicas`: LeaderWorkerSet
groups, JobSet Jobs): new members of a released group that belong to a replica are
released together or not at all: the replica waits gated until it has its expected
number of members (``expected_size``) and all its gated members fit at once.

Membership accounting for a group:

* present = live members not in phase Failed; fewer than ``min_member`` ->
  ``WaitingForMembers``; so is a group whose bound + plannable members are
  fewer than ``min_member`` because others are held by other scheduling gates
  (or pending ungated without a node: the scheduler is already on them).
* bound = members bound to a node (not Failed) or Succeeded. Succeeded members count only for a
  released group (its finished work); a gang decision (an unreleased group) leaves them out:
  they cannot run again (:func:`cogate.controller.status.status.release_stands`).
* gated = unbound members carrying our gate. Only those whose *only* gate is
  ours are planned; members that also carry other gates are ungated on release
  (node ``''``) but do not count, and members gated only by other gates are not
  ours (neither placed nor bound).
* ``fits = bound + planned gated``; ``Released`` iff ``fits >= min_member`` (and, with
  ``spec.minResources``, the rule below); then every gated member is in ``release`` (``''`` for
  those not planned).

``spec.minResources`` (:mod:`cogate.controller.model.minresources`, scheduler-plugins
``CheckClusterResource``): a plan that reaches minMember is kept only when the free room it
leaves, summed over the nodes some present member is eligible for, holds the rest of
minResources (minResources with ``pods`` = minMember, minus the requests of the bound and planned
members); else it is undone and the group waits (``InsufficientCapacity``, or
``ExceedsClusterCapacity`` when even the empty nodes do not hold it), the verdict naming each
short resource (``GroupVerdict.min_resources_short``). Released groups are not held to it (their
new members are planned one by one as above): docs/semantics.md, "minResources".

Code map: ``decide`` builds a :class:`Pass`, whose
:class:`~cogate.controller.planning.capacity.Snapshot` (nodes and bound pods only, with the static
filter cache) yields the :class:`~cogate.controller.planning.room.Room`: free room per node after
bound pods and kept reservations, with an undo log. Released groups go through
``Pass.ungate_new_members``, the rest through ``Pass.judge``, a run of early returns with
one method per rule above (``_invalid_min_member``, ``_invalid_min_resources``, ``_too_few_present``,
``_held``, ``_waiting_for_members``, ``_behind_starving_group``, ``_try_release`` with
``_min_resources_wait``, ``_explain``); each
sets ``Pass.basis`` (a :class:`Basis`), what the verdict read. Topology spread lives in the
``Room`` (a :class:`cogate.controller.planning.spread.Tracker` of pods per domain, undone with the
room; ``Room._place_spread`` places such members one at a time); which planned members are
pinned and reserved is ``_pins``, applied by ``Pass._reserve``. :func:`run_pass` holds the
order of a pass. The incremental planner (:mod:`cogate.controller.planning.planstate`) runs the
same ``Pass`` on state kept between passes and skips groups whose verdict's basis did
not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cogate.controller.model import minresources as minres
from cogate.controller.model import replicas as replicas_mod
from cogate.controller.planning.capacity import (
    Snapshot,
    pack,
    pinned_node_problems,
    promised_room,
    reservation_promise,
    room_by_node,
)
from cogate.controller.planning.explanations import (
    NAMES_SHOWN,
    Short,
    held_by_other_gates,
    held_reason,
    name_list,
    plural,
    shortfall,
    unchecked_note,
    unplaceable,
    unplaceable_message,
    waiting_text,
)
from cogate.controller.planning.filters import spec_key
from cogate.controller.planning.room import Room, req_with_pod
from cogate.controller.planning.patches import awaiting_bind
from cogate.controller.model.records import NodeInfo, PodInfo, Promise, Reservation
from cogate.controller.model.verdicts import (
    DEFAULT_SCHEDULER,
    UNCHECKED_POLICIES,
    Decision,
    GroupRequest,
    GroupVerdict,
    Outcome,
    PlannerConfig,
    complete_since,
    group_priority,
    mixed_priorities,
)

__all__ = [
    # the vocabulary (cogate.controller.model.verdicts)
    "Outcome", "GroupRequest", "DEFAULT_SCHEDULER", "UNCHECKED_POLICIES", "PlannerConfig", "GroupVerdict", "Decision",
    "mixed_priorities", "group_priority", "complete_since",
    # the capacity model (cogate.controller.planning.capacity) and the wording (cogate.controller.planning.explanations)
    "pinned_node_problems", "room_by_node", "held_by_other_gates", "NAMES_SHOWN",
    # the decision sequence; the rest is for the incremental planner (cogate.controller.planning.planstate)
    "decide", "Pass", "run_pass", "Members", "Miss", "Basis", "starving", "members_anti", "members_spread",
    "fits_empty_key", "classify",
]


# -- membership and pins ------------------------------------------------------------------


@dataclass
class Members:
    """How a group's members count (module doc, "Membership accounting"), each list oldest
    first: ``present`` (not Failed), ``bound`` (bound and not Failed, or Succeeded), ``gated``
    (unbound, not terminal, carrying our gate), ``plannable`` (gated by our gate alone)."""

    present: list[PodInfo] = field(default_factory=list)
    bound: list[PodInfo] = field(default_factory=list)
    gated: list[PodInfo] = field(default_factory=list)  # carry our gate, unbound
    plannable: list[PodInfo] = field(default_factory=list)  # our gate is the only gate


def _classify(group: GroupRequest, gate: str) -> Members:
    r = Members()
    for m in sorted(group.members, key=lambda p: (p.created, p.name, p.uid)):
        if m.phase == "Succeeded" and not group.released:
            continue  # cannot run again: never part of a new gang (docs/semantics.md "Generations")
        if m.phase != "Failed":
            r.present.append(m)
        if (m.bound and m.phase != "Failed") or m.phase == "Succeeded":
            r.bound.append(m)
        elif m.gated_by(gate) and not m.bound and not m.terminal:
            r.gated.append(m)
            if all(g == gate for g in m.gates):
                r.plannable.append(m)
    return r


#: The membership accounting above, for other pure choosers (:mod:`cogate.controller.preemption.victims`).
classify = _classify


def _pins(m: PodInfo, config: PlannerConfig) -> bool:
    """A planned member is pinned and reserved only when the planner models everything that
    decides its node: kube-scheduler's default profile, no unchecked constraint and no claim
    kube-scheduler cannot use yet (a new member of a released group is ungated regardless)."""
    return m.scheduler_name == DEFAULT_SCHEDULER and not m.unplanned and not m.volume_problems


# -- the pass ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    """Node indexes a group could use; ``everywhere`` when its placement can affect any node."""

    nodes: frozenset[int]
    everywhere: bool = False

    def overlaps(self, other: "_Scope") -> bool:
        return self.everywhere or other.everywhere or not self.nodes.isdisjoint(other.nodes)


@dataclass(frozen=True)
class Miss:
    """A plan on the current room that placed too few: ``fits`` = bound + planned,
    ``unplaced`` plannable members left over, ``short`` the text of what is lacking,
    ``promised`` the room promised to others (reservations of other groups' members,
    nominations) on nodes the unplaced members are eligible for, at the group's turn: what a
    waiting message can name as "held for" (each :class:`~cogate.controller.model.records.Promise`
    names its ``holder``)."""

    fits: int
    unplaced: list[PodInfo]
    short: Short
    promised: tuple[Promise, ...] = ()


@dataclass(frozen=True)
class Basis:
    """What the verdict :meth:`Pass.judge` just gave was computed from, so that the
    incremental planner (:mod:`cogate.controller.planning.planstate`) knows when it still holds:

    * ``"group"``: the ``GroupRequest`` alone (invalid minMember, waiting for members);
    * ``"blocker"``: the group, the starving group ahead of it, and the nodes;
    * ``"room"``: the group, the nodes, and the free room at its turn as the failed plan
      ``miss`` read it, with no starving group ahead; while it does not starve (complete
      ``since``, epoch seconds; None: not complete);
    * ``"aggregate"``: the group, the nodes, and the whole free room at its turn (a wait for the
      rest of ``spec.minResources``, which sums every eligible node's room), with no starving
      group ahead in its scope; while it does not starve (``since``);
    * ``"pass"``: state of this pass that is not kept (a release, a starving group, pod
      affinity against bound pods): judged again every pass.
    """

    reads: Literal["group", "blocker", "room", "aggregate", "pass"]
    members: Members | None = None
    miss: Miss | None = None
    since: float | None = None


def _index_key(index: str) -> tuple[int, str]:
    """Replica indexes in number order ("2" before "10"), odd ones after, by text."""
    return (int(index), "") if index.isdigit() else (1 << 62, index)


def _verdict(
    g: GroupRequest, outcome: Outcome, fits: int, message: str, release: Mapping[str, str] | None = None
) -> GroupVerdict:
    return GroupVerdict(g.namespace, g.name, outcome, release or {}, fits, message)


def _order_key(g: GroupRequest) -> tuple[int, float, str, str]:
    """Priority descending, then oldest first, then namespace/name."""
    return (-group_priority(g), g.created, g.namespace, g.name)


#: The order the planner plans groups in (public: the provisioning room asks in the same order).
order_key = _order_key


def starving(since: float, now: float, config: PlannerConfig) -> bool:
    """A group complete since ``since`` has waited ``starvation_seconds`` at ``now``: it starves."""
    return now - since >= config.starvation_seconds


def members_anti(groups: Sequence[GroupRequest]) -> bool:
    """Some member has required pod anti-affinity (the room then tracks where pods sit)."""
    return any(m.required_pod_anti_affinity for g in groups for m in g.members)


def members_spread(groups: Sequence[GroupRequest]) -> bool:
    """Some member has hard topology spread constraints (the room then counts pods per domain)."""
    return any(m.topology_spread for g in groups for m in g.members)


def fits_empty_key(group: GroupRequest, ms: Members, anti_active: bool, spread_active: bool) -> tuple[Any, ...]:
    """Everything :meth:`Pass.fits_empty` reads of a group besides the nodes (the plannable
    members, and the bound ones whose room it charges: :meth:`Pass._charge_bound_members`; with
    ``spec.minResources``, the constraints of every present member, whose nodes it sums):
    equal keys, equal answers for one node generation (the incremental planner keeps them)."""
    return (group.min_member, group.min_resources,
            tuple((spec_key(m, anti_active, spread_active), m.uid, m.node_name, m.terminal) for m in ms.bound),
            tuple((spec_key(m, anti_active, spread_active), m.name, m.uid) for m in ms.plannable),
            # minResources counts room on every node a present member is eligible for
            tuple(spec_key(m, anti_active, spread_active)[0] for m in ms.present if not m.terminal)
            if group.min_resources is not None else ())


class Pass:
    """One call of :func:`decide`: the room left as groups are taken in order, the
    reservations kept and made, and the starving group that blocks later ones.

    ``snapshot``: a :class:`~cogate.controller.planning.capacity.Snapshot`, or the incremental
    planner's state with the same interface. After each :meth:`judge`, ``basis`` says what the
    verdict was computed from. The incremental planner (:mod:`cogate.controller.planning.planstate`)
    subclasses it: it overrides :meth:`judge` and :meth:`fits_empty` (to keep answers between
    passes) and reads ``room``, ``basis``, ``blockers``, ``now`` and ``config``.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        groups: Sequence[GroupRequest],
        reservations: Sequence[Reservation],
        now: float,
        config: PlannerConfig,
        promised: Sequence[Promise] = (),
    ) -> None:
        self.now = now
        self.config = config
        self.gate = config.gate_name
        self.member_of = {m.uid: (m, g) for g in groups for m in g.members}
        self.snapshot = snapshot
        self.nodes = snapshot.table.nodes
        self.basis = Basis("pass")
        self.kept = [r for r in reservations if self._still_holds(r)]
        self.reserved = {r.pod_uid: r for r in self.kept}
        holders = {r.pod_uid: f"PodGroup {self.member_of[r.pod_uid][1].namespace}/{self.member_of[r.pod_uid][1].name}"
                   for r in self.kept}
        #: Room promised (reservations kept, nominations), charged on ``room``.
        self.promised = promised_room([(r, self.member_of[r.pod_uid][0]) for r in self.kept],
                                      getattr(snapshot, "nominated", ()), holders) + list(promised)
        self.room = self.snapshot.room(self.promised)
        self._empty: Room | None = None
        self.new_reservations: list[Reservation] = []
        #: Starving groups in order, each with the room it could use: later groups in scope wait.
        self.blockers: list[tuple[GroupRequest, _Scope]] = []

    def reservations(self) -> tuple[Reservation, ...]:
        """The reservations to keep: those of earlier passes that still hold, then this pass's."""
        return tuple(self.kept) + tuple(self.new_reservations)

    def _still_holds(self, r: Reservation) -> bool:
        """A reservation holds room until its pod is among the bound pods, deleted or terminal;
        while the pod is pinned to the reserved node and unbound (``awaiting_bind``) the TTL does
        not end it (the pod can only bind there: the room is taken however long kube-scheduler
        takes); otherwise it also ends when ``expires`` passes. One whose pod is gated again in an
        unreleased group never took effect.

        A member the members cache already shows bound keeps its reservation until the bound-pods
        cache has it too: the two caches come from separate watches, and in between the pod's
        requests would be charged nowhere, so another group could be released into its room (seen
        in the Coscheduling benchmark: 41 members pinned to a node that holds 40)."""
        if r.pod_uid in self.snapshot.bound_uids:
            return False
        known = self.member_of.get(r.pod_uid)
        if known is None:
            return False
        m, g = known
        if m.terminal:
            return False
        if m.bound:
            return True
        if awaiting_bind(m, self.gate) == r.node_name:
            return True
        if r.expires <= self.now:
            return False
        return not (m.gated_by(self.gate) and not g.released)

    def _lend(self, g: GroupRequest) -> list[tuple[Promise, int]]:
        """Lend the group the room of nominations below its lowest member priority, and the room
        held for its own preemption (module doc, "Room promised"); :meth:`Room.repay` after its verdict."""
        if not self.room.nominations and not self.room.holds:
            return []
        return self.room.lend(min((m.priority for m in g.members), default=0), _holder(g))

    def lends(self, g: GroupRequest) -> bool:
        """Some nomination's room, or room held for ``g``'s preemption, would be lent to ``g``
        (its verdict then reads this pass's room)."""
        if not self.room.nominations and not self.room.holds:
            return False
        low = min((m.priority for m in g.members), default=0)
        holder = _holder(g)
        return (any(p.priority < low for p, _ in self.room.nominations)
                or any(p.holder == holder for p, _ in self.room.holds))

    def promised_for(self, g: GroupRequest, members: Sequence[PodInfo]) -> tuple[Promise, ...]:
        """Room promised to others on nodes ``members`` are eligible for (not to ``g``'s own
        members), in the order charged: for messages ("held for ...")."""
        if not self.room.promised:
            return ()
        eligible = _eligible(self.room, members)
        own = {m.uid for m in g.members}
        return tuple(p for p, i in self.room.promised if i in eligible and p.pod.uid not in own)

    def _reserve(self, members: Sequence[PodInfo], plan: Mapping[str, int]) -> dict[str, str]:
        """uid -> the node each of ``members`` is released to ('' = unpinned: not planned, or a
        member the planner cannot foresee, :func:`_pins`); reserves the room of the pinned ones."""
        release: dict[str, str] = {}
        for m in members:
            i = plan.get(m.uid)
            if i is not None and not _pins(m, self.config):
                i = None
            release[m.uid] = self.nodes[i].name if i is not None else ""
            if i is not None:
                self.new_reservations.append(Reservation(
                    pod_uid=m.uid,
                    namespace=m.namespace,
                    name=m.name,
                    node_name=self.nodes[i].name,
                    requests=dict(m.requests),
                    host_ports=m.host_ports,
                    expires=self.now + self.config.reservation_ttl_seconds,
                ))
                # room promised to this group from now on in the pass: named to later groups' messages
                self.room.promised.append((reservation_promise(self.new_reservations[-1], m, f"PodGroup {m.namespace}/{m.group}"), i))
        return release

    # -- released groups

    def ungate_new_members(self, g: GroupRequest) -> GroupVerdict:
        """A released group: a new gated member is ungated towards its reservation, else towards
        the node the planner finds it (reserved); one without room (or held by another gate as
        well) stays gated and is named in ``waiting``: releasing it unplanned would send it to
        kube-scheduler with nowhere to go (docs/semantics.md, "New members of a released group").
        Members of a replica (:mod:`cogate.controller.model.replicas`) go together or not at all."""
        lent = self._lend(g)
        try:
            return self._ungate_new_members(g)
        finally:
            if lent:
                self.room.repay(lent)

    def _ungate_new_members(self, g: GroupRequest) -> GroupVerdict:
        ms = _classify(g, self.gate)
        plannable = {m.uid for m in ms.plannable}
        release: dict[str, str] = {}
        to_plan = []
        held: list[PodInfo] = []
        for m in ms.gated:
            r = self.reserved.get(m.uid)
            if r is not None:
                release[m.uid] = r.node_name
            elif m.uid in plannable:
                to_plan.append(m)
            else:
                held.append(m)
        plan, replica_parts, replica_waiting, to_plan = self._whole_replicas(ms, to_plan)
        lone_plan = pack(self.room, to_plan, len(to_plan)) if to_plan else {}
        plan.update(lone_plan)
        unplaced = [m for m in to_plan if m.uid not in lone_plan]
        short = shortfall(self.room, unplaced, len(unplaced)) if unplaced else Short("")
        self.room.commit()
        planned_members = [m for m in ms.gated if m.uid in plan]
        release.update(self._reserve(planned_members, plan))
        waiting = tuple(m.name for m in replica_waiting + unplaced + held)
        parts = [f"ungating {plural(len(release), 'new member')}"] if release else []
        parts.extend(replica_parts)
        if unplaced:
            parts.append(waiting_text(unplaced, short))
        if held:
            parts.append(f"{plural(len(held), 'new member')} ({name_list([m.name for m in held])}) also held by other scheduling gates")
        message = "released; " + "; ".join(parts) if parts else "released"
        fits = len(ms.bound) + len(release)
        return GroupVerdict(g.namespace, g.name, Outcome.ALREADY_RELEASED, release, fits, message, waiting)

    def _whole_replicas(self, ms: Members, to_plan: list[PodInfo]
                        ) -> tuple[dict[str, int], list[str], list[PodInfo], list[PodInfo]]:
        """Plan the new members of ``to_plan`` that belong to a replica, one replica at a time
        (lowest index first), each whole or not at all: a replica with fewer present members than
        :func:`~cogate.controller.model.replicas.expected_size` waits for the rest; one whose gated
        members do not all fit now waits for room (its partial plan undone). Returns (the plan of
        the replicas placed, uncommitted; message parts; the members that wait; the members of no
        replica, left to plan one by one)."""
        mine = replicas_mod.by_replica(to_plan)
        if not mine:
            return {}, [], [], to_plan
        present = replicas_mod.by_replica(ms.present)
        plan: dict[str, int] = {}
        parts: list[str] = []
        waiting: list[PodInfo] = []
        for replica in sorted(mine, key=lambda r: (r.kind, r.owner, r.role, _index_key(r.index))):
            new = mine[replica]
            size = replicas_mod.expected_size(replica, present)
            have = len(present.get(replica, ()))
            if size and have < size:
                waiting.extend(new)
                parts.append(f"{replica}: {have} of {size} members present, released whole once all exist")
                continue
            mark = self.room.mark()
            got = pack(self.room, new, len(new))
            if len(got) == len(new):
                plan.update(got)
                continue
            unplaced = [m for m in new if m.uid not in got]
            short = shortfall(self.room, unplaced, len(unplaced)).text
            self.room.rollback(mark)
            waiting.extend(new)
            parts.append(f"{replica}: {len(got)} of {len(new)} new members fit, released whole or not at all "
                         f"({short})")
        if len(present) > 1 and waiting:
            names = name_list([str(r) for r in sorted(present, key=lambda r: (r.kind, r.owner, r.role,
                                                                               _index_key(r.index)))])
            parts.append(f"members of {len(present)} replicas share this PodGroup ({names}): give each replica "
                         "its own PodGroup (its own pod-group label value, minMember = the replica's size) to "
                         "gang-schedule each")
        return plan, parts, waiting, [m for m in to_plan if replicas_mod.replica_of(m) is None]

    # -- other groups, in order: the first rule that applies gives the verdict

    def judge(self, g: GroupRequest) -> GroupVerdict:
        lent = self._lend(g)
        try:
            verdict = self._judge(g)
        finally:
            if lent:
                self.room.repay(lent)
        if lent and self.basis.reads in ("room", "aggregate"):
            self.basis = Basis("pass", self.basis.members, self.basis.miss, self.basis.since)
        return verdict

    def _judge(self, g: GroupRequest) -> GroupVerdict:
        ms = _classify(g, self.gate)
        self.basis = Basis("group", ms)
        if (verdict := self._invalid_min_member(g, ms)) is not None:
            return verdict
        if (verdict := self._invalid_min_resources(g, ms)) is not None:
            return verdict
        if (verdict := self._too_few_present(g, ms)) is not None:
            return verdict
        if (verdict := self._held(g, ms)) is not None:
            return verdict
        if (verdict := self._waiting_for_members(g, ms)) is not None:
            return verdict
        self.basis = Basis("blocker", ms)
        if not self._holds_room(g) and (verdict := self._behind_starving_group(g, ms)) is not None:
            return verdict
        self.basis = Basis("pass", ms)
        attempt = self._try_release(g, ms)
        if isinstance(attempt, GroupVerdict):
            return attempt
        return self._explain(g, ms, attempt)

    def _invalid_min_member(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        if g.min_member >= 1:
            return None
        return _verdict(g, Outcome.UNSCHEDULABLE, len(ms.bound), f"invalid minMember {g.min_member}")

    def _invalid_min_resources(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """``spec.minResources`` that could not be read (:func:`cogate.controller.model.minresources.parse`)."""
        if not g.min_resources_error:
            return None
        return _verdict(g, Outcome.UNSCHEDULABLE, len(ms.bound), f"invalid {g.min_resources_error}")

    def _too_few_present(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """Fewer than minMember members present."""
        if len(ms.present) >= g.min_member:
            return None
        present = f"{len(ms.present)} of {g.min_member} members present"
        return _verdict(g, Outcome.WAITING_FOR_MEMBERS, len(ms.bound), present)

    def _held(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """Members cogate must not release whatever the room (an unknown scheduler, claims
        kube-scheduler cannot use yet, unchecked constraints under ``hold``: :func:`held_reason`)."""
        held = held_reason(ms.gated, self.config)
        if not held:
            return None
        return _verdict(g, Outcome.UNSCHEDULABLE, len(ms.bound), held)

    def _waiting_for_members(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """Fewer bound + plannable than minMember (the others are held by other scheduling
        gates, or ungated and already with kube-scheduler)."""
        bound_n = len(ms.bound)
        if bound_n + len(ms.plannable) >= g.min_member:
            return None
        queued = sum(1 for m in ms.present if not m.gates and not m.bound and not m.terminal)
        why = []
        if held := held_by_other_gates(ms.present, self.gate):
            why.append(held)
        if queued:
            why.append(f"{queued} ungated and waiting for kube-scheduler")
        return _verdict(
            g,
            Outcome.WAITING_FOR_MEMBERS,
            bound_n,
            f"{len(ms.present)} of {g.min_member} members present, {bound_n} bound; " + ", ".join(why),
        )

    def _holds_room(self, g: GroupRequest) -> bool:
        """Room is held for ``g``'s preemption in flight (``Room.holds``): its victims' room is
        its own, which no starving group may use, so no starving group blocks it."""
        holder = _holder(g)
        return any(p.holder == holder for p, _ in self.room.holds)

    def _behind_starving_group(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """No later group that could take room a starving group could use is released while it
        waits (the first such starving group is named); it is still told whether it could ever fit."""
        if not self.blockers:
            return None
        scope = self._scope(ms)
        blocker = next((b for b, bs in self.blockers if bs.overlaps(scope)), None)
        if blocker is None:
            return None
        ok, msg, shorts = self.fits_empty(g, ms)
        if not ok:
            return self._never_fits(g, ms, len(ms.bound), msg, shorts)
        return _verdict(
            g,
            Outcome.INSUFFICIENT_CAPACITY,
            len(ms.bound),
            f"waiting behind starving PodGroup {blocker.namespace}/{blocker.name}, "
            "which has priority for freed room on the nodes both can use",
        )

    def _scope(self, ms: Members) -> _Scope:
        """The nodes the group's plannable members are eligible for (filters independent of load,
        and required pod affinity); every node when a member has required pod anti-affinity."""
        anti = any(m.required_pod_anti_affinity for m in ms.plannable)
        return _Scope(frozenset(_eligible(self.room, ms.plannable)), anti)

    def _try_release(self, g: GroupRequest, ms: Members) -> GroupVerdict | Miss:
        """Plan the plannable members on the room left. ``fits = bound + planned``; at least
        minMember releases the gated members (the plan stays charged), else the plan is undone.

        A plannable member beyond minMember that the plan leaves without room is not released:
        it waits gated, named in ``waiting``, exactly like a new member of a released group
        (:meth:`ungate_new_members`), so whether the owner created it before or after the
        release does not decide whether it is sent to kube-scheduler with nowhere to go.

        Replicas (:mod:`cogate.controller.model.replicas`): members of a replica that is not complete
        yet (a LeaderWorkerSet leader whose workers do not exist yet), or that the plan would
        place only in part, are left out when the others reach minMember without them: they
        wait gated and their replica is released whole later (:meth:`ungate_new_members`); when
        minMember needs them, minMember decides (the group is planned as before)."""
        needed = g.min_member - len(ms.bound)
        mark = self.room.mark()
        held_back = self._incomplete_replicas(ms)
        while held_back or replicas_mod.by_replica(ms.plannable):
            plan = pack(self.room, [m for m in ms.plannable if m.uid not in held_back], max(needed, 0))
            if len(ms.bound) + len(plan) < g.min_member:
                self.room.rollback(mark)
                break
            partial = self._partial_replicas(ms, plan, held_back)
            if not partial:
                if (short := self._min_resources_wait(g, ms, plan, mark)) is not None:
                    return short
                return self._released(g, ms, plan, [m for m in ms.plannable if m.uid in held_back])
            self.room.rollback(mark)
            held_back |= partial
        plan = pack(self.room, ms.plannable, max(needed, 0))
        fits = len(ms.bound) + len(plan)
        if fits >= g.min_member:
            if (short := self._min_resources_wait(g, ms, plan, mark)) is not None:
                return short
            return self._released(g, ms, plan, [])
        unplaced = [m for m in ms.plannable if m.uid not in plan]
        short = shortfall(self.room, unplaced, needed - len(plan))
        self.room.rollback(mark)
        return Miss(fits, unplaced, short, self.promised_for(g, unplaced))

    def _min_resources_short(self, room: Room, g: GroupRequest, ms: Members,
                             plan: Mapping[str, int]) -> tuple[minres.Short, ...]:
        """The resources the rest of ``spec.minResources`` lacks on ``room`` with ``plan`` applied
        (:mod:`cogate.controller.model.minresources`: the group's bound non-terminal members and the
        planned ones counted; the free room summed over the nodes some present member is
        eligible for); empty without minResources or when the room holds the rest."""
        if g.min_resources is None:
            return ()
        wanted = minres.asked(dict(g.min_resources), g.min_member)
        counted = [req_with_pod(m.requests) for m in ms.bound if not m.terminal]
        counted += [req_with_pod(m.requests) for m in ms.plannable if m.uid in plan]
        nodes = _eligible(room, [m for m in ms.present if not m.terminal])
        return minres.shortfall(wanted, counted, minres.free_beyond(room.free, sorted(nodes), wanted))

    def _min_resources_wait(self, g: GroupRequest, ms: Members, plan: Mapping[str, int],
                            mark: int) -> GroupVerdict | None:
        """A plan that reaches minMember but leaves too little free room for the rest of
        ``spec.minResources`` is undone (back to ``mark``) and the group waits: ``InsufficientCapacity``
        naming each short resource and by how much (``GroupVerdict.min_resources_short``), or
        ``ExceedsClusterCapacity`` when the nodes it may use could not hold it even empty. None:
        the release goes on. ``Basis`` ``"aggregate"``: it reads the room of every eligible node, not
        only where members fit (``"pass"`` once it starves)."""
        shorts = self._min_resources_short(self.room, g, ms, plan)
        if not shorts:
            return None
        self.room.rollback(mark)
        fits = len(ms.bound) + len(plan)
        self.basis = Basis("aggregate", ms, since=complete_since(g))
        ok, empty_msg, empty_shorts = self.fits_empty(g, ms)
        if not ok:  # the members fit the room now, so it is minResources that never fits
            return self._never_fits(g, ms, fits, empty_msg, empty_shorts or shorts)
        note = self._starving_note(g, ms)
        if note:
            self.basis = Basis("pass", ms)
        msg = f"fits {fits} of {g.min_member}, but " + minres.short_text(shorts, fits) + note
        return GroupVerdict(g.namespace, g.name, Outcome.INSUFFICIENT_CAPACITY, {}, fits, msg,
                            min_resources_short=shorts)

    def _starving_note(self, g: GroupRequest, ms: Members) -> str:
        """``"; starving for Ns: later groups wait"`` once a waiting group starves (it then blocks
        later groups in its scope: ``blockers``), else ``""``."""
        since = complete_since(g)
        if since is None or not starving(since, self.now, self.config):
            return ""
        self.blockers.append((g, self._scope(ms)))
        return f"; starving for {int(self.now - since)}s: later groups wait"

    def _incomplete_replicas(self, ms: Members) -> set[str]:
        """uids of plannable members whose replica has fewer present members than expected."""
        mine = replicas_mod.by_replica(ms.plannable)
        if not mine:
            return set()
        present = replicas_mod.by_replica(ms.present)
        out: set[str] = set()
        for replica, new in mine.items():
            size = replicas_mod.expected_size(replica, present)
            if size and len(present.get(replica, ())) < size:
                out.update(m.uid for m in new)
        return out

    def _partial_replicas(self, ms: Members, plan: Mapping[str, int], held_back: set[str]) -> set[str]:
        """uids of the plannable members of replicas that ``plan`` places only in part."""
        out: set[str] = set()
        for new in replicas_mod.by_replica(m for m in ms.plannable if m.uid not in held_back).values():
            placed = sum(1 for m in new if m.uid in plan)
            if 0 < placed < len(new):
                out.update(m.uid for m in new)
        return out

    def _released(self, g: GroupRequest, ms: Members, plan: Mapping[str, int],
                  incomplete: Sequence[PodInfo]) -> GroupVerdict:
        """The ``Released`` verdict of a plan that reaches minMember (committed here); plannable
        members it leaves out wait gated and are named (``incomplete``: of replicas not complete)."""
        fits = len(ms.bound) + len(plan)
        skipped = {m.uid for m in incomplete}
        unplaced = [m for m in ms.plannable if m.uid not in plan and m.uid not in skipped]
        short = shortfall(self.room, unplaced, len(unplaced)) if unplaced else Short("")
        self.room.commit()
        held = {m.uid for m in unplaced} | skipped
        release = self._reserve([m for m in ms.gated if m.uid not in held], plan)
        message = (f"fits {fits} of {g.min_member}: releasing {plural(len(release), 'gated member')}"
                   + unchecked_note(ms.gated, self.config))
        if incomplete:
            present = replicas_mod.by_replica(ms.present)
            names = sorted({str(replicas_mod.replica_of(m)) for m in incomplete})
            message += (f"; {plural(len(incomplete), 'member')} of {plural(len(names), 'replica')} "
                        f"({name_list(names)}) wait gated, each replica released whole once complete and with room "
                        f"for all of it; members of {len(present)} replicas share this PodGroup: give each replica "
                        "its own PodGroup to gang-schedule each")
        if unplaced:
            message += "; " + waiting_text(unplaced, short)
        return GroupVerdict(g.namespace, g.name, Outcome.RELEASED, release, fits, message,
                            tuple(m.name for m in list(incomplete) + unplaced))

    def _explain(self, g: GroupRequest, ms: Members, miss: Miss) -> GroupVerdict:
        """Why a group that does not fit now waits: it never fits the empty cluster, or its
        required pod affinity has no bound pod to meet, or the room is taken (and after
        ``starvation_seconds`` complete it starves: later groups wait)."""
        ok, empty_msg, shorts = self.fits_empty(g, ms)
        if not ok:
            self.basis = Basis("room", ms, miss)
            return self._never_fits(g, ms, miss.fits, empty_msg, shorts)
        affinity_dead = [
            m
            for m in miss.unplaced
            if m.required_pod_affinity and not self.room.spec_for(m).eligible and self.room.spec_for(m).affinity_unmet
        ]
        if affinity_dead:
            self.basis = Basis("pass", ms, miss)
            return _verdict(
                g,
                Outcome.UNSCHEDULABLE,
                miss.fits,
                f"fits {miss.fits} of {g.min_member}: required pod affinity of {affinity_dead[0].name} is not "
                "satisfied by any bound pod (cogate only plans pod affinity against pods already running)",
            )
        note = self._starving_note(g, ms)
        msg = f"fits {miss.fits} of {g.min_member}: {miss.short.text}" + note
        self.basis = Basis("pass", ms, miss) if note else Basis("room", ms, miss, complete_since(g))
        return _verdict(g, Outcome.INSUFFICIENT_CAPACITY, miss.fits, msg)

    def _never_fits(self, g: GroupRequest, ms: Members, fits: int, empty_msg: str,
                    min_resources_short: tuple[minres.Short, ...] = ()) -> GroupVerdict:
        """A group that does not fit even every eligible node empty: ``Unschedulable`` when
        members that no node takes by their own constraints (nodeSelector, required node
        affinity, tolerations, bound volumes: :func:`~cogate.controller.planning.explanations.unplaceable`)
        leave fewer than minMember others, named as their constraint and not capacity (issue 21
        item 9); else ``ExceedsClusterCapacity`` (with ``min_resources_short`` when it is the rest of
        ``spec.minResources`` that never fits: provisioning and preemption then know no member shape helps)."""
        own = unplaceable(self.room, ms.plannable)
        others = len(ms.bound) + len(ms.plannable) - len(own)
        if own and others < g.min_member:
            return _verdict(g, Outcome.UNSCHEDULABLE, fits, unplaceable_message(self.room, own, others, g.min_member))
        return GroupVerdict(g.namespace, g.name, Outcome.EXCEEDS_CLUSTER_CAPACITY, {}, fits, empty_msg,
                            min_resources_short=min_resources_short)

    def _charge_bound_members(self, room: Room, ms: Members) -> None:
        """On the empty room, the group's own bound, non-terminal members keep their room: a member
        that runs (released or ungated by hand) takes room the others cannot have, so a group that
        can never fit is never judged to fit because one of its members already runs."""
        index = self.snapshot.table.index
        for m in ms.bound:
            i = index.get(m.node_name)
            if i is not None and not m.terminal:
                room.charge(m, i)

    def fits_empty(self, g: GroupRequest, ms: Members) -> tuple[bool, str, tuple[minres.Short, ...]]:
        """Whether the group fits every eligible node empty, and if not, why, and the resources the
        rest of its ``spec.minResources`` lacks there when that is why (members that fit, a rest that
        does not: :meth:`_min_resources_short` on the empty room). Bound members count as placed and
        keep their room on their nodes (:meth:`_charge_bound_members`); the empty room is built on
        first use and left unchanged."""
        if self._empty is None:
            self._empty = self.snapshot.empty_room()
        room = self._empty
        mark = room.mark()
        self._charge_bound_members(room, ms)
        needed = g.min_member - len(ms.bound)
        plan = pack(room, ms.plannable, needed)
        ok = len(plan) >= needed
        msg = ""
        shorts: tuple[minres.Short, ...] = ()
        if not ok:
            unplaced = [m for m in ms.plannable if m.uid not in plan]
            msg = (f"fits {len(ms.bound) + len(plan)} of {g.min_member} even with every eligible node empty: "
                   + shortfall(room, unplaced, needed - len(plan)).text)
        elif shorts := self._min_resources_short(room, g, ms, plan):
            ok, msg = False, minres.exceeds_text(shorts, len(ms.bound) + len(plan))
        room.rollback(mark)
        return ok, msg, shorts


def _eligible(room: Room, members: Sequence[PodInfo]) -> set[int]:
    """The node slots at least one of ``members`` is eligible for on ``room`` (load-independent
    filters, and on a live room required pod affinity against bound pods)."""
    out: set[int] = set()
    for spec in {id(s): s for s in (room.spec_for(m) for m in members)}.values():
        out.update(spec.eligible)
    return out


def _holder(g: GroupRequest) -> str:
    """``Promise.holder`` of room held for ``g`` (``"PodGroup ns/name"``)."""
    return f"PodGroup {g.namespace}/{g.name}"


def decide(
    nodes: Sequence[NodeInfo],
    pods: Sequence[PodInfo],
    groups: Sequence[GroupRequest],
    reservations: Sequence[Reservation],
    now: float,
    config: PlannerConfig = PlannerConfig(),
    promised: Sequence[Promise] = (),
) -> Decision:
    """Plan every group against one shrinking copy of the free room.

    ``nodes``: all nodes. ``pods``: every non-terminal pod bound to a node
    (members included; unbound or terminal entries are ignored). ``groups``:
    every PodGroup with its live members. ``reservations``: the previous
    decision's reservations. ``now``: epoch seconds. ``promised``: room held for preempting
    groups (``Promise`` kind ``"preempting"``, :mod:`cogate.controller.preemption.inflight`): charged for
    every group, lent to its holder.

    Returns verdicts in the order ``groups`` were given and the reservations to
    keep (pruned, plus one per member planned in this decision). Rules: see the
    module docstring. Never raises on well-typed records.
    """
    run = Pass(Snapshot(nodes, pods, members_anti(groups), members_spread(groups)), groups, reservations, now, config,
               promised)
    return run_pass(run, groups)


def run_pass(run: Pass, groups: Sequence[GroupRequest]) -> Decision:
    """The order of one pass (one place for it): released groups first (their new members are
    never blocked), then the rest by priority and age; verdicts in the order of ``groups``."""
    ordered = sorted(enumerate(groups), key=lambda pair: _order_key(pair[1]))
    verdicts: dict[int, GroupVerdict] = {}
    for i, g in ordered:
        if g.released:
            verdicts[i] = run.ungate_new_members(g)
    for i, g in ordered:
        if not g.released:
            verdicts[i] = run.judge(g)
    return Decision(verdicts=tuple(verdicts[i] for i in range(len(groups))), reservations=run.reservations())



