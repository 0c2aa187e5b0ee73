"""The release guard (controller/release/guard.py) through a reconciler pass: the planned nodes are
checked again just before any gate goes (dry runs and refusals: test_refusers.py, test_lifecycle.py)."""

from __future__ import annotations

import copy

import pytest

from tests.builders import Harness, raw_pg, raw_pod, ready_node, verdict

RELEASED = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}
TAINT = [{"key": "maint", "effect": "NoSchedule"}]


def _released_nothing_and_planned_again(h: Harness) -> None:
    """A pass over ``h`` touches no gate, records no release, says no Released, and plans again at once."""
    h.rec.debouncer.started(h.now)
    h.run()
    assert [e for e in h.cluster.log if e[0] in ("pod", "dry-run")] == [], "no gate touched"
    assert not h.cluster.pgs["pg"].get("status", {}).get("scheduleStartTime"), "not recorded as a release"
    assert not [e for e in h.events if e[1] == "Released"]
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + h.rec.config.debounce)


def test_a_fresh_release_whose_planned_node_went_bad_releases_nothing_and_is_planned_again_at_once():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n2"}, 2)])
    h.caches.nodes.apply_local(ready_node("n1", taints=TAINT))  # after planning, before the patch
    _released_nothing_and_planned_again(h)


def test_a_new_member_of_a_released_group_whose_node_went_bad_waits_and_the_others_go():
    pods = [raw_pod("a", gates=(), node="n3", phase="Running"), raw_pod("b"), raw_pod("c")]
    h = Harness(pods, [raw_pg(min_member=1, status=dict(RELEASED))],
                [verdict("AlreadyReleased", {"uid-b": "n1", "uid-c": "n2"}, 3)])
    h.caches.nodes.apply_local(ready_node("n1", taints=TAINT))
    res = h.run()
    assert res.ungated == 1
    assert [e[1] for e in h.cluster.log if e[0] == "pod"] == ["c"]
    assert h.cluster.pods["b"]["spec"]["schedulingGates"], "held this pass"


def _leave(h: Harness, name: str, how: str) -> None:
    """Member ``name`` leaves after the pass's snapshot, before its patch: as the members informer sees it."""
    raw = copy.deepcopy(h.cluster.pods[name])
    if how == "deleted":
        h.caches.members._handle_event({"type": "DELETED", "object": raw})
        del h.cluster.pods[name]
        return
    if how == "deleting":
        raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:05Z"
    else:
        raw["status"]["phase"] = how
    raw["metadata"]["resourceVersion"] = "99"
    h.cluster.pods[name] = raw
    h.caches.members.apply_local(raw)


LEAVES = ["deleted", "deleting", "Failed", "Succeeded"]


@pytest.mark.parametrize("how", LEAVES)
@pytest.mark.parametrize("which", ["a", "b"])
def test_a_fresh_release_whose_member_left_since_the_snapshot_is_not_recorded_and_is_planned_again(how, which):
    """The soak's released_twice (issue 35): a pass that preempts for other groups took seconds, a
    member of the gang was deleted meanwhile, and the release was recorded with a member it no longer
    had (ended at the next pass and released again). No gate goes, no release is recorded."""
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n2"}, 2)])
    _leave(h, which, how)
    _released_nothing_and_planned_again(h)


@pytest.mark.parametrize("how", LEAVES)
def test_a_new_member_of_a_released_group_that_left_is_not_released_and_the_others_go(how):
    pods = [raw_pod("a", gates=(), node="n3", phase="Running"), raw_pod("b"), raw_pod("c")]
    h = Harness(pods, [raw_pg(min_member=1, status=dict(RELEASED))],
                [verdict("AlreadyReleased", {"uid-b": "n1", "uid-c": "n2"}, 3)])
    _leave(h, "b", how)
    res = h.run()
    assert res.ungated == 1
    assert [e[1] for e in h.cluster.log if e[0] == "pod"] == ["c"]
