"""Topology domains and the choice among them (pure, issue 32 item 2).

:func:`build` makes the domain tree from node labels: per level, the domains (nodes sharing the
values of that level's label and every coarser one's), and how many nodes lack a label and belong to
no domain of that level (named in explanations). :func:`may_hold` is the cheap per-domain bound that
prunes hopeless domains before the planner is run on them. :func:`choose` is the rule: try the levels
a :class:`~cogate.controller.topology.constraints.Constraint` allows, tightest first
(:meth:`Constraint.tried`); the first level with a domain that holds the gang wins; among its domains
the best fit (least leftover of the gang's dominant resource, so big holes stay free for big gangs),
ties by fewest child domains, then by name. Whether a domain holds the gang is the caller's answer
(``try_domain``: the planner restricted to that domain, every filter applying), so this module never
estimates capacity itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cogate.controller.topology.constraints import Constraint

__all__ = ["Domain", "Tree", "build", "CLUSTER", "Trial", "Tried", "Choice", "choose", "may_hold", "dominant"]


@dataclass(frozen=True)
class Domain:
    """One domain: ``level`` (index into the levels; -1 for the whole cluster), ``values`` (the
    node label values of levels 0..``level``), ``nodes`` (names, sorted), ``children`` (domains of the
    next finer level inside it; 0 at the finest)."""

    level: int
    values: tuple[str, ...]
    nodes: tuple[str, ...]
    children: int = 0

    @property
    def name(self) -> str:
        """The value of its own level's label (``"cluster"`` for the whole cluster)."""
        return self.values[-1] if self.values else "cluster"

    def selector(self, levels: Sequence[str]) -> dict[str, str]:
        """The node labels its nodes share: ``{levels[i]: values[i]}``."""
        return dict(zip(levels, self.values))

    def sort_key(self) -> tuple[int, tuple[str, ...]]:
        return (self.children, self.values)


#: The whole cluster as a domain (no label read); its nodes are filled in by :func:`build`.
CLUSTER = Domain(-1, (), ())


@dataclass(frozen=True)
class Tree:
    """``levels`` (coarse to fine), ``domains[level]`` sorted by values, ``excluded[level]``: nodes
    lacking a label of that level or a coarser one, ``cluster``: every node as one domain."""

    levels: tuple[str, ...]
    domains: Mapping[int, tuple[Domain, ...]]
    excluded: Mapping[int, int]
    cluster: Domain


def build(levels: Sequence[str], nodes: Mapping[str, Mapping[str, str]]) -> Tree:
    """The domain tree of ``nodes`` (name -> labels) over ``levels``."""
    members: list[dict[tuple[str, ...], list[str]]] = [{} for _ in levels]
    excluded = {i: 0 for i in range(len(levels))}
    for name in sorted(nodes):
        labels = nodes[name]
        values: list[str] = []
        for i, key in enumerate(levels):
            v = labels.get(key)
            if v is None:
                for j in range(i, len(levels)):
                    excluded[j] += 1
                break
            values.append(v)
            members[i].setdefault(tuple(values), []).append(name)
    domains: dict[int, tuple[Domain, ...]] = {}
    for i in range(len(levels)):
        finer = members[i + 1] if i + 1 < len(levels) else {}
        children: dict[tuple[str, ...], int] = {}
        for values in finer:
            children[values[:-1]] = children.get(values[:-1], 0) + 1
        domains[i] = tuple(Domain(i, v, tuple(ns), children.get(v, 0)) for v, ns in sorted(members[i].items()))
    top = len(domains[0]) if levels else 0
    return Tree(tuple(levels), domains, excluded, Domain(-1, (), tuple(sorted(nodes)), top))


def may_hold(free: Mapping[str, int], demand: Mapping[str, int]) -> bool:
    """The cheap bound: a domain whose summed free room (``free``: resource -> units over its nodes)
    is below ``demand`` (the least the gang's missing members request together, per resource) cannot
    hold them, whatever the packing; True otherwise (the planner decides)."""
    return all(free.get(r, 0) >= v for r, v in demand.items() if v > 0)


def dominant(demand: Mapping[str, int], allocatable: Mapping[str, int]) -> str:
    """The resource the gang needs the largest share of (``demand[r] / allocatable[r]`` over the
    cluster; ``pods`` only when nothing else is requested), ties by name."""
    shares = [(v / allocatable[r] if allocatable.get(r) else float("inf"), r) for r, v in demand.items()
              if v > 0 and r != "pods"]
    if not shares:
        return "pods"
    return max(shares, key=lambda s: (s[0], [-ord(c) for c in s[1]]))[1]


@dataclass(frozen=True)
class Trial:
    """The planner restricted to one domain: ``fits`` (members placed, bound ones included),
    ``leftover`` (free units of the dominant resource left in the domain by the plan), ``note`` (what
    it lacks, when it does not hold the gang), ``pruned`` (the bound ruled it out: not planned),
    ``refused`` (an exclusive gang's rule refused the domain, ``note`` says why: not planned, and
    ``pruned`` too, so no choice takes it: :mod:`cogate.controller.topology.exclusive`)."""

    fits: int
    leftover: int = 0
    note: str = ""
    pruned: bool = False
    refused: bool = False


@dataclass(frozen=True)
class Tried:
    """One level tried: ``level`` (None: the whole cluster) and each domain with its trial."""

    level: int | None
    trials: tuple[tuple[Domain, Trial], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Choice:
    """``domain``: where the gang goes (None: nowhere it may go holds it); ``level`` it was found at;
    ``tried``: every level tried, tightest first, with its trials (for explanations)."""

    domain: Domain | None
    level: int | None
    tried: tuple[Tried, ...]


def _candidates(tree: Tree, level: int | None, within: Callable[[Domain], bool]) -> Iterable[Domain]:
    pool = (tree.cluster,) if level is None else tree.domains.get(level, ())
    return (d for d in pool if within(d))


def choose(c: Constraint, tree: Tree, needed: int, try_domain: Callable[[Domain], Trial],
           within: Callable[[Domain], bool] = lambda d: True,
           order: Callable[[Domain], tuple[Any, ...]] | None = None) -> Choice:
    """The domain the gang of ``needed`` members goes to (module doc). ``try_domain`` answers for one
    domain (the planner restricted to it, leaving the room as it found it); ``within``: the domains
    allowed at all (e.g. those holding the gang's running members). Deterministic for a given tree
    and answers.

    ``order``: when the caller knows a key that sorts a level's domains as the best-fit rule would
    sort those holding the gang (``(free units of the dominant resource, children, values)`` when every
    member is placed wherever the gang fits: the plan then uses the same room everywhere), the domains
    are tried in that order and the first holding the gang is taken, without trying the rest."""
    tried: list[Tried] = []
    for level in c.tried():
        if order is not None:
            found = _first_holding(level, sorted(_candidates(tree, level, within), key=order), needed, try_domain)
            tried.append(found[1])
            if found[0] is not None:
                return Choice(found[0], level, tuple(tried))
            continue
        trials = tuple((d, try_domain(d)) for d in _candidates(tree, level, within))
        tried.append(Tried(level, trials))
        holding = [(t.leftover, d.sort_key(), d) for d, t in trials if t.fits >= needed and not t.pruned]
        if holding:
            best = min(holding, key=lambda h: (h[0], h[1]))[2]
            return Choice(best, level, tuple(tried))
    return Choice(None, None, tuple(tried))


def _first_holding(level: int | None, domains: Sequence[Domain], needed: int,
                   try_domain: Callable[[Domain], Trial]) -> tuple[Domain | None, Tried]:
    trials = []
    for d in domains:
        t = try_domain(d)
        trials.append((d, t))
        if t.fits >= needed and not t.pruned:
            return d, Tried(level, tuple(trials))
    return None, Tried(level, tuple(trials))
