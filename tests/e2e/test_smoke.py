"""The local control plane works end to end: kube-scheduler binds, kwok runs, controllers reconcile,
and teardown leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from cogate.localcluster.cluster import LocalCluster
from cogate.localcluster.procs import port_open, process_alive
from cogate.localcluster.nodes import KWOK_TAINT, add_nodes, node_manifest, node_ready, wait_nodes_ready

from .kube import scheduled_by_default_scheduler, wait_for

pytestmark = pytest.mark.e2e


def deployment(name: str, replicas: int, pool: str) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"cogate.test/pool": pool},
                    "tolerations": [{"key": KWOK_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "app", "image": "registry.invalid/app:1",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                },
            },
        },
    }


def test_deployment_scheduled_and_run_on_kwok_nodes(cluster, kube, namespace):
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    pool = namespace  # unique per test: these nodes only serve this test's pods
    nodes = add_nodes(cluster, 2, prefix=f"{namespace}-", cpu="4", memory="8Gi", labels={"cogate.test/pool": pool})
    try:
        for name in nodes:
            node = kube.sanitize_for_serialization(core.read_node(name))
            assert node_ready(node)
            assert node["status"]["allocatable"]["cpu"] == "4"
            assert {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"} in node["spec"]["taints"]

        apps.create_namespaced_deployment(namespace, deployment("web", 3, pool))

        def running_pods():
            pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
            ok = [p for p in pods if p.spec.node_name and p.status.phase == "Running" and p.status.pod_ip]
            return pods if len(pods) == 3 and len(ok) == 3 else None

        pods = wait_for(running_pods, 60, what="3 Running pods of Deployment web")
        assert {p.spec.node_name for p in pods} <= set(nodes)
        for p in pods:
            conds = {c.type: c.status for c in p.status.conditions}
            assert conds.get("PodScheduled") == "True" and conds.get("Ready") == "True", conds
        # bound by kube-scheduler (not by anyone setting nodeName): its Scheduled events
        names = {p.metadata.name for p in pods}
        wait_for(lambda: names <= scheduled_by_default_scheduler(kube, namespace), 15,
                 what="Scheduled events from default-scheduler")
        wait_for(lambda: (apps.read_namespaced_deployment("web", namespace).status.ready_replicas or 0) == 3,
                 30, what="Deployment web readyReplicas == 3")

        apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 0}})
        wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="app=web").items, 60,
                 what="pods of Deployment web gone after scale to 0")
    finally:
        for name in nodes:
            core.delete_node(name)


def test_node_created_with_kubectl_becomes_ready(cluster, kube):
    name = "kubectl-made-node"
    manifest = node_manifest(name, cpu="2", memory="4Gi", extended={"nvidia.com/gpu": 2}, kwok_taint=False)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    try:
        wait_nodes_ready(kube, [name], timeout=30)
        node = kube.sanitize_for_serialization(client.CoreV1Api(kube).read_node(name))
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
        assert not node["spec"].get("taints")
        out = cluster.kubectl("get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}")
        assert out.stdout == "True"
    finally:
        cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def test_detached_cluster_stops_from_state_and_leaves_nothing(tmp_path: Path):
    """``start(detach=True)`` + ``stop_from_state`` (the ``cogate dev up/down`` path): all pids gone,
    all ports closed, work dir removed. Starts its own short-lived control plane."""
    workdir = tmp_path / "dev"
    cluster = LocalCluster(workdir)
    state_path = cluster.start(detach=True)
    try:
        state = LocalCluster.read_state(state_path)
        pids = {name: p["pid"] for name, p in state["processes"].items()}
        ports = list(state["ports"].values())
        assert set(pids) == {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"}
        assert all(process_alive(pid) for pid in pids.values())
        assert all(port_open(p) for p in ports)
        attached = LocalCluster.attach(state_path)
        assert "default" in attached.kubectl("get", "serviceaccounts", "-n", "default", "-o", "name").stdout
        assert sum(attached.rss().values()) > 0
    except BaseException:
        LocalCluster.stop_from_state(state_path)
        raise
    LocalCluster.stop_from_state(state_path)
    assert [name for name, pid in pids.items() if process_alive(pid)] == []
    assert [p for p in ports if port_open(p)] == []
    assert not workdir.exists()


def test_job_pods_complete_and_job_succeeds(cluster, kube, namespace):
    """kwok's pod-complete stage: Job pods succeed after the delay in their annotation."""
    core, batch = client.CoreV1Api(kube), client.BatchV1Api(kube)
    nodes = add_nodes(cluster, 1, prefix=f"{namespace}-", labels={"cogate.test/pool": namespace})
    try:
        batch.create_namespaced_job(namespace, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "work"},
            "spec": {"completions": 2, "parallelism": 2, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}},
                "spec": {"restartPolicy": "Never", "nodeSelector": {"cogate.test/pool": namespace},
                         "tolerations": [{"key": KWOK_TAINT["key"], "operator": "Exists"}],
                         "containers": [{"name": "w", "image": "registry.invalid/w:1"}]}}},
        })
        wait_for(lambda: (batch.read_namespaced_job("work", namespace).status.succeeded or 0) == 2, 60,
                 what="Job work succeeded == 2")
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=work").items
        assert len(pods) == 2 and {p.status.phase for p in pods} == {"Succeeded"}
        assert {p.spec.node_name for p in pods} == set(nodes)
    finally:
        for name in nodes:
            core.delete_node(name)


def test_failed_start_reports_log_tail_and_stops_what_started(tmp_path: Path):
    cluster = LocalCluster(tmp_path / "bad", extra_args={"kube-apiserver": ["--no-such-flag"]})
    with pytest.raises(Exception) as err:
        cluster.start()
    assert "kube-apiserver exited" in str(err.value)
    assert "no-such-flag" in str(err.value)  # the apiserver's own complaint, from its log tail
    assert not any(process_alive(pid) for pid in cluster.pids.values())
    assert not any(port_open(p) for p in cluster.ports.values())
