"""Preemptions side by side (issue 37 kinds 1 to 4) on the real local control plane.

Victims are low-priority pods bound to chosen fake nodes that carry a finalizer: a helper thread
(:func:`slow_victims`) removes it a few seconds after a victim is seen terminating, as a container
that takes that long to stop, except on the nodes the test keeps stuck (a stuck finalizer, an
unreachable kubelet). PriorityClasses through the scheduling API; fake nodes of 10 CPU.

- kind 1: several gangs on several full nodes all preempt at once (each ``Preempting=True`` while
  no victim has gone yet); a victim that never terminates holds up only its own gang;
- kind 2: a higher-priority gang arriving while a lower one's victims terminate takes the room
  over (the lower one ``Superseded``, its nominations cleared, never bound there), with or
  without a victim of its own beyond the inherited ones;
- kind 3: a new member of a released high-priority gang (a replacement of a deleted member, a
  scale-up) preempts a low-priority pod and binds;
- kind 4: the node being freed is cordoned or tainted mid-preemption: ``PlanChanged`` within
  seconds (the victims' deadline is far), and the gang is placed on another node.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.localcluster import example

from .conftest import restarted_with
from .kube import (bound, condition, controller_paused, create_pod_group, events_for, gated, group_pods, pods, priority_classes, running,
                   status, wait_for)

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)
FINALIZER = "example.com/slow-stop"
#: Seconds a victim stays terminating before its finalizer goes (slow, but far below any deadline).
STOP_SECONDS = 4.0


@pytest.fixture(scope="module")
def preempting(stack) -> Iterator[Any]:
    """The controller restarted once for this module with ``--preemption`` (the default, said
    explicitly); the session's flags again after it (a restart per test would cost about 20 s each)."""
    yield from restarted_with(stack, "--preemption")


@pytest.fixture(autouse=True)
def no_gang_left(kube, namespace) -> Iterator[None]:
    """After each test its gangs' pods are deleted at once: a gang left gated in a namespace still
    being deleted would preempt on the next test's nodes (the controller serves every namespace)."""
    yield
    core = client.CoreV1Api(kube)
    with contextlib.suppress(client.ApiException):
        core.delete_collection_namespaced_pod(namespace, label_selector=POD_GROUP_LABEL, grace_period_seconds=0)
    wait_for(lambda: not pods(kube, namespace, POD_GROUP_LABEL), 30, what="the gangs' pods gone")


@pytest.fixture
def classes(kube) -> Iterator[dict[str, str]]:
    with priority_classes(kube, low=100, lowish=200, mid=500, high=1000) as names:
        yield names


def filler(kube, namespace: str, name: str, node: str, cpu: str, priority_class: str) -> None:
    """A bare pod bound to ``node`` (``spec.nodeName``), carrying :data:`FINALIZER`."""
    tpl = example.pod_template(None, cpu=cpu, memory="100Mi", app="filler")
    tpl["metadata"]["name"] = name
    tpl["metadata"]["finalizers"] = [FINALIZER]
    tpl["spec"].update(priorityClassName=priority_class, nodeName=node)
    client.CoreV1Api(kube).create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})


def fill(kube, namespace: str, nodes: list[str], priority_class: str, per_node: int = 5, cpu: str = "2",
         prefix: str = "low") -> None:
    for n in nodes:
        for k in range(per_node):
            filler(kube, namespace, f"{prefix}-{n}-{k}", n, cpu, priority_class)
    wait_for(lambda: len([p for p in pods(kube, namespace, "app=filler")
                          if running(p) and p.metadata.name.startswith(f"{prefix}-")]) >= per_node * len(nodes), 60,
             what="fillers Running")
    time.sleep(2)  # the controller's informer sees the nodes full before a gang arrives


def gang(kube, namespace: str, name: str, size: int, cpu: str, priority_class: str) -> None:
    create_pod_group(kube, example.pod_group(name, size, namespace=namespace, timeout_seconds=None))
    for i in range(size):
        tpl = example.pod_template(name, cpu=cpu, memory="100Mi", app=name)
        tpl["metadata"]["name"] = f"{name}-{i}"
        tpl["spec"]["priorityClassName"] = priority_class
        client.CoreV1Api(kube).create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})


class Stopper:
    """Removes :data:`FINALIZER` from pods terminating for :data:`STOP_SECONDS` (first seen), but
    not from those on a node in ``stuck`` nor those named in ``stuck_names`` (both mutable)."""

    def __init__(self, kube, namespace: str) -> None:
        self.core = client.CoreV1Api(kube)
        self.namespace = namespace
        self.stuck: set[str] = set()
        self.stuck_names: set[str] = set()
        self.seen: dict[str, float] = {}
        self.released: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            with contextlib.suppress(Exception):
                for p in self.core.list_namespaced_pod(self.namespace).items:
                    if not p.metadata.deletion_timestamp or FINALIZER not in (p.metadata.finalizers or []):
                        continue
                    first = self.seen.setdefault(p.metadata.uid, time.monotonic())
                    if (p.spec.node_name in self.stuck or p.metadata.name in self.stuck_names
                            or time.monotonic() - first < STOP_SECONDS):
                        continue
                    self.unhold(p.metadata.name)

    def unhold(self, name: str) -> None:
        with contextlib.suppress(client.ApiException):
            self.core.patch_namespaced_pod(name, self.namespace, {"metadata": {"finalizers": None}})
            self.released.append(name)

    def cleanup(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for p in self.core.list_namespaced_pod(self.namespace).items:
            if FINALIZER in (p.metadata.finalizers or []):
                self.unhold(p.metadata.name)


@pytest.fixture
def slow_victims(kube, namespace) -> Iterator[Stopper]:
    s = Stopper(kube, namespace)
    s._thread.start()
    try:
        yield s
    finally:
        s.cleanup()


def preempting_cond(kube, namespace: str, name: str) -> dict[str, Any] | None:
    return condition(status(kube, namespace, name), "Preempting")


def all_running_on(kube, namespace: str, name: str, size: int, nodes: set[str] | None = None) -> bool:
    ps = group_pods(kube, namespace, name)
    return len(ps) == size and all(running(p) for p in ps) and (nodes is None or {p.spec.node_name for p in ps} <= nodes)


def marked_for(kube, namespace: str) -> dict[str, str]:
    """Victim pod name -> the PodGroup its DisruptionTarget mark names."""
    out = {}
    for p in pods(kube, namespace, "app=filler"):
        for c in p.status.conditions or []:
            if c.type == "DisruptionTarget" and c.reason == "PreemptionByCogate":
                out[p.metadata.name] = (c.message or "").split("PodGroup ")[-1].split(" ")[0]
    return out


# ----------------------------------------------------------------- kind 1


@pytest.mark.parametrize("n_nodes,size,cpu", [(2, 2, "3"), (4, 1, "5")], ids=["2-gangs-of-2", "4-gangs-of-1"])
def test_independent_gangs_preempt_at_once_and_a_stuck_victim_holds_up_only_its_gang(
        preempting, kube, namespace, only_nodes, classes, slow_victims, n_nodes, size, cpu):
    nodes = only_nodes(n_nodes, **NODE)
    slow_victims.stuck = set(nodes)  # nothing terminates until every gang has started
    fill(kube, namespace, nodes, classes["low"])
    names = [f"g{i}" for i in range(n_nodes)]
    for g in names:
        gang(kube, namespace, g, size, cpu, classes["high"])

    def all_started() -> bool:
        return all((c := preempting_cond(kube, namespace, g)) and c["status"] == "True" for g in names)

    wait_for(all_started, 60, what="every gang Preempting=True at once")
    assert not slow_victims.released  # no victim had gone: they run side by side, not one after another
    marks = marked_for(kube, namespace)
    assert {g.split("/")[-1] for g in marks.values()} == set(names), marks  # every gang has its own victims
    # the victims of one gang never terminate (a stuck finalizer); every other gang's do
    stuck_gang = names[0]
    slow_victims.stuck_names = {v for v, g in marks.items() if g.split("/")[-1] == stuck_gang}
    slow_victims.stuck = set()
    others = names[1:]
    for g in others:
        wait_for(lambda g=g: all_running_on(kube, namespace, g, size), 60, what=f"{g} Running")
        wait_for(lambda g=g: preempting_cond(kube, namespace, g)["reason"] == "Placed", 20, what=f"{g} Placed")
    assert all(gated(p) for p in group_pods(kube, namespace, stuck_gang))
    c = preempting_cond(kube, namespace, stuck_gang)
    assert c["status"] == "True" and "waiting for" in c["message"], c
    slow_victims.stuck_names = set()
    wait_for(lambda: all_running_on(kube, namespace, stuck_gang, size), 60, what="the stuck gang Running")


# ----------------------------------------------------------------- kind 2


@pytest.mark.parametrize("high_cpu,own_victims", [("3", 0), ("4", 1)], ids=["inherits-only", "inherits-and-adds"])
def test_a_higher_priority_gang_takes_over_the_room_a_lower_preemption_is_freeing(
        preempting, kube, namespace, only_nodes, classes, slow_victims, high_cpu, own_victims):
    (node,) = only_nodes(1, **NODE)
    slow_victims.stuck = {node}
    fill(kube, namespace, [node], classes["low"])
    gang(kube, namespace, "mid", 2, "3", classes["mid"])  # 6 of 10 CPU: three victims of 2
    try:
        wait_for(lambda: (c := preempting_cond(kube, namespace, "mid")) and c["status"] == "True", 45,
                 what="mid Preempting=True")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; mid's status: {status(kube, namespace, 'mid')}") from None
    wait_for(lambda: all(p.status.nominated_node_name == node for p in group_pods(kube, namespace, "mid")), 20,
             what="mid nominated")
    mid_victims = set(marked_for(kube, namespace))
    assert len(mid_victims) == 3
    gang(kube, namespace, "top", 2, high_cpu, classes["high"])
    ended = wait_for(lambda: [e for e in events_for(kube, namespace, "mid")
                              if e.reason == "PreemptionEnded" and "Superseded" in (e.message or "")], 30,
                     what="mid's preemption ended Superseded")
    assert f"PodGroup {namespace}/top (priority 1000) took over" in ended[0].message, ended[0].message
    # the condition says it too, then (once mid selects again) keeps saying it as the earlier end
    wait_for(lambda: (c := preempting_cond(kube, namespace, "mid")) and c["status"] == "False"
             and "/top (priority 1000) took over" in c["message"], 20, what="mid's Preempting=False names top")
    top = wait_for(lambda: (c := preempting_cond(kube, namespace, "top")) and c["status"] == "True" and c, 20,
                   what="top Preempting=True")
    assert "taking over the room" in top["message"], top
    wait_for(lambda: all(not p.status.nominated_node_name for p in group_pods(kube, namespace, "mid")), 20,
             what="mid's nominations cleared")
    assert len(set(marked_for(kube, namespace)) - mid_victims) == own_victims
    slow_victims.stuck = set()
    wait_for(lambda: all_running_on(kube, namespace, "top", 2, {node}), 60, what="top Running on the freed node")
    time.sleep(3)
    assert all(gated(p) and not bound(p) for p in group_pods(kube, namespace, "mid"))  # nothing of mid binds there


# ----------------------------------------------------------------- kind 3


def member_set(kube, namespace: str, name: str, replicas: int, cpu: str, priority_class: str) -> None:
    create_pod_group(kube, example.pod_group(name, 2, namespace=namespace, timeout_seconds=None))
    body = example.replica_set(name, replicas, namespace=namespace, group=name, cpu=cpu, memory="100Mi")
    body["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    client.AppsV1Api(kube).create_namespaced_replica_set(namespace, body)


@pytest.mark.parametrize("change", ["replacement", "scale-up"])
def test_a_new_member_of_a_released_gang_preempts_and_binds(preempting, kube, namespace, only_nodes, classes,
                                                            slow_victims, change):
    (node,) = only_nodes(1, **NODE)
    member_set(kube, namespace, "train", 2, "2", classes["high"])
    wait_for(lambda: all_running_on(kube, namespace, "train", 2), 30, what="train Running")
    fill(kube, namespace, [node], classes["low"], per_node=3)  # 4 + 6 of 10 CPU
    apps = client.AppsV1Api(kube)
    if change == "replacement":
        # a low-priority pod waits Pending; with cogate paused it takes the room the deleted member
        # frees (kube-scheduler binds it at once), so the member's replacement finds none
        core = client.CoreV1Api(kube)
        tpl = example.pod_template(None, cpu="2", memory="100Mi", app="filler")
        tpl["metadata"].update(name="low-late", finalizers=[FINALIZER])
        tpl["spec"]["priorityClassName"] = classes["low"]
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
        with controller_paused(preempting):
            victim = group_pods(kube, namespace, "train")[0].metadata.name
            core.delete_namespaced_pod(victim, namespace, grace_period_seconds=0)
            wait_for(lambda: bound(core.read_namespaced_pod("low-late", namespace)), 20, what="low-late bound")
            wait_for(lambda: len(group_pods(kube, namespace, "train")) == 2
                     and any(gated(p) for p in group_pods(kube, namespace, "train")), 20, what="replacement gated")
        expected = 2
    else:
        apps.patch_namespaced_replica_set("train", namespace, {"spec": {"replicas": 3}})
        expected = 3
    t0 = time.monotonic()
    wait_for(lambda: all_running_on(kube, namespace, "train", expected), 60, what=f"train Running after the {change}")
    took = time.monotonic() - t0
    assert took >= STOP_SECONDS - 1  # it waited for its victim, then bound
    c = wait_for(lambda: (c := condition(status(kube, namespace, "train"), "Preempting")) and c["reason"] == "Placed"
                 and c, 20, what="Preempting=False Placed")
    assert "placed on the room freed by preempting 1 pod (" in c["message"], c  # one low pod
    assert "new members of its standing release" in c["message"] or change == "replacement", c
    assert len(slow_victims.released) == 1


# ----------------------------------------------------------------- kind 4


@pytest.mark.parametrize("how", ["cordon", "taint"])
def test_a_target_node_made_unusable_mid_preemption_ends_it_at_once_and_the_gang_goes_elsewhere(
        preempting, kube, namespace, only_nodes, classes, slow_victims, how):
    n1, n2 = only_nodes(2, **NODE)
    slow_victims.stuck = {n1, n2}
    fill(kube, namespace, [n1], classes["low"], prefix="a")  # the cheaper victims: chosen first
    fill(kube, namespace, [n2], classes["lowish"], prefix="b")
    gang(kube, namespace, "train", 2, "3", classes["high"])
    wait_for(lambda: (c := preempting_cond(kube, namespace, "train")) and c["status"] == "True", 30,
             what="Preempting=True")
    assert {p.status.nominated_node_name for p in group_pods(kube, namespace, "train")} <= {n1, None}
    core = client.CoreV1Api(kube)
    body = ({"spec": {"unschedulable": True}} if how == "cordon" else
            {"spec": {"taints": [{"key": "maintenance", "value": "now", "effect": "NoSchedule"}]}})
    core.patch_node(n1, body)
    t0 = time.monotonic()
    ended = wait_for(lambda: (e := [e for e in events_for(kube, namespace, "train") if e.reason == "PreemptionEnded"])
                     and e[0], 20, what="PreemptionEnded")
    assert time.monotonic() - t0 < 10  # at once: the victims' deadline is 60 s away
    assert "PlanChanged" in ended.message and n1 in ended.message, ended.message
    assert ("cordoned" if how == "cordon" else "taint maintenance=now") in ended.message
    wait_for(lambda: all(p.status.nominated_node_name == n2 for p in group_pods(kube, namespace, "train")), 20,
             what="chosen again on the other node")
    slow_victims.stuck = {n1}
    wait_for(lambda: all_running_on(kube, namespace, "train", 2, {n2}), 60, what="train Running on the other node")
    with contextlib.suppress(client.ApiException):
        core.patch_node(n1, {"spec": {"unschedulable": None, "taints": None}})

