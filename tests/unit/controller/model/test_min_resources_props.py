"""Property tests of ``spec.minResources`` against ``planner.decide`` (docs/semantics.md, "minResources").

* A group released with minResources passes scheduler-plugins' aggregate check
  (``CheckClusterResource``: minResources, ``pods`` = minMember, within the free room summed over
  every node with the group's own pods not counted; each node's room clamped at 0), computed here
  independently from the nodes and bound pods.
* minResources only ever holds a group back: with it a group is released only if it is released
  without it, and an empty minResources (only ``pods`` = minMember) decides exactly as none.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogate.controller.model import minresources as minres
from cogate.controller.planning.planner import PlannerConfig, decide
from tests.unit.controller.planning.test_planner_props import scenarios

CFG = PlannerConfig()


@st.composite
def with_min_resources(draw):
    nodes, bound, groups = draw(scenarios())
    out = []
    for g in groups:
        if draw(st.booleans()):
            mr = {"cpu": draw(st.integers(0, 8)) * 1000, "memory": draw(st.integers(0, 8))}
            out.append(dataclasses.replace(g, min_resources=tuple(sorted((k, v) for k, v in mr.items() if v))))
        else:
            out.append(g)
    return nodes, bound, out


def upstream_free(nodes, bound, names):
    """scheduler-plugins ``getNodeResource`` summed over every node (own pods: none are bound here),
    each node clamped at 0; ``pods`` is allocatable pods minus pods on the node."""
    total = {k: 0 for k in names}
    for n in nodes:
        here = [p for p in bound if p.node_name == n.name]
        for k in names:
            used = len(here) if k == "pods" else sum(p.requests.get(k, 0) for p in here)
            total[k] += max(0, n.allocatable.get(k, 0) - used)
    return total


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_min_resources())
def test_released_with_min_resources_passes_the_aggregate_check(sc):
    nodes, bound, groups = sc
    d = decide(nodes, bound, groups, [], 1000.0, CFG)
    for g, v in zip(groups, d.verdicts):
        if g.min_resources is None or v.outcome != "Released":
            continue
        asked = minres.asked(dict(g.min_resources), g.min_member)
        free = upstream_free(nodes, bound, asked)
        assert all(free[k] >= asked[k] for k in asked), (asked, free)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_min_resources())
def test_min_resources_only_holds_back(sc):
    nodes, bound, groups = sc
    for g in groups:
        plain = dataclasses.replace(g, min_resources=None)
        with_mr = decide(nodes, bound, [g], [], 1000.0, CFG).verdicts[0]
        without = decide(nodes, bound, [plain], [], 1000.0, CFG).verdicts[0]
        if with_mr.outcome == "Released":
            assert without == with_mr
        if with_mr.min_resources_short:  # marked only when the members fit and minResources does not
            assert g.min_resources is not None and with_mr.release == {}
            if with_mr.outcome == "InsufficientCapacity":  # minMember fits the room now
                assert without.outcome == "Released"
            else:  # minMember fits the empty nodes
                assert with_mr.outcome == "ExceedsClusterCapacity"
                assert without.outcome in ("Released", "InsufficientCapacity")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_empty_min_resources_decides_as_none(sc):
    nodes, bound, groups = sc
    empty = [dataclasses.replace(g, min_resources=()) for g in groups]
    assert decide(nodes, bound, empty, [], 1000.0, CFG) == decide(nodes, bound, groups, [], 1000.0, CFG)
