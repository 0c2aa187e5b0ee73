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

from cogate.api import GROUP, PLURAL, POD_GROUP_LABEL, VERSION
from cogate.localcluster import example

from .kube import create_pod_group, events_for, gated, get_pod_group, pods, running, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)


def group_pods(kube, namespace: str, group: str) -> list[client.V1Pod]:
    return [p for p in pods(kube, namespace, f"{POD_GROUP_LABEL}={group}") if not p.metadata.deletion_timestamp]


def status(kube, namespace: str, name: str) -> dict[str, Any]:
    return get_pod_group(kube, namespace, name).get("status") or {}


def condition(st: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in st.get("conditions") or [] if c.get("type") == type_), None)


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
        group_pods(kube, namespace, "g")), 15, what="both members Running")
    bound_at = time.monotonic()
    cond = wait_for(lambda: condition(status(kube, namespace, "g"), "TimedOut"), 5, what="TimedOut condition")
    assert (cond["status"], cond["reason"]) == ("False", "MembersBound"), cond

    time.sleep(max(0.0, bound_at + 10 - time.monotonic()))
    victim, survivor = ps[0], ps[1]
    client.CoreV1Api(kube).delete_namespaced_pod(victim.metadata.name, namespace, grace_period_seconds=0)

    deadline = time.monotonic() + 8  # well past the 5 s timeout, counted from the release
    while time.monotonic() < deadline:
        st = status(kube, namespace, "g")
        cond = condition(st, "TimedOut")
        assert cond is not None and cond["status"] == "False", f"timed out after the quorum was bound: {cond}"
        got = client.CoreV1Api(kube).read_namespaced_pod(survivor.metadata.name, namespace)
        assert got.metadata.uid == survivor.metadata.uid and not got.metadata.deletion_timestamp, \
            "the healthy member was evicted"
        time.sleep(0.3)
    assert "Timeout" not in {e.reason for e in events_for(kube, namespace, "g")}
    # The ReplicaSet's replacement joins the standing release and runs.
    wait_for(lambda: (lambda ps: len(ps) == 2 and all(running(p) for p in ps))(group_pods(kube, namespace, "g")),
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

    def failed_create():
        return [e.message for e in events_for(kube, namespace, "bad", kind="ReplicaSet") if e.reason == "FailedCreate"]

    messages = wait_for(failed_create, 15, what="FailedCreate events on the ReplicaSet")
    assert any("cannot name a PodGroup" in m and "DNS-1123 subdomain" in m and "Train_Job.v1" in m
               for m in messages), messages
    assert not pods(kube, namespace, "app=bad"), "no pod of the ReplicaSet may exist"
    # A direct create fails with the same reason, as a 422 naming the label.
    with pytest.raises(client.ApiException) as err:
        client.CoreV1Api(kube).create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod", **{**example.pod_template("Train_Job.v1", cpu="100m"),
                                                   "metadata": {"name": "direct",
                                                                "labels": {POD_GROUP_LABEL: "Train_Job.v1"}}}})
    assert err.value.status == 422 and "cannot name a PodGroup" in err.value.body
