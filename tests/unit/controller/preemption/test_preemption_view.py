"""Victim selection on the planning state (``select_victims(view=...)``, the path the controller
uses) returns exactly what the from-scratch path returns on the same nodes and pods.

The clusters are test_preemption_props.py's generators (plain: only resources and budgets and
gangs; rich: host ports, anti-affinity, topology spread, where the view falls back to a Snapshot).
The planning state is built through deltas, not in one go: pods added in a random order, some
added first in another shape (priority, being deleted, another node) and then changed, extra pods
and an extra node added and removed again, so the per-priority sums and the pod-group index are
checked after removals too. Room promised: an optional nomination of random priority.
"""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogate.controller.planning import capacity
from cogate.controller.preemption import candidates, selection, victims
from cogate.controller.planning.room import req_with_pod
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.victims import select_victims
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.model.verdicts import PlannerConfig

from .test_preemption_props import PRIOS, scenarios

CFG = PlannerConfig()


@st.composite
def histories(draw, rich: bool = False):
    """A scenario, and a planning state holding its nodes and pods, reached through deltas."""
    nodes, pods, budgets, gangs, g = draw(scenarios(rich=rich))
    state = PlanningState()
    extra_node = NodeInfo("extra", labels={"kubernetes.io/hostname": "extra", "zone": "z0"},
                          allocatable={"cpu": 4000, "pods": 110})
    churn = draw(st.booleans())
    for n in nodes[: len(nodes) // 2]:
        state.upsert_node(n)
    if churn:
        state.upsert_node(extra_node)
    order = draw(st.permutations(pods))
    for p in order:
        if draw(st.integers(0, 3)) == 0:  # first another shape, then the real one (a change delta)
            state.upsert_pod(replace(p, priority=draw(st.sampled_from(PRIOS)), deleting=not p.deleting,
                                     node_name=draw(st.sampled_from([n.name for n in nodes] + ["extra"]))))
        state.upsert_pod(p)
    for n in nodes[len(nodes) // 2:]:
        state.upsert_node(n)
    if churn:  # pods on a node that goes, and pods that go
        for k in range(draw(st.integers(0, 3))):
            state.upsert_pod(PodInfo("batch", f"x{k}", f"u-x{k}", labels=dict(pods[0].labels) if pods else {},
                                     node_name=draw(st.sampled_from(["extra", nodes[0].name])), phase="Running",
                                     requests={"cpu": 500}, priority=draw(st.sampled_from(PRIOS))))
        state.remove_node("extra")
        for k in range(3):
            state.remove_pod(f"u-x{k}")
    promised = []
    if draw(st.booleans()):
        nominee = PodInfo("other", "nominee", "u-nominee", requests={"cpu": draw(st.sampled_from([500, 2000]))},
                          nominated_node=draw(st.sampled_from([n.name for n in nodes])),
                          priority=draw(st.sampled_from(PRIOS + [300, 400])))
        promised = capacity.promised_room([], [nominee])
    return state, promised, budgets, gangs, g


def _same(state, promised, budgets, gangs, g):
    view = state.bound_view()
    scratch = select_victims(g, view.nodes, view.pods, promised, budgets, gangs, CFG)
    fast = select_victims(g, [], [], promised, budgets, gangs, CFG, view=view)
    assert fast == scratch


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_the_view_gives_the_from_scratch_answer_without_building_a_snapshot(case):
    state, promised, budgets, gangs, g = case
    view = state.bound_view()
    assert candidates.fast_path(view, g, None)  # plain scenarios: the fast path is the one taken
    scratch = select_victims(g, view.nodes, view.pods, promised, budgets, gangs, CFG)
    built = AssertionError("a Snapshot was built")
    with mock.patch.object(victims, "Snapshot", side_effect=built), \
            mock.patch.object(candidates, "Snapshot", side_effect=built):
        fast = select_victims(g, [], [], promised, budgets, gangs, CFG, view=view)
    assert fast == scratch


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_the_view_gives_the_from_scratch_answer_on_the_exhaustive_fallback(case):
    with mock.patch.object(selection.Selection, "choose", lambda self, m: None):
        _same(*case)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(rich=True))
def test_the_view_gives_the_from_scratch_answer_with_ports_anti_affinity_and_spread(case):
    _same(*case)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(rich=True))
def test_the_views_indexes_are_the_pods_it_holds(case):
    state, _, _, _, _ = case
    view = state.bound_view()
    index = view.table.index
    for i, n in enumerate(view.nodes):
        want: dict[int, dict[str, int]] = {}
        for p in view.pods:
            if p.node_name == n.name and p.bound and not p.terminal and not p.deleting:
                total = want.setdefault(p.priority, {})
                for k, v in req_with_pod(p.requests).items():
                    total[k] = total.get(k, 0) + v
        assert {q: {k: v for k, v in t.items() if v} for q, t in view.by_priority(i).items()} == want
        assert sorted(p.uid for p in view.on_node(i)) == sorted(
            p.uid for p in view.pods if p.node_name == n.name and p.bound and not p.terminal)
    groups = {(p.namespace, p.group) for p in view.pods if p.group}
    for ns, name in groups:
        assert sorted(p.uid for p in view.by_group(ns, name)) == sorted(
            p.uid for p in view.pods if p.bound and not p.terminal and p.namespace == ns and p.group == name)
    assert view.anti_active == any(p.required_pod_anti_affinity for p in view.pods
                                   if p.bound and not p.terminal and p.node_name in index)
