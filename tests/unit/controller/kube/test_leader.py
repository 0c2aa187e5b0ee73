"""Leader election: the pure decision (table-driven, injected clocks) and the elector
shell against an in-memory Lease API whose calls advance a fake monotonic clock.

Every time here is simulated: nothing sleeps, nothing depends on the machine's speed.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any

import pytest

from cogate.controller.kube import leader
from cogate.controller import main as controller_main
from cogate.controller.kube.leader import (
    ACQUIRE,
    LEASE_DURATION,
    RENEW,
    RENEW_DEADLINE,
    WAIT,
    LeaderElector,
    LeaseRecord,
    Observation,
    lease_decision,
    leading,
    next_record,
    observe,
    record_from_lease,
)

OTHER = LeaseRecord(holder="other", lease_duration=15.0, acquire_time=1000.0, renew_time=1000.0)


# --------------------------------------------------------------------------- pure decision


@pytest.mark.parametrize("observation,now,expected", [
    (Observation(None, 0.0), 0.0, ACQUIRE),  # no Lease
    (Observation(LeaseRecord(holder=""), 50.0), 50.0, ACQUIRE),  # released: no wait
    (Observation(LeaseRecord(holder="me", renew_time=99.0), 0.0), 1.0, RENEW),
    (Observation(LeaseRecord(holder="me", renew_time=10.0), 0.0), 500.0, RENEW),  # expired but still ours
    (Observation(OTHER, 100.0), 100.0, WAIT),  # just observed
    (Observation(OTHER, 100.0), 114.9, WAIT),  # unchanged for less than the lease duration
    (Observation(OTHER, 100.0), 115.0, ACQUIRE),  # unchanged for the lease duration, by our clock
    (Observation(LeaseRecord(holder="other", lease_duration=40.0), 100.0), 130.0, WAIT),  # the record's duration
    (Observation(LeaseRecord(holder="other", lease_duration=40.0), 100.0), 140.0, ACQUIRE),
    (Observation(LeaseRecord(holder="other", renew_time=None), 100.0), 110.0, WAIT),  # no renewTime: still waits
])
def test_lease_decision(observation, now, expected):
    assert lease_decision(observation, now, "me") == expected


@pytest.mark.parametrize("renew_time", [-1e9, 0.0, 1e12])
def test_remote_renew_time_does_not_matter_only_local_observation(renew_time):
    """A holder whose clock is far behind or ahead: judged by when we saw its record change."""
    record = LeaseRecord(holder="other", lease_duration=15.0, renew_time=renew_time)
    seen = observe(None, record, 7.0)
    assert lease_decision(seen, 21.9, "me") == WAIT
    assert lease_decision(seen, 22.0, "me") == ACQUIRE


def test_record_changing_keeps_us_waiting_and_unchanged_record_lets_us_acquire():
    """Another holder renewing every 2 s (renewTime moves) is never taken over; once its
    record stops changing, we acquire exactly one lease duration after the last change."""
    seen = None
    for i in range(20):  # 40 s of renewals observed at local times 0, 2, 4, ...
        now = 2.0 * i
        seen = observe(seen, LeaseRecord(holder="other", renew_time=5000.0 + now), now)
        assert seen.observed_at == now
        assert lease_decision(seen, now, "me") == WAIT
    last_change = seen.observed_at
    frozen = seen.record
    for now in (40.0, 42.0, 50.0, last_change + LEASE_DURATION - 0.5):
        seen = observe(seen, frozen, now)
        assert seen.observed_at == last_change
        assert lease_decision(seen, now, "me") == WAIT
    assert lease_decision(observe(seen, frozen, last_change + LEASE_DURATION), last_change + LEASE_DURATION,
                          "me") == ACQUIRE


def test_any_field_change_restarts_the_observation():
    base = observe(None, OTHER, 1.0)
    assert observe(base, OTHER, 9.0) is base
    for changed in (LeaseRecord("other2", 15.0, 1000.0, 1000.0), LeaseRecord("other", 20.0, 1000.0, 1000.0),
                    LeaseRecord("other", 15.0, 1000.0, 1001.0), LeaseRecord("other", 15.0, 1000.0, 1000.0, 1),
                    None):
        assert observe(base, changed, 9.0) == Observation(changed, 9.0)


@pytest.mark.parametrize("renewed_at,now,expected", [
    (None, 5.0, False),  # never renewed
    (0.0, 0.0, True),
    (0.0, 9.99, True),
    (0.0, RENEW_DEADLINE, False),  # a renewal that started 10 s ago no longer counts
    (0.0, 19.8, False),  # slow renew attempt still in flight: not leader
    (5.0, 4.0, False),  # clock before the renewal (cannot happen with monotonic): not leader
])
def test_leading_is_derived_from_time(renewed_at, now, expected):
    assert leading(renewed_at, now, RENEW_DEADLINE) is expected


def test_deadline_leaves_the_lease_duration_margin():
    """Our leadership ends before any other replica may take over: the lease (15 s) is judged
    from an observation made after our write started, leadership lasts 10 s from that start."""
    for start in (0.0, 3.3, 9.9):
        other_sees = observe(None, LeaseRecord(holder="me", renew_time=start), start)  # earliest possible
        first_takeover = other_sees.observed_at + LEASE_DURATION
        assert not leading(start, first_takeover - 1e-6, RENEW_DEADLINE)
        assert lease_decision(other_sees, first_takeover - 1e-6, "other") == WAIT


def test_next_record_counts_transitions():
    old = LeaseRecord(holder="other", renew_time=1.0, acquire_time=0.5, transitions=3)
    assert next_record(old, ACQUIRE, 50.0, "me") == LeaseRecord("me", 15.0, 50.0, 50.0, 4)
    mine = LeaseRecord(holder="me", renew_time=40.0, acquire_time=30.0, transitions=4)
    assert next_record(mine, RENEW, 52.0, "me") == LeaseRecord("me", 15.0, 30.0, 52.0, 4)
    assert next_record(None, ACQUIRE, 1.0, "me").transitions == 0
    assert next_record(LeaseRecord(holder="", transitions=2), ACQUIRE, 1.0, "me").transitions == 2
    with pytest.raises(ValueError):
        next_record(mine, WAIT, 1.0, "me")
    with pytest.raises(ValueError, match="identity"):
        lease_decision(Observation(None, 0.0), 1.0, "")


def test_record_from_lease_round_trips_and_names_bad_fields():
    rec = LeaseRecord("me", 15.0, 1700000000.25, 1700000001.5, 2)
    assert record_from_lease({"spec": leader.lease_spec(rec)}) == rec
    assert record_from_lease({}) == LeaseRecord()
    with pytest.raises(ValueError, match="spec.renewTime"):
        record_from_lease({"spec": {"holderIdentity": "x", "renewTime": "yesterday"}})
    with pytest.raises(ValueError, match="spec.leaseDurationSeconds"):
        record_from_lease({"spec": {"leaseDurationSeconds": "long"}})
    with pytest.raises(ValueError, match="Lease spec"):
        record_from_lease({"spec": ["x"]})


# --------------------------------------------------------------------------- the elector, against a fake API


class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class Clock:
    def __init__(self) -> None:
        self.mono = 0.0

    def monotonic(self) -> float:
        return self.mono

    def wall(self) -> float:
        return 1_700_000_000.0 + self.mono


class FakeLeases:
    """An in-memory Lease endpoint: raw JSON dicts, resourceVersion checks, scripted latency/failures.

    ``latency[call]``: seconds each call takes (advances the fake clock; a call longer than its
    ``_request_timeout`` advances by the timeout and raises, as urllib3's total timeout does).
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lease: dict[str, Any] | None = None
        self.latency: dict[str, float] = {}
        self.calls: list[tuple[str, float, dict | None]] = []  # (call, timeout, body)
        self.during: list[Any] = []  # callables run inside each call (after the clock moved)

    def _call(self, name: str, timeout: float, kwargs: dict, body: dict | None = None) -> None:
        assert kwargs.get("_preload_content") is False, "Leases travel as raw JSON"
        assert isinstance(timeout, float) and timeout > 0
        self.calls.append((name, timeout, copy.deepcopy(body)))
        took = self.latency.get(name, 0.0)
        self.clock.mono += min(took, timeout)
        for hook in self.during:
            hook()
        if took >= timeout:
            raise TimeoutError(f"{name}: read timed out ({timeout:.2f}s)")

    def read_namespaced_lease(self, name, namespace, **kw):
        self._call("read", kw["_request_timeout"], kw)
        if self.lease is None:
            raise ApiError(404)
        return copy.deepcopy(self.lease)

    def create_namespaced_lease(self, namespace, body, **kw):
        self._call("create", kw["_request_timeout"], kw, body)
        if self.lease is not None:
            raise ApiError(409)
        self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": "1"}}
        return copy.deepcopy(self.lease)

    def replace_namespaced_lease(self, name, namespace, body, **kw):
        self._call("replace", kw["_request_timeout"], kw, body)
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409)
        rv = str(int(self.lease["metadata"]["resourceVersion"]) + 1)
        self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": rv}}
        return copy.deepcopy(self.lease)

    # -- another replica's writes
    def held_by(self, holder: str, renew_time: float = 1.0) -> None:
        rv = str(int(self.lease["metadata"]["resourceVersion"]) + 1) if self.lease else "1"
        self.lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": leader.LEASE_NAME, "namespace": "ns", "resourceVersion": rv},
                      "spec": leader.lease_spec(LeaseRecord(holder, 15.0, renew_time, renew_time, 0))}

    def holder(self) -> str | None:
        return self.lease["spec"].get("holderIdentity") if self.lease else None


def make(identity: str = "me"):
    clock = Clock()
    api = FakeLeases(clock)
    events: list[str] = []
    el = LeaderElector(api, "ns", identity, clock=clock.wall, monotonic=clock.monotonic,
                       on_started=lambda: events.append("started"), on_lost=lambda: events.append("lost"))
    return clock, api, el, events


def test_acquires_a_missing_lease_and_renews_with_optimistic_concurrency():
    clock, api, el, events = make()
    assert not el.is_leader()
    assert el.step()
    assert [c[0] for c in api.calls] == ["read", "create"]
    assert el.is_leader() and events == ["started"] and api.holder() == "me"
    clock.mono += 2.0
    assert el.step() and events == ["started"]  # on_started once
    name, _, body = api.calls[-1]
    assert name == "replace"
    assert body["metadata"]["resourceVersion"] == "1"  # the version read: optimistic concurrency
    assert body["spec"]["holderIdentity"] == "me" and isinstance(body["spec"], dict)
    assert record_from_lease(api.lease).renew_time == pytest.approx(clock.wall())
    assert api.lease["metadata"]["resourceVersion"] == "2"


def test_slow_renew_beyond_the_deadline_is_not_leader_and_exits():
    """The review's scenario: last good renew at t=0, an attempt starts at t=9.9 and hangs.
    Leadership ends at t=10 while the attempt is still in flight; the attempt's calls only
    get what is left of the deadline; then on_lost."""
    clock, api, el, events = make()
    assert el.step() and el.is_leader()
    clock.mono = 9.9
    api.latency["read"] = 60.0  # hangs
    seen_in_flight: list[bool] = []
    api.during.append(lambda: seen_in_flight.append(el.is_leader()))
    assert el.step() is False
    read_timeout = api.calls[-1][1]
    assert read_timeout == pytest.approx(0.1)  # 10 s deadline - 9.9 s elapsed
    assert seen_in_flight == [False]  # at t=10 inside the hanging call: no longer leader
    assert events == ["started", "lost"]
    assert clock.mono == pytest.approx(RENEW_DEADLINE)


def test_each_call_of_an_attempt_shares_the_remaining_deadline():
    clock, api, el, events = make()
    assert el.step()  # renewed_at = 0
    clock.mono = 4.0
    api.latency = {"read": 3.0, "replace": 2.0}
    assert el.step()  # read 4..7, replace 7..9: succeeds, renewed_at = 4
    (_, read_t, _), (_, replace_t, _) = api.calls[-2:]
    assert read_t == pytest.approx(6.0) and replace_t == pytest.approx(3.0)
    assert el.is_leader()
    clock.mono = 13.99
    assert el.is_leader()  # 4 + 10
    clock.mono = 14.0
    assert not el.is_leader()


def test_renewal_failing_with_errors_is_lost_at_the_deadline():
    clock, api, el, events = make()
    assert el.step()
    api.lease = None  # every read answers 404 and create conflicts
    api.create_namespaced_lease = lambda *a, **k: (_ for _ in ()).throw(ApiError(500))
    for t in (2.0, 4.0, 6.0, 8.0):
        clock.mono = t
        assert el.step() and el.is_leader() and events == ["started"]
    clock.mono = 10.0
    assert el.step() is False and not el.is_leader()
    assert events == ["started", "lost"]


def test_leader_that_reads_another_holder_loses_at_once():
    clock, api, el, events = make()
    assert el.step()
    api.held_by("other")
    clock.mono = 2.0
    assert el.step() is False
    assert events == ["started", "lost"] and not el.is_leader()


def test_follower_acquires_after_the_record_stays_unchanged_for_the_lease_duration():
    clock, api, el, events = make()
    api.held_by("other", renew_time=1.0)
    t = 0.0
    while t < 30.0:  # the holder renews every 2 s: we never take over
        clock.mono = t
        api.held_by("other", renew_time=1.0 + t)
        assert el.step() and not el.is_leader()
        t += 2.0
    last_change = 28.0
    clock.mono = last_change + LEASE_DURATION - 0.01
    assert el.step() and not el.is_leader() and api.holder() == "other"
    clock.mono = last_change + LEASE_DURATION
    assert el.step() and el.is_leader() and api.holder() == "me"
    assert api.lease["spec"]["leaseTransitions"] == 1
    assert events == ["started"]


def test_follower_takes_a_released_lease_at_once_and_release_clears_the_holder():
    clock, api, el, events = make()
    assert el.step()
    el.release()
    assert not el.is_leader()
    assert api.holder() is None and api.lease["spec"]["leaseDurationSeconds"] == 1
    other = LeaderElector(api, "ns", "other", clock=clock.wall, monotonic=clock.monotonic)
    assert other.step() and other.is_leader()
    assert api.holder() == "other"


def test_release_leaves_someone_elses_lease_alone():
    clock, api, el, events = make()
    api.held_by("other")
    el.release()
    assert api.holder() == "other"


def test_losing_a_create_race_is_not_leading():
    clock, api, el, events = make()

    def somebody_creates_first():
        if api.calls[-1][0] == "create" and api.lease is None:
            api.held_by("other")

    api.during.append(somebody_creates_first)
    assert el.step() and not el.is_leader() and events == []


def test_run_stops_on_stop_without_releasing():
    clock, api, el, events = make()
    stop = threading.Event()
    stop.set()
    el.run(stop)
    assert api.calls == [] and not el.is_leader()


def test_elector_rejects_unsafe_timing():
    with pytest.raises(ValueError, match="timing"):
        LeaderElector(object(), "ns", "me", lease_duration=10.0, renew_deadline=10.0)
    with pytest.raises(ValueError, match="identity"):
        LeaderElector(object(), "ns", "")


# --------------------------------------------------------------------------- the controller's on_lost


def test_exit_on_lost_logs_and_exits_with_status_1(caplog):
    codes: list[int] = []
    with caplog.at_level(logging.CRITICAL, logger="cogate.controller"):
        controller_main.exit_on_lost(codes.append)
    assert codes == [1]
    assert any("leadership lost" in r.getMessage() for r in caplog.records)
