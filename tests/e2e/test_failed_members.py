"""Finished and failed members of one run (issue 37 kind 7) on the real local control plane.

A Job whose pods partly finished (Succeeded) loses a pod to a failure; the Job controller makes a
replacement. Running + Succeeded + the replacement make minMember, so the replacement joins the
standing release (same ``scheduleStartTime``) and runs at once where it fits; before, the release
ended and the replacement waited gated for ever (a gang decided again never counts Succeeded
members). Shapes: an Indexed Job, ``completions > parallelism``, ``backoffLimitPerIndex`` (an
index retried, then failed for good) and ``podFailurePolicy`` (an ``Ignore`` rule by exit code).

kwok runs the pods; a pod's end is written into its status here (phase, container exit code), as
a kubelet would, so which index succeeds or fails is chosen by the test.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import bound, condition, create_pod_group, gated, group_pods, running, status, wait_for

pytestmark = pytest.mark.e2e

NODE8 = dict(kwok_taint=False, cpu="8", memory="16Gi", pods=250)
INDEX = "batch.kubernetes.io/job-completion-index"


def job(name: str, completions: int, parallelism: int, **spec: Any) -> dict[str, Any]:
    """A Job of 2-CPU pods labelled for PodGroup ``name`` that run until the test ends them."""
    tpl = example.pod_template(name, cpu="2", memory="100Mi", app=name)
    tpl["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}
    tpl["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": parallelism, "template": tpl, **spec}}


@pytest.fixture(autouse=True)
def jobs_gone(kube, namespace):
    """After each test: its Jobs deleted and their pods removed at once (grace 0, finalizers
    cleared). Pods whose end the test wrote into their status stay Terminating otherwise (kwok
    does not finish them), which holds the namespace, its PodGroups and later tests' quiet
    cluster (test_scheduler_plugins_leftovers waits for every other PodGroup to be gone)."""
    yield
    batch, core = client.BatchV1Api(kube), client.CoreV1Api(kube)
    for j in batch.list_namespaced_job(namespace).items:
        with contextlib.suppress(client.ApiException):
            batch.delete_namespaced_job(j.metadata.name, namespace, propagation_policy="Orphan")
    for p in core.list_namespaced_pod(namespace).items:
        with contextlib.suppress(client.ApiException):
            if p.metadata.finalizers:
                core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})
            core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, 30, what="the test's pods gone")


def live(kube, namespace: str, group: str) -> list[client.V1Pod]:
    return group_pods(kube, namespace, group, deleting=False)


def active(kube, namespace: str, group: str) -> list[client.V1Pod]:
    return [p for p in live(kube, namespace, group) if p.status.phase not in ("Succeeded", "Failed")]


def end_pod(kube, namespace: str, pod: client.V1Pod, phase: str, exit_code: int) -> None:
    """Write ``phase`` into ``pod``'s status with its container terminated by ``exit_code``."""
    core = client.CoreV1Api(kube)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    containers = [{"name": c.name, "image": c.image, "ready": False, "restartCount": 0, "started": False,
                   "imageID": "", "state": {"terminated": {"exitCode": exit_code, "startedAt": now,
                                                          "finishedAt": now,
                                                          "reason": "Completed" if exit_code == 0 else "Error"}}}
                  for c in pod.spec.containers]
    core.patch_namespaced_pod_status(pod.metadata.name, namespace,
                                     {"status": {"phase": phase, "containerStatuses": containers}})
    wait_for(lambda: core.read_namespaced_pod(pod.metadata.name, namespace).status.phase == phase, 10,
             what=f"{pod.metadata.name} {phase}")


def by_index(pods: list[client.V1Pod]) -> dict[int, client.V1Pod]:
    return {int(p.metadata.annotations[INDEX]): p for p in pods if INDEX in (p.metadata.annotations or {})}


def start_gang(kube, namespace: str, name: str, m: int, body: dict[str, Any]) -> dict[str, Any]:
    create_pod_group(kube, example.pod_group(name, m, namespace=namespace, timeout_seconds=None))
    client.BatchV1Api(kube).create_namespaced_job(namespace, body)
    wait_for(lambda: len([p for p in live(kube, namespace, name) if running(p)]) == m, 30, what="gang running")
    return wait_for(lambda: (s := status(kube, namespace, name)).get("phase") == "Running" and s, 15, what="Running")


def replacement_joins(kube, namespace: str, name: str, start: str, running_count: int, succeeded: int,
                      failed: int) -> dict[str, Any]:
    """The replacement runs within the same release; the status counts the run as it is.

    The Job controller makes replacements only after its pod failure back-off: 10 s doubled for each
    failure since the last success (kube-controller-manager job controller, ``DefaultJobPodFailureBackOff``),
    so ``failed`` failures wait up to ``10 * 2 ** (failed - 1)`` s before the gate is even set. That wait
    is the Job controller's, not cogate's, so the replacements' creation is waited for on its own
    (twice the back-off plus 60 s), then cogate's part, the release and the bind, within 30 s; a
    timeout names the members left and the status (one wait for both, back-off plus 30 s, timed out
    once in a full suite under load without saying which part was slow)."""
    backoff = 10 * 2 ** (failed - 1) if failed else 0
    wait_for(lambda: len(active(kube, namespace, name)) == running_count, 2 * backoff + 60,
             what=f"{running_count} members not ended (the Job controller made the replacement)")
    try:
        wait_for(lambda: len([p for p in active(kube, namespace, name) if running(p)]) == running_count, 30,
                 what=f"{running_count} members running (the replacement among them)")
    except AssertionError as exc:
        members = sorted(f"{p.metadata.name} {p.status.phase}{' gated' if gated(p) else ''}"
                         for p in active(kube, namespace, name))
        raise AssertionError(f"{exc}; members not ended: {members}; PodGroup status: "
                             f"{status(kube, namespace, name)}") from None
    st = wait_for(lambda: (s := status(kube, namespace, name)).get("phase") == "Running"
                  and (s.get("running"), s.get("succeeded"), s.get("failed")) == (running_count, succeeded, failed)
                  and s, 15, what=f"Running: running {running_count}, succeeded {succeeded}, failed {failed}")
    assert st["scheduleStartTime"] == start, st  # the same run, never decided again
    assert condition(st, "Released")["status"] == "True", st
    assert not [p for p in live(kube, namespace, name) if gated(p)], "a member left gated"
    return st


@pytest.mark.parametrize("succeed,fail", [([3], [2]), ([0, 3], [1]), ([1], [0, 2])])
def test_indexed_job_replacement_joins_its_run(stack, kube, namespace, only_nodes, succeed, fail):
    """Indexed Job of 4 (parallelism 4 = minMember): the indexes in ``succeed`` finish, those in
    ``fail`` fail; each failed index's replacement runs in the same release at once."""
    only_nodes(1, **NODE8)
    body = job("idx", 4, 4, completionMode="Indexed", backoffLimit=4)
    first = start_gang(kube, namespace, "idx", 4, body)
    pods = by_index(live(kube, namespace, "idx"))
    for i in succeed:
        end_pod(kube, namespace, pods[i], "Succeeded", 0)
    for i in fail:
        end_pod(kube, namespace, pods[i], "Failed", 1)
    replacement_joins(kube, namespace, "idx", first["scheduleStartTime"], 4 - len(succeed), len(succeed), len(fail))


def test_completions_beyond_parallelism_failure_and_next_pod_join(stack, kube, namespace, only_nodes):
    """completions 6 > parallelism 3 = minMember: one pod finishes (the Job makes its next pod) and
    one fails (the Job makes a replacement): both join the run; the Job completes, the PodGroup
    ends Finished in its first release."""
    only_nodes(1, **NODE8)
    batch = client.BatchV1Api(kube)
    first = start_gang(kube, namespace, "waves", 3, job("waves", 6, 3, backoffLimit=3))
    a, b, _ = sorted(live(kube, namespace, "waves"), key=lambda p: p.metadata.name)
    end_pod(kube, namespace, a, "Succeeded", 0)
    end_pod(kube, namespace, b, "Failed", 1)
    replacement_joins(kube, namespace, "waves", first["scheduleStartTime"], 3, 1, 1)
    # the rest of the run: every active pod finishes, wave after wave
    deadline = time.monotonic() + 60
    while (batch.read_namespaced_job("waves", namespace).status.succeeded or 0) < 6:
        assert time.monotonic() < deadline, "the Job never completed"
        assert not [p for p in live(kube, namespace, "waves") if gated(p) and time.monotonic() - p.metadata
                    .creation_timestamp.timestamp() > 15], "a member waited gated 15 s"
        for p in active(kube, namespace, "waves"):
            if running(p):
                end_pod(kube, namespace, p, "Succeeded", 0)
        time.sleep(0.5)
    st = wait_for(lambda: (s := status(kube, namespace, "waves")).get("phase") == "Finished" and s, 20,
                  what="Finished")
    assert st["scheduleStartTime"] == first["scheduleStartTime"], st


def test_backoff_limit_per_index_retry_joins_then_the_index_fails_for_good(stack, kube, namespace, only_nodes):
    """backoffLimitPerIndex 1: index 3 succeeds, index 2 fails, its retry joins the run; the retry
    fails too, index 2 is failed for good (no replacement) and the rest keeps running, released."""
    only_nodes(1, **NODE8)
    body = job("bli", 4, 4, completionMode="Indexed", backoffLimitPerIndex=1, maxFailedIndexes=2)
    first = start_gang(kube, namespace, "bli", 4, body)
    pods = by_index(live(kube, namespace, "bli"))
    end_pod(kube, namespace, pods[3], "Succeeded", 0)
    end_pod(kube, namespace, pods[2], "Failed", 1)
    replacement_joins(kube, namespace, "bli", first["scheduleStartTime"], 3, 1, 1)
    retry = by_index(active(kube, namespace, "bli"))[2]
    end_pod(kube, namespace, retry, "Failed", 1)
    wait_for(lambda: (client.BatchV1Api(kube).read_namespaced_job("bli", namespace).status.failed or 0) >= 2, 15,
             what="the Job counts both failures")
    time.sleep(3)  # no replacement comes for an index failed for good; the rest keeps running
    pods = active(kube, namespace, "bli")
    assert sorted(by_index(pods)) == [0, 1] and all(running(p) for p in pods), [p.metadata.name for p in pods]
    st = status(kube, namespace, "bli")
    assert st["scheduleStartTime"] == first["scheduleStartTime"], st


@pytest.mark.parametrize("exit_code,replaced", [(42, True), (7, True), (3, False)])
def test_pod_failure_policy(stack, kube, namespace, only_nodes, exit_code, replaced):
    """podFailurePolicy: exit code 42 is ``Ignore`` (not counted, replaced), 7 is ``Count``
    (replaced within backoffLimit), 3 is ``FailIndex`` (index failed for good, no replacement). One
    pod succeeded first. A replacement joins the run; without one the rest keeps running."""
    only_nodes(1, **NODE8)
    policy = {"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}},
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [3, 42]}},
    ]}
    body = job("pfp", 4, 4, completionMode="Indexed", backoffLimitPerIndex=2, podFailurePolicy=policy)
    body["spec"]["template"]["spec"]["containers"][0]["name"] = "main"
    first = start_gang(kube, namespace, "pfp", 4, body)
    pods = by_index(live(kube, namespace, "pfp"))
    end_pod(kube, namespace, pods[0], "Succeeded", 0)
    end_pod(kube, namespace, pods[1], "Failed", exit_code)
    if replaced:
        replacement_joins(kube, namespace, "pfp", first["scheduleStartTime"], 3, 1, 1)
        assert 1 in by_index(active(kube, namespace, "pfp"))
    else:
        time.sleep(3)
        pods = active(kube, namespace, "pfp")
        assert sorted(by_index(pods)) == [2, 3] and all(running(p) for p in pods), [p.metadata.name for p in pods]
        assert not [p for p in live(kube, namespace, "pfp") if gated(p) or not bound(p)]
        assert status(kube, namespace, "pfp")["scheduleStartTime"] == first["scheduleStartTime"]
