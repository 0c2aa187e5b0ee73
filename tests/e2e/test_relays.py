"""Explanations where users look (issue 20 item 4), on the real control plane.

A Job (``batch/v1``, run by the local control plane's kube-controller-manager) owns labelled
pods whose PodGroup needs more than fits. ``kubectl describe job`` and ``kubectl describe pod``
(a gated member) show an event with the PodGroup's reason and its message, as the PodGroup's
``Released=False`` condition says it; a wait for members is relayed when the owner can never
make them (the owners' finding explains it).
"""

from __future__ import annotations

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import condition, create_pod_group, events_for, gated, group_pods, status, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)  # cpu 10: three members of 3 CPU


def job(name: str, pods: int) -> dict:
    tpl = example.pod_template(name, cpu="3", app=name)
    tpl["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "template": tpl}}


def described(cluster, kind: str, namespace: str, name: str, *parts: str) -> str:
    """``kubectl describe`` of the object once its Events section names every part."""
    def says():
        out = cluster.kubectl("describe", kind, name, "-n", namespace).stdout
        events = out.split("Events:", 1)[-1]
        return out if all(p in events for p in parts) else None

    return wait_for(says, 20, interval=0.5, what=f"kubectl describe {kind} {name} naming {parts}")


def test_job_and_its_gated_pods_show_why_the_gang_waits(stack, cluster, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("train", 4, namespace=namespace, timeout_seconds=None))
    client.BatchV1Api(kube).create_namespaced_job(namespace, job("train", 4))

    def held():
        c = condition(status(kube, namespace, "train"), "Released")
        return c if c and c["status"] == "False" and c["reason"] == "InsufficientCapacity" else None

    cond = wait_for(held, 30, what="Released=False InsufficientCapacity")
    assert "cpu short by" in cond["message"], cond
    ps = wait_for(lambda: len(ps := group_pods(kube, namespace, "train")) == 4 and ps, 30, what="4 members")
    assert all(map(gated, ps))

    # the owner: the Job the members share (the PodGroup has no owner of its own)
    text = described(cluster, "job", namespace, "train", "InsufficientCapacity", f"PodGroup {namespace}/train:")
    assert "Warning" in text.split("Events:", 1)[1]
    ev = [e for e in events_for(kube, namespace, "train", kind="Job") if e.reason == "InsufficientCapacity"]
    assert len(ev) == 1 and ev[0].type == "Warning" and ev[0].involved_object.uid == \
        client.BatchV1Api(kube).read_namespaced_job("train", namespace).metadata.uid
    assert ev[0].message.startswith(f"PodGroup {namespace}/train: fits ") and "cpu short by" in ev[0].message

    # a gated member
    pod = ps[0].metadata.name
    described(cluster, "pod", namespace, pod, "InsufficientCapacity", f"PodGroup {namespace}/train:")
    on_pods = {p.metadata.name: [e for e in events_for(kube, namespace, p.metadata.name, kind="Pod")
                                 if e.reason == "InsufficientCapacity"] for p in ps}
    assert all(len(es) == 1 for es in on_pods.values()), on_pods  # every gated member, once
    # once per reason: later passes (the numbers may change) add no new event
    assert len([e for e in events_for(kube, namespace, "train", kind="Job")
                if e.reason == "InsufficientCapacity"]) == 1


def test_a_wait_for_members_the_owner_can_never_end_is_relayed(stack, cluster, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("few", 3, namespace=namespace, timeout_seconds=None))
    client.BatchV1Api(kube).create_namespaced_job(namespace, job("few", 2))

    def waiting():
        c = condition(status(kube, namespace, "few"), "Released")
        return c if c and c["reason"] == "WaitingForMembers" and "runs at most 2 pods" in c["message"] else None

    # the Job can never make 3: the owners' finding explains the wait, so it is relayed
    wait_for(waiting, 30, what="WaitingForMembers naming the Job")
    text = described(cluster, "job", namespace, "few", "WaitingForMembers", "runs at most 2 pods at once")
    assert f"PodGroup {namespace}/few:" in text
