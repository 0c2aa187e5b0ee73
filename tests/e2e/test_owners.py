"""Owners that can never complete their group say so (issue 21 item 5), on the real control plane.

Real owners run by the local control plane's kube-controller-manager (StatefulSet, Job,
ReplicaSet, Deployment controllers); cogate's controller reads them by name while their group
waits for members. Each test asserts the PodGroup's status (``Released=False`` reason
``WaitingForMembers`` whose message names the owner and the fix), the ``OwnerCannotComplete``
event, and that nothing was released. Contrasts (``Parallel``, enough replicas) show the
message is not said when the owner can complete the group.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import condition, create_pod_group, events_for, gated, group_pods, running, status, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)  # cpu 10: three members of 3 CPU


def template(group: str, cpu: str = "3", **spec) -> dict:
    tpl = example.pod_template(group, cpu=cpu, app=group)
    tpl["spec"].update(spec)
    return tpl


def released_says(kube, namespace: str, group: str, *parts: str, timeout: float = 30) -> dict:
    """Wait until the group's Released condition is False/WaitingForMembers and names every part."""
    def says():
        c = condition(status(kube, namespace, group), "Released")
        return c if c and c["status"] == "False" and c["reason"] == "WaitingForMembers" \
            and all(p in c["message"] for p in parts) else None

    try:
        return wait_for(says, timeout, what=f"Released=False WaitingForMembers naming {parts}")
    except AssertionError:
        raise AssertionError(f"status of {group}: {status(kube, namespace, group)}") from None


def owner_event(kube, namespace: str, group: str, type_: str, *parts: str) -> client.CoreV1Event:
    def found():
        for e in events_for(kube, namespace, group):
            if e.reason == "OwnerCannotComplete" and e.type == type_ and all(p in e.message for p in parts):
                return e
        return None

    return wait_for(found, 15, what=f"{type_} OwnerCannotComplete event naming {parts}")


def statefulset(name: str, replicas: int, policy: str | None) -> dict:
    spec = {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
            "template": template(name)}
    if policy:
        spec["podManagementPolicy"] = policy
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("policy", [None, "OrderedReady"])
def test_ordered_ready_statefulset_names_the_cause_and_the_fix(stack, kube, namespace, only_nodes, policy):
    """podManagementPolicy OrderedReady (also the default, None): pod 1 only after pod 0 is
    Ready, which it never is while gated. The PodGroup names the cause and the fix."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("db", 3, namespace=namespace, timeout_seconds=None))
    client.AppsV1Api(kube).create_namespaced_stateful_set(namespace, statefulset("db", 3, policy))
    cond = released_says(kube, namespace, "db", "1 of 3 members present",
                         f"StatefulSet {namespace}/db creates its pods one at a time (podManagementPolicy "
                         "OrderedReady", "db-1 only once db-0 is Running and Ready",
                         "fix: recreate it with podManagementPolicy: Parallel")
    assert cond["reason"] == "WaitingForMembers", cond
    owner_event(kube, namespace, "db", "Warning", f"StatefulSet {namespace}/db", "Parallel")
    ps = group_pods(kube, namespace, "db")
    assert [p.metadata.name for p in ps] == ["db-0"] and gated(ps[0])
    assert status(kube, namespace, "db").get("phase", "Pending") == "Pending"


def test_parallel_statefulset_is_released_without_an_owner_message(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("db", 3, namespace=namespace, timeout_seconds=None))
    client.AppsV1Api(kube).create_namespaced_stateful_set(namespace, statefulset("db", 3, "Parallel"))
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "db")) == 3, 30, what="3 Running")
    st = status(kube, namespace, "db")
    assert condition(st, "Released")["status"] == "True", st
    assert not [e for e in events_for(kube, namespace, "db") if e.reason == "OwnerCannotComplete"]


def job(name: str, parallelism: int, group: str | None = None, cpu: str = "3", **spec) -> dict:
    """A Job of ``parallelism`` pods (as many completions) labelled for ``group`` (default: its name)."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                     "template": template(group or name, cpu=cpu, restartPolicy="Never"), **spec}}


def test_job_whose_deadline_ran_out_while_gated_says_the_owner_gave_up(stack, kube, namespace, only_nodes):
    """activeDeadlineSeconds 8 while the gang of 4 x 3 CPU waits gated for room it never gets
    (one node of 10 CPU): the Job fails with DeadlineExceeded and deletes its pods; the PodGroup
    says its owner gave up and why, instead of waiting for members."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("train", 4, namespace=namespace, timeout_seconds=None))
    batch = client.BatchV1Api(kube)
    batch.create_namespaced_job(namespace, job("train", 4, activeDeadlineSeconds=8))
    cond = wait_for(lambda: (c := condition(status(kube, namespace, "train"), "Released")) and c["reason"] ==
                    "InsufficientCapacity" and "fits 3 of 4" in c["message"] and c, 20,
                    what="the gang waits for room, fits 3 of 4")
    assert "fits 3 of 4" in cond["message"], cond
    cond = released_says(kube, namespace, "train", f"Job {namespace}/train failed (DeadlineExceeded",
                         "activeDeadlineSeconds (8s) ran out while the gang waited gated", timeout=60)
    assert cond["reason"] == "WaitingForMembers" and cond["message"].startswith("0 of 4 members present"), cond
    owner_event(kube, namespace, "train", "Warning", f"Job {namespace}/train", "DeadlineExceeded")
    # the job controller's own word for it (FailureTarget first, Failed once its pods are gone)
    assert any(c.type in ("FailureTarget", "Failed") and c.status == "True" and c.reason == "DeadlineExceeded"
               for c in batch.read_namespaced_job("train", namespace).status.conditions or [])
    assert status(kube, namespace, "train").get("phase", "Pending") == "Pending"


@pytest.mark.parametrize("case", ["parallelism", "suspended"])
def test_job_that_cannot_make_min_member(stack, kube, namespace, only_nodes, case):
    """parallelism 2 for minMember 3 (never three pods at once: Warning); a Job suspended after
    its pods were created (it deletes them and keeps none until resumed: Normal)."""
    only_nodes(1, **NODE)
    batch = client.BatchV1Api(kube)
    create_pod_group(kube, example.pod_group("j", 3, namespace=namespace, timeout_seconds=None))
    if case == "parallelism":
        batch.create_namespaced_job(namespace, job("j", 2))
        released_says(kube, namespace, "j", "2 of 3 members present",
                      f"Job {namespace}/j runs at most 2 pods at once (parallelism 2",
                      "fix: raise its parallelism to minMember")
        owner_event(kube, namespace, "j", "Warning", "parallelism 2")
        assert len(group_pods(kube, namespace, "j")) == 2 and all(map(gated, group_pods(kube, namespace, "j")))
    else:
        # 3 x 5 CPU on 10 CPU: the gang waits gated for room; suspended, the job controller
        # deletes its pods and the group waits for members the Job will not create
        batch.create_namespaced_job(namespace, job("j", 3, cpu="5"))
        wait_for(lambda: (c := condition(status(kube, namespace, "j"), "Released")) and c["reason"] ==
                 "InsufficientCapacity", 20, what="the gang waits for room")
        batch.patch_namespaced_job("j", namespace, {"spec": {"suspend": True}})
        released_says(kube, namespace, "j", "0 of 3 members present",
                      f"Job {namespace}/j is suspended (spec.suspend)", "resume it (spec.suspend: false)", timeout=40)
        owner_event(kube, namespace, "j", "Normal", "is suspended")
    assert status(kube, namespace, "j").get("phase", "Pending") == "Pending"


@pytest.mark.parametrize("kind", ["ReplicaSet", "Deployment"])
def test_replicas_below_min_member_are_named(stack, kube, namespace, only_nodes, kind):
    """2 replicas for minMember 3; scaled to 3, the group is released and the message goes."""
    only_nodes(1, **NODE)
    apps = client.AppsV1Api(kube)
    create_pod_group(kube, example.pod_group("web", 3, namespace=namespace, timeout_seconds=None))
    body = example.replica_set("web", 2, namespace=namespace, group="web", cpu="1")
    if kind == "ReplicaSet":
        apps.create_namespaced_replica_set(namespace, body)
        said = ("ReplicaSet", "keeps 2 pods (spec.replicas 2)", "fix: scale the ReplicaSet to at least minMember")
    else:
        body = {**body, "kind": "Deployment"}
        apps.create_namespaced_deployment(namespace, body)
        said = ("ReplicaSet", "(of Deployment web) keeps 2 pods", "fix: scale Deployment web to at least minMember")
    cond = released_says(kube, namespace, "web", "2 of 3 members present", *said)
    assert cond["reason"] == "WaitingForMembers"
    owner_event(kube, namespace, "web", "Warning", "keeps 2 pods")
    assert all(map(gated, group_pods(kube, namespace, "web")))
    scale = apps.patch_namespaced_replica_set_scale if kind == "ReplicaSet" else apps.patch_namespaced_deployment_scale
    scale("web", namespace, {"spec": {"replicas": 3}})
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "web")) == 3, 30, what="3 Running")
    cond = condition(status(kube, namespace, "web"), "Released")
    assert cond["status"] == "True" and "keeps" not in cond["message"], cond


@pytest.mark.parametrize("propagation", ["Orphan", "Background"])
def test_deleted_owner_is_named_from_memory(stack, kube, namespace, only_nodes, propagation):
    """The Job is deleted: orphaned, its pods stay (garbage collection drops their owner
    reference, so they look bare); in the background, they go too. cogate remembers the
    Job its members had and says it was deleted."""
    only_nodes(1, **NODE)
    batch = client.BatchV1Api(kube)
    create_pod_group(kube, example.pod_group("j", 3, namespace=namespace, timeout_seconds=None))
    batch.create_namespaced_job(namespace, job("j", 2))
    released_says(kube, namespace, "j", f"Job {namespace}/j runs at most 2 pods at once")
    batch.delete_namespaced_job("j", namespace, propagation_policy=propagation)
    left = 2 if propagation == "Orphan" else 0
    cond = released_says(kube, namespace, "j", f"{left} of 3 members present",
                         f"Job {namespace}/j was deleted, so it creates no more members",
                         "fix: recreate the workload, or delete this PodGroup", timeout=40)
    assert cond["reason"] == "WaitingForMembers", cond
    owner_event(kube, namespace, "j", "Warning", "was deleted")
    assert len(group_pods(kube, namespace, "j", deleting=False)) == left
    assert all(map(gated, group_pods(kube, namespace, "j", deleting=False)))


def test_owner_metric_counts_reads(stack, kube, namespace, only_nodes):
    """The reads are few: one per owner while its members are unchanged (cache), not one per pass."""
    only_nodes(1, **NODE)
    from .test_robustness import metric

    before = metric(stack.metrics(), "cogate_controller_owner_reads_total", 'kind="ReplicaSet",result="ok"')
    create_pod_group(kube, example.pod_group("web", 3, namespace=namespace, timeout_seconds=None))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("web", 2, namespace=namespace, group="web", cpu="1"))
    released_says(kube, namespace, "web", "keeps 2 pods")
    after = metric(stack.metrics(), "cogate_controller_owner_reads_total", 'kind="ReplicaSet",result="ok"')
    assert 1 <= after - before <= 4, (before, after)  # members 1 then 2, a bind or two: a few reads at most
