"""Role minimums (issue 33 item 1) with the real KubeRay and MPI operator, on the local control plane.

Each PodGroup states a minimum per role (annotation ``cogate.dev/role-minimums``); the role of a
member is read from the label its operator writes (``ray.io/group``,
``training.kubeflow.org/replica-type``). Two ways a user gets the annotation on an operator's
PodGroup are shown: KubeRay uses a PodGroup that already exists under the RayCluster's name (it is
created first, with the annotation), the MPI operator's own PodGroup is annotated before any node
exists (so nothing can be released in between). In both shapes scheduler-plugins' global
minMember rule would have run part of the job; cogate holds the whole gang and names the short role.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
from kubernetes import client

from cogate.localcluster import example
from cogate.localcluster import nodes as fake_nodes
from cogate.localcluster.operators import KUBERAY, MPI_OPERATOR, Operator

from .conftest import running
from .kube import bound, create_pod_group, gated, group_pods, hold_gated, wait_for
from .test_operators import (DEFAULT_SCHEDULER, container, create_mpijob, mpijob, operator_pod_group,
                             released_says)

pytestmark = pytest.mark.e2e

ROLES = "cogate.dev/role-minimums"
GPU = "nvidia.com/gpu"
NODE = dict(kwok_taint=False, **example.NODE_SHAPE)  # cpu 10, memory 8Gi


@pytest.fixture(scope="module")
def kuberay(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(KUBERAY, cluster, tmp_path_factory, "scheduler-plugins")


@pytest.fixture(scope="module")
def mpi_operator(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(MPI_OPERATOR, cluster, tmp_path_factory, DEFAULT_SCHEDULER)


def add_node(kube, name: str, **shape: Any) -> None:
    """One more fake node (besides those of ``only_nodes``), Ready before this returns."""
    core = client.CoreV1Api(kube)
    core.create_node(fake_nodes.node_manifest(name, **shape))
    wait_for(lambda: fake_nodes.node_ready(kube.sanitize_for_serialization(core.read_node(name))), 60,
             what=f"node {name} Ready")


def ray_group(name: str, replicas: int, cpu: str, gpu: int = 0) -> dict[str, Any]:
    c = container("ray-worker", cpu) | {"image": "registry.invalid/ray:2"}
    if gpu:
        for k in ("requests", "limits"):
            c["resources"][k][GPU] = str(gpu)
    return {"groupName": name, "replicas": replicas, "minReplicas": replicas, "maxReplicas": replicas,
            "rayStartParams": {}, "template": {"spec": {"containers": [c]}}}


def raycluster(name: str, cpu_workers: int, gpu_workers: int) -> dict[str, Any]:
    """A RayCluster: a head (1 CPU), a CPU group ``cpu`` (1 CPU each), a GPU group ``gpu`` (1 CPU, 1 GPU each)."""
    head = container("ray-head", "1") | {"image": "registry.invalid/ray:2"}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "labels": {"ray.io/gang-scheduling-enabled": "true"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
                     "workerGroupSpecs": [ray_group("cpu", cpu_workers, "1"), ray_group("gpu", gpu_workers, "1", 1)]}}


def test_raycluster_whose_gpu_group_is_short_stays_gated_whole_and_names_the_role(stack, kube, namespace,
                                                                                  only_nodes, kuberay):
    """Head + 4 CPU workers + 2 GPU workers on one node with one GPU; the PodGroup (made before the
    RayCluster, which KubeRay then uses) says minMember 5 and a minimum per role. Head + 4 CPU
    workers are 5: scheduler-plugins' rule would run them with the GPU group short. cogate holds all
    7 gated and says "role gpu fits 1 of 2"; a second GPU node releases the gang whole."""
    only_nodes(1, extended={GPU: 1}, **NODE)
    pg = example.pod_group("rc", 5, namespace=namespace, timeout_seconds=None)
    pg["metadata"]["annotations"] = {ROLES: json.dumps({"headgroup": 1, "cpu": 2, "gpu": 2})}
    create_pod_group(kube, pg)
    client.CustomObjectsApi(kube).create_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters",
                                                                  raycluster("rc", 4, 2))
    wait_for(lambda: len(group_pods(kube, namespace, "rc")) == 7, 30, what="KubeRay's 7 pods")
    cond = released_says(kuberay, kube, namespace, "rc", "InsufficientCapacity", "role gpu fits 1 of 2",
                         "nvidia.com/gpu")
    assert cond["message"].startswith("fits all 5 (room for 6) even with every eligible node empty, but role gpu fits 1 of 2"), cond
    hold_gated(kube, namespace, "rc", 3, 7)
    add_node(kube, "e2e-roles-gpu", extended={GPU: 1}, **NODE)
    wait_for(lambda: all(bound(p) and not gated(p) for p in group_pods(kube, namespace, "rc")), 40,
             what="all 7 members of rc bound once a second GPU exists")


def test_mpijob_whose_launcher_fits_but_workers_do_not_stays_gated_and_names_the_role(stack, kube, namespace,
                                                                                     only_nodes, mpi_operator):
    """An MPIJob of a launcher (1 CPU) and 4 workers (3 CPU) with ``minAvailable: 2``, annotated
    ``{"launcher": 1, "worker": 4}``; one node of 10 CPU holds the launcher and 3 workers. The global
    rule (minMember 2) would start the launcher and 3 workers, and the launcher would wait for the
    fourth for ever; cogate holds all 5 gated and names the role."""
    only_nodes(0)
    body = mpijob("mj", 4, "3", runPolicy={"cleanPodPolicy": "Running", "schedulingPolicy": {"minAvailable": 2}})
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"] = [container("launcher", "1")]
    create_mpijob(kube, namespace, body)
    pg = operator_pod_group(mpi_operator, kube, namespace, "mj")
    assert pg["spec"]["minMember"] == 2, pg
    client.CustomObjectsApi(kube).patch_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "mj",
        {"metadata": {"annotations": {ROLES: json.dumps({"launcher": 1, "worker": 4})}}})
    wait_for(lambda: len(group_pods(kube, namespace, "mj")) == 5, 30, what="the MPI operator's 5 pods")
    add_node(kube, "e2e-roles-mpi", **NODE)
    cond = released_says(mpi_operator, kube, namespace, "mj", "InsufficientCapacity", "role worker fits 3 of 4")
    assert cond["message"].startswith("fits all 2 (room for 4) even with every eligible node empty, but role worker fits 3 of 4: "
                                      "cpu short by"), cond
    hold_gated(kube, namespace, "mj", 3, 5)
