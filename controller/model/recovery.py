"""A gang's recovery after it lost its quorum (pure): the per-group policy and the deadline's rounds.

Rules (docs/semantics.md, "Health after the start"), read from the PodGroup's annotations (the
schema stays scheduler-plugins'):

- ``cogate.dev/recovery``: :attr:`Rule.FREE` (the default, cogate's rule so far: a replacement of
  a released group is released on its own once it fits while the quorum holds) or
  :attr:`Rule.WHOLE` (native gang scheduling's rule: a release that lost a member ends, so the
  members that come back gated and the survivors are decided again as a whole, all or nothing).
- ``cogate.dev/recovery-deadline`` (seconds, 1 to :data:`MAX_DEADLINE`): a group that reached
  minMember and stays below it longer than ``T`` has its remaining members evicted once (a
  *round*); still below, the next round comes ``2T`` after that one, then ``4T`` ... After
  ``cogate.dev/recovery-limit`` rounds (default :data:`DEFAULT_LIMIT`, 1 to :data:`MAX_LIMIT`)
  one more wait of the back-off ends the recovery: the group is ``Failed`` and nothing more is
  evicted. Back to minMember placed ends it too (the record is cleared).
- **Never an eviction loop**: :func:`step` is a function of the recorded history (:class:`Record`)
  and the clock only; a round is due at a time computed from the record, and the record of a
  round is written (the ``Recovery`` condition, :func:`message`) in the status write that comes
  before anything is evicted (status first, then act), so a pass, a retry or a restarted
  controller that reads it does not evict again. An unreadable record reads as absent (a new
  wait of ``T`` starts: at most one round more, never a loop).

Volcano's ``policies`` (``PodEvicted -> RestartJob`` ...) act on events, which an eviction
re-triggers (volcano-sh/volcano issues on RestartTask looping); here the trigger is a level (below
minMember) and the rounds a schedule. Bad values are reported (:attr:`Policy.problems`) and read
as the defaults; the controller never fails on them. Times are float epoch seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from cogate import api
from cogate.models import Condition, format_time, parse_time

#: ``Recovery=False`` once the rounds are used up (the group is ``Failed``); also ``Satisfied=False``.
REASON_RECOVERY_FAILED = "RecoveryFailed"

__all__ = ["Rule", "Policy", "Record", "Action", "Step", "DEFAULT_LIMIT", "MAX_LIMIT", "MAX_DEADLINE",
           "REASON_RECOVERY_FAILED", "policy_of", "record_of", "message", "next_due", "step"]

#: Rounds of the recovery deadline before the group is Failed, unless ``cogate.dev/recovery-limit`` says.
DEFAULT_LIMIT = 3
#: The most rounds ``cogate.dev/recovery-limit`` may ask for (2^10 T of back-off is already long).
MAX_LIMIT = 10
#: The longest ``cogate.dev/recovery-deadline`` (seconds: 30 days).
MAX_DEADLINE = 30 * 24 * 3600


class Rule(StrEnum):
    """What a released group that lost a member does with its replacements."""

    #: Released one by one when they fit, while the quorum holds (cogate's default).
    FREE = "free"
    #: The release ends at the first member lost: survivors and replacements form the gang again.
    WHOLE = "whole"


@dataclass(frozen=True)
class Policy:
    """A group's recovery policy: ``rule``; ``deadline`` (seconds, ``None``: no deadline);
    ``limit`` (rounds before Failed); ``problems``: the annotations that were not understood
    (each read as its default), in words."""

    rule: Rule = Rule.FREE
    deadline: int | None = None
    limit: int = DEFAULT_LIMIT
    problems: tuple[str, ...] = ()

    @property
    def whole(self) -> bool:
        return self.rule is Rule.WHOLE


def _int(annotations: Mapping[str, str], key: str, low: int, high: int,
         problems: list[str]) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        problems.append(f"{key}={raw!r} is not a whole number from {low} to {high}")
        return None
    return value


def policy_of(annotations: Mapping[str, str] | None) -> Policy:
    """The :class:`Policy` the PodGroup's ``annotations`` ask for (module doc); never raises."""
    annotations = annotations or {}
    problems: list[str] = []
    raw = annotations.get(api.RECOVERY_ANNOTATION)
    rule = Rule.FREE
    if raw is not None:
        try:
            rule = Rule(raw.strip().lower())
        except ValueError:
            problems.append(f"{api.RECOVERY_ANNOTATION}={raw!r} is neither 'free' nor 'whole'")
    deadline = _int(annotations, api.RECOVERY_DEADLINE_ANNOTATION, 1, MAX_DEADLINE, problems)
    limit = _int(annotations, api.RECOVERY_LIMIT_ANNOTATION, 1, MAX_LIMIT, problems)
    return Policy(rule, deadline, DEFAULT_LIMIT if limit is None else limit, tuple(problems))


@dataclass(frozen=True)
class Record:
    """A recovery under way: below minMember ``since``; ``rounds`` evictions done, the ``last`` at;
    ``failed``: the limit was reached (nothing more is evicted)."""

    since: float
    rounds: int = 0
    last: float | None = None
    failed: bool = False


#: Rounds in words in the ``Recovery`` message: each round changes its words, so the status write
#: that records a round is never held back as a numbers-only change
#: (:func:`cogate.controller.status.writes.progress_only`): it is written before the eviction.
_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
#: The record in the ``Recovery`` condition's message (:func:`message` writes it, :func:`record_of` reads it).
_RECORD = re.compile(r"below minMember since (\S+Z) \(recovery-deadline \d+s; eviction rounds done: (\w+) of \w+"
                     r"(?:, the last at (\S+Z))?\)")


def record_of(cond: Condition | None) -> Record | None:
    """The :class:`Record` the ``Recovery`` condition ``cond`` holds: its message as :func:`message`
    wrote it while the condition is ``True`` or ``False``/``RecoveryFailed`` (``failed``); ``None``
    when there is none, it says the recovery ended, or it cannot be read. The record lives in the
    PodGroup's status, written before any eviction (status first, then act), so a restarted
    controller or a new leader goes on from it."""
    if cond is None or not (cond.status == "True" or cond.reason == REASON_RECOVERY_FAILED):
        return None
    found = _RECORD.search(cond.message or "")
    if found is None or found.group(2) not in _WORDS:
        return None
    try:
        since = parse_time(found.group(1))
        last = parse_time(found.group(3)) if found.group(3) else None
    except ValueError:
        return None
    return Record(since, _WORDS.index(found.group(2)), last, cond.reason == REASON_RECOVERY_FAILED)


def message(policy: Policy, record: Record, due: float | None) -> str:
    """The ``Recovery`` condition's message: the record (read back by :func:`record_of`) and what
    comes next ("below minMember since 2026-12-06T17:00:00Z (recovery-deadline 30s; eviction rounds
    done: one of three, the last at 2026-12-06T17:00:30Z); next eviction round (2 of 3) at ...")."""
    last = f", the last at {format_time(record.last)}" if record.last is not None else ""
    head = (f"below minMember since {format_time(record.since)} (recovery-deadline {policy.deadline}s; "
            f"eviction rounds done: {_WORDS[record.rounds]} of {_WORDS[policy.limit]}{last})")
    if record.failed:
        return f"{head}; the eviction rounds did not bring the gang back: the group is Failed, nothing more is evicted"
    if due is None:
        return head
    if record.rounds < policy.limit:
        return (f"{head}; next eviction round ({record.rounds + 1} of {policy.limit}) at {format_time(due)} "
                "if still below minMember")
    return f"{head}; Failed at {format_time(due)} if still below minMember"


def next_due(deadline: int, record: Record) -> float:
    """When the next round (or, after the limit, the failure) is due: ``since + T`` before the first
    round, else ``last + T * 2^rounds`` (T, 2T, 4T ... after each round)."""
    if record.rounds == 0 or record.last is None:
        return record.since + deadline
    return record.last + deadline * 2 ** record.rounds


class Action(StrEnum):
    """What :func:`step` asks the shell to do (each writes :attr:`Step.record` first)."""

    NONE = "none"
    #: Write the record (a recovery starts, or its record must go: :attr:`Step.record` ``None``).
    WRITE = "write"
    #: Write the record of a new round, then evict the remaining members once.
    EVICT = "evict"
    #: Write the failed record: the limit is reached, the group is Failed.
    FAIL = "fail"


@dataclass(frozen=True)
class Step:
    """:func:`step`'s answer: ``action``; ``record`` (to write; ``None``: remove it); ``due`` (epoch
    seconds of the next round or failure, ``None``: nothing due); ``message`` (the state in words)."""

    action: Action
    record: Record | None
    due: float | None = None
    message: str = ""


def step(policy: Policy, record: Record | None, *, below: bool, now: float) -> Step:
    """The recovery's next move for a group that is ``below`` minMember after reaching it (or not),
    from its ``policy`` and recorded ``record`` (module doc). Pure: the same inputs give the same
    step, and a step that evicts returns a record whose next round lies in the future."""
    if not below or policy.deadline is None:
        return Step(Action.WRITE if record is not None else Action.NONE, None)
    current = record or Record(since=now)
    if current.failed:
        return Step(Action.NONE if record is not None else Action.WRITE, current, None,
                    message(policy, current, None))
    due = next_due(policy.deadline, current)
    if now < due:
        return Step(Action.NONE if record is not None else Action.WRITE, current, due, message(policy, current, due))
    if current.rounds >= policy.limit:
        failed = replace(current, failed=True)
        return Step(Action.FAIL, failed, None, message(policy, failed, None))
    done = replace(current, rounds=current.rounds + 1, last=now)
    due = next_due(policy.deadline, done)
    return Step(Action.EVICT, done, due, message(policy, done, due))
