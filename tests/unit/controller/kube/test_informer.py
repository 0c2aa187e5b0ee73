"""Informer list/watch logic against a fake stream source (no API server).

The fake source scripts what each ``list()`` and ``watch(rv)`` call returns: a list of
items, an exception, or a sequence of watch events ending in an exception or a clean
close. ``sleep`` is injected so backoff never waits in real time.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cogate.controller.kube.informer import Gone, Informer, uid_key
from cogate.kube import Backoff


class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def obj(uid: str, rv: str, value: Any = 0) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": rv}, "value": value}


def convert(raw: dict[str, Any]) -> tuple[str, Any]:
    if raw.get("value") == "bad":
        raise ValueError("value: bad")
    return (raw["metadata"]["uid"], raw["value"])


class FakeSource:
    """Scripted list/watch; records the resourceVersion of every watch call."""

    def __init__(self, lists: list[Any], watches: list[Any], stop: threading.Event) -> None:
        self.lists = list(lists)
        self.watches = list(watches)
        self.stop = stop
        self.list_calls = 0
        self.watch_rvs: list[str] = []

    def list(self) -> tuple[list[dict[str, Any]], str]:
        self.list_calls += 1
        step = self.lists.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    def watch(self, rv: str):
        self.watch_rvs.append(rv)
        if not self.watches:
            self.stop.set()
            return iter(())
        step = self.watches.pop(0)
        if isinstance(step, BaseException):
            raise step

        def gen():
            for item in step:
                if isinstance(item, BaseException):
                    raise item
                yield item
        return gen()


def run_informer(lists, watches, rand=lambda: 0.5):
    stop = threading.Event()
    src = FakeSource(lists, watches, stop)
    events: list[tuple[str, Any, Any]] = []
    invalid: list[str] = []
    restarts: list[str] = []
    sleeps: list[float] = []
    seen: list[str] = []
    inf = Informer(
        "test", src.list, src.watch, uid_key, convert,
        handler=lambda kind, old, new: events.append((kind, old, new)),
        on_invalid=lambda raw, exc: invalid.append(raw["metadata"]["uid"]),
        on_watch_restart=restarts.append,
        on_event=seen.append,
        backoff=Backoff(initial=1.0, maximum=8.0, jitter=0.2, rand=rand),
        sleep=lambda seconds, _stop: sleeps.append(seconds),
    )
    inf.run(stop)
    inf.seen = seen
    return inf, src, events, invalid, restarts, sleeps


def test_list_then_watch_applies_events_and_tracks_resource_version():
    inf, src, events, *_ = run_informer(
        [([obj("a", "5", 1)], "10")],
        [[
            {"type": "ADDED", "object": obj("b", "11", 2)},
            {"type": "MODIFIED", "object": obj("a", "12", 3)},
            {"type": "DELETED", "object": obj("b", "13", 2)},
        ]],
    )
    assert inf.has_synced
    assert inf.store == {"a": ("a", 3)}
    assert inf.seen == ["LIST", "ADDED", "MODIFIED", "DELETED"]
    assert src.watch_rvs == ["10", "13"]  # resumes from the last event's RV after a clean close
    assert events == [
        ("ADDED", None, ("a", 1)),
        ("ADDED", None, ("b", 2)),
        ("MODIFIED", ("a", 1), ("a", 3)),
        ("DELETED", ("b", 2), None),
    ]


def test_bookmark_advances_resource_version_without_handler_call():
    inf, src, events, *_ = run_informer(
        [([], "10")],
        [[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}}]],
    )
    assert src.watch_rvs == ["10", "42"]
    assert events == []
    assert inf.resource_version == "42"


@pytest.mark.parametrize("gone", [
    "event",   # ERROR event with code 410 inside the stream
    "http",    # HTTP 410 when opening the watch
])
def test_410_gone_relists_and_diffs_store(gone):
    first_watch = (
        [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}]
        if gone == "event" else ApiError(410)
    )
    inf, src, events, _, restarts, sleeps = run_informer(
        [([obj("a", "1", 1), obj("b", "2", 2)], "10"), ([obj("a", "20", 9), obj("c", "21", 3)], "30")],
        [first_watch],
    )
    assert src.list_calls == 2
    assert src.watch_rvs == ["10", "30"]
    assert restarts == ["gone"]
    assert sleeps == []  # relist at once, no backoff
    assert inf.store == {"a": ("a", 9), "c": ("c", 3)}
    assert events[2:] == [
        ("MODIFIED", ("a", 1), ("a", 9)),
        ("ADDED", None, ("c", 3)),
        ("DELETED", ("b", 2), None),
    ]


def test_gone_exception_class_also_relists():
    _, src, *_ = run_informer([([], "1"), ([], "2")], [[Gone("expired")]])
    assert src.list_calls == 2


def test_errors_back_off_exponentially_and_resume_from_last_rv():
    inf, src, events, _, restarts, sleeps = run_informer(
        [([], "10")],
        [
            ApiError(500),
            ConnectionResetError("reset"),
            [{"type": "ADDED", "object": obj("a", "11", 1)}, ApiError(429)],
            ApiError(503),
        ],
        rand=lambda: 0.5,  # no jitter at the midpoint
    )
    assert src.list_calls == 1  # errors never force a relist while an RV is known
    assert src.watch_rvs == ["10", "10", "10", "11", "11"]
    assert restarts == ["error"] * 4
    # 1, 2, then reset by the received event -> 1, 2
    assert sleeps == [1.0, 2.0, 1.0, 2.0]
    assert inf.store == {"a": ("a", 1)}


def test_list_failure_before_first_sync_retries_list():
    inf, src, _, _, restarts, sleeps = run_informer([ApiError(503), ([obj("a", "1")], "5")], [])
    assert src.list_calls == 2
    assert inf.has_synced
    assert sleeps == [1.0]


def test_invalid_objects_are_reported_and_dropped_never_crash():
    inf, src, events, invalid, *_ = run_informer(
        [([obj("a", "1", "bad"), obj("b", "2", 2)], "10")],
        [[
            {"type": "MODIFIED", "object": obj("b", "11", "bad")},  # a known object turns bad
            {"type": "ADDED", "object": obj("c", "12", 3)},
            {"type": "WEIRD", "object": obj("d", "13", 4)},  # unknown type: reconnect
        ]],
    )
    assert invalid == ["a", "b"]
    assert inf.store == {"c": ("c", 3)}
    assert ("DELETED", ("b", 2), None) in events
    assert src.watch_rvs[-1] == "12"


def test_apply_local_keeps_newer_resource_version():
    stop = threading.Event()
    src = FakeSource([([obj("a", "10", 1)], "10")], [], stop)
    inf = Informer("t", src.list, src.watch, uid_key, lambda raw: _Rec(raw["value"], raw["metadata"]["resourceVersion"]))
    inf.run(stop)
    inf.apply_local(obj("a", "9", 2))
    assert inf.get("a").value == 1
    inf.apply_local(obj("a", "11", 3))
    assert inf.get("a").value == 3


class _Rec:
    def __init__(self, value: Any, rv: str) -> None:
        self.value = value
        self.resource_version = rv

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rec) and (self.value, self.resource_version) == (other.value, other.resource_version)


# -- freshness: own writes vs. stale watch events; unchanged records ----------------

from dataclasses import dataclass, field  # noqa: E402


@dataclass(frozen=True)
class Rec:
    value: Any
    resource_version: str = field(default="", compare=False)


def rec_convert(raw: dict[str, Any]) -> Rec:
    return Rec(raw["value"], raw["metadata"]["resourceVersion"])


def direct_informer():
    events: list[tuple[str, Any, Any]] = []
    inf = Informer("t", lambda: ([], "1"), lambda rv: iter(()), uid_key, rec_convert,
                   handler=lambda kind, old, new: events.append((kind, old, new)))
    return inf, events


def test_stale_watch_event_does_not_overwrite_our_own_newer_write():
    inf, events = direct_informer()
    inf._handle_event({"type": "ADDED", "object": obj("a", "100", "before")})
    inf.apply_local(obj("a", "105", "ours"))
    inf._handle_event({"type": "MODIFIED", "object": obj("a", "103", "stale")})
    assert inf.get("a") == Rec("ours") and inf.get("a").resource_version == "105"
    assert inf.resource_version == "103", "the watch still resumes from the newest event it saw"
    inf._handle_event({"type": "MODIFIED", "object": obj("a", "110", "newer")})
    assert inf.get("a") == Rec("newer")
    assert [k for k, *_ in events] == ["ADDED", "MODIFIED", "MODIFIED"]


def test_unchanged_record_does_not_notify():
    inf, events = direct_informer()
    inf._handle_event({"type": "ADDED", "object": obj("a", "1", "x")})
    inf._handle_event({"type": "MODIFIED", "object": obj("a", "2", "x")})  # e.g. a status heartbeat
    assert [k for k, *_ in events] == ["ADDED"]
    assert inf.get("a").resource_version == "2"


def test_watch_event_without_a_key_is_skipped_not_replayed():
    inf, events = direct_informer()
    inf._handle_event({"type": "ADDED", "object": {"metadata": {"resourceVersion": "7"}, "value": 1}})
    assert inf.resource_version == "7" and events == [] and inf.snapshot() == []
