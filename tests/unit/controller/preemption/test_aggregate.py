"""A group with spec.minResources preempts for all of it or for nothing (issue 37 kind 9;
controller/preemption/aggregate.py). The Spark shape: ``minMember: 1``, the driver the only member,
the executors only in minResources; a cluster full of low-priority pods."""

from __future__ import annotations

import dataclasses

import pytest

from cogate.controller.model import minresources as minres
from cogate.controller.preemption.budgets import Budget
from cogate.controller.preemption.victims import Gang, NoPreemption, Preemption, Reason
from cogate.controller.model.records import LabelSelector
from cogate.controller.model.verdicts import GroupRequest
from tests.builders import node
from tests.unit.controller.preemption.test_preemption import gang_pod, member, pod, released_without, select


def full(n_nodes=2, per_node=4, cpu=2, prio=0):
    nodes = [node(f"n{j}").alloc(cpu=8, memory="64Gi", pods=110).info() for j in range(n_nodes)]
    pods = [pod(f"low-{j}-{k}", f"n{j}", cpu, prio, started=float(k + 1))
            for j in range(n_nodes) for k in range(per_node)]
    return nodes, pods


def spark(cpu: str, driver=1.0, prio=100) -> GroupRequest:
    mr = tuple(sorted(minres.parse({"cpu": cpu}).items()))
    return GroupRequest("default", "g", 1, 0.0, False, (member(0, driver, prio),), min_resources=mr)


@pytest.mark.parametrize("cpu, victims", [("1", 1), ("2", 1), ("3", 2), ("10", 5), ("16", 8)])
def test_victims_make_room_for_the_whole_min_resources_and_the_planner_releases(cpu, victims):
    nodes, pods = full()
    result = select(spark(cpu), nodes, pods)  # select checks: the planner releases the group without them
    assert isinstance(result, Preemption) and len(result.victims) == victims, result
    if victims > 1:
        assert "for the rest of spec.minResources" in result.message
    # none in vain: any one victim back and the planner no longer releases
    for v in result.victims:
        assert not released_without(spark(cpu), nodes, pods, [w for w in result.victims if w is not v])


def test_no_victim_when_even_every_lower_priority_pod_gone_leaves_min_resources_short():
    nodes, pods = full()
    result = select(spark("17"), nodes, pods)
    assert isinstance(result, NoPreemption) and result.reason is Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION
    assert "rest of spec.minResources (cpu short by 1)" in result.message


def test_higher_priority_pods_and_untouchable_gangs_are_not_counted():
    nodes, pods = full()
    pods = [dataclasses.replace(p, priority=200) if p.node_name == "n1" else p for p in pods]
    assert isinstance(select(spark("9"), nodes, pods), NoPreemption)  # only n0's 8 cpu can be freed
    assert isinstance(select(spark("8"), nodes, pods), Preemption)


def test_a_gang_is_taken_whole_for_the_rest_never_left_below_its_minimum():
    nodes, _ = full()
    pods = [gang_pod("etl", k, f"n{k % 2}", 2, started=float(k + 1)) for k in range(8)]
    result = select(spark("10"), nodes, pods, gangs=[Gang("batch", "etl", 8)])
    assert isinstance(result, Preemption) and len(result.victims) == 8
    assert result.gangs_taken == (("batch", "etl"),)


def test_pods_no_budget_covers_go_first_then_budgets_are_counted():
    nodes, pods = full()
    guarded = [dataclasses.replace(p, labels={"app": "db"}) if p.node_name == "n1" else p for p in pods]
    budget = Budget("batch", "pdb", LabelSelector((("app", "db"),)), 1)
    result = select(spark("8"), nodes, guarded, budgets=[budget])
    assert isinstance(result, Preemption) and {v.node for v in result.victims} == {"n0"}
    assert not any(v.breaks_budget for v in result.victims)
    result = select(spark("14"), nodes, guarded, budgets=[budget])  # 7 of 8 pods: n1's too
    assert isinstance(result, Preemption) and len(result.victims) == 7
    assert sum(v.breaks_budget for v in result.victims) == 2  # 3 of n1's, 1 allowed
