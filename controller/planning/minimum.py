"""The ``spec.minResources`` rule (pure): a gang's plan must leave room for the rest of it.

``spec.minResources`` (scheduler-plugins ``CheckClusterResource``; the arithmetic is
:mod:`cogate.controller.model.minresources`): a plan that reaches minMember is kept only when the
free room it leaves, summed over the nodes some present member is eligible for, holds the rest of
minResources (minResources with ``pods`` = minMember, minus the requests of the bound and planned
members); else it is undone and the group waits (``InsufficientCapacity``, or
``ExceedsClusterCapacity`` when even the empty nodes do not hold it), the verdict naming each
short resource (``GroupVerdict.min_resources_short``). Released groups are not held to it (their
new members are planned one by one: :mod:`cogate.controller.planning.released`): docs/semantics.md, "minResources".

:class:`MinResources` holds this rule as methods of the planner's
:class:`~cogate.controller.planning.planner.Pass` (``Pass._try_release`` asks
:meth:`MinResources._min_resources_wait`, ``Pass.fits_empty`` asks
:meth:`MinResources._min_resources_short` on the empty room).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from cogate.controller.model import minresources as minres
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome, complete_since
from cogate.controller.planning.basis import Basis
from cogate.controller.planning.members import Members, eligible_nodes
from cogate.controller.planning.room import Room, req_with_pod

__all__ = ["MinResources"]


class MinResources:
    """The ``spec.minResources`` rule of a :class:`~cogate.controller.planning.planner.Pass` (module doc)."""

    room: Room
    basis: Basis

    if TYPE_CHECKING:
        def fits_empty(self, g: GroupRequest, ms: Members) -> tuple[bool, str, tuple[minres.Short, ...]]: ...

        def _never_fits(self, g: GroupRequest, ms: Members, fits: int, empty_msg: str,
                        min_resources_short: tuple[minres.Short, ...] = ()) -> GroupVerdict: ...

        def _starving_note(self, g: GroupRequest, ms: Members) -> str: ...

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
        nodes = eligible_nodes(room, [m for m in ms.present if not m.terminal])
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
