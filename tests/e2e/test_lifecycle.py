"""A PodGroup's life after release, end to end: timeouts, names that can never match, status
that must not forget (issue 9 items 4, 8 and 9).

Each test runs against the session ``stack`` (webhook + controller as real processes on the
local control plane) and describes its cluster with ``only_nodes``. Node shape unless said
otherwise: cpu 10, memory 8Gi.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.localcluster import example

from .kube import condition, create_pod_group, events_for, gated, group_pods, pods, running, status, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)


@pytest.fixture
def evicting_controller(stack):
    """The session's controller restarted with ``--evict-on-timeout``; restored afterwards."""
    saved = stack.controller_args
    stack.restart_controller("--evict-on-timeout")
    try:
        yield stack
    finally:
        stack.controller_args = saved
        stack.restart_controller()


# ----------------------------------------------------------------- item 4: timeout window


def test_member_lost_after_the_quorum_bound_is_no_timeout_and_evicts_nothing(evicting_controller, kube, namespace,
                                                                             only_nodes):
    """minMember 2, scheduleTimeoutSeconds 5, both members bound within a second; one is deleted
    10 s later. The timeout judged only the window until the quorum was first bound: no
    TimedOut=True, no Timeout event, and (with --evict-on-timeout) the healthy member stays."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=5))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("g", 2, namespace=namespace, group="g", cpu="1"))
    ps = wait_for(lambda: (lambda ps: len(ps) == 2 and all(running(p) for p in ps) and ps)(
        group_pods(kube, namespace, "g", deleting=False)), 15, what="both members Running")
    bound_at = time.monotonic()
    time.sleep(max(0.0, bound_at + 10 - time.monotonic()))
    victim, survivor = ps[0], ps[1]
    client.CoreV1Api(kube).delete_namespaced_pod(victim.metadata.name, namespace, grace_period_seconds=0)

    deadline = time.monotonic() + 8  # well past the 5 s timeout, counted from the release
    while time.monotonic() < deadline:
        st = status(kube, namespace, "g")
        cond = condition(st, "TimedOut")
        assert cond is None or cond["status"] == "False", f"timed out after the quorum was bound: {cond}"
        try:
            got = client.CoreV1Api(kube).read_namespaced_pod(survivor.metadata.name, namespace)
        except client.ApiException as exc:
            pytest.fail(f"the healthy member was evicted (HTTP {exc.status} reading it)")
        assert got.metadata.uid == survivor.metadata.uid and not got.metadata.deletion_timestamp, \
            "the healthy member was evicted"
        time.sleep(0.3)
    assert "Timeout" not in {e.reason for e in events_for(kube, namespace, "g")}
    cond = condition(status(kube, namespace, "g"), "TimedOut")  # the closed window is recorded
    assert (cond["status"], cond["reason"]) == ("False", "MembersBound"), cond
    # The ReplicaSet's replacement joins the standing release and runs.
    wait_for(lambda: (lambda ps: len(ps) == 2 and all(running(p) for p in ps))(group_pods(kube, namespace, "g", deleting=False)),
             15, what="replacement Running")


# ----------------------------------------------------------------- item 8: names that can never match


def test_label_value_that_cannot_name_a_pod_group_is_refused_and_the_owner_says_why(stack, kube, namespace,
                                                                                    only_nodes):
    """A ReplicaSet whose pods carry ``scheduling.x-k8s.io/pod-group: Train_Job.v1`` (a valid
    label value, never a PodGroup name): no pod is created (none waits gated for ever) and the
    ReplicaSet's FailedCreate events say why."""
    only_nodes(1, **NODE)
    rs = example.replica_set("bad", 2, namespace=namespace, group="Train_Job.v1", cpu="100m")
    client.AppsV1Api(kube).create_namespaced_replica_set(namespace, rs)

    def says(m: str) -> bool:
        return "cannot name a PodGroup" in m and "DNS-1123 subdomain" in m and "Train_Job.v1" in m

    def failed_create():
        ms = [e.message for e in events_for(kube, namespace, "bad", kind="ReplicaSet") if e.reason == "FailedCreate"]
        return any(says(m) for m in ms) and ms

    messages = wait_for(failed_create, 15, what="FailedCreate events on the ReplicaSet saying why")
    assert any(says(m) for m in messages), messages
    assert not pods(kube, namespace, "app=bad"), "no pod of the ReplicaSet may exist"
    # A direct create fails with the same reason, as a 422 naming the label.
    with pytest.raises(client.ApiException) as err:
        client.CoreV1Api(kube).create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod", **{**example.pod_template("Train_Job.v1", cpu="100m"),
                                                   "metadata": {"name": "direct",
                                                                "labels": {POD_GROUP_LABEL: "Train_Job.v1"}}}})
    assert err.value.status == 422 and "cannot name a PodGroup" in err.value.body


# ----------------------------------------------------------------- item 9: status that does not forget


def _bare(name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    tpl = example.pod_template(group, cpu=cpu, app=group)
    tpl["metadata"]["name"] = name
    tpl["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


def _succeed(kube, namespace: str, name: str) -> None:
    """End a bare Running pod as Succeeded (kwok's pod-complete stage only ends Job pods)."""
    client.CoreV1Api(kube).patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Succeeded"}})


def test_finished_group_keeps_counts_and_phase_when_members_are_deleted_and_one_joins(stack, kube, namespace,
                                                                                     only_nodes):
    """Two bare members succeed and are deleted; a third joins. Before: succeeded dropped to 0 and
    the phase went Finished -> Scheduling. Now: Finished with succeeded 2 stays; the newcomer waits
    gated for a new gang (minMember 2) and the Released condition says so."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("job", 2, namespace=namespace, timeout_seconds=None))
    for i in range(2):
        core.create_namespaced_pod(namespace, _bare(f"job-{i}", "job"))
    wait_for(lambda: (lambda ps: len(ps) == 2 and all(running(p) for p in ps))(group_pods(kube, namespace, "job", deleting=False)),
             15, what="both members Running")
    for i in range(2):
        _succeed(kube, namespace, f"job-{i}")
    st = wait_for(lambda: (s := status(kube, namespace, "job")).get("phase") == "Finished" and s, 30,
                  what="group Finished")
    assert st["succeeded"] == 2
    for i in range(2):
        core.delete_namespaced_pod(f"job-{i}", namespace, grace_period_seconds=0)
    wait_for(lambda: not group_pods(kube, namespace, "job", deleting=False), 10, what="members deleted")
    core.create_namespaced_pod(namespace, _bare("job-late", "job"))
    cond = wait_for(lambda: (c := condition(status(kube, namespace, "job"), "Released")) and c["status"] == "False"
                    and c["reason"] == "WaitingForMembers" and c, 10,
                    what="Released=False WaitingForMembers for the newcomer")
    assert cond["reason"] == "WaitingForMembers", cond
    time.sleep(1)  # several passes
    st = status(kube, namespace, "job")
    assert (st["phase"], st["succeeded"]) == ("Finished", 2), st
    late = core.read_namespaced_pod("job-late", namespace)
    assert gated(late) and not late.spec.node_name, "a lone newcomer of a finished gang waits for a new gang"
    # A second member completes the new gang: released, and the phase is decided afresh.
    core.create_namespaced_pod(namespace, _bare("job-late-2", "job"))
    wait_for(lambda: (lambda ps: len(ps) == 2 and all(running(p) for p in ps))(group_pods(kube, namespace, "job", deleting=False)),
             15, what="the new gang Running")
    wait_for(lambda: status(kube, namespace, "job").get("phase") == "Running", 10, what="phase Running")


def test_group_waiting_for_members_the_quota_refuses_says_so(stack, kube, namespace, only_nodes):
    """requests.cpu quota 2 in the namespace; minMember 3, a ReplicaSet of 3 x 1 CPU: the
    third member is refused at creation (FailedCreate), and the PodGroup's waiting message
    names the quota instead of only counting members."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    core.create_namespaced_resource_quota(namespace, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
        "spec": {"hard": {"requests.cpu": "2"}}})
    wait_for(lambda: (core.read_namespaced_resource_quota("compute", namespace).status.hard or {}).get("requests.cpu"),
             10, what="quota status")
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("g", 3, namespace=namespace, group="g", cpu="1"))
    wait_for(lambda: any(e.reason == "FailedCreate" and "exceeded quota" in e.message
                         for e in events_for(kube, namespace, "g", kind="ReplicaSet")), 15,
             what="the ReplicaSet's third pod refused by the quota")
    # the controller's view of the quota's usage may follow the second member's admission
    quota = "ResourceQuota compute: requests.cpu 2 of 2 used, a member requests 1"
    cond = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Released")) and quota in
                    c.get("message", "") and c["reason"] == "WaitingForMembers" and c, 15,
                    what="waiting message naming the quota, 2 of 2 used")
    assert cond["reason"] == "WaitingForMembers", cond
    assert quota in cond["message"], cond
    assert all(gated(p) for p in group_pods(kube, namespace, "g", deleting=False)), "gated members hold quota, not node room"
    # The event follows the new situation (a quota, not only a count) at once.
    wait_for(lambda: any("ResourceQuota compute" in e.message for e in events_for(kube, namespace, "g")
                         if e.reason == "WaitingForMembers"), 15, what="a WaitingForMembers event naming the quota")


def test_waiting_message_names_a_terminating_pod_on_the_node_the_group_needs(stack, kube, namespace, only_nodes):
    """A pod held in Terminating (a finalizer) still holds its node's room, for kube-scheduler
    and the planner: the waiting message names it; the group is released once it is gone."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    old = _bare("old-web", "unused", cpu="6")
    del old["metadata"]["labels"][POD_GROUP_LABEL]
    old["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod(namespace, old)
    wait_for(lambda: running(core.read_namespaced_pod("old-web", namespace)), 15, what="old-web Running")
    core.delete_namespaced_pod("old-web", namespace, grace_period_seconds=0)
    wait_for(lambda: core.read_namespaced_pod("old-web", namespace).metadata.deletion_timestamp, 5,
             what="old-web Terminating")
    try:
        create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=None))
        for i in range(2):
            core.create_namespaced_pod(namespace, _bare(f"g-{i}", "g", cpu="3"))
        terminating = "1 pod terminating on eligible nodes (old-web) still holds room until gone"
        cond = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Released")) and terminating in
                        c.get("message", "") and c["reason"] == "InsufficientCapacity" and c, 10,
                        what="InsufficientCapacity naming the terminating pod")
        assert cond["reason"] == "InsufficientCapacity", cond
        assert terminating in cond["message"], cond
    finally:
        core.patch_namespaced_pod("old-web", namespace, {"metadata": {"finalizers": None}})
    wait_for(lambda: (lambda ps: len(ps) == 2 and all(running(p) for p in ps))(group_pods(kube, namespace, "g", deleting=False)),
             20, what="group released once the terminating pod is gone")
