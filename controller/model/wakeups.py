"""When the controller runs again (pure): the schedule of passes and the back-off of refused releases.

- :class:`Debouncer`: when the next reconcile pass is due (debounce, periodic resync, wake-ups);
- :func:`earliest`: the earliest of the wake-ups the reconciler's rooms ask for (each says
  when it wants to run again, or ``None``; as controller-runtime's ``Result{RequeueAfter}``,
  of which the loop takes the minimum);
- :func:`refusal_backoff`: how long a group waits after its release was refused.

Every time is in seconds; the debouncer's on the monotonic clock its caller reads.
"""

from __future__ import annotations

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
    - :meth:`wake_at`: an extra deadline (a schedule timeout, a reservation TTL).
    """

    def __init__(self, delay: float, resync: float, now: float) -> None:
        if delay < 0 or resync <= 0:
            raise ValueError("debounce must be >= 0 and resync > 0 seconds")
        self.delay = delay
        self.resync = resync
        self.pending_since: float | None = None
        self.last_pass = now
        self.wakeup: float | None = None

    def trigger(self, now: float) -> None:
        if self.pending_since is None:
            self.pending_since = now

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


def earliest(*times: float | None) -> float | None:
    """The earliest of ``times`` that are not ``None`` (``None`` when none is: nothing waits)."""
    known = [t for t in times if t is not None]
    return min(known) if known else None


def refusal_backoff(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th refused release in a row (5, 10, 20, ... 300)."""
    return min(REFUSAL_BACKOFF_INITIAL * 2 ** max(attempts - 1, 0), REFUSAL_BACKOFF_MAX)
