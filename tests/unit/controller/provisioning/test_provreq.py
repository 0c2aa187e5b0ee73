"""What cogate asks cluster-autoscaler for, and what its answers mean (controller/provisioning/provreq.py; issue 16).

One section per rule of the module docstring. The shortfall is checked against the planner itself:
with one new node per asked-for member, ``planner.decide`` releases the group, and with one fewer
it does not (rule 2, property tests); the templates' node affinity is checked by parsing it back
the way the planner reads a pod (rule 3).
"""

from __future__ import annotations

import copy
import dataclasses

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.planning import capacity, patches, planner
from cogate.controller.provisioning import provreq
from cogate.controller.provisioning.provreq import State
from cogate.controller.model.records import (InvalidObject, LabelSelector, LabelSelectorRequirement, NodeInfo,
                                      PodAffinityTerm, PodInfo, Reservation, TopologySpreadConstraint, pod_info)
from cogate.controller.model.verdicts import Outcome, PlannerConfig
from tests.builders import group_request, node, pod as pod_, raw_pod

NOW = 1_000.0
CFG = PlannerConfig()


def bound(name: str, on: str, cpu: float) -> PodInfo:
    return pod_(name, "batch").uid("u-" + name).on(on).req(cpu=cpu).created(0).info()


def member(i: int, cpu: float = 1, group: str = "g", prio: int = 0, gates=(GATE,), node_name: str = "",
           phase: str = "Pending", **kw) -> PodInfo:
    b = pod_(f"{group}-{i}").uid(f"u-{group}-{i}").group(group).req(cpu=cpu).priority(prio).created(i)
    if gates:
        b.gated(*gates)
    if node_name:
        b.on(node_name)
    return b.phase(phase).info(**kw)


def short_names(groups, nodes, pods, promised=()) -> dict[str, list[str]]:
    out = provreq.shortfalls(groups, nodes, pods, list(promised), GATE)
    return {k[1]: [m.name for m in v] for k, v in out.items()}


# -- rule 2: exactly the difference --------------------------------------------------------------


def test_a_group_that_fits_part_asks_for_the_rest_only():
    nodes = [node("n1").cpu(4).info()]
    g = group_request([member(i, cpu=2) for i in range(5)])
    assert short_names([(g, True)], nodes, []) == {"g": ["g-2", "g-3", "g-4"]}


def test_a_group_that_fits_asks_for_nothing():
    g = group_request([member(i) for i in range(3)])
    assert short_names([(g, True)], [node("n1").cpu(4).info()], []) == {"g": []}


def test_a_group_with_too_few_members_asks_for_nothing():
    # minMember 4, three members: new nodes would not start it
    g = group_request([member(i) for i in range(3)], 4)
    assert short_names([(g, True)], [], []) == {"g": []}


def test_bound_members_count_toward_min_member():
    members = [member(0, node_name="n1", phase="Running", gates=()), *[member(i, cpu=4) for i in (1, 2)]]
    g = group_request(members, 3)
    # the bound member is among the bound pods, as the planner's input has it
    assert short_names([(g, True)], [node("n1").cpu(4).info()], [members[0]]) == {"g": ["g-1", "g-2"]}


def test_only_min_member_is_asked_for():
    # 6 members, minMember 3: nodes for 3 (kube-scheduler places the rest where they fit)
    g = group_request([member(i, cpu=4) for i in range(6)], 3)
    assert short_names([(g, True)], [], []) == {"g": ["g-0", "g-1", "g-2"]}


def test_two_groups_never_count_the_same_free_room():
    nodes = [node("n1").cpu(4).info()]
    a = group_request([member(i, cpu=2, group="a", prio=10) for i in range(3)], name="a")
    b = group_request([member(i, cpu=2, group="b") for i in range(3)], name="b")
    # a is planned first (priority): it takes the free room; b asks for all three
    assert short_names([(a, True), (b, True)], nodes, []) == {"a": ["a-2"], "b": ["b-0", "b-1", "b-2"]}


def test_a_standing_request_counts_its_room_but_asks_nothing_more():
    nodes = [node("n1").cpu(4).info()]
    a = group_request([member(i, cpu=2, group="a") for i in range(3)], name="a")
    b = group_request([member(i, cpu=2, group="b") for i in range(3)], name="b", created=1.0)
    assert short_names([(a, False), (b, True)], nodes, []) == {"b": ["b-0", "b-1", "b-2"]}


def test_reservations_of_released_members_are_honoured():
    nodes = [node("n1").cpu(4).info()]
    other = member(0, cpu=2, group="other")
    res = Reservation(other.uid, "team", other.name, "n1", dict(other.requests), expires=NOW + 60)
    promised = capacity.promised_room([(res, other)], [])
    g = group_request([member(i, cpu=2) for i in range(2)])
    assert short_names([(g, True)], nodes, [], promised) == {"g": ["g-1"]}


def test_bound_pods_take_their_room():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    g = group_request([member(i, cpu=3) for i in range(3)])
    assert short_names([(g, True)], nodes, [bound("x", "n1", 2)]) == {"g": ["g-1", "g-2"]}


def test_the_view_gives_the_same_answer_as_the_pods():
    from cogate.controller.planning.planstate import PlanningState

    nodes = [node(f"n{i}").cpu(4).info() for i in range(3)]
    pods = [bound("x", "n0", 3), bound("y", "n1", 1)]
    gs = [(group_request([member(i, cpu=2, group="a") for i in range(5)], name="a"), True),
          (group_request([member(i, cpu=3, group="b") for i in range(2)], name="b", created=1.0), True)]
    state = PlanningState()
    for n in nodes:
        state.upsert_node(n)
    for p in pods:
        state.upsert_pod(p)
    by_view = provreq.shortfalls(gs, [], [], [], GATE, view=state.bound_view())
    assert by_view == provreq.shortfalls(gs, nodes, pods, [], GATE)


@settings(max_examples=60, deadline=None)
@given(free=st.lists(st.integers(0, 8), min_size=0, max_size=5), size=st.integers(1, 4),
       count=st.integers(1, 8), extra=st.integers(0, 3))
def test_the_shortfall_is_exactly_what_new_nodes_must_hold(free, size, count, extra):
    """Rule 2 against the planner: one new node (room for one member) per asked member releases
    the group; one node fewer does not."""
    nodes = [node(f"n{i}").cpu(8).info() for i in range(len(free))]
    pods = [bound(f"x{i}", f"n{i}", 8 - f) for i, f in enumerate(free) if f < 8]
    g = group_request([member(i, cpu=size) for i in range(count + extra)], count)
    short = provreq.shortfalls([(g, True)], nodes, pods, [], GATE)[("team", "g")]
    fits_now = sum(f // size for f in free)
    assert len(short) == max(0, count - fits_now)

    def released(k: int) -> bool:
        new = [node(f"new{j}").cpu(size).info() for j in range(k)]
        d = planner.decide(nodes + new, pods, [g], [], NOW, CFG)
        return Outcome(d.verdicts[0].outcome).releases

    assert released(len(short))
    if short:
        assert not released(len(short) - 1)


# -- shapes ---------------------------------------------------------------------------------------


def test_members_are_counted_per_shape():
    ms = [member(0, cpu=2), member(1, cpu=1), member(2, cpu=2), member(3, cpu=1), member(4, cpu=4)]
    got = [(rep.name, n) for rep, n in provreq.shapes(ms)]
    assert got == [("g-0", 2), ("g-1", 2), ("g-4", 1)]


def test_a_node_selector_makes_another_shape():
    ms = [member(0), member(1, node_selector={"pool": "gpu"})]
    assert len(provreq.shapes(ms)) == 2


def indexed(i: int, labels: dict[str, str] | None = None, **kw) -> PodInfo:
    """A member of an Indexed Job: its own completion-index label."""
    labels = labels or {POD_GROUP_LABEL: "g", "app": "train", "batch.kubernetes.io/job-completion-index": str(i)}
    return dataclasses.replace(member(i, **kw), labels=labels)


def test_labels_tell_shapes_apart_while_they_fit_one_request():
    ms = [indexed(i) for i in range(provreq.MAX_POD_SETS)]
    assert [n for _, n in provreq.shapes(ms)] == [1] * provreq.MAX_POD_SETS


def test_beyond_the_pod_sets_of_one_request_only_labels_the_members_select_on_tell_shapes_apart():
    ms = [indexed(i) for i in range(40)]
    assert [(rep.name, n) for rep, n in provreq.shapes(ms)] == [("g-0", 40)]
    spread = TopologySpreadConstraint(1, "kubernetes.io/hostname", LabelSelector((("app", "train"),)))
    roles = [indexed(i, labels={POD_GROUP_LABEL: "g", "role": "ps" if i < 2 else "worker", "app": "train",
                                "batch.kubernetes.io/job-completion-index": str(i)},
                     topology_spread=(spread,)) for i in range(40)]
    assert [n for _, n in provreq.shapes(roles)] == [40]  # role is read by no selector
    anti = PodAffinityTerm("kubernetes.io/hostname",
                           LabelSelector((), (LabelSelectorRequirement("role", "In", ("ps",)),)))
    roles = [dataclasses.replace(m, required_pod_anti_affinity=(anti,)) for m in roles]
    assert [(rep.name, n) for rep, n in provreq.shapes(roles)] == [("g-0", 2), ("g-10", 38)]  # first by name
    keyed = [dataclasses.replace(m, topology_spread=(dataclasses.replace(spread, match_label_keys=(
        "batch.kubernetes.io/job-completion-index",)),)) for m in ms]
    assert len(provreq.shapes(keyed)) == 40  # read by matchLabelKeys: the caller refuses so many


# -- rule 3: new nodes only -----------------------------------------------------------------------


def _matches(affinity, n: NodeInfo) -> bool:
    """Does a pod with ``affinity`` pass node ``n``'s node affinity, read as the planner reads pods?"""
    raw = raw_pod("p", affinity=affinity)
    p = pod_info(raw)
    return not p.required_node_affinity or any(t.matches(n) for t in p.required_node_affinity)


EXISTING = [node("n1").cpu(4).info(), node("n2").hostname("ip-10-0-0-2").cpu(4).info(),
            node("bare").hostname(None).cpu(4).info()]


def test_without_node_affinity_only_new_nodes_match():
    aff = provreq.exclude_nodes(None, EXISTING)
    assert not any(_matches(aff, n) for n in EXISTING)
    assert _matches(aff, node("template-node-for-autoscaled-1234").cpu(4).info())
    terms = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                                            "values": ["ip-10-0-0-2", "n1"]}],
                      "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bare"]}]}]


def test_each_term_keeps_its_own_requirements():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}]}},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    before = copy.deepcopy(aff)
    out = provreq.exclude_nodes(aff, [node("n1").cpu(4).labels(pool="a").info()])
    assert aff == before  # not changed in place
    assert out["podAntiAffinity"] == aff["podAntiAffinity"]
    assert not _matches(out, node("n1").cpu(4).labels(pool="a").info())
    assert _matches(out, node("new").cpu(4).labels(pool="b").info()) and _matches(out,
    node("new").cpu(4).labels(pool="a").info())
    assert not _matches(out, node("new").cpu(4).labels(pool="c").info())


def test_an_empty_term_among_others_stays_empty():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {}, {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}
    out = provreq.exclude_nodes(aff, [node("n1").cpu(4).info()])
    assert out["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0] == {}


def test_no_nodes_no_change():
    assert provreq.exclude_nodes(None, []) == {}


@pytest.mark.parametrize("aff,field", [
    ({"nodeAffinity": []}, "spec.affinity.nodeAffinity"),
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": {}}}},
     "nodeSelectorTerms"),
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [3]}}},
     "nodeSelectorTerms[0]"),
])
def test_an_odd_affinity_is_refused_naming_the_field(aff, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        provreq.exclude_nodes(aff, [node("n1").cpu(4).info()])


def test_the_template_stands_for_the_member():
    raw = raw_pod("m-0", node="", cpu="8")
    raw["metadata"]["labels"]["app"] = "train"
    raw["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox"}]  # kubectl debug
    body = provreq.template_body(raw, "g-abc-0", "g", "pg-uid", [node("n1").cpu(4).info()])
    assert body["kind"] == "PodTemplate" and body["metadata"]["name"] == "g-abc-0"
    assert body["metadata"]["labels"] == {provreq.GROUP_LABEL: "g", "app.kubernetes.io/managed-by": "cogate"}
    assert body["metadata"]["ownerReferences"][0]["uid"] == "pg-uid"
    spec = body["template"]["spec"]
    assert "schedulingGates" not in spec and "nodeName" not in spec
    assert "ephemeralContainers" not in spec  # the API server refuses a PodTemplate with them
    assert spec["containers"] == raw["spec"]["containers"]
    assert body["template"]["metadata"]["labels"]["app"] == "train"
    assert "schedulingGates" in raw["spec"]  # the read pod is not changed


def test_a_pod_without_containers_cannot_stand_in_a_template():
    with pytest.raises(ValueError, match="spec.containers"):
        provreq.template_body({"metadata": {}, "spec": {}}, "t", "g", "u", [])


def test_request_body_and_name():
    body = provreq.request_body("g-1a2b3c", "team", "g", "uid", provreq.ATOMIC_CLASS, [("g-1a2b3c-0", 2)])
    assert body["apiVersion"] == "autoscaling.x-k8s.io/v1" and body["kind"] == "ProvisioningRequest"
    assert body["spec"] == {"provisioningClassName": provreq.ATOMIC_CLASS,
                            "podSets": [{"podTemplateRef": {"name": "g-1a2b3c-0"}, "count": 2}]}
    long = provreq.request_name("x" * 200, "uid", 1)
    assert len(long) <= 63 and long.startswith("x" * 50)
    assert provreq.request_name("g", "uid", 1) == provreq.request_name("g", "uid", 1)
    assert provreq.request_name("g", "uid", 1) != provreq.request_name("g", "uid", 2)
    assert provreq.request_name("a-" + "b" * 47 + "-.c", "u", 1).count("-.") == 0


# -- rule 4: the autoscaler's answer ----------------------------------------------------------------


def raw_request(conditions=(), **meta) -> dict:
    m = {"name": "g-abc", "namespace": "team", "uid": "r1", "labels": {provreq.GROUP_LABEL: "g"},
         "creationTimestamp": "2026-01-01T00:00:00Z",
         "ownerReferences": [{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "name": "g",
                              "uid": "pg-uid"}], **meta}
    return {"metadata": m, "spec": {"provisioningClassName": provreq.ATOMIC_CLASS,
                                    "podSets": [{"podTemplateRef": {"name": "g-abc-0"}, "count": 3}]},
            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": msg,
                                       "lastTransitionTime": "2026-01-01T00:00:05Z"}
                                      for t, s, r, msg in conditions]}}


def test_request_info_reads_what_the_room_needs():
    info = provreq.request_info(raw_request())
    assert (info.namespace, info.name, info.group, info.owner) == ("team", "g-abc", "g", "pg-uid")
    assert info.templates == (("g-abc-0", 3),) and info.count == 3
    assert info.class_name == provreq.ATOMIC_CLASS and info.created > 0


@pytest.mark.parametrize("change,field", [
    (lambda r: r["metadata"].pop("uid"), "metadata.uid"),
    (lambda r: r["metadata"].pop("labels"), "metadata.labels"),
    (lambda r: r["spec"]["podSets"][0].update(count="3"), r"spec.podSets\[0\]"),
    (lambda r: r["status"]["conditions"].append(5), r"status.conditions\[0\]"),
])
def test_an_odd_request_is_refused_naming_the_field(change, field):
    raw = raw_request()
    change(raw)
    with pytest.raises(InvalidObject, match=field):
        provreq.request_info(raw)


@pytest.mark.parametrize("conditions,expected", [
    ((), State.PENDING),
    ((("Accepted", "True", "Accepted", "accepted"),), State.PENDING),
    ((("Provisioned", "False", "CapacityIsNotFound", "Capacity is not found"),), State.NOT_PROVISIONED),
    ((("Provisioned", "True", "CapacityIsProvisioned", "ok"),), State.PROVISIONED),
    ((("Provisioned", "True", "CapacityIsFound", "ok"),), State.PROVISIONED),
    ((("Provisioned", "True", "CapacityIsProvisioned", "ok"),
      ("BookingExpired", "True", "CapacityReservationTimeExpired", "expired")), State.BOOKING_EXPIRED),
    ((("Provisioned", "False", "CapacityIsNotFound", "no"), ("Failed", "True", "Expired", "7 days")), State.FAILED),
    ((("BookingExpired", "True", "x", "y"), ("Failed", "True", "FailedToBookCapacity", "z")), State.FAILED),
    ((("Failed", "False", "", ""),), State.PENDING),
])
def test_the_state_follows_the_autoscalers_conditions(conditions, expected):
    a = provreq.state(provreq.request_info(raw_request(conditions)))
    assert a.state is expected
    if conditions and expected is not State.PENDING:
        assert a.reason and a.since > 0
    assert a.state.ended == (expected in (State.FAILED, State.BOOKING_EXPIRED))


@pytest.mark.parametrize("annotations,out", [(None, False), ({}, False), ({provreq.OPT_OUT_ANNOTATION: "false"}, True),
                                             ({provreq.OPT_OUT_ANNOTATION: " False "}, True),
                                             ({provreq.OPT_OUT_ANNOTATION: "true"}, False)])
def test_opting_out(annotations, out):
    assert provreq.opted_out(annotations) is out


@pytest.mark.parametrize("outcome, min_member, pod_affinity, wants", [
    (Outcome.INSUFFICIENT_CAPACITY, 2, False, True),
    (Outcome.EXCEEDS_CLUSTER_CAPACITY, 2, False, True),
    (Outcome.UNSCHEDULABLE, 2, False, True),  # fit no current node by their own node constraints
    (Outcome.UNSCHEDULABLE, 0, False, False),  # invalid minMember
    (Outcome.UNSCHEDULABLE, 2, True, False),  # required pod affinity: met by bound pods only
    (Outcome.INSUFFICIENT_CAPACITY, 2, True, True),
    (Outcome.WAITING_FOR_MEMBERS, 2, False, False),
    (Outcome.RELEASED, 2, False, False),
    (Outcome.ALREADY_RELEASED, 2, False, False),
])
def test_who_wants_nodes(outcome, min_member, pod_affinity, wants):
    term = pod_affinity_term() if pod_affinity else None
    ms = [member(i, required_pod_affinity=(term,) if term else ()) for i in range(2)]
    assert provreq.wants_nodes(outcome, group_request(ms, min_member)) is wants
    assert provreq.wants_nodes(str(outcome), group_request(ms, min_member)) is wants


def pod_affinity_term():
    raw = raw_pod("x", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}})
    (term,) = pod_info(raw).required_pod_affinity
    return term


def test_backoff_doubles_up_to_ten_minutes():
    assert [provreq.backoff_seconds(n) for n in range(1, 7)] == [60, 120, 240, 480, 600, 600]


# -- the consume annotation in the release patch ------------------------------------------------------


@pytest.mark.parametrize("existing", [None, {}, {"a": "b"}, {provreq.CONSUME_ANNOTATION: "old"}])
def test_the_release_patch_sets_the_consume_annotation(existing):
    raw = raw_pod("m-0")
    if existing is not None:
        raw["metadata"]["annotations"] = dict(existing)
    want = {provreq.CONSUME_ANNOTATION: "g-abc", provreq.CLASS_ANNOTATION: provreq.ATOMIC_CLASS}
    ops = patches.release_patch(raw, GATE, "n1", want)
    out = jsonpatch.apply_patch(raw, ops)
    assert {k: out["metadata"]["annotations"][k] for k in want} == want
    for k, v in (existing or {}).items():
        if k not in want:
            assert out["metadata"]["annotations"][k] == v
    assert not out["spec"].get("schedulingGates")
    assert patches.annotation_ops(out, want) == []  # set already: nothing more to do


# -- issue 37 kind 6: capacity taken ---------------------------------------------------------------


def _node_info(name):
    from cogate.controller.model.records import NodeInfo
    return NodeInfo(name, allocatable={"cpu": 8000, "pods": 110})


def test_retake_seconds_asks_again_at_once_then_backs_off():
    assert [provreq.retake_seconds(n) for n in (1, 2, 3, 4, 8)] == [0.0, 60.0, 120.0, 240.0, 600.0]


@pytest.mark.parametrize("pods,taken", [
    ([], False),                                                          # new node, nothing on it yet
    ([("a", "new-1", None, False)], True),                                # an ordinary pod
    ([("b-0", "new-1", "other", False)], True),                           # another gang's member
    ([("g-0", "new-1", "g", False)], False),                              # the group's own (not released: rare)
    ([("ds", "new-1", None, True)], False),                               # a DaemonSet-style pod pinned by name
    ([("old", "n1", None, False)], False),                                # on a node that existed at the ask
])
def test_booking_taken_names_pods_of_others_on_the_new_nodes(pods, taken):
    from tests.builders import pod as make
    infos = []
    for name, node_name, group, per_node in pods:
        b = make(name).req(cpu="1").on(node_name)
        if group:
            b = b.group(group)
        if per_node:
            b = b.affinity({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}})
        infos.append(b.info())
    ns = infos[0].namespace if infos else "default"
    provisioned = provreq.Answer(provreq.State.PROVISIONED, "CapacityIsProvisioned", "", 1.0)
    nodes = [_node_info("n1"), _node_info("new-1")]
    why = provreq.booking_taken(provisioned, frozenset({"n1"}), nodes, infos, (ns, "g"))
    assert bool(why) is taken, why
    if taken:
        assert why.startswith("1 pod of others took the new node (new-1) before the group was released: ")
    # not provisioned, or the nodes at the ask unknown (a restart): never told
    assert provreq.booking_taken(provreq.Answer(provreq.State.PENDING), frozenset({"n1"}), nodes, infos,
                                 (ns, "g")) == ""
    assert provreq.booking_taken(provisioned, None, nodes, infos, (ns, "g")) == ""
