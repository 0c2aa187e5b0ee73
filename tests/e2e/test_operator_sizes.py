"""Operators whose size can never complete their gang (issue 34 item 2), with the real operators
on the local control plane: KubeRay (its scheduler-plugins PodGroup is not updated when the
RayCluster scales, ray-project/kuberay#5205) and the MPI operator.

A RayCluster of a head and 4 workers (2 CPU each) gets KubeRay's PodGroup of minMember 5; one
8-CPU node holds 4 of them, so the gang waits gated. Scaled to 2 workers, KubeRay deletes two:
3 pods, minMember still 5. cogate says so on the PodGroup and on the RayCluster in the pass that
sees the pods go; opted in (``cogate.dev/follow-owner-size``), the gang follows the RayCluster's
size and its 3 pods are released.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from kubernetes import client

from cogate.controller.release.sizing import CACHE_SECONDS
from cogate.localcluster.operators import KUBERAY, MPI_OPERATOR, Operator

from .conftest import running
from .kube import bound, condition, events_for, gated, group_pods, status, wait_for
from .test_operators import DEFAULT_SCHEDULER, create_mpijob, mpijob, operator_pod_group, raycluster

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, cpu="8", memory="8Gi", pods=110)
#: How long a test waits for the pass that sees the pods go: half the owner read's cache window, so a
#: judgement that came from the cache running out (a missed change of members) fails the test.
WITHIN_THE_CACHE = CACHE_SECONDS / 2
FOLLOW = "cogate.dev/follow-owner-size"


@pytest.fixture(scope="module")
def kuberay(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(KUBERAY, cluster, tmp_path_factory, "scheduler-plugins")


@pytest.fixture(scope="module")
def mpi_operator(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(MPI_OPERATOR, cluster, tmp_path_factory, DEFAULT_SCHEDULER)


def _messages(kube, namespace: str, name: str, kind: str, reason: str) -> list[str]:
    return [e.message for e in events_for(kube, namespace, name, kind) if e.reason == reason]


def _ray_scaled_down(kube, namespace: str, kuberay: Operator, *, follow: bool) -> None:
    """The RayCluster of 4 workers waits gated; scaled to 2 workers; returns when its pods are down to 3."""
    api = client.CustomObjectsApi(kube)
    api.create_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", raycluster("rc", 4, "2"))
    pg = operator_pod_group(kuberay, kube, namespace, "rc")
    assert pg["spec"]["minMember"] == 5, pg
    wait_for(lambda: len(ps := group_pods(kube, namespace, "rc", deleting=False)) == 5 and all(gated(p) for p in ps),
             30, what="5 RayCluster pods, gated (4 of 5 fit)")
    if follow:
        api.patch_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "rc",
                                           {"metadata": {"annotations": {FOLLOW: "true"}}})
    api.patch_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", "rc",  # a JSON Patch
                                       [{"op": "replace", "path": "/spec/workerGroupSpecs/0/minReplicas", "value": 2},
                                        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}],
                                       _content_type="application/json-patch+json")
    wait_for(lambda: len(group_pods(kube, namespace, "rc", deleting=False)) == 3, 30,
             what="KubeRay deleted two workers")


def test_raycluster_scaled_below_minmember_is_told_on_the_podgroup_and_the_raycluster(
        stack, kube, namespace, only_nodes, kuberay):
    only_nodes(1, **NODE)
    _ray_scaled_down(kube, namespace, kuberay, follow=False)

    def told() -> Any:
        c = condition(status(kube, namespace, "rc"), "OwnerCanComplete")
        return c if c and c["status"] == "False" else None

    # told by the pass that saw the pods go (it reads the RayCluster again), not by the owner read's
    # cache running out (sizing.CACHE_SECONDS): the wait ends well inside that window
    c = wait_for(told, WITHIN_THE_CACHE, what="OwnerCanComplete=False before the owner read's cache ran out")
    assert c["reason"] == "OwnerTooSmall", c
    assert f"RayCluster {namespace}/rc keeps at most 3 pods (head 1 + workers 2" in c["message"], c
    assert "fewer than minMember 5: the gang can never form" in c["message"], c
    on_pg = wait_for(lambda: _messages(kube, namespace, "rc", "PodGroup", "OwnerCannotComplete"), 5,
                     what="the event on the PodGroup")
    on_rc = wait_for(lambda: _messages(kube, namespace, "rc", "RayCluster", "OwnerCannotComplete"), 5,
                     what="the event on the RayCluster")
    assert on_rc[0] == f"PodGroup {namespace}/rc: {on_pg[0]}", (on_pg, on_rc)
    time.sleep(2)
    assert all(gated(p) for p in group_pods(kube, namespace, "rc", deleting=False)), "nothing released"


def test_raycluster_followed_releases_the_three_pods_left(stack, kube, namespace, only_nodes, kuberay):
    only_nodes(1, **NODE)
    _ray_scaled_down(kube, namespace, kuberay, follow=True)
    try:
        pods = wait_for(lambda: (ps := group_pods(kube, namespace, "rc", deleting=False)) and len(ps) == 3
                        and all(bound(p) for p in ps) and ps, 20, what="the 3 pods bound")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nstatus: {status(kube, namespace, 'rc')}\nevents: "
                             f"{[(e.reason, e.message) for e in events_for(kube, namespace, 'rc', 'PodGroup')]}") \
            from None
    assert sorted((p.metadata.labels or {}).get("ray.io/node-type") for p in pods) == ["head", "worker", "worker"]
    st = status(kube, namespace, "rc")
    c = condition(st, "OwnerCanComplete")
    assert (c["status"], c["reason"]) == ("True", "FollowingOwnerSize") and "forms with 3" in c["message"], c
    assert condition(st, "Released")["status"] == "True"
    wait_for(lambda: _messages(kube, namespace, "rc", "RayCluster", "FollowingOwnerSize"), 5,
             what="FollowingOwnerSize on the RayCluster")
    got = client.CustomObjectsApi(kube).get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace,
                                                                     "podgroups", "rc")
    assert got["spec"]["minMember"] == 5, "spec.minMember stays as written"


def test_mpijob_edited_below_minmember_is_told_and_followed(stack, kube, namespace, only_nodes, mpi_operator):
    """An MPIJob of 4 workers with minAvailable 5 (launcher + 4) waits gated on a node too small;
    its workers edited to 2: told on the PodGroup and the MPIJob in one pass; opted in, the
    launcher and 2 workers are released."""
    only_nodes(1, **NODE)
    body = mpijob("pi", 4, "2")
    body["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 5}
    create_mpijob(kube, namespace, body)
    pg = operator_pod_group(mpi_operator, kube, namespace, "pi")
    assert pg["spec"]["minMember"] == 5, pg
    wait_for(lambda: len(ps := group_pods(kube, namespace, "pi", deleting=False)) == 5 and all(gated(p) for p in ps),
             30, what="launcher and 4 workers, gated")
    api = client.CustomObjectsApi(kube)
    api.patch_namespaced_custom_object("kubeflow.org", "v2beta1", namespace, "mpijobs", "pi",
                                       {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}}})
    wait_for(lambda: len(group_pods(kube, namespace, "pi", deleting=False)) == 3, 30, what="2 workers deleted")
    c = wait_for(lambda: (c := condition(status(kube, namespace, "pi"), "OwnerCanComplete"))
                 and c["status"] == "False" and c, WITHIN_THE_CACHE,
                 what="OwnerCanComplete=False before the owner read's cache ran out")
    assert f"MPIJob {namespace}/pi keeps at most 3 pods (launcher 1 + workers 2)" in c["message"], c
    wait_for(lambda: _messages(kube, namespace, "pi", "MPIJob", "OwnerCannotComplete"), 5, what="event on the MPIJob")
    api.patch_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "pi",
                                       {"metadata": {"annotations": {FOLLOW: "true"}}})
    wait_for(lambda: (ps := group_pods(kube, namespace, "pi", deleting=False)) and len(ps) == 3
             and all(bound(p) for p in ps), 20, what="launcher and 2 workers bound")
