"""The real cluster-autoscaler 1.36.1 (kwok provider) on the local control plane, without cogate:
what it does for plain pending pods, for the pods of a gang that cannot fit whole, and for
ProvisioningRequests of class ``best-effort-atomic-scale-up.autoscaling.x-k8s.io`` (issue 16,
items 4 and 5). The facts asserted here are the ones cogate's provisioning builds on; they are
listed in ``localcluster/README.md`` ("Cluster autoscaler").

One group, ``autoscaled``: 0 to 4 nodes of 16 CPU (fixture ``autoscaled``, scale-down off, the
autoscaler restarted between tests). Every test starts with no node of the group.

Why a new node takes one 8-CPU pod, not two: the node the autoscaler simulates for a group with
no node Ready for a minute is the provider's template plus a kube-proxy pod of 100 millicores
(``cloudprovider.BuildKubeProxy``), so 8 + 8 + 0.1 CPU do not fit its 16 CPU, and a pod of 16 CPU
fits no new node at all. The real nodes (kwok runs no kube-proxy) have the whole 16 CPU.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from cogate.localcluster import autoscaler as ca
from cogate.localcluster.nodes import node_ready

from .kube import wait_for

PR_GROUP, PR_VERSION, PR_PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
#: Seconds of autoscaler loops (``--scan-interval=1s``) a "nothing more happens" check waits.
HOLD = 10.0


def pod_spec(cpu: str) -> dict[str, Any]:
    return {"nodeSelector": {ca.GROUP_LABEL: "autoscaled"},
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}


def create_pods(a, prefix: str, count: int, cpu: str, annotations: dict[str, str] | None = None) -> list[str]:
    core = client.CoreV1Api(a.api)
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        core.create_namespaced_pod(a.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": prefix}, "annotations": annotations or {}},
            "spec": pod_spec(cpu)})
    return names


def placement(a) -> dict[str, str | None]:
    """Pod name -> node name (None while pending) of the test's namespace."""
    return {p.metadata.name: p.spec.node_name for p in client.CoreV1Api(a.api).list_namespaced_pod(a.namespace).items}


def pod_events(a, name: str) -> list[tuple[str, str]]:
    sel = f"involvedObject.name={name},involvedObject.kind=Pod"
    return [(e.reason, e.message) for e in client.CoreV1Api(a.api).list_namespaced_event(a.namespace,
                                                                                          field_selector=sel).items]


def ready_group_nodes(a) -> list[str]:
    return sorted(n["metadata"]["name"] for n in a.group_nodes() if node_ready(n))


def hold(a, seconds: float, check) -> None:
    """Assert ``check()`` (which raises AssertionError) again and again for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check()
        time.sleep(0.5)


def provisioning_request(a, name: str, cpu: str, count: int) -> None:
    """A PodTemplate of one pod of ``cpu`` on the group and a ProvisioningRequest of class
    best-effort-atomic-scale-up for ``count`` of them, both named ``name``."""
    client.CoreV1Api(a.api).create_namespaced_pod_template(a.namespace, {
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(cpu)}})
    client.CustomObjectsApi(a.api).create_namespaced_custom_object(PR_GROUP, PR_VERSION, a.namespace, PR_PLURAL, {
        "apiVersion": f"{PR_GROUP}/{PR_VERSION}", "kind": "ProvisioningRequest", "metadata": {"name": name},
        "spec": {"provisioningClassName": ca.PROVISIONING_CLASS,
                 "podSets": [{"podTemplateRef": {"name": name}, "count": count}]}})


def pr_conditions(a, name: str) -> dict[str, tuple[str, str, str]]:
    """Condition type -> (status, reason, message) of the ProvisioningRequest ``name``."""
    pr = client.CustomObjectsApi(a.api).get_namespaced_custom_object(PR_GROUP, PR_VERSION, a.namespace, PR_PLURAL,
                                                                     name)
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in (pr.get("status") or {}).get("conditions") or []}


# ------------------------------------------------------------------ plain pods

def test_plain_pending_pods_get_one_new_node_each_and_bind(autoscaled):
    """Three unlabelled pods of 8 CPU: the autoscaler adds three nodes at once (one 8-CPU pod per
    simulated node, see the module docstring), kwok runs them, kube-scheduler binds every pod."""
    t0 = time.monotonic()
    names = create_pods(autoscaled, "plain", 3, "8")
    got = wait_for(lambda: (p := placement(autoscaled)) and all(p.values()) and p, 90,
                   what="all three pods bound")
    t_bound = time.monotonic() - t0
    nodes = {n["metadata"]["name"]: n for n in autoscaled.group_nodes()}
    assert len(nodes) == 3 and set(got.values()) <= set(nodes)
    for node in nodes.values():
        meta = node["metadata"]
        assert node_ready(node), "kwok runs the nodes the provider creates and the lifecycle controller sees them Ready"
        assert meta["name"].startswith("autoscaled-") and len(meta["name"]) == len("autoscaled-") + 5
        assert meta["labels"][ca.GROUP_LABEL] == "autoscaled" and meta["labels"]["kwok-nodegroup"] == "autoscaled"
        assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert meta["annotations"][ca.NAME_ANNOTATION] == "autoscaled"
        assert not node["spec"].get("taints")
        assert node["status"]["allocatable"] == {"cpu": "16", "memory": str(64 * 2**30), "pods": "110"}
    assert ("TriggeredScaleUp", "pod triggered scale-up: [{autoscaled 0->3 (max: 4)}]") in pod_events(
        autoscaled, names[0])
    hold(autoscaled, 3, lambda: len(autoscaled.group_nodes()) == 3 or (_ for _ in ()).throw(
        AssertionError(f"nodes changed: {[n['metadata']['name'] for n in autoscaled.group_nodes()]}")))
    print(f"\n3 pods of 8 CPU: all bound {t_bound:.1f} s after creation; placement {got}")


def test_plain_gang_that_cannot_fit_whole_gets_nodes_in_vain(autoscaled):
    """Issue 16 item 5, without cogate: five pods of 12 CPU, a gang that needs five nodes of a
    group of at most four. The autoscaler adds the four it may (0->4), four pods bind, the fifth
    stays pending for ever ("max node group size reached"): four nodes paid for a gang that can
    never start whole. (One 12-CPU pod per node both in the autoscaler's plan and in reality.)"""
    names = create_pods(autoscaled, "gang", 5, "12")

    def four_bound():
        p = placement(autoscaled)
        return sum(1 for n in p.values() if n) == 4 and len(ready_group_nodes(autoscaled)) == 4 and p

    got = wait_for(four_bound, 90, what="four of the five pods bound on four new nodes")
    pending = [n for n, node in got.items() if node is None]
    assert len(pending) == 1 and len(set(n for n in got.values() if n)) == 4

    def still():
        p = placement(autoscaled)
        assert sum(1 for n in p.values() if n) == 4, p
        assert len(autoscaled.group_nodes()) == 4
    hold(autoscaled, HOLD, still)
    assert autoscaled.view()["autoscaled"].target == 4
    events = pod_events(autoscaled, pending[0])
    assert ("NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached") in events, events
    triggered = {m for name in names for r, m in pod_events(autoscaled, name) if r == "TriggeredScaleUp"}
    assert triggered == {"pod triggered scale-up: [{autoscaled 0->4 (max: 4)}]"}


def test_a_pod_as_large_as_a_node_never_triggers_a_scale_up(autoscaled):
    """A pod of 16 CPU on a group of 16-CPU nodes: no node, ever ("Insufficient cpu"), because the
    simulated new node carries a kube-proxy pod of 100 millicores (module docstring)."""
    (name,) = create_pods(autoscaled, "whole-node", 1, "16")
    wait_for(lambda: ("NotTriggerScaleUp", "pod didn't trigger scale-up: 1 Insufficient cpu")
             in pod_events(autoscaled, name), 60, what="NotTriggerScaleUp: Insufficient cpu")

    def none():
        assert autoscaled.group_nodes() == [] and placement(autoscaled) == {name: None}
    hold(autoscaled, HOLD / 2, none)


# ------------------------------------------------------------------ ProvisioningRequests

def test_a_provisioning_request_that_fits_is_provisioned_with_exactly_its_nodes(autoscaled):
    """best-effort-atomic-scale-up for 2 pods of 8 CPU: Accepted and Provisioned=True
    (CapacityIsProvisioned) within seconds, exactly two new nodes (one per pod, as for plain
    pods), nothing more; pods that consume the request then bind on them."""
    t0 = time.monotonic()
    provisioning_request(autoscaled, "two", "8", 2)
    conds = wait_for(lambda: (c := pr_conditions(autoscaled, "two")).get("Provisioned", ("",))[0] == "True" and c,
                     60, what="Provisioned=True")
    t_provisioned = time.monotonic() - t0
    assert conds == {
        "Accepted": ("True", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler"),
        "Provisioned": ("True", "CapacityIsProvisioned", "Capacity is found in the cluster"),
    }
    wait_for(lambda: len(ready_group_nodes(autoscaled)) == 2, 60, what="two new nodes Ready")
    t_ready = time.monotonic() - t0

    def exactly_two():
        assert len(autoscaled.group_nodes()) == 2
        assert pr_conditions(autoscaled, "two") == conds  # no BookingExpired before 10 min, no Failed
    hold(autoscaled, HOLD / 2, exactly_two)
    create_pods(autoscaled, "consumer", 2, "8", annotations={CONSUME: "two"})
    got = wait_for(lambda: (p := placement(autoscaled)) and all(p.values()) and p, 60, what="consumers bound")
    assert set(got.values()) <= set(ready_group_nodes(autoscaled))
    assert len(autoscaled.group_nodes()) == 2
    print(f"\nProvisioningRequest of 2 x 8 CPU: Provisioned=True after {t_provisioned:.1f} s, "
          f"2 nodes Ready after {t_ready:.1f} s; consumers on {got}")


def test_a_provisioning_request_beyond_the_groups_maximum_gets_no_node_and_says_so(autoscaled):
    """best-effort-atomic-scale-up for 5 pods of 12 CPU (five nodes; the group has at most four):
    no node at all, Provisioned=False CapacityIsNotFound, no Failed condition (the class retries,
    the first time after 1 min: ``--provisioning-request-initial-backoff-time``; Failed comes
    only after 7 days, reason Expired)."""
    provisioning_request(autoscaled, "five", "12", 5)
    expected = {
        "Accepted": ("True", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler"),
        "Provisioned": ("False", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later."),
    }
    wait_for(lambda: pr_conditions(autoscaled, "five") == expected, 60, what=f"conditions {expected}",
             interval=0.3)

    def nothing():
        assert autoscaled.group_nodes() == []
        assert pr_conditions(autoscaled, "five") == expected
    hold(autoscaled, HOLD, nothing)
    assert autoscaled.view()["autoscaled"].target == 0
