"""Victim selection for gang-aware preemption (controller/preemption/victims.py; issue 15 item 1).

One section per rule of the module docstring; every answer that preempts is checked against the
planner itself: with the victims gone, ``planner.decide`` releases the group (rule 4).
"""

from __future__ import annotations

import random

import pytest

from cogate.api import POD_GROUP_LABEL
from cogate.controller.planning import capacity, planner
from cogate.controller.preemption.budgets import Budget, budget_info
from cogate.controller.preemption.selection import candidate_nodes, more_important
from cogate.controller.preemption.victims import Gang, NoPreemption, Preemption, Reason, select_victims
from cogate.controller.model.records import (HostPort, InvalidObject, LabelSelector, NodeInfo, NodeSelectorRequirement,
                                       NodeSelectorTerm, PodAffinityTerm, PodInfo, Reservation, Taint,
                                       TopologySpreadConstraint)
from cogate.controller.model.verdicts import GroupRequest, Outcome, PlannerConfig
from tests.builders import group_request, node, pod as pod_

CFG = PlannerConfig()
NOW = 1_000.0


def pod(name: str, on: str, cpu: float, prio: int, *, started: float = 0.0, ns: str = "batch",
        labels: dict[str, str] | None = None, **kw) -> PodInfo:
    b = pod_(name, ns).uid("u-" + name).labels(labels or {}).on(on).req(cpu=cpu).priority(prio).created(0)
    if started:
        b.started(started)
    return b.info(**kw)


def gang_pod(gang: str, i: int, on: str, cpu: float, prio: int = 0, **kw) -> PodInfo:
    return pod(f"{gang}-{i}", on, cpu, prio, labels={POD_GROUP_LABEL: gang}, **kw)


def member(i: int, cpu: float, prio: int = 100, group: str = "g", labels: dict[str, str] | None = None,
           **kw) -> PodInfo:
    b = pod_(f"{group}-{i}").uid(f"u-{group}-{i}").group(group).labels(labels or {}).req(cpu=cpu).gated()
    return b.priority(prio).created(i).info(**kw)


def names(result: Preemption) -> list[str]:
    return [v.pod.name for v in result.victims]


def released_without(g: GroupRequest, nodes, pods, victims=(), reservations=()) -> bool:
    """The planner itself (rule 4): does ``decide`` release ``g`` with ``victims`` gone?"""
    gone = {v.pod.uid for v in victims}
    d = planner.decide(nodes, [p for p in pods if p.uid not in gone], [g], list(reservations), NOW, CFG)
    return d.verdicts[0].outcome == Outcome.RELEASED


def select(g, nodes, pods, promised=None, budgets=(), gangs=()) -> Preemption | NoPreemption:
    """select_victims, checked against ``decide`` (room promised: the nominations among ``pods``,
    as ``decide`` reads them, unless given)."""
    if promised is None:
        promised = capacity.promised_room([], capacity.nominated_pods(pods))
    result = select_victims(g, nodes, pods, list(promised), list(budgets), list(gangs), CFG)
    if isinstance(result, Preemption):
        assert not released_without(g, nodes, pods), "preempted for a group that fits"
        assert released_without(g, nodes, pods, result.victims), "the victims do not suffice"
        assert all(v.pod.priority < result.priority for v in result.victims)
    return result


# -- rule 1: strictly lower priority, the group's lowest gated member, never members/deleting/unbound


@pytest.mark.parametrize("prio,preempts", [(99, True), (100, False), (101, False), (-5, True)])
def test_only_strictly_lower_priority_is_a_candidate(prio, preempts):
    nodes = [node("n1").cpu(4).info()]
    pods = [pod("filler", "n1", 4, prio)]
    r = select(group_request([member(0, 2)]), nodes, pods)
    if preempts:
        assert isinstance(r, Preemption) and names(r) == ["filler"]
    else:  # rule 7: equal priority never preempts
        assert r == NoPreemption(Reason.NO_LOWER_PRIORITY_PODS, r.message) and "priority 100" in r.message


@pytest.mark.parametrize("filler_prio,preempts", [(40, True), (50, False), (60, False)])
def test_the_groups_priority_is_its_lowest_gated_member(filler_prio, preempts):
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [pod("f1", "n1", 4, filler_prio), pod("f2", "n2", 4, filler_prio)]
    g = group_request([member(0, 2, prio=100), member(1, 2, prio=50)])
    r = select(g, nodes, pods)
    assert isinstance(r, Preemption) is preempts
    if preempts:
        assert r.priority == 50


def test_never_a_member_of_the_group_a_deleting_pod_or_an_unbound_pod():
    nodes = [node("n1").cpu(4).info()]
    own_bound = PodInfo("team", "g-9", "u-g-9", labels={POD_GROUP_LABEL: "g"}, node_name="n1", phase="Running",
                        requests={"cpu": 1000}, priority=0)
    deleting = pod("going", "n1", 1, 0, deleting=True)
    unbound = pod("pending", "", 1, 0)
    keeper = pod("keeper", "n1", 2, 200)
    g = group_request([member(0, 1), member(1, 1), own_bound], 2)
    r = select(g, nodes, [own_bound, deleting, unbound, keeper])
    assert r.reason == Reason.NO_LOWER_PRIORITY_PODS
    # one real candidate beside them: it is the only victim
    r = select(g, [node("n1").cpu(5).info()], [own_bound, deleting, unbound, pod("cheap", "n1", 1, 0), keeper])
    assert isinstance(r, Preemption) and names(r) == ["cheap"]


def test_a_bound_pod_labelled_for_the_group_is_never_a_victim_even_unknown_to_the_members_cache():
    late = PodInfo("team", "g-7", "u-g-7", labels={POD_GROUP_LABEL: "g"}, node_name="n1", phase="Running",
                   requests={"cpu": 4000}, priority=0)
    r = select_victims(group_request([member(0, 2)]), [node("n1").cpu(4).info()], [late], [], [], [], CFG)
    assert r.reason == Reason.NO_LOWER_PRIORITY_PODS


# -- rule 2: preemptionPolicy Never


@pytest.mark.parametrize("never_on", [0, 1])
def test_a_member_with_preemption_policy_never_preempts_nothing(never_on):
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [pod("f1", "n1", 4, 0), pod("f2", "n2", 4, 0)]
    ms = [member(i, 2, preemption_policy="Never" if i == never_on else "PreemptLowerPriority") for i in range(2)]
    r = select(group_request(ms), nodes, pods)
    assert r.reason == Reason.PREEMPTION_POLICY_NEVER and f"g-{never_on}" in r.message


def test_never_does_not_matter_when_the_group_fits():
    r = select(group_request([member(0, 2, preemption_policy="Never")]), [node("n1").cpu(4).info()],
               [pod("f", "n1", 1, 0)])
    assert r.reason == Reason.FITS_WITHOUT_PREEMPTION


# -- rule 3: only when it helps


@pytest.mark.parametrize("pods,fits_then", [
    ([pod("f", "n1", 4, 0)], 1),                                  # a member larger than any node
    ([pod("f", "n1", 1, 0), pod("vip", "n2", 4, 500)], 1),         # the other node holds a higher priority
    ([pod("f", "n1", 2, 0), pod("vip", "n2", 3, 100)], 1),         # equal priority holds the second node
])
def test_a_group_that_does_not_fit_even_with_every_candidate_gone_preempts_nothing(pods, fits_then):
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    sizes = (3, 5) if len(pods) == 1 else (3, 3)
    r = select(group_request([member(0, sizes[0]), member(1, sizes[1])]), nodes, pods)
    assert r.reason == Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION
    assert f"fits {fits_then} of 2 even with all" in r.message


def test_room_promised_to_others_is_not_freed_by_victims():
    """A nomination of higher priority (kube-scheduler's preemptor waiting for its victims) keeps
    its room; victims free only what they take."""
    nodes = [node("n1").cpu(4).info()]
    nominee = PodInfo("batch", "nom", "u-nom", requests={"cpu": 2000}, priority=1000, nominated_node="n1")
    pods = [pod("f", "n1", 2, 0), nominee]
    g = group_request([member(0, 3)])
    assert select(g, nodes, pods).reason == Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION
    g = group_request([member(0, 2)])
    r = select(g, nodes, pods)
    assert isinstance(r, Preemption) and names(r) == ["f"]


def test_nominations_of_lower_priority_are_lent_as_the_planner_lends_them():
    nominee = PodInfo("batch", "nom", "u-nom", requests={"cpu": 2000}, priority=10, nominated_node="n1")
    promised = capacity.promised_room([], [nominee])
    r = select(group_request([member(0, 2)]), [node("n1").cpu(4).info()], [pod("f", "n1", 2, 0)], promised)
    assert r.reason == Reason.FITS_WITHOUT_PREEMPTION


@pytest.mark.parametrize("held", [dict(scheduler_name="other-scheduler"), dict(volume_problems=("claim c not found",))])
def test_a_group_the_planner_holds_whatever_the_room_preempts_nothing(held):
    r = select(group_request([member(0, 2, **held)]), [node("n1").cpu(4).info()], [pod("f", "n1", 4, 0)])
    assert r.reason == Reason.HELD
    assert not released_without(group_request([member(0, 2, **held)]), [node("n1").cpu(4).info()], [])  # in vain indeed


def test_a_group_that_fits_gets_no_victims_and_too_few_members_is_said():
    assert select(group_request([member(0, 1)]), [node("n1").cpu(4).info()], [pod("f", "n1", 3, 0)]).reason == \
        Reason.FITS_WITHOUT_PREEMPTION
    assert select(group_request([member(0, 1)], 2), [node("n1").cpu(4).info()], []).reason == Reason.NOT_ENOUGH_MEMBERS


# -- rule 4: the planner's own filters (one rule set)


def _tainted():
    return [NodeInfo("n1", labels={"kubernetes.io/hostname": "n1"}, allocatable={"cpu": 4000, "pods": 110},
                     taints=(Taint("gpu", "", "NoSchedule"),)), node("n2").cpu(4).info()]


@pytest.mark.parametrize("nodes,pods,g,victims", [
    # taints: the member cannot use n1, so the victim is on n2 although n1's is cheaper
    (_tainted(), [pod("cheap", "n1", 4, 0), pod("dear", "n2", 4, 5)], group_request([member(0, 2)]), ["dear"]),
    # node selector
    ([node("n1").cpu(4).labels(pool="a").info(), node("n2").cpu(4).labels(pool="b").info()], [pod("cheap", "n1", 4, 0),
      pod("dear", "n2", 4, 5)],
     group_request([member(0, 2, node_selector={"pool": "b"})]), ["dear"]),
    # required node affinity
    ([node("n1").cpu(4).info(), node("n2").cpu(4).info()], [pod("cheap", "n1", 4, 0), pod("dear", "n2", 4, 5)],
     group_request([member(0, 2, required_node_affinity=(NodeSelectorTerm(match_fields=(
         NodeSelectorRequirement("metadata.name", "In", ("n2",)),)),))]), ["dear"]),
    # host ports: the pod holding the port must go even though resources are free
    ([node("n1").cpu(8).info()], [pod("port", "n1", 1, 0, host_ports=(HostPort(80),)), pod("other", "n1", 1, 0)],
     group_request([member(0, 1, host_ports=(HostPort(80),))]), ["port"]),
    # anti-affinity of a bound pod against the member: it must go, resources are free
    ([node("n1").cpu(8).info()], [pod("anti", "n1", 1, 0, required_pod_anti_affinity=(PodAffinityTerm(
        "kubernetes.io/hostname", LabelSelector(((POD_GROUP_LABEL, "g"),)), ("team",)),))],
     group_request([member(0, 1)]), ["anti"]),
    # topology spread: max skew 1 over two zones; zone a holds 2 matching pods of low priority
    ([node("n1").cpu(4).labels(zone="a").info(), node("n2").cpu(4).labels(zone="b").info()],
     [pod("s1", "n1", 1, 0, ns="team", labels={"app": "x"}), pod("s2", "n1", 1, 0, ns="team", labels={"app": "y"}),
      pod("full", "n2", 4, 500)],
     group_request([member(0, 1, labels={"app": "x"}, topology_spread=(
         TopologySpreadConstraint(1, "zone", LabelSelector((("app", "x"),))),))]), ["s1"]),
])
def test_victims_follow_the_planners_filters_and_the_planner_then_releases(nodes, pods, g, victims):
    r = select(g, nodes, pods)  # select() asserts decide releases without the victims, not with them
    assert isinstance(r, Preemption), r
    assert names(r) == victims


def test_equivalence_with_decide_when_reservations_hold_room():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    other = PodInfo("team", "o-0", "u-o-0", labels={POD_GROUP_LABEL: "o"}, requests={"cpu": 2000}, priority=1000,
                    required_node_affinity=(NodeSelectorTerm(match_fields=(
                        NodeSelectorRequirement("metadata.name", "In", ("n1",)),)),))
    res = Reservation(other.uid, "team", other.name, "n1", {"cpu": 2000}, (), NOW + 60)
    pods = [pod("a", "n1", 2, 0), pod("b", "n2", 2, 0), pod("c", "n2", 2, 1)]
    g = group_request([member(0, 2), member(1, 2)])
    promised = [capacity.reservation_promise(res, other)]
    r = select_victims(g, nodes, pods, promised, [], [], CFG)
    assert isinstance(r, Preemption)
    gone = {v.pod.uid for v in r.victims}
    og = GroupRequest("team", "o", 1, 0.0, True, (other,))
    d = planner.decide(nodes, [p for p in pods if p.uid not in gone], [og, g], [res], NOW, CFG)
    assert d.verdicts[1].outcome == Outcome.RELEASED
    # per member, the cheapest node: a (n1) then b (n2); c (priority 1) stays
    assert sorted(names(r)) == ["a", "b"] and set(r.plan.values()) == {"n1", "n2"}


# -- rule 5: kube-scheduler's order


def test_fewest_budget_violations_first():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [pod("guarded", "n1", 4, 0, labels={"app": "db"}), pod("plain", "n2", 4, 0, labels={"app": "web"})]
    pdb = Budget("batch", "db", LabelSelector((("app", "db"),)), 0)
    r = select(group_request([member(0, 2)]), nodes, pods, budgets=[pdb])
    assert names(r) == ["plain"] and not r.victims[0].breaks_budget
    # when only the guarded pod helps, it is taken and said to break its budget
    r = select(group_request([member(0, 2)]), nodes, [pods[0], pod("vip", "n2", 4, 500)], budgets=[pdb])
    assert names(r) == ["guarded"] and r.victims[0].breaks_budget and "PodDisruptionBudget" in r.message


def test_budget_with_disruptions_left_or_disrupted_pods_does_not_count():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [pod("guarded", "n1", 4, 0, labels={"app": "db"}, started=5.0),
            pod("plain", "n2", 4, 0, labels={"app": "web"}, started=1.0)]
    # allowed 1: no violation either way; the later start is preferred (rule 5, last key)
    r = select(group_request([member(0, 2)]), nodes, pods, budgets=[Budget("batch", "db", LabelSelector((("app", "db"),)), 1)])
    assert names(r) == ["guarded"] and not r.victims[0].breaks_budget
    r = select(group_request([member(0, 2)]), nodes, pods,
               budgets=[Budget("batch", "db", LabelSelector((("app", "db"),)), 0, frozenset({"guarded"}))])
    assert names(r) == ["guarded"] and not r.victims[0].breaks_budget
    # an empty selector, another namespace: match nothing
    for b in (Budget("batch", "all", LabelSelector(), 0), Budget("other", "db", LabelSelector((("app", "db"),)), 0)):
        assert not b.matches(pods[0])


@pytest.mark.parametrize("n1,n2,expected", [
    # lowest highest-victim priority, even with more victims
    ([(4, 5)], [(2, 1), (2, 1)], {"n2"}),
    # lowest priority sum
    ([(2, 3), (2, 3)], [(2, 3), (2, 1)], {"n2"}),
    # fewest victims at equal priority (each victim adds its priority + 2^31 to the sum)
    ([(2, 0), (2, 0)], [(4, 0)], {"n2"}),
])
def test_pick_one_node_order(n1, n2, expected):
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [pod(f"a{k}", "n1", c, p) for k, (c, p) in enumerate(n1)] + \
           [pod(f"b{k}", "n2", c, p) for k, (c, p) in enumerate(n2)]
    r = select(group_request([member(0, 4)]), nodes, pods)
    assert {v.node for v in r.victims} == expected


@pytest.mark.parametrize("s1,s2,expected", [(100.0, 200.0, "n2"), (300.0, 200.0, "n1"), (0.0, 200.0, "n1")])
def test_latest_start_of_the_highest_priority_victims(s1, s2, expected):
    """A pod without a start time counts as starting now (kube-scheduler GetPodStartTime)."""
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [pod("a", "n1", 4, 0, started=s1), pod("b", "n2", 4, 0, started=s2)]
    r = select(group_request([member(0, 2)]), nodes, pods)
    assert [v.node for v in r.victims] == [expected]


def test_within_a_node_the_most_important_are_reprieved_first():
    pods = [pod("low", "n1", 2, 1), pod("high", "n1", 2, 2), pod("old", "n1", 2, 1, started=1.0)]
    r = select(group_request([member(0, 2)]), [node("n1").cpu(6).info()], pods)
    # "old" and "low" have priority 1; "low" has no start time (starts now): the least important
    assert names(r) == ["low"]


def test_budget_violating_pods_are_reprieved_first():
    pods = [pod("guarded", "n1", 2, 1, labels={"app": "db"}), pod("plain", "n1", 2, 2)]
    pdb = Budget("batch", "db", LabelSelector((("app", "db"),)), 0)
    r = select(group_request([member(0, 2)]), [node("n1").cpu(4).info()], pods, budgets=[pdb])
    assert names(r) == ["plain"]
    r = select(group_request([member(0, 2)]), [node("n1").cpu(4).info()], pods)
    assert names(r) == ["guarded"]


def test_free_room_is_used_before_any_eviction():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info(), node("n3").cpu(4).info()]
    pods = [pod("a", "n1", 4, 0), pod("b", "n2", 4, 0), pod("half", "n3", 2, 0)]
    r = select(group_request([member(0, 2), member(1, 2)]), nodes, pods)
    assert len(r.victims) == 1 and r.plan["u-g-0"] == "n3"


def test_members_already_bound_count():
    own = PodInfo("team", "g-5", "u-g-5", labels={POD_GROUP_LABEL: "g"}, node_name="n1", phase="Running",
                  requests={"cpu": 2000}, priority=100)
    pods = [own, pod("a", "n1", 2, 0), pod("b", "n2", 4, 0)]
    r = select(group_request([own, member(0, 2), member(1, 2)], 2), [node("n1").cpu(4).info(),
    node("n2").cpu(4).info()], pods)
    assert len(r.plan) == 1 and len(r.victims) == 1


# -- rule 6: gangs


def _gang_cluster(min_member: int):
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info(), node("n3").cpu(4).info()]
    pods = [gang_pod("job", i, f"n{i + 1}", 4) for i in range(3)]
    return nodes, pods, [Gang("batch", "job", min_member)]


def test_a_gang_member_is_taken_alone_while_its_gang_keeps_min_member():
    nodes, pods, gangs = _gang_cluster(2)
    r = select(group_request([member(0, 2)]), nodes, pods, gangs=gangs)
    assert len(r.victims) == 1 and r.victims[0].whole_gang is None and r.gangs_taken == ()


def test_otherwise_the_whole_gang_goes():
    nodes, pods, gangs = _gang_cluster(3)
    r = select(group_request([member(0, 2)]), nodes, pods, gangs=gangs)
    assert sorted(names(r)) == ["job-0", "job-1", "job-2"]
    assert all(v.whole_gang == ("batch", "job") for v in r.victims) and r.gangs_taken == (("batch", "job"),)
    assert "whole gangs: batch/job" in r.message


def test_a_pod_outside_gangs_is_not_a_gang_member():
    nodes, pods, _ = _gang_cluster(3)
    r = select(group_request([member(0, 2)]), nodes, pods, gangs=[])
    assert len(r.victims) == 1


def test_slack_is_shared_by_every_victim_of_a_gang():
    """Two members need two gang pods; the gang of 3 (minMember 2) can spare one: all of it goes,
    or the members go where no gang pod is taken."""
    nodes, pods, gangs = _gang_cluster(2)
    r = select(group_request([member(0, 4), member(1, 4)]), nodes, pods, gangs=gangs)
    assert sorted(names(r)) == ["job-0", "job-1", "job-2"] and r.gangs_taken == (("batch", "job"),)
    pods = pods + [pod("x", "n4", 4, 0)]
    r = select(group_request([member(0, 4), member(1, 4)]), nodes + [node("n4").cpu(4).info()], pods, gangs=gangs)
    # the first member takes job-0 alone (the gang's one spare); the second could take the rest of
    # the gang (one unit, like x) but that is two pods: x goes
    assert sorted(names(r)) == ["job-0", "x"] and r.gangs_taken == ()


def test_a_gang_taken_whole_counts_as_one_victim():
    """n1: one member of a gang of 2 that cannot spare it (its other member is on n3); n2: two
    single pods of the same priority. The gang is one unit: n1 is chosen."""
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info(), node("n3").cpu(4).info()]
    pods = [gang_pod("job", 0, "n1", 4), gang_pod("job", 1, "n3", 4), pod("a", "n2", 2, 0), pod("b", "n2", 2, 0)]
    r = select(group_request([member(0, 4)]), nodes, pods, gangs=[Gang("batch", "job", 2)])
    assert r.gangs_taken == (("batch", "job"),) and sorted(names(r)) == ["job-0", "job-1"]


def test_a_gang_of_the_groups_priority_or_more_is_never_touched():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [gang_pod("job", 0, "n1", 4, prio=0), gang_pod("job", 1, "n2", 4, prio=100)]
    r = select(group_request([member(0, 2)]), nodes, pods, gangs=[Gang("batch", "job", 1)])
    assert r.reason == Reason.NO_LOWER_PRIORITY_PODS
    # without the Gang record its low member is an ordinary candidate
    assert names(select(group_request([member(0, 2)]), nodes, pods)) == ["job-0"]


def test_the_reprieve_keeps_a_gang_member_when_the_plan_holds_without_it():
    """The member needs 4 cpu on n1: the gang pod (1 cpu, no slack) and a 3-cpu pod; the
    SelectVictimsOnNode reprieve cannot keep either; elsewhere nothing fits."""
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [gang_pod("job", 0, "n1", 1), pod("big", "n1", 3, 0), gang_pod("job", 1, "n2", 4)]
    r = select(group_request([member(0, 4)]), nodes, pods, gangs=[Gang("batch", "job", 2)])
    assert isinstance(r, Preemption)
    # either the whole gang (n2 freed too) or n1's two pods; never one gang pod alone
    left = {p.name for p in pods} - set(names(r))
    assert not ({"job-0", "job-1"} & left and {"job-0", "job-1"} - left)


# -- determinism, helpers, converters


def test_the_passs_snapshot_gives_the_same_answer():
    nodes = [node(f"n{i}").cpu(4).info() for i in range(4)]
    pods = [pod(f"p{i}", f"n{i % 4}", 1, i % 3, started=float(i)) for i in range(16)]
    g = group_request([member(i, 2) for i in range(3)])
    snap = capacity.Snapshot(nodes, pods, planner.members_anti([g]), planner.members_spread([g]))
    fresh = select(g, nodes, pods)
    assert isinstance(fresh, Preemption)
    assert select_victims(g, nodes, pods, [], [], [], CFG, snapshot=snap) == fresh
    assert select_victims(g, nodes, pods, [], [], [], CFG, snapshot=snap) == fresh  # read only


def test_the_answer_does_not_depend_on_input_order():
    nodes = [node(f"n{i}").cpu(4).info() for i in range(5)]
    pods = [pod(f"p{i}", f"n{i % 5}", 1, i % 3, started=float(i % 4)) for i in range(20)]
    g = group_request([member(i, 2) for i in range(3)])
    first = select(g, nodes, pods)
    rng = random.Random(7)
    for _ in range(5):
        shuffled = list(pods)
        rng.shuffle(shuffled)
        again = select_victims(g, nodes, shuffled, [], [], [], CFG)
        assert again == first


def test_more_important_and_candidate_nodes():
    a, b, c = pod("a", "n1", 1, 5), pod("b", "n1", 1, 1, started=10.0), pod("c", "n1", 1, 1, started=20.0)
    assert sorted([c, a, b], key=more_important) == [a, b, c]
    assert [candidate_nodes(n) for n in (6, 100, 500, 5000)] == [6, 100, 100, 500]


def test_budget_info():
    b = budget_info({"metadata": {"namespace": "batch", "name": "db"},
                     "spec": {"selector": {"matchLabels": {"app": "db"}}},
                     "status": {"disruptionsAllowed": 2, "disruptedPods": {"db-0": "2024-01-01T00:00:00Z"}}})
    assert b == Budget("batch", "db", LabelSelector((("app", "db"),)), 2, frozenset({"db-0"}))
    assert budget_info({"metadata": {"namespace": "x", "name": "y"}}).disruptions_allowed == 0


@pytest.mark.parametrize("obj,field", [
    ({"metadata": {"namespace": "a", "name": "b"}, "status": {"disruptionsAllowed": "2"}}, "status.disruptionsAllowed"),
    ({"metadata": {"namespace": "a", "name": "b"}, "spec": {"selector": {"matchLabels": []}}}, "spec.selector.matchLabels"),
    ({"metadata": {"namespace": "a", "name": "b"}, "status": {"disruptedPods": []}}, "status.disruptedPods"),
    ({"metadata": [], "spec": {}}, "metadata"),
    ([], "poddisruptionbudget"),
])
def test_budget_info_garbage_names_the_field(obj, field):
    with pytest.raises(InvalidObject) as ei:
        budget_info(obj)
    assert field in str(ei.value)


# -- capacity.Room: a spec built after a mark (found while writing Room.vacate)


def test_a_rollback_forgets_a_spec_built_after_its_mark():
    """``Room.spec_for`` records the domains a new spec's anti-affinity forbids in the undo log; a
    rollback past it used to keep the cached spec without them. ``planner.decide`` then released a
    LeaderWorkerSet replica (whose members ``_try_release`` packs twice around a rollback) next to
    a bound pod its required anti-affinity excludes."""
    from cogate.controller.model import replicas

    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [pod("x", "n1", 1, 0, ns="team", labels={"app": "x"}), pod("y", "n2", 2.5, 0)]
    anti = (PodAffinityTerm("kubernetes.io/hostname", LabelSelector((("app", "x"),))),)
    lws = {replicas.LWS_GROUP_INDEX_LABEL: "0", replicas.LWS_NAME_LABEL: "w"}
    for labels in ({}, lws):
        g = group_request([member(i, 1, prio=0, labels=labels, required_pod_anti_affinity=anti, replica_size=2 if labels else 0)
                   for i in range(2)])
        verdict = planner.decide(nodes, pods, [g], [], NOW, CFG).verdicts[0]
        assert verdict.outcome == Outcome.INSUFFICIENT_CAPACITY, (labels, verdict)
    room = capacity.Snapshot(nodes, pods, True).room([])
    mark = room.mark()
    spec = room.spec_for(g.members[0])
    assert not room.fits(spec, 0)  # x forbids n1
    room.rollback(mark)
    assert not room.fits(room.spec_for(g.members[0]), 0)
