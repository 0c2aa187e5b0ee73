"""Which PodGroups wait, why, and since when (pure): the input of the waiting metrics.

A group *waits* while its ``Released`` condition is ``False``: its gang is held gated. The reason
is that condition's reason, so the metric and ``kubectl get pg -o yaml`` say the same thing in
one vocabulary (:data:`REASONS`, from :mod:`cogate.controller.status.conditions`:
:func:`~cogate.controller.status.conditions.released_reason` of each waiting planner outcome, and
``ReleaseRefused``). The wait started at the condition's ``lastTransitionTime``: that moves only
when the status flips (metav1.Condition), so a group whose reason changes (WaitingForMembers,
then InsufficientCapacity) keeps the start of its whole wait. Members of a released group that
wait for room (``MembersWaiting``) are not a waiting gang: the gang was placed.

:func:`summarize` folds the groups' waits into counts and oldest start per reason, which
:class:`cogate.controller.kube.metrics.Metrics` exports as ``cogate_controller_groups_waiting``
and ``cogate_controller_group_oldest_wait_seconds`` (ages taken at scrape time). Times are epoch
seconds (UTC).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from cogate.controller.model.verdicts import Outcome
from cogate.controller.status.conditions import CONDITION_RELEASED, REASON_RELEASE_REFUSED, released_reason
from cogate.models import PodGroupStatus, parse_time

__all__ = ["REASONS", "Wait", "ReasonSummary", "wait_of", "summarize", "ages"]

#: Every reason of ``Released=False``, in the planner's order: the label values of the waiting
#: metrics (all exported, at 0 when no group waits so).
REASONS: tuple[str, ...] = tuple(dict.fromkeys(
    [str(released_reason(o)) for o in Outcome if o.waiting] + [REASON_RELEASE_REFUSED]))


class Wait(NamedTuple):
    """One group's wait: ``reason`` (one of :data:`REASONS`) and ``since`` (epoch seconds)."""

    reason: str
    since: float


class ReasonSummary(NamedTuple):
    """Groups waiting for one reason: how many, and the earliest start (epoch seconds; ``None``
    when none waits)."""

    count: int
    oldest: float | None


def wait_of(status: PodGroupStatus | None, now: float) -> Wait | None:
    """The wait of a group with ``status`` (``None``: it does not wait). A ``Released=False`` whose
    reason is not in :data:`REASONS` (written by another controller) or whose
    ``lastTransitionTime`` is missing or unreadable counts from ``now`` under its reason as written
    when known, so an odd status never hides a waiting group and never raises."""
    if status is None:
        return None
    for c in status.conditions or ():
        if c.type == CONDITION_RELEASED and c.status == "False":
            try:
                since = parse_time(c.lastTransitionTime) if c.lastTransitionTime else now
            except (TypeError, ValueError):
                since = now
            return Wait(c.reason or "", min(since, now))
    return None


def summarize(waits: Iterable[Wait | None]) -> dict[str, ReasonSummary]:
    """Counts and oldest start per reason: every reason of :data:`REASONS` (at 0, ``None``), then
    any other reason seen (sorted), so a label never disappears while the process runs."""
    counts: dict[str, int] = dict.fromkeys(REASONS, 0)
    oldest: dict[str, float | None] = dict.fromkeys(REASONS)
    for w in waits:
        if w is None:
            continue
        counts[w.reason] = counts.get(w.reason, 0) + 1
        prev = oldest.get(w.reason)
        oldest[w.reason] = w.since if prev is None else min(prev, w.since)
    order = list(REASONS) + sorted(set(counts) - set(REASONS))
    return {r: ReasonSummary(counts[r], oldest[r]) for r in order}


def ages(summary: Mapping[str, ReasonSummary], now: float) -> dict[str, float]:
    """Seconds the oldest group of each reason has waited at ``now`` (0 when none waits; never
    negative)."""
    return {r: 0.0 if s.oldest is None else max(0.0, now - s.oldest) for r, s in summary.items()}
