"""Pods that leave their group lose the gate; a missing PodGroup is told once; minResources
reaches the planner (no longer told as unused).

A gated pod whose group label is removed or emptied must not keep the gate for ever: a
label-selector watch reports it as DELETED, like a deleted pod; the reconciler reads it back on
the next pass and, if it still exists without a group, removes the gate. Members naming a
PodGroup that does not exist stay gated and are told once (``PodGroupNotFound``); a PodGroup's
``minResources`` is handed to the planner in ``GroupRequest.min_resources`` (CPU millicores,
counts), and the old ``MinResourcesNotUsed`` event is gone.
"""

from __future__ import annotations

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.controller.model import records
from cogate.controller.planning.patches import left_group
from cogate.controller.status.inputs import waiting_for_pod_group

from tests.builders import NS, Harness, raw_pg, raw_pod, verdict


def _unlabel(h: Harness, name: str, value: str | None) -> None:
    labels = h.cluster.pods[name]["metadata"]["labels"]
    if value is None:
        labels.pop(POD_GROUP_LABEL)
    else:
        labels[POD_GROUP_LABEL] = value


def test_gated_pod_whose_label_was_removed_loses_the_gate():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("WaitingForMembers")])
    before = records.pod_info(h.cluster.pods["a"])
    _unlabel(h, "a", None)
    h.rec.on_member_event("DELETED", before, None)
    h.run()
    assert "schedulingGates" not in h.cluster.pods["a"]["spec"] or not h.cluster.pods["a"]["spec"]["schedulingGates"]
    assert h.cluster.pods["b"]["spec"]["schedulingGates"], "the other member keeps its gate"
    assert ("Normal", "LeftPodGroup") in {(t, r) for t, r, _ in h.events}


def test_label_emptied_counts_as_leaving():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("WaitingForMembers")])
    before = records.pod_info(h.cluster.pods["a"])
    _unlabel(h, "a", "")
    h.rec.on_member_event("MODIFIED", before, records.pod_info(h.cluster.pods["a"]))
    h.run()
    assert not h.cluster.pods["a"]["spec"].get("schedulingGates")


def test_deleted_pod_is_not_touched():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("WaitingForMembers")])
    before = records.pod_info(h.cluster.pods["a"])
    del h.cluster.pods["a"]
    h.rec.on_member_event("DELETED", before, None)
    h.run()
    assert ("pod", "a") not in h.cluster.log


def test_relabelled_to_another_group_keeps_the_gate():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("WaitingForMembers")])
    before = records.pod_info(h.cluster.pods["a"])
    _unlabel(h, "a", "other")
    h.rec.on_member_event("DELETED", before, None)  # e.g. a relist that raced the relabel
    h.run()
    assert h.cluster.pods["a"]["spec"]["schedulingGates"]
    assert ("pod", "a") not in h.cluster.log


def test_left_group_predicate():
    pod = raw_pod("a")
    assert not left_group(pod)
    pod["metadata"]["labels"] = {}
    assert left_group(pod)
    pod["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert not left_group(pod)


def test_members_of_a_missing_pod_group_are_told_once():
    h = Harness([raw_pod("a", group="typo"), raw_pod("b")], [raw_pg()], [verdict("WaitingForMembers")])
    h.run()
    h.run()
    told = [(t, r, m) for t, r, m in h.events if r == "PodGroupNotFound"]
    assert len(told) == 1 and told[0][0] == "Normal"
    assert f"PodGroup {NS}/typo does not exist" in told[0][2]
    assert h.cluster.pods["a"]["spec"]["schedulingGates"], "it stays gated"


def test_waiting_for_pod_group_selects_gated_members_without_a_group():
    a, b, c = (records.pod_info(raw_pod(n, group=g)) for n, g in (("a", "typo"), ("b", "pg"), ("c", "typo")))
    bound = records.pod_info(raw_pod("d", group="typo", gates=(), node="n1"))
    members = {(NS, "typo"): [a, c, bound], (NS, "pg"): [b]}
    got = waiting_for_pod_group([(NS, "pg")], members, DEFAULT_GATE_NAME)
    assert sorted(p.name for p in got) == ["a", "c"]


def test_min_resources_reaches_the_planner_and_is_not_told_as_unused():
    pg = raw_pg()
    pg["spec"]["minResources"] = {"cpu": "1500m", "nvidia.com/gpu": "8"}
    h = Harness([raw_pod("a"), raw_pod("b")], [pg], [verdict("WaitingForMembers")])
    h.run()
    (g,) = h.decide_calls[-1]["groups"]
    assert g.min_resources == (("cpu", 1500), ("nvidia.com/gpu", 8)) and not g.min_resources_error
    assert not [r for _, r, _ in h.events if r == "MinResourcesNotUsed"]
