"""Labelled pods in Kubernetes' own gang scheduling (issue 18 item 3): no members, and the PodGroup's
status says they are ignored (cogate/api.py native_gang_field, controller/records.py member_key,
controller/native.py, its use in controller/reconciler.py)."""

from __future__ import annotations

import pytest

from cogate import api
from cogate.controller import native, records
from cogate.controller.inputs import members_by_group
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


def test_the_status_says_a_native_pod_is_ignored_and_it_is_never_planned_or_ungated():
    h = Harness([raw_pod("a"), _native("n", gates=(GATE,))], [raw_pg()],
                [verdict("WaitingForMembers", message="1 of 2 members present")])
    h.run()
    (g,) = h.decide_calls[0]["groups"]
    assert [m.name for m in g.members] == ["a"]  # the native pod is not planned
    (released,) = [c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Released"]
    assert (released["status"], released["reason"]) == ("False", "WaitingForMembers")
    assert released["message"] == ("1 of 2 members present; 1 labelled pod ignored, Kubernetes gang scheduling "
                                   "places it (spec.schedulingGroup set): n")
    assert h.cluster.pods["n"]["spec"]["schedulingGates"] == [{"name": GATE}]  # cogate never touches it
