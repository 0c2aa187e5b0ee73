"""Slices of a gang (pure, issue 32 item 1): members in slices of N consecutive ranks, each slice
inside one domain of the slice level, all inside the gang's domain.

A member's **rank** is read from the labels the operators set (:func:`rank`): a JobSet pod's
``jobset.sigs.k8s.io/job-index`` and ``batch.kubernetes.io/job-completion-index`` together give
``job index x pods per Job + completion index`` (pods per Job: the largest completion index among the
group's JobSet members, plus one; Kueue reads the same pair as its subgroup and pod index); otherwise
the first of :data:`~cogate.controller.topology.constraints.RANK_LABELS` the member carries (Job's
completion index, LeaderWorkerSet's worker index, Kubeflow's replica index). Slice ``k`` is the
members of ranks ``k*N .. k*N+N-1`` (:func:`slices_of`); the last slice may be shorter. Two members
with one rank, or one without a rank, are an error (:class:`~cogate.controller.topology.constraints.TopologyError`
naming them): which slice they belong to would be a guess.

:func:`assign` is the search: each slice to one domain of the slice level (several slices may share
one), a slice placed whole or not at all, at least ``needed`` members placed. Whether a slice fits a
domain, on the room the slices placed before it left, is the caller's answer (``place``: the planner
restricted to that domain, every filter applying), so this module never estimates capacity. Slices
are taken most constrained first (those whose running members fix their domain, then by rank); each
tries its candidate domains in the caller's order (best fit first), backtracking when a later slice
finds no room, at most ``budget`` placements tried: exact on small gangs (property test against a
brute force), the greedy answer on big ones. Once ``needed`` members are placed, the slices left are
placed where they fit, without backtracking (a gang releases what fits beyond minMember).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cogate.controller.topology.constraints import RANK_LABELS, TopologyError

__all__ = ["JOB_INDEX", "COMPLETION_INDEX", "BUDGET", "Slice", "Assignment", "rank", "ranks", "slices_of", "assign",
           "rank_span"]

#: JobSet's label on each pod: the index of its Job within its replicated job.
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
#: Job's label on each pod of an Indexed Job: the completion index.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: Placements :func:`assign` tries at most before it keeps the best found.
BUDGET = 2000

D = TypeVar("D", bound=Hashable)


@dataclass(frozen=True)
class Slice:
    """Slice ``index`` (ranks ``index*size`` to ``index*size+size-1``): ``members`` (uids, by rank)
    that are to be placed, ``fixed`` (the domain its running members' nodes are in, when they are;
    ``broken``: they run in more than one, so no domain can hold it)."""

    index: int
    members: tuple[str, ...]
    fixed: Hashable | None = None
    broken: bool = False


@dataclass(frozen=True)
class Assignment:
    """What :func:`assign` found: ``placed`` slice index -> domain, ``fits`` (members placed),
    ``unplaced`` (slices left out, by index), ``tries`` (placements tried)."""

    placed: Mapping[int, Hashable] = field(default_factory=dict)
    fits: int = 0
    unplaced: tuple[int, ...] = ()
    tries: int = 0


def _index(labels: Mapping[str, str], key: str) -> int | None:
    v = labels.get(key)
    return int(v) if v is not None and v.isdigit() else None


def rank(labels: Mapping[str, str], per_job: int) -> int | None:
    """A member's rank from its ``labels`` (module doc); ``per_job``: pods per Job of a JobSet."""
    job, completion = _index(labels, JOB_INDEX), _index(labels, COMPLETION_INDEX)
    if job is not None and completion is not None:
        return job * per_job + completion
    for k in RANK_LABELS:
        if (v := _index(labels, k)) is not None:
            return v
    return None


def ranks(members: Iterable[tuple[str, str, Mapping[str, str]]]) -> dict[str, int]:
    """uid -> rank of each ``(uid, name, labels)``. Raises :class:`TopologyError` naming a member
    without a rank label, or two members with one rank."""
    listed = list(members)
    jobset = [c for _, _, labels in listed if _index(labels, JOB_INDEX) is not None
              and (c := _index(labels, COMPLETION_INDEX)) is not None]
    per_job = max(jobset, default=0) + 1
    out: dict[str, int] = {}
    seen: dict[int, str] = {}
    for uid, name, labels in listed:
        r = rank(labels, per_job)
        if r is None:
            raise TopologyError(f"slices need ranks: member {name} carries none of the labels "
                                f"{', '.join(RANK_LABELS)}")
        if r in seen:
            raise TopologyError(f"slices need one member per rank: {seen[r]} and {name} both have rank {r}")
        seen[r] = name
        out[uid] = r
    return out


def slices_of(by_rank: Mapping[str, int], size: int) -> dict[int, list[str]]:
    """Slice index -> its uids in rank order: ``rank // size`` (``size`` >= 1)."""
    out: dict[int, list[str]] = {}
    for uid, r in sorted(by_rank.items(), key=lambda ur: ur[1]):
        out.setdefault(r // size, []).append(uid)
    return dict(sorted(out.items()))


def rank_span(index: int, size: int) -> str:
    """``"ranks 8-11"`` of slice ``index`` (``"rank 3"`` for a slice of one)."""
    first = index * size
    return f"rank {first}" if size == 1 else f"ranks {first}-{first + size - 1}"


def assign(slices: Sequence[Slice], candidates: Sequence[D], needed: int, place: Callable[[Slice, D], bool],
           mark: Callable[[], int], rollback: Callable[[int], None], budget: int = BUDGET,
           distinct: bool = False) -> Assignment:
    """Each of ``slices`` to one of ``candidates`` (in the order tried: best first), at least
    ``needed`` members placed (module doc). ``place(s, d)`` plans slice ``s`` inside ``d`` on the room
    as the placements before left it and keeps it applied when every member of ``s`` fits (True),
    else leaves the room unchanged (False); ``mark``/``rollback`` undo placements. The placements of
    the answer are left applied; a slice with ``fixed`` goes to that domain only, a ``broken`` one
    nowhere. ``distinct``: no two slices in one domain (the parts of a balanced split)."""
    search = _Search(slices, candidates, place, mark, rollback, budget, distinct)
    start = mark()
    if not search.go(0, 0, needed):
        # the best partial answer, placed again on the room as the search found it
        rollback(start)
        best = search.best[1]
        for s in search.order:
            if s.index in best and place(s, best[s.index]):
                search.chosen[s.index] = best[s.index]
        return search.answer()
    # minMember reached: the slices not tried yet where they fit, no backtracking
    for s in search.order:
        if s.index in search.chosen:
            continue
        for d in search.allowed(s):
            search.tries += 1
            if place(s, d):
                search.chosen[s.index] = d
                break
    return search.answer()


class _Search:
    """:func:`assign`'s backtracking: slices most constrained first, each domain allowed in turn,
    pruned when the slices left can neither reach ``needed`` nor beat the best found."""

    def __init__(self, slices: Sequence[Slice], candidates: Sequence[Any], place: Callable[[Slice, Any], bool],
                 mark: Callable[[], int], rollback: Callable[[int], None], budget: int, distinct: bool) -> None:
        self.order = sorted((s for s in slices if s.members), key=lambda s: (s.fixed is None and not s.broken, s.index))
        self.sizes = [len(s.members) for s in self.order]
        self.rest = [sum(self.sizes[k:]) for k in range(len(self.order) + 1)]
        self.candidates, self.place, self.mark, self.rollback = candidates, place, mark, rollback
        self.budget, self.distinct = budget, distinct
        self.tries = 0
        self.best: tuple[int, dict[int, Hashable]] = (-1, {})
        self.chosen: dict[int, Hashable] = {}

    def allowed(self, s: Slice) -> Sequence[Any]:
        if s.broken:
            return ()
        pool = [d for d in self.candidates if d == s.fixed] if s.fixed is not None else self.candidates
        if self.distinct:
            taken = set(self.chosen.values())
            pool = [d for d in pool if d not in taken]
        return pool

    def go(self, k: int, placed: int, needed: int) -> bool:
        if placed > self.best[0]:
            self.best = (placed, dict(self.chosen))
        if placed >= needed:
            return True
        if k == len(self.order) or self.tries >= self.budget:
            return False
        if placed + self.rest[k] < needed and placed + self.rest[k] <= self.best[0]:
            return False  # can neither reach needed nor place more than the best found
        s = self.order[k]
        for d in self.allowed(s):
            if self.tries >= self.budget:
                break
            self.tries += 1
            m = self.mark()
            if self.place(s, d):
                self.chosen[s.index] = d
                if self.go(k + 1, placed + self.sizes[k], needed):
                    return True
                del self.chosen[s.index]
                self.rollback(m)
        return self.go(k + 1, placed, needed)

    def answer(self) -> Assignment:
        fits = sum(len(s.members) for s in self.order if s.index in self.chosen)
        unplaced = tuple(sorted(s.index for s in self.order if s.index not in self.chosen))
        return Assignment(dict(self.chosen), fits, unplaced, self.tries)
