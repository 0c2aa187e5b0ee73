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

from .kube import bound, condition, create_pod_group, gated, group_pods, hold_gated, status, wait_for
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
