"""When a PodGroup's status change is written (``writes.write_due``, pure; issues 19 and 40).

A change that only moves numbers (members arriving: "5 of 8 members present" -> "6 of 8 ...";
after the release, the ``scheduled``/``running`` counts rising) waits ``PROGRESS_WRITE_SECONDS``
after it first appeared and after the group's last write; the first write, a release, and any
change of reason, condition status, wording or phase, or a count falling, are written at once. The table
covers each case; the property replays any sequence of states and pass times the way the
reconciler does (a pass at every change, at arbitrary other times, and at the time the rule
returns) and checks the promise of docs/semantics.md "Status, conditions and events".
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from cogate.controller.status.writes import ARRIVING_WRITE_SECONDS as A, PROGRESS_WRITE_SECONDS as N, \
    status_patch, write_due
from cogate.models import Condition, PodGroupStatus

LTT = "2024-01-01T00:00:00Z"

#: (phase, Released status, reason, message template): the situations a waiting group goes through.
#: The templates differ in their words; ``{k}``/``{n}`` are the numbers that move.
SITUATIONS = (
    ("Pending", "False", "WaitingForMembers", "{k} of {n} members present"),
    ("Pending", "False", "WaitingForMembers", "{k} of {n} members present; 1 held by other scheduling gates"),
    ("Pending", "False", "InsufficientCapacity", "fits {k} of {n}: cpu short by {k}"),
    ("Scheduling", "True", "Released", "fits {n} of {n}: releasing {k} gated members"),
    ("Running", "True", "Released", "fits {n} of {n}"),
)
#: The count field ``k`` is in, per situation (released ones: members bound, members running).
COUNTED = {3: "scheduled", 4: "running"}


def state(situation: int, k: int, n: int = 8) -> PodGroupStatus:
    phase, cstatus, reason, template = SITUATIONS[situation]
    counts = {COUNTED[situation]: k} if situation in COUNTED else {}
    if situation == 4:
        counts["scheduled"] = n
    return PodGroupStatus(phase=phase, scheduleStartTime=LTT if phase != "Pending" else None, conditions=[
        Condition(type="Released", status=cstatus, reason=reason, message=template.format(k=k, n=n),
                  lastTransitionTime=LTT)], **counts)


def api(s: PodGroupStatus) -> dict[str, Any]:
    return s.to_api()


def body(old: PodGroupStatus | None, new: PodGroupStatus) -> dict[str, Any] | None:
    return status_patch(api(old) if old is not None else None, new)


def merge(old: dict[str, Any] | None, patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch of the status subresource, as the API server applies it."""
    out = dict(old or {})
    for key, value in patch["status"].items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


WAIT5, WAIT6 = state(0, 5), state(0, 6)


# -- the rule, case by case --------------------------------------------------------------------

@pytest.mark.parametrize("old,new,last,pending,now,releasing,expected", [
    # numbers only: held until N after the later of the last write and when it was first held
    (WAIT5, WAIT6, 100.0, None, 100.0, False, 100.0 + N),
    (WAIT5, WAIT6, 100.0, None, 100.0 + N / 2, False, 100.0 + 1.5 * N),  # first held now
    (WAIT5, WAIT6, 100.0, 100.0 + N / 2, 100.0 + N, False, 100.0 + 1.5 * N),
    (WAIT5, WAIT6, 100.0, 100.0 + N / 2, 100.0 + 1.5 * N, False, None),
    (WAIT5, WAIT6, 100.0, 100.0, 100.0 + N, False, None),
    (WAIT5, WAIT6, 100.0, 100.0, 100.0 + 3 * N, False, None),
    (WAIT5, WAIT6, 100.0, 99.0, 100.5, False, 100.0 + N),  # held before the last write: counts from it
    (WAIT5, WAIT6, 0.0, None, 100.0, False, 100.0 + N),  # the first arrival long after the last write waits too
    (WAIT5, WAIT6, 0.0, 99.0, 100.0, False, 99.0 + N),
    (WAIT5, state(0, 6, 9), 100.0, None, 100.5, False, 100.5 + N),  # minMember moved too: still numbers
    # the first write by this process (none remembered: a new group, a restart, a new leader)
    (WAIT5, WAIT6, None, None, 100.0, False, None),
    (WAIT5, WAIT6, -math.inf, None, 100.0, False, None),
    (WAIT5, WAIT6, -math.inf, 99.0, 100.0, False, None),
    (None, WAIT5, 100.0, None, 100.5, False, None),  # nothing written yet
    # a release never waits
    (WAIT5, WAIT6, 100.0, 100.0, 100.5, True, None),
    (WAIT5, state(3, 8), 100.0, 100.0, 100.5, False, None),
    # a new reason, new words, a new condition status or phase: at once
    (WAIT5, state(2, 6), 100.0, 100.0, 100.5, False, None),
    (WAIT5, state(1, 6), 100.0, 100.0, 100.5, False, None),
    (state(1, 5), WAIT6, 100.0, 100.0, 100.5, False, None),
    (WAIT5, WAIT5.model_copy(update={"phase": "Failed"}), 100.0, None, 100.5, False, None),
    (WAIT5, WAIT5.model_copy(update={"scheduled": 1}), 100.0, None, 100.5, False, None),
    (WAIT5, state(0, 6).model_copy(update={"conditions": [
        Condition(type="Released", status="True", reason="WaitingForMembers", message="6 of 8 members present",
                  lastTransitionTime=LTT)]}), 100.0, None, 100.5, False, None),
])
def test_write_due(old, new, last, pending, now, releasing, expected):
    """The rule with one period (the arriving one set to N: its own test below)."""
    assert write_due(api(old) if old is not None else None, body(old, new), last, now, pending_since=pending,
                     releasing=releasing, arriving_period=N) == expected


@pytest.mark.parametrize("old,new,expected", [
    (WAIT5, WAIT6, 100.5 + A),  # members arriving: "5 of 8" -> "6 of 8" waits A
    (state(1, 5), state(1, 6), 100.5 + A),  # still WaitingForMembers, other words
    (state(2, 5), state(2, 6), 100.5 + N),  # short of room: N
    (state(3, 5), state(3, 6), 100.5 + N),  # released
])
def test_numbers_of_a_group_waiting_for_members_wait_longer(old, new, expected):
    """Issue 40: while the Released condition says WaitingForMembers, numbers-only changes wait
    ARRIVING_WRITE_SECONDS; any other numbers-only change PROGRESS_WRITE_SECONDS."""
    assert write_due(api(old), body(old, new), 100.0, 100.5) == expected


REL3, RUN5 = state(3, 3), state(4, 5)


@pytest.mark.parametrize("old,new,expected", [
    # a released group's members binding and starting: numbers, held N
    (REL3, state(3, 5), 100.5 + N),  # scheduled 3 -> 5 and "releasing 3" -> "releasing 5"
    (REL3, REL3.model_copy(update={"scheduled": 4}), 100.5 + N),  # the count alone
    (REL3, REL3.model_copy(update={"scheduled": 4, "running": 1}), 100.5 + N),  # running from nothing
    (RUN5, state(4, 7), 100.5 + N),  # running 5 -> 7, beyond minMember
    (REL3.model_copy(update={"scheduled": None}), REL3, 100.5 + N),  # none written yet counts 0
    # a count falling (a member lost): at once
    (state(3, 5), REL3, None),
    (state(4, 7), RUN5, None),
    (REL3, REL3.model_copy(update={"scheduled": 4, "running": 0}), None),  # one rises, one appears as 0
    # succeeded and failed are news, so is the phase (minMember reached) and another field with the counts
    (RUN5, RUN5.model_copy(update={"succeeded": 1}), None),
    (RUN5, RUN5.model_copy(update={"failed": 1}), None),
    (REL3, REL3.model_copy(update={"scheduled": 8, "phase": "Scheduled"}), None),
    (REL3, state(3, 5).model_copy(update={"scheduleStartTime": "2024-01-01T00:00:09Z"}), None),
    (REL3, REL3.model_copy(update={"scheduled": 4, "conditions": [REL3.conditions[0].model_copy(
        update={"message": "fits 8 of 8: other words 3"})]}), None),
    # not released: counts are written at once
    (WAIT5, WAIT5.model_copy(update={"scheduled": 1}), None),
    (REL3.model_copy(update={"scheduleStartTime": None}), REL3.model_copy(update={"scheduleStartTime": None,
                                                                                "scheduled": 4}), None),
    (REL3.model_copy(update={"conditions": [REL3.conditions[0].model_copy(update={"status": "False"})]}),
     REL3.model_copy(update={"scheduled": 4, "conditions": [REL3.conditions[0].model_copy(update={"status": "False"})]}),
     None),
])
def test_counts_of_a_released_group_rising_are_numbers(old, new, expected):
    """Issue 40: after the release (``scheduleStartTime`` and ``Released=True`` written), the
    ``scheduled`` and ``running`` counts rising wait like the numbers in messages; any other
    change of a count is written at once."""
    assert write_due(api(old), body(old, new), 100.0, 100.5) == expected


def test_odd_counts_are_not_numbers():
    """A count that is not an integer in what is written (another writer) is written over at once."""
    old = api(REL3)
    old["scheduled"] = "3"
    assert write_due(old, body(REL3, state(3, 5)), 100.0, 100.5) is None
    old["scheduled"] = True
    assert write_due(old, body(REL3, state(3, 5)), 100.0, 100.5) is None


def test_the_arriving_period_is_ten_seconds():
    """The documented figure (docs/semantics.md, docs/monitoring.md)."""
    assert A == 10.0


def test_nothing_to_write_is_never_held():
    assert body(WAIT5, WAIT5) is None
    assert write_due(api(WAIT5), None, 100.0, 100.5) is None


def test_the_period_is_a_parameter():
    short5 = state(2, 5)
    c = body(short5, state(2, 6))
    assert write_due(api(short5), c, 100.0, 100.5, period=0.0) is None
    assert write_due(api(short5), c, 100.0, 100.5, period=10.0) == 110.5
    assert write_due(api(short5), c, 100.0, 100.5, pending_since=100.0, period=10.0) == 110.0
    b = body(WAIT5, WAIT6)
    with pytest.raises(ValueError, match="period"):
        write_due(api(WAIT5), b, 100.0, 100.5, period=-1.0)
    with pytest.raises(ValueError, match="period"):
        write_due(api(WAIT5), b, 100.0, 100.5, arriving_period=-1.0)
    assert write_due(api(WAIT5), b, 100.0, 100.5, arriving_period=3.0) == 103.5


def test_the_period_is_two_seconds():
    """The documented figure (docs/semantics.md "Status, conditions and events")."""
    assert N == 2.0


# -- the property: any sequence of states and pass times ---------------------------------------

def period(situation: int) -> float:
    """The wait of a numbers-only change within ``situation`` (A while waiting for members)."""
    return A if SITUATIONS[situation][2] == "WaitingForMembers" else N


def falls(shown: tuple[int, int], key: tuple[int, int]) -> bool:
    """Whether ``key`` lowers the count of a released situation ``shown`` is in (written at once)."""
    return shown[0] == key[0] and key[0] in COUNTED and key[1] < shown[1]


def replay(changes: list[tuple[float, tuple[int, int]]], extra_passes: list[float]):
    """Run the reconciler's loop over ``changes`` ((time, (situation, k)), times ascending): a pass
    at each change, at each of ``extra_passes`` and at each time :func:`write_due` returns; each pass
    writes ``status_patch(written, desired)`` when the rule says now. Returns the writes
    [(time, (situation, k) written)] and the status as written at the end (API JSON)."""
    passes = sorted({t for t, _ in changes} | set(extra_passes))
    written: dict[str, Any] | None = None
    last: float | None = None
    pending: float | None = None  # as the reconciler keeps it (StatusMemory.progress_pending)
    writes: list[tuple[float, tuple[int, int]]] = []
    for _ in range(10_000):  # a rule that kept a write back for ever would never end
        if not passes:
            break
        t = passes.pop(0)
        now_state = [key for ct, key in changes if ct <= t]
        if not now_state:
            continue
        patch = status_patch(written, state(*now_state[-1]))
        due = write_due(written, patch, last, t, pending_since=pending)
        if due is not None:
            assert due > t
            pending = t if pending is None else pending
            passes = sorted(set(passes) | {due})
            continue
        pending = None
        if patch is not None:
            written, last = merge(written, patch), t
            writes.append((t, now_state[-1]))
    assert not passes, "the passes never ended"
    return writes, written


step = st.tuples(st.floats(0.0, 3 * N, allow_nan=False), st.integers(0, len(SITUATIONS) - 1), st.integers(0, 8))


@settings(max_examples=300, deadline=None)
@given(st.lists(step, min_size=1, max_size=30), st.lists(st.floats(0.0, 100.0, allow_nan=False), max_size=20))
def test_reasons_at_once_numbers_at_most_every_period_and_the_last_state_within_it(steps, extra):
    """The situation (phase, Released status, reason, words: one of :data:`SITUATIONS`) is the
    oracle: a change of it, or a count of a released group falling, is written at once; a change
    within it (the numbers, a released group's count rising) is written at
    most every period (A while waiting for members, else N) and only once it differed from what
    is written for that long; the last state is written at most a period after the last change."""
    at: dict[float, tuple[int, int]] = {}  # changes at the same instant: a pass sees the last
    t = 0.0
    for dt, sit, k in steps:
        t += dt
        at[t] = (sit, k)
    changes = sorted(at.items())
    writes, written = replay(changes, extra)

    assert writes[0] == changes[0]  # the first state: at once
    for ct, key in changes:
        shown = [wk for wt, wk in writes if wt < ct]
        if not shown or shown[-1][0] != key[0] or falls(shown[-1], key):  # a new situation or a fall
            assert (ct, key) in writes, (ct, key, shown[-1:])
    for (t1, k1), (t2, k2) in zip(writes, writes[1:]):
        if k1[0] == k2[0] and not falls(k1, k2):  # numbers only
            assert t2 - t1 >= period(k1[0]) - 1e-9, (t1, t2, k1, k2)
    last_change = changes[-1][0]
    assert status_patch(written, state(*changes[-1][1])) is None  # the last state is what is written
    assert writes[-1][0] <= last_change + period(changes[-1][1][0]) + 1e-9
    for (t1, k1), (t2, k2) in zip(writes, writes[1:]):  # numbers written alone had waited N
        if k1[0] == k2[0] and not falls(k1, k2):
            first_differed = min(ct for ct, key in changes if t1 < ct <= t2 and key != k1)
            assert t2 - first_differed >= period(k1[0]) - 1e-9, (t1, t2, k1, k2)
