"""Event de-duplication and the best-effort recorder (controller/kube/events.py)."""

from __future__ import annotations

import pytest

from cogate import api
from cogate.controller.kube.events import EventDeduplicator, EventRecorder
from cogate.controller.status.notices import ObjectRef

from tests.builders import NS, ApiError


@pytest.mark.parametrize("steps,expected", [
    # (reason, message, now) -> emitted?
    ([("A", "m1", 0), ("A", "m1", 1), ("A", "m1", 1000)], [True, False, False]),
    ([("A", "m1", 0), ("B", "m1", 1), ("A", "m1", 2)], [True, True, True]),
    ([("A", "m1", 0), ("A", "m2", 10), ("A", "m3", 61)], [True, False, True]),
    ([("A", "m1", 0), ("A", "m2", 70)], [True, True]),
])
def test_event_dedup_emits_only_news(steps, expected):
    dedup = EventDeduplicator(min_interval=60.0)
    got = [dedup.should_emit("uid", "verdict", r, m, t) for r, m, t in steps]
    assert got == expected


@pytest.mark.parametrize("steps,expected", [
    # (reason, key, message, now) -> emitted?  min_interval 60, refresh_interval 600
    # an unchanged situation whose counts change: no new event until the refresh interval
    ([("A", "k", "m1", 0), ("A", "k", "m2", 61), ("A", "k", "m3", 599), ("A", "k", "m4", 600)],
     [True, False, False, True]),
    # another situation of the same reason: news at once; then the same situation again: not news
    ([("A", "k", "m1", 0), ("A", "j", "m2", 10), ("A", "j", "m3", 11)], [True, True, False]),
    # same message: never again, even after the refresh interval
    ([("A", "k", "m1", 0), ("A", "k", "m1", 5000)], [True, False]),
    # a new reason: at once
    ([("A", "k", "m1", 0), ("B", "k", "m1", 1)], [True, True]),
])
def test_event_dedup_dedupes_an_unchanged_situation_on_its_key(steps, expected):
    dedup = EventDeduplicator(min_interval=60.0, refresh_interval=600.0)
    got = [dedup.should_emit("uid", "verdict", r, m, t, key=k) for r, k, m, t in steps]
    assert got == expected


def test_event_dedup_slots_are_independent_and_forgettable():
    dedup = EventDeduplicator()
    assert dedup.should_emit("u", "verdict", "A", "m", 0)
    assert dedup.should_emit("u", "timeout", "A", "m", 0)
    assert not dedup.should_emit("u", "timeout", "A", "m", 1)
    dedup.clear("u", "timeout")
    assert dedup.should_emit("u", "timeout", "A", "m", 2)
    dedup.forget("u")
    assert dedup.should_emit("u", "verdict", "A", "m", 3)


def test_recorder_aggregates_repeats_into_count():
    created: list[dict] = []
    patched: list[tuple[str, dict]] = []
    clock = iter([100.0, 200.0, 300.0, 5000.0])
    rec = EventRecorder(lambda ns, body: created.append(body), lambda ns, name, body: patched.append((name, body)),
                        clock=lambda: next(clock), series_window=3600.0)
    ref = ObjectRef(NS, "pg", "u1")
    rec.record(ref, "Warning", "InsufficientCapacity", "fits 1 of 2")
    rec.record(ref, "Warning", "InsufficientCapacity", "fits 1 of 2")
    rec.record(ref, "Warning", "InsufficientCapacity", "fits 0 of 2")
    rec.record(ref, "Warning", "InsufficientCapacity", "fits 1 of 2")  # outside the window
    rec.flush()
    assert [c["message"] for c in created] == ["fits 1 of 2", "fits 0 of 2", "fits 1 of 2"]
    assert created[0]["involvedObject"] == {"apiVersion": api.API_VERSION, "kind": api.KIND, "namespace": NS,
                                            "name": "pg", "uid": "u1"}
    assert created[0]["type"] == "Warning" and created[0]["count"] == 1
    assert patched == [(created[0]["metadata"]["name"], {"count": 2, "lastTimestamp": "1970-01-01T00:03:20Z"})]


def test_recorder_starts_a_new_series_when_the_event_expired():
    created: list[dict] = []

    def gone(ns, name, body):
        raise ApiError(404)

    rec = EventRecorder(lambda ns, body: created.append(body), gone, clock=lambda: 100.0, series_window=3600.0)
    ref = ObjectRef(NS, "pg", "u1")
    rec.record(ref, "Warning", "InsufficientCapacity", "fits 1 of 2")
    rec.record(ref, "Warning", "InsufficientCapacity", "fits 1 of 2")  # its Event was garbage-collected
    rec.flush()
    assert [c["message"] for c in created] == ["fits 1 of 2", "fits 1 of 2"], "the repeat is not lost"


def test_recorder_never_raises_on_api_errors():
    def boom(*_):
        raise RuntimeError("apiserver down")

    rec = EventRecorder(boom, boom, clock=lambda: 1.0)
    rec.record(ObjectRef(NS, "pg"), "Normal", "Released", "x")
    rec.flush()  # no exception
