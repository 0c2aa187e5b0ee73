"""What a verdict was computed from (pure): the record the planner's pass leaves after each
verdict, for the incremental planner to know when it still holds.

:class:`~cogate.controller.planning.planner.Pass` sets ``basis`` (a :class:`Basis`) with each
verdict it gives; a plan on the current room that placed too few is a :class:`Miss`;
:func:`fits_empty_key` is everything the "fits the empty cluster" answer reads of a group. The
incremental pass (:mod:`cogate.controller.planning.incremental`) keeps verdicts and answers by
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cogate.controller.model.records import PodInfo, Promise
from cogate.controller.model.roles import role_of
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.planning.explanations import Short
from cogate.controller.planning.filters import spec_key
from cogate.controller.planning.members import Members

__all__ = ["Miss", "Basis", "fits_empty_key"]


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
    """What the verdict :meth:`Pass.judge <cogate.controller.planning.planner.Pass.judge>` just gave was computed from, so that the
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


def fits_empty_key(group: GroupRequest, ms: Members, anti_active: bool, spread_active: bool) -> tuple[Any, ...]:
    """Everything :meth:`Pass.fits_empty <cogate.controller.planning.planner.Pass.fits_empty>` reads of a group besides the nodes (the plannable
    members, and the bound ones whose room it charges: ``Pass._charge_bound_members``; with role
    minimums, each member's role; with
    ``spec.minResources``, the constraints of every present member, whose nodes it sums):
    equal keys, equal answers for one node generation (the incremental planner keeps them)."""
    label = group.roles.label if group.roles is not None else None
    return (group.min_member, group.min_resources, group.roles,
            tuple((spec_key(m, anti_active, spread_active), m.uid, m.node_name, m.terminal) for m in ms.bound),
            tuple((spec_key(m, anti_active, spread_active), m.name, m.uid) for m in ms.plannable),
            # with role minimums, the role of each member decides what is packed first
            tuple(role_of(m, label) for m in ms.bound + ms.plannable) if label is not None else (),
            # minResources counts room on every node a present member is eligible for
            tuple(spec_key(m, anti_active, spread_active)[0] for m in ms.present if not m.terminal)
            if group.min_resources is not None else ())
