"""Gang-aware preemption (issue 15 items 2, 4, 5) on the real local control plane.

The controller runs restarted with ``--preemption`` (the default, said explicitly; the restart gives
fresh metrics). PriorityClasses are
made through the scheduling API; one fake node of 10 CPU (``example.NODE_SHAPE``) unless said.

- (a) a low-priority ReplicaSet fills the node and a high-priority gang arrives: exactly the
  victims it needs are marked ``DisruptionTarget`` (reason ``PreemptionByCogate``) and deleted,
  the ReplicaSet's replacements do not take the freed room (the members' ``nominatedNodeName``),
  the gang binds whole; ``Preempting`` and the Events say what happened;
- a pod a PodDisruptionBudget protects (no disruption left) is spared for an unprotected one;
- (b) a gang that cannot fit even with preemption (a higher-priority pod holds the room): no pod
  is deleted, ``Preempting=False`` says why;
- (c) equal priority: nothing is deleted;
- (d) ``preemptionPolicy: Never``: nothing is deleted;
- (e) a low-priority released gang is the only room: all of it goes or none of it, and its
  PodGroup's ``Disrupted`` condition names the preemptor;
- (f) the controller restarted while the victims terminate: the new process resumes the
  preemption (the nominations stay, ``Preempting=True`` throughout), a low-priority gang and the
  ReplicaSet's replacements never get the room, the gang binds pinned when the victims go;
- (g) kube-scheduler restarted (leader election on, a new leader) while the victims terminate:
  the new kube-scheduler is told the nominations again (``RoomHeld`` written on the members), so
  the ReplicaSet's replacements stay Pending and the gang binds on the freed room.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from cogate.localcluster import example

from .conftest import restarted_with
from .kube import (bound, controller_paused, condition, create_pod_group, events_for, gated, group_pods, hold_gated, pods,
                   priority_classes, running, status, wait_for)

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)


@pytest.fixture
def preempting(stack) -> Iterator[Any]:
    """The controller restarted (fresh metrics) with ``--preemption`` (the default, said explicitly);
    the session's flags again after the test."""
    yield from restarted_with(stack, "--preemption")


@pytest.fixture
def classes(kube) -> Iterator[dict[str, str]]:
    """PriorityClasses ``low`` (100), ``high`` (1000), ``vip`` (5000), ``never`` (1000, preemptionPolicy Never)."""
    with priority_classes(kube, low=100, high=1000, vip=5000, never=(1000, "Never")) as names:
        yield names


def template(group: str | None, cpu: str, priority_class: str, app: str) -> dict[str, Any]:
    tpl = example.pod_template(group, cpu=cpu, memory="100Mi", app=app)
    tpl["spec"]["priorityClassName"] = priority_class
    return tpl


def replica_set(kube, namespace: str, name: str, replicas: int, cpu: str, priority_class: str,
                group: str | None = None, finalizers: list[str] | None = None, grace: int | None = None) -> None:
    body = example.replica_set(name, replicas, namespace=namespace, group=group, cpu=cpu, memory="100Mi")
    body["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    if grace is not None:
        body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    if finalizers:
        body["spec"]["template"]["metadata"]["finalizers"] = finalizers
    client.AppsV1Api(kube).create_namespaced_replica_set(namespace, body)


def app_pods(kube, namespace: str, app: str) -> list[client.V1Pod]:
    return pods(kube, namespace, f"app={app}")


def fill(kube, namespace: str, name: str, replicas: int, cpu: str, priority_class: str) -> set[str]:
    """A ReplicaSet of ``replicas`` pods outside any group, every one Running; their uids."""
    replica_set(kube, namespace, name, replicas, cpu, priority_class)
    ps = wait_for(lambda: (ps := app_pods(kube, namespace, name)) and len(ps) == replicas
                  and all(running(p) for p in ps) and ps, 30, what=f"{name} Running")
    return {p.metadata.uid for p in ps}


def create_gang(kube, namespace: str, name: str, size: int, cpu: str, priority_class: str,
                min_member: int | None = None) -> list[str]:
    create_pod_group(kube, example.pod_group(name, min_member or size, namespace=namespace, timeout_seconds=None))
    core = client.CoreV1Api(kube)
    names = [f"{name}-{i}" for i in range(size)]
    for n in names:
        tpl = template(name, cpu, priority_class, app=name)
        tpl["metadata"]["name"] = n
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
    return names


def preempting_condition(kube, namespace: str, name: str) -> dict[str, Any] | None:
    return condition(status(kube, namespace, name), "Preempting")


def assert_nothing_preempted(kube, namespace: str, app: str, uids: set[str], gang: str, size: int,
                             reason: str) -> None:
    """The fillers stay (same pods, none marked or deleting), the gang stays gated, and
    ``Preempting=False`` gives ``reason``; checked again after a few seconds."""
    c = wait_for(lambda: (c := preempting_condition(kube, namespace, gang)) and c["reason"] == reason and c, 20,
                 what=f"Preempting=False {reason}")
    assert c["status"] == "False", c
    hold_gated(kube, namespace, gang, 3, size)
    ps = app_pods(kube, namespace, app)
    assert {p.metadata.uid for p in ps} == uids and not any(p.metadata.deletion_timestamp for p in ps)
    for p in ps:
        assert not any(cd.type == "DisruptionTarget" for cd in p.status.conditions or []), p.metadata.name
    assert "Preempting" not in [e.reason for e in events_for(kube, namespace, gang)]
    st = status(kube, namespace, gang)
    assert condition(st, "Released")["reason"] == "InsufficientCapacity", st


# ----------------------------------------------------------------- (a) the usual case


def test_a_high_priority_gang_preempts_the_low_priority_pods_it_needs_and_binds_whole(
        preempting, kube, namespace, only_nodes, classes):
    only_nodes(1, **NODE)
    before = fill(kube, namespace, "batch", 5, "2", classes["low"])  # 10 of 10 CPU
    core = client.CoreV1Api(kube)
    create_gang(kube, namespace, "train", 2, "3", classes["high"])  # needs 6: three victims of 2 CPU
    # True while the victims go, then False/Placed (a fake node deletes them at once: both quickly)
    c = wait_for(lambda: (c := preempting_condition(kube, namespace, "train")) and c, 20, what="Preempting written")
    assert c["reason"] in ("Preempting", "Placed"), c
    assert "preempting 3 pods (" in c["message"] and "of priority <= 100" in c["message"], c
    assert f"to place PodGroup {namespace}/train, priority 1000" in c["message"], c
    # the gang binds whole on the freed room, and only then
    ps = wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and all(running(p) for p in ps)
                  and len(ps) == 2 and ps, 60, what="gang Running")
    assert {p.spec.node_name for p in ps} == {ps[0].spec.node_name}
    st = wait_for(lambda: (s := status(kube, namespace, "train")) and (c := condition(s, "Preempting"))
                  and c["reason"] == "Placed" and s, 15, what="Preempting=False Placed")
    placed = condition(st, "Preempting")
    assert placed["status"] == "False" and placed["message"].startswith("placed on the room freed by preempting 3 pods")
    assert condition(st, "Released")["status"] == "True"
    # exactly three of the batch pods went; their replacements found no room
    now = app_pods(kube, namespace, "batch")
    kept = {p.metadata.uid for p in now} & before
    assert len(kept) == 2, [p.metadata.name for p in now]
    pending = [p for p in now if p.metadata.uid not in before]
    assert len(pending) == 3 and not any(bound(p) for p in pending), [(p.metadata.name, p.spec.node_name) for p in now]
    # what was said: a Preempting event on the group, Preempted on each victim naming the group
    reasons = [e.reason for e in events_for(kube, namespace, "train")]
    assert "Preempting" in reasons, reasons
    victims = [e for e in core.list_namespaced_event(namespace, field_selector="reason=Preempted").items
               if e.involved_object.kind == "Pod"]
    assert len({e.involved_object.uid for e in victims}) == 3, [e.message for e in victims]
    assert {e.involved_object.uid for e in victims} <= before
    assert all(f"PodGroup {namespace}/train (priority 1000)" in e.message for e in victims)
    metrics = preempting.metrics()
    assert 'cogate_controller_preemptions_total{result="Started"} 1.0' in metrics
    assert 'cogate_controller_preemption_victims_total{result="deleted"} 3.0' in metrics


FINALIZER = "example.com/hold"


def test_while_victims_terminate_the_gang_waits_gated_on_nominations_and_the_room_stays_its(
        preempting, kube, namespace, only_nodes, classes):
    """The victims are held Terminating by a finalizer: ``Preempting=True`` names the victims still
    terminating, they carry ``DisruptionTarget`` reason ``PreemptionByCogate``, the gang's members
    wait gated with ``nominatedNodeName`` = the node; once the finalizers go the gang binds there
    and the ReplicaSet's replacements (Pending meanwhile, same low priority) do not get the room."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    replica_set(kube, namespace, "batch", 5, "2", classes["low"], finalizers=[FINALIZER])
    first = wait_for(lambda: (ps := app_pods(kube, namespace, "batch")) and len(ps) == 5
                     and all(running(p) for p in ps) and ps, 30, what="5 batch pods Running")
    before = {p.metadata.uid for p in first}
    node = app_pods(kube, namespace, "batch")[0].spec.node_name
    try:
        create_gang(kube, namespace, "train", 2, "3", classes["high"])
        c = wait_for(lambda: (c := preempting_condition(kube, namespace, "train")) and c["status"] == "True"
                     and "waiting for 3 victims to terminate" in c["message"] and c, 20,
                     what="Preempting=True, 3 victims terminating")
        assert c["reason"] == "Preempting" and "of priority <= 100" in c["message"], c
        terminating = [p for p in app_pods(kube, namespace, "batch") if p.metadata.deletion_timestamp]
        assert len(terminating) == 3 and {p.metadata.uid for p in terminating} <= before
        for p in terminating:
            assert p.metadata.name in c["message"], (p.metadata.name, c["message"])
            mark = next(cd for cd in p.status.conditions if cd.type == "DisruptionTarget")
            assert (mark.status, mark.reason) == ("True", "PreemptionByCogate"), mark
            assert f"PodGroup {namespace}/train (priority 1000)" in mark.message
        members = wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                           and all(p.status.nominated_node_name == node for p in ps) and ps, 10,
                           what="members nominated to the node")
        assert all(gated(p) and not bound(p) for p in members)
        hold_gated(kube, namespace, "train", 3, 2)  # never released while a victim still holds room
    finally:
        for p in app_pods(kube, namespace, "batch"):
            with contextlib.suppress(client.ApiException):
                core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})
    wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
             and all(running(p) and p.spec.node_name == node for p in ps), 60, what="gang Running on the freed node")
    st = wait_for(lambda: (s := status(kube, namespace, "train")) and (c := condition(s, "Preempting"))
                  and c["reason"] == "Placed" and s, 15, what="Preempting=False Placed")
    assert condition(st, "Released")["status"] == "True"
    replacements = [p for p in app_pods(kube, namespace, "batch") if p.metadata.uid not in before]
    assert len(replacements) == 3 and not any(bound(p) for p in replacements), \
        [(p.metadata.name, p.spec.node_name) for p in replacements]
    client.AppsV1Api(kube).delete_namespaced_replica_set("batch", namespace)  # no new pod with the finalizer
    wait_for(lambda: not client.AppsV1Api(kube).list_namespaced_replica_set(namespace).items, 20, what="rs gone")
    for p in app_pods(kube, namespace, "batch"):
        with contextlib.suppress(client.ApiException):
            core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})


def test_a_controller_restart_mid_preemption_resumes_it_and_the_room_stays_the_gangs(
        preempting, kube, namespace, only_nodes, classes):
    """(f) Victims held Terminating by a finalizer (grace period 120 s: the deadline is far); the
    controller is restarted. The new process rebuilds the record from the members' nominations
    and the victims' marks: it does not clear the nominations, ``Preempting`` stays True (now
    saying it was resumed), a low-priority gang that would fit the freed room stays gated, and
    once the finalizers go the gang binds on the node while the ReplicaSet's replacements stay
    Pending (kube-scheduler still counts the nominations)."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    replica_set(kube, namespace, "batch", 5, "2", classes["low"], finalizers=[FINALIZER], grace=120)
    first = wait_for(lambda: (ps := app_pods(kube, namespace, "batch")) and len(ps) == 5
                     and all(running(p) for p in ps) and ps, 30, what="5 batch pods Running")
    before = {p.metadata.uid for p in first}
    node = first[0].spec.node_name
    try:
        create_gang(kube, namespace, "train", 2, "3", classes["high"])
        wait_for(lambda: (c := preempting_condition(kube, namespace, "train")) and c["status"] == "True"
                 and "waiting for 3 victims to terminate" in c["message"], 20, what="Preempting=True, 3 victims")
        wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                 and all(p.status.nominated_node_name == node for p in ps), 10, what="members nominated")
        create_gang(kube, namespace, "small", 1, "2", classes["low"])  # fits the room the victims free
        preempting.restart_controller()
        c = wait_for(lambda: (c := preempting_condition(kube, namespace, "train")) and "resumed" in c["message"]
                     and c, 20, what="Preempting says resumed")
        assert (c["status"], c["reason"]) == ("True", "Preempting"), c
        assert "waiting for 3 victims to terminate" in c["message"], c
        assert f"to place PodGroup {namespace}/train, priority 1000" in c["message"], c
        assert 'cogate_controller_preemptions_total{result="Resumed"} 1.0' in preempting.metrics()
        for _ in range(20):  # a few seconds: the nominations stay, the gangs stay gated
            members = group_pods(kube, namespace, "train")
            assert all(p.status.nominated_node_name == node and gated(p) for p in members), \
                [(p.metadata.name, p.status.nominated_node_name) for p in members]
            assert preempting_condition(kube, namespace, "train")["status"] == "True"
            time.sleep(0.2)
        hold_gated(kube, namespace, "small", 1, 1)
    finally:
        for p in app_pods(kube, namespace, "batch"):
            with contextlib.suppress(client.ApiException):
                core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})
    ps = wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                  and all(running(p) and p.spec.node_name == node for p in ps) and ps, 60,
                  what="gang Running on the freed node")
    for p in ps:  # released pinned to the node
        terms = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        assert any(f.values == [node] for t in terms for f in (t.match_fields or [])), terms
    st = wait_for(lambda: (s := status(kube, namespace, "train")) and (c := condition(s, "Preempting"))
                  and c["reason"] == "Placed" and s, 15, what="Preempting=False Placed")
    assert condition(st, "Released")["status"] == "True"
    assert condition(st, "Preempting")["message"].startswith("placed on the room freed by preempting 3 pods"), st
    replacements = [p for p in app_pods(kube, namespace, "batch") if p.metadata.uid not in before]
    assert len(replacements) == 3 and not any(bound(p) for p in replacements), \
        [(p.metadata.name, p.spec.node_name) for p in replacements]
    assert all(gated(p) for p in group_pods(kube, namespace, "small"))
    client.AppsV1Api(kube).delete_namespaced_replica_set("batch", namespace)  # no new pod with the finalizer
    wait_for(lambda: not client.AppsV1Api(kube).list_namespaced_replica_set(namespace).items, 20, what="rs gone")
    for p in app_pods(kube, namespace, "batch"):
        with contextlib.suppress(client.ApiException):
            core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})


#: kube-scheduler with leader election on and short Lease times (a later flag wins over the
#: local cluster's ``--leader-elect=false``): each restart is a new leader within a second or two.
LEADER_FLAGS = ("--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
                "--leader-elect-retry-period=1s")


@contextlib.contextmanager
def scheduler_leading(stack, kube) -> Iterator[Any]:
    """Yields a ``restart()`` that starts a new kube-scheduler process with leader election on (it
    takes the Lease kube-system/kube-scheduler: a new leader) and returns its identity; the
    session's kube-scheduler again after."""
    coordination = client.CoordinationV1Api(kube)

    def holder() -> str:
        with contextlib.suppress(client.ApiException):
            return coordination.read_namespaced_lease("kube-scheduler", "kube-system").spec.holder_identity or ""
        return ""

    def restart() -> str:
        before = holder()
        stack.cluster.restart_scheduler(*LEADER_FLAGS)
        return wait_for(lambda: (h := holder()) and h != before and h, 30, what="a new kube-scheduler leader")

    try:
        yield restart
    finally:
        stack.cluster.restart_scheduler()


def test_a_kube_scheduler_restart_mid_preemption_is_told_the_nominations_again(
        preempting, kube, namespace, only_nodes, classes):
    """(g) As (f), but kube-scheduler is restarted (twice: a first leader, then a failover to a new
    process): a new process lists the gated members without registering their nominations (only
    an update of a pod does). cogate sees the new leader on the Lease and writes
    ``scheduling.x-k8s.io/RoomHeld`` on each nominated member. The finalizers then go while cogate
    is paused: the ReplicaSet's replacements (same low priority, Pending) stay off the room, as
    kube-scheduler counts the nominations again; continued, cogate releases the gang onto it.
    Without the refresh kube-scheduler binds the replacements there within a second (tried on
    v1.36.3), and the gang then ends ``DoesNotFitAfterPreemption``."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    with scheduler_leading(preempting, kube) as restart_scheduler:
        replica_set(kube, namespace, "batch", 5, "2", classes["low"], finalizers=[FINALIZER])
        first = wait_for(lambda: (ps := app_pods(kube, namespace, "batch")) and len(ps) == 5
                         and all(running(p) for p in ps) and ps, 30, what="5 batch pods Running")
        before = {p.metadata.uid for p in first}
        node = first[0].spec.node_name
        # Under a full suite's load (two more control planes and a real node running) the controller's
        # informer may lag the API server by seconds: give it the bound fillers before the gang arrives,
        # so victim selection sees the node full, not a stale view with room (then fewer victims).
        time.sleep(3)
        try:
            create_gang(kube, namespace, "train", 2, "3", classes["high"])
            seen: list[Any] = []

            def started() -> bool:
                seen[:] = [c := preempting_condition(kube, namespace, "train"),
                           condition(status(kube, namespace, "train"), "Released")]
                return bool(c and c["status"] == "True" and "waiting for 3 victims to terminate" in c["message"])

            try:
                wait_for(started, 90, what="Preempting=True, 3 victims")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; Preempting, Released: {seen}") from None
            wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                     and all(p.status.nominated_node_name == node for p in ps), 30, what="members nominated")
            wait_for(lambda: len(app_pods(kube, namespace, "batch")) == 8, 20, what="3 replacements Pending")
            victims = {p.metadata.uid for p in app_pods(kube, namespace, "batch") if p.metadata.deletion_timestamp}
            assert len(victims) == 3 and victims <= before
            restart_scheduler()  # the first leader: it lists the members with their nominations
            time.sleep(3)
            leader = restart_scheduler()  # and a failover to a new process

            def refreshed() -> bool:
                ps = group_pods(kube, namespace, "train")
                conds = [next((c for c in p.status.conditions or [] if c.type == "scheduling.x-k8s.io/RoomHeld"), None)
                         for p in ps]
                return len(ps) == 2 and all(c is not None and leader in (c.message or "") for c in conds)

            wait_for(refreshed, 20, what="RoomHeld written on the members after the new leader")
            assert all(p.status.nominated_node_name == node and gated(p) for p in group_pods(kube, namespace, "train"))
            # cogate paused while the victims go: only kube-scheduler's count of the nominations keeps
            # the replacements off the room (else cogate's release races them and may win)
            with controller_paused(preempting):
                for p in app_pods(kube, namespace, "batch"):
                    with contextlib.suppress(client.ApiException):
                        core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})
                wait_for(lambda: not ({p.metadata.uid for p in app_pods(kube, namespace, "batch")} & victims), 30,
                         what="the victims gone")
                for _ in range(25):  # 5 s: kube-scheduler retries the replacements on the deletions at once
                    repl = [p for p in app_pods(kube, namespace, "batch") if p.metadata.uid not in before]
                    assert not any(bound(p) for p in repl), [(p.metadata.name, p.spec.node_name) for p in repl]
                    time.sleep(0.2)
        finally:
            for p in app_pods(kube, namespace, "batch"):
                with contextlib.suppress(client.ApiException):
                    core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})
        wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                 and all(running(p) and p.spec.node_name == node for p in ps), 60,
                 what="gang Running on the freed node")
        st = wait_for(lambda: (s := status(kube, namespace, "train")) and (c := condition(s, "Preempting"))
                      and c["reason"] == "Placed" and s, 15, what="Preempting=False Placed")
        assert condition(st, "Released")["status"] == "True"
        replacements = [p for p in app_pods(kube, namespace, "batch") if p.metadata.uid not in before]
        assert len(replacements) == 3 and not any(bound(p) for p in replacements), \
            [(p.metadata.name, p.spec.node_name) for p in replacements]
        assert 'cogate_controller_preemption_nomination_refreshes_total{result="ok"}' in preempting.metrics()
        client.AppsV1Api(kube).delete_namespaced_replica_set("batch", namespace)
        wait_for(lambda: not client.AppsV1Api(kube).list_namespaced_replica_set(namespace).items, 20, what="rs gone")
        for p in app_pods(kube, namespace, "batch"):
            with contextlib.suppress(client.ApiException):
                core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})


def test_a_pod_a_disruption_budget_protects_is_spared_for_an_unprotected_one(preempting, kube, namespace,
                                                                             only_nodes, classes):
    """Two low-priority pods of 5 CPU fill the node; ``guarded`` is covered by a PodDisruptionBudget
    with no disruption left, ``free`` is not, and started first (without the budget kube-scheduler's
    order would take the later-started ``guarded``). A gang needing 5 CPU takes ``free`` only."""
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    for name in ("free", "guarded"):
        body = {"apiVersion": "v1", "kind": "Pod", **template(None, "5", classes["low"], app=name)}
        body["metadata"]["name"] = name
        core.create_namespaced_pod(namespace, body)
        wait_for(lambda: running(core.read_namespaced_pod(name, namespace)), 20, what=f"{name} Running")
        time.sleep(1.1)  # status.startTime has second granularity: free started strictly first
    policy = client.PolicyV1Api(kube)
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    wait_for(lambda: (b := policy.read_namespaced_pod_disruption_budget("guard", namespace)).status
             and b.status.current_healthy == 1 and b.status.disruptions_allowed == 0, 30,
             what="budget computed: no disruption allowed")
    uid = {n: core.read_namespaced_pod(n, namespace).metadata.uid for n in ("free", "guarded")}
    create_gang(kube, namespace, "train", 2, "2500m", classes["high"])
    wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2 and all(running(p) for p in ps),
             60, what="gang Running")
    c = preempting_condition(kube, namespace, "train")
    assert c["reason"] == "Placed" and f"preempting 1 pod ({namespace}/free)" in c["message"], c
    assert "PodDisruptionBudget" not in c["message"], c  # no victim beyond a budget
    left = {p.metadata.name: p.metadata.uid for p in pods(kube, namespace) if p.metadata.name in uid}
    assert left == {"guarded": uid["guarded"]}, left


# ----------------------------------------------------------------- (b), (c), (d): nothing preempted


def test_a_gang_that_cannot_fit_even_with_preemption_deletes_nothing(preempting, kube, namespace, only_nodes,
                                                                     classes):
    only_nodes(1, **NODE)
    core = client.CoreV1Api(kube)
    vip = {"apiVersion": "v1", "kind": "Pod", **template(None, "6", classes["vip"], app="vip")}
    vip["metadata"]["name"] = "vip"
    core.create_namespaced_pod(namespace, vip)
    wait_for(lambda: running(core.read_namespaced_pod("vip", namespace)), 20, what="vip Running")
    uids = fill(kube, namespace, "batch", 2, "2", classes["low"])
    create_gang(kube, namespace, "big", 2, "3", classes["high"])  # 6 of the 4 CPU under priority 1000
    assert_nothing_preempted(kube, namespace, "batch", uids, "big", 2, "DoesNotFitEvenWithPreemption")
    assert "fits" in preempting_condition(kube, namespace, "big")["message"]


def test_equal_priority_never_preempts(preempting, kube, namespace, only_nodes, classes):
    only_nodes(1, **NODE)
    uids = fill(kube, namespace, "peers", 5, "2", classes["high"])
    create_gang(kube, namespace, "same", 2, "3", classes["high"])
    assert_nothing_preempted(kube, namespace, "peers", uids, "same", 2, "NoLowerPriorityPods")


def test_preemption_policy_never_preempts_nothing(preempting, kube, namespace, only_nodes, classes):
    only_nodes(1, **NODE)
    uids = fill(kube, namespace, "batch", 5, "2", classes["low"])
    create_gang(kube, namespace, "polite", 2, "3", classes["never"])
    assert_nothing_preempted(kube, namespace, "batch", uids, "polite", 2, "PreemptionPolicyNever")


# ----------------------------------------------------------------- (e) a released gang as the only room


def test_a_low_priority_gang_is_taken_whole_or_not_at_all(preempting, kube, namespace, only_nodes, classes):
    """Gang ``low`` (ReplicaSet of 4 x 2 CPU, minMember 4) runs; 2 CPU are free. Gang ``top``
    (2 x 2 CPU, priority 1000) needs one more victim of 2 CPU, but taking one member alone would
    leave ``low`` at 3 of minMember 4: a useless half. So all four go; ``low`` comes back gated,
    whole (never partly bound), and its ``Disrupted`` condition names the preemptor."""
    only_nodes(1, **NODE)
    create_pod_group(kube, example.pod_group("low", 4, namespace=namespace, timeout_seconds=None))
    replica_set(kube, namespace, "low", 4, "2", classes["low"], group="low")
    first = wait_for(lambda: (ps := group_pods(kube, namespace, "low")) and len(ps) == 4
                     and all(running(p) for p in ps) and {p.metadata.uid for p in ps}, 30, what="gang low Running")
    create_gang(kube, namespace, "top", 2, "2", classes["high"])
    wait_for(lambda: (ps := group_pods(kube, namespace, "top")) and len(ps) == 2 and all(running(p) for p in ps),
             60, what="gang top Running")
    c = preempting_condition(kube, namespace, "top")
    assert c is not None and c["reason"] == "Placed", c
    # every member of low went (none kept alone), and the new ones wait gated together
    live = wait_for(lambda: (ps := group_pods(kube, namespace, "low", deleting=False)) and len(ps) == 4
                    and not ({p.metadata.uid for p in ps} & first) and ps, 30, what="low recreated")
    assert all(gated(p) and not bound(p) for p in live), [(p.metadata.name, p.spec.node_name) for p in live]
    hold_gated(kube, namespace, "low", 2, 4)
    st = wait_for(lambda: (s := status(kube, namespace, "low")) and (d := condition(s, "Disrupted"))
                  and f"PodGroup {namespace}/top" in d["message"] and s, 20, what="low Disrupted names top")
    d = condition(st, "Disrupted")
    assert d["status"] == "True" and "preempted by cogate" in d["message"], d
    msg = preempting_condition(kube, namespace, "top")["message"]
    assert msg.startswith("placed on the room freed by preempting 4 pods"), msg
