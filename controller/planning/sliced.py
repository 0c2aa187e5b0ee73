"""Slices planned inside a domain (pure, issue 32 item 1): the planner's side of
:mod:`cogate.controller.topology.slices`.

A gang asking slices (``Constraint.slice_size`` and ``slice_level``) tried in a domain coarser than
the slice level (:func:`applies`) is planned slice by slice: each slice's members restricted to one
domain of the slice level inside it (:func:`~cogate.controller.planning.fences.restricted`) and packed
on the room the slices before it left (:func:`cogate.controller.planning.capacity.pack`, every filter
applying), the domains of the slice level tried best fit first (least free room of the gang's dominant
resource, then fewest child domains, then name), the search :func:`cogate.controller.topology.slices.assign`'s.
A slice whose members already run is kept in the domain they run in. In a domain at or inside the
slice level every slice is inside one such domain already: the ordinary plan applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cogate.controller.planning.capacity import pack
from cogate.controller.planning.explanations import plural
from cogate.controller.planning.fences import least_demand, restricted
from cogate.controller.planning.members import Members
from cogate.controller.planning.room import Room
from cogate.controller.topology.constraints import Constraint
from cogate.controller.topology.domains import Domain, Tree, may_hold
from cogate.controller.topology.slices import Assignment, Slice, assign, rank_span, ranks, slices_of

__all__ = ["applies", "member_ranks", "SlicePlan", "plan_slices", "within"]


def applies(c: Constraint, d: Domain) -> bool:
    """Slices asked and ``d`` coarser than the slice level (``d.level`` -1: the whole cluster)."""
    return c.slice_size > 0 and c.slice_level is not None and d.level < c.slice_level


def member_ranks(ms: Members) -> dict[str, int]:
    """uid -> rank of the members present and not being deleted
    (:func:`cogate.controller.topology.slices.ranks`; raises its ``TopologyError``)."""
    return ranks((m.uid, m.name, m.labels) for m in ms.present if not m.deleting)


def within(tree: Tree, level: int, d: Domain) -> list[Domain]:
    """The domains of ``level`` inside ``d`` (all of them for the whole cluster)."""
    return [s for s in tree.domains.get(level, ()) if s.values[: len(d.values)] == d.values]


@dataclass
class SlicePlan:
    """What :func:`plan_slices` placed: ``assignment``; ``plan`` uid -> node index of the members
    placed; ``home`` uid -> the slice-level domain of each member placed, and of each member of a
    slice left out whose running members fix its domain; ``note`` (what is short, when some slice
    found no domain); ``told``: what the release message adds (a balanced split in words); ``whole``:
    every member must be placed and was not (a balanced split that fits nowhere): the domain holds
    fewer than minMember, whatever ``assignment.fits`` says."""

    assignment: Assignment
    plan: dict[str, int] = field(default_factory=dict)
    home: dict[str, Domain] = field(default_factory=dict)
    note: str = ""
    told: str = ""
    whole: bool = False


def plan_slices(room: Room, c: Constraint, tree: Tree, d: Domain, ms: Members, need: int,
                by_rank: Mapping[str, int], main: str) -> SlicePlan:
    """Plan ``ms.plannable`` in slices inside ``d`` on ``room`` (module doc), at least ``need`` of
    them; the placements are left applied (the caller marks and rolls back). ``by_rank``:
    :func:`member_ranks`; ``main``: the dominant resource (best-fit order)."""
    assert c.slice_level is not None
    subs = within(tree, c.slice_level, d)
    index = room.table.index

    def free(s: Domain) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in s.nodes:
            if (i := index.get(n)) is not None:
                for r, v in room.free[i].items():
                    out[r] = out.get(r, 0) + max(v, 0)
        return out

    subs.sort(key=lambda s: (free(s).get(main, 0), s.children, s.values))
    slices = _slices(c, subs, ms, by_rank)
    plannable = {m.uid: m for m in ms.plannable}
    out = SlicePlan(Assignment())

    def place(s: Slice, sub: Domain) -> bool:
        members = [restricted(plannable[u], c.levels, sub) for u in s.members]
        if not may_hold(free(sub), least_demand(members, len(members))):
            return False
        mark = room.mark()
        plan = pack(room, members, len(members))
        if len(plan) < len(members):
            room.rollback(mark)
            return False
        out.plan.update(plan)
        out.home.update((u, sub) for u in s.members)
        return True

    out.assignment = assign(slices, subs, need, place, room.mark, room.rollback)
    kept = {u for s in slices if s.index in out.assignment.placed for u in s.members}
    out.plan = {u: i for u, i in out.plan.items() if u in kept}
    out.home = {u: sub for u, sub in out.home.items() if u in kept}
    for s in slices:  # a slice left out whose members run somewhere waits for that domain
        if s.index not in out.assignment.placed and isinstance(s.fixed, Domain):
            out.home.update((u, s.fixed) for u in s.members)
    if out.assignment.unplaced:
        out.note = _note(c, slices, out.assignment, subs)
    return out


def _slices(c: Constraint, subs: Sequence[Domain], ms: Members, by_rank: Mapping[str, int]) -> list[Slice]:
    """The slices to place: members of rank ``k*size..`` that are plannable, each fixed to the
    domain its running members are in."""
    where = {n: s for s in subs for n in s.nodes}
    running = {m.uid: m.node_name for m in ms.bound if not m.terminal and m.node_name}
    plannable = {m.uid for m in ms.plannable}
    out = []
    for k, uids in slices_of(by_rank, c.slice_size).items():
        homes = {where.get(running[u]) for u in uids if u in running}
        fixed = next(iter(homes)) if len(homes) == 1 else None
        out.append(Slice(k, tuple(u for u in uids if u in plannable), fixed, broken=len(homes) > 1 or None in homes))
    return out


def _note(c: Constraint, slices: Sequence[Slice], a: Assignment, subs: Sequence[Domain]) -> str:
    """``"2 of 3 slices of 4 placed, each in one rack; slice 2 (ranks 8-11) fits no rack of it"``."""
    word = c.levels[c.slice_level or 0].rpartition("/")[2]
    todo = [s for s in slices if s.members]
    first = next(s for s in todo if s.index in a.unplaced)
    why = (f"its running members span more than one {word}" if first.broken
           else f"fits no {word} of it" if subs else f"no node of it carries the label {c.levels[c.slice_level or 0]}")
    return (f"{len(todo) - len(a.unplaced)} of {plural(len(todo), 'slice')} of {c.slice_size} placed, each in one "
            f"{word}; slice {first.index} ({rank_span(first.index, c.slice_size)}) {why}")
