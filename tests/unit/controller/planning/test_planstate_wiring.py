"""The reconciler feeds its planning state from the informers' deltas (controller/reconciler.py)."""

from __future__ import annotations

from typing import Any

from cogate.controller.model import records
from cogate.controller.kube.informer import name_key, namespaced_key, uid_key
from cogate.controller.kube.metrics import Metrics
from cogate.controller.planning.planner import decide, room_by_node
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.kube.informer import Caches
from cogate.controller.status.inputs import build_group_requests, group_object, members_by_group
from cogate.controller.reconciler import Reconciler
from tests.builders import NS, FakeCluster, informer, node, raw_pg, raw_pod


def _node(name: str, cpu: str = "4") -> dict:
    return node(name).hostname(None).rv("1").alloc(cpu=cpu, pods="10").raw()


def _caches(cluster: FakeCluster, members: list[dict], bound: list[dict], **extra: Any) -> Caches:
    """Caches over ``cluster``'s PodGroups, the given members and bound pods, node n1, and ``extra``."""
    return Caches(
        podgroups=informer("pg", list(cluster.pgs.values()), namespaced_key, group_object),
        members=informer("members", members, uid_key, records.pod_info),
        bound=informer("bound", bound, uid_key, records.pod_info),
        nodes=informer("nodes", [_node("n1")], name_key, records.node_info),
        **extra,
    )


def test_planning_state_follows_informer_deltas_and_decides_as_planner():
    pods = [raw_pod("a", cpu="3"), raw_pod("b", cpu="3"), raw_pod("w", group=None, node="n1", gates=(), cpu="2")]
    cluster = FakeCluster(pods, [raw_pg()])
    caches = _caches(cluster, [p for p in pods if p["metadata"]["labels"]], [p for p in pods if p["spec"].get("nodeName")])
    rec = Reconciler(cluster, cluster, caches, ReconcilerConfig(), metrics=Metrics(), clock=lambda: 1_704_067_300.0,
                     sleep=lambda s: None)
    assert rec.planning is not None

    def same_as_caches() -> None:
        nodes = caches.nodes.snapshot()
        bound = [p for p in caches.bound.snapshot() if p.bound and not p.terminal]
        assert rec.planning.room_by_node() == room_by_node(nodes, bound)
        requests = build_group_requests(caches.podgroups.snapshot(), members_by_group(caches.members.snapshot()))
        assert rec.planning.decide(requests, (), 1_704_067_300.0) == decide(nodes, bound, requests, (), 1_704_067_300.0)

    same_as_caches()  # seeded from the stores
    # watch events after the seed: a node joins, a pod binds there, the first pod goes, a node changes
    caches.nodes._handle_event({"type": "ADDED", "object": _node("n2", cpu="8")})
    caches.bound._handle_event({"type": "ADDED", "object": raw_pod("x", group=None, node="n2", gates=(), cpu="5",
                                                                   phase="Running")})
    same_as_caches()
    caches.bound._handle_event({"type": "DELETED", "object": raw_pod("w", group=None, node="n1", gates=())})
    caches.bound._handle_event({"type": "MODIFIED", "object": raw_pod("x", group=None, node="n2", gates=(),
                                                                      cpu="5", phase="Succeeded", rv="2")})
    caches.nodes._handle_event({"type": "MODIFIED", "object": _node("n1", cpu="6") | {"metadata": {"name": "n1",
                                                                                                  "resourceVersion": "2"}}})
    same_as_caches()
    caches.nodes._handle_event({"type": "DELETED", "object": _node("n2")})
    same_as_caches()
    result = rec.reconcile_once()  # a full pass on the state: both members fit n1 (6 CPU) and are released
    assert [v.outcome for v in result.verdicts] == ["Released"]
    rec.close()


def _nominated(name: str, node: str, cpu: str, rv: str = "1", priority: int = 0) -> dict:
    raw = raw_pod(name, group=None, gates=(), cpu=cpu, rv=rv)
    raw["spec"]["priority"] = priority
    if node:
        raw["status"]["nominatedNodeName"] = node
    return raw


def test_nominations_from_their_informer_are_room_promised_until_they_go():
    """The nominated-pods informer (unbound pods) feeds the planning state: a nomination holds room
    on its node for the group (priority 0 <= the nominated pod's), clearing or deleting it frees
    it, and a pass on the state counts it (issue 21, item 2c)."""
    now = 1_704_067_300.0
    pods = [raw_pod("a", cpu="3")]
    cluster = FakeCluster(pods, [raw_pg(min_member=1)])
    caches = _caches(
        cluster, pods, [],
        nominated=informer("nominated", [_nominated("pre", "n1", "2"), _nominated("plain", "", "4")], uid_key,
                            records.nominated_pod_info),
    )
    metrics = Metrics()
    rec = Reconciler(cluster, cluster, caches, ReconcilerConfig(), metrics=metrics, clock=lambda: now,
                     sleep=lambda s: None)
    requests = build_group_requests(caches.podgroups.snapshot(), members_by_group(caches.members.snapshot()))
    nodes = caches.nodes.snapshot()
    assert rec.planning.nominated == 1  # the pod without a nomination is stored as None and not counted
    got = rec.planning.decide(requests, (), now)
    assert got == decide(nodes, [p for p in caches.nominated.snapshot() if p], requests, (), now)
    assert got.verdicts[0].outcome == "InsufficientCapacity"
    assert got.verdicts[0].message.startswith("fits 0 of 1: cpu short by 1")
    caches.nominated._handle_event({"type": "MODIFIED", "object": _nominated("pre", "", "2", rv="2")})
    assert rec.planning.nominated == 0
    assert rec.planning.decide(requests, (), now + 1).verdicts[0].outcome == "Released"
    caches.nominated._handle_event({"type": "MODIFIED", "object": _nominated("pre", "n1", "2", rv="3")})
    assert rec.planning.decide(requests, (), now + 2).verdicts[0].outcome == "InsufficientCapacity"
    caches.nominated._handle_event({"type": "DELETED", "object": _nominated("pre", "n1", "2", rv="4")})
    result = rec.reconcile_once()
    assert [v.outcome for v in result.verdicts] == ["Released"]
    assert metrics.nominated_pods._value.get() == 0
    rec.close()


# -- DRA devices (controller/devices/room.py) -------------------------------------------------------

def _dra_objects(devices_on_n1: int):
    driver = "gpu.example.com"
    rslice = {"metadata": {"name": "n1-gpu", "resourceVersion": "1"},
              "spec": {"driver": driver, "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                                                                       "resourceSliceCount": 1},
                       "devices": [{"name": f"gpu-{i}"} for i in range(devices_on_n1)]}}
    dclass = {"metadata": {"name": driver, "resourceVersion": "1"},
              "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}
    return rslice, dclass


def _claim(name, allocated=(), reserved=()):
    status = {}
    if allocated:
        status["allocation"] = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
                                                          "device": d} for d in allocated]}}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": u, "uid": u} for u in reserved]
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": status}


def _with_claim(pod: dict, claim: str) -> dict:
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return pod


def test_devices_reach_the_planning_state_and_follow_deltas():
    from cogate.controller.devices import records as devices
    from cogate.controller.devices.dra import is_device_resource

    res = "gpu.example.com devices"
    rslice, dclass = _dra_objects(2)
    pods = [_with_claim(raw_pod("a", cpu="1"), "ca"), _with_claim(raw_pod("b", cpu="1"), "cb"),
            _with_claim(raw_pod("w", group=None, node="n1", gates=(), cpu="1", phase="Running"), "cw")]
    claims = [_claim("ca"), _claim("cb"), _claim("cw", allocated=["gpu-0"], reserved=["uid-w"])]
    cluster = FakeCluster(pods, [raw_pg()])
    caches = _caches(
        cluster, [p for p in pods if p["metadata"]["labels"]], [p for p in pods if p["spec"].get("nodeName")],
        resource_slices=informer("resourceslices", [rslice], name_key, devices.slice_info),
        device_classes=informer("deviceclasses", [dclass], name_key, devices.device_class_info),
        resource_claims=informer("resourceclaims", claims, namespaced_key, devices.device_claim_info),
        claim_templates=informer("resourceclaimtemplates", [], namespaced_key, devices.claim_template_info),
    )
    rec = Reconciler(cluster, cluster, caches, ReconcilerConfig(), metrics=Metrics(), clock=lambda: 1_704_067_300.0,
                     sleep=lambda s: None)
    assert rec.devices.enabled
    rec.reconcile_once()
    free, _ = rec.planning.room_by_node()["n1"]
    assert free[res] == 1, "2 devices, 1 held by the bound pod w"
    assert rec.devices.account.charges == {"uid-w": {res: 1}}
    assert all(p["spec"].get("schedulingGates") for n, p in cluster.pods.items() if n in ("a", "b")), \
        "2 members, 1 free device: both stay gated"
    # a node delta keeps its devices; a third device releases the group
    caches.nodes._handle_event({"type": "MODIFIED", "object": _node("n1", cpu="6") | {
        "metadata": {"name": "n1", "resourceVersion": "2"}}})
    assert rec.planning.room_by_node()["n1"][0][res] == 1
    rslice3, _ = _dra_objects(3)
    caches.resource_slices._handle_event({"type": "MODIFIED", "object": rslice3 | {
        "metadata": {"name": "n1-gpu", "resourceVersion": "2"}}})
    rec.reconcile_once()
    assert not any(p["spec"].get("schedulingGates") for n, p in cluster.pods.items() if n in ("a", "b"))
    # the bound pod goes: its device is no longer charged
    caches.bound._handle_event({"type": "DELETED", "object": pods[2]})
    rec.reconcile_once()
    assert not any(is_device_resource(k) for p in rec.planning.pods for k in p.requests)


def test_without_dra_informers_claims_stay_unchecked_and_nothing_is_overlaid():
    pods = [_with_claim(raw_pod("a", cpu="1"), "ca"), _with_claim(raw_pod("b", cpu="1"), "cb")]
    cluster = FakeCluster(pods, [raw_pg()])
    caches = _caches(cluster, pods, [])
    rec = Reconciler(cluster, cluster, caches, ReconcilerConfig(), metrics=Metrics(), clock=lambda: 1_704_067_300.0,
                     sleep=lambda s: None)
    assert not rec.devices.enabled
    result = rec.reconcile_once()
    (v,) = result.verdicts
    assert v.outcome.value == "Unschedulable" and "(resource claims)" in v.message, v.message
    assert all(p["spec"].get("schedulingGates") for p in cluster.pods.values())
