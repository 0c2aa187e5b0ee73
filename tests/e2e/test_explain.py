"""``cogate explain`` and ``kubectl cogate explain`` against the real local control plane (issue 31).

- the README example (one node of 10 CPU, a ReplicaSet of 6 pods of 3 CPU): minMember 4 -> "fits 3
  of 4", the shortfall per node group, exit 1, the same as the PodGroup's ``Released`` condition
  the running controller wrote; through the real kubectl as a plugin (``kubectl-cogate`` on PATH);
  minMember 3 -> the group runs, exit 0;
- for several shapes, ``explain -f`` on the manifest BEFORE it is applied says what the running
  controller writes AFTER (reason and message of ``Released``): fits, short of cpu behind a
  running pod, excluded by a taint, one member per node (pod anti-affinity and topology spread), the
  README example; with preemption, the victims explain names
  are the pods the controller preempts, and the gang then starts as explain said it would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cogate.localcluster import build, example

from .kube import condition, create_pod_group, priority_classes, running, status, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def drained(kube, namespace):
    """After each test, its pods gone before the next starts: a group left gated in a namespace still
    being deleted would fit the next test's node and be released first, by the controller and by
    explain alike (seen once: the preemption test's gang then "fits 1 of 2 even with" every victim gone)."""
    yield
    core = client.CoreV1Api(kube)
    client.AppsV1Api(kube).delete_collection_namespaced_replica_set(namespace)  # else they make new pods
    wait_for(lambda: not client.AppsV1Api(kube).list_namespaced_replica_set(namespace).items, 30,
             what=f"the ReplicaSets of {namespace} gone")
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, 60, what=f"the pods of {namespace} gone")


def explain(stack, *args: str, kubectl: bool = False) -> subprocess.CompletedProcess:
    """``cogate explain ARGS`` (or ``kubectl cogate explain ARGS`` through the pinned kubectl, the
    venv's ``kubectl-cogate`` on PATH) against the session's cluster."""
    kc = str(stack.cluster.kubeconfig)
    cmd = ([str(build.binary("kubectl")), "cogate", "explain"] if kubectl
           else [sys.executable, "-m", "cogate.cli", "explain"])
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([*cmd, *args, "--kubeconfig", kc], capture_output=True, text=True, timeout=120, env=env)


def released(kube, namespace: str, name: str) -> dict[str, Any] | None:
    return condition(status(kube, namespace, name), "Released")


def settles_to(kube, namespace: str, name: str, want: dict[str, str], timeout: float = 30) -> dict[str, Any]:
    """The PodGroup's ``Released`` condition once it says ``want`` (status, reason, message): members
    appear one by one, so earlier texts may differ; asserted equal (with the last seen) at the end."""
    last: dict[str, Any] = {}

    def same():
        nonlocal last
        last = released(kube, namespace, name) or {}
        return all(last.get(k) == want[k] for k in ("status", "reason", "message")) and last
    try:
        return wait_for(same, timeout, interval=0.2, what=f"Released = {want}")
    except AssertionError:
        assert {k: last.get(k) for k in ("status", "reason", "message")} == \
            {k: want[k] for k in ("status", "reason", "message")}
        raise


def readme_example(kube, namespace: str, min_member: int) -> None:
    create_pod_group(kube, example.pod_group("nginx", min_member, namespace=namespace))
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("nginx", 6, namespace=namespace, group="nginx"))


def test_readme_example_min_member_4_fits_3_of_4_and_exits_1(stack, kube, namespace, only_nodes):
    (node,) = only_nodes(1, **NODE)
    readme_example(kube, namespace, 4)
    cond = wait_for(lambda: (c := released(kube, namespace, "nginx")) and "fits 3 of 4" in c.get("message", "") and c,
                    20, what="Released=False fits 3 of 4")
    out = explain(stack, "nginx", "-n", namespace)
    assert out.returncode == 1, out.stderr + out.stdout
    assert "would not start" in out.stdout and "fits 3 of 4" in out.stdout
    assert f"({node}): first shortfall: cpu: needs 3, 1 free" in out.stdout, out.stdout
    as_json = json.loads(explain(stack, "podgroup", "nginx", "-n", namespace, "-o", "json").stdout)
    assert (as_json["condition"]["reason"], as_json["condition"]["message"]) == (cond["reason"], cond["message"])
    assert len(as_json["placements"]) == 3 and {p["node"] for p in as_json["placements"]} == {node}
    more = explain(stack, "nginx", "-n", namespace, "--add-nodes", "1", "--node-template", node)
    assert more.returncode == 1 and f"with: 1 more node ({node}-explain-0): it would start" in more.stdout, more.stdout
    plugin = explain(stack, "nginx", "-n", namespace, kubectl=True)
    assert plugin.returncode == 1, plugin.stderr + plugin.stdout
    assert plugin.stdout == out.stdout


def test_readme_example_min_member_3_fits_and_exits_0(stack, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    readme_example(kube, namespace, 3)
    wait_for(lambda: status(kube, namespace, "nginx").get("running") == 3, 30, what="3 members running")
    out = explain(stack, "nginx", "-n", namespace)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "(minMember 3): released (phase Running)" in out.stdout and "Released=True" in out.stdout, out.stdout
    plugin = explain(stack, "pg", "nginx", "-n", namespace, kubectl=True)
    assert plugin.returncode == 0, plugin.stderr + plugin.stdout


def test_unknown_pod_group_and_bad_manifest_exit_2(stack, namespace, tmp_path):
    out = explain(stack, "nope", "-n", namespace)
    assert out.returncode == 2 and out.stderr.strip() == f"cogate explain: PodGroup {namespace}/nope not found"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
    out = explain(stack, "-f", str(bad), "-n", namespace)
    assert out.returncode == 2 and "no PodGroup" in out.stderr and out.stderr.count("\n") == 1


def pods_of(group: str, count: int, cpu: str = "3", priority_class: str | None = None) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        tpl = example.pod_template(group, cpu=cpu, app=group)
        tpl["metadata"]["name"] = f"{group}-{i}"
        if priority_class:
            tpl["spec"]["priorityClassName"] = priority_class
        out.append({"apiVersion": "v1", "kind": "Pod", **tpl})
    return out


def spread_pods(group: str, count: int) -> list[dict[str, Any]]:
    """``count`` members of 1 CPU, at most one per node (required pod anti-affinity on the hostname) and
    spread over the nodes (hard topology spread, maxSkew 1)."""
    out = pods_of(group, count, cpu="1")
    selector = {"matchLabels": {"app": group}}
    for p in out:
        p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}
        p["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                   "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]
    return out


def filler(namespace: str, cpu: str, priority_class: str | None = None, name: str = "filler") -> dict[str, Any]:
    """A Running pod outside any group taking ``cpu``."""
    tpl = example.pod_template(None, cpu=cpu, app=name)
    tpl["metadata"]["name"] = name
    if priority_class:
        tpl["spec"]["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


#: shape -> (node keywords, count, pods running first (namespace -> pods), the manifest (namespace -> docs))
SHAPES = {
    "fits": (NODE, 1, lambda ns: [], lambda ns: [example.pod_group("g", 2, namespace=ns), *pods_of("g", 2)]),
    "readme-min-member-4": (NODE, 1, lambda ns: [], lambda ns: [
        example.pod_group("nginx", 4, namespace=ns), example.replica_set("nginx", 6, namespace=ns, group="nginx")]),
    "short-of-cpu-behind-a-running-pod": (NODE, 1, lambda ns: [filler(ns, "6")],
                                          lambda ns: [example.pod_group("g", 2, namespace=ns), *pods_of("g", 2)]),
    "topology-one-per-node": (NODE, 2, lambda ns: [],
                              lambda ns: [example.pod_group("g", 3, namespace=ns), *spread_pods("g", 3)]),
    "excluded-by-taint": (dict(NODE, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]), 2,
                          lambda ns: [], lambda ns: [example.pod_group("g", 2, namespace=ns), *pods_of("g", 2)]),
}


#: shape -> what explain's message must say (so each shape exercises the rule it is named after)
SAYS = {"fits": "fits 2 of 2: releasing 2", "readme-min-member-4": "fits 3 of 4",
        "short-of-cpu-behind-a-running-pod": "fits 1 of 2", "topology-one-per-node": "fits 2 of 3",
        "excluded-by-taint": "taint dedicated=gpu"}


def apply(kube, namespace: str, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if doc["kind"] == "PodGroup":
            create_pod_group(kube, {**doc, "metadata": {**doc["metadata"], "namespace": namespace}})
        elif doc["kind"] == "Pod":
            client.CoreV1Api(kube).create_namespaced_pod(namespace, doc)
        else:
            client.AppsV1Api(kube).create_namespaced_replica_set(namespace, doc)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_manifest_before_applying_says_what_the_controller_writes_after(stack, kube, namespace, only_nodes, tmp_path,
                                                                        shape):
    node_shape, count, first, manifest = SHAPES[shape]
    only_nodes(count, **node_shape)
    for p in first(namespace):
        client.CoreV1Api(kube).create_namespaced_pod(namespace, p)
    wait_for(lambda: all(running(p) for p in client.CoreV1Api(kube).list_namespaced_pod(namespace).items), 30,
             what="the pods running first")
    docs = manifest(namespace)
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    out = explain(stack, "-f", str(path), "-n", namespace, "-o", "json")
    assert out.returncode in (0, 1), out.stderr
    before = json.loads(out.stdout)
    assert SAYS[shape] in before["condition"]["message"], before["condition"]
    apply(kube, namespace, docs)
    name = docs[0]["metadata"]["name"]
    after = settles_to(kube, namespace, name, before["condition"])
    assert (out.returncode == 0) == (after["status"] == "True")


def test_preemption_victims_are_the_pods_the_controller_preempts(stack, kube, namespace, only_nodes, tmp_path):
    (node,) = only_nodes(1, **NODE)
    with priority_classes(kube, low=100, high=1000) as classes:
        core = client.CoreV1Api(kube)
        for i in range(3):
            core.create_namespaced_pod(namespace, filler(namespace, "3", classes["low"], name=f"low-{i}"))
        wait_for(lambda: sum(running(p) for p in core.list_namespaced_pod(namespace).items) == 3, 30,
                 what="3 low-priority pods running")
        docs = [example.pod_group("g", 2, namespace=namespace), *pods_of("g", 2, priority_class=classes["high"])]
        path = tmp_path / "manifest.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        out = explain(stack, "-f", str(path), "-n", namespace, "-o", "json")
        assert out.returncode == 1, out.stderr + out.stdout
        before = json.loads(out.stdout)
        assert before["condition"]["reason"] == "InsufficientCapacity", before
        predicted = {v.split(" on ")[0].split("/")[1] for v in before["preemption"]["victims"]}
        on_node = [(p.metadata.namespace, p.metadata.name, p.spec.priority, p.status.phase, p.spec.node_name)
                   for p in core.list_pod_for_all_namespaces().items if p.spec.node_name == node]
        assert before["preemption"]["starts"] and len(predicted) == 2, (before, on_node)
        apply(kube, namespace, docs)

        wait_for(lambda: (c := released(kube, namespace, "g")) and c["status"] == "True", 60, what="the gang released")
        left = {p.metadata.name for p in core.list_namespaced_pod(namespace).items
                if p.metadata.name.startswith("low-") and not p.metadata.deletion_timestamp}
        taken = {f"low-{i}" for i in range(3)} - left
        assert taken == predicted
