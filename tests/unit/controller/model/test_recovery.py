"""The recovery policy and the deadline's rounds (controller/model/recovery.py): parsing, the back-off
schedule, the record kept in the ``Recovery`` condition, and never an eviction loop."""

from __future__ import annotations

import random

import pytest

from cogate import api
from cogate.controller.model import recovery
from cogate.controller.model.recovery import Action, Policy, Record, Rule
from cogate.models import Condition

T0 = 1_704_067_300.0
LTT = "2024-01-01T00:00:00Z"


@pytest.mark.parametrize("annotations,want", [
    (None, Policy()),
    ({}, Policy()),
    ({api.RECOVERY_ANNOTATION: "whole"}, Policy(Rule.WHOLE)),
    ({api.RECOVERY_ANNOTATION: " Whole "}, Policy(Rule.WHOLE)),
    ({api.RECOVERY_ANNOTATION: "free", api.RECOVERY_DEADLINE_ANNOTATION: "30"}, Policy(Rule.FREE, 30)),
    ({api.RECOVERY_DEADLINE_ANNOTATION: "30", api.RECOVERY_LIMIT_ANNOTATION: "5"}, Policy(Rule.FREE, 30, 5)),
])
def test_policy_of_reads_the_annotations(annotations, want):
    assert recovery.policy_of(annotations) == want


@pytest.mark.parametrize("key,value", [
    (api.RECOVERY_ANNOTATION, "restart"),
    (api.RECOVERY_DEADLINE_ANNOTATION, "30s"),
    (api.RECOVERY_DEADLINE_ANNOTATION, "0"),
    (api.RECOVERY_DEADLINE_ANNOTATION, str(recovery.MAX_DEADLINE + 1)),
    (api.RECOVERY_LIMIT_ANNOTATION, "0"),
    (api.RECOVERY_LIMIT_ANNOTATION, "11"),
    (api.RECOVERY_LIMIT_ANNOTATION, "many"),
])
def test_a_bad_value_is_a_problem_and_reads_as_its_default(key, value):
    p = recovery.policy_of({key: value})
    assert len(p.problems) == 1 and key in p.problems[0] and repr(value) in p.problems[0]
    assert (p.rule, p.deadline, p.limit) == (Rule.FREE, None, recovery.DEFAULT_LIMIT)


def test_without_a_deadline_or_above_quorum_nothing_happens_and_a_record_is_dropped():
    rec = Record(T0, 1, T0 + 10)
    assert recovery.step(Policy(), None, below=True, now=T0) == recovery.Step(Action.NONE, None)
    assert recovery.step(Policy(), rec, below=True, now=T0).record is None  # the deadline annotation went
    assert recovery.step(Policy(deadline=10), None, below=False, now=T0) == recovery.Step(Action.NONE, None)
    s = recovery.step(Policy(deadline=10), rec, below=False, now=T0 + 20)
    assert (s.action, s.record) == (Action.WRITE, None)  # back to quorum: the record is cleared


def _run(policy: Policy, times: list[float], restart_every: int = 0) -> list[tuple[float, Action]]:
    """Passes at ``times`` with the group below quorum all along; the record goes through the
    condition message between passes (as the status keeps it), and every ``restart_every`` passes
    only that (a restarted controller). Returns the passes that evicted or failed."""
    record: Record | None = None
    acted = []
    for i, now in enumerate(times):
        s = recovery.step(policy, record, below=True, now=now)
        if s.action in (Action.EVICT, Action.FAIL):
            acted.append((now, s.action))
        assert s.record is not None
        cond = Condition(type="Recovery", status="False" if s.record.failed else "True",
                         reason="RecoveryFailed" if s.record.failed else "MembersEvicted", message=s.message,
                         lastTransitionTime="2024-01-01T00:00:00Z")
        back = recovery.record_of(cond)
        assert back is not None and (back.rounds, back.failed) == (s.record.rounds, s.record.failed)
        assert back.since == int(s.record.since)
        record = back if restart_every and i % restart_every == 0 else s.record
    return acted


def test_rounds_follow_the_back_off_and_stop_at_the_limit():
    # T = 10, limit 3: rounds at +10, then 20 and 40 after each; Failed 80 after the third.
    acted = _run(Policy(deadline=10, limit=3), [T0 + t for t in range(0, 400)])
    assert acted == [(T0 + 10, Action.EVICT), (T0 + 30, Action.EVICT), (T0 + 70, Action.EVICT),
                     (T0 + 150, Action.FAIL)]


@pytest.mark.parametrize("seed", range(30))
def test_never_more_rounds_than_the_limit_and_never_sooner_than_the_back_off(seed):
    rnd = random.Random(seed)
    deadline, limit = rnd.randint(1, 20), rnd.randint(1, 5)
    times, t = [], T0
    for _ in range(rnd.randint(50, 400)):  # passes at any moment: bursts of events, resyncs, retries
        t += rnd.choice((0.0, 0.01, 0.5, 1.0, rnd.uniform(0, 3 * deadline)))
        times.append(t)
    acted = _run(Policy(deadline=deadline, limit=limit), times, restart_every=rnd.choice((0, 1, 7)))
    evictions = [a for a in acted if a[1] is Action.EVICT]
    assert len(evictions) <= limit
    assert [a for a in acted if a[1] is Action.FAIL] in ([], [acted[-1]])
    assert len([a for a in acted if a[1] is Action.FAIL]) <= 1
    starts = [times[0]] + [e[0] for e in evictions]
    for k, (prev, now) in enumerate(zip(starts, starts[1:])):
        # each round at least its back-off after the previous one (whole seconds kept in the record)
        assert now - prev >= deadline * 2 ** k - 1, (k, prev, now)


def test_a_failed_record_stays_failed_and_evicts_nothing():
    failed = Record(T0, 3, T0 + 70, failed=True)
    for dt in (0, 1000, 10**6):
        s = recovery.step(Policy(deadline=10, limit=3), failed, below=True, now=T0 + dt)
        assert s.action is Action.NONE and s.record == failed and "Failed" in s.message


@pytest.mark.parametrize("cond", [
    None,
    Condition(type="Recovery", status="False", reason="Recovered", message="minMember members are placed again",
              lastTransitionTime=LTT),
    Condition(type="Recovery", status="True", reason="MembersEvicted", message="garbled", lastTransitionTime=LTT),
    Condition(type="Recovery", status="True", reason="MembersEvicted", lastTransitionTime=LTT,
              message="below minMember since 2024-01-01T00:00:00Z (recovery-deadline 10s; eviction rounds done: "
                      "eleventy of three)"),
])
def test_no_record_when_the_condition_holds_none(cond):
    assert recovery.record_of(cond) is None


def test_the_message_says_what_comes_next():
    p = Policy(deadline=30, limit=2)
    s = recovery.step(p, None, below=True, now=T0)
    assert "eviction rounds done: no of two" in s.message and "next eviction round (1 of 2)" in s.message
    s = recovery.step(p, Record(T0, 2, T0 + 90), below=True, now=T0 + 100)
    assert "Failed at" in s.message and s.due == T0 + 90 + 120
