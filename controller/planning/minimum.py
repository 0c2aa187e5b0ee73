"""The ``spec.minResources`` rule (pure): a gang's plan must leave room for the rest of it.

``spec.minResources`` (scheduler-plugins ``CheckClusterResource``; the arithmetic is
:mod:`cogate.controller.model.minresources`): a plan that reaches minMember is kept only when the
free room it leaves, summed over the nodes some present member is eligible for, holds the rest of
minResources (minResources with ``pods`` = minMember, minus the requests of the bound and planned
members); else it is undone and the group waits (``InsufficientCapacity``, or
``ExceedsClusterCapacity`` when even the empty nodes do not hold it), the verdict naming each
short resource (``GroupVerdict.min_resources_short``). Released groups are not held to it (their
new members are planned one by one: :mod:`cogate.controller.planning.released`): docs/semantics.md, "minResources".

**Room held after the release** (issue 37 kind 9): the rest of a released group's minResources
stays held for its later members (:class:`~cogate.controller.model.minresources.Hold`) until it is
0 (they are placed: bound, ungated, or released in this pass) or
``PlannerConfig.min_resources_hold_seconds`` have passed since the release (``GroupRequest.released_at``,
or ``now`` for a group released earlier in this pass), and while the release stands. Every later
plan of a group not released yet (with or without minResources) is refused when the holds,
with its own rest, no longer fit the free room it leaves on the nodes it took
(:func:`~cogate.controller.model.minresources.clash`): the group waits ``InsufficientCapacity``
naming the holders and the deadline, its basis ``"pass"`` (a hold ends by the clock). New members of
released groups are planned before and are not held back by it.

:class:`MinResources` holds this rule as methods of the planner's
:class:`~cogate.controller.planning.planner.Pass` (``Pass._try_release`` asks
:meth:`MinResources._min_resources_wait`, ``Pass.fits_empty`` asks
:meth:`MinResources._min_resources_short` on the empty room).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cogate.controller.model import minresources as minres
from cogate.controller.model.words import fits_of
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome, complete_since
from cogate.controller.planning.basis import Basis
from cogate.controller.model.records import PodInfo, Reservation
from cogate.controller.model.verdicts import PlannerConfig
from cogate.controller.planning.members import Members, classify, eligible_nodes, holder_of
from cogate.controller.planning.patches import NODE_NAME_FIELD, pinned_node
from cogate.controller.planning.room import Room, req_with_pod

__all__ = ["MinResources", "unpinned"]


def unpinned(p: PodInfo) -> PodInfo:
    """``p`` without the node pin a release wrote (:func:`~cogate.controller.planning.patches.pin_ops`:
    a ``metadata.name In [node]`` field requirement in each term, or a term of its own): the
    constraints the group's later members share with it (they are created without the pin), so
    the nodes a hold counts are those they may use, not only the driver's node."""
    if pinned_node(p) is None:
        return p
    terms = []
    for term in p.required_node_affinity:
        fields = tuple(r for r in term.match_fields if r.key != NODE_NAME_FIELD)
        if not term.match_expressions and not fields and term.match_fields:
            continue  # the term the pin added
        terms.append(dataclasses.replace(term, match_fields=fields))
    return dataclasses.replace(p, required_node_affinity=tuple(terms))


class MinResources:
    """The ``spec.minResources`` rule of a :class:`~cogate.controller.planning.planner.Pass` (module doc)."""

    room: Room
    basis: Basis
    now: float
    gate: str
    config: PlannerConfig
    member_of: dict[str, tuple[PodInfo, GroupRequest]]
    new_reservations: list[Reservation]
    reserved: dict[str, Reservation]
    #: Room held for released groups' later members (None: not computed yet in this pass).
    min_holds: list[minres.Hold] | None = None

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
            return self._held_for_others(g, ms, plan, mark)
        self.room.rollback(mark)
        fits = len(ms.bound) + len(plan)
        self.basis = Basis("aggregate", ms, since=complete_since(g))
        ok, empty_msg, empty_shorts = self.fits_empty(g, ms)
        if not ok:  # the members fit the room now, so it is minResources that never fits
            return self._never_fits(g, ms, fits, empty_msg, empty_shorts or shorts)
        note = self._starving_note(g, ms)
        if note:
            self.basis = Basis("pass", ms)
        msg = f"{fits_of(fits, g.min_member)}, but " + minres.short_text(shorts, fits) + note
        if self._min_holds():  # a hold ends by the clock: judged again every pass
            self.basis = Basis("pass", ms)
        return GroupVerdict(g.namespace, g.name, Outcome.INSUFFICIENT_CAPACITY, {}, fits, msg,
                            min_resources_short=shorts)

    # -- room held for released groups' later members (module doc)

    def _min_holds(self) -> list[minres.Hold]:
        """The holds of groups released before this pass that still stand (built on first use, after
        the released groups' new members were planned), plus those of groups released earlier in it."""
        if self.min_holds is None:
            self.min_holds = []
            if self.config.min_resources_hold_seconds > 0:
                groups = {(g.namespace, g.name): g for _, g in self.member_of.values()}
                released_now = {r.pod_uid for r in self.new_reservations}
                for g in groups.values():
                    hold = self._hold_of(g, released_now)
                    if hold is not None:
                        self.min_holds.append(hold)
        return self.min_holds

    def _hold_of(self, g: GroupRequest, released_now: set[str]) -> minres.Hold | None:
        """Released group ``g``'s hold: the rest of its minResources once its bound, ungated and
        just released members (non-terminal) are counted, on the nodes its present members may use;
        None when it has none, the rest is 0 or the deadline passed."""
        if g.min_resources is None:
            return None
        start = g.released_at if g.released else self._reserved_since(g)
        if not start:
            return None
        until = start + self.config.min_resources_hold_seconds
        if until <= self.now:
            return None
        ms = classify(g, self.gate)
        counted = [req_with_pod(m.requests) for m in ms.present
                   if not m.terminal and (m.bound or not m.gated_by(self.gate) or m.uid in released_now)]
        left = minres.rest(minres.asked(dict(g.min_resources), g.min_member), counted)
        if not left:
            return None
        nodes = eligible_nodes(self.room, [unpinned(m) for m in ms.present if not m.terminal])
        return minres.Hold(holder_of(g), left, frozenset(nodes), until)

    def _reserved_since(self, g: GroupRequest) -> float:
        """For a group whose status does not show its release yet (the PodGroup's watch behind the
        pods'), the release time its kept reservations of ungated members imply (``expires`` minus
        the TTL), else 0.0."""
        starts = [r.expires - self.config.reservation_ttl_seconds for m in g.members
                  if (r := self.reserved.get(m.uid)) is not None and not m.gated_by(self.gate)]
        return min(starts, default=0.0)

    def _own_hold(self, g: GroupRequest, ms: Members, plan: Mapping[str, int]) -> minres.Hold | None:
        """The hold ``g`` would have once released with ``plan`` (None without minResources or hold)."""
        if g.min_resources is None or self.config.min_resources_hold_seconds <= 0:
            return None
        counted = [req_with_pod(m.requests) for m in ms.bound if not m.terminal]
        counted += [req_with_pod(m.requests) for m in ms.plannable if m.uid in plan]
        left = minres.rest(minres.asked(dict(g.min_resources), g.min_member), counted)
        if not left:
            return None
        nodes = eligible_nodes(self.room, [m for m in ms.present if not m.terminal])
        return minres.Hold(holder_of(g), left, frozenset(nodes), self.now + self.config.min_resources_hold_seconds)

    def _held_for_others(self, g: GroupRequest, ms: Members, plan: Mapping[str, int],
                         mark: int) -> GroupVerdict | None:
        """A plan that leaves the holds (with ``g``'s own, when it has minResources) more than the
        free room of the nodes it took is undone (back to ``mark``) and the group waits
        ``InsufficientCapacity`` naming the holders; else None (released: its own hold is added)."""
        holds = self._min_holds()
        own = self._own_hold(g, ms, plan)
        if not holds:
            if own is not None:
                holds.append(own)
            return None
        taken = frozenset(plan.values())
        c = minres.clash(holds + ([own] if own is not None else []), self.room.free, taken)
        if c is None:
            if own is not None:
                holds.append(own)
            return None
        self.room.rollback(mark)
        self.basis = Basis("pass", ms)
        shorts: tuple[minres.Short, ...] = ()
        if own is not None and own.holder in c.holders:
            others = c.wanted - own.rest.get(c.resource, 0)
            wanted = minres.asked(dict(g.min_resources or ()), g.min_member)
            placed = wanted[c.resource] - own.rest.get(c.resource, 0)
            shorts = (minres.Short(c.resource, wanted[c.resource], placed, max(c.free - others, 0)),)
        return self._held_verdict(g, ms, plan, shorts, c)

    def _held_verdict(self, g: GroupRequest, ms: Members, plan: Mapping[str, int],
                      shorts: tuple[minres.Short, ...], c: minres.Clash) -> GroupVerdict:
        """``InsufficientCapacity``: the clash ``c`` with the holds, named with the earliest deadline
        of the others' holds."""
        fits = len(ms.bound) + len(plan)
        me = holder_of(g)
        until = min((h.until for h in self._min_holds() if h.holder in c.holders and h.holder != me), default=None)
        msg = f"{fits_of(fits, g.min_member)}, but " + minres.held_text(c, me, until)
        msg += self._starving_note(g, ms)
        return GroupVerdict(g.namespace, g.name, Outcome.INSUFFICIENT_CAPACITY, {}, fits, msg,
                            min_resources_short=shorts)

    def held_room(self) -> Sequence[minres.Hold]:
        """The holds of this pass so far (for messages and for preemption)."""
        return tuple(self._min_holds())
