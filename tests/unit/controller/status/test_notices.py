"""Event reasons and messages (controller/status/notices.py)."""

from __future__ import annotations

import pytest

from cogate.controller.status.notices import release_message, verdict_event


@pytest.mark.parametrize("outcome,expected", [
    ("WaitingForMembers", ("Normal", "WaitingForMembers", "msg")),
    ("InsufficientCapacity", ("Warning", "InsufficientCapacity", "msg")),
    ("ExceedsClusterCapacity", ("Warning", "InsufficientCapacity", "msg")),  # FitsCluster condition tells them apart
    ("Unschedulable", ("Warning", "Unschedulable", "msg")),
    ("Released", None),
    ("AlreadyReleased", None),
])
def test_verdict_event(outcome, expected):
    assert verdict_event(outcome, "msg") == expected


def test_release_message_counts_nodes():
    assert release_message({"a": "n1", "b": "n2", "c": "n1"}, "pinned") == \
        "released 3 members pinned to planned nodes: n1 x2, n2 x1"
    assert release_message({"a": "n1", "b": ""}, "pinned") == \
        "released 2 members pinned to planned nodes: n1 x1, 1 placed by kube-scheduler"
    assert release_message({"a": "n1"}, "free") == "released 1 member (placement by kube-scheduler)"
    assert release_message({"a": "n1"}, "free", new=True) == "released 1 new member (placement by kube-scheduler)"
