"""The real MPI operator, KubeRay and the training-operator against cogate (issue 20 item 5), on
the local control plane.

Each operator is built from its pinned module (``versions.OPERATOR_TOOLS``) and runs once per
module as a local process (:class:`cogate.localcluster.operators.Operator`); each test works in a
fresh namespace (the reset), the MPI operator is restarted only when a test needs another
``--gang-scheduling`` name. Pods run on kwok fake nodes (Running and Ready once bound). What is
asserted is what a user of the operator sees: the PodGroup the operator made, the pods' gates,
scheduler name and nodes, and the account of why it waits on the PodGroup and on the operator's
own object (issue 20 items 1, 3 and 4 as the operators meet them). The operators' table of
docs/migration/scheduler-plugins.md says which of its rows these tests check.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
from kubernetes import client

from cogate.localcluster import example
from cogate.localcluster.operators import KUBERAY, MPI_OPERATOR, TRAINING_OPERATOR, Operator

from .conftest import running
from .gangwatch import GangWatch
from .kube import (bound, condition, create_pod_group, events_for, gated, get_pod_group, group_pods, hold_gated,
                   status, wait_for)

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)  # cpu 10, memory 8Gi
#: What cogate releases to; the scheduler-plugins name the operators' docs (and KubeRay's code) use.
DEFAULT_SCHEDULER = "default-scheduler"
SCHEDULER_PLUGINS = "scheduler-plugins-scheduler"


@pytest.fixture(scope="module")
def mpi_operator(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(MPI_OPERATOR, cluster, tmp_path_factory, DEFAULT_SCHEDULER)


@pytest.fixture
def mpi(mpi_operator):
    """``mpi(name)``: the module's MPI operator running with ``--gang-scheduling=<name>`` (restarted
    only when the name changes); returns it."""
    def with_gang(name: str) -> Operator:
        if mpi_operator.scheduler != name:
            mpi_operator.restart(name)
        return mpi_operator

    return with_gang


@pytest.fixture(scope="module")
def kuberay(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(KUBERAY, cluster, tmp_path_factory, "scheduler-plugins")


@pytest.fixture(scope="module")
def training_operator(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(TRAINING_OPERATOR, cluster, tmp_path_factory, DEFAULT_SCHEDULER)


def explained(op: Operator, predicate, timeout: float, what: str, shown: Any = None):
    """:func:`wait_for`, whose failure also shows ``shown()`` (when given) and the operator's log tail."""
    try:
        return wait_for(predicate, timeout, what=what)
    except AssertionError as exc:
        extra = f"\n--- {shown()}" if shown else ""
        raise AssertionError(f"{exc}{extra}\n--- last lines of {op.log}:\n{op.log_tail(25)}") from None


def released_says(op: Operator, kube, namespace: str, group: str, reason: str, *parts: str,
                  timeout: float = 30) -> dict[str, Any]:
    """Wait until the group's Released condition is False with ``reason`` and names every part."""
    def says():
        c = condition(status(kube, namespace, group), "Released")
        return c if c and c["status"] == "False" and c["reason"] == reason and all(p in c["message"] for p in parts) \
            else None

    return explained(op, says, timeout, f"Released=False {reason} naming {parts}",
                     lambda: f"status of {group}: {status(kube, namespace, group)}")


def container(name: str, cpu: str) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": "500Mi"}
    return {"name": name, "image": "registry.invalid/mpi-pi:1", "resources": {"requests": res, "limits": res}}


def mpijob(name: str, workers: int, cpu: str, **spec: Any) -> dict[str, Any]:
    """An MPIJob (kubeflow.org/v2beta1) of 1 launcher + ``workers`` workers of ``cpu`` each."""
    def replicas(n: int, role: str) -> dict[str, Any]:
        return {"replicas": n, "template": {"spec": {"containers": [container(role, cpu)]}}}

    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {"slotsPerWorker": 1, "runPolicy": {"cleanPodPolicy": "Running"},
                     "mpiReplicaSpecs": {"Launcher": replicas(1, "launcher"), "Worker": replicas(workers, "worker")},
                     **spec}}


def create_mpijob(kube, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    return client.CustomObjectsApi(kube).create_namespaced_custom_object("kubeflow.org", "v2beta1", namespace,
                                                                         "mpijobs", body)


def operator_pod_group(op: Operator, kube, namespace: str, name: str) -> dict[str, Any]:
    """The PodGroup the operator created for ``name``, once it exists."""
    def made():
        try:
            return get_pod_group(kube, namespace, name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    return explained(op, made, 30, f"the operator's PodGroup {namespace}/{name}")


def bind_as_one_gang(op: Operator, kube, namespace: str, group: str, count: int, timeout: float = 40) -> list:
    """Poll until ``count`` members are bound; at every poll no member is bound while fewer than
    ``count`` members exist (a group released early, part placed, fails here). Returns the pods."""
    def all_bound():
        ps = group_pods(kube, namespace, group)
        placed = [p for p in ps if bound(p)]
        assert not placed or len(ps) == count, \
            f"{[p.metadata.name for p in placed]} bound while only {len(ps)} of {count} members exist"
        return ps if len(placed) == count else None

    return explained(op, all_bound, timeout, f"all {count} members of {group} bound")


def event_on(op: Operator, kube, namespace: str, name: str, kind: str, reason: str, *parts: str):
    """Wait for a Warning event ``reason`` on ``kind`` ``name`` whose message names every part."""
    def found():
        return next((e for e in events_for(kube, namespace, name, kind) if e.reason == reason
                     and e.type == "Warning" and all(p in e.message for p in parts)), None)

    return explained(op, found, 15, f"a Warning {reason} event on {kind} {name} naming {parts}",
                     lambda: [(e.reason, e.message) for e in events_for(kube, namespace, name, kind)])


def assert_released_as_one(watch: GangWatch, group: str, pods: list) -> None:
    """The gang of ``pods`` was released as one, judged from the gates and bindings the watch saw
    in the API server's order (tests/e2e/gangwatch.py): none bound before the PodGroup recorded the
    release, every gate removed, none bound unpinned while another still held the gate, each bound
    on the node its release pinned."""
    names = [p.metadata.name for p in pods]
    wait_for(lambda: all(any(s.name == n and s.bound for s in list(watch.log)) for n in names), 10,
             what=f"the watch saw the {len(names)} bindings of {group}")
    seen = sorted((s for s in list(watch.log) if s.group == group), key=lambda s: s.rv)
    assert watch.faults(group, members=names) == [], "\n".join(map(str, seen))  # the log, to read a failure


def launcher_and_workers(pods: list, name: str) -> tuple[list, list]:
    launchers = [p for p in pods if p.metadata.name.startswith(f"{name}-launcher")]
    workers = [p for p in pods if p.metadata.name.startswith(f"{name}-worker-")]
    return launchers, workers


# ------------------------------------------------------------------------------------ MPI operator

def test_mpijob_of_a_launcher_and_four_workers_binds_as_one_gang(stack, kube, namespace, only_nodes, mpi,
                                                                  gang_watch):
    """``--gang-scheduling=default-scheduler``: the operator's PodGroup (minMember 5 = 4 workers +
    1 launcher, owned by the MPIJob) releases the launcher (a Job's pod) and the workers together."""
    op = mpi(DEFAULT_SCHEDULER)
    only_nodes(2, **NODE)  # 2 x 10 CPU for 5 x 2 CPU
    create_mpijob(kube, namespace, mpijob("pi", 4, "2"))
    pg = operator_pod_group(op, kube, namespace, "pi")
    assert pg["spec"]["minMember"] == 5, pg
    assert [(o["kind"], o["name"], o.get("controller")) for o in pg["metadata"]["ownerReferences"]] == \
        [("MPIJob", "pi", True)], pg
    pods = bind_as_one_gang(op, kube, namespace, "pi", 5)
    launchers, workers = launcher_and_workers(pods, "pi")
    assert (len(launchers), len(workers)) == (1, 4), [p.metadata.name for p in pods]
    assert {p.spec.scheduler_name for p in pods} == {DEFAULT_SCHEDULER}
    assert not any(gated(p) for p in pods)
    assert_released_as_one(gang_watch, "pi", pods)
    st = wait_for(lambda: (s := status(kube, namespace, "pi")) and condition(s, "Released")
                  and condition(s, "Released")["status"] == "True" and s, 15, what="Released=True")
    assert condition(st, "Released")["status"] == "True", st


def test_mpijob_that_does_not_fit_stays_gated_whole_and_says_why(stack, kube, namespace, only_nodes, mpi):
    """5 x 3 CPU on one node of 10 CPU: three would fit; none is released, the PodGroup says so."""
    op = mpi(DEFAULT_SCHEDULER)
    only_nodes(1, **NODE)
    create_mpijob(kube, namespace, mpijob("big", 4, "3"))
    operator_pod_group(op, kube, namespace, "big")
    cond = released_says(op, kube, namespace, "big", "InsufficientCapacity", "fits 3 of 5")
    assert "fits 3 of 5" in cond["message"], cond
    hold_gated(kube, namespace, "big", 3, 5)
    # where the user looks (issue 20 item 4): the MPIJob carries the same reason
    event_on(op, kube, namespace, "big", "MPIJob", "InsufficientCapacity", "fits 3 of 5")


def test_mpijob_waiting_for_workers_ready_names_staged_creation(stack, kube, namespace, only_nodes, mpi):
    """``launcherCreationPolicy: WaitForWorkersReady``: the launcher comes only once the 4 workers
    are Ready, while minMember (5) counts it (kubeflow/mpi-operator #608). The workers stay gated
    and the PodGroup names the staged creation and what to change (issue 20 item 3)."""
    op = mpi(DEFAULT_SCHEDULER)
    only_nodes(2, **NODE)
    create_mpijob(kube, namespace, mpijob("staged", 4, "1", launcherCreationPolicy="WaitForWorkersReady"))
    assert operator_pod_group(op, kube, namespace, "staged")["spec"]["minMember"] == 5
    cond = released_says(op, kube, namespace, "staged", "WaitingForMembers", "4 of 5 members present",
                         "WaitForWorkersReady")
    assert f"MPIJob {namespace}/staged" in cond["message"] and "launcherCreationPolicy" in cond["message"], cond
    event_on(op, kube, namespace, "staged", "PodGroup", "StagedCreation", "WaitForWorkersReady")
    event_on(op, kube, namespace, "staged", "MPIJob", "StagedCreation", "WaitForWorkersReady", "AtStartup")
    hold_gated(kube, namespace, "staged", 2, 4)
    launchers, workers = launcher_and_workers(group_pods(kube, namespace, "staged"), "staged")
    assert (len(launchers), len(workers)) == (0, 4)


def test_mpijob_for_scheduler_plugins_is_adopted_and_bound(stack, kube, namespace, only_nodes, mpi, gang_watch):
    """``--gang-scheduling=scheduler-plugins-scheduler``, as the operator's docs say for
    scheduler-plugins: the webhook rewrites each member's schedulerName to the scheduler cogate
    releases to (issue 20 item 1), so the gang binds instead of waiting for a scheduler that does
    not exist."""
    op = mpi(SCHEDULER_PLUGINS)
    only_nodes(2, **NODE)
    create_mpijob(kube, namespace, mpijob("sp", 4, "2"))
    pods = bind_as_one_gang(op, kube, namespace, "sp", 5)
    assert {p.spec.scheduler_name for p in pods} == {DEFAULT_SCHEDULER}
    assert_released_as_one(gang_watch, "sp", pods)
    # the operator asked for scheduler-plugins-scheduler: its launcher Job (not a pod, so not
    # rewritten) still says so
    job = client.BatchV1Api(kube).read_namespaced_job("sp-launcher", namespace)
    assert job.spec.template.spec.scheduler_name == SCHEDULER_PLUGINS, job.spec.template.spec


# ------------------------------------------------------------------------------------------ KubeRay

def raycluster(name: str, workers: int, cpu: str) -> dict[str, Any]:
    """A RayCluster (ray.io/v1) of a head and ``workers`` workers of ``cpu`` each, gang-scheduled."""
    def template(role: str) -> dict[str, Any]:
        c = container(role, cpu) | {"image": "registry.invalid/ray:2"}
        return {"spec": {"containers": [c]}}

    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "labels": {"ray.io/gang-scheduling-enabled": "true"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": template("ray-head")},
                     "workerGroupSpecs": [{"groupName": "wg", "replicas": workers, "minReplicas": workers,
                                           "maxReplicas": workers, "rayStartParams": {},
                                           "template": template("ray-worker")}]}}


def test_raycluster_head_and_workers_bind_together_with_the_scheduler_name_adopted(stack, kube, namespace,
                                                                                    only_nodes, kuberay, gang_watch):
    """``--batch-scheduler=scheduler-plugins``: KubeRay's PodGroup (named after the RayCluster,
    minMember 4 = 3 workers + head) and every pod with ``schedulerName: scheduler-plugins-scheduler``;
    cogate adopts the name and releases head and workers together."""
    only_nodes(2, **NODE)
    client.CustomObjectsApi(kube).create_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters",
                                                                  raycluster("rc", 3, "2"))
    pg = operator_pod_group(kuberay, kube, namespace, "rc")
    assert pg["spec"]["minMember"] == 4, pg
    assert [(o["kind"], o["name"]) for o in pg["metadata"]["ownerReferences"]] == [("RayCluster", "rc")], pg
    pods = bind_as_one_gang(kuberay, kube, namespace, "rc", 4)
    roles = sorted((p.metadata.labels or {}).get("ray.io/node-type", "?") for p in pods)
    assert roles == ["head", "worker", "worker", "worker"], roles
    assert {p.spec.scheduler_name for p in pods} == {DEFAULT_SCHEDULER}
    assert_released_as_one(gang_watch, "rc", pods)


# ------------------------------------------------------------------------------- training-operator

def pytorchjob(name: str, workers: int, cpu: str, container_name: str = "pytorch") -> dict[str, Any]:
    """A PyTorchJob (kubeflow.org/v1) of a master and ``workers`` workers of ``cpu`` each."""
    def replicas(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [container(container_name, cpu)]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(workers)}}}


def test_pytorchjob_binds_as_one_gang_with_the_operators_webhook_served(stack, kube, namespace, only_nodes,
                                                                        training_operator, gang_watch):
    """``--gang-scheduler-name=default-scheduler``: the training-operator's PodGroup (minMember 4 =
    master + 3 workers) releases them together. Its validating webhook answers the API server
    on 127.0.0.1 with the certificate made here (a job it refuses is refused by it)."""
    only_nodes(2, **NODE)
    api = client.CustomObjectsApi(kube)
    with pytest.raises(client.ApiException) as refused:
        api.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs",
                                            pytorchjob("bad", 1, "1", container_name="main"))
    assert refused.value.status in (400, 403, 422) and "must have at least one container with name pytorch" \
        in refused.value.body, refused.value.body
    api.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", pytorchjob("torch", 3, "2"))
    pg = operator_pod_group(training_operator, kube, namespace, "torch")
    assert pg["spec"]["minMember"] == 4, pg
    pods = bind_as_one_gang(training_operator, kube, namespace, "torch", 4)
    assert sorted(p.metadata.labels.get("training.kubeflow.org/replica-type") for p in pods) == \
        ["master", "worker", "worker", "worker"]
    assert {p.spec.scheduler_name for p in pods} == {DEFAULT_SCHEDULER}
    assert_released_as_one(gang_watch, "torch", pods)


# ------------------------------------------- training-operator scaled down, with role minimums (issue 33)

ROLES = "cogate.dev/role-minimums"


def roles_pod_group(kube, namespace: str, name: str, min_member: int, minimums: dict[str, int]) -> None:
    """The PodGroup the training-operator will use (it takes one that exists under the job's name
    and rewrites only its spec), made first with role minimums."""
    pg = example.pod_group(name, min_member, namespace=namespace, timeout_seconds=None)
    pg["metadata"]["annotations"] = {ROLES: json.dumps(minimums)}
    create_pod_group(kube, pg)


def scale_workers(kube, namespace: str, name: str, workers: int) -> None:
    client.CustomObjectsApi(kube).patch_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", name,
        {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": workers}}}})


def test_pytorchjob_scaled_down_while_it_waits_is_held_until_its_role_minimums_are_lowered(
        stack, kube, namespace, only_nodes, training_operator, gang_watch):
    """Master + 4 workers of 3 CPU with role minimums ``{"master": 1, "worker": 4}`` on one node of
    10 CPU (3 fit): held whole. Scaled to 2 workers, the operator lowers minMember to 3 and deletes
    the two gated workers; the annotation still asks for 4 workers, so cogate keeps the 3 left
    gated and says what to change (it never lowers a role minimum itself). Lowered to 2 workers,
    the three are released as one gang."""
    op = training_operator
    only_nodes(1, **NODE)
    roles_pod_group(kube, namespace, "shrink", 5, {"master": 1, "worker": 4})
    client.CustomObjectsApi(kube).create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs",
                                                                  pytorchjob("shrink", 4, "3"))
    released_says(op, kube, namespace, "shrink", "InsufficientCapacity", "fits 3 of 5", "role ")
    hold_gated(kube, namespace, "shrink", 2, 5)
    scale_workers(kube, namespace, "shrink", 2)
    explained(op, lambda: get_pod_group(kube, namespace, "shrink")["spec"]["minMember"] == 3, 30,
              "the operator's minMember 3")
    cond = released_says(op, kube, namespace, "shrink", "WaitingForMembers", "role worker: 2 of 4 members present",
                         "meet minMember 3 but the role minimums ask for 5", f"lower annotation {ROLES}")
    assert "if the job was scaled down" in cond["message"], cond
    explained(op, lambda: len(group_pods(kube, namespace, "shrink", deleting=False)) == 3, 30,
              "the operator's 3 pods left")
    hold_gated(kube, namespace, "shrink", 3, 3)  # none half-placed: the 3 left wait whole
    client.CustomObjectsApi(kube).patch_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "shrink",
        {"metadata": {"annotations": {ROLES: json.dumps({"master": 1, "worker": 2})}}})
    pods = bind_as_one_gang(op, kube, namespace, "shrink", 3)
    assert sorted(p.metadata.labels["training.kubeflow.org/replica-type"] for p in pods) == \
        ["master", "worker", "worker"]
    assert_released_as_one(gang_watch, "shrink", pods)
    st = wait_for(lambda: (s := status(kube, namespace, "shrink")) and (c := condition(s, "Released"))
                  and c["status"] == "True" and s.get("phase") == "Running" and s.get("running") == 3 and s, 15,
                  what="Released=True, phase Running with 3 running")
    assert condition(st, "Satisfied")["status"] == "True", st


def test_running_pytorchjob_scaled_down_keeps_its_gang_with_the_operators_new_minimum(
        stack, kube, namespace, only_nodes, training_operator):
    """Master + 3 workers with role minimums ``{"master": 1, "worker": 3}``, released and bound.
    Scaled to 1 worker: the operator lowers minMember to 2 and deletes 2 workers; the 2 left keep
    running (nothing evicted, nothing gated again), the status tells the gang holds its new
    minimum (``Satisfied=True``, 2 of minMember 2, not ``Disrupted``) and names the two deleted
    (``MemberLost`` events); role minimums apply to a release only."""
    op = training_operator
    only_nodes(2, **NODE)
    roles_pod_group(kube, namespace, "run", 4, {"master": 1, "worker": 3})
    client.CustomObjectsApi(kube).create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs",
                                                                  pytorchjob("run", 3, "2"))
    before = bind_as_one_gang(op, kube, namespace, "run", 4)
    scale_workers(kube, namespace, "run", 1)

    def shrunk():
        pg = get_pod_group(kube, namespace, "run")
        ps = group_pods(kube, namespace, "run")
        st = pg.get("status") or {}
        sat = condition(st, "Satisfied")
        lost = " ".join(e.message for e in events_for(kube, namespace, "run") if e.reason == "MemberLost")
        return (pg, ps, st, lost) if pg["spec"]["minMember"] == 2 and len(ps) == 2 and sat \
            and sat["status"] == "True" and "2 of minMember 2" in sat["message"] \
            and all(f"member run-worker-{i} left the released group: deleted" in lost for i in (1, 2)) else None

    pg, ps, st, lost = explained(op, shrunk, 60, "2 members left, minMember 2, Satisfied=True, both named MemberLost",
                                 lambda: (status(kube, namespace, "run"), events_for(kube, namespace, "run")))
    assert sorted(p.metadata.labels["training.kubeflow.org/replica-type"] for p in ps) == ["master", "worker"]
    assert all(bound(p) and not gated(p) for p in ps), [(p.metadata.name, p.spec.node_name) for p in ps]
    # the same pods as before the scale-down, on the same nodes (nothing evicted or recreated)
    was = {p.metadata.uid: p.spec.node_name for p in before}
    assert all(was.get(p.metadata.uid) == p.spec.node_name for p in ps), (was, ps)
    assert condition(st, "Released")["status"] == "True", st
    # the deletions are told as they are (cogate cannot tell a scale-down from any other deletion),
    # and the gang is not called disrupted: its minMember (2) is placed
    disrupted = condition(st, "Disrupted")
    assert disrupted is None or disrupted["status"] == "False", st
    assert "run-worker-0" not in lost and "run-master-0" not in lost, lost
