"""Preemption and new nodes together (controller/provisioning/mixed.py, provreq.shortfalls(gone=...);
issue 37 kind 5).

The shortfall after preemption is checked against victim selection itself: with one new node per
asked-for member, ``select_victims`` finds victims that place minMember (or none are needed), and
with one fewer it answers ``DoesNotFitEvenWithPreemption``; so the request is exactly the
difference, and no victim is chosen before the nodes exist.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.controller.model.records import LabelSelector, PodInfo
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.budgets import Budget
from cogate.controller.preemption.victims import Gang, NoPreemption, Preemption, Reason, select_victims
from cogate.controller.provisioning import mixed, provreq
from tests.builders import group_request, node, pod as pod_

LOW = -10


def balloon(name: str, on: str, cpu: float, prio: int = LOW, ns: str = "spare", **labels: str) -> PodInfo:
    b = pod_(name, ns).uid("u-" + name).on(on).req(cpu=cpu).priority(prio).created(0)
    if labels:
        b.labels(labels)
    return b.info()


def member(i: int, cpu: float = 4, group: str = "g", prio: int = 0, policy: str = "") -> PodInfo:
    b = pod_(f"{group}-{i}", "batch").uid(f"u-{group}-{i}").group(group).req(cpu=cpu).priority(prio).created(i)
    b.gated(GATE)
    info = b.info()
    if policy:
        info = dataclasses.replace(info, preemption_policy=policy)
    return info


def ask(g, nodes, pods, *, preemption: bool = True, gangs=None, protected=frozenset()):
    """The members ``g`` asks new nodes for, with preemption on (the shortfall after it) or off."""
    gone = {}
    if preemption:
        gone = {(g.namespace, g.name): mixed.evictable(g, pods, gangs or {(g.namespace, g.name): g.min_member},
                                                       GATE, protected=protected)}
    out = provreq.shortfalls([(g, True)], nodes, pods, [], GATE, gone=gone)
    return [m.name for m in out[(g.namespace, g.name)]]


def by_view(g, nodes, pods):
    """:func:`ask` on the incremental planner's view (``shortfalls(view=...)``, the controller's path)."""
    state = PlanningState()
    for n in nodes:
        state.upsert_node(n)
    for p in pods:
        state.upsert_pod(p)
    gone = {(g.namespace, g.name): mixed.evictable(g, pods, {}, GATE)}
    out = provreq.shortfalls([(g, True)], [], [], [], GATE, view=state.bound_view(), gone=gone)
    return [m.name for m in out[(g.namespace, g.name)]]


def spare(n: int, cpu: float = 4) -> list:
    return [node(f"n{i}").cpu(cpu).info() for i in range(n)]


def with_new_nodes(nodes, k: int, cpu: float = 4) -> list:
    return [*nodes, *(node(f"new-{i}").cpu(cpu).info() for i in range(k))]


def fits_with_preemption(g, nodes, pods, budgets=()) -> bool:
    answer = select_victims(g, nodes, pods, [], list(budgets), [])
    if isinstance(answer, Preemption):
        return True
    return answer.reason is Reason.FITS_WITHOUT_PREEMPTION


# -- the inputs of the brief ------------------------------------------------------------------------


def test_all_by_preemption_asks_for_nothing():
    nodes = spare(3)
    pods = [balloon(f"b{i}", f"n{i}", 4) for i in range(3)]
    g = group_request([member(i) for i in range(3)])
    assert ask(g, nodes, pods, preemption=False) == ["g-0", "g-1", "g-2"]
    assert ask(g, nodes, pods) == []
    assert isinstance(select_victims(g, nodes, pods, [], [], []), Preemption)


def test_all_by_new_nodes_when_nothing_may_be_evicted():
    nodes = spare(2)
    pods = [balloon(f"b{i}", f"n{i}", 4, prio=0) for i in range(2)]  # equal priority never preempts
    g = group_request([member(i) for i in range(3)])
    assert ask(g, nodes, pods) == ["g-0", "g-1", "g-2"]


def test_a_mix_asks_only_for_what_preemption_cannot_free():
    nodes = spare(2)
    pods = [balloon("b0", "n0", 4), balloon("b1", "n1", 4)]
    g = group_request([member(i) for i in range(3)])
    assert ask(g, nodes, pods, preemption=False) == ["g-0", "g-1", "g-2"]
    assert ask(g, nodes, pods) == ["g-2"]
    no = select_victims(g, nodes, pods, [], [], [])
    assert isinstance(no, NoPreemption) and no.reason is Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION  # no victim yet
    assert isinstance(select_victims(g, with_new_nodes(nodes, 1), pods, [], [], []), Preemption)


def test_a_node_group_maximum_below_the_gang_but_above_the_shortfall():
    # 4 spare nodes held by balloons, a gang of 6 members of one node each, a node group of at most 3
    nodes = spare(4)
    pods = [balloon(f"b{i}", f"n{i}", 4) for i in range(4)]
    g = group_request([member(i) for i in range(6)])
    maximum = 3
    whole, short = ask(g, nodes, pods, preemption=False), ask(g, nodes, pods)
    assert len(whole) == 6 > maximum >= len(short) == 2
    answer = select_victims(g, with_new_nodes(nodes, len(short)), pods, [], [], [])
    assert isinstance(answer, Preemption) and {v.pod.name for v in answer.victims} == {f"b{i}" for i in range(4)}


def test_members_on_free_room_stay_charged_and_a_partly_free_node_counts():
    nodes = spare(3)
    pods = [balloon("b0", "n0", 2), balloon("x", "n1", 2, prio=100)]  # n0: 2 free + 2 evictable; n1: 2 free
    g = group_request([member(i, cpu=2) for i in range(6)])
    assert ask(g, nodes, pods, preemption=False) == ["g-4", "g-5"]  # n0 1, n1 1, n2 2
    assert ask(g, nodes, pods) == ["g-5"]


def test_pdb_protected_balloons_count_as_gone_as_kube_scheduler_preempts_them():
    nodes = spare(2)
    pods = [balloon("b0", "n0", 4, app="balloon"), balloon("b1", "n1", 4, app="balloon")]
    budget = Budget("spare", "balloons", LabelSelector((("app", "balloon"),)), 0)
    g = group_request([member(i) for i in range(3)])
    assert ask(g, nodes, pods) == ["g-2"]
    grown = with_new_nodes(nodes, 1)
    answer = select_victims(g, grown, pods, [], [budget], [])
    assert isinstance(answer, Preemption) and all(v.breaks_budget for v in answer.victims)
    assert not fits_with_preemption(g, nodes, pods, [budget])


def test_a_budget_spares_what_new_room_makes_unneeded():
    # with the new node, one balloon suffices; the selection then prefers the one no budget covers
    nodes = spare(2)
    pods = [balloon("b0", "n0", 4, app="guarded"), balloon("b1", "n1", 4)]
    budget = Budget("spare", "guarded", LabelSelector((("app", "guarded"),)), 0)
    g = group_request([member(i) for i in range(2)])
    assert ask(g, nodes, pods) == []  # both balloons may go: no node needed
    g3 = group_request([member(i) for i in range(3)])
    assert ask(g3, nodes, pods) == ["g-2"]
    answer = select_victims(g3, with_new_nodes(nodes, 1), pods, [], [budget], [])
    assert isinstance(answer, Preemption) and len(answer.victims) == 2


def test_policy_never_protected_namespaces_and_higher_gangs_are_never_counted_gone():
    nodes = spare(3)
    pods = [balloon("b0", "n0", 4), balloon("sys", "n1", 4, ns="cogate-system"),
            pod_("h-0", "spare").uid("u-h-0").group("h").on("n2").req(cpu=2).priority(LOW).created(0).info(),
            pod_("h-1", "spare").uid("u-h-1").group("h").on("n2").req(cpu=2).priority(5).created(0).info()]
    never = group_request([member(i, policy="Never") for i in range(3)])
    assert ask(never, nodes, pods) == ["g-0", "g-1", "g-2"]
    g = group_request([member(i) for i in range(3)])
    gangs = {("batch", "g"): 3, ("spare", "h"): 1}
    # h has a bound member of priority 5 >= 0: untouchable; cogate-system is protected; only b0 may go
    assert [p.name for p in mixed.evictable(g, pods, gangs, GATE, protected=frozenset({"cogate-system"}))] == ["b0"]
    assert ask(g, nodes, pods, gangs=gangs, protected=frozenset({"cogate-system"})) == ["g-1", "g-2"]


def test_the_room_counted_gone_is_given_back_to_the_next_group():
    nodes = spare(2)
    pods = [balloon("b0", "n0", 4), balloon("b1", "n1", 4)]
    hi = group_request([member(i, group="hi", prio=10) for i in range(3)], name="hi")
    lo = group_request([member(i, group="lo", prio=LOW - 1) for i in range(1)], name="lo")
    gone = {("batch", "hi"): mixed.evictable(hi, pods, {}, GATE), ("batch", "lo"): mixed.evictable(lo, pods, {}, GATE)}
    out = provreq.shortfalls([(hi, True), (lo, True)], nodes, pods, [], GATE, gone=gone)
    assert [m.name for m in out[("batch", "hi")]] == ["hi-2"]
    assert [m.name for m in out[("batch", "lo")]] == ["lo-0"]  # the balloons were not evicted for it
    assert gone[("batch", "lo")] == ()


# -- the property: exactly the difference, against victim selection -----------------------------


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=5), st.lists(st.integers(0, 4), min_size=1, max_size=5),
       st.integers(1, 7), st.sampled_from([1, 2, 4]))
def test_the_shortfall_after_preemption_is_exactly_what_new_nodes_must_hold(low, high, count, size):
    """Nodes of 4 CPU each with ``low[i]`` CPU of balloons (evictable) and ``high[i]`` of pods of
    higher priority; a gang of ``count`` members of ``size`` CPU. Asked for k members: with k new
    nodes of one member each the gang fits with preemption, with k - 1 it does not."""
    n = min(len(low), len(high))
    nodes = spare(n)
    pods = []
    for i in range(n):
        lo, hi = low[i], min(high[i], 4 - low[i])
        if lo:
            pods.append(balloon(f"b{i}", f"n{i}", lo))
        if hi:
            pods.append(balloon(f"x{i}", f"n{i}", hi, prio=100))
    g = group_request([member(i, cpu=size) for i in range(count)])
    k = len(ask(g, nodes, pods))
    assert by_view(g, nodes, pods) == ask(g, nodes, pods)  # the controller's path: the planner's kept room
    assert k <= len(ask(g, nodes, pods, preemption=False))
    assert fits_with_preemption(g, with_new_nodes(nodes, k, cpu=size), pods)
    if k:
        assert not fits_with_preemption(g, with_new_nodes(nodes, k - 1, cpu=size), pods)
