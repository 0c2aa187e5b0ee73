"""What a waiting group's message says (controller/planning/explanations.py), through both planners.

Issue 21 item 9: a member whose own nodeSelector, required node affinity or missing toleration
matches no node is named, as its own constraint and not capacity (outcome ``Unschedulable``,
not a capacity reason). Item 2b: room reserved for another gang's released, unbound members
(restored after a failover too) is named: the other PodGroup, its members, nodes and amount.

Every case runs through ``planner.decide`` and the incremental ``PlanningState.decide`` (same
verdicts), and the PodGroup status built from the verdict (``status.compute``) is asserted.
"""

from __future__ import annotations

import pytest

from cogate.controller.planning import explanations
from cogate.controller.status import inputs
from cogate.controller.status import status as status_mod
from cogate.controller.planning.capacity import Snapshot, reservation_promise
from cogate.controller.planning.planner import GroupRequest, PlannerConfig, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.model.records import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Reservation,
    Taint,
    Toleration,
)
from cogate.models import PodGroup
from tests.builders import group_request, node, pod as pod_

Gi = 2**30
NOW = 10_000.0
CFG = PlannerConfig()
GPU_TAINT = Taint("gpu", "true", "NoSchedule")


def pod(name, group="g", cpu=3, node_name="", gated=True, ns="default", **kw):
    b = pod_(name, ns).uid("uid-" + ns + "-" + name).req(cpu=cpu).created(0)
    if group:
        b.group(group)
    if node_name:
        b.on(node_name)
    elif gated:
        b.gated()
    return b.info(**kw)


def both(nodes, groups, pods=(), reservations=()):
    """The verdicts of ``decide`` and of the incremental planner, asserted equal."""
    d = decide(nodes, list(pods), list(groups), list(reservations), NOW, CFG)
    inc = PlanningState.build(nodes, pods).decide(list(groups), list(reservations), NOW, CFG)
    assert d.verdicts == inc.verdicts
    return d


def released_condition(g: GroupRequest, verdict) -> dict:
    """The PodGroup status the verdict gives (``status.compute``): its Released and FitsCluster."""
    pg = PodGroup.from_api({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": g.name, "namespace": g.namespace, "uid": "u"},
                            "spec": {"minMember": g.min_member}})
    st, _ = status_mod.compute(pg, g.members, verdict, NOW)
    conds = {c.type: c for c in st.conditions}
    assert st.phase in ("Pending", None)
    assert (fits := conds.get("FitsCluster")) is None or fits.status == "True" or verdict.outcome == \
        "ExceedsClusterCapacity"
    return conds["Released"]


# -- item 9: the member's own constraints ---------------------------------------------------

SELECTOR = {"node_selector": {"disktype": "ssd"}}
AFFINITY = {"required_node_affinity": (NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("c",)),)),)}


TOLERATES = {"tolerations": (Toleration("gpu", "Equal", "true", "NoSchedule"),)}


@pytest.mark.parametrize("nodes,kw,others,words", [
    ([node("n1").alloc(cpu=10, memory="64Gi").info(),
      node("n2").alloc(cpu=10, memory="64Gi").info()], SELECTOR, {}, "nodeSelector disktype=ssd excludes 2 nodes"),
    ([node("n1").labels({"zone": "a"}).alloc(cpu=10, memory="64Gi").info(),
      node("n2").labels({"zone": "b"}).alloc(cpu=10, memory="64Gi").info()], AFFINITY, {},
     "required node affinity excludes 2 nodes"),
    ([node("n1").alloc(cpu=10, memory="64Gi").taint(GPU_TAINT).info(),
      node("n2").alloc(cpu=10, memory="64Gi").taint(GPU_TAINT).info()], {}, TOLERATES,
     "no toleration for taint gpu=true (2 nodes)"),
    ([node("n1").alloc(cpu=10, memory="64Gi").taint(GPU_TAINT).info(),
      node("n2").labels({"disktype": "hdd"}).alloc(cpu=10, memory="64Gi").info()], SELECTOR, TOLERATES,
     "nodeSelector disktype=ssd excludes 1 node, no toleration for taint gpu=true (1 node)"),
    # a NotReady node besides: still the member's own constraint, the node's state named after
    ([node("n1").alloc(cpu=10, memory="64Gi").info(),
      node("n2").alloc(cpu=10, memory="64Gi").not_ready().info()], SELECTOR, {},
     "nodeSelector disktype=ssd excludes 1 node, 1 node not Ready"),
])
def test_one_member_whose_own_constraints_match_no_node_is_named_not_capacity(nodes, kw, others, words):
    members = [pod("w-0", **others), pod("w-1", **others), pod("w-2", **kw)]
    g = group_request(members, created=NOW - 10)
    v = both(nodes, [g]).verdicts[0]
    assert v.outcome == "Unschedulable" and v.release == {}
    assert v.message == (f"member w-2 fits no node by its own constraints, not for want of capacity: {words}; "
                         "the other 2 members cannot reach minMember 3 alone")
    assert "excluded by" not in v.message
    cond = released_condition(g, v)
    assert (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", v.message)


def test_bound_volumes_node_affinity_is_the_members_own_constraint():
    """A claim bound to a PV whose node affinity no node matches (kube-scheduler VolumeBinding)."""
    pv_zone_c = ((NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("c",)),)),),)
    members = [pod("w-0"), pod("w-1", volume_node_affinity=pv_zone_c)]
    g = group_request(members, created=NOW - 10)
    v = both([node("n1").labels({"zone": "a"}).alloc(cpu=10, memory="64Gi").info()], [g]).verdicts[0]
    assert v.outcome == "Unschedulable"
    assert v.message == ("member w-1 fits no node by its own constraints, not for want of capacity: bound volumes' "
                         "node affinity excludes 1 node; the other 1 member cannot reach minMember 2 alone")


def test_all_members_with_the_same_constraint_are_named_together():
    members = [pod(f"w-{i}", **SELECTOR) for i in range(3)]
    g = group_request(members, created=NOW - 10)
    v = both([node("n1").alloc(cpu=10, memory="64Gi").info(), node("n2").alloc(cpu=10, memory="64Gi").info(),
              node("n3").alloc(cpu=10, memory="64Gi").info()], [g]).verdicts[0]
    assert v.outcome == "Unschedulable"
    assert v.message == ("members w-0, w-1, w-2 fit no node by their own constraints, not for want of capacity: "
                         "nodeSelector disktype=ssd excludes 3 nodes")
    assert released_condition(g, v).reason == "Unschedulable"


def test_members_with_different_constraints_are_named_apart():
    members = [pod("w-0", **SELECTOR), pod("w-1", **AFFINITY), pod("w-2")]
    g = group_request(members, 2, created=NOW - 10)
    v = both([node("n1").labels({"zone": "a"}).alloc(cpu=10, memory="64Gi").info()], [g]).verdicts[0]
    assert v.outcome == "Unschedulable"
    assert v.message == ("member w-0 fits no node by its own constraints, not for want of capacity: nodeSelector "
                         "disktype=ssd excludes 1 node; member w-1 fits no node by its own constraints, not for want "
                         "of capacity: required node affinity excludes 1 node; the other 1 member cannot reach "
                         "minMember 2 alone")


def test_own_constraint_besides_a_real_capacity_shortage_is_named_apart():
    """minMember 3 of 4: the group could run without w-3 (so it waits for room, a capacity
    reason), but the room is taken now; the shortfall speaks of the placeable members and w-3
    is named as its own constraint, not counted as "1 node excluded by nodeSelector"."""
    members = [pod("w-0"), pod("w-1"), pod("w-2"), pod("w-3", **SELECTOR)]
    g = group_request(members, 3, created=NOW - 10)
    filler = pod("filler", group=None, cpu=6, node_name="n1")
    v = both([node("n1").alloc(cpu=10, memory="64Gi").info()], [g], pods=[filler]).verdicts[0]
    assert v.outcome == "InsufficientCapacity"
    assert v.message == ("fits 1 of 3: cpu short by 5 on eligible nodes (at most 1 free on one node, a member requests "
                         "3); member w-3 fits no node by its own constraints, not for want of capacity: nodeSelector "
                         "disktype=ssd excludes 1 node")
    cond = released_condition(g, v)
    assert (cond.reason, cond.message) == ("InsufficientCapacity", v.message)


def test_own_constraint_that_alone_blocks_the_group_wins_over_a_capacity_shortage():
    """3 of 3 needed, w-2 can never run: Unschedulable, although the others lack room now too."""
    members = [pod("w-0"), pod("w-1"), pod("w-2", **SELECTOR)]
    g = group_request(members, created=NOW - 10)
    v = both([node("n1").alloc(cpu=10, memory="64Gi").info()],
             [g], pods=[pod("filler", group=None, cpu=8, node_name="n1")]).verdicts[0]
    assert v.outcome == "Unschedulable"
    assert v.message.startswith("member w-2 fits no node by its own constraints")
    assert "cannot reach minMember 3 alone" in v.message


@pytest.mark.parametrize("nodes,why", [
    ([node("n1").alloc(cpu=10, memory="64Gi").not_ready().info(),
      node("n2").alloc(cpu=10, memory="64Gi").not_ready().info()], "2 nodes excluded by not Ready"),
    ([node("n1").alloc(cpu=10, memory="64Gi").unschedulable().info()], "1 node excluded by unschedulable (cordoned)"),
])
def test_nodes_state_alone_is_capacity_not_the_members_constraint(nodes, why):
    members = [pod("w-0"), pod("w-1", **SELECTOR)] if len(nodes) == 2 else [pod("w-0")]
    g = group_request(members, created=NOW - 10)
    v = both(nodes, [g]).verdicts[0]
    assert v.outcome == "ExceedsClusterCapacity"
    assert why in v.message and "own constraints" not in v.message
    assert released_condition(g, v).reason == "InsufficientCapacity"


def test_a_new_nodes_not_ready_taint_is_the_nodes_state_not_the_members_constraint():
    new = node("n1").alloc(cpu=10, memory="64Gi").taint(Taint("node.kubernetes.io/not-ready", "", "NoSchedule")).info()
    g = group_request([pod("w-0"), pod("w-1")], created=NOW - 10)
    v = both([new], [g]).verdicts[0]
    assert v.outcome == "ExceedsClusterCapacity" and "own constraints" not in v.message
    assert "1 node excluded by taint node.kubernetes.io/not-ready" in v.message


def test_tolerated_taint_and_matching_selector_are_not_own_constraints():
    members = [pod("w-0", tolerations=(Toleration("gpu", "Equal", "true", "NoSchedule"),),
                   node_selector={"disktype": "ssd"})]
    g = group_request(members, created=NOW - 10)
    v = both([node("n1").labels({"disktype": "ssd"}).alloc(cpu=10, memory="64Gi").taint(GPU_TAINT).info()],
             [g]).verdicts[0]
    assert v.outcome == "Released"


def test_new_member_of_a_released_group_waits_by_its_own_constraint_not_for_capacity():
    running = [pod(f"r-{i}", node_name="n1", gated=False) for i in range(2)]
    g = group_request(running + [pod("new", **SELECTOR)], 2, created=NOW - 10, released=True)
    v = both([node("n1").alloc(cpu=10, memory="64Gi").info()], [g], pods=running).verdicts[0]
    assert v.outcome == "AlreadyReleased" and v.waiting == ("new",)
    assert v.message == ("released; 1 member (new) waits gated by their own constraints, not for capacity: member new "
                         "fits no node by its own constraints, not for want of capacity: nodeSelector disktype=ssd "
                         "excludes 1 node")


def test_waiting_text_says_capacity_when_some_wait_for_room():
    a, b = pod("a"), pod("b")
    short = explanations.Short("cpu short by 3; member b fits no node ...", own=("b",))
    assert explanations.waiting_text([a, b], short).startswith("2 members (a, b) wait gated for capacity: ")
    assert explanations.waiting_text([b], short).startswith("1 member (b) waits gated by their own constraints")
    assert explanations.waiting_text([a], "x") == "1 member (a) waits gated for capacity: x"


@pytest.mark.parametrize("reason,own", [
    ("nodeSelector", True), ("node affinity", True), ("taint gpu=true", True), ("volume node affinity", True),
    ("not Ready", False), ("unschedulable (cordoned)", False),
    ("taint node.kubernetes.io/not-ready", False), ("taint node.kubernetes.io/unreachable", False),
    ("taint node.cloudprovider.kubernetes.io/uninitialized=true", False), ("taint kwok.x-k8s.io/node=fake", True),
])
def test_own_reason(reason, own):
    assert explanations.own_reason(reason) is own


# -- item 2b: room held for another gang ----------------------------------------------------


def released_unbound(name, group_name, n, node_name, cpu=3):
    """Members of a released group, ungated and pinned to ``node_name``, not bound yet."""
    pin = (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (node_name,)),)),)
    return [pod(f"{name}-{i}", group=group_name, cpu=cpu, gated=False, required_node_affinity=pin)
            for i in range(n)]


def reservations_of(members, node_name):
    return [Reservation(m.uid, m.namespace, m.name, node_name, dict(m.requests), (), NOW + 60) for m in members]


def test_waiting_group_names_the_room_reserved_for_another_gang():
    a = released_unbound("a", "a", 3, "n1")
    ga = group_request(a, name="a", created=NOW - 10, released=True)
    gb = group_request([pod("b-0", group="b")], name="b", created=NOW - 10)
    d = both([node("n1").alloc(cpu=10, memory="64Gi").info()], [ga, gb], reservations=reservations_of(a, "n1"))
    v = d.verdicts[1]
    assert v.outcome == "InsufficientCapacity"
    assert v.message == ("fits 0 of 1: cpu short by 2 on eligible nodes (at most 1 free on one node, a member "
                         "requests 3); room reserved for released members not bound yet: PodGroup default/a "
                         "(3 members on n1: cpu 9)")
    cond = released_condition(gb, v)
    assert (cond.reason, cond.message) == ("InsufficientCapacity", v.message)


def test_restored_reservations_after_a_failover_are_named():
    """The failover case: the new leader rebuilds reservations from the pins
    (``inputs.restored_reservations``) and the waiting group names them."""
    a = released_unbound("a", "a", 2, "n1", cpu=4) + released_unbound("c", "c", 1, "n2", cpu=8)
    ga = group_request(a[:2], name="a", created=NOW - 10, released=True)
    gc = group_request(a[2:], name="c", created=NOW - 10, released=True)
    gb = group_request([pod("b-0", group="b", cpu=4), pod("b-1", group="b", cpu=4)], name="b", created=NOW - 10)
    restored = inputs.restored_reservations([ga, gc, gb], NOW, 60.0)
    assert sorted(r.name for r in restored) == ["a-0", "a-1", "c-0"]
    v = both([node("n1").alloc(cpu=10, memory="64Gi").info(),
              node("n2").alloc(cpu=10, memory="64Gi").info()], [ga, gc, gb], reservations=restored).verdicts[2]
    assert v.outcome == "InsufficientCapacity"
    assert ("room reserved for released members not bound yet: PodGroup default/a (2 members on n1: cpu 8), "
            "PodGroup default/c (1 member on n2: cpu 8)") in v.message
    assert released_condition(gb, v).message == v.message


def test_room_reserved_on_nodes_the_group_cannot_use_is_not_named():
    a = released_unbound("a", "a", 3, "n1")
    ga = group_request(a, name="a", created=NOW - 10, released=True)
    gb = group_request([pod("b-0", group="b", cpu=12, node_selector={"pool": "x"})], name="b", created=NOW - 10)
    nodes = [node("n1").labels({"pool": "y"}).alloc(cpu=10, memory="64Gi").info(),
             node("n2").labels({"pool": "x"}).alloc(cpu=12, memory="64Gi").info()]
    filler = pod("filler", group=None, cpu=4, node_name="n2")
    v = both(nodes, [ga, gb], pods=[filler], reservations=reservations_of(a, "n1")).verdicts[1]
    assert v.outcome == "InsufficientCapacity"
    assert "room reserved" not in v.message and "cpu short by 4" in v.message


def test_release_earlier_in_the_same_pass_is_named():
    ga = group_request([pod("a-0", group="a", cpu=8)], name="a", created=NOW - 10)
    gb = group_request([pod("b-0", group="b", cpu=4)], name="b", created=NOW - 9)
    d = both([node("n1").alloc(cpu=10, memory="64Gi").info()], [ga, gb])
    assert d.verdicts[0].outcome == "Released"
    assert d.verdicts[1].message.endswith("room reserved for released members not bound yet: PodGroup default/a "
                                          "(1 member on n1: cpu 8)")


def test_own_groups_reservations_are_not_named_as_another_gang():
    mine = released_unbound("g", "g", 2, "n1")
    g = group_request(mine + [pod("g-new")], 2, created=NOW - 10, released=True)
    v = both([node("n1").alloc(cpu=7, memory="64Gi").info()], [g], reservations=reservations_of(mine, "n1")).verdicts[0]
    assert v.waiting == ("g-new",) and "room reserved" not in v.message


def test_held_for_others_on_a_room():
    """The wording alone: groups ordered by members held, the short resources only."""
    nodes = [node("n1").alloc(cpu=10, memory="64Gi").info(), node("n2").alloc(cpu=10, memory="64Gi").info()]
    a = released_unbound("a", "a", 1, "n1") + released_unbound("b", "b", 2, "n2")
    reserved = [(r, m) for m in a for r in reservations_of([m], "n1" if m.group == "a" else "n2")]
    room = Snapshot(nodes, [], False).room([reservation_promise(r, m, f"PodGroup {m.namespace}/{m.group}")
                                            for r, m in reserved])
    me = pod("x-0", group="x")
    text = explanations.held_for_others(room, {0, 1}, {"cpu": 1}, me)
    assert text == ("room reserved for released members not bound yet: PodGroup default/b (2 members on n2: "
                    "cpu 6), PodGroup default/a (1 member on n1: cpu 3)")
    assert explanations.held_for_others(room, {0}, {"pods": 1}, me).endswith("(1 member on n1: pods 1)")
    assert explanations.held_for_others(room, set(), {"cpu": 1}, me) == ""
