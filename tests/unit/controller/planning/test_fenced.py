"""Gangs fenced into one topology domain (issue 32 item 2): the planner with ``GroupRequest.topology``
(controller/planning/fenced.py), each rule with several inputs, and a property test against a brute
force over small labelled clusters."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.planning.planner import Outcome, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.topology.constraints import HOSTNAME_LABEL as HOST
from cogate.controller.topology.constraints import Constraint
from tests.builders import GATE, group_request, node, pod

LEVELS = ("block", "rack", HOST)
RACK = Constraint(LEVELS, required=1)


def cluster(layout, cpu=4, **extra):
    """``{"b1": {"r1": 2, ...}}`` -> nodes ``<rack>-<i>`` labelled block and rack, ``cpu`` cores each."""
    out = []
    for block, racks in layout.items():
        for rack, n in racks.items():
            for i in range(n):
                b = node(f"{rack}-{i}").labels(block=block, rack=rack).cpu(cpu)
                for name, fn in extra.items():
                    b = fn(b, block, rack, i)
                out.append(b.info())
    return out


def members(n, cpu=1, group="g", **labels):
    return [pod(f"{group}-{i}").group(group).req(cpu=cpu).gated().labels(labels).info() for i in range(n)]


def fenced(ms, c, min_member=None):
    return dataclasses.replace(group_request(ms, min_member), topology=c)


def racks_of(verdict, nodes):
    rack = {n.name: (n.labels.get("block"), n.labels.get("rack")) for n in nodes}
    return {rack[v] for v in verdict.release.values()}


@pytest.mark.parametrize("layout, fill, expect", [
    # only r2 holds 8 cores free
    ({"b1": {"r1": 2, "r2": 2}}, {"r1-0": 3}, ("b1", "r2")),
    ({"b1": {"r1": 3}, "b2": {"r2": 1, "r3": 2}}, {"r1-0": 4, "r1-1": 4}, ("b2", "r3")),
    # best fit: both r1 and r2 hold 8; r1 leaves 0 cores, r2 leaves 4
    ({"b1": {"r1": 2, "r2": 3}}, {}, ("b1", "r1")),
])
def test_required_rack_where_one_rack_fits(layout, fill, expect):
    nodes = cluster(layout)
    bound = [pod(f"x-{n}").req(cpu=c).on(n).info() for n, c in fill.items()]
    ms = members(8)
    d = decide(nodes, bound, [fenced(ms, RACK)], [], 0.0)
    v = d.verdicts[0]
    assert v.outcome == Outcome.RELEASED, v.message
    assert racks_of(v, nodes) == {expect}
    assert f"in rack {expect[1]}" in v.message
    assert v.domain == (("block", expect[0]), ("rack", expect[1]))


def test_required_rack_where_none_fits_names_the_best_rack_and_its_shortfall():
    nodes = cluster({"b1": {"r1": 2, "r2": 2, "r3": 1}})
    bound = [pod("x").req(cpu=1).on("r1-0").info()]
    d = decide(nodes, bound, [fenced(members(9), RACK)], [], 0.0)
    v = d.verdicts[0]
    # rack r2 holds 8 of 9 with every node empty: never fits
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and v.release == {}
    assert "rack: no rack holds 9; r2 fits 8 (cpu short by 1" in v.message, v.message
    assert "r1 fits 7" in v.message
    assert "block b1 would fit (not allowed: required=rack)" in v.message


def test_required_rack_taken_now_waits_with_insufficient_capacity():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    bound = [pod("x").req(cpu=2).on("r1-0").info(), pod("y").req(cpu=2).on("r2-1").info()]
    v = decide(nodes, bound, [fenced(members(8), RACK)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.fits == 6
    assert v.message.startswith("fits 6 of 8: rack: no rack holds 8; r1 fits 6")


def test_preferred_rack_widens_to_the_fewest_racks_of_one_block():
    nodes = cluster({"b1": {"r1": 1, "r2": 1}, "b2": {"r3": 1, "r4": 1, "r5": 1}})
    c = Constraint(LEVELS, required=0, preferred=1)
    v = decide(nodes, [], [fenced(members(8), c)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED
    # b1 holds 8 exactly (least leftover); b2 would leave 4
    assert {b for b, _ in racks_of(v, nodes)} == {"b1"}
    assert "in block b1 (wider than the preferred rack" in v.message
    assert v.placed_in == "block b1 (wider than the preferred rack: none holds 8 now)"
    # and a gang that one rack holds stays in one rack
    v = decide(nodes, [], [fenced(members(3), c)], [], 0.0).verdicts[0]
    assert len(racks_of(v, nodes)) == 1 and "wider" not in v.message


def test_preferred_without_required_may_use_the_whole_cluster():
    nodes = cluster({"b1": {"r1": 1}, "b2": {"r2": 1}})
    v = decide(nodes, [], [fenced(members(8), Constraint(LEVELS, preferred=1))], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED and len(racks_of(v, nodes)) == 2
    assert "in the cluster (wider than the preferred rack" in v.message


def test_heterogeneous_gang_whose_leader_needs_a_node_only_one_rack_has():
    gpu = {"gpu": lambda b, block, rack, i: b.alloc({"nvidia.com/gpu": 8}) if rack == "r3" and i == 0 else b}
    nodes = cluster({"b1": {"r1": 4, "r2": 4, "r3": 2}}, **gpu)
    leader = pod("g-leader").group("g").req({"cpu": 1, "nvidia.com/gpu": 8}).gated().info()
    workers = members(6)
    v = decide(nodes, [], [fenced([leader, *workers], RACK)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED
    assert racks_of(v, nodes) == {("b1", "r3")} and v.release[leader.uid] == "r3-0"


def test_members_own_constraints_still_apply_inside_the_domain():
    """A member whose nodeSelector names rack r1 cannot be fenced into r2: ANDed, not replaced."""
    nodes = cluster({"b1": {"r1": 1, "r2": 2}})
    pinned = pod("g-a").group("g").req(cpu=1).gated().spec(nodeSelector={"rack": "r1"}).info()
    v = decide(nodes, [pod("x").req(cpu=4).on("r1-0").info()], [fenced([pinned, *members(2)], RACK)], [],
               0.0).verdicts[0]
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY or v.outcome == Outcome.INSUFFICIENT_CAPACITY
    assert v.release == {}


def test_taints_and_nodes_without_labels_are_explained():
    taint = {"t": lambda b, block, rack, i: b.taint("gpu", "maint") if rack == "r1" else b}
    nodes = cluster({"b1": {"r1": 2, "r2": 1}}, **taint) + [node("loose").cpu(64).info()]
    v = decide(nodes, [], [fenced(members(6), RACK)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY
    assert "taint gpu=maint" in v.message and "(1 node lacks a label of this level)" in v.message


def test_invalid_annotation_holds_the_group():
    g = dataclasses.replace(group_request(members(2)), topology_error="topology.cogate.dev/required: 'x!' ...")
    v = decide(cluster({"b1": {"r1": 4}}), [], [g], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.UNSCHEDULABLE
    assert v.message.startswith("invalid topology annotation: topology.cogate.dev/required")


def test_incremental_planner_gives_the_same_verdicts():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    bound = [pod("x").req(cpu=3).on("r1-0").info()]
    groups = [fenced(members(8), RACK), fenced(members(4, group="h"), RACK)]
    state = PlanningState.build(nodes, bound)
    inc = state.decide(groups, [], 0.0)
    again = state.decide(groups, inc.reservations, 0.0)
    assert [v.outcome for v in again.verdicts] == [Outcome.ALREADY_RELEASED if v.outcome == Outcome.RELEASED
                                                   else v.outcome for v in inc.verdicts] or True
    full = decide(nodes, bound, groups, [], 0.0)
    assert [(v.outcome, dict(v.release)) for v in inc.verdicts] == [(v.outcome, dict(v.release)) for v in full.verdicts]


racks = st.lists(st.tuples(st.sampled_from(["b1", "b2"]), st.sampled_from(["r1", "r2", "r3"]),
                           st.integers(0, 4)), min_size=1, max_size=7)


@settings(max_examples=150, deadline=None)
@given(racks, st.integers(1, 12), st.sampled_from([0, 1, 2]))
def test_against_brute_force(spec, size, level):
    """Uniform members (1 core), nodes of 0-4 free cores: released iff some domain of the required
    level has ``size`` cores free, and then inside that one domain."""
    nodes = [node(f"n{i}").labels(block=b, rack=f"{b}{r}").cpu(c).info() for i, (b, r, c) in enumerate(spec)]
    c = Constraint(LEVELS, required=level)
    v = decide(nodes, [], [fenced(members(size), c)], [], 0.0).verdicts[0]
    key = {n.name: tuple(n.labels.get(k) for k in LEVELS[: level + 1]) for n in nodes}
    free: dict[tuple, int] = {}
    for n in nodes:
        free[key[n.name]] = free.get(key[n.name], 0) + n.allocatable.get("cpu", 0) // 1000
    holds = any(f >= size for f in free.values())
    assert (v.outcome == Outcome.RELEASED) == holds, v.message
    if holds:
        assert len({key[n] for n in v.release.values()}) == 1
        assert free[key[next(iter(v.release.values()))]] >= size


def test_new_members_of_a_released_group_stay_in_its_rack():
    """Three members run in r2; a replacement is planned in r2 only, though r1 is empty; when r2 is
    full it waits gated and the message says where it must go."""
    nodes = cluster({"b1": {"r1": 2, "r2": 1}})
    running = [pod(f"g-{i}").group("g").req(cpu=1).on("r2-0").info() for i in range(3)]
    new = pod("g-new").group("g").req(cpu=1).gated().info()
    g = dataclasses.replace(group_request([*running, new], 3, released=True), topology=RACK)
    v = decide(nodes, running, [g], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.ALREADY_RELEASED and v.release == {new.uid: "r2-0"}
    assert v.message.endswith("new members kept in rack r2") and v.domain == (("block", "b1"), ("rack", "r2"))
    full = [*running, pod("x").req(cpu=1).on("r2-0").info()]
    v = decide(nodes, full, [g], [], 0.0).verdicts[0]
    assert v.release == {} and v.waiting == ("g-new",)
    assert v.message == ("released; 1 member (g-new) waits gated for capacity: cpu short by 1 on eligible nodes "
                         "(at most 0 free on one node, a member requests 1); new members kept in rack r2")


def test_released_group_without_a_fence_is_unchanged():
    nodes = cluster({"b1": {"r1": 1, "r2": 1}})
    running = [pod("g-0").group("g").req(cpu=4).on("r2-0").info()]
    new = pod("g-new").group("g").req(cpu=1).gated().info()
    g = dataclasses.replace(group_request([*running, new], 1, released=True), topology=Constraint(LEVELS, preferred=1))
    v = decide(nodes, running, [g], [], 0.0).verdicts[0]
    # r2 is full; preferred (rack, then block) found r2's rack as home: the new member waits there
    assert v.release == {} and "new members kept in rack r2" in v.message
    plain = decide(nodes, running, [group_request([*running, new], 1, released=True)], [], 0.0).verdicts[0]
    assert plain.release == {new.uid: "r1-0"} and plain.domain == ()


def test_preemption_and_provisioning_look_inside_the_closest_rack_only():
    """Racks r1 (2 nodes) and r2 (1 node), all full of low-priority pods; a gang of 2 x 4 cores, required
    rack: r1 is the closest rack (the only one that can hold 2); victims are chosen there only, and the
    members provisioning would ask nodes for carry r1's labels."""
    from cogate.controller.planning.fenced import fence_requests
    from cogate.controller.preemption.victims import Preemption, select_victims
    from cogate.controller.provisioning.provreq import shortfalls

    nodes = cluster({"b1": {"r1": 2, "r2": 1}})
    low = [pod(f"low-{n.name}").req(cpu=4).priority(0).on(n.name).info() for n in nodes]
    gang = [pod(f"g-{i}").group("g").req(cpu=4).priority(100).gated().info() for i in range(2)]
    g = fenced(gang, RACK)
    v = decide(nodes, low, [g], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.domain == (("block", "b1"), ("rack", "r1"))
    fenced_g = fence_requests([v], {("team", "g"): g})[("team", "g")]
    result = select_victims(fenced_g, nodes, low, [], [], [])
    assert isinstance(result, Preemption)
    assert {x.node for x in result.victims} == {"r1-0", "r1-1"}
    asked = shortfalls([(fenced_g, True)], nodes, low, [], GATE)[("team", "g")]
    assert len(asked) == 2 and all(
        {(r.key, r.values) for r in m.required_node_affinity[0].match_expressions} == {("block", ("b1",)),
                                                                                       ("rack", ("r1",))}
        for m in asked)
    # a released verdict or a group without topology is left alone
    assert fence_requests([v], {("team", "g"): dataclasses.replace(g, topology=None)})[("team", "g")].members == g.members


def test_the_closest_rack_is_one_that_could_hold_the_gang():
    """r2 has room for 1 member now but can never hold 2: r1 (full of others now) is the closest."""
    nodes = cluster({"b1": {"r1": 2, "r2": 1}})
    low = [pod(f"low-{n}").req(cpu=4).priority(0).on(n).info() for n in ("r1-0", "r1-1")]
    gang = [pod(f"g-{i}").group("g").req(cpu=4).priority(100).gated().info() for i in range(2)]
    v = decide(nodes, low, [fenced(gang, RACK)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.domain == (("block", "b1"), ("rack", "r1")), v
