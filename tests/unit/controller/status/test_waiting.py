"""controller.status.waiting: which groups wait, why and since when (the waiting metrics' input),
and the controller's exported gauges built from it."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from prometheus_client.parser import text_string_to_metric_families

from cogate.controller.kube.metrics import Metrics
from cogate.controller.model.verdicts import Outcome
from cogate.controller.status import conditions, waiting
from cogate.controller.status.status import compute_status
from cogate.controller.status.waiting import REASONS, ReasonSummary, Wait, ages, summarize, wait_of
from cogate.models import Condition, PodGroupStatus, format_time

from .test_status import T0, member, members, podgroup, verdict


def released_cond(status: str, reason: str, at: float) -> Condition:
    return Condition(type="Released", status=status, reason=reason, message="m", lastTransitionTime=format_time(at))


def test_reasons_are_those_of_released_false():
    # One vocabulary: the condition's reasons, not spelled again.
    assert REASONS == ("WaitingForMembers", "InsufficientCapacity", "Unschedulable", "ReleaseRefused")
    assert conditions.released_reason(Outcome.EXCEEDS_CLUSTER_CAPACITY) in REASONS
    assert conditions.REASON_RELEASE_REFUSED in REASONS
    assert all(type(r) is str for r in REASONS)


@pytest.mark.parametrize("outcome,spec,reason", [
    (Outcome.WAITING_FOR_MEMBERS, "GG", "WaitingForMembers"),
    (Outcome.INSUFFICIENT_CAPACITY, "GGG", "InsufficientCapacity"),
    (Outcome.EXCEEDS_CLUSTER_CAPACITY, "GGG", "InsufficientCapacity"),
    (Outcome.UNSCHEDULABLE, "GGG", "Unschedulable"),
])
def test_a_held_group_waits_under_the_reason_its_status_says(outcome, spec, reason):
    st_ = compute_status(podgroup(3), members(spec), verdict(outcome, "why"), T0 + 5)
    assert wait_of(st_, T0 + 10) == Wait(reason, T0 + 5)


def test_a_released_group_does_not_wait():
    st_ = compute_status(podgroup(3), members("GGG"), verdict(Outcome.RELEASED, "ok", 3), T0)
    assert st_.phase == "Scheduling"
    assert wait_of(st_, T0) is None


def test_a_group_without_status_or_verdict_does_not_wait():
    assert wait_of(None, T0) is None
    assert wait_of(PodGroupStatus(), T0) is None
    assert wait_of(compute_status(podgroup(3), members("GGG"), None, T0), T0) is None


def test_the_wait_keeps_its_start_when_the_reason_changes():
    first = compute_status(podgroup(3), members("GG"), verdict(Outcome.WAITING_FOR_MEMBERS, "2 of 3"), T0)
    pg = podgroup(3, status=first.model_dump(mode="json", exclude_none=True))
    later = compute_status(pg, members("GGG"), verdict(Outcome.INSUFFICIENT_CAPACITY, "fits 2 of 3"), T0 + 600)
    assert wait_of(later, T0 + 700) == Wait("InsufficientCapacity", T0)


def test_a_refused_release_waits_as_release_refused():
    st_ = PodGroupStatus(conditions=[released_cond("False", "ReleaseRefused", T0)])
    assert wait_of(st_, T0 + 1) == Wait("ReleaseRefused", T0)


def test_a_start_in_the_future_counts_from_now():
    st_ = PodGroupStatus(conditions=[released_cond("False", "WaitingForMembers", T0 + 100)])
    assert wait_of(st_, T0) == Wait("WaitingForMembers", T0)


def test_summary_has_every_reason_and_the_oldest_start():
    got = summarize([Wait("InsufficientCapacity", T0 + 5), None, Wait("InsufficientCapacity", T0),
                     Wait("WaitingForMembers", T0 + 9)])
    assert list(got) == list(REASONS)
    assert got["InsufficientCapacity"] == ReasonSummary(2, T0)
    assert got["WaitingForMembers"] == ReasonSummary(1, T0 + 9)
    assert got["Unschedulable"] == ReasonSummary(0, None)
    assert ages(got, T0 + 60) == {"WaitingForMembers": 51.0, "InsufficientCapacity": 60.0, "Unschedulable": 0.0,
                                  "ReleaseRefused": 0.0}


def test_a_foreign_reason_is_kept_after_the_known_ones():
    got = summarize([Wait("Zeta", T0), Wait("Alpha", T0)])
    assert list(got)[len(REASONS):] == ["Alpha", "Zeta"]


@given(st.lists(st.tuples(st.sampled_from(REASONS), st.floats(0, 1e6)), max_size=30), st.floats(0, 2e6))
def test_summary_matches_brute_force(pairs, now):
    got = summarize(Wait(r, s) for r, s in pairs)
    for r in REASONS:
        starts = [s for rr, s in pairs if rr == r]
        assert got[r] == ReasonSummary(len(starts), min(starts) if starts else None)
        assert ages(got, now)[r] == (max(0.0, now - min(starts)) if starts else 0.0)


def scrape(metrics: Metrics) -> dict[tuple[str, str], float]:
    out = {}
    for fam in text_string_to_metric_families(metrics.render().decode()):
        for s in fam.samples:
            out[(s.name, s.labels.get("reason", ""))] = s.value
    return out


def test_the_gauges_export_every_reason_and_the_age_grows_at_scrape_time():
    now = [T0 + 100]
    metrics = Metrics(clock=lambda: now[0])
    assert scrape(metrics)[("cogate_controller_groups_waiting", "Unschedulable")] == 0
    metrics.observe_waiting(summarize([Wait("InsufficientCapacity", T0), Wait("InsufficientCapacity", T0 + 50)]))
    got = scrape(metrics)
    assert got[("cogate_controller_groups_waiting", "InsufficientCapacity")] == 2
    assert got[("cogate_controller_group_oldest_wait_seconds", "InsufficientCapacity")] == 100
    assert got[("cogate_controller_group_oldest_wait_seconds", "WaitingForMembers")] == 0
    now[0] += 30
    assert scrape(metrics)[("cogate_controller_group_oldest_wait_seconds", "InsufficientCapacity")] == 130


def test_build_info_and_process_metrics_are_exported():
    got = scrape(Metrics())
    assert ("process_resident_memory_bytes", "") in got and ("process_start_time_seconds", "") in got
    text = Metrics().render().decode()
    assert 'cogate_build_info{python_version="' in text and 'version="' in text


def test_member_waiting_for_room_after_the_release_is_not_a_waiting_gang():
    pg = podgroup(3, status={"phase": "Running", "scheduleStartTime": format_time(T0),
                             "conditions": [released_cond("True", "Released", T0).model_dump(mode="json")]})
    st_ = compute_status(pg, [*members("RRR"), member("G", 3)], verdict(Outcome.ALREADY_RELEASED, "1 waits"), T0 + 9)
    assert waiting.wait_of(st_, T0 + 9) is None
