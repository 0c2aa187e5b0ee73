"""Room promised to a nominated pod is named (issue 37 kind 10) on the real local control plane.

A high-priority pod preempts a low-priority one (held Terminating by a finalizer until the test lets
it go), so kube-scheduler nominates the node for it (``status.nominatedNodeName``). kube-scheduler
is then paused and the victim let go: the node shows its CPU free, the preemptor is not bound yet.
A gang of equal or lower priority that would fit that free room stays gated, and its ``Released``
condition names the nominated pod and the room promised to it beside what is short. Once
kube-scheduler runs again the preemptor binds and the message no longer names it.
"""

from __future__ import annotations

import contextlib

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import (condition, create_pod_group, group_pods, hold_gated, priority_classes, running,
                   scheduler_paused, status, wait_for)

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, cpu="10", memory="32Gi", pods=110)
FINALIZER = "example.com/hold"


def pod(name: str, group: str | None, cpu: str, priority_class: str | None = None,
        finalizers: list[str] | None = None) -> dict:
    tpl = example.pod_template(group, cpu=cpu, memory="100Mi", app=group or "plain")
    tpl["metadata"]["name"] = name
    if finalizers:
        tpl["metadata"]["finalizers"] = finalizers
    if priority_class:
        tpl["spec"]["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


def released(kube, namespace: str, name: str) -> dict | None:
    return condition(status(kube, namespace, name), "Released")


@pytest.mark.parametrize("preemptor_cpu,gang,same_priority", [
    ("8", (3, "1"), False),   # lower priority gang: 2 of 10 CPU left beside the promise, it needs 3
    ("6", (3, "2"), False),   # 4 left, the gang needs 6
    ("8", (1, "4"), True),    # equal priority: the nomination counts for it too
])
def test_a_gang_held_by_a_nomination_names_the_nominated_pod(stack, kube, namespace, only_nodes, preemptor_cpu,
                                                              gang, same_priority):
    (node,) = only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    size, cpu = gang
    with priority_classes(kube, preemptor=1000) as pcs:
        core.create_namespaced_pod(namespace, pod("victim", None, "9", finalizers=[FINALIZER]))
        wait_for(lambda: running(core.read_namespaced_pod("victim", namespace)), 20, what="victim Running")
        try:
            core.create_namespaced_pod(namespace, pod("preemptor", None, preemptor_cpu, pcs["preemptor"]))
            wait_for(lambda: core.read_namespaced_pod("preemptor", namespace).status.nominated_node_name == node,
                     30, what="preemptor nominated")
            wait_for(lambda: core.read_namespaced_pod("victim", namespace).metadata.deletion_timestamp, 15,
                     what="victim preempted (Terminating, held by its finalizer)")
            with scheduler_paused(stack):
                core.patch_namespaced_pod("victim", namespace, {"metadata": {"finalizers": None}})
                wait_for(lambda: not [p for p in core.list_namespaced_pod(namespace).items
                                      if p.metadata.name == "victim"], 15, what="victim gone")
                create_pod_group(kube, example.pod_group("g", size, namespace=namespace, timeout_seconds=None))
                for i in range(size):
                    core.create_namespaced_pod(namespace, pod(f"g-{i}", "g", cpu,
                                                              pcs["preemptor"] if same_priority else None))
                named = (f"room promised to pods kube-scheduler nominated, not bound yet: pod {namespace}/preemptor "
                         f"(priority 1000, on {node}: cpu {preemptor_cpu})")
                c = wait_for(lambda: (c := released(kube, namespace, "g")) and named in c["message"] and c, 20,
                             what="the Released message names the nominated pod")
                assert (c["status"], c["reason"]) == ("False", "InsufficientCapacity"), c
                assert "cpu short by" in c["message"], c
                assert not core.read_namespaced_pod("preemptor", namespace).spec.node_name
                hold_gated(kube, namespace, "g", 2, size)
        finally:
            with contextlib.suppress(client.ApiException):
                core.patch_namespaced_pod("victim", namespace, {"metadata": {"finalizers": None}})
        wait_for(lambda: running(core.read_namespaced_pod("preemptor", namespace)), 30, what="preemptor bound")
        wait_for(lambda: (c := released(kube, namespace, "g")) and "kube-scheduler nominated" not in c["message"],
                 20, what="the message no longer names the bound preemptor")
        core.delete_namespaced_pod("preemptor", namespace, grace_period_seconds=0)
        wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == size, 30,
                 what="gang released once the preemptor went")
