"""Members fenced into a topology domain (pure, issue 32): a member's required node affinity with
the domain's labels ANDed in (:func:`restricted`), and the least a count of members request together
(:func:`least_demand`, the cheap bound's demand). Used by the planner's topology step
(:mod:`cogate.controller.planning.fenced`), slices (:mod:`cogate.controller.planning.sliced`) and the
requests handed to preemption and provisioning (:func:`cogate.controller.planning.fenced.fence_requests`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

from cogate.controller.model.constraints import NodeSelectorRequirement, NodeSelectorTerm, domain_requirements
from cogate.controller.model.records import PodInfo
from cogate.controller.topology.domains import Domain

__all__ = ["restricted", "restricted_to", "kept_off", "least_demand"]


def restricted(m: PodInfo, levels: Sequence[str], d: Domain) -> PodInfo:
    """``m`` allowed only on ``d``'s nodes: ``label In [value]`` for each of ``d``'s labels ANDed into
    every required node-affinity term (one term of them alone when it has none)."""
    if d.level < 0:
        return m
    return restricted_to(m, tuple(d.selector(levels).items()))


def restricted_to(m: PodInfo, domain: Sequence[tuple[str, str | None]]) -> PodInfo:
    """``m`` allowed only on nodes labelled ``domain`` (``(label, value)`` pairs; a value of ``None``:
    the label with any value, ``Exists``), as :func:`restricted`.

    A copy of the record with that one field changed (``dataclasses.replace`` re-runs ``__init__``
    over some forty fields: it was two thirds of a pass over 1,024 nodes)."""
    if not domain:
        return m
    return _with_affinity(m, _fenced_terms(m.required_node_affinity, tuple(domain)))


def _with_affinity(m: PodInfo, terms: tuple[NodeSelectorTerm, ...]) -> PodInfo:
    """A copy of ``m`` whose ``required_node_affinity`` is ``terms`` (the other fields shared)."""
    out = object.__new__(PodInfo)
    out.__dict__.update(m.__dict__)
    out.__dict__["required_node_affinity"] = terms
    return out


@functools.lru_cache(maxsize=4096)
def _fenced_terms(terms: tuple[NodeSelectorTerm, ...], domain: tuple[tuple[str, str | None], ...]
                  ) -> tuple[NodeSelectorTerm, ...]:
    reqs = domain_requirements(domain)
    return tuple(replace(t, match_expressions=t.match_expressions + reqs) for t in terms or (NodeSelectorTerm(),))


def kept_off(m: PodInfo, nodes: Sequence[str]) -> PodInfo:
    """``m`` allowed only on nodes other than ``nodes`` (names): ``metadata.name NotIn nodes`` ANDed
    into every required node-affinity term (one term of it alone when it has none); ``m`` itself for
    none. Used to keep gangs off the domains exclusive gangs hold
    (:mod:`cogate.controller.planning.exclusion`)."""
    if not nodes:
        return m
    return _with_affinity(m, _kept_off_terms(m.required_node_affinity, tuple(nodes)))


@functools.lru_cache(maxsize=1024)
def _kept_off_terms(terms: tuple[NodeSelectorTerm, ...], nodes: tuple[str, ...]) -> tuple[NodeSelectorTerm, ...]:
    req = NodeSelectorRequirement("metadata.name", "NotIn", nodes)
    return tuple(replace(t, match_fields=t.match_fields + (req,)) for t in terms or (NodeSelectorTerm(),))


def least_demand(members: Sequence[PodInfo], count: int) -> dict[str, int]:
    """Per resource, the least ``count`` of ``members`` request together (the ``count`` smallest
    requests of that resource summed): no placement of ``count`` of them needs less."""
    if count <= 0:
        return {}
    names = {r for m in members for r in m.requests}
    return {r: sum(sorted(m.requests.get(r, 0) for m in members)[:count]) for r in names}
