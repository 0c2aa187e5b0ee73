"""Labelled pods in Kubernetes' own gang scheduling (issue 18 item 3): no members, and the PodGroup's
status says they are ignored (cogate/api.py native_gang_field, controller/model/records.py member_key,
controller/release/native.py, its use in controller/reconciler.py)."""

from __future__ import annotations

import pytest

from cogate import api
from cogate.controller.release import native
from cogate.controller.planning import patches
from cogate.controller.model import records
from cogate.controller.status.inputs import members_by_group
from tests.builders import GATE, NS, Harness, raw_pg, raw_pod, verdict


def _native(name: str, field: str = "schedulingGroup", **kw) -> dict:
    raw = raw_pod(name, **kw)
    raw["spec"][field] = {"podGroupName": "native-pg"} if field == "schedulingGroup" else {"name": "w", "podGroup": "g"}
    return raw


@pytest.mark.parametrize("spec, field", [
    ({}, ""),
    ({"schedulingGroup": None, "workloadRef": None}, ""),
    ({"schedulingGroup": {"podGroupName": "x"}}, "spec.schedulingGroup"),
    ({"workloadRef": {"name": "w", "podGroup": "g"}}, "spec.workloadRef"),
    ({"schedulingGroup": {"podGroupName": "x"}, "workloadRef": {"name": "w"}}, "spec.schedulingGroup"),
    ({"schedulingGroup": {}}, "spec.schedulingGroup"),  # any value but null: the API server validates it
    (None, ""),
    ("not a spec", ""),
])
def test_native_gang_field(spec, field):
    assert api.native_gang_field(spec) == field


@pytest.mark.parametrize("field", ["schedulingGroup", "workloadRef"])
@pytest.mark.parametrize("gates", [(), (GATE,)])  # created before the webhook, or with the gate copied in
def test_a_native_pod_is_no_member(field, gates):
    p = records.pod_info(_native("n", field, gates=gates))
    assert p.native == f"spec.{field}" and p.group == "pg"
    assert records.member_key(p) is None and not records.is_member(p, NS, "pg")
    plain = records.pod_info(raw_pod("a", gates=gates))
    assert plain.native == "" and records.member_key(plain) == (NS, "pg")
    assert members_by_group([p, plain]) == {(NS, "pg"): [plain]}


def test_ignored_by_group_and_its_text():
    pods = [records.pod_info(r) for r in (
        _native("w-2"), _native("w-0", "workloadRef"), raw_pod("a"), _native("x", group="other"),
        _native("gone") | {"metadata": {**raw_pod("gone")["metadata"], "deletionTimestamp": "2024-01-01T00:00:01Z"}},
        _native("free", group=None))]
    ignored = native.ignored_by_group(pods)
    assert {k: [p.name for p in v] for k, v in ignored.items()} == {(NS, "pg"): ["w-0", "w-2"], (NS, "other"): ["x"]}
    assert native.ignored_text(ignored[(NS, "pg")]) == (
        "2 labelled pods ignored, Kubernetes gang scheduling places them (spec.schedulingGroup, spec.workloadRef "
        "set): w-0, w-2")
    assert native.ignored_text(ignored[(NS, "other")]) == (
        "1 labelled pod ignored, Kubernetes gang scheduling places it (spec.schedulingGroup set): x")
    assert native.ignored_text(()) == ""
    many = tuple(records.pod_info(_native(f"w-{i}")) for i in range(5))
    assert native.ignored_text(many).endswith(": w-0, w-1, w-2 and 2 more")


def test_explain_appends_to_the_message_or_leaves_the_verdict():
    v = verdict("WaitingForMembers", message="1 of 2 members present")
    assert native.explain(v, ()) is v
    one = (records.pod_info(_native("n")),)
    assert native.explain(v, one).message == ("1 of 2 members present; 1 labelled pod ignored, Kubernetes gang "
                                              "scheduling places it (spec.schedulingGroup set): n")
    assert native.explain(verdict("WaitingForMembers"), one).message.startswith("1 labelled pod ignored")


OTHER_GATE = "example.com/quota"
REASON = "NativeGangScheduling"


def _native_events(h: Harness) -> list[tuple[str, str, str]]:
    return [e for e in h.events if e[1] == REASON]


def test_a_stored_native_pod_loses_only_our_gate_once_is_never_planned_and_the_status_names_it():
    h = Harness([raw_pod("a"), _native("n", gates=(OTHER_GATE, GATE))], [raw_pg()],
                [verdict("WaitingForMembers", message="1 of 2 members present")])
    h.run()
    (g,) = h.decide_calls[0]["groups"]
    assert [m.name for m in g.members] == ["a"]  # the native pod is not planned
    assert h.cluster.pods["n"]["spec"]["schedulingGates"] == [{"name": OTHER_GATE}]  # only ours removed
    assert h.cluster.pods["n"]["spec"]["schedulingGroup"] == {"podGroupName": "native-pg"}
    assert h.cluster.pods["a"]["spec"]["schedulingGates"] == [{"name": GATE}]  # the member waits for its group
    assert _native_events(h) == [("Normal", REASON, "spec.schedulingGroup kept by the API server: Kubernetes' "
                                  "own gang scheduling places the pod, not PodGroup 'pg'; scheduling gate removed")]
    (released,) = [c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Released"]
    assert (released["status"], released["reason"]) == ("False", "WaitingForMembers")
    assert released["message"] == ("1 of 2 members present; 1 labelled pod ignored, Kubernetes gang scheduling "
                                   "places it (spec.schedulingGroup set): n")
    assert h.rec.metrics.gate_removals.labels("native")._value.get() == 1
    h.run()  # the informer still shows it gated: read back, nothing left to remove, no second event
    h.run()
    assert len(_native_events(h)) == 1 and h.rec.metrics.gate_removals.labels("native")._value.get() == 1
    assert h.cluster.pods["n"]["spec"]["schedulingGates"] == [{"name": OTHER_GATE}]


@pytest.mark.parametrize("field", ["schedulingGroup", "workloadRef"])
def test_each_native_field_is_ungated_and_named(field):
    h = Harness([_native("n", field)], [raw_pg()], [verdict("WaitingForMembers")])
    h.run()
    assert not h.cluster.pods["n"]["spec"]["schedulingGates"]
    ((_, _, message),) = _native_events(h)
    assert message.startswith(f"spec.{field} kept by the API server")


def test_only_the_leader_removes_the_gate():
    h = Harness([_native("n")], [raw_pg()], [verdict("WaitingForMembers")])
    h.rec._leading = lambda: False
    h.run()
    assert h.cluster.pods["n"]["spec"]["schedulingGates"] == [{"name": GATE}]
    assert ("pod", "n") not in h.cluster.log and not _native_events(h)


@pytest.mark.parametrize("pod", [
    _native("other-gate-only", gates=(OTHER_GATE,)),  # not ours to remove
    _native("bound", node="n1", gates=()),
    _native("deleting") | {"metadata": {**raw_pod("deleting")["metadata"], "deletionTimestamp": "2024-01-01T00:00:01Z"}},
])
def test_native_pods_without_our_gate_or_bound_or_deleting_are_not_touched(pod):
    name = pod["metadata"]["name"]
    before = {k: v for k, v in pod["spec"].items()}
    h = Harness([pod], [raw_pg()], [verdict("WaitingForMembers")])
    h.run()
    assert ("pod", name) not in h.cluster.log and not _native_events(h)
    assert h.cluster.pods[name]["spec"] == before


def test_a_pod_whose_field_is_gone_when_read_back_keeps_the_gate():
    h = Harness([_native("n")], [raw_pg()], [verdict("WaitingForMembers")])
    h.rec.strays.native(h.caches.members.snapshot())
    del h.cluster.pods["n"]["spec"]["schedulingGroup"]  # what is stored decides, not the cache
    assert h.rec.strays.release() == {"uid-n": "skipped"}
    assert h.cluster.pods["n"]["spec"]["schedulingGates"] == [{"name": GATE}] and not _native_events(h)


def test_a_labelled_pod_stored_without_the_field_is_an_ordinary_member():
    # GenericWorkload off: the API server dropped spec.schedulingGroup after admission
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("WaitingForMembers")])
    h.run()
    (g,) = h.decide_calls[0]["groups"]
    assert sorted(m.name for m in g.members) == ["a", "b"]
    assert all(h.cluster.pods[n]["spec"]["schedulingGates"] == [{"name": GATE}] for n in ("a", "b"))
    assert not _native_events(h)


@pytest.mark.parametrize("spec, deleting, expected", [
    ({"schedulingGroup": {"podGroupName": "x"}}, False, True),
    ({"workloadRef": {"name": "w"}}, False, True),
    ({"schedulingGroup": {"podGroupName": "x"}}, True, False),
    ({"schedulingGroup": None}, False, False),
    ({}, False, False),
])
def test_left_to_native_predicate(spec, deleting, expected):
    pod = {"metadata": {"deletionTimestamp": "2024-01-01T00:00:01Z"} if deleting else {}, "spec": spec}
    assert patches.left_to_native(pod) is expected
