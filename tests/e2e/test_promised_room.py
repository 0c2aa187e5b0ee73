"""Room promised to others is never planned as free, and replicas sharing a PodGroup go whole
(issue 21, items 2a, 2c and 11), end to end on the local control plane.

- 2a: kube-scheduler stopped (SIGSTOP) long past a short ``--reservation-ttl``: the released
  gang's members stay pinned and unbound, and a second gang that fits only in their room is
  never released, also across a controller restart; once kube-scheduler runs again the first
  gang binds, and its room frees only when its pods go.
- 2c: a real nomination: a high-priority pod preempts a low-priority one held Terminating by a
  finalizer, so kube-scheduler keeps ``status.nominatedNodeName`` on the preemptor. A gang of
  lower priority that fits the node's free room without the nomination stays gated; a gang of
  higher priority is released and kube-scheduler binds it there (it ignores lower nominations
  too).
- 11: pods labelled as the LeaderWorkerSet controller labels them, leaders created before their
  workers: a new replica of a released PodGroup is released whole, never its leader alone.

Node shape: one node of 10 CPU unless said otherwise.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.localcluster import example

from .kube import (bound, condition, controller_flags, create_pod_group, events_for, gated, group_pods,
                   hold_gated, priority_classes, running, scheduler_paused, status, wait_for)

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)
TTL = 2.0


def pod(name: str, group: str | None, *, cpu: str, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, priority_class: str | None = None,
        finalizers: list[str] | None = None) -> dict[str, Any]:
    tpl = example.pod_template(group, cpu=cpu, memory="100Mi", app=group or "plain")
    tpl["metadata"]["name"] = name
    tpl["metadata"]["labels"].update(labels or {})
    if annotations:
        tpl["metadata"]["annotations"] = annotations
    if finalizers:
        tpl["metadata"]["finalizers"] = finalizers
    if priority_class:
        tpl["spec"]["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


def create_gang(kube, namespace: str, name: str, size: int, cpu: str, **kw) -> list[str]:
    create_pod_group(kube, example.pod_group(name, size, namespace=namespace, timeout_seconds=None))
    core = client.CoreV1Api(kube)
    names = [f"{name}-{i}" for i in range(size)]
    for n in names:
        core.create_namespaced_pod(namespace, pod(n, name, cpu=cpu, **kw))
    return names


def released_reason(kube, namespace: str, name: str) -> dict[str, Any] | None:
    return condition(status(kube, namespace, name), "Released")


# ----------------------------------------------------------------- 2a: pinned, unbound, past the TTL


@pytest.mark.parametrize("first,second,restart", [
    ((3, "3"), (1, "3"), False),   # 9 of 10 CPU pinned; b needs 3
    ((2, "4"), (2, "2"), False),   # 8 of 10; b needs 2 x 2
    ((3, "3"), (2, "1"), True),    # across a controller restart: restored reservations hold too
])
def test_pinned_unbound_gang_keeps_its_room_while_kube_scheduler_is_stopped_past_the_ttl(
        stack, kube, namespace, only_nodes, first, second, restart):
    only_nodes(1, **NODE)
    (a_size, a_cpu), (b_size, b_cpu) = first, second
    with controller_flags(stack, "--reservation-ttl", str(TTL)):
        with scheduler_paused(stack):
            create_gang(kube, namespace, "a", a_size, a_cpu)
            wait_for(lambda: (ps := group_pods(kube, namespace, "a")) and len(ps) == a_size
                     and not any(gated(p) for p in ps), 15, what="gang a released")
            a_pods = group_pods(kube, namespace, "a")
            assert not any(bound(p) for p in a_pods)
            for p in a_pods:  # pinned to the one node
                terms = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
                assert terms.node_selector_terms[0].match_fields[0].key == "metadata.name"
            st = status(kube, namespace, "a")
            assert st["phase"] == "Scheduling" and st.get("scheduled", 0) == 0
            time.sleep(3 * TTL)  # every reservation's TTL has passed; the members are still pinned, unbound
            if restart:
                stack.restart_controller()
            create_gang(kube, namespace, "b", b_size, b_cpu)
            wait_for(lambda: (c := released_reason(kube, namespace, "b")) and c["reason"] == "InsufficientCapacity",
                     15, what="b judged")
            hold_gated(kube, namespace, "b", 2 * TTL, b_size)
            c = released_reason(kube, namespace, "b")
            assert c["status"] == "False" and c["message"].startswith("fits ") and "cpu short by" in c["message"], c
            st = status(kube, namespace, "b")
            assert st.get("phase") == "Pending" and not st.get("scheduleStartTime")
            assert not any(bound(p) for p in group_pods(kube, namespace, "a"))
        # kube-scheduler runs again: gang a binds where it was pinned, b still has no room
        wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "a")) == a_size, 20,
                 what="gang a Running")
        wait_for(lambda: status(kube, namespace, "a").get("phase") == "Running", 10, what="a phase Running")
        hold_gated(kube, namespace, "b", 1.5, b_size)
        assert released_reason(kube, namespace, "b")["reason"] == "InsufficientCapacity"
        core = client.CoreV1Api(kube)
        for p in group_pods(kube, namespace, "a"):
            core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
        wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "b")) == b_size, 20,
                 what="gang b released and Running once a's pods are gone")
        c = released_reason(kube, namespace, "b")
        assert c["status"] == "True", c


# ----------------------------------------------------------------- 2c: a real nomination


FINALIZER = "example.com/hold"


def nominated_metric(stack) -> float:
    for line in stack.metrics().splitlines():
        if line.startswith("cogate_controller_nominated_pods "):
            return float(line.split()[1])
    return 0.0


@pytest.mark.parametrize("gang_priority,gang,released", [
    (None, (2, "1"), False),      # priority 0 < the preemptor's: its nomination counts
    ("same", (1, "2"), False),    # equal priority: counts
    ("higher", (2, "1"), True),   # higher: kube-scheduler ignores the nomination for it, and so does cogate
])
def test_room_nominated_for_a_preemptor_is_not_planned_as_free_for_lower_priorities(
        stack, kube, namespace, only_nodes, gang_priority, gang, released):
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    with priority_classes(kube, preemptor=1000, higher=2000) as pcs:
        # a low-priority pod takes 8 of 10 CPU; a finalizer keeps it Terminating once preempted
        core.create_namespaced_pod(namespace, pod("victim", None, cpu="8", finalizers=[FINALIZER]))
        wait_for(lambda: running(core.read_namespaced_pod("victim", namespace)), 20, what="victim Running")
        try:
            core.create_namespaced_pod(namespace, pod("preemptor", None, cpu="8", priority_class=pcs["preemptor"]))
            nominated = wait_for(lambda: core.read_namespaced_pod("preemptor", namespace).status.nominated_node_name,
                                 30, what="preemptor nominated")
            # kube-scheduler may write the nomination before it deletes the victim (async preemption)
            victim = wait_for(lambda: (v := core.read_namespaced_pod("victim", namespace)).metadata.deletion_timestamp
                              and v, 15, what="victim preempted (Terminating, held by its finalizer)")
            assert victim.spec.node_name == nominated
            wait_for(lambda: nominated_metric(stack) >= 1, 10, what="cogate_controller_nominated_pods counts it")
            size, cpu = gang
            pc = {"same": pcs["preemptor"], "higher": pcs["higher"]}.get(gang_priority or "")
            create_gang(kube, namespace, "g", size, cpu, priority_class=pc)
            if released:
                wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == size, 20,
                         what="higher-priority gang released and bound beside the nomination")
                assert all(p.spec.node_name == nominated for p in group_pods(kube, namespace, "g"))
                assert released_reason(kube, namespace, "g")["status"] == "True"
            else:
                wait_for(lambda: (c := released_reason(kube, namespace, "g")) and c["reason"] == "InsufficientCapacity",
                         15, what="gang judged")
                hold_gated(kube, namespace, "g", 3, size)
                c = released_reason(kube, namespace, "g")
                assert c["status"] == "False" and "cpu short by" in c["message"], c
                assert core.read_namespaced_pod("preemptor", namespace).status.nominated_node_name == nominated
        finally:
            with contextlib.suppress(client.ApiException):
                core.patch_namespaced_pod("victim", namespace, {"metadata": {"finalizers": None}})
        wait_for(lambda: running(core.read_namespaced_pod("preemptor", namespace)), 30,
                 what="preemptor bound once its victim is gone")
        if not released:  # 8 of 10 CPU bound to the preemptor now: a gang of 2 CPU fits
            wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == gang[0], 20,
                     what="gang released once the nomination turned into a bound pod with room left")
        core.delete_namespaced_pod("preemptor", namespace, grace_period_seconds=0)


# ----------------------------------------------------------------- 11: replicas sharing one PodGroup

LWS = "llm"


def lws_pod(replica: int, worker: int, size: int, cpu: str) -> dict[str, Any]:
    """A pod as the LeaderWorkerSet controller labels and annotates it (leader: worker-index 0)."""
    name = f"{LWS}-{replica}" if worker == 0 else f"{LWS}-{replica}-{worker}"
    return pod(name, LWS, cpu=cpu, labels={
        "leaderworkerset.sigs.k8s.io/name": LWS,
        "leaderworkerset.sigs.k8s.io/group-index": str(replica),
        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
    }, annotations={"leaderworkerset.sigs.k8s.io/size": str(size)})


def replica_pods(kube, namespace: str, replica: int) -> list[client.V1Pod]:
    return [p for p in group_pods(kube, namespace, LWS)
            if (p.metadata.labels or {}).get("leaderworkerset.sigs.k8s.io/group-index") == str(replica)]


@pytest.mark.parametrize("size,new_replicas", [(2, 1), (3, 2), (4, 1)])
def test_a_new_lws_replica_is_released_whole_never_its_leader_alone(stack, kube, namespace, only_nodes,
                                                                    size, new_replicas):
    """One PodGroup for every replica (minMember = one replica). Scale-out: each new replica's leader
    is created first and waits gated although there is room for it; its workers one by one; the
    replica is released once all of them exist, together."""
    only_nodes(1, kwok_taint=False, cpu=str(size * (1 + new_replicas)), memory="8Gi", pods=110)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group(LWS, size, namespace=namespace, timeout_seconds=None))
    for w in range(size):
        core.create_namespaced_pod(namespace, lws_pod(0, w, size, "1"))
    wait_for(lambda: sum(running(p) for p in replica_pods(kube, namespace, 0)) == size, 20, what="replica 0 Running")
    for r in range(1, 1 + new_replicas):
        core.create_namespaced_pod(namespace, lws_pod(r, 0, size, "1"))
        for w in range(1, size):
            time.sleep(1.0)  # the LWS controller creates the workers after the leader
            ps = replica_pods(kube, namespace, r)
            assert len(ps) == w and all(gated(p) and not bound(p) for p in ps), \
                f"replica {r} half-released with {w} of {size} members: {[p.metadata.name for p in ps]}"
            # numbers-only message changes are written at most once a second: wait for this one
            waiting = wait_for(lambda: (c := condition(status(kube, namespace, LWS), "MembersWaiting"))
                               and c["status"] == "True"
                               and f"LeaderWorkerSet {LWS} group {r}: {w} of {size} members present" in c["message"]
                               and f"members of {r + 1} replicas share this PodGroup" in c["message"]
                               and c, 5, what=f"MembersWaiting names replica {r} with {w} of {size}, {r + 1} replicas")
            assert f"members of {r + 1} replicas share this PodGroup" in waiting["message"], waiting
            assert all(gated(p) and not bound(p) for p in replica_pods(kube, namespace, r))
            core.create_namespaced_pod(namespace, lws_pod(r, w, size, "1"))
        wait_for(lambda: sum(running(p) for p in replica_pods(kube, namespace, r)) == size, 20,
                 what=f"replica {r} released whole and Running")
    wait_for(lambda: (c := condition(status(kube, namespace, LWS), "MembersWaiting")) and c["status"] == "False",
             10, what="MembersWaiting False once no replica waits")
    # the recorder writes events after the status
    warned = wait_for(lambda: (w := [e for e in events_for(kube, namespace, LWS)
                                     if e.reason == "ReplicasSharePodGroup"])
                      and w[0].type == "Warning" and "give each replica its own PodGroup" in w[0].message and w, 10,
                      what="Warning ReplicasSharePodGroup event")
    assert warned and warned[0].type == "Warning", [(e.type, e.reason) for e in events_for(kube, namespace, LWS)]
    assert "give each replica its own PodGroup" in warned[0].message, warned[0].message
    total = size * (1 + new_replicas)
    wait_for(lambda: (st := status(kube, namespace, LWS)).get("phase") == "Running" and st.get("running") == total,
             10, what=f"status: phase Running, running {total}")


@pytest.mark.parametrize("size,room", [(3, 2), (4, 1)])
def test_a_new_lws_replica_without_room_for_all_of_it_waits_whole(stack, kube, namespace, only_nodes, size, room):
    """Room for ``room`` of the new replica's ``size`` members: none is released; once a filler
    pod goes, all go together."""
    only_nodes(1, kwok_taint=False, cpu=str(2 * size), memory="8Gi", pods=110)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group(LWS, size, namespace=namespace, timeout_seconds=None))
    for w in range(size):
        core.create_namespaced_pod(namespace, lws_pod(0, w, size, "1"))
    wait_for(lambda: sum(running(p) for p in replica_pods(kube, namespace, 0)) == size, 20, what="replica 0 Running")
    core.create_namespaced_pod(namespace, pod("filler", None, cpu=str(size - room)))
    wait_for(lambda: running(core.read_namespaced_pod("filler", namespace)), 20, what="filler Running")
    for w in range(size):
        core.create_namespaced_pod(namespace, lws_pod(1, w, size, "1"))
    fit = f"LeaderWorkerSet {LWS} group 1: {room} of {size} new members fit"
    wait_for(lambda: (c := condition(status(kube, namespace, LWS), "MembersWaiting")) and c["status"] == "True"
             and "released whole or not at all" in c["message"] and fit in c["message"], 15,
             what=f"replica 1 waits whole, {room} of {size} fit")
    hold_gated_replica = time.monotonic() + 3
    while time.monotonic() < hold_gated_replica:
        ps = replica_pods(kube, namespace, 1)
        assert len(ps) == size and all(gated(p) and not bound(p) for p in ps), [p.metadata.name for p in ps]
        time.sleep(0.3)
    msg = condition(status(kube, namespace, LWS), "MembersWaiting")["message"]
    assert fit in msg, msg
    core.delete_namespaced_pod("filler", namespace, grace_period_seconds=0)
    wait_for(lambda: sum(running(p) for p in replica_pods(kube, namespace, 1)) == size, 20,
             what="replica 1 released whole once the filler is gone")
    wait_for(lambda: status(kube, namespace, LWS).get("running") == 2 * size, 10, what=f"status: running {2 * size}")
    assert POD_GROUP_LABEL in replica_pods(kube, namespace, 1)[0].metadata.labels
