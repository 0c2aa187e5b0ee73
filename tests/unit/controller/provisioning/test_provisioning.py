"""The Provisioning room (issue 16): a reconciler with the real planner against a fake API.

Each test runs passes of :class:`~cogate.controller.reconciler.Reconciler`
(``--provisioning-class``) in the kit's real-planner :class:`tests.builders.World` over its
:class:`tests.builders.StatusCluster` (pods, PodGroups, the nodes a test can grow), extended with
PodTemplates and ProvisioningRequests (create, delete, list); the informers are relisted from the
fake between passes (as the watch would deliver). The test plays
cluster-autoscaler: it sets a request's conditions (:meth:`ProvCluster.answer`) and adds the nodes
it "provisioned" (:meth:`ProvCluster.add_node`), and kube-scheduler: it binds released members
(:meth:`World.bind`). Checked: the objects created and deleted, the release patches, the PodGroup
status (``Provisioning``), the Events and the metrics. The pure rules are tested in
tests/unit/controller/provisioning/test_provreq.py.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any

import pytest

from cogate import api
from cogate.controller.planning import planner
from cogate.controller.provisioning import provreq
from cogate.controller.kube.informer import Informer, namespaced_key
from cogate.controller.model.wakeups import WAKE_MARGIN
from tests import builders as kit
from tests.builders import HOSTNAME, NS, T0, ApiError, StatusCluster, node, pinned, pod, raw_pg

CLASS = provreq.ATOMIC_CLASS
NOT_FOUND_MESSAGE = "the server could not find the requested resource"


def iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class BodyError(ApiError):
    """An ``ApiException`` as the client raises it: the API server's ``Status`` in ``body``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        self.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})


class ProvCluster(StatusCluster):
    """The kit's StatusCluster plus PodTemplates and ProvisioningRequests (create/delete/list, uid
    preconditions on delete, scripted errors). ``calls``: the writes in order, ``(verb, name)``
    (pod status writes, preemption's nominations and marks, not among them)."""

    delete_call = "delete Pod"
    grace = 0
    log_status = False

    def __init__(self, pods, pgs, nodes, clock) -> None:
        super().__init__(pods, pgs, nodes, clock)
        self.templates: dict[str, dict] = {}
        self.provreqs: dict[str, dict] = {}
        #: Scripted answers to creates, by kind, in order: an exception to raise, or None to succeed.
        self.create_errors: dict[str, list[Exception | None]] = {"PodTemplate": [], provreq.KIND: []}
        #: Scripted errors of deletes of ProvisioningRequests, in order.
        self.delete_errors: list[Exception] = []
        self.uids = 0

    def _new(self, body: dict) -> dict:
        obj = copy.deepcopy(body)
        self.uids += 1
        self._bump(obj)
        obj["metadata"]["uid"] = f"obj-uid-{self.uids}"
        obj["metadata"]["creationTimestamp"] = iso(self.clock())
        return obj

    def _fail(self, kind: str) -> None:
        """The next scripted answer to a create of ``kind``: an error to raise, or None (it succeeds)."""
        if self.create_errors[kind]:
            error = self.create_errors[kind].pop(0)
            if error is not None:
                raise error

    # CoreV1Api: PodTemplates
    def create_namespaced_pod_template(self, namespace, body, **_):
        assert body["metadata"]["namespace"] == namespace
        self._fail("PodTemplate")
        name = body["metadata"]["name"]
        if name in self.templates:
            raise BodyError(409, f'podtemplates "{name}" already exists')
        self.templates[name] = self._new(body)
        self.calls.append(("create PodTemplate", name))
        return copy.deepcopy(self.templates[name])

    def delete_namespaced_pod_template(self, name, namespace, body=None, **_):
        if name not in self.templates:
            raise ApiError(404)
        self.calls.append(("delete PodTemplate", name))
        del self.templates[name]

    # CustomObjectsApi: ProvisioningRequests
    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **_):
        assert (group, version, plural) == (provreq.GROUP, provreq.VERSION, provreq.PLURAL)
        assert body["metadata"]["namespace"] == namespace
        self._fail(provreq.KIND)
        name = body["metadata"]["name"]
        if name in self.provreqs:
            raise BodyError(409, f'provisioningrequests "{name}" already exists')
        if not 1 <= len(body["spec"]["podSets"]) <= 32:  # the CRD's validation
            raise BodyError(422, f'ProvisioningRequest.autoscaling.x-k8s.io "{name}" is invalid: spec.podSets: '
                                 f'Too many: {len(body["spec"]["podSets"])}: must have at most 32 items')
        for ps in body["spec"]["podSets"]:  # the CRD does not check it, the autoscaler does
            assert ps["podTemplateRef"]["name"] in self.templates
        self.provreqs[name] = self._new(body)
        self.calls.append(("create ProvisioningRequest", name))
        return copy.deepcopy(self.provreqs[name])

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, body=None, **_):
        assert (group, version, plural) == (provreq.GROUP, provreq.VERSION, provreq.PLURAL)
        if self.delete_errors:
            raise self.delete_errors.pop(0)
        if name not in self.provreqs:
            raise ApiError(404)
        uid = ((body or {}).get("preconditions") or {}).get("uid")
        if uid and uid != self.provreqs[name]["metadata"]["uid"]:
            raise ApiError(409, "precondition failed: uid")
        self.calls.append(("delete ProvisioningRequest", name))
        del self.provreqs[name]

    # cluster-autoscaler, played by the test
    def answer(self, name: str, type_: str, status: str = "True", reason: str = "", message: str = "",
               at: float | None = None) -> None:
        """Set condition ``type_`` of request ``name`` as cluster-autoscaler does."""
        obj = self.provreqs[name]
        conds = [c for c in (obj.setdefault("status", {}).get("conditions") or []) if c["type"] != type_]
        conds.append({"type": type_, "status": status, "reason": reason, "message": message,
                      "lastTransitionTime": iso(self.clock() if at is None else at)})
        obj["status"]["conditions"] = conds
        self._bump(obj)

    def add_node(self, name: str, cpu: str = "8") -> None:
        """A node cluster-autoscaler added (a new name and hostname)."""
        self.nodes[name] = node(name).labels(zone="a").cpu(cpu).raw()

    @property
    def request(self) -> dict:
        """The one ProvisioningRequest (fails unless exactly one exists)."""
        (only,) = self.provreqs.values()
        return only


class World(kit.World):
    """The kit's real-planner World with provisioning on (``CLASS``) over a :class:`ProvCluster`,
    the ProvisioningRequests' informer (``provreqs_cache``; its invalid objects in ``invalid``)."""

    cluster_class = ProvCluster
    condition_type = "Provisioning"

    def __init__(self, pods, pgs, *, nodes=(node("n1").labels(zone="a").cpu("4").raw(),),
                 provisioning_class=CLASS, provreqs_cache=True, **kw) -> None:
        super().__init__(pods, pgs, nodes=nodes, provisioning_class=provisioning_class, provreqs_cache=provreqs_cache,
                         **kw)

    def more_caches(self, provreqs_cache: bool = True) -> None:
        self.invalid: list[tuple[str, str]] = []
        if provreqs_cache:
            c = self.cluster
            self.caches.provreqs = Informer("provisioningrequests", lambda: (list(c.provreqs.values()), "1"),
                                            lambda rv: iter(()), namespaced_key, provreq.request_info)
            self.caches.provreqs.on_invalid = lambda raw, exc: self.invalid.append(
                (raw.get("metadata", {}).get("name", "?"), str(exc)))

    def requests_made(self, result: str) -> float:
        return self.metric("cogate_controller_provisioning_requests_total", result=result)


def excluded(template: dict) -> list[dict]:
    """The required node affinity terms of a PodTemplate."""
    return template["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def gang_world(**kw) -> World:
    """n1 (1 cpu, nothing on it); PodGroup pg (minMember 3) of two workers w-0, w-1 (2 cpu) and
    one parameter server ps (3 cpu): none fits, so all three are asked for (two shapes)."""
    pods = [pod("w-0").req(cpu="2").group("pg").gated().raw(), pod("w-1").req(cpu="2").group("pg").gated().raw(),
            pod("ps").req(cpu="3").group("pg").gated().raw()]
    kw.setdefault("nodes", (node("n1").labels(zone="a").cpu("1").raw(),))
    return World(pods, [raw_pg("pg", 3)], **kw)


# -- 1. asking -------------------------------------------------------------------------------------


@pytest.mark.parametrize("decide", [None, planner.decide], ids=["planning-state", "from-scratch"])
def test_a_gang_short_of_nodes_gets_one_template_per_shape_and_one_request_for_exactly_its_members(decide):
    w = gang_world(decide=decide)
    w.run()
    c = w.cluster
    (name,) = c.provreqs
    assert name == provreq.request_name("pg", "pg-uid-pg", int(T0 * 1000))
    # templates first, then the request that names them
    assert c.calls == [("create PodTemplate", f"{name}-0"), ("create PodTemplate", f"{name}-1"),
                       ("create ProvisioningRequest", name)]
    owner = [{"apiVersion": api.API_VERSION, "kind": api.KIND, "name": "pg", "uid": "pg-uid-pg", "controller": True,
              "blockOwnerDeletion": False}]
    labels = {provreq.GROUP_LABEL: "pg", "app.kubernetes.io/managed-by": "cogate"}
    req = c.provreqs[name]
    assert req["apiVersion"] == "autoscaling.x-k8s.io/v1" and req["kind"] == "ProvisioningRequest"
    assert req["metadata"]["ownerReferences"] == owner and req["metadata"]["labels"] == labels
    assert req["spec"] == {"provisioningClassName": CLASS,
                           "podSets": [{"podTemplateRef": {"name": f"{name}-0"}, "count": 1},
                                       {"podTemplateRef": {"name": f"{name}-1"}, "count": 2}]}
    ps_t, w_t = c.templates[f"{name}-0"], c.templates[f"{name}-1"]
    for t, rep in ((ps_t, "ps"), (w_t, "w-0")):
        assert t["metadata"]["ownerReferences"] == owner and t["metadata"]["labels"] == labels
        assert t["metadata"]["namespace"] == NS
        spec = t["template"]["spec"]
        pod_spec = c.pods[rep]["spec"]
        assert "schedulingGates" not in spec and "nodeName" not in spec
        assert spec["containers"] == pod_spec["containers"]
        assert t["template"]["metadata"]["labels"] == {api.POD_GROUP_LABEL: "pg"}
        assert excluded(t) == [{"matchExpressions": [{"key": HOSTNAME, "operator": "NotIn", "values": ["n1"]}]}]
    assert ps_t["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "3"}
    assert w_t["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}
    # the members themselves are untouched: still gated, no pin, no annotation
    assert all(w.gated(m) and "annotations" not in c.pods[m]["metadata"] for m in ("w-0", "w-1", "ps"))

    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("True", "Requested")
    assert cond["message"] == (f"ProvisioningRequest {NS}/{name} asks for 3 pods on new nodes: cluster-autoscaler "
                               f"has not answered yet")
    (ev,) = w.reasons("ProvisioningRequested")
    assert ev[:3] == ("Normal", "ProvisioningRequested", "pg")
    assert ev[3] == (f"asked cluster-autoscaler for 3 pods on new nodes (ProvisioningRequest {NS}/{name}, "
                     f"class {CLASS}): 1 like ps (cpu 3); 2 like w-0 (cpu 2); fits 0 of 3 even with every eligible "
                     f"node empty: cpu short by 6 on eligible nodes (at most 1 free on one node, a member requests 2)")
    assert w.requests_made("created") == 1
    fits = w.condition(type_="FitsCluster")
    assert fits["reason"] == "ExceedsClusterCapacity"
    assert fits["message"] == ("fits 0 of 3 even with every eligible node empty: cpu short by 6 on eligible nodes "
                               "(at most 1 free on one node, a member requests 2) (the current nodes; "
                               f"ProvisioningRequest {NS}/{name} asks cluster-autoscaler for more)")

    c.calls.clear()
    w.run(5.0)  # the request stands: nothing asked again
    c.answer(name, "Accepted", reason="Accepted", message="accepted")
    w.run(5.0)
    assert c.calls == [] and list(c.provreqs) == [name] and len(c.templates) == 2
    assert w.requests_made("created") == 1 and len(w.reasons("ProvisioningRequested")) == 1
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("True", "Requested")
    assert cond["message"].endswith("cluster-autoscaler has not answered yet (Accepted: accepted)")
    assert w.condition(type_="FitsCluster")["message"] == fits["message"]  # said once


def test_nodes_without_a_hostname_label_are_excluded_by_name():
    w = gang_world(nodes=(node("n1").labels(zone="a").cpu("1").raw(),
                          node("bare").hostname(None).labels(zone="a").cpu("1").raw()))
    w.run()
    for t in w.cluster.templates.values():
        assert excluded(t) == [{"matchExpressions": [{"key": HOSTNAME, "operator": "NotIn", "values": ["n1"]}],
                                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bare"]}]}]


# -- 2. provisioned, released, consumed --------------------------------------------------------------


def test_provisioned_nodes_take_the_release_with_the_consume_annotation_then_the_request_goes():
    w = gang_world()
    w.cluster.pods["w-1"]["metadata"]["annotations"] = {"team.example/owner": "ml"}
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    templates = set(c.templates)
    c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="Capacity is found in the cluster",
             at=T0 + 30)
    w.run(30.0)  # provisioned, nodes not there yet: still waiting, announced once
    assert all(w.gated(m) for m in ("w-0", "w-1", "ps"))
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("True", "Provisioned")
    assert cond["message"] == (f"ProvisioningRequest {NS}/{name} asks for 3 pods on new nodes: provisioned "
                               f"(CapacityIsProvisioned: Capacity is found in the cluster); the group is released "
                               f"once the new nodes are Ready")
    (ev,) = w.reasons("Provisioned")
    assert ev[0] == "Normal" and ev[3].startswith(f"ProvisioningRequest {NS}/{name} is provisioned")
    assert w.requests_made("provisioned") == 1
    assert w.metric("cogate_controller_provisioning_request_provisioned_seconds_sum") == 30.0
    assert w.metric("cogate_controller_provisioning_request_provisioned_seconds_count") == 1

    c.add_node("new-a", "4")
    c.add_node("new-b", "4")
    c.log.clear()
    w.run(20.0)
    assert all(not w.gated(m) for m in ("w-0", "w-1", "ps"))
    targets = {m: pinned(c.pods[m]) for m in ("w-0", "w-1", "ps")}
    assert set(targets.values()) <= {"new-a", "new-b"}
    for m in ("w-0", "w-1", "ps"):
        kept = {"team.example/owner": "ml"} if m == "w-1" else {}
        assert c.pods[m]["metadata"]["annotations"] == {provreq.CONSUME_ANNOTATION: name,
                                                        provreq.CLASS_ANNOTATION: CLASS, **kept}
    assert [e for e in c.log if e[0] == "pod"] and list(c.provreqs) == [name]  # stands until bound
    assert len(w.reasons("Provisioned")) == 1

    for m in ("w-0", "w-1"):
        w.bind(m)
    c.calls.clear()
    w.run(1.0)  # 2 of 3 bound: the request still stands
    assert c.calls == [] and list(c.provreqs) == [name]
    w.bind("ps")
    w.run(1.0)
    assert c.calls == [("delete ProvisioningRequest", name)] + [("delete PodTemplate", t) for t in sorted(templates)]
    assert c.provreqs == {} and c.templates == {}
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "Consumed")
    assert cond["message"] == (f"released on the capacity of ProvisioningRequest {NS}/{name}; the request is "
                               f"deleted now that 3 of 3 members are bound")
    assert w.requests_made("consumed") == 1 and len(w.reasons("Provisioned")) == 1
    c.calls.clear()
    w.run(1.0)
    assert c.calls == [] and w.requests_made("created") == 1


# -- 3-5. the autoscaler's other answers ---------------------------------------------------------------


def test_a_failed_request_is_deleted_said_why_and_asked_again_after_the_back_off_under_a_new_name():
    w = gang_world()
    w.run()
    c = w.cluster
    first = c.request["metadata"]["name"]
    templates = sorted(c.templates)
    c.answer(first, "Failed", reason="InvalidPodTemplate", message="pod template ps cannot be scheduled")
    c.calls.clear()
    w.run(10.0)
    assert c.calls == [("delete ProvisioningRequest", first)] + [("delete PodTemplate", t) for t in templates]
    assert c.provreqs == {} and c.templates == {}
    cond = w.condition()
    message = (f"ProvisioningRequest {NS}/{first} failed (InvalidPodTemplate: pod template ps cannot be "
               f"scheduled); asking again in 60 s")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Failed", message)
    assert ("Warning", "ProvisioningFailed", "pg", message) in w.events
    assert w.requests_made("failed") == 1
    assert w.rec.memory.recall("pg-uid-pg").provisioning.until == T0 + 10 + provreq.BACKOFF_SECONDS
    assert "ProvisioningRequest" not in w.condition(type_="FitsCluster")["message"]  # no request stands

    c.calls.clear()
    w.run(59.0)  # 1 s before the back-off ends: nothing asked
    assert c.calls == [] and c.provreqs == {}
    assert w.condition()["reason"] == "Failed"
    w.run(1.0)
    (second,) = c.provreqs
    assert second != first and second == provreq.request_name("pg", "pg-uid-pg", int((T0 + 70) * 1000))
    assert c.calls[-1] == ("create ProvisioningRequest", second) and len(c.templates) == 2
    assert (w.condition()["status"], w.condition()["reason"]) == ("True", "Requested")
    assert w.requests_made("created") == 2


def test_failures_in_a_row_double_the_back_off_and_the_pass_is_woken_for_its_end():
    w = gang_world()
    w.run()
    c = w.cluster
    wakes: list[float | None] = []
    step = w.rec.provisioning.step
    w.rec.provisioning.step = lambda *a: wakes.append(step(*a)) or wakes[-1]
    c.answer(c.request["metadata"]["name"], "Failed", reason="Failed", message="no")
    w.run(1.0)
    w.run(30.0)
    ends = T0 + 1 + provreq.BACKOFF_SECONDS
    # the pass that deletes it and the one that waits: woken for the back-off's end
    assert wakes == [pytest.approx(ends + WAKE_MARGIN, abs=1e-6)] * 2
    w.run(ends - w.now)
    assert len(c.provreqs) == 1
    c.answer(c.request["metadata"]["name"], "Failed", reason="Failed", message="no")
    w.run(1.0)
    assert w.condition()["message"].endswith("asking again in 120 s")
    assert w.rec.memory.recall("pg-uid-pg").provisioning.until == w.now + 120


def test_a_booking_that_expired_before_the_release_is_deleted_and_asked_again_at_once():
    w = gang_world()
    w.run()
    c = w.cluster
    first = c.request["metadata"]["name"]
    c.answer(first, "Provisioned", reason="CapacityIsProvisioned", message="ok")
    w.run(5.0)
    c.answer(first, "BookingExpired", reason="CapacityReservationTimeExpired", message="booking expired")
    c.calls.clear()
    w.run(600.0)
    (second,) = c.provreqs
    assert second != first
    made = [e for e in c.calls if e[0].startswith("create")]
    assert c.calls[:3] == [("delete ProvisioningRequest", first), ("delete PodTemplate", f"{first}-0"),
                           ("delete PodTemplate", f"{first}-1")]
    assert made == [("create PodTemplate", f"{second}-0"), ("create PodTemplate", f"{second}-1"),
                    ("create ProvisioningRequest", second)]
    assert sorted(c.templates) == [f"{second}-0", f"{second}-1"]
    expired = [e for e in w.reasons("ProvisioningFailed")]
    assert [e[0] for e in expired] == ["Warning"]
    assert expired[0][3] == (f"ProvisioningRequest {NS}/{first}: the booking expired before the group was released "
                             f"(CapacityReservationTimeExpired: booking expired); asking again")
    assert w.requests_made("booking_expired") == 1 and w.requests_made("created") == 2
    assert (w.condition()["status"], w.condition()["reason"]) == ("True", "Requested")
    assert all(w.gated(m) for m in ("w-0", "w-1", "ps"))


def test_capacity_not_found_leaves_the_request_standing_and_says_so():
    w = gang_world()
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    c.answer(name, "Provisioned", status="False", reason="CapacityIsNotFound",
             message="Provisioning Request's pods cannot be scheduled in the cluster and cannot be provisioned")
    c.calls.clear()
    w.run(5.0)
    w.run(300.0)
    assert c.calls == [] and list(c.provreqs) == [name]
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("True", "NotProvisioned")
    assert cond["message"] == (f"ProvisioningRequest {NS}/{name} asks for 3 pods on new nodes: not provisioned "
                               f"(CapacityIsNotFound: Provisioning Request's pods cannot be scheduled in the cluster "
                               f"and cannot be provisioned); cluster-autoscaler tries again")
    assert w.reasons("Provisioned") == [] and w.reasons("ProvisioningFailed") == []
    # and when the autoscaler finds room later, it goes on as usual
    c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="found")
    c.add_node("new-a", "8")
    w.run(5.0)
    assert all(not w.gated(m) for m in ("w-0", "w-1", "ps"))
    assert {pinned(c.pods[m]) for m in ("w-0", "w-1", "ps")} == {"new-a"}
    assert c.pods["ps"]["metadata"]["annotations"][provreq.CONSUME_ANNOTATION] == name


# -- 6. who asks, for how many ------------------------------------------------------------------------


def test_a_group_that_fits_the_current_nodes_never_asks():
    w = World([pod("m-0").req(cpu="2").group("pg").gated().raw(),
               pod("m-1").req(cpu="2").group("pg").gated().raw()], [raw_pg("pg", 2)])
    w.run()
    assert all(not w.gated(m) for m in ("m-0", "m-1"))
    for m in ("m-0", "m-1"):
        w.bind(m)
    w.run(1.0)
    assert w.cluster.calls == [] and w.cluster.provreqs == {} and w.cluster.templates == {}
    assert w.condition() is None and w.reasons("ProvisioningRequested") == []
    assert "annotations" not in w.cluster.pods["m-0"]["metadata"]


@pytest.mark.parametrize("decide", [None, planner.decide], ids=["planning-state", "from-scratch"])
def test_a_group_that_fits_part_asks_for_exactly_the_difference_and_is_released_across_old_and_new_nodes(decide):
    pods = [pod(f"m-{i}").req(cpu="2").group("pg").gated().raw() for i in range(3)]
    w = World(pods, [raw_pg("pg", 3)], decide=decide)  # n1: 4 cpu, room for 2 of the 3 members
    w.run()
    c = w.cluster
    req = c.request
    name = req["metadata"]["name"]
    assert req["spec"]["podSets"] == [{"podTemplateRef": {"name": f"{name}-0"}, "count": 1}]
    assert list(c.templates) == [f"{name}-0"]
    assert w.condition()["message"].startswith(f"ProvisioningRequest {NS}/{name} asks for 1 pod on new nodes")
    c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="ok")
    c.add_node("new-a", "2")
    w.run(5.0)
    targets = sorted(pinned(c.pods[m]) for m in ("m-0", "m-1", "m-2"))
    assert targets == ["n1", "n1", "new-a"]


def test_two_groups_short_of_room_never_count_the_same_room_the_higher_priority_is_planned_first():
    old_low = [pod(f"lo-{i}").req(cpu="2").group("lo").gated().priority(0).raw() for i in range(3)]
    new_high = [pod(f"hi-{i}").req(cpu="2").group("hi").gated().priority(1000).raw() for i in range(3)]
    lo, hi = raw_pg("lo", 3), raw_pg("hi", 3)
    hi["metadata"]["creationTimestamp"] = "2024-01-01T00:01:00Z"  # younger, but first by priority
    w = World(old_low + new_high, [lo, hi])  # n1: 4 cpu: room for 2 members of one group
    w.run()
    c = w.cluster
    by_group = {r["metadata"]["labels"][provreq.GROUP_LABEL]: r for r in c.provreqs.values()}
    assert sorted(by_group) == ["hi", "lo"]
    assert [ps["count"] for ps in by_group["hi"]["spec"]["podSets"]] == [1]
    assert [ps["count"] for ps in by_group["lo"]["spec"]["podSets"]] == [3]  # n1's room is hi's
    assert by_group["lo"]["metadata"]["ownerReferences"][0]["uid"] == "pg-uid-lo"
    assert w.requests_made("created") == 2


def test_a_group_that_fits_only_without_another_groups_reservation_asks_for_all_its_members():
    high = [pod(f"hi-{i}").req(cpu="2").group("hi").gated().priority(1000).raw() for i in range(2)]
    low = [pod(f"lo-{i}").req(cpu="2").group("lo").gated().priority(0).raw() for i in range(2)]
    w = World(high + low, [raw_pg("hi", 2), raw_pg("lo", 2)])  # n1: 4 cpu: one group's room
    w.run()
    c = w.cluster
    assert all(not w.gated(m) for m in ("hi-0", "hi-1")) and all(w.gated(m) for m in ("lo-0", "lo-1"))
    assert w.condition("lo", "Preempting")["reason"] == "NoLowerPriorityPods"  # hi's members are no victims
    req = c.request
    assert req["metadata"]["labels"][provreq.GROUP_LABEL] == "lo"
    assert [ps["count"] for ps in req["spec"]["podSets"]] == [2]  # hi's reservation is not counted as free
    assert w.condition("hi") is None


def test_an_empty_cluster_asks_for_every_member_and_the_templates_keep_their_node_selector():
    pods = [pod(f"m-{i}").req(cpu="2").group("pg").gated().raw() for i in range(2)]
    for p in pods:
        p["spec"]["nodeSelector"] = {"cogate.dev/node-group": "autoscaled"}
    w = World(pods, [raw_pg("pg", 2)], nodes=())  # a node group scaled to zero
    w.run()
    c = w.cluster
    assert [ps["count"] for ps in c.request["spec"]["podSets"]] == [2]
    (t,) = c.templates.values()
    assert t["template"]["spec"]["nodeSelector"] == {"cogate.dev/node-group": "autoscaled"}
    assert "affinity" not in t["template"]["spec"] or not t["template"]["spec"]["affinity"]  # no node to exclude
    c.answer(c.request["metadata"]["name"], "Provisioned", reason="CapacityIsProvisioned", message="ok")
    c.add_node("new-a", "8")
    c.nodes["new-a"]["metadata"]["labels"]["cogate.dev/node-group"] = "autoscaled"
    w.run(30.0)
    assert [pinned(c.pods[m]) for m in ("m-0", "m-1")] == ["new-a", "new-a"]


def test_members_for_a_node_group_at_zero_nodes_beside_other_nodes_ask_for_all_of_them():
    pods = [pod(f"m-{i}").req(cpu="2").group("pg").gated().raw() for i in range(2)]
    for p in pods:
        p["spec"]["nodeSelector"] = {"cogate.dev/node-group": "autoscaled"}
    w = World(pods, [raw_pg("pg", 2)], nodes=(node("control-plane").labels(zone="a").cpu("64").raw(),))
    w.run()
    c = w.cluster
    assert w.condition(type_="Released")["reason"] == "Unschedulable"  # by their own constraints, not capacity
    assert [ps["count"] for ps in c.request["spec"]["podSets"]] == [2]
    (t,) = c.templates.values()
    assert t["template"]["spec"]["nodeSelector"] == {"cogate.dev/node-group": "autoscaled"}
    assert excluded(t) == [{"matchExpressions": [{"key": HOSTNAME, "operator": "NotIn", "values": ["control-plane"]}]}]
    name = c.request["metadata"]["name"]
    c.calls.clear()
    w.run(5.0)  # the request stands while the verdict stays Unschedulable
    assert c.calls == [] and w.condition()["reason"] == "Requested"
    c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="ok")
    c.add_node("new-a", "8")
    c.nodes["new-a"]["metadata"]["labels"]["cogate.dev/node-group"] = "autoscaled"
    w.run(30.0)
    assert [pinned(c.pods[m]) for m in ("m-0", "m-1")] == ["new-a", "new-a"]
    assert c.pods["m-0"]["metadata"]["annotations"][provreq.CONSUME_ANNOTATION] == name


def test_an_unschedulable_group_new_nodes_cannot_help_never_asks():
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}]}}
    pods = [pod(f"m-{i}").req(cpu="2").group("pg").gated().raw() for i in range(2)]
    for p in pods:
        p["spec"]["affinity"] = copy.deepcopy(affinity)  # no bound pod to meet: new nodes do not help
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    assert w.condition(type_="Released")["reason"] == "Unschedulable"
    assert w.cluster.calls == [] and w.condition() is None


# -- 7. room found another way --------------------------------------------------------------------------


def test_a_group_released_on_room_freed_meanwhile_goes_without_the_annotation_and_the_request_is_deleted():
    pods = [pod("big").req(cpu="4").on("n1").priority(5000).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    c = w.cluster
    assert w.condition(type_="Preempting")["reason"] == "NoLowerPriorityPods"  # preemption first: it cannot help
    name = c.request["metadata"]["name"]
    c.answer(name, "Accepted", reason="Accepted")
    w.run(5.0)
    del c.pods["big"]  # room frees on its own
    c.calls.clear()
    w.run(5.0)
    assert [pinned(c.pods[m]) for m in ("m-0", "m-1")] == ["n1", "n1"]
    assert all("annotations" not in c.pods[m]["metadata"] for m in ("m-0", "m-1"))
    assert c.calls == [("delete ProvisioningRequest", name), ("delete PodTemplate", f"{name}-0")]
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "NotNeeded")
    assert cond["message"] == (f"released without the capacity of ProvisioningRequest {NS}/{name} (Accepted); the "
                               f"request is deleted")
    assert w.requests_made("not_needed") == 1 and w.requests_made("consumed") == 0


def test_a_group_that_stops_waiting_for_room_has_its_request_deleted():
    w = gang_world()
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    del c.pods["ps"]  # fewer members than minMember now: it waits for members, new nodes do not help
    c.calls.clear()
    w.run(5.0)
    assert c.calls == [("delete ProvisioningRequest", name), ("delete PodTemplate", f"{name}-0"),
                       ("delete PodTemplate", f"{name}-1")]
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "NotNeeded")
    assert cond["message"].startswith(f"ProvisioningRequest {NS}/{name} deleted: the group no longer waits for room")
    c.calls.clear()
    w.run(5.0)
    assert c.calls == []


# -- 8. the group deleted, opted out, provisioning off ------------------------------------------------------


def test_the_podgroup_deleted_takes_its_request_and_templates():
    w = gang_world()
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    del c.pgs["pg"]
    c.calls.clear()
    w.run(1.0)
    assert [e for e in c.calls if "Pod" not in e[0] or "Template" in e[0]] == [
        ("delete ProvisioningRequest", name), ("delete PodTemplate", f"{name}-0"), ("delete PodTemplate", f"{name}-1")]
    assert c.provreqs == {} and c.templates == {}


def test_a_request_of_an_earlier_podgroup_of_the_same_name_is_deleted_and_the_new_one_asks():
    w = gang_world()
    w.run()
    c = w.cluster
    old = c.request["metadata"]["name"]
    c.pgs["pg"]["metadata"]["uid"] = "pg-uid-pg-2"  # deleted and created again before the garbage collector ran
    c.calls.clear()
    w.run(1.0)
    assert c.calls[0] == ("delete ProvisioningRequest", old)
    (new,) = c.provreqs
    assert new != old and c.request["metadata"]["ownerReferences"][0]["uid"] == "pg-uid-pg-2"


def test_an_opted_out_group_never_asks_and_says_so():
    pg = raw_pg("pg", 3)
    pg["metadata"]["annotations"] = {provreq.OPT_OUT_ANNOTATION: "False"}
    w = World([pod("w-0").req(cpu="2").group("pg").gated().raw(), pod("w-1").req(cpu="2").group("pg").gated().raw(),
               pod("ps").req(cpu="3").group("pg").gated().raw()], [pg],
              nodes=(node("n1").labels(zone="a").cpu("1").raw(),))
    w.run()
    w.run(600.0)
    assert w.cluster.calls == [] and w.cluster.provreqs == {}
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "OptedOut")
    assert cond["message"] == 'the PodGroup says cogate.dev/provisioning: "false": cogate asks no nodes for it'
    assert w.requests_made("created") == 0


@pytest.mark.parametrize("kw", [{"provisioning_class": ""}, {"provreqs_cache": False}], ids=["class-empty", "no-cache"])
def test_with_provisioning_off_nothing_is_asked_and_no_condition_is_written(kw):
    w = gang_world(**kw)
    w.run()
    w.run(600.0)
    assert w.cluster.calls == [] and w.cluster.provreqs == {} and w.cluster.templates == {}
    assert w.condition() is None
    assert w.condition(type_="FitsCluster")["reason"] == "ExceedsClusterCapacity"
    assert w.reasons("ProvisioningRequested") == []


# -- 9. preemption first, then nodes ----------------------------------------------------------------------


def test_with_lower_priority_victims_preemption_acts_and_nothing_is_asked():
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    c = w.cluster
    assert sorted(c.deleted) == ["low-a", "low-b"]
    assert (w.condition(type_="Preempting")["status"], w.condition(type_="Preempting")["reason"]) == \
        ("True", "Preempting")
    assert c.provreqs == {} and c.templates == {} and w.condition() is None
    w.run(1.0)  # the victims are gone: released on their room
    assert [pinned(c.pods[m]) for m in ("m-0", "m-1")] == ["n1", "n1"]
    assert c.provreqs == {} and w.requests_made("created") == 0 and w.condition() is None


def test_without_a_lower_priority_pod_nodes_are_asked_for_in_the_same_pass():
    pods = [pod("eq-a").req(cpu="2").on("n1").priority(1000).raw(),
            pod("eq-b").req(cpu="2").on("n1").priority(1000).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    c = w.cluster
    assert c.deleted == [] and w.condition(type_="Preempting")["reason"] == "NoLowerPriorityPods"
    assert [ps["count"] for ps in c.request["spec"]["podSets"]] == [2]
    assert w.condition()["reason"] == "Requested"


@pytest.mark.parametrize("decide", [None, planner.decide], ids=["planning-state", "from-scratch"])
def test_a_gang_that_needs_victims_and_a_node_asks_for_the_shortfall_after_preemption_and_evicts_after_it_came(decide):
    # issue 37 kind 5: n1 (4 cpu) held by two low-priority balloons, n2 by a pod of the gang's
    # priority; a gang of three 2-cpu members
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("eq").req(cpu="4").on("n2").priority(1000).raw(),
            *(pod(f"m-{i}").req(cpu="2").group("pg").gated().priority(1000).raw() for i in range(3))]
    w = World(pods, [raw_pg("pg", 3)], decide=decide, nodes=(node("n1").cpu("4").raw(), node("n2").cpu("4").raw()))
    w.run()
    c = w.cluster
    assert c.deleted == [] and w.condition(type_="Preempting")["reason"] == "DoesNotFitEvenWithPreemption"
    assert [ps["count"] for ps in c.request["spec"]["podSets"]] == [1]  # not 3: the balloons' room counts
    name = c.request["metadata"]["name"]
    w.run(5.0)
    assert c.deleted == [] and list(c.provreqs) == [name]  # no victim before the node exists
    c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="Capacity is found in the cluster",
             at=T0 + 10)
    c.add_node("new-a", "2")
    w.run(10.0)
    assert sorted(c.deleted) == ["low-a", "low-b"]  # now the gang fits with preemption: evicted
    w.run(1.0)
    assert sorted(pinned(c.pods[m]) for m in ("m-0", "m-1", "m-2")) == ["n1", "n1", "new-a"]
    assert list(c.provreqs) == [name]  # stands until the members are bound


def test_with_preemption_off_an_insufficient_capacity_group_asks_at_once():
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)], preemption=False)
    w.run()
    assert w.cluster.deleted == [] and w.condition(type_="Preempting") is None
    assert [ps["count"] for ps in w.cluster.request["spec"]["podSets"]] == [2]


# -- 10. creating fails ---------------------------------------------------------------------------------------


def test_a_request_the_api_server_refuses_leaves_no_template_and_backs_off():
    w = gang_world()
    c = w.cluster
    c.create_errors[provreq.KIND].append(BodyError(404, NOT_FOUND_MESSAGE))  # the CRD is not installed
    w.run()
    name = provreq.request_name("pg", "pg-uid-pg", int(T0 * 1000))
    assert c.calls == [("create PodTemplate", f"{name}-0"), ("create PodTemplate", f"{name}-1"),
                       ("delete PodTemplate", f"{name}-0"), ("delete PodTemplate", f"{name}-1")]
    assert c.provreqs == {} and c.templates == {}
    cond = w.condition()
    message = f"creating ProvisioningRequest {NS}/{name} failed: {NOT_FOUND_MESSAGE}; asking again in 60 s"
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "CreateFailed", message)
    assert ("Warning", "ProvisioningFailed", "pg", message) in w.events
    assert w.requests_made("create_failed") == 1 and w.requests_made("created") == 0
    c.calls.clear()
    w.run(30.0)
    assert c.calls == []
    w.run(30.0)
    assert len(c.provreqs) == 1 and len(c.templates) == 2 and w.condition()["reason"] == "Requested"


def test_a_template_the_api_server_refuses_undoes_the_ones_made():
    w = gang_world()
    c = w.cluster
    c.create_errors["PodTemplate"] += [None, BodyError(403, 'podtemplates is forbidden: User "cogate" cannot '
                                                            'create resource "podtemplates"')]
    w.run()
    name = provreq.request_name("pg", "pg-uid-pg", int(T0 * 1000))
    assert c.calls == [("create PodTemplate", f"{name}-0"), ("delete PodTemplate", f"{name}-0")]
    assert c.templates == {} and c.provreqs == {}
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "CreateFailed")
    assert cond["message"] == (f'creating PodTemplate {NS}/{name}-1 failed: podtemplates is forbidden: User "cogate" '
                               f'cannot create resource "podtemplates"; asking again in 60 s')


# -- 11. odd objects -----------------------------------------------------------------------------------------------


def bad_request(name: str, **spec_or_status: Any) -> dict[str, Any]:
    raw = {"apiVersion": provreq.API_VERSION, "kind": provreq.KIND,
           "metadata": {"name": name, "namespace": NS, "uid": "uid-" + name, "resourceVersion": "5",
                        "labels": {provreq.GROUP_LABEL: "pg"},
                        "ownerReferences": [{"kind": "PodGroup", "name": "pg", "uid": "pg-uid-pg"}]},
           "spec": {"provisioningClassName": CLASS, "podSets": [{"podTemplateRef": {"name": "t"}, "count": 1}]}}
    raw.update(spec_or_status)
    return raw


@pytest.mark.parametrize("raw", [
    bad_request("counts", spec={"podSets": [{"podTemplateRef": {"name": "t"}, "count": "two"}]}),
    bad_request("podsets", spec={"podSets": 7}),
    bad_request("conditions", status={"conditions": [{"status": "True"}]}),
    bad_request("status", status={"conditions": {"type": "Failed", "status": "True"}}),
    bad_request("owners", metadata={"name": "owners", "namespace": NS, "uid": "u", "ownerReferences": 3,
                                    "labels": {provreq.GROUP_LABEL: "pg"}}),
], ids=lambda r: r["metadata"]["name"])
def test_an_invalid_request_is_reported_by_the_informer_and_the_pass_goes_on(raw):
    w = gang_world()
    w.cluster.provreqs[raw["metadata"]["name"]] = raw
    w.run()
    assert {n for n, _ in w.invalid} == {raw["metadata"]["name"]}
    mine = [r for n, r in w.cluster.provreqs.items() if n != raw["metadata"]["name"]]
    assert len(mine) == 1 and w.condition()["reason"] == "Requested"  # the group asked as usual
    w.run(1.0)
    assert len(w.cluster.provreqs) == 2


def test_a_request_naming_templates_that_do_not_exist_is_judged_like_any_other():
    w = gang_world()
    raw = bad_request("foreign")
    raw["metadata"]["creationTimestamp"] = iso(T0 + 100)  # newer than the group's own: it stands
    raw["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "Weird", "message": "?",
                                     "lastTransitionTime": 12}]}
    w.cluster.provreqs["foreign"] = raw
    w.run()
    assert "foreign" not in w.cluster.provreqs  # failed: deleted (its template was never there)
    assert w.condition()["reason"] == "Failed"


# -- a delete that fails ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["Failed", "BookingExpired", "Consumed"])
def test_a_request_whose_delete_fails_is_deleted_in_a_later_pass_and_its_end_counted_once(end):
    w = gang_world()
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    if end == "Consumed":
        c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="ok")
        c.add_node("new-a", "8")
        w.run(1.0)
        for m in ("w-0", "w-1", "ps"):
            w.bind(m)
    else:
        c.answer(name, end, reason=end, message="no")
    c.delete_errors.append(BodyError(500, "etcdserver: request timed out"))
    w.run(1.0)
    assert name in c.provreqs  # the delete failed
    cond = w.condition()
    assert cond["reason"] == {"Failed": "Failed", "BookingExpired": "Requested", "Consumed": "Consumed"}[end]
    w.run(1.0)
    assert name not in c.provreqs  # deleted in the next pass
    assert sorted(c.templates) == sorted(t for r in c.provreqs.values() for t, _ in
                                         provreq.request_info(r).templates)
    assert len(c.provreqs) == (1 if end == "BookingExpired" else 0)  # asked again at once after an expiry
    assert w.condition() == cond  # the same end, said once
    assert w.requests_made({"Failed": "failed", "BookingExpired": "booking_expired", "Consumed": "consumed"}[end]) == 1
    assert len(w.reasons("ProvisioningFailed")) == (0 if end == "Consumed" else 1)
    if end == "Failed":
        memory = w.rec.memory.recall("pg-uid-pg")
        assert memory.provisioning.failures == 1 and memory.provisioning.until == T0 + 1 + provreq.BACKOFF_SECONDS


def test_a_group_opted_out_after_asking_has_its_request_deleted():
    w = gang_world()
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    c.pgs["pg"]["metadata"]["annotations"] = {provreq.OPT_OUT_ANNOTATION: "false"}
    c.calls.clear()
    w.run(1.0)
    assert c.calls == [("delete ProvisioningRequest", name), ("delete PodTemplate", f"{name}-0"),
                       ("delete PodTemplate", f"{name}-1")]
    assert (w.condition()["status"], w.condition()["reason"]) == ("False", "OptedOut")
    assert w.requests_made("not_needed") == 1
    c.calls.clear()
    w.run(600.0)
    assert c.calls == []


def test_a_group_whose_new_member_names_another_scheduler_has_its_request_deleted():
    w = gang_world()
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    del c.pods["ps"]
    c.pods["ps-2"] = pod("ps-2").req(cpu="3").group("pg").gated().raw()  # its Job made a new one, for another scheduler
    c.pods["ps-2"]["spec"]["schedulerName"] = "volcano"
    c.calls.clear()
    w.run(1.0)
    assert c.calls[0] == ("delete ProvisioningRequest", name) and c.provreqs == {}
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "NotNeeded")
    assert "ps-2 names scheduler 'volcano', which cogate does not plan for" in cond["message"]
    w.run(600.0)
    assert c.provreqs == {}


# -- restarts and leftovers -----------------------------------------------------------------------------------


def test_a_restarted_controller_goes_on_with_the_standing_request():
    w = gang_world()
    w.run()
    c = w.cluster
    name = c.request["metadata"]["name"]
    w.rec.memory.forget(())  # what a new process starts with
    c.calls.clear()
    w.run(5.0)
    assert c.calls == [] and list(c.provreqs) == [name] and w.condition()["reason"] == "Requested"
    c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="ok")
    c.add_node("new-a", "8")
    w.run(5.0)
    assert all(c.pods[m]["metadata"]["annotations"][provreq.CONSUME_ANNOTATION] == name for m in ("w-0", "w-1", "ps"))


def test_of_two_requests_of_one_group_the_newer_stands_and_the_older_is_deleted():
    w = gang_world()
    w.run()
    c = w.cluster
    first = c.request["metadata"]["name"]
    w.now += 10
    second = provreq.request_name("pg", "pg-uid-pg", 2)
    c.templates[f"{second}-0"] = c._new({"metadata": {"name": f"{second}-0", "namespace": NS}})
    c.provreqs[second] = c._new(provreq.request_body(second, NS, "pg", "pg-uid-pg", CLASS, [(f"{second}-0", 3)]))
    c.calls.clear()
    w.run(1.0)  # e.g. an earlier process made one just before it stopped
    assert c.calls == [("delete ProvisioningRequest", first), ("delete PodTemplate", f"{first}-0"),
                       ("delete PodTemplate", f"{first}-1")]
    assert list(c.provreqs) == [second]
    assert w.condition()["message"].startswith(f"ProvisioningRequest {NS}/{second} asks for 3 pods")


def test_room_held_for_a_preemption_started_in_the_same_pass_is_not_counted_for_another_group():
    pods = ([pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
             pod("low-b").req(cpu="2").on("n1").priority(100).raw()]
            + [pod(f"hi-{i}").req(cpu="2").group("hi").gated().priority(1000).raw() for i in range(4)]
            + [pod(f"lo-{i}").req(cpu="2").group("lo").gated().priority(0).raw() for i in range(5)])
    w = World(pods, [raw_pg("hi", 4), raw_pg("lo", 5)], nodes=(node("n1").labels(zone="a").cpu("8").raw(),))
    w.run()
    c = w.cluster
    assert sorted(c.deleted) == ["low-a", "low-b"]  # hi preempts: all of n1 is held for it
    assert w.condition("lo", "FitsCluster")["reason"] == "ExceedsClusterCapacity"
    req = c.request
    assert req["metadata"]["labels"][provreq.GROUP_LABEL] == "lo"
    assert [ps["count"] for ps in req["spec"]["podSets"]] == [5]  # n1's free room is hi's



@pytest.mark.parametrize("decide", [None, planner.decide], ids=["planning-state", "from-scratch"])
def test_room_nominated_to_another_pod_is_not_counted_as_free_nor_twice(decide):
    other = pod("other").req(cpu="2").priority(5000).raw()  # kube-scheduler nominated n1 for it (it preempted there)
    other["status"]["nominatedNodeName"] = "n1"
    pods = [other, pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
    pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)], decide=decide, nominated=True)  # n1: 4 cpu, 2 promised to other
    w.run()
    assert w.condition(type_="Released")["reason"] == "InsufficientCapacity"
    assert [ps["count"] for ps in w.cluster.request["spec"]["podSets"]] == [1]


# -- many members ------------------------------------------------------------------------------------------------


def test_a_gang_of_an_indexed_job_beyond_32_pods_asks_with_one_pod_set():
    pods = [pod(f"m-{i}").req(cpu="2").group("pg").gated().raw() for i in range(40)]
    for i, p in enumerate(pods):
        p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = str(i)  # one per pod
    w = World(pods, [raw_pg("pg", 40)], nodes=(node("n1").labels(zone="a").cpu("1").raw(),))
    w.run()
    c = w.cluster
    assert [ps["count"] for ps in c.request["spec"]["podSets"]] == [40]
    (t,) = c.templates.values()
    assert t["template"]["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"  # m-0's


def test_more_shapes_than_one_request_takes_are_refused_before_any_template():
    pods = [pod(f"m-{i}").req(cpu=f"{2000 + i}m").group("pg").gated().raw() for i in range(provreq.MAX_POD_SETS + 1)]
    w = World(pods, [raw_pg("pg", provreq.MAX_POD_SETS + 1)],
              nodes=(node("n1").labels(zone="a").cpu("1").raw(),))
    w.run()
    c = w.cluster
    assert c.calls == [] and c.templates == {}
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "CreateFailed")
    assert cond["message"] == ("the 33 members to ask for have 33 shapes; a ProvisioningRequest takes at most 32 pod "
                               "sets; asking again in 60 s")


# -- spec.minResources: minMember fits, the rest of minResources has no pods ---------------------------


@pytest.mark.parametrize("decide", [None, planner.decide], ids=["planning-state", "from-scratch"])
def test_a_group_waiting_only_for_min_resources_preempts_nothing_asks_nothing_and_says_so(decide):
    # n1 8 cpu, a pod of the same priority takes 6: the driver (1 cpu) fits, 1 cpu free, minResources asks 5
    pg = raw_pg("pg", 1)
    pg["spec"]["minResources"] = {"cpu": "5"}
    w = World([pod("driver").req(cpu="1").group("pg").gated().priority(10).raw(),
               pod("busy").req(cpu="6").on("n1").priority(10).raw()], [pg],
              nodes=(node("n1").labels(zone="a").cpu("8").raw(),), decide=decide)
    w.run()
    w.run(600.0)
    assert w.gated("driver") and "busy" in w.cluster.pods  # no victim, no release
    assert w.cluster.provreqs == {} and w.requests_made("created") == 0
    released = w.condition(type_="Released")
    assert (released["status"], released["reason"]) == ("False", "InsufficientCapacity")
    assert released["message"].startswith("fits 1 of 1, but minResources cpu short by 3: 1 free beyond the 1 member "
                                          "placed, minResources asks 5")
    pre = w.condition(type_="Preempting")
    assert (pre["status"], pre["reason"]) == ("False", "NoLowerPriorityPods")
    prov = w.condition()
    assert (prov["status"], prov["reason"]) == ("False", "MinResourcesOnly")
    assert prov["message"].startswith("asks no nodes for spec.minResources (cpu short by 3)")
    # a node with room comes: released
    w.cluster.nodes["n2"] = node("n2").labels(zone="a").cpu("4").raw()
    w.run(1.0)
    assert not w.gated("driver")
    assert w.condition()["reason"] == "NotNeeded" and w.condition(type_="Preempting")["message"].startswith(
        "released without preemption")


@pytest.mark.parametrize("decide", [None, planner.decide], ids=["planning-state", "from-scratch"])
def test_a_group_waiting_only_for_min_resources_preempts_for_the_rest_and_is_released(decide):
    # issue 37 kind 9: the driver fits, the rest of minResources needs a lower-priority pod gone
    pg = raw_pg("pg", 1)
    pg["spec"]["minResources"] = {"cpu": "5"}
    w = World([pod("driver").req(cpu="1").group("pg").gated().priority(10).raw(),
               pod("busy").req(cpu="6").on("n1").priority(0).raw(),
               pod("small").req(cpu="1").on("n1").priority(0).raw()], [pg],
              nodes=(node("n1").labels(zone="a").cpu("8").raw(),), decide=decide)
    for t in (0.0, 1.0, 2.0, 3.0):
        w.run(t)
    assert "busy" not in w.cluster.pods and "small" in w.cluster.pods  # the one victim that makes room
    assert not w.gated("driver")
    assert w.cluster.provreqs == {}


def test_a_group_whose_min_resources_exceeds_the_cluster_asks_no_nodes_for_it():
    pg = raw_pg("pg", 1)
    pg["spec"]["minResources"] = {"cpu": "64"}
    w = World([pod("driver").req(cpu="1").group("pg").gated().raw()], [pg],
              nodes=(node("n1").labels(zone="a").cpu("4").raw(),))
    w.run()
    fits = w.condition(type_="FitsCluster")
    assert (fits["status"], fits["reason"]) == ("False", "ExceedsClusterCapacity")
    assert fits["message"] == ("spec.minResources does not fit even with every eligible node empty: minResources cpu "
                               "short by 60: 3 allocatable beyond the 1 member placed, minResources asks 64")
    assert w.cluster.provreqs == {} and w.condition()["reason"] == "MinResourcesOnly"


# -- issue 37 kind 6: the capacity a request brought taken by others --------------------------------


def test_capacity_taken_by_others_before_the_release_is_withdrawn_and_asked_again_at_once_then_with_backoff():
    w = gang_world()
    w.run()
    c = w.cluster
    first = c.request["metadata"]["name"]
    c.answer(first, "Provisioned", reason="CapacityIsProvisioned", message="ok")
    w.run(1.0)
    assert first in c.provreqs  # provisioned, the nodes not there yet: it stands
    c.add_node("new-1", cpu="8")
    c.pods["burst"] = pod("burst").req(cpu="7").on("new-1").raw()  # an ordinary pod takes the new node
    c.calls.clear()
    w.run(1.0)
    (second,) = c.provreqs
    assert second != first
    assert c.calls[0] == ("delete ProvisioningRequest", first)
    assert ("create ProvisioningRequest", second) in c.calls
    # the new request asks for new nodes other than the taken one
    assert all("new-1" in excluded(t)[0]["matchExpressions"][0]["values"] for t in c.templates.values())
    (ev,) = w.reasons("ProvisioningFailed")
    assert ev[3] == (f"ProvisioningRequest {NS}/{first} was provisioned, but 1 pod of others took the new node "
                     f"(new-1) before the group was released: {NS}/burst; withdrawn, asking again now")
    assert w.requests_made("capacity_taken") == 1 and w.requests_made("created") == 2
    assert all(w.gated(m) for m in ("w-0", "w-1", "ps"))
    # taken again: withdrawn, asked again after 60 s only
    c.answer(second, "Provisioned", reason="CapacityIsProvisioned", message="ok")
    c.add_node("new-2", cpu="8")
    c.pods["gang-b"] = pod("b-0").group("other").req(cpu="7").on("new-2").raw()  # another gang's member
    c.calls.clear()
    w.run(1.0)
    assert not c.provreqs and w.requests_made("capacity_taken") == 2
    assert w.condition()["message"].endswith("withdrawn, asking again in 60 s")
    assert w.rec.memory.recall("pg-uid-pg").provisioning.until == w.now + 60
    w.run(61.0)
    (third,) = c.provreqs
    assert third not in (first, second)


def test_new_nodes_with_only_per_node_pods_or_nothing_are_not_taken():
    w = gang_world()
    w.run()
    c = w.cluster
    first = c.request["metadata"]["name"]
    c.answer(first, "Provisioned", reason="CapacityIsProvisioned", message="ok")
    c.add_node("new-1", cpu="2")  # one of the nodes, too small alone: the rest is coming
    ds = pod("ds-new-1").req(cpu="1").on("new-1").affinity({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["new-1"]}]}]}}}).raw()
    c.pods["ds-new-1"] = ds
    w.run(1.0)
    assert list(c.provreqs) == [first] and w.requests_made("capacity_taken") == 0
