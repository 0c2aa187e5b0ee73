"""Gangs of gangs (issue 33 item 2) on the local control plane: PodGroups that name each other in
``cogate.dev/gang-set`` (or Koordinator's ``gang.scheduling.koordinator.sh/groups``) are released
together or not at all, each with its own minimum only. Pods run on kwok fake nodes; what is
asserted is what a user sees: gates, nodes and each PodGroup's ``Released`` condition.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import bound, condition, create_pod_group, gated, group_pods, hold_gated, status, wait_for

pytestmark = pytest.mark.e2e

SET = "cogate.dev/gang-set"
KOORD = "gang.scheduling.koordinator.sh/groups"
NODE = dict(kwok_taint=False, **example.NODE_SHAPE)  # cpu 10, memory 8Gi


def make_group(kube, namespace: str, name: str, min_member: int, pods: int, cpu: str,
               annotations: dict[str, str]) -> None:
    """PodGroup ``name`` with ``annotations``, then ``pods`` pods of ``cpu`` labelled into it."""
    pg = example.pod_group(name, min_member, namespace=namespace, timeout_seconds=None)
    pg["metadata"]["annotations"] = annotations
    create_pod_group(kube, pg)
    core = client.CoreV1Api(kube)
    for i in range(pods):
        tpl = example.pod_template(name, cpu=cpu)
        tpl["metadata"]["name"] = f"{name}-{i}"
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})


def says(kube, namespace: str, group: str, *parts: str, timeout: float = 30) -> dict:
    """Wait until the group's Released condition is False naming every part; returns it."""
    def found():
        c = condition(status(kube, namespace, group), "Released")
        return c if c and c["status"] == "False" and all(p in c["message"] for p in parts) else None

    return wait_for(found, timeout, what=f"Released=False of {group} naming {parts}")


def placed(kube, namespace: str, group: str) -> int:
    return sum(1 for p in group_pods(kube, namespace, group) if bound(p) and not gated(p))


def test_ps_and_workers_where_only_ps_fits_release_neither(stack, kube, namespace, only_nodes):
    """ps (1 x 2 CPU) and workers (4 x 3 CPU) in one set, one node of 10 CPU: ps alone would run;
    neither is released, each PodGroup says why; a second node releases both."""
    only_nodes(1, **NODE)
    make_group(kube, namespace, "ps", 1, 1, "2", {SET: json.dumps(["ps", "workers"])})
    make_group(kube, namespace, "workers", 4, 4, "3", {SET: json.dumps(["ps", "workers"])})
    says(kube, namespace, "ps", "waits for set [ps, workers] (1 of 2 groups needed fit): PodGroup workers is short")
    says(kube, namespace, "workers", "set [ps, workers] waits for it")
    hold_gated(kube, namespace, "ps", 3, 1)
    hold_gated(kube, namespace, "workers", 0.5, 4)
    only_nodes(2, **NODE)
    wait_for(lambda: placed(kube, namespace, "ps") == 1 and placed(kube, namespace, "workers") == 4, 40,
             what="ps and workers bound once both fit")


def test_two_sets_competing_for_one_room_one_runs(stack, kube, namespace, only_nodes):
    """Sets a (Koordinator's annotation) and b (ours), each 2 groups of 2 x 2 CPU, on one node of 10
    CPU: room for one set. One set runs whole, the other waits whole; no set holds part of the room."""
    only_nodes(1, **NODE)
    a = json.dumps([f"{namespace}/a1", f"{namespace}/a2"])
    for g in ("a1", "a2"):
        make_group(kube, namespace, g, 2, 2, "2", {KOORD: a})
    for g in ("b1", "b2"):
        make_group(kube, namespace, g, 2, 2, "2", {SET: json.dumps(["b1", "b2"])})

    def one_set_runs():
        counts = {g: placed(kube, namespace, g) for g in ("a1", "a2", "b1", "b2")}
        runs = [s for s in ("a", "b") if counts[f"{s}1"] == counts[f"{s}2"] == 2]
        return runs if len(runs) == 1 else None

    runs = wait_for(one_set_runs, 40, what="one set bound whole")
    other = "b" if runs == ["a"] else "a"
    says(kube, namespace, f"{other}1", f"set [{other}1, {other}2]")
    for g in (f"{other}1", f"{other}2"):
        hold_gated(kube, namespace, g, 1.5, 2)


def test_kep_6012_stealing_shape_places_two_and_two(stack, kube, namespace, only_nodes):
    """Two children of minimum 2 in one set, one with 4 pods, room for 4 (one node of 4 CPU, pods
    of 1 CPU): cogate places 2 + 2 (KEP-6012's greedy CompositePodGroup may give the big child 4
    and starve the small one); the big child's other 2 wait gated."""
    only_nodes(1, **{**NODE, "cpu": "4"})
    make_group(kube, namespace, "big", 2, 4, "1", {SET: json.dumps(["big", "small"])})
    make_group(kube, namespace, "small", 2, 2, "1", {SET: json.dumps(["big", "small"])})
    wait_for(lambda: placed(kube, namespace, "big") == 2 and placed(kube, namespace, "small") == 2, 40,
             what="2 + 2 bound")
    assert sum(1 for p in group_pods(kube, namespace, "big") if gated(p)) == 2


def test_replicas_sharing_a_pod_group_are_each_whole_at_the_first_release(stack, kube, namespace, only_nodes):
    """Item 3: two LeaderWorkerSet replicas of 2 pods (3 CPU) share PodGroup llm with minMember 3;
    one node of 10 CPU holds 3 pods. minMember alone would release a replica and a half; cogate
    holds all 4 (each replica whole or nothing) and a second node releases both replicas."""
    from .test_promised_room import lws_pod
    only_nodes(1, **NODE)
    pg = example.pod_group("llm", 3, namespace=namespace, timeout_seconds=None)
    create_pod_group(kube, pg)
    core = client.CoreV1Api(kube)
    for r in range(2):
        for w in range(2):
            core.create_namespaced_pod(namespace, lws_pod(r, w, 2, "3"))
    says(kube, namespace, "llm", "fits 2 of 3: counting whole replicas only")
    hold_gated(kube, namespace, "llm", 2, 4)
    only_nodes(2, **NODE)
    wait_for(lambda: placed(kube, namespace, "llm") == 4, 40, what="both replicas bound once they fit whole")
