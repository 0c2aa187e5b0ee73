"""cogate asks the real cluster-autoscaler for a waiting gang's nodes (issue 16 item 5).

The cluster is ``autoscaled`` (tests/e2e/conftest.py): the real cluster-autoscaler 1.36.1 with its
kwok provider, one node group ``autoscaled`` of 0 to 4 nodes of 16 CPU, scale-down off, reset
between tests. cogate runs on it (webhook + controller, ``--provisioning-class
best-effort-atomic-scale-up.autoscaling.x-k8s.io``). What the autoscaler does for the same pods
without cogate is in tests/e2e/test_autoscaler.py (a gang of 5 x 12 CPU gets 4 nodes in vain).

The autoscaler simulates a new node of the group as its template plus a kube-proxy pod of 100
millicores (tests/e2e/test_autoscaler.py's docstring): a new node holds two members of 6 CPU, one of
8 or 12 CPU. The real nodes have the whole 16 CPU.

- a gang that needs two new nodes gets exactly two, is released pinned on them with the consume
  annotation, binds, and its request is deleted; the PodGroup says so all along;
- a gang that fits part of the current nodes asks for exactly the rest, on new nodes only (the
  autoscaler would otherwise "find" it in room cogate planned for the gang's other members);
- a gang that needs more than the group's maximum gets no node at all and says why;
- two gangs competing for the group's remaining room: one starts whole, the other stays gated
  whole, never both half;
- the new nodes a request brought taken by ordinary pods before the gang was released (cogate
  paused meanwhile): the request is withdrawn and the gang asks again at once, and starts on the
  next new nodes instead of waiting for the 10-minute booking to expire (issue 37 kind 6);
- a gang that needs both preemption and new nodes (low-priority balloons hold two spare nodes, a
  node group maximum below the whole gang but above the rest) asks only for the shortfall after
  preemption, and the balloons are evicted only once the new nodes came (issue 37 kind 5).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.controller.provisioning import provreq
from cogate.localcluster import autoscaler as ca
from cogate.localcluster import example
from cogate.localcluster import nodes as fake_nodes
from cogate.localcluster.stack import CogateStack

from .kube import (bound, condition, controller_paused, create_pod_group, events_for, gated, group_pods,
                   priority_classes, status, wait_for)

pytestmark = pytest.mark.e2e

#: Seconds a "nothing more happens" check watches (the autoscaler loops every second).
HOLD = 10.0


@pytest.fixture(scope="module")
def provisioning_stack(autoscaled_cluster, tmp_path_factory) -> Iterator[CogateStack]:
    """cogate on the autoscaled cluster, asking for nodes with the all-or-nothing class."""
    s = CogateStack(autoscaled_cluster, Path(tmp_path_factory.mktemp("cogate-provisioning")),
                    controller_args=("--provisioning-class", provreq.ATOMIC_CLASS))
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def grow(provisioning_stack, autoscaled) -> Iterator[Any]:
    yield autoscaled


def member_spec(cpu: str, on_group: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if on_group:
        spec["nodeSelector"] = {ca.GROUP_LABEL: "autoscaled"}
    return spec


def create_gang(a, name: str, size: int, cpu: str, *, min_member: int | None = None, on_group: bool = True,
                priority_class: str | None = None) -> list[str]:
    create_pod_group(a.api, example.pod_group(name, min_member or size, namespace=a.namespace, timeout_seconds=None))
    core = client.CoreV1Api(a.api)
    names = [f"{name}-{i}" for i in range(size)]
    for n in names:
        spec = member_spec(cpu, on_group)
        if priority_class:
            spec["priorityClassName"] = priority_class
        core.create_namespaced_pod(a.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": n, "labels": {POD_GROUP_LABEL: name, "app": name}}, "spec": spec})
    return names


@contextlib.contextmanager
def fixed_node(a) -> Iterator[str]:
    """A node of 10 CPU outside the node group (no taint), for the test's duration."""
    core = client.CoreV1Api(a.api)
    name = f"fixed-{a.namespace}"[:63]
    core.create_node(fake_nodes.node_manifest(name, cpu="10", memory="8Gi", pods=110, kwok_taint=False))
    try:
        fake_nodes.wait_nodes_ready(a.api, [name], timeout=60)
        yield name
    finally:
        core.delete_node(name)


def requests_of(a, group: str) -> list[dict[str, Any]]:
    got = client.CustomObjectsApi(a.api).list_namespaced_custom_object(
        provreq.GROUP, provreq.VERSION, a.namespace, provreq.PLURAL, label_selector=f"{provreq.GROUP_LABEL}={group}")
    return [r for r in got["items"] if not r["metadata"].get("deletionTimestamp")]


def templates_of(a, group: str) -> list[Any]:
    return client.CoreV1Api(a.api).list_namespaced_pod_template(
        a.namespace, label_selector=f"{provreq.GROUP_LABEL}={group}").items


def provisioning(a, group: str) -> dict[str, Any] | None:
    return condition(status(a.api, a.namespace, group), "Provisioning")


def group_node_names(a) -> set[str]:
    return {n["metadata"]["name"] for n in a.group_nodes()}


class BoundWatch:
    """Samples the pods of ``groups`` in a thread (every 0.2 s): ``most[g]`` is the most members of
    ``g`` ever seen bound, ``half[g]`` the samples where some were bound while others were still
    gated on two samples in a row (a release that left members behind; one sample alone can fall
    between the concurrent gate removals of one release)."""

    def __init__(self, a, groups: Sequence[str]) -> None:
        self.a, self.groups = a, list(groups)
        self.most = {g: 0 for g in self.groups}
        self.half: dict[str, int] = {g: 0 for g in self.groups}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "BoundWatch":
        self._t.start()
        return self

    def _run(self) -> None:
        was_half = {g: False for g in self.groups}
        while not self._stop.is_set():
            for g in self.groups:
                ps = group_pods(self.a.api, self.a.namespace, g)
                n = sum(1 for p in ps if bound(p))
                self.most[g] = max(self.most[g], n)
                half = n > 0 and any(gated(p) for p in ps)
                if half and was_half[g]:
                    self.half[g] += 1
                was_half[g] = half
            self._stop.wait(0.2)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(5)


def test_a_gang_that_needs_two_new_nodes_gets_exactly_them_and_binds_whole(grow):
    """The members select the node group, which has no node yet; another node exists, so on the
    current nodes the planner says the members fit no node by their own nodeSelector
    (``Unschedulable``): a node group scaled to zero, as GPU pools usually are."""
    a = grow
    assert not group_node_names(a)
    with fixed_node(a), BoundWatch(a, ["train"]) as watch:
        create_gang(a, "train", 4, "6")  # 2 per new node in the autoscaler's simulation: 2 nodes
        c = wait_for(lambda: (c := provisioning(a, "train")) and c["status"] == "True" and c, 30,
                     what="Provisioning=True")
        assert c["reason"] in ("Requested", "Provisioned"), c
        reqs = wait_for(lambda: requests_of(a, "train") or None, 10, what="the request")
        assert len(reqs) == 1
        r = reqs[0]
        assert r["spec"]["provisioningClassName"] == provreq.ATOMIC_CLASS
        assert [ps["count"] for ps in r["spec"]["podSets"]] == [4]  # one shape, every member short
        assert r["metadata"]["ownerReferences"][0]["kind"] == "PodGroup"
        tpl = templates_of(a, "train")
        assert [t.metadata.name for t in tpl] == [r["spec"]["podSets"][0]["podTemplateRef"]["name"]]
        assert not tpl[0].template.spec.scheduling_gates
        ps = wait_for(lambda: (ps := group_pods(a.api, a.namespace, "train")) and len(ps) == 4
                      and all(bound(p) for p in ps) and ps, 90, what="the gang bound")
    assert watch.half == {"train": 0}, watch.half
    new = group_node_names(a)
    assert len(new) == 2, new  # exactly the nodes it needs
    assert {p.spec.node_name for p in ps} == new
    for p in ps:
        assert (p.metadata.annotations or {}).get(provreq.CONSUME_ANNOTATION) == r["metadata"]["name"], p.metadata
    # once bound, the request and its template go; the PodGroup says it consumed it
    wait_for(lambda: not requests_of(a, "train") and not templates_of(a, "train"), 30, what="request deleted")
    c = wait_for(lambda: (c := provisioning(a, "train")) and c["reason"] == "Consumed" and c, 30,
                 what="Provisioning=False Consumed")
    assert c["status"] == "False" and r["metadata"]["name"] in c["message"], c
    reasons = [e.reason for e in events_for(a.api, a.namespace, "train")]
    assert "ProvisioningRequested" in reasons and "Provisioned" in reasons and "Released" in reasons, reasons
    # the autoscaler added nothing more afterwards
    time.sleep(3)
    assert group_node_names(a) == new


def test_a_gang_that_fits_part_of_the_nodes_asks_for_the_rest_on_new_nodes_only(grow):
    """One existing node of 10 CPU (outside the group) holds two members of 5 CPU; the third needs
    a new node. The autoscaler sees the existing node empty (gated pods hold no room for it), so
    asked without the narrowing it would answer "capacity found" and add nothing."""
    a = grow
    with fixed_node(a) as name:
        create_gang(a, "mix", 3, "5", on_group=False)
        reqs = wait_for(lambda: requests_of(a, "mix") or None, 30, what="the request")
        assert [ps["count"] for ps in reqs[0]["spec"]["podSets"]] == [1]  # exactly the difference
        tpl = templates_of(a, "mix")[0]
        terms = tpl.template.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        excluded = [v for t in terms.node_selector_terms for e in (t.match_expressions or [])
                    if e.key == "kubernetes.io/hostname" and e.operator == "NotIn" for v in e.values]
        assert name in excluded
        ps = wait_for(lambda: (ps := group_pods(a.api, a.namespace, "mix")) and len(ps) == 3
                      and all(bound(p) for p in ps) and ps, 90, what="the gang bound")
        new = group_node_names(a)
        assert len(new) == 1, new
        assert sorted(p.spec.node_name for p in ps) == sorted([name, name, *new])


def test_a_gang_beyond_the_groups_maximum_gets_no_node_and_says_why(grow):
    a = grow
    create_gang(a, "huge", 5, "12")  # one per new node: 5 nodes, the group has at most 4
    c = wait_for(lambda: (c := provisioning(a, "huge")) and c["reason"] == "NotProvisioned" and c, 60,
                 what="Provisioning=True NotProvisioned")
    assert c["status"] == "True" and "CapacityIsNotFound" in c["message"], c
    assert "5 pods" in c["message"], c
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        assert not group_node_names(a), "a node was added for a gang that cannot start whole"
        assert all(gated(p) for p in group_pods(a.api, a.namespace, "huge"))
        time.sleep(0.5)
    st = status(a.api, a.namespace, "huge")
    fits = condition(st, "FitsCluster")
    assert fits["status"] == "False" and "the current nodes" in fits["message"], fits
    assert condition(st, "Released")["status"] == "False", st


def test_two_gangs_competing_for_the_groups_room_never_both_start_half(grow):
    a = grow
    with BoundWatch(a, ["left", "right"]) as watch:
        create_gang(a, "left", 3, "12")   # 3 nodes each; the group has 4
        create_gang(a, "right", 3, "12")

        def one_whole() -> str | None:
            for g in ("left", "right"):
                ps = group_pods(a.api, a.namespace, g)
                if len(ps) == 3 and all(bound(p) for p in ps):
                    return g
            return None

        winner = wait_for(one_whole, 120, what="one gang bound whole")
        loser = "right" if winner == "left" else "left"
        deadline = time.monotonic() + HOLD
        while time.monotonic() < deadline:
            assert all(gated(p) for p in group_pods(a.api, a.namespace, loser)), loser
            time.sleep(0.5)
    assert watch.most[loser] == 0 and watch.half == {"left": 0, "right": 0}, (watch.most, watch.half)
    assert len(group_node_names(a)) <= 4
    c = provisioning(a, loser)
    assert c is not None and c["status"] == "True", c  # it still asks (the autoscaler retries)


def test_a_standing_request_survives_a_controller_restart(grow, provisioning_stack):
    """The request is an object in the cluster: a restarted controller finds it (its informer) and
    neither asks again nor loses what the PodGroup says."""
    a = grow
    create_gang(a, "huge", 5, "12")
    wait_for(lambda: (c := provisioning(a, "huge")) and c["reason"] == "NotProvisioned" and c, 60,
             what="Provisioning=True NotProvisioned")
    before = [r["metadata"]["uid"] for r in requests_of(a, "huge")]
    assert len(before) == 1
    provisioning_stack.restart_controller()
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        assert [r["metadata"]["uid"] for r in requests_of(a, "huge")] == before
        time.sleep(0.5)
    c = provisioning(a, "huge")
    assert c["status"] == "True" and c["reason"] == "NotProvisioned", c
    assert not group_node_names(a)


@pytest.mark.parametrize("taken", [2, 1])
def test_new_nodes_taken_by_others_before_the_release_are_asked_for_again_at_once(grow, provisioning_stack, taken):
    """A gang of 2 x 12 CPU needs 2 new nodes. cogate is paused once it asked; cluster-autoscaler
    provisions the 2 nodes and ``taken`` ordinary pods of 12 CPU bind there first. Resumed, cogate
    sees the booked room gone: it withdraws the request, asks again at once for what the gang still
    lacks (2 nodes, or 1 when one new node is still free), and the gang starts whole well before
    the booking would have expired."""
    a = grow
    core = client.CoreV1Api(a.api)
    with fixed_node(a):
        _taken_and_asked_again(a, core, provisioning_stack, taken)


def _taken_and_asked_again(a, core, provisioning_stack, taken: int) -> None:
    create_gang(a, "train", 2, "12")
    (first,) = wait_for(lambda: requests_of(a, "train") or None, 30, what="the first request")
    name = first["metadata"]["name"]
    with controller_paused(provisioning_stack):
        def provisioned():
            rs = requests_of(a, "train")
            return rs and any(c["type"] == "Provisioned" and c["status"] == "True"
                              for c in (rs[0].get("status") or {}).get("conditions") or ())
        wait_for(provisioned, 60, what="the first request Provisioned")
        new = wait_for(lambda: (n := group_node_names(a)) and len(n) == 2 and n, 60, what="2 new nodes")
        fake_nodes.wait_nodes_ready(a.api, sorted(new), timeout=60)
        for i in range(taken):
            core.create_namespaced_pod(a.namespace, {"apiVersion": "v1", "kind": "Pod",
                                                     "metadata": {"name": f"burst-{i}", "labels": {"app": "burst"}},
                                                     "spec": member_spec("12")})
        wait_for(lambda: all(bound(core.read_namespaced_pod(f"burst-{i}", a.namespace)) for i in range(taken)), 30,
                 what="the burst bound on the new nodes")
        started = time.monotonic()
    c = wait_for(lambda: (c := provisioning(a, "train")) and (c["reason"] == "CapacityTaken"
                                                              or name not in c["message"]) and c, 30,
                 what="the first request withdrawn")
    events = [e.message for e in events_for(a.api, a.namespace, "train") if e.reason == "ProvisioningFailed"]
    assert any(name in m and "of others took the new node" in m and "asking again now" in m for m in events), events
    ps = wait_for(lambda: (ps := group_pods(a.api, a.namespace, "train")) and all(bound(p) for p in ps) and ps, 120,
                  what="the gang bound on the next new nodes")
    assert time.monotonic() - started < 300, "not asked again at once"
    assert not {p.spec.node_name for p in ps} & {core.read_namespaced_pod(f"burst-{i}", a.namespace).spec.node_name
                                                  for i in range(taken)}
    assert len(group_node_names(a)) == 2 + taken, group_node_names(a)  # exactly what was still lacking
    assert name not in {r["metadata"]["name"] for r in requests_of(a, "train")}


def test_a_gang_that_needs_preemption_and_new_nodes_asks_for_the_shortfall_and_evicts_after_they_came(grow):
    """Two spare nodes of 14 CPU (outside the group) are held by balloons of 13 CPU of low
    priority; a high-priority gang of 5 x 12 CPU. The whole gang would need 5 new nodes (one
    member each), more than the group's maximum of 4 (``CapacityIsNotFound``, never started);
    with the balloons counted gone it lacks 3. cogate asks for 3, no balloon goes before they
    exist, then the two balloons are preempted and the gang binds whole."""
    a = grow
    core = client.CoreV1Api(a.api)
    spare = [f"spare{i}-{a.namespace}"[:63] for i in range(2)]
    for n in spare:
        core.create_node(fake_nodes.node_manifest(n, cpu="14", memory="8Gi", pods=110, kwok_taint=False))
    try:
        fake_nodes.wait_nodes_ready(a.api, spare, timeout=60)
        with priority_classes(a.api, low=100, high=1000) as classes:
            _preempt_and_grow(a, core, spare, classes)
    finally:
        for n in spare:
            with contextlib.suppress(client.ApiException):
                core.delete_node(n)


def _preempt_and_grow(a, core, spare: Sequence[str], classes: dict[str, str]) -> None:
    balloons = [f"balloon-{i}" for i in range(len(spare))]
    for b, n in zip(balloons, spare):
        spec = member_spec("13", on_group=False)
        spec.update(priorityClassName=classes["low"], nodeSelector={"kubernetes.io/hostname": n})
        core.create_namespaced_pod(a.namespace, {"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": b, "labels": {"app": "balloon"}}, "spec": spec})
    wait_for(lambda: all(bound(core.read_namespaced_pod(b, a.namespace)) for b in balloons), 60, what="balloons bound")
    started = time.monotonic()
    create_gang(a, "both", 5, "12", on_group=False, priority_class=classes["high"])
    (r,) = wait_for(lambda: requests_of(a, "both") or None, 60, what="the request")
    assert [ps["count"] for ps in r["spec"]["podSets"]] == [3], r["spec"]  # not 5: beyond the maximum of 4
    evicted_with: list[int] = []  # group nodes Ready when a balloon was first seen going
    while True:
        left = [p for p in core.list_namespaced_pod(a.namespace, label_selector="app=balloon").items
                if not p.metadata.deletion_timestamp]
        if len(left) < len(balloons) and not evicted_with:
            evicted_with.append(sum(1 for n in a.group_nodes() if _ready(n)))
        ps = group_pods(a.api, a.namespace, "both")
        if len(ps) == 5 and all(bound(p) for p in ps):
            break
        assert time.monotonic() - started < 180, "the gang did not start"
        time.sleep(0.2)
    assert evicted_with and evicted_with[0] == 3, evicted_with  # no balloon went before the new nodes
    assert len(group_node_names(a)) == 3
    assert sorted(p.spec.node_name in spare for p in ps) == [False, False, False, True, True]
    preempting = condition(status(a.api, a.namespace, "both"), "Preempting")
    assert preempting is not None, status(a.api, a.namespace, "both")


def _ready(n: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (n.get("status") or {}).get("conditions") or ())
