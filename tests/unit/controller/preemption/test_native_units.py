"""Kubernetes' own gangs as victim units (issue 39): the reader of ``scheduling.k8s.io`` PodGroups
(controller/model/nativegroups.py), the units (controller/preemption/units.py), the cheapest
combination (controller/preemption/cheapest.py) and select_victims on the issue's cases.

The property test against a brute-force oracle is in test_preemption_oracle.py
(``test_native_units_against_brute_force``)."""

from __future__ import annotations

import dataclasses

import pytest

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.nativegroups import Mode, NativeGroup, native_group, native_key, pod_group_name
from cogate.controller.model.readers import InvalidObject
from cogate.controller.model.records import NodeInfo, PodInfo, pod_info
from cogate.controller.model.verdicts import GroupRequest, PlannerConfig
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.victims import Gang, NoPreemption, Preemption, Reason, select_victims

CFG = PlannerConfig()


# -- the reader -------------------------------------------------------------------------------------
def raw_pg(mode=None, priority=None, min_count=2, version="v1beta1"):
    spec = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if mode is not None:
        spec["disruptionMode"] = mode
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
            "metadata": {"name": "n", "namespace": "ml"}, "spec": spec}


@pytest.mark.parametrize("mode, want", [
    (None, Mode.SINGLE), ({"single": {}}, Mode.SINGLE), ({"all": {}}, Mode.ALL), ({}, Mode.SINGLE),
    ("Pod", Mode.SINGLE), ("PodGroup", Mode.ALL)])
def test_disruption_mode_of_both_versions(mode, want):
    g = native_group(raw_pg(mode, priority=100))
    assert g == NativeGroup("ml", "n", want, 100, 2)
    assert g.key == ("ml", "scheduling.k8s.io/n") == native_key("ml", "n")


@pytest.mark.parametrize("raw, field", [
    (raw_pg("Gang"), "spec.disruptionMode"),
    (raw_pg({"all": {}, "single": {}}), "spec.disruptionMode"),
    (raw_pg(["all"]), "spec.disruptionMode"),
    (raw_pg(priority="high"), "spec.priority"),
    (raw_pg(min_count=-1), "spec.schedulingPolicy.gang.minCount"),
    ({"metadata": {"name": 3}}, "metadata.name"),
    ([], "PodGroup"),
])
def test_a_bad_native_pod_group_names_the_field(raw, field):
    with pytest.raises(InvalidObject, match=field.replace(".", r"\.")):
        native_group(raw)


def test_a_basic_policy_has_no_min_count_and_no_priority():
    g = native_group({"metadata": {"name": "b", "namespace": "x"}, "spec": {"schedulingPolicy": {"basic": {}}}})
    assert (g.min_count, g.priority, g.mode) == (0, None, Mode.SINGLE)


def test_a_pod_names_its_native_pod_group():
    raw = {"metadata": {"name": "w", "namespace": "ml", "uid": "u"},
           "spec": {"schedulingGroup": {"podGroupName": "n"}, "containers": []}}
    p = pod_info(raw)
    assert (p.native, p.native_group) == ("spec.schedulingGroup", "n")
    assert pod_group_name({}) == ""
    with pytest.raises(InvalidObject, match="spec.schedulingGroup.podGroupName"):
        pod_group_name({"schedulingGroup": {"podGroupName": 1}})


# -- select_victims on the issue's cases ------------------------------------------------------------
LOW, HIGH = 100, 1000


def node(name, cpu=10000):
    return NodeInfo(name, labels={"kubernetes.io/hostname": name}, allocatable={"cpu": cpu, "pods": 110})


def bound(name, on, cpu=6000, priority=LOW, native_group="", ns="ml", labels=None, started=1.0):
    return PodInfo(ns, name, f"u-{name}", labels=labels or {"app": name}, node_name=on, phase="Running",
                   requests={"cpu": cpu}, priority=priority, started=started,
                   native="spec.schedulingGroup" if native_group else "", native_group=native_group)


def gang(size=1, cpu=6000, min_member=None):
    members = tuple(PodInfo("team", f"g-{i}", f"u-g-{i}", labels={POD_GROUP_LABEL: "g"}, requests={"cpu": cpu},
                            gates=(GATE,), priority=HIGH, created=float(i)) for i in range(size))
    return GroupRequest("team", "g", min_member or size, 0.0, False, members)


def select(group, nodes, pods, natives, gangs=(), view=False):
    if view:
        state = PlanningState()
        for n in nodes:
            state.upsert_node(n)
        for p in pods:
            state.upsert_pod(p)
        return select_victims(group, [], [], [], [], list(gangs), CFG, view=state.bound_view(), natives=natives)
    return select_victims(group, nodes, pods, [], [], list(gangs), CFG, natives=natives)


ISSUE = ([node("a"), node("b"), node("c")],
         [bound("n-0", "a", native_group="n"), bound("n-1", "b", native_group="n"), bound("plain", "c")])


@pytest.mark.parametrize("view", [False, True])
def test_the_issue_a_cheaper_plain_victim_is_taken_and_the_native_gang_is_said_skipped(view):
    nodes, pods = ISSUE
    r = select(gang(), nodes, pods, [NativeGroup("ml", "n", Mode.ALL, LOW, 2)], view=view)
    assert isinstance(r, Preemption), r
    assert [v.pod.name for v in r.victims] == ["plain"]
    assert "native gang ml/n (scheduling.k8s.io, disruptionMode all) skipped: 1 of its 2 pods would have been " \
           "needed, and it is preempted whole or not at all" in r.message


@pytest.mark.parametrize("view", [False, True])
def test_with_no_other_choice_an_all_group_is_taken_whole(view):
    nodes, pods = ISSUE[0][:2], ISSUE[1][:2]
    r = select(gang(), nodes, pods, [NativeGroup("ml", "n", Mode.ALL, LOW, 2)], view=view)
    assert isinstance(r, Preemption), r
    assert sorted(v.pod.name for v in r.victims) == ["n-0", "n-1"]
    assert r.gangs_taken == (native_key("ml", "n"),)
    assert all(v.whole_gang == native_key("ml", "n") for v in r.victims)
    assert "whole gangs: ml/n (scheduling.k8s.io)" in r.message and "taken whole: 1 of its 2 pods" in r.message


@pytest.mark.parametrize("mode", [Mode.SINGLE, None])
def test_a_single_group_or_an_unknown_one_is_ordinary_pods(mode):
    nodes, pods = ISSUE[0][:2], ISSUE[1][:2]
    natives = [NativeGroup("ml", "n", mode, LOW, 2)] if mode else []
    r = select(gang(), nodes, pods, natives)
    assert isinstance(r, Preemption) and len(r.victims) == 1 and r.gangs_taken == () and "native" not in r.message


def test_an_all_group_at_the_preemptors_priority_is_never_touched_even_with_low_priority_pods():
    nodes, pods = ISSUE[0][:2], ISSUE[1][:2]
    r = select(gang(), nodes, pods, [NativeGroup("ml", "n", Mode.ALL, HIGH, 2)])
    assert isinstance(r, NoPreemption) and r.reason is Reason.NO_LOWER_PRIORITY_PODS, r


def test_an_all_group_is_taken_at_its_pod_groups_priority():
    """Two nodes: a native all gang whose PodGroup has priority 500 (its pods 100) and two plain pods
    of priority 200: the plain pods' node is cheaper by the highest unit priority."""
    nodes = [node("a"), node("b")]
    pods = [bound("n-0", "a", 5000, native_group="n"), bound("n-1", "a", 5000, native_group="n"),
            bound("p-0", "b", 5000, priority=200), bound("p-1", "b", 5000, priority=200)]
    r = select(gang(cpu=10000), nodes, pods, [NativeGroup("ml", "n", Mode.ALL, 500, 2)])
    assert isinstance(r, Preemption) and sorted(v.pod.name for v in r.victims) == ["p-0", "p-1"], r


def test_a_mix_picks_the_fewest_victims():
    """A cogate gang (2 pods, minMember 2), a native all gang (3 pods) and two plain pods, all of one
    low priority, on nodes of 10 CPU; the preemptor needs 6 CPU: one plain pod (6 CPU) is the cheapest."""
    nodes = [node("a"), node("b"), node("c"), node("d")]
    pods = [bound("c-0", "a", 6000, labels={POD_GROUP_LABEL: "cg"}), bound("c-1", "b", 6000, labels={POD_GROUP_LABEL: "cg"}),
            bound("n-0", "c", 3000, native_group="n"), bound("n-1", "c", 3000, native_group="n"),
            bound("n-2", "c", 4000, native_group="n"),
            bound("p-0", "d", 6000), bound("p-1", "d", 3000)]
    r = select(gang(), nodes, pods, [NativeGroup("ml", "n", Mode.ALL, LOW, 3)], gangs=[Gang("ml", "cg", 2)])
    assert isinstance(r, Preemption) and [v.pod.name for v in r.victims] == ["p-0"], r


def test_the_cheapest_search_beats_the_greedy_choice():
    """kube-scheduler's node order takes one unit (a native gang of three pods on node a) over two
    pods (node b); the cheapest combination is the two pods, counted in pods."""
    nodes = [node("a"), node("b")]
    pods = [bound("n-0", "a", 2000, native_group="n"), bound("n-1", "a", 2000, native_group="n"),
            bound("n-2", "a", 2000, native_group="n"), bound("p-0", "b", 3000), bound("p-1", "b", 3000)]
    r = select(gang(cpu=9000), nodes, pods, [NativeGroup("ml", "n", Mode.ALL, LOW, 3)])
    assert isinstance(r, Preemption) and sorted(v.pod.name for v in r.victims) == ["p-0", "p-1"], r


def test_a_native_pod_being_deleted_is_no_part_of_its_unit():
    nodes, pods = ISSUE[0][:2], ISSUE[1][:2]
    pods = [dataclasses.replace(pods[0], deleting=True), pods[1]]
    r = select(gang(), nodes, pods, [NativeGroup("ml", "n", Mode.ALL, LOW, 2)])
    assert isinstance(r, Preemption) and [v.pod.name for v in r.victims] == ["n-1"], r
