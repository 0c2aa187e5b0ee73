"""PodGroup ``spec.minResources`` on the real control plane (issue 20 item 2).

A Spark-shaped PodGroup, as the Spark operator creates it: ``minMember: 1``, the driver the only
pod, the whole application (driver + 2 executors) in ``minResources``. On nodes that fit the
driver but not the executors it stays gated and says which resource is short and by how much;
each node added changes the message (never fits -> room taken); the node that brings the room
releases it, and the real kube-scheduler binds the driver. docs/semantics.md, "minResources".
"""

from __future__ import annotations

import pytest
from kubernetes import client

from cogate.localcluster import example
from cogate.localcluster.nodes import node_manifest

from .kube import bound, condition, create_pod_group, events_for, gated, group_pods, hold_gated, status, wait_for
from .test_preemption import classes  # noqa: F401 (a fixture; the session's controller preempts: the default)
from .test_robustness import pod

pytestmark = pytest.mark.e2e

NODE = dict(cpu="4", memory="8Gi", pods=110, kwok_taint=False)
#: driver 1 cpu + 2 executors of 2 cpu; 500Mi each (example.pod_template)
SPARK_MIN_RESOURCES = {"cpu": "5", "memory": "1500Mi"}


def says(kube, namespace: str, type_: str, status_: str, reason: str, *parts: str, timeout: float = 20) -> dict:
    def check():
        c = condition(status(kube, namespace, "spark"), type_)
        return c if c and (c["status"], c["reason"]) == (status_, reason) and all(p in c["message"] for p in parts) \
            else None

    try:
        return wait_for(check, timeout, what=f"{type_}={status_} {reason} naming {parts}")
    except AssertionError:
        raise AssertionError(f"status of spark: {status(kube, namespace, 'spark')}") from None


def test_spark_shaped_group_waits_for_its_executors_room_and_a_new_node_releases_it(stack, kube, namespace,
                                                                                   only_nodes):
    core = client.CoreV1Api(kube)
    only_nodes(1, **NODE)
    pg = example.pod_group("spark", 1, namespace=namespace, timeout_seconds=None)
    pg["spec"]["minResources"] = dict(SPARK_MIN_RESOURCES)
    create_pod_group(kube, pg)
    core.create_namespaced_pod(namespace, pod("spark-driver", "spark", cpu="1"))
    # one 4-cpu node: the driver fits, the application never does
    says(kube, namespace, "FitsCluster", "False", "ExceedsClusterCapacity",
         "spec.minResources does not fit even with every eligible node empty: minResources cpu short by 1: "
         "3 allocatable beyond the 1 member placed, minResources asks 5")
    hold_gated(kube, namespace, "spark", 1, 1)
    # a plain pod takes 3500m of it; a second node: fits the empty cluster, but the room is taken
    core.create_namespaced_pod(namespace, pod("busy", None, cpu="3500m"))
    wait_for(lambda: bound(core.read_namespaced_pod("busy", namespace)), 20, what="busy bound")
    added = []
    try:
        for i in range(2):
            name = f"minres-{i}-{namespace}"[:60]
            core.create_node(node_manifest(name, **NODE))
            added.append(name)
            if i == 0:
                says(kube, namespace, "Released", "False", "InsufficientCapacity",
                     "fits 1 of 1, but minResources cpu short by 500m: 3500m free beyond the 1 member placed, "
                     "minResources asks 5", timeout=60)
                says(kube, namespace, "FitsCluster", "True", "FitsEmptyCluster")
                hold_gated(kube, namespace, "spark", 1, 1)
        # the third node brings the room: released, and kube-scheduler binds the driver
        wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "spark")), 60,
                 what="the driver released once the third node is Ready")
        wait_for(lambda: bound(core.read_namespaced_pod("spark-driver", namespace)), 20, what="the driver bound")
        says(kube, namespace, "Released", "True", "Released")
    finally:
        for p in group_pods(kube, namespace, "spark"):
            core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
        core.delete_namespaced_pod("busy", namespace, grace_period_seconds=0)
        for name in added:
            core.delete_node(name)


def test_room_of_a_released_application_is_held_for_its_executors(stack, kube, namespace, only_nodes):
    """Issue 37 kind 9: two Spark-shaped applications asking 14 CPU each on 16 free CPU. Only the
    first driver is released; the second waits naming the held room; the first one's executors,
    created after its release, bind in that room; once the first application is gone, the second
    is released."""
    core = client.CoreV1Api(kube)
    only_nodes(2, cpu="8", memory="64Gi", pods=110, kwok_taint=False)
    for name in ("app-a", "app-b"):
        pg = example.pod_group(name, 1, namespace=namespace, timeout_seconds=None)
        pg["spec"]["minResources"] = {"cpu": "14", "memory": "7Gi"}
        create_pod_group(kube, pg)
    core.create_namespaced_pod(namespace, pod("app-a-driver", "app-a", cpu="1"))
    wait_for(lambda: bound(core.read_namespaced_pod("app-a-driver", namespace)), 30, what="a's driver bound")
    core.create_namespaced_pod(namespace, pod("app-b-driver", "app-b", cpu="1"))
    c = wait_for(lambda: (lambda c: c if c and c["reason"] == "InsufficientCapacity"
                          and "held for the rest of spec.minResources of PodGroup" in c["message"] else None)(
        condition(status(kube, namespace, "app-b"), "Released")), 30, what="b waits for the room held for a")
    assert f"PodGroup {namespace}/app-a (cpu 26 wanted by PodGroup {namespace}/app-a and this group, 14 free" \
        in c["message"] and "held until " in c["message"], c["message"]
    hold_gated(kube, namespace, "app-b", 2, 1)
    try:
        # a's executors (created after its release, as the Spark driver creates them) use the held room
        for i in range(2):
            core.create_namespaced_pod(namespace, pod(f"app-a-exec-{i}", "app-a", cpu="6"))
        for i in range(2):
            wait_for(lambda i=i: bound(core.read_namespaced_pod(f"app-a-exec-{i}", namespace)), 30,
                     what=f"a's executor {i} bound")
        hold_gated(kube, namespace, "app-b", 1, 1)
        # a ends: its room goes back, and b is released
        for p in group_pods(kube, namespace, "app-a"):
            core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
        wait_for(lambda: bound(core.read_namespaced_pod("app-b-driver", namespace)), 60, what="b's driver bound")
    finally:
        for group in ("app-a", "app-b"):
            for p in group_pods(kube, namespace, group):
                core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)


def _low(name: str, cpu: str, priority_class: str) -> dict:
    return pod(name, None, cpu=cpu, extra_spec={"priorityClassName": priority_class, "terminationGracePeriodSeconds": 0})


def test_min_resources_preempts_for_all_of_it_or_for_nothing(stack, classes, kube, namespace, only_nodes):
    """Issue 37 kind 9 (the session's controller: --preemption is on by default): a high-priority
    Spark-shaped application on a node full of low-priority pods preempts for its driver and its
    executors' room together (3 of 4 pods, none more), then starts."""
    core = client.CoreV1Api(kube)
    only_nodes(1, cpu="8", memory="64Gi", pods=110, kwok_taint=False)
    for i in range(4):
        core.create_namespaced_pod(namespace, _low(f"low-{i}", "2", classes["low"]))
    wait_for(lambda: all(bound(core.read_namespaced_pod(f"low-{i}", namespace)) for i in range(4)), 30,
             what="the low-priority pods bound")
    pg = example.pod_group("spark", 1, namespace=namespace, timeout_seconds=None)
    pg["spec"]["minResources"] = {"cpu": "5", "memory": "1Gi"}
    create_pod_group(kube, pg)
    core.create_namespaced_pod(namespace, pod("spark-driver", "spark", cpu="1",
                                              extra_spec={"priorityClassName": classes["high"]}))
    wait_for(lambda: bound(core.read_namespaced_pod("spark-driver", namespace)), 60, what="the driver bound")
    left = [p.metadata.name for p in core.list_namespaced_pod(namespace).items
            if p.metadata.name.startswith("low-") and not p.metadata.deletion_timestamp]
    assert len(left) == 1, left  # 3 victims: the driver's 1 cpu and the 4 cpu of the rest, none more
    events = [e.message for e in events_for(kube, namespace, "spark") if e.reason == "Preempting"]
    assert any("for the rest of spec.minResources" in m for m in events), events


def test_min_resources_that_preemption_cannot_make_room_for_preempts_nothing(stack, classes, kube, namespace,
                                                                           only_nodes):
    core = client.CoreV1Api(kube)
    only_nodes(1, cpu="8", memory="64Gi", pods=110, kwok_taint=False)
    core.create_namespaced_pod(namespace, _low("vip", "4", classes["vip"]))
    for i in range(2):
        core.create_namespaced_pod(namespace, _low(f"low-{i}", "2", classes["low"]))
    wait_for(lambda: all(bound(core.read_namespaced_pod(n, namespace)) for n in ("vip", "low-0", "low-1")), 30,
             what="the pods bound")
    pg = example.pod_group("spark", 1, namespace=namespace, timeout_seconds=None)
    pg["spec"]["minResources"] = {"cpu": "5", "memory": "1Gi"}
    create_pod_group(kube, pg)
    core.create_namespaced_pod(namespace, pod("spark-driver", "spark", cpu="1",
                                              extra_spec={"priorityClassName": classes["high"]}))
    says(kube, namespace, "Preempting", "False", "DoesNotFitEvenWithPreemption",
         "the rest of spec.minResources (cpu short by 1) does not fit even with every lower-priority pod", timeout=30)
    hold_gated(kube, namespace, "spark", 3, 1)
    for n in ("low-0", "low-1"):
        assert not core.read_namespaced_pod(n, namespace).metadata.deletion_timestamp
