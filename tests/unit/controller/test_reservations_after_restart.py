"""A restarted controller (or a new leader) keeps the room of released members that
kube-scheduler has not bound yet, and releases no later group into it.

Reservations live in the controller's memory; a process rebuilds them on its first pass
from the pins the release wrote (``matchFields metadata.name In [node]``). End to end:
tests/e2e/test_robustness.py::test_restart_keeps_room_of_released_unbound_members_reserved.
"""

from __future__ import annotations

import jsonpatch
import pytest

from cogate import api
from cogate.controller.planning import planner
from cogate.controller.model import records
from cogate.controller.planning.patches import pin_ops, pinned_node
from cogate.controller.status.inputs import restored_reservations

from tests.builders import Harness, raw_pg, raw_pod, verdict

GATE = api.DEFAULT_GATE_NAME
NOW = 1_704_067_300.0
RELEASED_STATUS = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:01:00Z"}


def pinned_raw(name: str, node: str = "n1", *, group: str = "a", gates=(), cpu: str = "1", base_affinity=None):
    """A member as the release left it: gate removed, required node affinity narrowed to ``node``."""
    raw = raw_pod(name, group=group, gates=gates, cpu=cpu)
    if base_affinity is not None:
        raw["spec"]["affinity"] = base_affinity
    return jsonpatch.apply_patch(raw, pin_ops(raw["spec"], node)) if node else raw


ZONE_TERMS = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
    {},
]}}}


@pytest.mark.parametrize("raw,expected", [
    (pinned_raw("p"), "n1"),
    (pinned_raw("p", base_affinity=ZONE_TERMS), "n1"),  # every non-empty term got the same pin
    (pinned_raw("p", node=""), None),  # no affinity at all
    (pinned_raw("p", node="", base_affinity=ZONE_TERMS), None),  # terms without a pin
])
def test_pinned_node_reads_the_pin_the_release_writes(raw, expected):
    assert pinned_node(records.pod_info(raw)) == expected


def test_pinned_node_rejects_ambiguous_pins():
    raw = raw_pod("p", gates=())
    raw["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]},
    ]}}}
    assert pinned_node(records.pod_info(raw)) is None
    raw["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}]
    assert pinned_node(records.pod_info(raw)) is None


def _request(name, members, released, min_member=1):
    return planner.GroupRequest("team", name, min_member, 0.0, released, tuple(records.pod_info(m) for m in members))


def test_only_ungated_unbound_pinned_members_are_restored():
    """Also those of a group whose release no longer stands (timed out): pinned, they bind
    there and nowhere else, so their room stays promised (issue 21, item 2a)."""
    bound = raw_pod("bound", group="a", gates=(), node="n1")
    a = _request("a", [pinned_raw("a0", cpu="3"), pinned_raw("a1", gates=("other",)), raw_pod("a2", group="a"),
                       pinned_raw("a3", node=""), bound], released=True)
    not_released = _request("c", [pinned_raw("c0", group="c", node="n2"), raw_pod("c1", group="c")], released=False)
    res = restored_reservations([a, not_released], NOW, 60.0)
    assert [(r.name, r.node_name, r.requests.get("cpu"), r.expires) for r in res] == [
        ("a0", "n1", 3000, NOW + 60.0), ("c0", "n2", 1000, NOW + 60.0)]


def test_planner_with_restored_reservations_does_not_release_into_released_room():
    """Node of 10 CPU; group a (3 x 3 CPU) released and pinned to it but unbound; group b needs 3 CPU."""
    nodes = [records.node_info({"metadata": {"name": "n1"}, "status": {
        "allocatable": {"cpu": "10", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}})]
    a = _request("a", [pinned_raw(f"a{i}", cpu="3") for i in range(3)], released=True, min_member=3)
    b = _request("b", [raw_pod("b0", group="b", cpu="3")], released=False)
    fresh = planner.decide(nodes, [], [a, b], [], NOW, planner.PlannerConfig())
    assert fresh.verdicts[1].outcome == planner.Outcome.RELEASED  # what the restarted controller used to do
    restored = restored_reservations([a, b], NOW, 60.0)
    d = planner.decide(nodes, [], [a, b], restored, NOW, planner.PlannerConfig())
    assert d.verdicts[1].outcome == planner.Outcome.INSUFFICIENT_CAPACITY
    assert {r.pod_uid for r in d.reservations} == {"uid-a0", "uid-a1", "uid-a2"}


def test_reconciler_restores_reservations_on_its_first_pass_only():
    pods = [pinned_raw("a0"), pinned_raw("a1")]
    h = Harness(pods, [raw_pg("a", 2, status=RELEASED_STATUS)], [verdict("AlreadyReleased", name="a")], now=NOW)
    h.run()
    first = h.decide_calls[0]["reservations"]
    assert sorted((r.name, r.node_name) for r in first) == [("a0", "n1"), ("a1", "n1")]
    h.run()  # the scripted decide returned no reservations: nothing is re-created from the pins
    assert h.decide_calls[1]["reservations"] == ()
    h.rec.restore_reservations = True  # what gaining leadership does
    h.run()
    assert len(h.decide_calls[2]["reservations"]) == 2
