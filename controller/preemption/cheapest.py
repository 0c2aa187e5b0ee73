"""The cheapest combination of victim units (pure; issue 39), for
:func:`cogate.controller.preemption.victims.select_victims` (its module docstring, rule 9).

The node-by-node choice (:mod:`cogate.controller.preemption.selection`, kube-scheduler's
``SelectVictimsOnNode`` and ``pickOneNodeForPreemption``) is greedy: it can take a native gang of
two pods, or two pods, where one other pod would do. When the candidates are few, this module looks
for a cheaper set among every admissible combination of victim units:

- a pod outside any gang, or of a native ``single`` group: taken or not;
- a cogate gang: at most its slack of its pods taken alone (it keeps minMember), or all of it;
- a native ``all`` group: all of its pods or none (:mod:`cogate.controller.preemption.units`).

**Cost** (smaller is cheaper, compared in this order): PodDisruptionBudget violations (counted over
the victims most important first, ``filterPodsWithPDBViolation``), the highest unit priority
(a gang counts at its unit priority), the number of victim pods (a unit costs all its pods), the
sum of the unit priorities. The first two are kube-scheduler's first criteria
(``pickOneNodeForPreemption``); then the fewest pods, which is what a unit of several pods costs.

Combinations strictly cheaper than the greedy answer are tried cheapest first, each checked with
the planner's ``pack`` on the room with every candidate gone and every other candidate put back;
the first that places minMember is taken. As every strict subset of a combination is strictly
cheaper, the one taken was found only after all its subsets failed: none of its units is in vain
(``pack`` decides). Bounded: at most :data:`MAX_COMBINATIONS` combinations are costed and
:data:`MAX_PACKS` packed (of at most :data:`MAX_CANDIDATES` candidates), else the greedy answer
stands (a cluster with that many candidates is the node-by-node choice's, as kube-scheduler's is).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cogate.controller.planning.capacity import pack
from cogate.controller.planning.room import Room
from cogate.controller.model.records import PodInfo
from cogate.controller.preemption.selection import Selection, more_important

__all__ = ["MAX_CANDIDATES", "MAX_COMBINATIONS", "MAX_PACKS", "Cost", "Choice", "cost_of", "cheaper", "as_selection"]

#: Candidates at most (read before any combination is built); beyond, the greedy answer stands.
MAX_CANDIDATES = 32
#: Combinations costed at most; beyond, the greedy answer stands.
MAX_COMBINATIONS = 4096
#: Combinations packed at most (each one ``pack`` on the room); beyond, the greedy answer stands.
MAX_PACKS = 256

Cost = tuple[int, int, int, int]
Key = tuple[str, str]


@dataclass(frozen=True)
class Choice:
    """One admissible combination of victim units: ``alone`` (pod, node slot) taken alone, gangs
    taken ``whole``, its ``cost``."""

    alone: tuple[tuple[PodInfo, int], ...]
    whole: tuple[Key, ...]
    cost: Cost


def cost_of(sel: Selection, alone: Iterable[PodInfo], whole: Iterable[Key]) -> Cost:
    """The cost (module docstring) of the pods ``alone`` and the gangs ``whole`` of ``sel``."""
    alone = list(alone)
    whole = list(whole)
    pods = alone + [p for gk in whole for p, _ in sel.gang_pods[gk]]
    prios = [p.priority for p in alone] + [sel.unit_priority.get(gk, max(p.priority for p, _ in sel.gang_pods[gk]))
                                           for gk in whole] or [0]
    if not sel.budgets:
        return (0, max(prios), len(pods), sum(prios))
    violating, _ = sel.split_by_budget(sorted(pods, key=more_important), [b.disruptions_allowed for b in sel.budgets])
    return (len(violating), max(prios), len(pods), sum(prios))


def _options(sel: Selection) -> list[list[tuple[tuple[tuple[PodInfo, int], ...], tuple[Key, ...]]]] | None:
    """Per choice (a free pod, a gang), its admissible options as ``(alone, whole)``; None when the
    combinations exceed :data:`MAX_COMBINATIONS` or the candidates :data:`MAX_CANDIDATES`."""
    if sel.by_node.count > MAX_CANDIDATES:
        return None
    opts: list[list[tuple[tuple[tuple[PodInfo, int], ...], tuple[Key, ...]]]] = []
    total = 1
    for p, i in sel.by_node.pairs():
        if sel.gang_of.get(p.uid) is None:
            opts.append([((), ()), (((p, i),), ())])
            total *= 2
            if total > MAX_COMBINATIONS:
                return None
    for gk in sorted(sel.gang_pods):
        ps = sorted(sel.gang_pods[gk], key=lambda pi: (pi[1], pi[0].namespace, pi[0].name, pi[0].uid))
        one: list[tuple[tuple[tuple[PodInfo, int], ...], tuple[Key, ...]]] = [((), ())]
        for k in range(1, max(sel.slack.get(gk, -1), 0) + 1):
            if k >= len(ps):
                break
            one.extend((tuple(c), ()) for c in itertools.combinations(ps, k))
            if total * len(one) > MAX_COMBINATIONS:
                return None
        one.append(((), (gk,)))
        opts.append(one)
        total *= len(one)
        if total > MAX_COMBINATIONS:
            return None
    return opts


def cheaper(sel: Selection, bound: Cost, gone_room: Callable[[], Room], plannable: Sequence[PodInfo],
            needed: int) -> tuple[Choice, dict[str, int]] | None:
    """The cheapest admissible combination strictly cheaper than ``bound`` (the greedy answer's
    cost) on which ``pack`` places ``needed`` of ``plannable``, with ``pack``'s plan (member uid ->
    node slot), or None (none, or beyond the bounds). ``gone_room`` builds the room with every
    candidate gone; it is built only when some combination is cheaper."""
    opts = _options(sel)
    if opts is None:
        return None
    choices = []
    for combo in itertools.product(*opts):
        alone = tuple(pi for a, _ in combo for pi in a)
        whole = tuple(gk for _, w in combo for gk in w)
        if not alone and not whole:
            continue
        c = cost_of(sel, (p for p, _ in alone), whole)
        if c < bound:
            choices.append(Choice(alone, whole, c))
    if not choices:
        return None
    choices.sort(key=lambda ch: (ch.cost, sorted(p.uid for p, _ in ch.alone), ch.whole))
    room = gone_room()
    every = sel.by_node.pairs()
    for ch in choices[:MAX_PACKS]:  # cheapest first: the first that fits is the cheapest that fits
        taken = {p.uid for p, _ in ch.alone} | {p.uid for gk in ch.whole for p, _ in sel.gang_pods[gk]}
        mark = room.mark()
        for p, i in every:
            if p.uid not in taken:
                room.charge(p, i)
        plan = pack(room, list(plannable), needed)
        room.rollback(mark)
        if len(plan) >= needed:
            return ch, {uid: plan[uid] for uid in list(plan)[:needed]}
    return None


def as_selection(sel: Selection, ch: Choice, plan: Mapping[str, int]) -> Selection:
    """``sel`` holding ``ch``'s victims and ``plan`` (for the answer's victims and messages)."""
    sel.alone = {p.uid: (p, i) for p, i in ch.alone}
    sel.whole = set(ch.whole)
    sel.alone_per_gang = {}
    for p, _ in ch.alone:
        gk = sel.gang_of.get(p.uid)
        if gk is not None:
            sel.alone_per_gang[gk] = sel.alone_per_gang.get(gk, 0) + 1
    sel.plan = dict(plan)
    return sel
