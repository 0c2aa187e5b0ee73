"""When the controller runs again (controller/model/wakeups.py, pure): table-driven, with an injected clock."""

from __future__ import annotations

import pytest

from cogate.controller.model.wakeups import Debouncer, earliest, refusal_backoff


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

    @pytest.mark.parametrize("delay,resync", [(-1.0, 30.0), (0.05, 0.0)])
    def test_bad_settings_raise(self, delay, resync):
        with pytest.raises(ValueError):
            Debouncer(delay, resync, 0.0)


def test_refusal_backoff_doubles_to_five_minutes():
    assert [refusal_backoff(n) for n in (1, 2, 3, 7, 20)] == [5, 10, 20, 300, 300]


def test_earliest_ignores_what_does_not_wait():
    assert earliest() is None and earliest(None, None) is None
    assert earliest(None, 12.0, 3.5, None) == 3.5
