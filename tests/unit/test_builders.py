"""The test kit (tests/builders/): what its builders build, so that tests relying on its defaults
keep their inputs when it changes."""

from __future__ import annotations

from cogate import api
from cogate.controller.model.records import NodeInfo, PodInfo, Taint
from tests.builders import GATE, NS, claim, node, pod, podgroup, raw_pg, raw_pod, ready_node


def test_raw_pod_is_the_api_json_of_a_gated_member():
    assert raw_pod("a") == {
        "metadata": {"name": "a", "namespace": NS, "uid": "uid-a", "creationTimestamp": "2024-01-01T00:00:00Z",
                     "resourceVersion": "1", "labels": {api.POD_GROUP_LABEL: "pg"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                 "schedulingGates": [{"name": GATE}]},
        "status": {"phase": "Pending"}}
    owned = raw_pod("b", group=None, gates=(), node="n1", phase="Running", owner=True)
    assert owned["metadata"]["labels"] == {} and "schedulingGates" not in owned["spec"]
    assert owned["spec"]["nodeName"] == "n1" and owned["status"] == {"phase": "Running"}
    assert owned["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1", "controller": True}]


def test_raw_pg_and_ready_node():
    assert raw_pg("x", 3, {"phase": "Scheduling"}, 60) == {
        "apiVersion": api.API_VERSION, "kind": api.KIND,
        "metadata": {"name": "x", "namespace": NS, "uid": "pg-uid-x", "resourceVersion": "1",
                     "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 60}, "status": {"phase": "Scheduling"}}
    assert ready_node("n1") == {"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": {},
                                "status": {"allocatable": {"cpu": "64", "pods": "110"},
                                           "conditions": [{"type": "Ready", "status": "True"}]}}
    assert podgroup("g").uid("u1").created(None).rv(None).raw()["metadata"] == {
        "name": "g", "namespace": NS, "uid": "u1"}


def test_pod_info_goes_through_the_converter():
    p = pod("m-0").group("g").req(cpu=1.5, memory=2**30).gated().priority(10).created(3).info()
    assert p == PodInfo(NS, "m-0", "uid-m-0", labels={api.POD_GROUP_LABEL: "g"},
                        requests={"cpu": 1500, "memory": 2**30}, gates=(GATE,), priority=10, created=3.0)
    b = pod("v").on("n1").req(cpu="500m").nominated("n2", by="someone").deleting(7).started(5).info()
    assert (b.node_name, b.phase, b.requests, b.nominated_node, b.deletion_at, b.started) == (
        "n1", "Running", {"cpu": 500}, "n2", 7.0, 5.0)
    pinned = pod("k").pinned("n3").gated().info()
    assert pinned.required_node_affinity[0].match_fields[0].values == ("n3",)
    assert pod("h").info(host_ports=()).host_ports == ()


def test_node_info_carries_the_hostname_label_unless_told():
    t = Taint("k", "v", "NoSchedule")
    assert node("n1").alloc(cpu=4, memory="8Gi").taint(t).info() == NodeInfo(
        "n1", labels={"kubernetes.io/hostname": "n1"}, allocatable={"cpu": 4000, "memory": 8 * 2**30, "pods": 110},
        taints=(t,))
    assert node("n2").hostname(None).not_ready().unschedulable().info() == NodeInfo(
        "n2", allocatable={"pods": 110}, unschedulable=True, ready=False)


def test_claim_json():
    c = claim("c", "ns").request({"name": "r"}).allocated("d", "p", "dev").reserved_for("u1").raw()
    assert c == {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [{"name": "r"}]}},
                 "status": {"allocation": {"devices": {"results": [
                     {"request": "gpu", "driver": "d", "pool": "p", "device": "dev"}]}},
                     "reservedFor": [{"resource": "pods", "name": "u1", "uid": "u1"}]}}
