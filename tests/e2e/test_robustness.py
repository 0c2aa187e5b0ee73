"""Trying to break cogate end to end: restarts, races, odd objects, leader failover.

Each test runs against the session ``stack`` (webhook + controller as real processes on
the local control plane) and describes its cluster with ``only_nodes``. Node shape
unless said otherwise: cpu 10, memory 8Gi (fits three members of 3 CPU).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cogate.api import DEFAULT_GATE_NAME, GROUP, PLURAL, POD_GROUP_LABEL, VERSION
from cogate.localcluster import example
from cogate.localcluster.procs import Proc, free_port, spawn, terminate

from .kube import (
    bound,
    condition,
    create_pod_group,
    events_for,
    gated,
    get_pod_group,
    group_pods,
    hold_gated,
    running,
    status,
    wait_for,
)

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)
FOREIGN_GATE = "example.com/other-gate"


def pod(name: str, group: str | None, *, cpu: str = "3", extra_spec: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A bare pod of ``cpu`` (requests = limits) labelled for ``group``."""
    tpl = example.pod_template(group, cpu=cpu, app=group or "plain")
    tpl["metadata"]["name"] = name
    tpl["metadata"]["labels"].update(labels or {})
    tpl["spec"].update(extra_spec or {})
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


def create_pods(kube, namespace: str, group: str, count: int, prefix: str | None = None, **kw) -> list[str]:
    core = client.CoreV1Api(kube)
    names = [f"{prefix or group}-{i}" for i in range(count)]
    for n in names:
        core.create_namespaced_pod(namespace, pod(n, group, **kw))
    return names


def patch_pg(kube, namespace: str, name: str, body: dict[str, Any], subresource: bool = False) -> None:
    custom = client.CustomObjectsApi(kube)
    if subresource:
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, body)
    else:
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, body)


def metric(text: str, name: str, labels: str = "") -> float:
    """Value of sample ``name{labels}`` in Prometheus text (0 if absent)."""
    want = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == want:
            return float(value)
    return 0.0


# ----------------------------------------------------------------- 1. restart finishes a release


def test_restarted_controller_finishes_a_recorded_release_instead_of_re_deciding(stack, kube, namespace,
                                                                                 only_nodes):
    """The release is recorded in status before pods are patched: a controller that finds a
    recorded release with gated members left ungates them, even where a fresh decision
    would not release (4 members of 3 CPU, minMember 4, room for 3). Members of a standing
    release are released towards room the planner finds (issue 9 item 5): three are, the
    fourth waits gated for capacity instead of going Unschedulable."""
    (node,) = only_nodes(1, **NODE)
    stack.processes.pop("controller").stop()
    try:
        create_pod_group(kube, example.pod_group("g", 4, namespace=namespace, timeout_seconds=None))
        create_pods(kube, namespace, "g", 4)
        wait_for(lambda: len(group_pods(kube, namespace, "g")) == 4, 10, what="4 members")
        assert all(gated(p) for p in group_pods(kube, namespace, "g"))
        start = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        # What the controller writes first on a release (phase Scheduling, scheduleStartTime).
        patch_pg(kube, namespace, "g", {"status": {"phase": "Scheduling", "scheduleStartTime": start}},
                 subresource=True)
    finally:
        stack.start_controller()
    wait_for(lambda: sum(not gated(p) for p in group_pods(kube, namespace, "g")) == 3, 10,
             what="the recorded release finished: the gates of the three with room removed")
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == 3, 15, what="3 Running")
    (waiting,) = [p for p in group_pods(kube, namespace, "g") if gated(p)]
    cond = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "MembersWaiting")) and c["status"] == "True"
                    and waiting.metadata.name in c["message"] and c, 10,
                    what=f"MembersWaiting=True naming {waiting.metadata.name}")
    assert cond["status"] == "True" and waiting.metadata.name in cond["message"], cond
    st = status(kube, namespace, "g")
    assert st.get("scheduleStartTime") == start, "scheduleStartTime is never rewritten"


# ----------------------------------------------------------------- 2. two groups, room for one


def test_two_groups_competing_for_the_same_room_release_one_after_the_other(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    for g in ("a", "b"):
        create_pod_group(kube, example.pod_group(g, 3, namespace=namespace, timeout_seconds=None))
    core = client.CoreV1Api(kube)
    for i in range(3):  # interleaved: both groups complete in the same debounce window
        for g in ("a", "b"):
            core.create_namespaced_pod(namespace, pod(f"{g}-{i}", g))

    def one_released():
        rel = [g for g in ("a", "b") if not any(gated(p) for p in group_pods(kube, namespace, g))]
        return rel

    released = wait_for(one_released, 10, what="one group released")
    assert len(released) == 1, f"both groups released against room for one: {released}"
    winner, loser = released[0], ({"a", "b"} - set(released)).pop()
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, winner)) == 3, 15,
             what=f"group {winner} Running")
    hold_gated(kube, namespace, loser, 3, 3)
    st = status(kube, namespace, loser)
    assert st.get("phase") == "Pending" and not st.get("scheduleStartTime")
    assert condition(st, "Released")["reason"] == "InsufficientCapacity"

    for p in group_pods(kube, namespace, winner):
        core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, loser)) == 3, 20,
             what=f"group {loser} released and Running once {winner}'s pods are gone")


# ----------------------------------------------------------------- 3. replacement member; 7. metrics; 8. columns


def test_replacement_member_of_released_group_is_ungated_alone(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    before = stack.metrics()
    create_pod_group(kube, example.pod_group("nginx", 3, namespace=namespace, timeout_seconds=30))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("nginx", 3, namespace=namespace, group="nginx"))
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "nginx")) == 3, 15, what="3 Running")
    wait_for(lambda: status(kube, namespace, "nginx").get("phase") == "Running", 10, what="phase Running")

    # 7. metrics moved with the release.
    after = stack.metrics()
    assert metric(after, "cogate_controller_releases_total") >= metric(before, "cogate_controller_releases_total") + 1
    assert metric(after, "cogate_controller_decisions_total") > metric(before, "cogate_controller_decisions_total")
    assert (metric(after, "cogate_controller_gate_removals_total", 'result="removed"')
            >= metric(before, "cogate_controller_gate_removals_total", 'result="removed"') + 3)

    # 8. printer columns of a Running group.
    out = stack.cluster.kubectl("get", "pg", "nginx", "-n", namespace).stdout.splitlines()
    header, row = out[0].split(), out[1].split()
    assert header == ["NAME", "PHASE", "MINMEMBER", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "REASON", "AGE"], \
        header
    assert row[:8] == ["nginx", "Running", "3", "3", "3", "0", "0", "Released"], row
    wide = stack.cluster.kubectl("get", "pg", "nginx", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert "TIMEOUT" in wide[0].split() and wide[1].split()[wide[0].split().index("TIMEOUT")] == "30", wide

    # 3. delete one running member: the ReplicaSet's replacement is ungated by itself.
    victim = group_pods(kube, namespace, "nginx")[0].metadata.name
    client.CoreV1Api(kube).delete_namespaced_pod(victim, namespace, grace_period_seconds=0)

    def replaced():
        ps = [p for p in group_pods(kube, namespace, "nginx") if p.metadata.name != victim
              and not p.metadata.deletion_timestamp]
        return len(ps) == 3 and sum(running(p) for p in ps) == 3

    wait_for(replaced, 15, what="replacement ungated and Running")
    wait_for(lambda: status(kube, namespace, "nginx").get("phase") == "Running", 10, what="phase Running again")
    # the recorder writes events after the status
    reasons = wait_for(lambda: "Released" in (r := [e.reason for e in events_for(kube, namespace, "nginx")]) and r,
                       10, what="Released event")
    assert "Released" in reasons


def test_waiting_gang_shows_under_its_reason_and_its_wait_grows(stack, kube, namespace, only_nodes):
    """The README example with minMember 4 (3 of 4 fit on one node): the waiting metrics count it under
    the Released=False reason it shows, and the oldest wait grows between scrapes without a pass.
    Both servers export the build info and process metrics."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("nginx", 4, namespace=namespace))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("nginx", 6, namespace=namespace, group="nginx"))
    released = wait_for(lambda: condition(status(kube, namespace, "nginx"), "Released"), 20, what="Released")
    wait_for(lambda: condition(status(kube, namespace, "nginx"), "Released")["reason"] == "InsufficientCapacity", 20,
             what="Released=False InsufficientCapacity")
    reason = 'reason="InsufficientCapacity"'

    def counted() -> str | None:
        text = stack.metrics()
        return text if metric(text, "cogate_controller_groups_waiting", reason) >= 1 else None

    first = wait_for(counted, 10, what="the group counted as waiting")
    since = dt.datetime.fromisoformat(released["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
    age = metric(first, "cogate_controller_group_oldest_wait_seconds", reason)
    assert age >= time.time() - since - 1.5  # at least this group's wait (an older one may wait too)
    time.sleep(2.0)
    later = metric(stack.metrics(), "cogate_controller_group_oldest_wait_seconds", reason)
    assert later >= age + 1.5, (age, later)
    for text in (first, stack.metrics("webhook")):
        assert 'cogate_build_info{python_version="' in text
        assert metric(text, "process_resident_memory_bytes") > 0 and metric(text, "process_open_fds") > 0


def test_job_group_reaches_finished(stack, kube, namespace, only_nodes):
    """kwok completes Job pods (kwok-stages.yaml pod-complete): the group goes Running -> Finished."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("job", 3, namespace=namespace, timeout_seconds=None))
    tpl = example.pod_template("job", cpu="1", app="job")
    tpl["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "3s"}
    tpl["spec"]["restartPolicy"] = "Never"
    client.BatchV1Api(kube).create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
        "spec": {"completions": 3, "parallelism": 3, "backoffLimit": 0, "template": tpl}})
    wait_for(lambda: status(kube, namespace, "job").get("phase") in ("Running", "Finished"), 20,
             what="Job group Running")
    st = wait_for(lambda: (s := status(kube, namespace, "job")).get("phase") == "Finished" and s, 30,
                  what="Job group Finished")
    assert st.get("succeeded") == 3 and st.get("running", 0) == 0
    row = stack.cluster.kubectl("get", "pg", "job", "-n", namespace, "--no-headers").stdout.split()
    assert row[:7] == ["job", "Finished", "3", "3", "0", "3", "0"], row


# ----------------------------------------------------------------- 4. odd objects


def test_foreign_gate_is_never_removed_and_member_it_holds_does_not_count(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=None))
    core.create_namespaced_pod(namespace, pod("held", "g", cpu="1",
                                              extra_spec={"schedulingGates": [{"name": FOREIGN_GATE}]}))
    core.create_namespaced_pod(namespace, pod("free-0", "g", cpu="1"))
    held = core.read_namespaced_pod("held", namespace)
    assert [g.name for g in held.spec.scheduling_gates] == [FOREIGN_GATE, DEFAULT_GATE_NAME]
    # Only one member can be placed (the other is held by someone else's gate): no release.
    wait_for(lambda: condition(status(kube, namespace, "g"), "Released"), 10, what="Released condition")
    hold_gated(kube, namespace, "g", 2, 2)
    assert status(kube, namespace, "g").get("phase") == "Pending"
    core.create_namespaced_pod(namespace, pod("free-1", "g", cpu="1"))
    wait_for(lambda: all(running(core.read_namespaced_pod(f"free-{i}", namespace)) for i in range(2)), 15,
             what="the two plain members released and Running")
    held = core.read_namespaced_pod("held", namespace)
    assert FOREIGN_GATE in [g.name for g in held.spec.scheduling_gates], "a foreign gate must never be removed"
    assert not bound(held)


def test_unmatchable_node_selector_never_releases_and_says_why(stack, kube, namespace, only_nodes):
    (node,) = only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 2, cpu="1", extra_spec={"nodeSelector": {"zone": "nowhere"}})
    # A pass may run between the two creations ("1 of 2 members present"): wait for the verdict on both,
    # the members' own nodeSelector, not capacity (issue 21 item 9).
    said = ("members g-0, g-1 fit no node by their own constraints, not for want of capacity: "
            "nodeSelector zone=nowhere excludes 1 node")
    cond = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Released")) and c["status"] == "False"
                    and c["reason"] == "Unschedulable" and c["message"] == said and c, 10,
                    what="Released=False Unschedulable naming both members' nodeSelector")
    assert cond["reason"] == "Unschedulable", cond
    assert cond["message"] == said, cond
    assert condition(status(kube, namespace, "g"), "FitsCluster") is None
    hold_gated(kube, namespace, "g", 2, 2)


def test_min_member_larger_than_members_waits_then_edit_releases_promptly(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 4, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 3)
    cond = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Released")) and c["status"] == "False"
                    and c["reason"] == "WaitingForMembers" and c, 10, what="Released=False WaitingForMembers")
    assert cond["status"] == "False" and cond["reason"] == "WaitingForMembers", cond
    hold_gated(kube, namespace, "g", 2, 3)
    patch_pg(kube, namespace, "g", {"spec": {"minMember": 3}})
    # the edit itself triggers the pass: released well before the next periodic resync (30 s) could
    # have done it (a bound relative to that mechanism, not a speed target: those live in bench/)
    wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "g")), 10, interval=0.05,
             what="released by the edit minMember 4 -> 3, before the 30 s resync")
    wait_for(lambda: status(kube, namespace, "g").get("phase") in ("Scheduled", "Running"), 10, what="phase")


def test_node_added_later_releases_waiting_group_promptly(stack, kube, namespace, only_nodes, cluster):
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 4, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 4)
    wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Released")) and c["reason"] == "InsufficientCapacity",
             10, what="InsufficientCapacity")
    from cogate.localcluster.nodes import node_manifest

    name = f"late-{namespace}"[:60]
    core = client.CoreV1Api(kube)
    core.create_node(node_manifest(name, **NODE))
    try:
        wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "g")), 10, interval=0.05,
                 what="released once the new node is Ready")
        wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == 4, 15, what="4 Running")
    finally:
        for p in group_pods(kube, namespace, "g"):
            core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
        core.delete_node(name)


def test_pod_group_deleted_while_members_gated_keeps_them_gated_and_deletes_cleanly(stack, kube, namespace,
                                                                                     only_nodes):
    """No finalizers: deleting the PodGroup never hangs; its members stay gated (no PodGroup,
    no release) until a PodGroup of that name appears again."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 4, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 3)
    wait_for(lambda: condition(status(kube, namespace, "g"), "Released"), 10, what="Released condition")
    client.CustomObjectsApi(kube).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "g")

    def gone():
        try:
            get_pod_group(kube, namespace, "g")
            return False
        except client.ApiException as exc:
            return exc.status == 404

    wait_for(gone, 5, what="PodGroup deleted (no finalizer)")
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, pod("g-3", "g"))
    hold_gated(kube, namespace, "g", 3, 4)
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    # released after re-create: the 3 members the node has room for; the 4th waits gated for capacity
    wait_for(lambda: sorted(gated(p) for p in group_pods(kube, namespace, "g")) == [False, False, False, True], 5,
             what="released after re-create (3 of 4 with room)")
    waiting = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "MembersWaiting"))
                       and c["status"] == "True" and c["reason"] == "WaitingForCapacity" and c, 5,
                       what="MembersWaiting=True WaitingForCapacity")
    assert waiting["status"] == "True" and waiting["reason"] == "WaitingForCapacity", waiting
    assert stack.processes["controller"].alive()


def test_deleting_a_namespace_with_gated_members_does_not_hang(stack, kube, cluster, only_nodes):
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    ns = f"doomed-{os.getpid()}-{int(time.time()) % 100000}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    create_pod_group(kube, example.pod_group("g", 5, namespace=ns, timeout_seconds=None))
    create_pods(kube, ns, "g", 3)
    assert all(gated(p) for p in group_pods(kube, ns, "g"))
    core.delete_namespace(ns)

    def ns_gone():
        try:
            core.read_namespace(ns)
            return False
        except client.ApiException as exc:
            return exc.status == 404

    wait_for(ns_gone, 45, interval=0.5, what=f"namespace {ns} deleted")
    assert stack.processes["controller"].alive()


def test_member_created_with_node_name_is_admitted_ungated_with_a_warning(stack, kube, namespace, only_nodes):
    (node,) = only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=None))
    manifest = pod("pinned", "g", cpu="1", extra_spec={"nodeName": node})
    proc = stack.cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    assert "warning" in proc.stderr.lower(), proc.stderr
    p = client.CoreV1Api(kube).read_namespaced_pod("pinned", namespace)
    assert not p.spec.scheduling_gates and p.spec.node_name == node
    # It is a bound member: with one more member the group has its quorum.
    client.CoreV1Api(kube).create_namespaced_pod(namespace, pod("other", "g", cpu="1"))
    wait_for(lambda: all(running(q) for q in group_pods(kube, namespace, "g")) and
             len(group_pods(kube, namespace, "g")) == 2, 15, what="both members Running")


# ----------------------------------------------------------------- 5. webhook


def _post(stack, body: bytes, ctype: str = "application/json") -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=str(stack.workdir / "ca.crt"))
    req = urllib.request.Request(f"https://127.0.0.1:{stack.webhook_port}/mutate", data=body, method="POST",
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


GARBAGE = [
    b"",
    b"not json",
    b"\xff\xfe\x00garbage",
    b"[]",
    b"null",
    b"42",
    b'"string"',
    b"{}",
    b'{"request": null}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": "x"}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": []}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", '
    b'"object": {"spec": "x", "metadata": []}}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", '
    b'"object": {"metadata": {"labels": "x"}, "spec": {"schedulingGates": "x"}}}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", '
    b'"object": {"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": 5}}, "spec": {"schedulingGates": [5]}}}}',
    b'{"a":' * 5000 + b"1" + b"}" * 5000,
    b"{" + b'"k": 1,' * 200000 + b'"k": 1}',
]


@pytest.mark.parametrize("body", GARBAGE, ids=[f"garbage{i}" for i in range(len(GARBAGE))])
def test_webhook_answers_garbage_with_4xx_never_5xx(stack, body):
    code, text = _post(stack, body)
    assert 400 <= code < 500 or code == 200, (code, text[:300])
    if code == 200:  # a well-formed review: an AdmissionReview answer, never admitted unchecked
        review = json.loads(text)
        assert review.get("kind") == "AdmissionReview" and "response" in review, text[:300]
    assert stack.processes["webhook"].alive()


def test_webhook_registration_matches_config_and_kube_system_pods_are_not_gated(stack, kube, only_nodes):
    from cogate.webhook.config import CONFIGURATION_NAME, WEBHOOK_NAME

    cfg = client.AdmissionregistrationV1Api(kube).read_mutating_webhook_configuration(CONFIGURATION_NAME)
    (wh,) = [w for w in cfg.webhooks if w.name == WEBHOOK_NAME]
    assert wh.failure_policy == "Fail" and wh.side_effects == "None" and wh.timeout_seconds <= 10
    assert [(r.operations, r.resources) for r in wh.rules] == [(["CREATE"], ["pods"])]
    exprs = [(e.key, e.operator, e.values) for e in wh.namespace_selector.match_expressions]
    assert ("kubernetes.io/metadata.name", "NotIn", ["kube-system"]) in exprs
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    name = f"labelled-{os.getpid()}-{int(time.time()) % 100000}"
    created = core.create_namespaced_pod("kube-system", pod(name, "g", cpu="100m"))
    try:
        assert not created.spec.scheduling_gates, "a pod in kube-system is never gated"
    finally:
        core.delete_namespaced_pod(name, "kube-system", grace_period_seconds=0)


# ----------------------------------------------------------------- 6. leader election


def _spawn_controller(stack, workdir: Path, name: str, namespace: str) -> tuple[Proc, int]:
    port = free_port()
    proc = spawn(name, [sys.executable, "-m", "cogate.cli", "controller", "--kubeconfig", str(stack.cluster.kubeconfig),
                        "--leader-elect", "--leader-election-namespace", namespace, "--namespace", namespace,
                        "--metrics-port", str(port), "--metrics-host", "127.0.0.1"],
                 workdir / f"{name}.log", env=dict(os.environ, PYTHONUNBUFFERED="1"))
    return proc, port


def _scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            return resp.read().decode()
    except OSError:
        return ""


def test_leader_election_one_leader_reconciles_and_failover_after_kill(stack, kube, namespace, tmp_path):
    procs = [_spawn_controller(stack, tmp_path, f"c{i}", namespace) for i in range(2)]
    try:
        def one_leader():
            texts = [_scrape(port) for _, port in procs]
            if not all(texts):
                return None
            leaders = [i for i, t in enumerate(texts) if metric(t, "cogate_controller_leader") == 1]
            return len(leaders) == 1 and (leaders[0], texts)

        leader, _ = wait_for(one_leader, 30, interval=0.3, what="exactly one leader")
        follower = 1 - leader
        time.sleep(2)  # passes run (debounce, resync) on the leader only
        texts = {leader: wait_for(lambda: (t := _scrape(procs[leader][1]))
                                  and metric(t, "cogate_controller_decisions_total") >= 1 and t, 5, interval=0.3,
                                  what="the leader reconciles")}
        texts[follower] = _scrape(procs[follower][1])
        assert metric(texts[leader], "cogate_controller_decisions_total") >= 1
        assert metric(texts[follower], "cogate_controller_decisions_total") == 0, "a follower must not reconcile"
        assert metric(texts[follower], "cogate_controller_leader") == 0

        procs[leader][0].signal(signal.SIGKILL)
        assert procs[leader][0].wait(5)
        # the Lease of the killed leader expires (lease duration) and the follower's next retry takes it
        wait_for(lambda: metric(_scrape(procs[follower][1]), "cogate_controller_leader") == 1, 40, interval=0.3,
                 what="the follower takes over after the leader is killed")
        wait_for(lambda: metric(_scrape(procs[follower][1]), "cogate_controller_decisions_total") >= 1, 5,
                 what="the new leader reconciles")

        # A clean shutdown (SIGTERM) releases the Lease: a standby takes over at once (retry period 2 s).
        procs.append(_spawn_controller(stack, tmp_path, "c2", namespace))
        wait_for(lambda: _scrape(procs[2][1]), 30, interval=0.3, what="third controller serving metrics")
        assert metric(_scrape(procs[2][1]), "cogate_controller_leader") == 0
        procs[follower][0].signal(signal.SIGTERM)
        assert procs[follower][0].wait(15) and procs[follower][0].returncode == 0
        t0 = time.monotonic()
        wait_for(lambda: metric(_scrape(procs[2][1]), "cogate_controller_leader") == 1, 8, interval=0.2,
                 what="the standby leads soon after the leader released the Lease")
        print(f"takeover after SIGTERM: {time.monotonic() - t0:.1f}s")
    finally:
        assert not terminate([p for p, _ in procs], grace=10.0)


# ----------------------------------------------------------------- 1b. restart keeps released room reserved


def test_restart_keeps_room_of_released_unbound_members_reserved(stack, kube, namespace, only_nodes):
    """Released members not yet bound hold their planned room across a controller restart.

    kube-scheduler is paused (SIGSTOP), so after the release group ``a``'s members stay
    ungated and unbound, pinned to the planned node: as if kube-scheduler had not reached them
    yet when the controller restarted. A later group ``b`` that fits only in that room must not
    be released by the restarted controller (before the fix, reservations lived only in the
    old process's memory, so ``b`` was released and bound into ``a``'s room). (Members naming
    a scheduler that does not run no longer serve here: cogate does not release them.)
    """
    only_nodes(1, **NODE)
    scheduler = stack.cluster.procs["kube-scheduler"]
    scheduler.signal(signal.SIGSTOP)
    try:
        create_pod_group(kube, example.pod_group("a", 3, namespace=namespace, timeout_seconds=None))
        create_pods(kube, namespace, "a", 3)
        wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "a")), 10, what="group a released")
        assert not any(bound(p) for p in group_pods(kube, namespace, "a"))
        stack.restart_controller()
        create_pod_group(kube, example.pod_group("b", 1, namespace=namespace, timeout_seconds=None))
        create_pods(kube, namespace, "b", 1)
        wait_for(lambda: (c := condition(status(kube, namespace, "b"), "Released"))
                 and c["reason"] == "InsufficientCapacity", 10, what="b decided: InsufficientCapacity")
        hold_gated(kube, namespace, "b", 2, 1)
        assert condition(status(kube, namespace, "b"), "Released")["reason"] == "InsufficientCapacity"
    finally:
        scheduler.signal(signal.SIGCONT)


@pytest.mark.parametrize("kill_at", ["status-written", "first-gate-removed"])
def test_controller_killed_right_after_recording_a_release_is_finished_by_the_next_one(stack, kube, namespace,
                                                                                        only_nodes, kill_at):
    """SIGKILL the controller the moment the release shows in status (or the first gate is
    gone: removals in flight), start a new one: every member ends ungated, scheduleStartTime
    unchanged."""
    only_nodes(1, kwok_taint=False, cpu="64", memory="64Gi", pods=110)
    n = 40
    create_pods(kube, namespace, "g", n, cpu="100m")
    wait_for(lambda: len(group_pods(kube, namespace, "g")) == n, 20, what=f"{n} members")
    create_pod_group(kube, example.pod_group("g", n, namespace=namespace, timeout_seconds=None))
    proc = stack.processes["controller"]
    try:
        st = wait_for(lambda: (s := status(kube, namespace, "g")).get("scheduleStartTime") and s, 10,
                      interval=0.005, what="release recorded")
        if kill_at == "first-gate-removed":
            wait_for(lambda: not all(gated(p) for p in group_pods(kube, namespace, "g")), 10, interval=0.005,
                     what="a gate removed")
        proc.popen.kill()
        proc.popen.wait(5)
        left = sum(gated(p) for p in group_pods(kube, namespace, "g"))
        print(f"members still gated when the controller died: {left} of {n}")
    finally:
        stack.processes.pop("controller", None)
        stack.start_controller()
    wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "g")), 10, what="all gates removed")
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == n, 20, what=f"{n} Running")
    assert status(kube, namespace, "g")["scheduleStartTime"] == st["scheduleStartTime"]


def test_pod_already_carrying_our_gate_is_admitted_with_it_once(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("g", 1, namespace=namespace, timeout_seconds=None))
    created = core.create_namespaced_pod(namespace, pod("p", "g", cpu="1",
                                                        extra_spec={"schedulingGates": [{"name": DEFAULT_GATE_NAME}]}))
    assert [g.name for g in created.spec.scheduling_gates or []] in ([DEFAULT_GATE_NAME], [])
    wait_for(lambda: running(core.read_namespaced_pod("p", namespace)), 15, what="released and Running")


@pytest.mark.parametrize("bogus", [
    {"phase": "Running"},  # a phase without a recorded release
    {"phase": "Scheduling", "scheduleStartTime": "2099-01-01T00:00:00Z"},  # a release from the future
    {"conditions": [{"type": "Released", "status": "True", "reason": "Released", "message": "",
                     "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
])
def test_hand_written_status_does_not_wedge_the_controller(stack, kube, namespace, only_nodes, bogus):
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("g", 4, namespace=namespace, timeout_seconds=None))
    create_pods(kube, namespace, "g", 3)
    wait_for(lambda: condition(status(kube, namespace, "g"), "Released"), 10, what="Released condition")
    patch_pg(kube, namespace, "g", {"status": bogus}, subresource=True)
    time.sleep(1)
    assert stack.processes["controller"].alive()
    # The controller still serves this group: one more member completes it.
    client.CoreV1Api(kube).create_namespaced_pod(namespace, pod("g-x", "g", cpu="100m"))
    wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "g")), 10, what="released")
    st = status(kube, namespace, "g")
    assert st.get("scheduleStartTime") and st.get("phase") in ("Scheduling", "Scheduled", "Running"), st


def test_job_waves_after_the_first_gang_are_ungated_as_they_appear(stack, kube, namespace, only_nodes):
    """completions 6, parallelism 3, minMember 3: the second wave of Job pods joins a released
    group and is ungated at once (or, if the group was seen Finished in between, released as a
    new gang at once: the finished pods still exist and count as bound)."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("job", 3, namespace=namespace, timeout_seconds=None))
    tpl = example.pod_template("job", cpu="1", app="job")
    tpl["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}
    tpl["spec"]["restartPolicy"] = "Never"
    batch = client.BatchV1Api(kube)
    batch.create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
        "spec": {"completions": 6, "parallelism": 3, "backoffLimit": 0, "template": tpl}})
    wait_for(lambda: (batch.read_namespaced_job("job", namespace).status.succeeded or 0) == 6, 40,
             what="all 6 completions")
    # Finished may also be seen between the waves (succeeded 3), and the count may follow the phase
    st = wait_for(lambda: (s := status(kube, namespace, "job")).get("phase") == "Finished"
                  and s.get("succeeded") == 6 and s, 15, what="Finished, succeeded 6")
    assert st["succeeded"] == 6


def test_same_named_group_in_another_namespace_never_counts(stack, kube, namespace, only_nodes):
    """docs/semantics.md: a member is a pod in the PodGroup's namespace; pods of another namespace
    labelled with the same group name neither complete it nor get released by it."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    other = f"{namespace[:50]}-other"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    try:
        create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=None))
        create_pods(kube, namespace, "g", 1, cpu="1")
        create_pods(kube, other, "g", 2, cpu="1")
        cond = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Released"))
                        and c["reason"] == "WaitingForMembers" and c, 10, what="decided: WaitingForMembers")
        assert cond["reason"] == "WaitingForMembers", cond
        hold_gated(kube, namespace, "g", 2, 1)
        hold_gated(kube, other, "g", 1, 2)  # no PodGroup in their namespace
        create_pods(kube, namespace, "g", 1, prefix="g-second", cpu="1")
        wait_for(lambda: not any(gated(p) for p in group_pods(kube, namespace, "g")), 10, what="released")
        hold_gated(kube, other, "g", 1, 2)
    finally:
        core.delete_namespace(other, propagation_policy="Background")


@pytest.mark.parametrize("new_label", [None, ""], ids=["label-removed", "label-emptied"])
def test_gated_pod_that_leaves_its_group_is_scheduled_on_its_own(stack, kube, namespace, only_nodes, new_label):
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    core.create_namespaced_pod(namespace, pod("leaver", "g", cpu="1"))
    core.create_namespaced_pod(namespace, pod("stayer", "g", cpu="1"))
    wait_for(lambda: condition(status(kube, namespace, "g"), "Released"), 10, what="Released condition")
    assert gated(core.read_namespaced_pod("leaver", namespace))
    # JSON merge patch: null deletes the label.
    core.patch_namespaced_pod("leaver", namespace, {"metadata": {"labels": {POD_GROUP_LABEL: new_label}}})
    wait_for(lambda: running(core.read_namespaced_pod("leaver", namespace)), 10,
             what="the pod that left its group scheduled on its own")
    # the recorder writes the event after the gate went
    left = wait_for(lambda: "LeftPodGroup" in (r := {e.reason for e in
                                                      events_for(kube, namespace, "leaver", kind="Pod")}) and r, 10,
                    what="LeftPodGroup event on the pod")
    assert "LeftPodGroup" in left
    stayer = core.read_namespaced_pod("stayer", namespace)
    assert gated(stayer) and not bound(stayer), "the remaining member still waits for its gang"


def test_members_with_a_node_bound_volume_are_not_pinned_away_from_it(stack, kube, namespace, only_nodes):
    names = only_nodes(3, **NODE)
    core = client.CoreV1Api(kube)
    pv_name = f"{namespace}-data"
    core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/data"},
                 "claimRef": {"namespace": namespace, "name": "data"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [names[-1]]}]}]}}},
    })
    try:
        core.create_namespaced_persistent_volume_claim(namespace, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv_name,
                     "resources": {"requests": {"storage": "1Gi"}}},
        })
        wait_for(lambda: core.read_namespaced_persistent_volume_claim("data", namespace).status.phase == "Bound", 30,
                 what="PVC bound to the node-local PV")
        create_pod_group(kube, example.pod_group("vol", 2, namespace=namespace, timeout_seconds=None))
        volume = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
        create_pods(kube, namespace, "vol", 2, cpu="1", extra_spec=volume)
        ps = wait_for(lambda: (lambda ps: len(ps) == 2 and all(running(p) for p in ps) and ps)(
            group_pods(kube, namespace, "vol")), 20, what="both members Running")
        assert {p.spec.node_name for p in ps} == {names[-1]}, "members run on the only node their volume allows"
        # The planner reads the bound PV's node affinity (controller/model/volumes.py), so it pins each
        # member to the volume's node, never away from it.
        def pins(p: client.V1Pod) -> set[str]:
            na = p.spec.affinity.node_affinity if p.spec.affinity else None
            terms = na.required_during_scheduling_ignored_during_execution.node_selector_terms if na else []
            return {v for t in terms for f in (t.match_fields or []) for v in f.values}

        assert [pins(p) for p in ps] == [{names[-1]}] * 2, "each member pinned to the volume's node"
        said = f"released 2 members pinned to planned nodes: {names[-1]} x2"
        released = wait_for(lambda: (ms := [e.message for e in events_for(kube, namespace, "vol")
                                           if e.reason == "Released"]) and said in ms and ms, 10,
                            what="Released event naming the pins")  # the recorder writes it after the gates went
        assert said in released, released
    finally:
        core.delete_persistent_volume(pv_name)
