"""``bench_small_gangs.write_kind``: what a PodGroup status write changed, as the ``--requests``
report counts it (issue 40)."""

from __future__ import annotations

import pytest

from tests.builders.bench import bench_module

b = bench_module("bench_small_gangs")

REL = {"type": "Released", "status": "True", "reason": "Released", "message": "fits 8 of 8"}
WAIT = {"type": "Released", "status": "False", "reason": "WaitingForMembers", "message": "3 of 8 members present"}
PENDING = {"phase": "Pending", "conditions": [WAIT]}
SCHEDULING = {"phase": "Scheduling", "scheduleStartTime": "t", "conditions": [REL]}


@pytest.mark.parametrize("old,new,kind", [
    (None, PENDING, "first"),
    ({}, PENDING, "first"),
    (PENDING, SCHEDULING, "release"),
    (SCHEDULING, {**SCHEDULING, "scheduled": 3}, "counts scheduled"),
    ({**SCHEDULING, "scheduled": 3}, {**SCHEDULING, "scheduled": 5, "running": 1}, "counts scheduled+running"),
    ({**SCHEDULING, "scheduled": 7}, {**SCHEDULING, "phase": "Scheduled", "scheduled": 8}, "phase Scheduled"),
    ({**SCHEDULING, "scheduled": 8}, {**SCHEDULING, "scheduled": 6}, "members gone"),
    ({**SCHEDULING, "phase": "Running", "running": 8}, {**SCHEDULING, "running": 5}, "members gone"),
    (PENDING, {**PENDING, "conditions": [{**WAIT, "reason": "InsufficientCapacity"}]}, "condition"),
    (PENDING, {**PENDING, "conditions": [{**WAIT, "message": "5 of 8 members present"}]}, "message"),
])
def test_write_kind(old, new, kind):
    assert b.write_kind(old, new) == kind
