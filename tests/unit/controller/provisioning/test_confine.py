"""New nodes for a gang confined to a topology domain (controller/provisioning/confine.py; issue 32).

The pure rule (:func:`confine.new_node_labels`) over every kind of verdict and constraint; the
templates' node affinity parsed back the way the planner reads a pod (a node of the domain's labels
matches, one of another domain or without the label does not); the annotation read back; and the
wiring through the reconciler (a gang requiring a rack, its request's templates and status).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.controller.model.records import pod_info
from cogate.controller.model.verdicts import GroupVerdict, Outcome
from cogate.controller.planning.filters import static_reason
from cogate.controller.provisioning import confine, provreq
from cogate.controller.topology import constraints as t
from cogate.controller.topology.constraints import Constraint
from tests.builders import NS, group_request, node, pinned, pod, podgroup, raw_pod
from tests.unit.controller.provisioning.test_provisioning import World, excluded

LEVELS = ("example.com/block", "example.com/rack", t.HOSTNAME_LABEL)
BLOCK, RACK = LEVELS[0], LEVELS[1]
DOMAIN = ((BLOCK, "b1"), (RACK, "r2"))


def verdict(outcome: Outcome, domain=()) -> GroupVerdict:
    return GroupVerdict(NS, "g", outcome, {}, 0, "", domain=domain)


def request(constraint: Constraint | None):
    r = group_request([pod("g-0").group("g").gated(GATE).req(cpu=1).info()], 2)
    return r if constraint is None else dataclasses.replace(r, topology=constraint)


WAITING = [o for o in Outcome if o.waiting]


@pytest.mark.parametrize("outcome", WAITING)
def test_a_waiting_gang_under_a_required_level_asks_for_its_closest_domain(outcome):
    r = request(Constraint(LEVELS, required=1))
    assert confine.new_node_labels(verdict(outcome, DOMAIN), r) == DOMAIN


@pytest.mark.parametrize("required,expect", [
    (0, ((BLOCK, None),)),
    (1, ((BLOCK, None), (RACK, None))),
    (2, ((BLOCK, None), (RACK, None))),  # the hostname is never asked for
])
def test_without_a_closest_domain_the_required_labels_must_exist(required, expect):
    """No node carries the level's labels yet, or every domain is refused to an exclusive gang."""
    r = request(Constraint(LEVELS, required=required, exclusive=True))
    assert confine.new_node_labels(verdict(Outcome.EXCEEDS_CLUSTER_CAPACITY), r) == expect


def test_a_node_level_domain_asks_only_for_its_coarser_labels():
    """required: hostname: a new node never has an existing node's name."""
    r = request(Constraint(LEVELS, required=2))
    domain = (*DOMAIN, (t.HOSTNAME_LABEL, "r2-0"))
    assert confine.new_node_labels(verdict(Outcome.INSUFFICIENT_CAPACITY, domain), r) == DOMAIN


@pytest.mark.parametrize("constraint,outcome", [
    (None, Outcome.INSUFFICIENT_CAPACITY),                              # no topology
    (Constraint(LEVELS, preferred=1), Outcome.INSUFFICIENT_CAPACITY),   # preferred only: anywhere
    (Constraint(LEVELS, required=1), Outcome.RELEASED),                 # not waiting
])
def test_nothing_is_asked_without_a_required_level_or_for_a_group_not_waiting(constraint, outcome):
    assert confine.new_node_labels(verdict(outcome, DOMAIN), request(constraint)) == ()


def test_the_templates_affinity_admits_only_new_nodes_of_the_domain():
    existing = [node("r2-0").cpu(4).labels({BLOCK: "b1", RACK: "r2"}).info()]
    raw = raw_pod("m-0", node="", cpu="8")
    raw["spec"]["nodeSelector"] = {"pool": "gpu"}
    body = provreq.template_body(raw, "g-abc-0", "g", "uid", existing, DOMAIN)
    (term,) = excluded(body)
    assert term["matchExpressions"][:2] == [{"key": BLOCK, "operator": "In", "values": ["b1"]},
                                            {"key": RACK, "operator": "In", "values": ["r2"]}]
    as_pod = {**raw, "spec": {**body["template"]["spec"], "schedulingGates": []}}
    m = pod_info(as_pod)

    def admits(labels):
        return static_reason(node("new").cpu(16).labels({"pool": "gpu", **labels}).info(), m) is None

    assert admits({BLOCK: "b1", RACK: "r2"})
    assert not admits({BLOCK: "b1", RACK: "r1"}) and not admits({BLOCK: "b2", RACK: "r2"})
    assert not admits({BLOCK: "b1"}) and not admits({})
    assert static_reason(node("new").cpu(16).labels({BLOCK: "b1", RACK: "r2"}).info(), m) is not None  # own selector
    assert static_reason(existing[0], m) is not None  # an existing node of the domain: not new


def test_exists_admits_any_value_and_no_node_without_the_label():
    body = provreq.template_body(raw_pod("m-0", node="", cpu="1"), "t", "g", "uid", [], ((RACK, None),))
    assert excluded(body) == [{"matchExpressions": [{"key": RACK, "operator": "Exists"}]}]
    m = pod_info({**raw_pod("m-0", node="", cpu="1"), "spec": {**body["template"]["spec"], "schedulingGates": []}})
    assert static_reason(node("a").cpu(4).labels({RACK: "anything"}).info(), m) is None
    assert static_reason(node("b").cpu(4).labels({}).info(), m) is not None


def test_without_a_carry_the_template_is_as_before():
    raw = raw_pod("m-0", node="", cpu="1")
    existing = [node("n1").cpu(4).info()]
    body = provreq.template_body(raw, "t", "g", "u", existing, ())
    assert excluded(body) == [{"matchExpressions": [{"key": t.HOSTNAME_LABEL, "operator": "NotIn", "values": ["n1"]}]}]
    assert provreq.exclude_nodes(None, [], ()) == {}
    assert "annotations" not in provreq.request_body("r", NS, "g", "u", provreq.ATOMIC_CLASS, [("r-0", 1)])["metadata"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a.io/zone", "rack", "x/y/block"]),
                          st.one_of(st.none(), st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,10}[a-z0-9])?", fullmatch=True))),
                max_size=3))
def test_the_request_records_what_it_asks_and_reads_it_back(carry):
    carry = tuple(carry)
    body = provreq.request_body("g-1", NS, "g", "uid", provreq.ATOMIC_CLASS, [("g-1-0", 1)], carry)
    raw = {**body, "metadata": {**body["metadata"], "uid": "r-uid"}}
    assert provreq.request_info(raw).carry == carry
    assert ("annotations" in body["metadata"]) == bool(carry)


@pytest.mark.parametrize("value,expect", [
    (None, ()), (3, ()), ("", ()), (",, ,", ()),
    ("example.com/rack=r1", ((RACK, "r1"),)),
    ("example.com/block=b1,example.com/rack", ((BLOCK, "b1"), (RACK, None))),
])
def test_an_edited_annotation_is_read_as_far_as_it_goes(value, expect):
    assert confine.parse({t.DOMAIN_ANNOTATION: value} if value is not None else {}) == expect
    assert confine.parse(None) == () and confine.parse("odd") == ()  # type: ignore[arg-type]


@pytest.mark.parametrize("carry,text", [
    ((), ""), (DOMAIN, " in rack r2"), (((BLOCK, None), (RACK, None)), " in any rack"),
    (((BLOCK, "b1"),), " in block b1"),
])
def test_words(carry, text):
    assert confine.words(carry) == text


# -- through the reconciler ---------------------------------------------------------------------------


def racks_world(annotations: dict[str, str], nodes) -> World:
    """PodGroup pg (minMember 3) of three members of 3 cpu, annotated ``annotations``, on ``nodes``."""
    pods = [pod(f"g-{i}").req(cpu="3").group("pg").gated().raw() for i in range(3)]
    pg = podgroup("pg").min_member(3).annotations(annotations).raw()
    return World(pods, [pg], nodes=nodes)


def rack_node(name: str, rack: str, cpu: str = "4"):
    return node(name).labels({RACK: rack}).cpu(cpu).raw()


def test_a_gang_requiring_a_rack_asks_for_the_rest_of_its_closest_rack_and_says_where():
    """r2 holds 2 of 3 (two nodes of 4 cpu), r1 one: r2 is the closest; one member is asked for, on a
    new node of rack r2."""
    w = racks_world({t.REQUIRED: RACK}, [rack_node("r1-0", "r1"), rack_node("r2-0", "r2"), rack_node("r2-1", "r2")])
    w.run()
    c = w.cluster
    req = c.request
    name = req["metadata"]["name"]
    assert req["spec"]["podSets"][0]["count"] == 1
    assert req["metadata"]["annotations"] == {t.DOMAIN_ANNOTATION: f"{RACK}=r2"}
    (tpl,) = c.templates.values()
    (term,) = excluded(tpl)
    assert term["matchExpressions"][0] == {"key": RACK, "operator": "In", "values": ["r2"]}
    cond = w.condition()
    assert cond["message"] == (f"ProvisioningRequest {NS}/{name} asks for 1 pod on new nodes in rack r2: "
                               f"cluster-autoscaler has not answered yet")
    (ev,) = w.reasons("ProvisioningRequested")
    assert ev[3].startswith(f"asked cluster-autoscaler for 1 pod on new nodes in rack r2 (ProvisioningRequest {NS}/")
    # the autoscaler adds a node of rack r2 (it would not answer with another rack: the template says r2)
    c.answer(name, "Provisioned", reason="CapacityIsProvisioned", message="found")
    c.nodes["r2-new"] = rack_node("r2-new", "r2", "8")
    w.run(5.0)
    assert all(not w.gated(f"g-{i}") for i in range(3))
    assert sorted(pinned(c.pods[f"g-{i}"]) for i in range(3)) == ["r2-0", "r2-1", "r2-new"]


def test_an_exclusive_gang_asks_for_the_rack_free_of_other_gangs():
    """r1 (one node of 8 cpu) runs a member of another gang and would hold 2 of 3; r2 (4 cpu) holds 1:
    r1 is refused, so the request asks for the 2 members r2 lacks, in rack r2."""
    other = pod("o-0").req(cpu="1").group("other").on("r1-0").raw()
    pods = [pod(f"g-{i}").req(cpu="3").group("pg").gated().raw() for i in range(3)]
    pg = podgroup("pg").min_member(3).annotations({t.REQUIRED: RACK, t.EXCLUSIVE: "true"}).raw()
    w = World([other, *pods], [pg, podgroup("other").min_member(1).status(phase="Running").raw()],
              nodes=[rack_node("r1-0", "r1", "8"), rack_node("r2-0", "r2")])
    w.run()
    req = w.cluster.request
    assert req["spec"]["podSets"][0]["count"] == 2, req["spec"]
    assert req["metadata"]["annotations"] == {t.DOMAIN_ANNOTATION: f"{RACK}=r2"}
    (tpl,) = w.cluster.templates.values()
    assert all({"key": RACK, "operator": "In", "values": ["r2"]} in term["matchExpressions"] for term in excluded(tpl))


def test_a_gang_requiring_a_level_no_node_carries_asks_for_nodes_that_carry_it():
    w = racks_world({t.REQUIRED: RACK}, [node("n1").cpu("4").raw()])
    w.run()
    req = w.cluster.request
    assert req["spec"]["podSets"][0]["count"] == 3
    assert req["metadata"]["annotations"] == {t.DOMAIN_ANNOTATION: RACK}
    (tpl,) = w.cluster.templates.values()
    (term,) = excluded(tpl)
    assert term["matchExpressions"][0] == {"key": RACK, "operator": "Exists"}
    assert " on new nodes in any rack:" in w.condition()["message"]


def test_preemption_is_fenced_the_same_way_without_a_closest_domain():
    """fence_requests (what preemption and the shortfall read) uses the same fence: with no node in
    any rack, members may only go to nodes that carry the rack label."""
    from cogate.controller.planning.fenced import fence_requests, waiting_fence

    r = request(Constraint(LEVELS, required=1))
    v = verdict(Outcome.EXCEEDS_CLUSTER_CAPACITY)
    assert waiting_fence(v, r) == ((BLOCK, None), (RACK, None))
    (m,) = fence_requests([v], {(NS, "g"): r})[(NS, "g")].members
    assert static_reason(node("a").cpu(4).labels({BLOCK: "b", RACK: "x"}).info(), m) is None
    assert static_reason(node("b").cpu(4).labels({RACK: "x"}).info(), m) is not None
    assert static_reason(node("c").cpu(4).info(), m) is not None
