"""When the controller runs again (controller/model/wakeups.py, pure): table-driven, with an injected clock."""

from __future__ import annotations

import pytest

from cogate.controller.model.records import PodInfo
from cogate.controller.model.wakeups import Arrivals, Debouncer, completes, earliest, refusal_backoff


class TestDebouncer:
    def test_events_coalesce_into_one_pass_after_delay(self):
        d = Debouncer(delay=0.05, resync=30.0, now=100.0)
        assert d.deadline() == pytest.approx(130.0)  # only the resync is pending
        d.trigger(101.0)
        d.trigger(101.03)  # inside the window: does not move the deadline
        assert d.deadline() == pytest.approx(101.05)
        assert not d.due(101.049)
        assert d.due(101.05)
        d.started(101.05)
        assert d.deadline() == pytest.approx(131.05)

    def test_steady_stream_cannot_postpone_forever(self):
        d = Debouncer(delay=1.0, resync=30.0, now=0.0)
        t = 10.0
        d.trigger(t)
        for i in range(100):
            d.trigger(t + i * 0.01)
        assert d.deadline() == pytest.approx(11.0)

    def test_trigger_during_a_pass_starts_a_new_window(self):
        d = Debouncer(delay=0.5, resync=30.0, now=0.0)
        d.trigger(1.0)
        d.started(1.5)
        d.trigger(1.7)  # arrived while the pass ran
        assert d.deadline() == pytest.approx(2.2)

    def test_wake_at_keeps_the_earliest_deadline(self):
        d = Debouncer(delay=0.05, resync=30.0, now=0.0)
        d.wake_at(12.0)
        d.wake_at(20.0)
        assert d.deadline() == pytest.approx(12.0)
        d.started(12.0)
        assert d.deadline() == pytest.approx(42.0)

    def test_a_trigger_at_once_is_due_now_and_covers_the_window(self):
        d = Debouncer(delay=0.05, resync=30.0, now=0.0)
        d.trigger(10.0)
        d.trigger(10.02, at_once=True)  # the event that completes a group
        assert d.due(10.02) and d.deadline() == pytest.approx(10.02)
        d.started(10.02)  # one pass covers both events
        assert d.pending_since is None and d.deadline() == pytest.approx(40.02)
        d.trigger(10.03)  # the next ordinary event waits for the debounce again
        assert d.deadline() == pytest.approx(10.08)

    def test_at_once_while_idle_has_no_wait(self):
        d = Debouncer(delay=1.0, resync=30.0, now=0.0)
        d.trigger(5.0, at_once=True)
        assert d.due(5.0)

    @pytest.mark.parametrize("delay,resync", [(-1.0, 30.0), (0.05, 0.0)])
    def test_bad_settings_raise(self, delay, resync):
        with pytest.raises(ValueError):
            Debouncer(delay, resync, 0.0)


def test_refusal_backoff_doubles_to_five_minutes():
    assert [refusal_backoff(n) for n in (1, 2, 3, 7, 20)] == [5, 10, 20, 300, 300]


def test_earliest_ignores_what_does_not_wait():
    assert earliest() is None and earliest(None, None) is None
    assert earliest(None, 12.0, 3.5, None) == 3.5


GATE = "scheduling.x-k8s.io/pod-group"


def member(uid: str, group: str | None = "g", gated: bool = True, ns: str = "ns", deleting: bool = False) -> PodInfo:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    return PodInfo(ns, uid, uid, labels=labels, gates=(GATE,) if gated else (), deleting=deleting)


class TestArrivals:
    def need(self, table):
        from types import SimpleNamespace as NS
        return lambda key: NS(pg=NS(spec=NS(minMember=table[key]))) if key in table else None

    def test_the_member_that_reaches_min_member_completes_the_group(self):
        a = Arrivals()
        need = self.need({("ns", "g"): 3})
        got = [a.completed(None, member(u), GATE, need) for u in ("a", "b", "c", "d")]
        assert got == [False, False, True, False]  # the 4th member of a complete group waits for the debounce
        assert a.count(("ns", "g")) == 4

    def test_repeated_events_of_one_pod_count_once(self):
        a = Arrivals()
        need = self.need({("ns", "g"): 2})
        assert not a.completed(None, member("a"), GATE, need)
        assert not a.completed(member("a"), member("a"), GATE, need)  # MODIFIED, still gated
        assert a.count(("ns", "g")) == 1
        assert a.completed(None, member("b"), GATE, need)

    @pytest.mark.parametrize("leaves", [
        lambda p: (p, None),                                    # deleted
        lambda p: (p, member(p.uid, gated=False)),              # ungated (released, or by someone else)
        lambda p: (p, member(p.uid, group="other")),            # relabelled to another group
        lambda p: (p, member(p.uid, group=None)),               # label removed
        lambda p: (p, member(p.uid, deleting=True)),            # being deleted: no member (records.member_key)
    ])
    def test_a_member_that_leaves_is_no_longer_counted(self, leaves):
        a = Arrivals()
        need = self.need({("ns", "g"): 2})
        assert not a.completed(None, member("a"), GATE, need)
        a.completed(*leaves(member("a")), GATE, need)
        assert a.count(("ns", "g")) == 0
        assert not a.completed(None, member("b"), GATE, need)  # one gated member again: not complete
        assert a.completed(None, member("c"), GATE, need)

    def test_falling_short_and_rising_again_completes_again(self):
        a = Arrivals()
        need = self.need({("ns", "g"): 2})
        a.completed(None, member("a"), GATE, need)
        assert a.completed(None, member("b"), GATE, need)
        a.completed(member("b"), None, GATE, need)  # a member is deleted before the release
        assert a.completed(None, member("b2"), GATE, need)  # its replacement completes the group again

    def test_unknown_group_ungated_pods_and_other_namespaces_never_complete(self):
        a = Arrivals()
        need = self.need({("ns", "g"): 1})
        assert not a.completed(None, member("x", group="nogroup"), GATE, need)  # no such PodGroup (yet)
        assert not a.completed(None, member("y", gated=False), GATE, need)      # not gated: nothing to release
        assert not a.completed(None, member("z", ns="other"), GATE, need)       # same name, other namespace
        assert a.completed(None, member("w"), GATE, need)

    def test_other_gates_do_not_count(self):
        a = Arrivals()
        need = self.need({("ns", "g"): 1})
        assert not a.completed(None, member("a"), "example.com/other-gate", need)


@pytest.mark.parametrize("count,need,expected", [(2, 2, True), (1, 2, False), (3, 2, False), (1, 1, True), (0, 0, False)])
def test_completes_when_the_count_reaches_min_member(count, need, expected):
    assert completes(count, need) is expected


class TestSettle:
    """``Arrivals.settle``: the completion time handed to the pass that releases the group (issue 40)."""

    def need(self, n=1):
        from types import SimpleNamespace as NS
        return lambda key: NS(pg=NS(spec=NS(minMember=n)))

    def test_the_releasing_pass_gets_the_completion_time_once(self):
        a = Arrivals()
        assert a.completed(None, member("a"), GATE, self.need(), at=10.0)
        assert a.settle([("ns", "g")], started=10.5) == {("ns", "g"): 10.0}
        assert a.settle([("ns", "g")], started=11.0) == {}  # forgotten: a later pass observes nothing

    def test_a_completion_the_pass_did_not_release_is_forgotten_unless_it_came_after_the_start(self):
        a = Arrivals()
        a.completed(None, member("a", group="early"), GATE, self.need(), at=10.0)  # seen before the pass
        a.completed(None, member("b", group="late"), GATE, self.need(), at=12.0)   # came during the pass
        assert a.settle([], started=11.0) == {}  # neither released in this pass
        # "early" was in the pass's snapshot and waits for something else: forgotten;
        # "late" may be released by the next pass: kept
        assert a.settle([("ns", "early"), ("ns", "late")], started=13.0) == {("ns", "late"): 12.0}

    def test_without_a_time_nothing_is_remembered(self):
        a = Arrivals()
        assert a.completed(None, member("a"), GATE, self.need())
        assert a.settle([("ns", "g")], started=0.0) == {}
