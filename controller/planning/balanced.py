"""Balanced gangs planned inside a domain (pure, issue 32 item 2): the planner's side of
:mod:`cogate.controller.topology.balance`.

A gang asking ``balanced`` tried in a domain coarser than its balance level (:func:`applies`) is
split into ``k`` near-equal parts, ``k`` = 1, 2, ... (the fewest first), each part planned inside a
domain of the balance level of its own (members restricted to it, every filter applying; with
slices finer than the balance level, the part's slices each inside one slice-level domain, as
:func:`cogate.controller.planning.sliced.plan_slices` plans them). The domains are tried best fit
first; :func:`cogate.controller.topology.slices.assign` searches which part goes where, one part per
domain. The first ``k`` whose parts all fit is the split. Every plannable member is placed (a
balanced gang is split whole; minMember alone would not be even).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cogate.controller.model.records import PodInfo
from cogate.controller.planning.capacity import pack
from cogate.controller.planning.fences import least_demand, restricted
from cogate.controller.planning.members import Members
from cogate.controller.planning.room import Room
from cogate.controller.planning.sliced import SlicePlan, plan_slices, within
from cogate.controller.topology.balance import sizes_text, splits
from cogate.controller.topology.constraints import Constraint
from cogate.controller.topology.domains import Domain, Tree, may_hold
from cogate.controller.topology.slices import BUDGET, Assignment, Slice, assign, slices_of

__all__ = ["applies", "plan_balanced", "units_of"]


def applies(c: Constraint, d: Domain) -> bool:
    """``balanced`` asked and ``d`` coarser than the balance level (-1: the whole cluster)."""
    level = c.balance_level()
    return level is not None and d.level < level


def units_of(c: Constraint, ms: Members, by_rank: Mapping[str, int] | None) -> list[tuple[str, ...]]:
    """What is split, in order: the plannable members of each slice (slices asked), else each
    plannable member alone, by rank when ``by_rank`` has every one, else oldest first."""
    plannable = [m.uid for m in ms.plannable]
    if c.slice_size and by_rank:
        todo = set(plannable)
        return [u for uids in slices_of(by_rank, c.slice_size).values() if (u := tuple(x for x in uids if x in todo))]
    if by_rank and all(u in by_rank for u in plannable):
        plannable.sort(key=lambda u: by_rank[u])
    return [(u,) for u in plannable]


def _free(room: Room, d: Domain) -> dict[str, int]:
    index, out = room.table.index, {}
    for n in d.nodes:
        if (i := index.get(n)) is not None:
            for r, v in room.free[i].items():
                out[r] = out.get(r, 0) + max(v, 0)
    return out


def plan_balanced(room: Room, c: Constraint, tree: Tree, d: Domain, ms: Members, main: str,
                  by_rank: Mapping[str, int] | None) -> SlicePlan:
    """Every plannable member of ``ms`` split evenly inside ``d`` (module doc), the placements left
    applied on ``room`` when a split fits (``told``: the split in words), else none applied,
    ``assignment.fits`` the members ``d`` holds unbalanced, ``note`` what is short, ``whole`` set."""
    level = c.balance_level()
    assert level is not None
    subs = sorted(within(tree, level, d), key=lambda s: (_free(room, s).get(main, 0), s.children, s.values))
    plannable = {m.uid: m for m in ms.plannable}
    units = units_of(c, ms, by_rank)
    total = sum(len(u) for u in units)
    word = c.levels[level].rpartition("/")[2]
    out = SlicePlan(Assignment())
    budget = BUDGET

    def place(s: Slice, sub: Domain) -> bool:
        members = [plannable[u] for u in s.members]
        if c.slice_size and c.slice_level is not None and c.slice_level > level:
            return _place_slices(room, c, tree, sub, members, by_rank or {}, main, out)
        fenced = [restricted(m, c.levels, sub) for m in members]
        if not may_hold(_free(room, sub), least_demand(fenced, len(fenced))):
            return False
        mark = room.mark()
        plan = pack(room, fenced, len(fenced))
        if len(plan) < len(fenced):
            room.rollback(mark)
            return False
        out.plan.update(plan)
        out.home.update((u, sub) for u in s.members)
        return True

    for k, parts in splits(units, len(subs)):
        demand = least_demand([plannable[u] for u in parts[-1]], len(parts[-1]))
        if sum(may_hold(_free(room, s), demand) for s in subs) < k or budget <= 0:
            continue  # fewer than k domains could hold even the smallest part
        mark = room.mark()
        a = assign([Slice(j, p) for j, p in enumerate(parts)], subs, total, place, room.mark, room.rollback,
                   budget=budget, distinct=True)
        budget -= a.tries
        if a.fits >= total:
            kept = {u for j in a.placed for u in parts[j]}
            out.assignment = a
            out.plan = {u: i for u, i in out.plan.items() if u in kept}
            out.home = {u: sub for u, sub in out.home.items() if u in kept}
            names = [d.name for d in (a.placed[j] for j in sorted(a.placed))]  # type: ignore[attr-defined]
            out.told = f"split {sizes_text(parts)} across {word}s {', '.join(names)}" if k > 1 else ""
            return out
        room.rollback(mark)
    # no split fits: how many the domain holds unbalanced (for the explanation)
    mark = room.mark()
    best = len(pack(room, [restricted(m, c.levels, d) for m in ms.plannable], total))
    room.rollback(mark)
    out.assignment = Assignment(fits=best)
    out.note = (f"no even split of {total} across at most {len(subs)} {word}s of it fits"
                if subs else f"no node of it carries the label {c.levels[level]}")
    out.plan, out.home, out.whole = {}, {}, True
    return out


def _place_slices(room: Room, c: Constraint, tree: Tree, sub: Domain, members: Sequence[PodInfo],
                  by_rank: Mapping[str, int], main: str, out: SlicePlan) -> bool:
    """A part of whole slices inside ``sub``, each slice in one domain of the finer slice level."""
    part = Members(present=list(members), gated=list(members), plannable=list(members))
    mark = room.mark()
    sp = plan_slices(room, c, tree, sub, part, len(members), {m.uid: by_rank[m.uid] for m in members}, main)
    if sp.assignment.fits < len(members):
        room.rollback(mark)
        return False
    out.plan.update(sp.plan)
    out.home.update(sp.home)
    return True
