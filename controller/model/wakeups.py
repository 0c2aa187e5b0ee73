"""When the controller runs again (pure): the schedule of passes and the back-off of refused releases.

- :class:`Debouncer`: when the next reconcile pass is due (debounce, periodic resync, wake-ups,
  a pass due at once);
- :class:`Arrivals`: which member event completes a group (its gated members reach minMember),
  the event that makes a pass due at once instead of after the debounce (issue 40);
- :func:`earliest`: the earliest of the wake-ups the reconciler's rooms ask for (each says
  when it wants to run again, or ``None``; as controller-runtime's ``Result{RequeueAfter}``,
  of which the loop takes the minimum);
- :func:`refusal_backoff`: how long a group waits after its release was refused.

Every time is in seconds; the debouncer's on the monotonic clock its caller reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cogate.controller.model.records import PodInfo, member_key

#: A pass that wakes up for a deadline runs this many seconds after it, so the deadline has passed.
WAKE_MARGIN = 0.01

#: Back-off after a refused release: first retry after this many seconds, doubling, at most
#: :data:`REFUSAL_BACKOFF_MAX` (docs/semantics.md, "A release the API server refuses").
REFUSAL_BACKOFF_INITIAL = 5.0
REFUSAL_BACKOFF_MAX = 300.0


class Debouncer:
    """When the next reconcile pass is due. Times are monotonic seconds supplied by the caller.

    - :meth:`trigger` (an informer event): a pass is due ``delay`` seconds after the
      FIRST trigger since the last pass (events inside the window coalesce; a steady
      stream of events cannot postpone the pass forever);
    - a periodic resync is due ``resync`` seconds after the last pass started;
    - :meth:`wake_at`: an extra deadline (a schedule timeout, a reservation TTL);
    - :meth:`trigger` with ``at_once``: the pass is due now, whatever the window (an event that
      completes a group, :class:`Arrivals`): a group whose members all fit is decided in the
      next pass to start, not ``delay`` seconds later. A pass already running is not cut short
      (passes are serialised); the next one starts as soon as it ends, and covers every event
      that came meanwhile.
    """

    def __init__(self, delay: float, resync: float, now: float) -> None:
        if delay < 0 or resync <= 0:
            raise ValueError("debounce must be >= 0 and resync > 0 seconds")
        self.delay = delay
        self.resync = resync
        self.pending_since: float | None = None
        self.last_pass = now
        self.wakeup: float | None = None

    def trigger(self, now: float, at_once: bool = False) -> None:
        if self.pending_since is None:
            self.pending_since = now
        if at_once:
            self.wake_at(now)

    def wake_at(self, when: float) -> None:
        if self.wakeup is None or when < self.wakeup:
            self.wakeup = when

    def deadline(self) -> float:
        """Monotonic time at which the next pass is due."""
        d = self.last_pass + self.resync
        if self.pending_since is not None:
            d = min(d, self.pending_since + self.delay)
        if self.wakeup is not None:
            d = min(d, self.wakeup)
        return d

    def due(self, now: float) -> bool:
        return now >= self.deadline()

    def started(self, now: float) -> None:
        """A pass starts now: clears the triggers it covers (later triggers start a new window)."""
        self.pending_since = None
        self.wakeup = None
        self.last_pass = now


class Arrivals:
    """Counts each group's gated members from the members informer's events, to say which event
    completes a group: the one after which its gated members number at least minMember for the
    first time since they last fell short (the count rises through minMember).

    Only the count is kept (``(namespace, podgroup)`` -> uids, the membership rule
    ``records.member_key``), updated per event in O(1); the planner still judges the group from
    the caches. Not thread-safe: one informer thread feeds it (or the caller holds a lock).

    It also remembers when each group completed (``at``, the caller's monotonic seconds), for the
    path from a group's last member to its release (``cogate_controller_arrival_to_release_seconds``):
    :meth:`settle` hands the pass that releases the group its completion time.
    """

    def __init__(self) -> None:
        self._gated: dict[tuple[str, str], set[str]] = {}
        self._completed_at: dict[tuple[str, str], float] = {}

    def count(self, group: tuple[str, str]) -> int:
        """Gated members of ``group`` seen so far (0 for an unknown group)."""
        return len(self._gated.get(group, ()))

    def completed(self, old: PodInfo | None, new: PodInfo | None, gate: str,
                  podgroup: Callable[[tuple[str, str]], Any], at: float | None = None) -> bool:
        """Apply one members-informer event; True when it completes its group: the group's gated
        count rose to its minMember (``podgroup(key)``: the cached PodGroup, anything with
        ``.pg.spec.minMember``, ``None`` when unknown; :func:`completes`). ``at``: when the event was
        seen (monotonic seconds), remembered for :meth:`settle` when it completes the group."""
        group = self.seen(old, new, gate)
        pg = podgroup(group) if group is not None else None
        done = group is not None and pg is not None and completes(self.count(group), pg.pg.spec.minMember)
        if done and at is not None:
            self._completed_at[group] = at  # type: ignore[index]
        return done

    def settle(self, released: Iterable[tuple[str, str]], started: float) -> dict[tuple[str, str], float]:
        """At the end of a pass that started at ``started`` (monotonic seconds) and freshly released
        ``released``: the completion times of those groups (forgotten now). Completions seen before
        ``started`` that the pass did not release are forgotten too (the group waits for something
        else than its members); later ones are kept for the next pass, which may release them."""
        out = {g: t for g in released if (t := self._completed_at.pop(g, None)) is not None}
        for g in [g for g, t in self._completed_at.items() if t < started]:
            del self._completed_at[g]
        return out

    def seen(self, old: PodInfo | None, new: PodInfo | None, gate: str) -> tuple[str, str] | None:
        """Apply one members-informer event (``old``/``new``: the record before and after it, ``None``
        when the pod did not exist / was deleted; ``gate``: cogate's gate name). Returns the group
        whose gated count rose with this event, else ``None``."""
        before = member_key(old) if old is not None and gate in old.gates else None
        after = member_key(new) if new is not None and gate in new.gates else None
        pod = (new or old).uid if (new or old) is not None else ""
        if before is not None and before != after:
            members = self._gated.get(before)
            if members is not None:
                members.discard(pod)
                if not members:
                    del self._gated[before]
        if after is None or pod in self._gated.setdefault(after, set()):
            return None
        self._gated[after].add(pod)
        return after


def completes(count: int, min_member: int) -> bool:
    """Whether a group whose gated count just rose to ``count`` became complete with that event
    (``count == minMember``): the pass that may release it is due at once. Later members of a
    group already complete (``count > minMember``) wait for the debounce as any other event."""
    return min_member > 0 and count == min_member


def earliest(*times: float | None) -> float | None:
    """The earliest of ``times`` that are not ``None`` (``None`` when none is: nothing waits)."""
    known = [t for t in times if t is not None]
    return min(known) if known else None


def refusal_backoff(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th refused release in a row (5, 10, 20, ... 300)."""
    return min(REFUSAL_BACKOFF_INITIAL * 2 ** max(attempts - 1, 0), REFUSAL_BACKOFF_MAX)
