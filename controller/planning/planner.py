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

* Released groups (``GroupRequest.released``: a release that still stands) are handled
  first: their new gated members are ungated as the planner finds them room, never blocked
  (:mod:`cogate.controller.planning.released`).
* Other groups follow by priority (highest member ``spec.priority``) descending,
  then ``created`` (oldest first), then namespace/name.
* A group that cannot be placed even on the empty eligible nodes (bound pods
  and reservations ignored, except the group's own bound members, which keep
  their room on their nodes) is ``ExceedsClusterCapacity``; ``Unschedulable``
  and ``WaitingForMembers`` groups are skipped the same way: none blocks others.
* A group that fits the empty cluster but not the current one does not block
  later groups (backfill) until it has waited ``starvation_seconds`` since it
  became complete; from then on it is *starving* and no later (unreleased) group that could
  use its room is released while it waits (:mod:`cogate.controller.planning.starvation`).

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

Replicas sharing a PodGroup (:mod:`cogate.controller.model.replicas`) are released whole or not at
all (:mod:`cogate.controller.planning.released`); role minimums: :mod:`cogate.controller.planning.roles`;
sets of PodGroups, all or nothing: :mod:`cogate.controller.planning.groupsets` (from :func:`run_pass`).

Membership accounting for a group (present, bound, gated, plannable:
:mod:`cogate.controller.planning.members`):

* ``fits = bound + planned gated``; ``Released`` iff ``fits >= min_member`` (and, with
  ``spec.minResources``, the rule below); then every gated member is in ``release`` (``''`` for
  those not planned).

``spec.minResources``: a plan that reaches minMember is kept only when the free room it leaves
holds the rest of minResources (:mod:`cogate.controller.planning.minimum`).

Code map: ``decide`` builds a :class:`Pass`, whose
:class:`~cogate.controller.planning.capacity.Snapshot` (nodes and bound pods only, with the static
filter cache) yields the :class:`~cogate.controller.planning.room.Room`: free room per node after
bound pods and kept reservations, with an undo log. Released groups go through
``Pass.ungate_new_members`` (:class:`~cogate.controller.planning.released.ReleasedGroups`), the
rest through ``Pass.judge``, a run of early returns with
one method per rule above (``_invalid_min_member``, ``_invalid_min_resources``, ``_too_few_present``,
``_held``, ``_waiting_for_members``, ``_behind_starving_group`` (of
:class:`~cogate.controller.planning.starvation.Starvation`), ``_try_release`` with
``_min_resources_wait`` (of :class:`~cogate.controller.planning.minimum.MinResources`), ``_explain``); each
sets ``Pass.basis`` (a :class:`Basis`), what the verdict read. Topology spread lives in the
``Room`` (a :class:`cogate.controller.planning.spread.Tracker` of pods per domain, undone with the
room; ``Room._place_spread`` places such members one at a time); which planned members are
pinned and reserved is :func:`~cogate.controller.planning.members.pins`, applied by
``Pass._reserve``. :func:`run_pass` holds the
order of a pass. The incremental planner (:mod:`cogate.controller.planning.planstate`) runs the
same ``Pass`` on state kept between passes and skips groups whose verdict's basis did
not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cogate.controller.model import replicas as replicas_mod
from cogate.controller.model.words import fits_of
from cogate.controller.planning.capacity import (
    Snapshot,
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
    waiting_text,
)
from cogate.controller.planning.minimum import MinResources
from cogate.controller.planning.fenced import Fenced
from cogate.controller.planning.exclusion import Exclusion
from cogate.controller.planning.emptyfit import EmptyCluster
from cogate.controller.planning.members import (
    Members,
    classify,
    eligible_nodes,
    holder_of,
    members_anti,
    members_spread,
    pins,
)
from cogate.controller.planning.basis import Basis, Miss
from cogate.controller.planning.released import ReleasedGroups
from cogate.controller.planning.groupsets import SetPlanning, judge_unreleased
from cogate.controller.planning.roles import RoleMinimums, role_short
from cogate.controller.planning.room import Room
from cogate.controller.planning.starvation import Scope, Starvation
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
    # membership (cogate.controller.planning.members), for the other pure choosers
    "Members", "classify", "members_anti", "members_spread",
    # the decision sequence; the rest is for the incremental planner (cogate.controller.planning.planstate)
    "decide", "Pass", "run_pass", "Miss", "Basis",
]


# -- the pass ---------------------------------------------------------------------------


def _verdict(
    g: GroupRequest, outcome: Outcome, fits: int, message: str, release: Mapping[str, str] | None = None
) -> GroupVerdict:
    return GroupVerdict(g.namespace, g.name, outcome, release or {}, fits, message)


def _order_key(g: GroupRequest) -> tuple[int, float, str, str]:
    """Priority descending, then oldest first, then namespace/name."""
    return (-group_priority(g), g.created, g.namespace, g.name)


#: The order the planner plans groups in (public: the provisioning room asks in the same order).
order_key = _order_key


class Pass(Fenced, Exclusion, ReleasedGroups, Starvation, MinResources, RoleMinimums, SetPlanning, EmptyCluster):
    """One call of :func:`decide`: the room left as groups are taken in order, the
    reservations kept and made, and the starving group that blocks later ones.

    ``snapshot``: a :class:`~cogate.controller.planning.capacity.Snapshot`, or the incremental
    planner's state with the same interface. After each :meth:`judge`, ``basis`` says what the
    verdict was computed from. The incremental planner (:mod:`cogate.controller.planning.incremental`)
    subclasses it: it overrides :meth:`judge` and :meth:`fits_empty` (to keep answers between
    passes) and reads ``room``, ``basis``, ``blockers``, ``now`` and ``config``. The rules of
    released groups and replicas, of starvation and of ``spec.minResources`` are its methods too,
    each group in its own module (:class:`~cogate.controller.planning.released.ReleasedGroups`,
    :class:`~cogate.controller.planning.starvation.Starvation`,
    :class:`~cogate.controller.planning.minimum.MinResources`; whether it fits the empty cluster:
    :class:`~cogate.controller.planning.emptyfit.EmptyCluster`).
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
        self.blockers: list[tuple[GroupRequest, Scope]] = []

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
        return self.room.lend(min((m.priority for m in g.members), default=0), holder_of(g))

    def lends(self, g: GroupRequest) -> bool:
        """Some nomination's room, or room held for ``g``'s preemption, would be lent to ``g``
        (its verdict then reads this pass's room)."""
        if not self.room.nominations and not self.room.holds:
            return False
        low = min((m.priority for m in g.members), default=0)
        holder = holder_of(g)
        return (any(p.priority < low for p, _ in self.room.nominations)
                or any(p.holder == holder for p, _ in self.room.holds))

    def promised_for(self, g: GroupRequest, members: Sequence[PodInfo]) -> tuple[Promise, ...]:
        """Room promised to others on nodes ``members`` are eligible for (not to ``g``'s own
        members), in the order charged: for messages ("held for ...")."""
        if not self.room.promised:
            return ()
        eligible = eligible_nodes(self.room, members)
        own = {m.uid for m in g.members}
        return tuple(p for p, i in self.room.promised if i in eligible and p.pod.uid not in own)

    def _reserve(self, members: Sequence[PodInfo], plan: Mapping[str, int]) -> dict[str, str]:
        """uid -> the node each of ``members`` is released to ('' = unpinned: not planned, or a
        member the planner cannot foresee, :func:`~cogate.controller.planning.members.pins`); reserves the room of the pinned ones."""
        release: dict[str, str] = {}
        for m in members:
            i = plan.get(m.uid)
            if i is not None and not pins(m, self.config):
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

    # -- other groups, in order: the first rule that applies gives the verdict

    def judge(self, g: GroupRequest) -> GroupVerdict:
        lent = self._lend(g)
        try:
            verdict = self._judge(g)
        finally:
            if lent:
                self.room.repay(lent)
        if (lent or self.set_depth) and self.basis.reads in ("room", "aggregate"):
            # lent room, or judged within a set (controller/planning/groupsets.py): this pass only
            self.basis = Basis("pass", self.basis.members, self.basis.miss, self.basis.since)
        return verdict

    def _judge(self, g: GroupRequest) -> GroupVerdict:
        ms = classify(g, self.gate)
        self.basis = Basis("group", ms)
        if (verdict := self._invalid_min_member(g, ms)) is not None:
            return verdict
        if (verdict := self._invalid_min_resources(g, ms)) is not None:
            return verdict
        if g.topology_error:
            return _verdict(g, Outcome.UNSCHEDULABLE, len(ms.bound), f"invalid topology annotation: {g.topology_error}")
        if (verdict := self._invalid_roles(g, ms)) is not None:
            return verdict
        if (verdict := self._too_few_present(g, ms)) is not None:
            return verdict
        if (verdict := self._held(g, ms)) is not None:
            return verdict
        if (verdict := self._waiting_for_members(g, ms)) is not None:
            return verdict
        if (verdict := self._roles_waiting(g, ms)) is not None:
            return verdict
        self.basis = Basis("blocker", ms)
        if not self._holds_room(g) and (verdict := self._behind_starving_group(g, ms)) is not None:
            return verdict
        self.basis = Basis("pass", ms)
        if g.topology is not None:
            return self.judge_in_domains(g, ms)  # held domains per domain tried (fenced.py)
        kept, held = self.kept_out(g)  # off the domains exclusive gangs hold (controller/planning/exclusion.py)
        kms = classify(kept, self.gate) if held else ms
        attempt = self._try_release(kept, kms)
        if isinstance(attempt, GroupVerdict):
            return attempt
        return self.held_note(self._explain(g, ms, attempt), held)

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

    def _try_release(self, g: GroupRequest, ms: Members) -> GroupVerdict | Miss:
        """Plan the plannable members on the room left. ``fits = bound + planned``; at least
        minMember releases the gated members (the plan stays charged), else the plan is undone.

        A plannable member beyond minMember that the plan leaves without room is not released:
        it waits gated, named in ``waiting``, exactly like a new member of a released group
        (:meth:`ungate_new_members`), so whether the owner created it before or after the
        release does not decide whether it is sent to kube-scheduler with nowhere to go.

        Replicas (:mod:`cogate.controller.model.replicas`): members of a replica that is not complete
        yet (a LeaderWorkerSet leader whose workers do not exist yet), or that the plan would
        place only in part, are left out: they wait gated and their replica is released whole
        later (:meth:`ungate_new_members`); when minMember is not reached without them the group
        waits (:meth:`_whole_replicas_short`): no replica is ever released in part."""
        needed = g.min_member - len(ms.bound)
        mark = self.room.mark()
        held_back = self._incomplete_replicas(ms)
        while held_back or replicas_mod.by_replica(ms.plannable):
            planned = self._pack_group(self.room, g, ms, [m for m in ms.plannable if m.uid not in held_back], needed)
            plan = planned.plan
            if len(ms.bound) + len(plan) < g.min_member or planned.short:
                self.room.rollback(mark)
                break
            partial = self._partial_replicas(ms, plan, held_back)
            if not partial:
                if (short := self._min_resources_wait(g, ms, plan, mark)) is not None:
                    return short
                return self._released(g, ms, plan, [m for m in ms.plannable if m.uid in held_back])
            self.room.rollback(mark)
            held_back |= partial
        if held_back or replicas_mod.by_replica(ms.plannable):
            return self._whole_replicas_short(g, ms, held_back)
        planned = self._pack_group(self.room, g, ms, ms.plannable, needed)
        plan = planned.plan
        fits = len(ms.bound) + len(plan)
        if fits >= g.min_member and not planned.short:
            if (short := self._min_resources_wait(g, ms, plan, mark)) is not None:
                return short
            return self._released(g, ms, plan, [])
        unplaced = [m for m in ms.plannable if m.uid not in plan]
        if planned.short and g.roles is not None:
            short = role_short(self.room, planned.short, ms.plannable, plan, g.roles)
        else:
            short = shortfall(self.room, unplaced, needed - len(plan))
        self.room.rollback(mark)
        return Miss(fits, unplaced, short, self.promised_for(g, unplaced))

    def _released(self, g: GroupRequest, ms: Members, plan: Mapping[str, int],
                  incomplete: Sequence[PodInfo]) -> GroupVerdict:
        """The ``Released`` verdict of a plan that reaches minMember (committed here); plannable
        members it leaves out wait gated and are named (``incomplete``: of replicas not complete)."""
        fits = len(ms.bound) + len(plan)
        skipped = {m.uid for m in incomplete}
        unplaced = [m for m in ms.plannable if m.uid not in plan and m.uid not in skipped]
        short = shortfall(self.room, unplaced, len(unplaced)) if unplaced else Short("")
        self._commit()
        held = {m.uid for m in unplaced} | skipped
        release = self._reserve([m for m in ms.gated if m.uid not in held], plan)
        message = (f"{fits_of(fits, g.min_member)}: releasing {plural(len(release), 'gated member')}"
                   + unchecked_note(ms.gated, self.config))
        if incomplete:
            present = replicas_mod.by_replica(ms.present)
            names = sorted({str(replicas_mod.replica_of(m)) for m in incomplete})
            message += (f"; {plural(len(incomplete), 'member')} of {plural(len(names), 'replica')} "
                        f"({name_list(names)}) wait gated, each replica released whole once complete and with room "
                        f"for all of it; members of {len(present)} replicas share this PodGroup: give each replica "
                        "its own PodGroup to gang-schedule each")
        note = "; " + waiting_text(unplaced, short) if unplaced else ""
        return GroupVerdict(g.namespace, g.name, Outcome.RELEASED, release, fits, message + note,
                            tuple(m.name for m in list(incomplete) + unplaced), waiting_note=note)

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
                f"{fits_of(miss.fits, g.min_member)}: required pod affinity of {affinity_dead[0].name} is not "
                "satisfied by any bound pod (cogate only plans pod affinity against pods already running)",
            )
        note = self._starving_note(g, ms)
        # a Miss with minMember placed is a role below its minimum (controller/planning/roles.py)
        sep = ", but " if miss.fits >= g.min_member else ": "
        msg = f"{fits_of(miss.fits, g.min_member)}{sep}{miss.short.text}" + note
        self.basis = Basis("pass", ms, miss) if note else Basis("room", ms, miss, complete_since(g))
        return _verdict(g, Outcome.INSUFFICIENT_CAPACITY, miss.fits, msg)



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
    verdicts.update(judge_unreleased(run, ordered))  # sets of groups: all or nothing (groupsets.py)
    return Decision(verdicts=tuple(verdicts[i] for i in range(len(groups))), reservations=run.reservations(),
                    excluded=run.excluded_nodes())


