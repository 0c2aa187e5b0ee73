"""Constraints kube-scheduler applies beyond resources (issue 9 items 6 and 7), end to end.

Each test runs the issue's input on the local control plane with the session ``stack``
(webhook + controller) and the real kube-scheduler, and asserts that a group is released
only when kube-scheduler can place minMember of its members: hard topology spread over a
cordoned node, claims bound to node-local PVs, a claim that does not exist, an Infeasible
in-place resize, and members naming a scheduler that does not run.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import (
    condition,
    create_pod_group,
    group_pods,
    hold_gated,
    running,
    status,
    wait_for,
)

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"


def member(name: str, group: str, cpu: str = "2", **spec: Any) -> dict[str, Any]:
    tpl = example.pod_template(group, cpu=cpu, app=group)
    tpl["metadata"]["name"] = name
    tpl["spec"].update(spec)
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


def waiting_says(kube, ns: str, group: str, *texts: str, reason: str | None = None) -> dict[str, Any]:
    """The ``Released=False`` condition once its message names every one of ``texts`` (and its
    reason is ``reason``, if given): the first verdict may be of fewer members."""
    def check():
        c = condition(status(kube, ns, group), "Released")
        return c if c and c["status"] == "False" and all(t in c["message"] for t in texts) \
            and reason in (None, c["reason"]) else None

    try:
        return wait_for(check, 15, what=f"Released=False {reason or 'any reason'} naming {texts}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; status of {group}: {status(kube, ns, group)}") from None


# ----------------------------------------------------------------- topology spread


def test_spread_over_a_cordoned_node_stays_gated_until_both_domains_can_take_a_member(stack, kube, namespace,
                                                                                      only_nodes):
    """One schedulable node and one cordoned; maxSkew 1 on hostname, DoNotSchedule, minMember 2.
    kube-scheduler counts the cordoned node as a domain with 0 pods, so only one member could
    run: the group must stay gated (it was released half-placed before)."""
    n1, n2 = only_nodes(2, cpu="8", memory="8Gi", kwok_taint=False)
    core = client.CoreV1Api(kube)
    core.patch_node(n2, {"spec": {"unschedulable": True}})
    create_pod_group(kube, example.pod_group("s", 2, namespace=namespace, timeout_seconds=None))
    spread = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "s"}}}]
    for i in range(2):
        core.create_namespaced_pod(namespace, member(f"s-{i}", "s", topologySpreadConstraints=spread))
    cond = waiting_says(kube, namespace, "s", "topology spread", "fits 1 of 2")
    assert "fits 1 of 2" in cond["message"]
    hold_gated(kube, namespace, "s", 4.0, 2)
    # uncordon: a member per node, pinned there, both Running
    core.patch_node(n2, {"spec": {"unschedulable": False}})
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "s")) == 2, 30, what="both Running")
    assert sorted(p.spec.node_name for p in group_pods(kube, namespace, "s")) == sorted([n1, n2])


# ----------------------------------------------------------------- bound PVs' node affinity


def _pv(name: str, node: str, claim_ns: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/tmp/{name}"},
                     "claimRef": {"namespace": claim_ns, "name": claim},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}]}}}}


def _pvc(name: str, volume: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": volume,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def _with_claim(name: str, group: str, claim: str) -> dict[str, Any]:
    return member(name, group, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])


def test_members_whose_local_pvs_sit_on_the_busy_node_stay_gated(stack, kube, namespace, only_nodes):
    """n1, n2 of 8 CPU; a 6-CPU pod on n2; two static PVs with node affinity to n2, pre-bound to
    the members' claims; minMember 2, members of 2 CPU. kube-scheduler can place one member
    only: the group stays gated, then runs on n2 once the 6-CPU pod is gone."""
    n1, n2 = only_nodes(2, cpu="8", memory="8Gi", kwok_taint=False)
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod",
                                           "metadata": {"name": "busy", "labels": {"app": "busy"}},
                                           "spec": {**example.pod_template(None, cpu="6")["spec"], "nodeName": n2}})
    pv_names = [f"{namespace}-pv-{i}" for i in range(2)]
    try:
        for i, pv in enumerate(pv_names):
            core.create_persistent_volume(_pv(pv, n2, namespace, f"data-{i}"))
            core.create_namespaced_persistent_volume_claim(namespace, _pvc(f"data-{i}", pv))
        wait_for(lambda: all(c.status.phase == "Bound" for c in
                             core.list_namespaced_persistent_volume_claim(namespace).items), 30,
                 what="claims bound by the PV controller")
        create_pod_group(kube, example.pod_group("v", 2, namespace=namespace, timeout_seconds=None))
        for i in range(2):
            core.create_namespaced_pod(namespace, _with_claim(f"v-{i}", "v", f"data-{i}"))
        waiting_says(kube, namespace, "v", "volume node affinity")
        hold_gated(kube, namespace, "v", 4.0, 2)
        core.delete_namespaced_pod("busy", namespace, grace_period_seconds=0)
        wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "v")) == 2, 30, what="both Running")
        assert {p.spec.node_name for p in group_pods(kube, namespace, "v")} == {n2}
    finally:
        for pv in pv_names:
            try:
                core.delete_persistent_volume(pv)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def test_a_member_whose_claim_does_not_exist_keeps_the_group_gated(stack, kube, namespace, only_nodes):
    only_nodes(1, cpu="8", memory="8Gi", kwok_taint=False)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("c", 2, namespace=namespace, timeout_seconds=None))
    core.create_namespaced_pod(namespace, member("c-0", "c"))
    core.create_namespaced_pod(namespace, _with_claim("c-1", "c", "missing"))
    cond = waiting_says(kube, namespace, "c", "c-1", "persistentvolumeclaim 'missing' not found",
                        reason="Unschedulable")
    assert cond["reason"] == "Unschedulable"
    hold_gated(kube, namespace, "c", 4.0, 2)


# ----------------------------------------------------------------- in-place resize


def test_an_infeasible_resize_does_not_hold_a_group_kube_scheduler_places(stack, kube, namespace, only_nodes):
    """8-CPU node; a Running 2-CPU pod asks to grow to 6 and the resize is Infeasible:
    kube-scheduler still counts 2, so two 3-CPU members fit (cogate counted 6 and held)."""
    (n1,) = only_nodes(1, cpu="8", memory="8Gi", kwok_taint=False)
    core = client.CoreV1Api(kube)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "grow", "labels": {"app": "grow"}},
            "spec": {"nodeName": n1, "terminationGracePeriodSeconds": 0, "containers": [
                {"name": "app", "image": "registry.invalid/app:1", "resources": {"requests": {"cpu": "2"}}}]}}
    core.create_namespaced_pod(namespace, body)
    wait_for(lambda: core.read_namespaced_pod("grow", namespace).status.phase == "Running", 30, what="grow Running")
    # what a kubelet with in-place resize reports (the API server refuses a resize of a running
    # pod whose container status has no resources: "node without support for resize")
    pod = core.read_namespaced_pod("grow", namespace)
    status = client.ApiClient().sanitize_for_serialization(pod.status.container_statuses[0])
    core.patch_namespaced_pod_status("grow", namespace, {"status": {"containerStatuses": [
        {**status, "allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "2"}}}]}})
    core.patch_namespaced_pod_resize("grow", namespace, {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "6"}}}]}})
    # ... and for a resize the node cannot fit
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.patch_namespaced_pod_status("grow", namespace, {"status": {"conditions": [
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible",
         "message": "Node didn't have enough capacity", "lastTransitionTime": now}]}})
    got = core.read_namespaced_pod("grow", namespace)
    assert got.spec.containers[0].resources.requests["cpu"] == "6"
    assert got.status.container_statuses[0].allocated_resources == {"cpu": "2"}
    create_pod_group(kube, example.pod_group("r", 2, namespace=namespace, timeout_seconds=None))
    for i in range(2):
        core.create_namespaced_pod(namespace, member(f"r-{i}", "r", cpu="3"))
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "r")) == 2, 30,
             what="both members Running beside the infeasibly resized pod")


# ----------------------------------------------------------------- scheduler names


def test_members_naming_a_scheduler_cogate_does_not_plan_for_stay_gated_and_are_named(stack, kube, namespace,
                                                                                      only_nodes):
    only_nodes(1, cpu="8", memory="8Gi", kwok_taint=False)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("o", 2, namespace=namespace, timeout_seconds=None))
    for i in range(2):
        core.create_namespaced_pod(namespace, member(f"o-{i}", "o", schedulerName="other-scheduler"))
    cond = waiting_says(kube, namespace, "o", "o-0, o-1 name scheduler 'other-scheduler'", reason="Unschedulable")
    assert cond["reason"] == "Unschedulable"
    hold_gated(kube, namespace, "o", 2.0, 2)
