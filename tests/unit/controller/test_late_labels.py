"""Members that were never gated (their pod-group label came after cogate's webhook ran, or they
were created with spec.nodeName): the rule ``lifecycle.never_gated`` (metadata.generation; for
spec.nodeName, managedFields), its use in ``ungated_without_release`` for released groups too, the
message naming the members, the cause and the fix, and the PodGroup's status and Warning event
through the reconciler (issue 21 item 4; issue 29: spec.nodeName named as the cause)."""

from __future__ import annotations

import copy

import pytest

from cogate import api
from cogate.controller.status import lifecycle
from cogate.controller.model import records
from cogate.models import PodGroup

from tests.builders import Harness, pod, podgroup, raw_pg, raw_pod, verdict

GATE = api.DEFAULT_GATE_NAME
RELEASED = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}


def member(name, *, generation=1, gates=(), node="", phase=None, deleting=False, created_on=""):
    b = pod(name).group("g").req(cpu=1).generation(generation).created(0)
    if gates:
        b.gated(*gates)
    if node:
        b.on(node)
    if created_on:
        b.created_on(created_on)
    if phase:
        b.phase(phase)
    if deleting:
        b.deleting(0)
    return b.info()


def pg(min_member=2, **status):
    return podgroup("g").uid("u1").created(None).rv(None).min_member(min_member).status(**status).obj()


@pytest.mark.parametrize("value,expected", [(1, 1), (7, 7), (None, 0), ("1", 0), (True, 0), (0, 0), (-3, 0)])
def test_pod_info_reads_metadata_generation(value, expected):
    raw = raw_pod("p")
    if value is not None:
        raw["metadata"]["generation"] = value
    assert records.pod_info(raw).generation == expected


@pytest.mark.parametrize("kw,expected", [
    ({}, True),                                              # created without the gate, waits for kube-scheduler
    ({"node": "n1"}, True),                                  # ... and bound (binding leaves generation)
    ({"gates": ("example.com/other",)}, True),               # another gate only: never carried ours
    ({"gates": (GATE,)}, False),                             # gated: waits for its release
    ({"generation": 2, "node": "n1"}, False),                # released (the gate's removal changed spec)
    ({"generation": 2}, False),                              # released, not bound yet
    ({"generation": 0, "node": "n1"}, False),                # no generation (API server < 1.33): unknown
    ({"phase": "Succeeded", "node": "n1"}, False),           # ended
    ({"deleting": True}, False),                             # going
    ({"created_on": "n1"}, True),                            # created with spec.nodeName
    ({"created_on": "n1", "generation": 0}, True),           # ... known without a generation too
    ({"created_on": "n1", "generation": 3}, True),           # ... and after a later change of spec
    ({"created_on": "n1", "phase": "Succeeded"}, False),     # ended
])
def test_never_gated(kw, expected):
    assert lifecycle.never_gated(member("m", **kw), GATE) is expected


def test_released_group_reports_only_members_never_gated():
    ms = [member("a", generation=2, node="n1"), member("b", generation=3, node="n2"),
          member("late", node="n1"), member("late-pending"), member("gated", gates=(GATE,)),
          member("old", generation=0, node="n3")]
    got = lifecycle.ungated_without_release(pg(2, **RELEASED), ms, GATE)
    assert [m.name for m in got] == ["late", "late-pending"]


def test_group_never_released_keeps_its_rule_and_names_the_fix_for_never_gated():
    ms = [member("by-hand", generation=2, node="n1"), member("late", node="n2"), member("w", gates=(GATE,))]
    got = lifecycle.ungated_without_release(pg(3), ms, GATE)
    assert [m.name for m in got] == ["by-hand", "late"]
    text = lifecycle.runners_message(got)
    assert "members by-hand run although cogate has not released the group" in text
    assert "members late were never gated" in text
    assert "reinvocationPolicy IfNeeded" in text and "webhook.lateLabels.enabled=true" in text
    assert "by-hand" not in text.split("; members late")[1]


@pytest.mark.parametrize("names", [["late"], ["x-0", "x-1", "x-2"]])
def test_message_for_a_released_group_names_each_never_gated_member(names):
    text = lifecycle.runners_message([member(n, node="n1") for n in names])
    assert text.startswith(f"members {', '.join(names)} were never gated")
    assert "run although cogate has not released" not in text


@pytest.mark.parametrize("entries,expected", [
    ([{"manager": "kubectl-create", "operation": "Update", "fieldsV1": {"f:spec": {"f:nodeName": {}}}}], True),
    ([{"manager": "x", "operation": "Apply", "fieldsV1": {"f:spec": {"f:nodeName": {}}}}], True),
    ([{"manager": "kubectl-create", "operation": "Update", "fieldsV1": {"f:spec": {"f:containers": {}}}}], False),
    # a status write naming nodeName (no such field, but a subresource entry never counts)
    ([{"manager": "k", "operation": "Update", "subresource": "status", "fieldsV1": {"f:spec": {"f:nodeName": {}}}}],
     False),
    (None, False), ("junk", False), ([None, {"fieldsV1": "junk"}, {"fieldsV1": {"f:spec": []}}], False),
])
def test_pod_info_knows_a_member_created_with_node_name(entries, expected):
    """From managedFields: kube-scheduler's binding records no entry, the creator's owns f:nodeName;
    unreadable entries read as unknown (False), never an error."""
    raw = raw_pod("p", gates=(), node="n1", phase="Running")
    if entries is not None:
        raw["metadata"]["managedFields"] = entries
    assert records.pod_info(raw).bound_at_creation is expected
    raw["metadata"]["labels"] = {}                      # read for members only
    assert records.pod_info(raw).bound_at_creation is False


def test_message_names_spec_node_name_as_the_cause_not_the_late_label_entry():
    ms = [member("direct", created_on="n1"), member("late", node="n2"), member("by-hand", generation=2, node="n1"),
          member("old-direct", generation=0, created_on="n3")]
    got = lifecycle.ungated_without_release(pg(5), ms, GATE)
    assert [m.name for m in got] == ["direct", "late", "by-hand", "old-direct"]
    parts = lifecycle.runners_message(got).split("; members ")
    (direct,) = [p for p in parts if "spec.nodeName" in p]
    assert direct.startswith("direct, old-direct were created with spec.nodeName: they never pass kube-scheduler")
    assert "create them without spec.nodeName" in direct and "lateLabels" not in direct
    (late,) = [p for p in parts if "were never gated" in p]
    assert late.startswith("late were never gated") and "nodeName" not in late and "lateLabels" in late
    (hand,) = [p for p in parts if "run although" in p]
    assert "by-hand run although" in hand and "nodeName" not in hand
    # a released group: the member created bound is reported (and not adopted), whatever its generation
    assert [m.name for m in lifecycle.ungated_without_release(pg(2, **RELEASED), ms, GATE)] == [
        "direct", "late", "old-direct"]
    assert lifecycle.runners_message([member("d", created_on="n1")]).startswith("members d were created with spec.nodeName")


def _pod(name, *, generation, **kw):
    raw = raw_pod(name, group="pg", owner=True, **kw)
    raw["metadata"]["generation"] = generation
    return raw


@pytest.mark.parametrize("late_kw", [
    {"gates": (), "node": "n1", "phase": "Running"},   # bound and running, never gated
    {"gates": (), "phase": "Pending"},                 # waiting for kube-scheduler, never gated
])
def test_reconciler_reports_a_never_gated_member_of_a_released_group(late_kw):
    pods = [_pod("a", generation=2, gates=(), node="n1", phase="Running"),
            _pod("b", generation=2, gates=(), node="n2", phase="Running"),
            _pod("late", generation=1, **late_kw)]
    h = Harness(pods, [raw_pg(status=dict(RELEASED))], lambda groups: [verdict("AlreadyReleased", fits=2)])
    h.run()
    st = h.cluster.pgs["pg"]["status"]
    (d,) = [c for c in st["conditions"] if c["type"] == "Disrupted"]
    assert d["status"] == "True" and d["reason"] == "UngatedWithoutRelease", d
    assert "late" in d["message"] and "were never gated" in d["message"] and "a," not in d["message"]
    warnings = [e for e in h.events if e[1] == "UngatedWithoutRelease"]
    assert len(warnings) == 1 and warnings[0][0] == "Warning" and "late" in warnings[0][2]
    assert "webhook.lateLabels.enabled=true" in warnings[0][2]
    # told once while it lasts
    h.now += 1
    h.run()
    assert len([e for e in h.events if e[1] == "UngatedWithoutRelease"]) == 1
    # another never-gated member is news at once, named
    more = _pod("late-2", generation=1, gates=(), node="n3", phase="Running")
    h.cluster.pods["late-2"] = more
    h.caches.members.apply_local(more)
    h.caches.bound.apply_local(more)
    h.now += 1
    h.run()
    warnings = [e for e in h.events if e[1] == "UngatedWithoutRelease"]
    assert len(warnings) == 2 and "late, late-2" in warnings[1][2], warnings
    # the never-gated members go: bound ones are lost members of the running gang, told at once as
    # False/MembersPlaced (minMember still placed: the gang is not disrupted), and UngatedWithoutRelease
    # is no longer said
    for name, rv in (("late", "99"), ("late-2", "98")):
        gone = copy.deepcopy(h.cluster.pods[name])
        gone["metadata"]["deletionTimestamp"] = "2024-01-01T00:01:00Z"
        gone["metadata"]["resourceVersion"] = rv
        h.cluster.pods[name] = gone
        h.caches.members.apply_local(gone)
    h.now += 1
    h.run()
    (d,) = [c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Disrupted"]
    assert d["status"] == "False" and d["reason"] == "MembersPlaced" and "late-2" in d["message"], d
    assert [e[1] for e in h.events].count("MemberLost") >= 1
    h.now += 1
    h.run()
    (d2,) = [c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Disrupted"]
    assert d2 == d, (d, d2)


def test_reconciler_quiet_for_members_cogate_released():
    pods = [_pod(n, generation=2, gates=(), node="n1", phase="Running") for n in ("a", "b", "c")]
    h = Harness(pods, [raw_pg(status=dict(RELEASED))], lambda groups: [verdict("AlreadyReleased", fits=3)])
    h.run()
    st = h.cluster.pgs["pg"]["status"]
    assert not [c for c in st.get("conditions", []) if c["type"] == "Disrupted"]
    assert not [e for e in h.events if e[1] == "UngatedWithoutRelease"]
    assert st["phase"] == "Running" and st["running"] == 3
