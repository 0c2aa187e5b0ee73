"""Whether a gang fits the empty cluster (pure), and the verdict of one that never does.

A group that cannot be placed even on the empty eligible nodes (bound pods and reservations
ignored, except the group's own bound members, which keep their room on their nodes) is
``ExceedsClusterCapacity``, or ``Unschedulable`` when its own constraints leave too few members
placeable (docs/semantics.md; issue 21 item 9). :class:`EmptyCluster` holds this rule as methods of
the planner's :class:`~cogate.controller.planning.planner.Pass` (``Pass._explain``,
:class:`~cogate.controller.planning.starvation.Starvation` and
:class:`~cogate.controller.planning.minimum.MinResources` ask :meth:`EmptyCluster.fits_empty`; the
incremental planner overrides it to keep answers between passes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cogate.controller.model import minresources as minres
from cogate.controller.model.words import fits_of
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.controller.planning.capacity import Snapshot
from cogate.controller.planning.explanations import shortfall, unplaceable, unplaceable_message
from cogate.controller.planning.members import Members
from cogate.controller.planning.roles import RolePlan, role_short
from cogate.controller.planning.room import Room

__all__ = ["EmptyCluster"]


class EmptyCluster:
    """The empty-cluster rule of a :class:`~cogate.controller.planning.planner.Pass` (module doc)."""

    room: Room
    snapshot: Snapshot
    #: The empty room, built on first use and left unchanged (None: not built yet).
    _empty: Room | None

    if TYPE_CHECKING:
        def _pack_group(self, room: Room, g: GroupRequest, ms: Members, members: Sequence[PodInfo],
                        needed: int, greedy: bool | None = None) -> RolePlan: ...

        def _min_resources_short(self, room: Room, g: GroupRequest, ms: Members,
                                 plan: Mapping[str, int]) -> tuple[minres.Short, ...]: ...

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
            return GroupVerdict(g.namespace, g.name, Outcome.UNSCHEDULABLE, {}, fits,
                                unplaceable_message(self.room, own, others, g.min_member))
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
        planned = self._pack_group(room, g, ms, ms.plannable, needed, greedy=True)
        plan = planned.plan
        ok = len(plan) >= needed and not planned.short
        msg = ""
        shorts: tuple[minres.Short, ...] = ()
        if not ok:
            unplaced = [m for m in ms.plannable if m.uid not in plan]
            why = (role_short(room, planned.short, ms.plannable, plan, g.roles) if planned.short and g.roles
                   else shortfall(room, unplaced, needed - len(plan)))
            fits = len(ms.bound) + len(plan)
            sep = ", but " if fits >= g.min_member else ": "
            msg = f"{fits_of(fits, g.min_member)} even with every eligible node empty{sep}" + why.text
        elif shorts := self._min_resources_short(room, g, ms, plan):
            ok, msg = False, minres.exceeds_text(shorts, len(ms.bound) + len(plan))
        room.rollback(mark)
        return ok, msg, shorts
