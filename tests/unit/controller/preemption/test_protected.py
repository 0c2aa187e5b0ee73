"""Protected namespaces in victim selection (controller/preemption/victims.py rule 8; issue 30 item 3).

A pod of a protected namespace (``select_victims(protected=)``, ``--protected-namespace``; the
chart: its release namespace, where cogate's own webhook and controller run) is never a victim,
whatever its priority, and a gang of such a namespace is never touched. The whole kind, against an
oracle that is not the code under test:

- the answer with ``protected`` is the answer on the same cluster where every protected pod has a
  priority no group reaches (a pod of the group's priority or more is never a candidate, and a gang
  with such a member is never touched: rules 1 and 6), except that ``NoLowerPriorityPods`` /
  ``DoesNotFitEvenWithPreemption`` become ``OnlyProtectedPods`` exactly when the planner
  (``planner.decide``) releases the group with every lower-priority pod gone, protected ones included;
- no victim is ever in a protected namespace;
- the controller's path (the planning state's view) gives the same answer, with the namespaces
  indexed (``PlanningState(indexed_namespaces=)``) or not (a pass over the pods).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import PlannerConfig
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.victims import Gang, NoPreemption, Preemption, Reason, select_victims
from tests.builders import group_request, node

from .test_preemption_props import candidates, released, scenarios, without

CFG = PlannerConfig()
#: Above every priority the scenarios draw (group members at most 350).
UNREACHABLE = 10**9
OWN = "cogate-system"
NO_VICTIM = (Reason.NO_LOWER_PRIORITY_PODS, Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION)


@st.composite
def protected_scenarios(draw, rich: bool = False):
    """A scenario of test_preemption_props with some bound pods moved to cogate's namespace, and
    a protected set: cogate's namespace, the gangs' namespace ``batch`` (every other pod), both,
    or none."""
    nodes, pods, budgets, gangs, g = draw(scenarios(rich=rich))
    moved = draw(st.sets(st.sampled_from([p.uid for p in pods]), max_size=len(pods))) if pods else set()
    pods = [replace(p, namespace=OWN) if p.uid in moved else p for p in pods]
    if draw(st.booleans()):  # a gang of cogate's namespace too
        gangs = [*gangs, Gang(OWN, "own", 1)]
        pods = [replace(p, labels={**p.labels, POD_GROUP_LABEL: "own"}) if p.uid in moved and draw(st.booleans())
                else p for p in pods]
    protected = draw(st.sampled_from([frozenset(), frozenset({OWN}), frozenset({"batch"}),
                                      frozenset({OWN, "batch"})]))
    return nodes, pods, budgets, gangs, g, protected


def _raised(pods: list[PodInfo], protected: frozenset[str]) -> list[PodInfo]:
    return [replace(p, priority=UNREACHABLE) if p.namespace in protected else p for p in pods]


def _check(nodes, pods, budgets, gangs, g, protected):
    result = select_victims(g, nodes, pods, [], budgets, gangs, CFG, protected=protected)
    event(str(result.reason) if isinstance(result, NoPreemption) else "preempts")
    oracle = select_victims(g, nodes, _raised(pods, protected), [], budgets, gangs, CFG)
    if isinstance(result, Preemption):
        assert not any(v.pod.namespace in protected for v in result.victims)
        assert isinstance(oracle, Preemption)
        assert result.plan == oracle.plan and result.gangs_taken == oracle.gangs_taken
        assert [v.pod.uid for v in result.victims] == [v.pod.uid for v in oracle.victims]
        return
    priority = min(m.priority for m in g.members)
    if result.reason == Reason.ONLY_PROTECTED_PODS:
        assert protected and oracle.reason in NO_VICTIM
        assert released(nodes, without(pods, {p.uid for p in candidates(pods, gangs, g, priority)}), g)
        assert all(ns in result.message for ns in protected)
        return
    assert result.reason == oracle.reason
    if protected and result.reason in NO_VICTIM:  # nothing at all would make room
        assert not released(nodes, without(pods, {p.uid for p in candidates(pods, gangs, g, priority)}), g)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protected_scenarios())
def test_a_protected_pod_is_never_a_victim_and_the_group_says_when_only_protected_pods_would_help(case):
    _check(*case)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protected_scenarios(rich=True))
def test_protection_with_ports_anti_affinity_and_spread(case):
    _check(*case)


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "scanned"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=protected_scenarios())
def test_the_controllers_view_gives_the_same_answer(indexed, case):
    nodes, pods, budgets, gangs, g, protected = case
    state = PlanningState.build(nodes, pods, protected if indexed else ())
    view = state.bound_view()
    scratch = select_victims(g, nodes, pods, [], budgets, gangs, CFG, protected=protected)
    assert select_victims(g, [], [], [], budgets, gangs, CFG, view=view, protected=protected) == scratch
    for ns in protected:
        got = view.in_namespace(ns)
        if indexed:
            assert got is not None and sorted(p.uid for p in got) == sorted(
                p.uid for p in pods if p.namespace == ns and p.bound and not p.terminal)
        else:
            assert got is None


def test_the_index_follows_changes_and_removals():
    state = PlanningState([OWN])
    state.upsert_node(node("n1").cpu(4).info())
    p = PodInfo(OWN, "webhook", "u-w", node_name="n1", phase="Running", requests={"cpu": 100})
    state.upsert_pod(p)
    state.upsert_pod(replace(p, priority=5))
    assert [x.priority for x in state.bound_view().in_namespace(OWN)] == [5]
    state.upsert_pod(replace(p, phase="Succeeded"))  # terminal: no longer on a node
    assert list(state.bound_view().in_namespace(OWN)) == []
    state.upsert_pod(p)
    state.remove_pod("u-w")
    assert list(state.bound_view().in_namespace(OWN)) == []
    assert state.bound_view().in_namespace("other") is None


# -- examples: cogate's own pods on a full node


def _member(i: int, cpu: int, prio: int = 1000) -> PodInfo:
    return PodInfo("team", f"g-{i}", f"u-g-{i}", labels={POD_GROUP_LABEL: "g"}, requests={"cpu": cpu * 1000},
                   gates=(CFG.gate_name,), priority=prio, created=float(i))


def _bound(ns: str, name: str, cpu: int, prio: int = 0, on: str = "n1") -> PodInfo:
    return PodInfo(ns, name, f"u-{name}", node_name=on, phase="Running", requests={"cpu": cpu * 1000}, priority=prio)


def test_cogates_own_pods_are_not_victims_even_at_priority_zero():
    nodes = [node("n1").cpu(4).info()]
    own = [_bound(OWN, "webhook", 2), _bound(OWN, "controller", 2)]
    g = group_request([_member(0, 2)], 1)
    r = select_victims(g, nodes, own, [], [], [], CFG, protected=frozenset({OWN}))
    assert r.reason == Reason.ONLY_PROTECTED_PODS
    assert r.message == ("PodGroup team/g (priority 1000) fits 0 of 1; only preempting pods in the protected "
                         "namespaces cogate-system would make room, and cogate never preempts those: preempting nothing")
    # unprotected, the same cluster preempts one of them: the protection is what holds it back
    assert isinstance(select_victims(g, nodes, own, [], [], [], CFG), Preemption)


def test_an_unprotected_pod_is_taken_instead_of_a_cheaper_protected_one():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [_bound(OWN, "webhook", 4, prio=0, on="n1"), _bound("batch", "filler", 4, prio=500, on="n2")]
    g = group_request([_member(0, 3)], 1)
    r = select_victims(g, nodes, pods, [], [], [], CFG, protected=frozenset({OWN}))
    assert isinstance(r, Preemption) and [v.pod.name for v in r.victims] == ["filler"]
    # without protection kube-scheduler's order picks the lower priority: cogate's webhook
    r = select_victims(g, nodes, pods, [], [], [], CFG)
    assert isinstance(r, Preemption) and [v.pod.name for v in r.victims] == ["webhook"]


def test_too_small_even_with_protected_pods_gone_keeps_its_reason():
    nodes = [node("n1").cpu(4).info()]
    g = group_request([_member(0, 8)], 1)
    r = select_victims(g, nodes, [_bound(OWN, "webhook", 1)], [], [], [], CFG, protected=frozenset({OWN}))
    assert r.reason == Reason.NO_LOWER_PRIORITY_PODS
    r = select_victims(g, nodes, [_bound(OWN, "webhook", 1), _bound("batch", "f", 1)], [], [], [], CFG,
                       protected=frozenset({OWN}))
    assert r.reason == Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION
