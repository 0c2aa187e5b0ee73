"""Waiting messages name what really holds a group, on the real control plane (issue 21).

Item 9: a member whose own nodeSelector, required node affinity or missing toleration matches no
node is named as its own constraint, not capacity (``Released=False`` reason ``Unschedulable``
and a Warning ``Unschedulable`` event when it alone keeps the group from minMember; named
after the capacity text otherwise). Item 2b: after a controller restart the restored
reservations of a released, unbound gang hold, and the waiting group names them: the other
PodGroup, its members, the node and the amount.
"""

from __future__ import annotations

import signal

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import bound, condition, create_pod_group, events_for, gated, group_pods, hold_gated, status, wait_for
from .test_robustness import create_pods, pod

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)  # cpu 10
SSD = {"nodeSelector": {"disktype": "ssd"}}
ZONE_C = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["c"]}]}]}}}}
GPU_TAINT = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
TOLERATE_GPU = {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}


def released(kube, namespace: str, group: str, reason: str, *parts: str, timeout: float = 20) -> dict:
    def says():
        c = condition(status(kube, namespace, group), "Released")
        return c if c and c["status"] == "False" and c["reason"] == reason and all(p in c["message"] for p in parts) \
            else None

    try:
        return wait_for(says, timeout, what=f"Released=False {reason} naming {parts}")
    except AssertionError:
        raise AssertionError(f"status of {group}: {status(kube, namespace, group)}") from None


@pytest.mark.parametrize("case,nodes,odd,others,words", [
    ("nodeSelector", dict(labels={"disktype": "hdd"}), SSD, {}, "nodeSelector disktype=ssd excludes 2 nodes"),
    ("node affinity", dict(labels={"topology.kubernetes.io/zone": "a"}), ZONE_C, {},
     "required node affinity excludes 2 nodes"),
    ("toleration", dict(taints=GPU_TAINT), {}, TOLERATE_GPU, "no toleration for taint gpu=true (2 nodes)"),
])
def test_one_members_own_constraint_is_named_as_unschedulable(stack, kube, namespace, only_nodes, case, nodes, odd,
                                                              others, words):
    only_nodes(2, **NODE, **nodes)
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 2, cpu="1", extra_spec=others)
    client.CoreV1Api(kube).create_namespaced_pod(namespace, pod("g-odd", "g", cpu="1", extra_spec=odd))
    cond = released(kube, namespace, "g", "Unschedulable", "member g-odd fits no node by its own constraints, not "
                    f"for want of capacity: {words}", "the other 2 members cannot reach minMember 3 alone")
    assert "excluded by" not in cond["message"] and "short" not in cond["message"], cond
    # the recorder writes the event after the status: wait for it, naming g-odd
    events = wait_for(lambda: (w := [e for e in events_for(kube, namespace, "g") if e.reason == "Unschedulable"])
                      and w[-1].type == "Warning" and "g-odd" in w[-1].message and w, 10,
                      what="Warning Unschedulable event naming g-odd")
    assert events and events[-1].type == "Warning" and "g-odd" in events[-1].message
    assert not [e for e in events_for(kube, namespace, "g") if e.reason == "InsufficientCapacity"]
    hold_gated(kube, namespace, "g", 2, 3)
    fits = condition(status(kube, namespace, "g"), "FitsCluster")
    assert fits is None or fits["status"] == "True", fits


def test_all_members_with_the_constraint_are_named_together(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 2, cpu="1", extra_spec=SSD)
    cond = released(kube, namespace, "g", "Unschedulable", "members g-0, g-1 fit no node by their own constraints",
                    "nodeSelector disktype=ssd excludes 1 node")
    assert "cannot reach" not in cond["message"], cond
    hold_gated(kube, namespace, "g", 1, 2)


def test_own_constraint_beside_a_real_capacity_shortage(stack, kube, namespace, only_nodes):
    """minMember 3 of 4 members; g-odd can never run, the other three lack room now (a filler
    holds 6 of 10 CPU): a capacity reason for the group, g-odd named apart."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, pod("filler", None, cpu="6"))
    wait_for(lambda: bound(core.read_namespaced_pod("filler", namespace)), 20, what="filler bound")
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 3, cpu="3")
    core.create_namespaced_pod(namespace, pod("g-odd", "g", cpu="3", extra_spec=SSD))
    cond = released(kube, namespace, "g", "InsufficientCapacity", "fits 1 of 3: cpu short by",
                    "member g-odd fits no node by its own constraints, not for want of capacity: nodeSelector "
                    "disktype=ssd excludes 1 node")
    assert "excluded by nodeSelector" not in cond["message"], cond
    hold_gated(kube, namespace, "g", 2, 4)
    # the room frees: the three are released, g-odd stays gated and is named as its own constraint
    core.delete_namespaced_pod("filler", namespace, grace_period_seconds=0)
    wait_for(lambda: sum(not gated(p) for p in group_pods(kube, namespace, "g")) == 3, 30, what="3 released")
    # MembersWaiting may first speak of the three released members; wait for it to name g-odd
    waiting = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "MembersWaiting")) and
                       c["status"] == "True" and "1 member (g-odd) waits gated by their own constraints, not for "
                       "capacity" in c["message"] and c, 15, what="MembersWaiting naming g-odd's own constraints")
    assert "1 member (g-odd) waits gated by their own constraints, not for capacity" in waiting["message"], waiting
    assert [p.metadata.name for p in group_pods(kube, namespace, "g") if gated(p)] == ["g-odd"]


def test_failover_restored_reservations_are_named_in_the_waiting_message(stack, kube, namespace, only_nodes):
    """kube-scheduler paused: gang ``a`` (3 x 3 CPU) is released, pinned and unbound; the
    controller restarts (a failover), rebuilds the reservations from the pins, and group ``b``
    waits naming the room held for ``a``: PodGroup, members, node, CPU."""
    (node,) = only_nodes(1, **NODE)
    scheduler = stack.cluster.procs["kube-scheduler"]
    scheduler.signal(signal.SIGSTOP)
    try:
        create_pod_group(kube, example.pod_group("a", 3, namespace=namespace, timeout_seconds=None))
        create_pods(kube, namespace, "a", 3)
        wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "a")), 10, what="group a released")
        assert not any(bound(p) for p in group_pods(kube, namespace, "a"))
        stack.restart_controller()
        create_pod_group(kube, example.pod_group("b", 2, namespace=namespace, timeout_seconds=None))
        create_pods(kube, namespace, "b", 2, cpu="2")
        cond = released(kube, namespace, "b", "InsufficientCapacity", "fits 0 of 2: cpu short by 3",
                        f"room reserved for released members not bound yet: PodGroup {namespace}/a (3 members on "
                        f"{node}: cpu 9)")
        assert cond["message"].startswith("fits 0 of 2"), cond
        hold_gated(kube, namespace, "b", 2, 2)
    finally:
        scheduler.signal(signal.SIGCONT)
    # a binds: the room is a's for good, b's message no longer speaks of a reservation
    wait_for(lambda: all(bound(p) for p in group_pods(kube, namespace, "a")), 30, what="a bound")
    # one wait for all of it: the message naming the reservation also says "cpu short by 3"
    wait_for(lambda: (c := condition(status(kube, namespace, "b"), "Released")) and c["status"] == "False"
             and c["reason"] == "InsufficientCapacity" and "cpu short by 3" in c["message"]
             and "room reserved" not in c["message"], 20,
             what="InsufficientCapacity, cpu short by 3, the reservation no longer named once a is bound")
