"""PodGroup ``spec.minResources`` (controller/model/minresources.py, and the planner's rule that uses it).

A group with minResources is released only when, besides the minMember members planned, the free
room summed over the nodes its members may use holds the rest of minResources (docs/semantics.md,
"minResources"). The Spark shape: ``minMember: 1``, the driver present, the executors only in
minResources.
"""

from __future__ import annotations

import pytest

from cogate.controller.model import minresources as minres
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.provisioning.provreq import min_resources_text
from cogate.controller.model.records import NodeInfo, Reservation, Taint
from cogate.controller.model.verdicts import GroupRequest, Outcome, PlannerConfig
from tests.builders import node
from tests.unit.controller.planning.test_planner import Gi, NOW, only, pod, run


def spark(min_resources, driver_cpu=1, name="spark", created=0.0, members=None, **kw):
    """A Spark-shaped PodGroup: minMember 1, the driver gated, ``min_resources`` as the operator sets it."""
    ms = tuple(members) if members is not None else (pod(group=name, cpu=driver_cpu, mem=1, name=f"{name}-driver"),)
    mr = None if min_resources is None else tuple(sorted(minres.parse(min_resources).items()))
    return GroupRequest("default", name, 1, created, False, ms, min_resources=mr, **kw)


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, want", [
    (None, None),
    ({}, {}),
    ({"cpu": "5"}, {"cpu": 5000}),
    ({"cpu": "1500m", "memory": "3Gi"}, {"cpu": 1500, "memory": 3 * Gi}),
    ({"cpu": 2, "nvidia.com/gpu": "8"}, {"cpu": 2000, "nvidia.com/gpu": 8}),
    ({"cpu": "0", "memory": "1e3"}, {"memory": 1000}),  # zero entries dropped
    ({"memory": "1.5Ki"}, {"memory": 1536}),
])
def test_parse_reads_quantities_in_resource_list_units(raw, want):
    assert minres.parse(raw) == want


@pytest.mark.parametrize("raw, field", [
    ({"cpu": "lots"}, "spec.minResources.cpu"),
    ({"memory": "-1Gi"}, "spec.minResources.memory"),
    ({"nvidia.com/gpu": "1e999"}, "spec.minResources.nvidia.com/gpu"),
    ({"cpu": True}, "spec.minResources.cpu"),
])
def test_parse_refuses_bad_quantities_naming_the_field(raw, field):
    with pytest.raises(minres.MinResourcesError) as e:
        minres.parse(raw)
    assert str(e.value).startswith(field + ":")


@pytest.mark.parametrize("mr, min_member, want", [
    ({"cpu": 4000}, 1, {"cpu": 4000, "pods": 1}),
    ({"cpu": 4000, "pods": 9}, 3, {"cpu": 4000, "pods": 3}),  # scheduler-plugins sets pods = minMember
    ({}, 2, {"pods": 2}),
])
def test_asked_sets_pods_to_min_member(mr, min_member, want):
    assert minres.asked(mr, min_member) == want


@pytest.mark.parametrize("counted, want", [
    ([], {"cpu": 5000, "pods": 1}),
    ([{"cpu": 1000, "pods": 1}], {"cpu": 4000}),
    ([{"cpu": 3000, "pods": 1}, {"cpu": 3000, "memory": 5, "pods": 1}], {}),  # clamped at 0, memory not asked
])
def test_rest_is_what_is_asked_minus_the_members_counted(counted, want):
    assert minres.rest({"cpu": 5000, "pods": 1}, counted) == want


def test_free_beyond_clamps_each_node_and_skips_nodes_without_a_pod_slot():
    free = [{"cpu": 3000, "pods": 2}, {"cpu": -1000, "pods": 5}, {"cpu": 4000, "pods": 0}, {"cpu": 500, "pods": 1}]
    assert minres.free_beyond(free, [0, 1, 2, 3], ["cpu"]) == {"cpu": 3500}
    assert minres.free_beyond(free, [1, 3], ["cpu", "memory"]) == {"cpu": 500, "memory": 0}


def test_shortfall_and_its_text():
    wanted = {"cpu": 4000, "memory": 4 * Gi, "pods": 1}
    counted = [{"cpu": 1000, "memory": Gi, "pods": 1}]
    shorts = minres.shortfall(wanted, counted, {"cpu": 1500, "memory": 8 * Gi, "pods": 3})
    assert shorts == (minres.Short("cpu", 4000, 1000, 1500),)
    assert shorts[0].by == 1500
    assert minres.short_text(shorts, 1) == "minResources cpu short by 1500m: 1500m free beyond the 1 member placed, " \
                                           "minResources asks 4"
    assert minres.short_list(shorts) == "cpu short by 1500m"
    assert minres.shortfall(wanted, counted, {"cpu": 3000, "memory": 3 * Gi}) == ()


# -- the planner's rule ---------------------------------------------------------------------------


def test_spark_driver_waits_until_the_executors_have_room():
    # an 8-CPU node with 5 CPUs taken: the driver (1 CPU) fits, 2 more CPUs free, minResources asks 5
    busy = pod(group=None, cpu=5, mem=1, node_name="n1", name="busy")
    v = only(run([node("n1").alloc(cpu=8, memory="8Gi").info()],
                 [spark({"cpu": "5", "memory": "3Gi"})], pods=[busy], now=100.0))
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.release == {} and v.fits == 1
    assert v.message == ("fits 1 of 1, but minResources cpu short by 2: 2 free beyond the 1 member placed, "
                         "minResources asks 5")
    assert v.min_resources_short == (minres.Short("cpu", 5000, 1000, 2000),)
    # a second node brings the room: released, only the driver (the executors do not exist yet)
    v = only(run([node("n1").alloc(cpu=8, memory="8Gi").info(),
                  node("n2").alloc(cpu=4, memory="8Gi").info()], [spark({"cpu": "5", "memory": "3Gi"})], pods=[busy]))
    assert v.outcome == Outcome.RELEASED and list(v.release.values()) and not v.min_resources_short


@pytest.mark.parametrize("mr, outcome", [
    ({"cpu": "4"}, Outcome.RELEASED),          # exactly the room: 1 driver + 3 free
    ({"cpu": "4001m"}, Outcome.EXCEEDS_CLUSTER_CAPACITY),  # the node holds 4 even empty
    ({"memory": "8Gi"}, Outcome.RELEASED),
    ({"memory": "9Gi"}, Outcome.EXCEEDS_CLUSTER_CAPACITY),  # more than the node's allocatable
    ({"nvidia.com/gpu": "1"}, Outcome.EXCEEDS_CLUSTER_CAPACITY),  # no node has it
    ({}, Outcome.RELEASED),
    (None, Outcome.RELEASED),
])
def test_one_node_several_asks(mr, outcome):
    assert only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [spark(mr)])).outcome == outcome


def test_larger_than_the_cluster_never_fits_and_says_so():
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info(),
                  node("n2").alloc(cpu=4, memory="8Gi").info()], [spark({"cpu": "12"})]))
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY
    assert v.message == ("spec.minResources does not fit even with every eligible node empty: minResources cpu "
                         "short by 4: 7 allocatable beyond the 1 member placed, minResources asks 12")
    assert v.min_resources_short  # so provisioning knows no member shape would help


def test_only_nodes_a_member_may_use_count():
    tainted = node("gpu").alloc(cpu=16, memory="8Gi").taint(Taint("dedicated", "gpu", "NoSchedule")).info()
    cordoned = node("old").alloc(cpu=16, memory="8Gi").unschedulable().info()
    notready = node("dead").alloc(cpu=16, memory="8Gi").not_ready().info()
    full = node("full").alloc(cpu=16, memory="8Gi", pods=1).info()
    filler = pod(group=None, cpu=0.1, mem=0, node_name="full", name="filler")  # takes its one pod slot
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info(), tainted, cordoned, notready, full], [spark({"cpu": "6"})], pods=[filler]))
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY  # only n1 counts, even empty: 4 < 6
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info(),
                  node("n2").alloc(cpu=4, memory="8Gi").info()], [spark({"cpu": "6"})]))
    assert v.outcome == Outcome.RELEASED


def test_bound_members_count_as_placed():
    driver = pod(group="spark", cpu=1, node_name="n1", name="spark-driver", gated=False)
    executor = pod(group="spark", cpu=2, name="spark-exec-1")
    g = spark({"cpu": "5"}, members=[driver, executor])
    # n1 4 CPUs: driver 1 bound, executor 2 planned -> 1 free; n2 500m free; rest = 5 - 3 = 2
    busy = pod(group=None, cpu=3.5, mem=0, node_name="n2", name="busy")
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info(), node("n2").alloc(cpu=4, memory="8Gi").info()]
    v = only(run(nodes, [g], pods=[driver, busy]))
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY
    assert "short by 500m: 1500m free beyond the 2 members placed" in v.message
    assert only(run(nodes, [g], pods=[driver])).outcome == Outcome.RELEASED


def test_room_promised_to_others_and_groups_planned_before_count_as_taken():
    other = pod(group="a", cpu=2, name="a-0")
    first = GroupRequest("default", "a", 1, -1.0, False, (other,))  # older: planned first
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info(), node("n2").alloc(cpu=4, memory="8Gi").info()]
    assert run(nodes, [spark({"cpu": "7"})]).verdicts[0].outcome == Outcome.RELEASED
    d = run(nodes, [first, spark({"cpu": "7"})])
    assert [v.outcome for v in d.verdicts] == [Outcome.RELEASED, Outcome.INSUFFICIENT_CAPACITY]
    # a reservation of a member released earlier holds its room the same way
    res = Reservation(other.uid, "default", other.name, "n2", {"cpu": 2000}, (), NOW + 60)
    released = GroupRequest("default", "a", 1, -1.0, True, (other,))
    d = run(nodes, [released, spark({"cpu": "7"})], reservations=[res])
    assert d.verdicts[1].outcome == Outcome.INSUFFICIENT_CAPACITY and "short by 1" in d.verdicts[1].message


def test_invalid_min_resources_holds_the_group_naming_the_field():
    g = GroupRequest("default", "spark", 1, 0.0, False, (pod(group="spark"),),
                     min_resources_error="spec.minResources.cpu: '-1' is negative")
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [g]))
    assert v.outcome == Outcome.UNSCHEDULABLE and v.message == "invalid spec.minResources.cpu: '-1' is negative"


def test_a_waiting_min_resources_group_starves_and_then_blocks_later_groups():
    nodes = [node("n1").alloc(cpu=8, memory="8Gi").info()]
    busy = pod(group=None, cpu=4, mem=0, node_name="n1", name="busy")
    late = GroupRequest("default", "late", 1, 50.0, False, (pod(group="late", cpu=1, created=50.0),))
    cfg = PlannerConfig(starvation_seconds=100)
    d = run(nodes, [spark({"cpu": "4001m"}), late], pods=[busy], now=50.0, cfg=cfg)
    assert [v.outcome for v in d.verdicts] == [Outcome.INSUFFICIENT_CAPACITY, Outcome.RELEASED]
    d = run(nodes, [spark({"cpu": "4001m"}), late], pods=[busy], now=200.0, cfg=cfg)
    assert "starving for 200s: later groups wait" in d.verdicts[0].message
    assert d.verdicts[1].outcome == Outcome.INSUFFICIENT_CAPACITY and "waiting behind starving PodGroup" \
        in d.verdicts[1].message


def test_incremental_planner_judges_it_again_when_a_node_comes():
    busy = pod(group=None, cpu=5, mem=1, node_name="n1", name="busy")
    state = PlanningState.build([node("n1").alloc(cpu=8, memory="8Gi").info()], [busy])
    g = spark({"cpu": "5"})
    assert only(state.decide([g], [], NOW)).outcome == Outcome.INSUFFICIENT_CAPACITY
    assert only(state.decide([g], [], NOW)).outcome == Outcome.INSUFFICIENT_CAPACITY
    state.upsert_node(node("n2").alloc(cpu=4, memory="8Gi").info())
    assert only(state.decide([g], [], NOW)).outcome == Outcome.RELEASED
    # and when the free room grows without a node change: the busy pod goes
    state = PlanningState.build([node("n1").alloc(cpu=8, memory="8Gi").info()], [busy])
    g = spark({"cpu": "4"})
    assert only(state.decide([g], [], NOW)).outcome == Outcome.INSUFFICIENT_CAPACITY
    state.remove_pod(busy.uid)
    assert only(state.decide([g], [], NOW)).outcome == Outcome.RELEASED


def test_released_group_is_not_held_back_by_min_resources():
    # the rule is a release rule: new members of a released group are planned as before
    driver = pod(group="spark", cpu=1, node_name="n1", name="spark-driver", gated=False)
    executor = pod(group="spark", cpu=2, name="spark-exec-1")
    g = GroupRequest("default", "spark", 1, 0.0, True, (driver, executor), min_resources=(("cpu", 9000),))
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [g], pods=[driver]))
    assert v.outcome == Outcome.ALREADY_RELEASED and v.release == {executor.uid: "n1"}


# -- preemption and provisioning do not act on it ------------------------------------------------


def test_provisioning_says_it_does_not_act_on_min_resources():
    shorts = (minres.Short("cpu", 5000, 1000, 2000),)
    assert min_resources_text(shorts).startswith("asks no nodes for spec.minResources (cpu short by 2)")


def test_nodes_without_the_resource_add_nothing():
    a = NodeInfo("a", labels={"kubernetes.io/hostname": "a"}, allocatable={"cpu": 4000, "memory": 8 * Gi, "pods": 10})
    b = NodeInfo("b", labels={"kubernetes.io/hostname": "b"}, allocatable={"cpu": 4000, "memory": 8 * Gi, "pods": 10,
                                                                   "nvidia.com/gpu": 2})
    v = only(run([a, b], [spark({"nvidia.com/gpu": "3"})]))
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and "nvidia.com/gpu short by 1" in v.message
    assert only(run([a, b], [spark({"nvidia.com/gpu": "2"})])).outcome == Outcome.RELEASED


# -- what the PodGroup says (the reconciler with the real planner) --------------------------------


def test_status_and_event_name_the_short_resource_and_no_unused_notice():
    from tests.builders import World, node as raw_node, pod as raw_pod, podgroup

    pg = podgroup("pg").min_member(1).spec(minResources={"cpu": "5"}).raw()
    w = World([raw_pod("driver").req(cpu="1").group("pg").gated().raw(), raw_pod("busy").req(cpu="6").on("n1").raw()],
              [pg], nodes=(raw_node("n1").labels(zone="a").cpu("8").raw(),), preemption=False)
    w.run()
    want = "fits 1 of 1, but minResources cpu short by 3: 1 free beyond the 1 member placed, minResources asks 5"
    released = w.condition(type_="Released")
    assert (released["status"], released["reason"]) == ("False", "InsufficientCapacity")
    assert released["message"].startswith(want)
    fits = w.condition(type_="FitsCluster")
    assert fits is None or fits["status"] == "True"  # it fits the empty node: not ExceedsClusterCapacity
    # both off: nothing said
    assert w.condition(type_="Preempting") is None and w.condition(type_="Provisioning") is None
    (event,) = [e for e in w.reasons("InsufficientCapacity") if e[2] == "pg"]  # the PodGroup's own
    assert event[3].startswith(want)
    assert not w.reasons("MinResourcesNotUsed")
    assert w.gated("driver")


def test_behind_a_starving_group_a_min_resources_that_never_fits_is_marked_too():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    starver = GroupRequest("default", "big", 1, -10.0, False, (pod(group="big", cpu=5, name="big-0"),))
    v = run(nodes, [starver, spark({"cpu": "12"}, created=0.0)], now=1000.0).verdicts[1]
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and v.min_resources_short


def test_members_that_never_fit_are_not_marked_as_min_resources():
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [spark({"cpu": "1"}, driver_cpu=6)]))
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and not v.min_resources_short


# -- the incremental planner keeps a minResources wait only while the whole room is unchanged --------


def _state_and_group():
    nodes = [node("n1").alloc(cpu=8, memory="8Gi").info(), node("n2").alloc(cpu=4, memory="8Gi").info()]
    busy = pod(group=None, cpu=6, mem=0, node_name="n1", name="busy")
    state = PlanningState.build(nodes, [busy])
    g = spark({"cpu": "8"}, created=NOW - 10)  # 1 driver + 2 free on n1 + 3 on n2 = 5 of 7 needed
    return state, g, busy


def _pass(state, g, now=NOW, reservations=()):
    from cogate.controller.planning.planner import decide

    got = state.decide([g], list(reservations), now)
    want = decide(state.nodes, state.pods, [g], list(reservations), now)
    assert got == want  # the same answer as from scratch, kept or not
    return only(got)


def test_a_min_resources_wait_is_kept_while_nothing_changed():
    state, g, _ = _state_and_group()
    first = _pass(state, g)
    assert "short by 2: 5 free" in first.message
    assert _pass(state, g) == first and state.last_kept == 1


def test_a_bound_pod_on_a_node_the_driver_does_not_use_changes_the_wait():
    state, g, _ = _state_and_group()
    _pass(state, g)
    _pass(state, g)
    state.upsert_pod(pod(group=None, cpu=1, mem=0, node_name="n2", name="more"))
    v = _pass(state, g)
    assert state.last_judged == 1 and "short by 3: 4 free" in v.message


def test_a_freed_node_releases_a_kept_wait():
    state, g, busy = _state_and_group()
    _pass(state, g)
    _pass(state, g)
    state.remove_pod(busy.uid)
    assert _pass(state, g).outcome == Outcome.RELEASED


def test_room_promised_to_another_group_changes_a_kept_wait():
    state, g, _ = _state_and_group()
    _pass(state, g)
    _pass(state, g)
    other = pod(group="a", cpu=1, mem=0, name="a-0", gated=False)
    res = Reservation(other.uid, "default", other.name, "n2", {"cpu": 1000}, (), NOW + 60)
    a = GroupRequest("default", "a", 1, 0.0, True, (other,))
    got = state.decide([a, g], [res], NOW)
    from cogate.controller.planning.planner import decide

    assert got == decide(state.nodes, state.pods, [a, g], [res], NOW)
    assert "short by 3: 4 free" in got.verdicts[1].message


def test_a_kept_wait_starts_starving_on_time():
    state, g, _ = _state_and_group()
    _pass(state, g)
    _pass(state, g)
    v = _pass(state, g, now=NOW + 400)
    assert "starving for 410s" in v.message


def test_a_wait_after_another_groups_undone_plan_is_kept_too():
    state, g, _ = _state_and_group()
    h = spark({"cpu": "9"}, name="later", created=NOW - 5)
    from cogate.controller.planning.planner import decide

    for _ in range(3):
        got = state.decide([g, h], [], NOW)
        assert got == decide(state.nodes, state.pods, [g, h], [], NOW)
    assert state.last_kept == 2 and all(v.min_resources_short for v in got.verdicts)
