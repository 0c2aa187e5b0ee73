"""The README example, end to end: real control plane, webhook and controller as processes.

One node (cpu 10, memory 8Gi, pods 110); ReplicaSet ``nginx`` of 6 pods of 3 CPU / 500Mi
in PodGroup ``nginx``. minMember 3 -> 3 Running, 3 Pending held gated (MembersWaiting);
minMember 4 -> all 6 gated, none ever bound, the PodGroup says "fits 3 of 4" (and `kubectl get pg`
shows REASON InsufficientCapacity); annotated cogate.dev/force-release=true, all 6 are ungated
unpinned and the 3 that fit run.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from kubernetes import client, watch

from cogate.localcluster import example

from .kube import (bound, create_pod_group, events_for, gated, get_pod_group, pods, running, webhook_requests,
                   scheduled_reason, wait_for)

pytestmark = pytest.mark.e2e

SELECTOR = "app=nginx"


class PodWatch(threading.Thread):
    """Records, on one clock, when pods appear and when their gates go; flags any binding."""

    def __init__(self, api: client.ApiClient, namespace: str):
        super().__init__(daemon=True)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.created: dict[str, float] = {}
        self.ungated: dict[str, float] = {}
        self.bound: set[str] = set()
        self.stop_flag = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        self.ready.set()
        while not self.stop_flag.is_set():
            try:
                self._stream()
            except Exception:  # noqa: BLE001 - the cluster may go away at teardown
                if self.stop_flag.wait(0.5):
                    return

    def _stream(self) -> None:
        w = watch.Watch()
        for ev in w.stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=2):
            pod = ev["raw_object"]
            name, t = pod["metadata"]["name"], time.monotonic()
            spec = pod.get("spec", {})
            if ev["type"] == "ADDED":
                self.created.setdefault(name, t)
            if not spec.get("schedulingGates"):
                self.ungated.setdefault(name, t)
            if spec.get("nodeName"):
                self.bound.add(name)
            if self.stop_flag.is_set():
                return

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(5)


@pytest.fixture
def pod_watch(kube, namespace):
    watcher = PodWatch(kube, namespace)
    watcher.start()
    watcher.ready.wait(5)
    yield watcher
    watcher.stop()


def _report(name: str, value: float) -> None:
    path = os.environ.get("COGATE_E2E_REPORT")
    line = json.dumps({"measure": name, "seconds": round(value, 3)})
    print(line)
    if path:
        with open(path, "a") as fh:
            fh.write(line + "\n")


def test_min_member_3_runs_three_and_holds_three_gated(stack, kube, namespace, only_nodes, pod_watch):
    only_nodes(1, kwok_taint=False, **example.NODE_SHAPE)
    watcher = pod_watch
    create_pod_group(kube, example.pod_group("nginx", 3, namespace=namespace, timeout_seconds=10))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("nginx", 6, namespace=namespace, group="nginx"))

    def settled():
        ps = pods(kube, namespace, SELECTOR)
        run = [p for p in ps if running(p)]
        pending = [p for p in ps if not bound(p) and p.status.phase == "Pending"]
        held = [p for p in pending if gated(p)]
        return len(ps) == 6 and len(run) == 3 and len(pending) == 3 and len(held) == 3 and (ps, run, pending)

    ps, run, pending = wait_for(settled, 10, what="3 Running and 3 Pending pods held gated")
    # The three without room wait gated for capacity (issue 9 item 5), whether the ReplicaSet
    # created them before or after the release; none is sent to kube-scheduler with nowhere to go.
    assert not any(scheduled_reason(p) == "Unschedulable" for p in pending)
    wait_for(lambda: len(watcher.ungated) == 3, 5, what="watch saw the 3 released gates removed")
    quorum_created = sorted(watcher.created.values())[2]
    released = max(watcher.ungated.values())
    _report("minMember-th member created -> its gates removed", released - quorum_created)

    # the ReplicaSet may create the last pods after the release: the condition may name fewer first
    def members_waiting():
        conds = {c["type"]: c for c in get_pod_group(kube, namespace, "nginx").get("status", {}).get("conditions", [])}
        c = conds.get("MembersWaiting")
        return c and c["status"] == "True" and c["reason"] == "WaitingForCapacity" \
            and "wait gated for capacity: cpu short by" in c["message"] \
            and all(p.metadata.name in c["message"] for p in pending) and c

    cond = wait_for(members_waiting, 10, what="MembersWaiting=True WaitingForCapacity naming the 3 pending pods")
    assert cond["reason"] == "WaitingForCapacity"
    assert "wait gated for capacity: cpu short by" in cond["message"], cond
    # the message names exactly the 3 waiting members (no "and N more": 3 names fit in a message)
    listed = cond["message"].split("3 members (", 1)[1].split(") wait gated for capacity", 1)[0]
    assert sorted(listed.split(", ")) == sorted(p.metadata.name for p in pending), cond

    def pg_running():
        pg = get_pod_group(kube, namespace, "nginx")
        st = pg.get("status", {})
        return st.get("phase") == "Running" and st.get("running") == 3 and pg

    pg = wait_for(pg_running, 10, what="PodGroup phase Running, running 3")
    assert pg["status"].get("scheduleStartTime")
    out = stack.cluster.kubectl("get", "pg", "nginx", "-n", namespace).stdout
    assert "Running" in out and "nginx" in out
    # the recorder writes events after the status
    reasons = wait_for(lambda: "Released" in (r := {e.reason for e in events_for(kube, namespace, "nginx")}) and r,
                       10, what="Released event")
    assert "Released" in reasons


def test_min_member_4_keeps_all_six_gated(stack, kube, namespace, only_nodes, pod_watch):
    only_nodes(1, kwok_taint=False, **example.NODE_SHAPE)
    watcher = pod_watch
    create_pod_group(kube, example.pod_group("nginx", 4, namespace=namespace, timeout_seconds=10))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("nginx", 6, namespace=namespace, group="nginx"))
    wait_for(lambda: len(pods(kube, namespace, SELECTOR)) == 6, 10, what="6 pods created")

    def says_why():
        st = get_pod_group(kube, namespace, "nginx").get("status", {})
        for cond in st.get("conditions", []):
            if cond.get("reason") == "InsufficientCapacity" and "fits 3 of 4" in cond.get("message", ""):
                return cond
        return None

    cond = wait_for(says_why, 10, what="InsufficientCapacity condition saying fits 3 of 4")
    assert "fits 3 of 4" in cond["message"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ps = pods(kube, namespace, SELECTOR)
        assert len(ps) == 6
        for p in ps:
            assert gated(p) and not bound(p), f"{p.metadata.name} left the gate"
            assert p.status.phase == "Pending"
            assert scheduled_reason(p) == "SchedulingGated"
        time.sleep(1)
    assert watcher.bound == set(), f"pods were bound: {watcher.bound}"
    st = get_pod_group(kube, namespace, "nginx")["status"]
    assert st.get("phase") == "Pending"
    assert not st.get("scheduleStartTime")
    reasons = {e.reason for e in events_for(kube, namespace, "nginx")}
    assert "InsufficientCapacity" in reasons and "Released" not in reasons


def test_reason_column_then_force_release_by_annotation(stack, kube, namespace, only_nodes):
    """minMember 4: `kubectl get pg` shows why it waits (REASON, and MESSAGE with -o wide); the
    annotation cogate.dev/force-release=true releases all 6 unpinned in the controller's next pass,
    kube-scheduler binds the 3 that fit, the event ForceReleased names who set it."""
    only_nodes(1, kwok_taint=False, **example.NODE_SHAPE)
    create_pod_group(kube, example.pod_group("nginx", 4, namespace=namespace, timeout_seconds=10))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("nginx", 6, namespace=namespace, group="nginx"))

    def reason_column():
        out = stack.cluster.kubectl("get", "pg", "nginx", "-n", namespace).stdout.splitlines()
        row = dict(zip(out[0].split(), out[1].split()))
        return row.get("REASON") == "InsufficientCapacity" and row

    wait_for(reason_column, 10, what="kubectl get pg: REASON InsufficientCapacity")
    wide = stack.cluster.kubectl("get", "pg", "nginx", "-n", namespace, "-o", "wide").stdout
    assert "MESSAGE" in wide.splitlines()[0] and "fits 3 of 4" in wide, wide
    assert all(gated(p) for p in pods(kube, namespace, SELECTOR))

    t0 = time.monotonic()
    stack.cluster.kubectl("annotate", "pg", "nginx", "-n", namespace, "cogate.dev/force-release=true")
    wait_for(lambda: (ps := pods(kube, namespace, SELECTOR)) and len(ps) == 6 and not any(gated(p) for p in ps),
             10, what="all 6 ungated after the annotation")
    _report("force-release annotation -> all 6 ungated", time.monotonic() - t0)
    for p in pods(kube, namespace, SELECTOR):
        assert not (p.spec.affinity and p.spec.affinity.node_affinity), f"{p.metadata.name} pinned"
    wait_for(lambda: sum(running(p) for p in pods(kube, namespace, SELECTOR)) == 3, 15, what="3 Running")

    def force_released():
        row = stack.cluster.kubectl("get", "pg", "nginx", "-n", namespace).stdout.splitlines()
        return "ForceReleased" in row[1].split() and row

    wait_for(force_released, 10, what="kubectl get pg: REASON ForceReleased")
    event = wait_for(lambda: next((e for e in events_for(kube, namespace, "nginx") if e.reason == "ForceReleased"),
                                  None), 10, what="ForceReleased event")
    assert "6 gated members" in event.message and "kubectl-annotate" in event.message, event.message


def test_pods_before_their_pod_group_wait_then_its_creation_releases_them(stack, kube, namespace, only_nodes):
    only_nodes(1, kwok_taint=False, **example.NODE_SHAPE)
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("nginx", 3, namespace=namespace, group="nginx"))
    wait_for(lambda: len(pods(kube, namespace, SELECTOR)) == 3, 10, what="3 pods created")
    time.sleep(3)
    ps = pods(kube, namespace, SELECTOR)
    assert all(gated(p) and not bound(p) for p in ps), "no PodGroup yet: members stay gated"
    created = time.monotonic()
    create_pod_group(kube, example.pod_group("nginx", 3, namespace=namespace))
    # its creation (the watch event) triggers the release, well before the next 30 s resync could;
    # how fast is a benchmark's question (bench/), reported here only
    wait_for(lambda: not any(gated(p) for p in pods(kube, namespace, SELECTOR)), 10, interval=0.05,
             what="all gates removed by the PodGroup's creation, before the 30 s resync")
    _report("PodGroup created -> all gates removed", time.monotonic() - created)
    wait_for(lambda: sum(running(p) for p in pods(kube, namespace, SELECTOR)) == 3, 10, what="3 Running")


def test_unlabelled_pod_is_never_touched(stack, kube, namespace, only_nodes):
    only_nodes(1, kwok_taint=False, **example.NODE_SHAPE)
    before = webhook_requests(stack)
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "plain", "labels": {"app": "plain"}},
        "spec": example.pod_template(None, cpu="1")["spec"],
    }
    created = client.CoreV1Api(kube).create_namespaced_pod(namespace, pod)
    assert not created.spec.scheduling_gates
    wait_for(lambda: running(client.CoreV1Api(kube).read_namespaced_pod("plain", namespace)), 10,
             what="unlabelled pod Running")
    after = webhook_requests(stack)
    # Only the late-label entry (no label objectSelector: a later mutator may still add the label)
    # sees it, once, and allows it unchanged.
    delta = {k: v - before.get(k, 0) for k, v in after.items()}
    assert {k: v for k, v in delta.items() if v} == {"ignored": 1}, delta

