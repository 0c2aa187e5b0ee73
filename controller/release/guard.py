"""The release guard: what is checked before any gate of a group goes, and refused releases.

Verbs (as scheduler-plugins' coscheduling ``Manager``, a short list):

- :meth:`ReleaseGuard.check`: the members of a verdict to ungate now, after three checks (the
  planned nodes again, a standing refusal's back-off, a dry run of every release patch);
- :meth:`ReleaseGuard.refused`: record a refusal (back-off 5 s doubling to 300 s,
  :func:`cogate.controller.model.wakeups.refusal_backoff`) and report it;
- :meth:`ReleaseGuard.clear`: members were released since: the group's refusal is over;
- :meth:`ReleaseGuard.holds`, :meth:`ReleaseGuard.next_retry`: which groups are not planned
  while their back-off lasts, and when the earliest one ends;
- :meth:`ReleaseGuard.dry_run_needed`: whether release patches are dry-run first.

The guard is handed what it uses (the config, the caches, the writer, the metrics, the event
emitter, the reservation drop callback, the monotonic clock); what it remembers about a group
is in the group's :class:`cogate.controller.release.memory.ReleaseMemory` (``refusal``). It never sets
the next pass itself: each verb that wants one returns its ``wake_at`` (monotonic seconds),
and the reconciler wakes up for the earliest (docs/semantics.md, "A release the API server refuses").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from cogate.controller.planning import capacity
from cogate.controller.status import notices
from cogate.controller.release import refusers
from cogate.controller.release.memory import Refusal, ReleaseMemories, ReleaseMemory
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.kube.events import Emitter
from cogate.controller.kube.informer import Caches
from cogate.controller.devices.room import Devices
from cogate.controller.status.inputs import GroupObject
from cogate.controller.kube.metrics import Metrics
from cogate.controller.status.notices import log_extra
from cogate.controller.planning.patches import pin_target
from cogate.controller.model.verdicts import GroupVerdict, Outcome
from cogate.controller.model.wakeups import WAKE_MARGIN, refusal_backoff
from cogate.controller.kube.writer import Writer, WriteResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checked:
    """What :meth:`ReleaseGuard.check` allows: ``release`` (uid -> pin target, '' = unpinned) to
    ungate now; ``refused``: the text of the group's standing refusal for its conditions ('' if
    none); ``wake_at``: monotonic seconds of the pass it wants (``None``: none)."""

    release: dict[str, str]
    refused: str = ""
    wake_at: float | None = None


class ReleaseGuard:
    """Checks releases before any gate goes; see the module doc. ``drop(uids)``: the reservations
    of ``uids`` go after this pass (their release did not happen)."""

    def __init__(self, config: ReconcilerConfig, caches: Caches, writer: Writer, metrics: Metrics, events: Emitter,
                 drop: Callable[[Iterable[str]], None], monotonic: Callable[[], float],
                 devices: Devices | None = None) -> None:
        self.config = config
        self.caches = caches
        #: DRA devices as the planner counted them (nodes' and members' device resources).
        self.devices = devices
        self.writer = writer
        self.metrics = metrics
        self.events = events
        self._drop = drop
        self._monotonic = monotonic
        #: (dry run needed, interceptors, known) last logged by :meth:`dry_run_needed`.
        self._dry_run_state: tuple[bool, tuple[str, ...], bool] | None = None
        self._dry_run_lock = threading.Lock()  # groups are applied concurrently

    # -- before the release ------------------------------------------------------------------
    def check(self, g: GroupObject, verdict: GroupVerdict, memory: ReleaseMemory, now: float) -> Checked:
        """The members of ``verdict`` to ungate now (``now``: epoch seconds), and the refusal to report.

        0. A member of the release that left since the pass's snapshot (deleted, being deleted,
           ended: the members informer) makes a fresh release release nothing (planned again at
           once); a new member of a released group that left is simply not released.
        1. Each planned node is checked again just before the patch (``capacity.pinned_node_problems``
           on the current node and pod caches): a fresh release with a planned node that went bad
           meanwhile releases nothing (planned again at once); a new member of a released group
           is held this pass.
        2. Members whose release patch was refused recently wait for their back-off.
        3. When :meth:`dry_run_needed`, every release patch is sent as a dry run first: if the API
           server refuses one, a fresh release releases none, a released group holds the refused
           members; both back off (5 s doubling to 300 s) and report the member and the answer.

        A group that waits for other reasons now, or whose refused members are released now,
        has its refusal cleared.
        """
        outcome = Outcome(verdict.outcome)
        release: dict[str, str] = {}
        refused, wake_at = "", None
        if outcome.releases and verdict.release:
            release, refused, wake_at = self._checked_release(g, outcome, verdict, memory, now)
        elif outcome.waiting:
            memory.refusal = None  # the group waits for other reasons now
        standing = memory.refusal
        if release and not refused and standing is not None and (standing.whole_group or standing.uids <= set(release)):
            memory.refusal = None  # what was refused is released now
        if not refused and memory.refusal is not None:
            refused = memory.refusal.message  # while what it refused is not released yet
        return Checked(release, refused, wake_at)

    def _checked_release(self, g: GroupObject, outcome: Outcome, verdict: GroupVerdict, memory: ReleaseMemory,
                         now: float) -> tuple[dict[str, str], str, float | None]:
        """:meth:`check`'s three steps: (release, refusal text, wake_at)."""
        placement = self.config.placement
        gone = self._gone(verdict.release)
        if gone:
            log.info("PodGroup %s/%s: %d of the members to release left since the pass began (%s); %s", *g.key,
                     len(gone), ", ".join(sorted(gone.values())[:5]),
                     "planning the gang again" if outcome is Outcome.RELEASED else "releasing the others",
                     extra=log_extra(*g.key))
            if outcome is Outcome.RELEASED:
                self._drop(verdict.release)
                return {}, "", self._monotonic() + self.config.debounce
            self._drop(gone)
        release = {u: pin_target(self.caches.members.get(u), n, placement) for u, n in verdict.release.items()
                   if u not in gone}
        problems = self._recheck_nodes(release)
        if problems:
            log.info("PodGroup %s/%s: planned nodes changed before the release (%s); planning again", *g.key,
                     "; ".join(sorted(set(problems.values()))), extra=log_extra(*g.key))
            if outcome is Outcome.RELEASED:
                self._drop(verdict.release)
                # planned again at once: the next pass is due as after an informer event
                return {}, "", self._monotonic() + self.config.debounce
            self._drop(problems)
            release = {u: n for u, n in release.items() if u not in problems}
        standing = memory.refusal
        if standing is not None and standing.until > now and not standing.whole_group:
            self._drop({u: "" for u in standing.uids if u in release})
            release = {u: n for u, n in release.items() if u not in standing.uids}
        if not release or not self.dry_run_needed():
            return release, "", None
        checks = self.writer.check_release(release)
        refused = {u for u, r in checks.items() if r == WriteResult.REFUSED}
        if not refused:
            return release, "", None
        self.metrics.release_refusals.labels("dry_run").inc(len(refused))
        whole = outcome is Outcome.RELEASED
        message, wake_at = self.refused(g, refused, memory, released=0, whole_group=whole, now=now)
        if whole:
            self._drop(verdict.release)
            return {}, message, wake_at
        self._drop({u: "" for u in refused})
        return {u: n for u, n in release.items() if u not in refused}, message, wake_at

    def _gone(self, release: Mapping[str, str]) -> dict[str, str]:
        """``{uid: name}`` of the members of ``release`` that the members informer no longer holds as live
        (deleted, being deleted, or ended) since the pass's snapshot: a pass that also preempts or
        provisions can take seconds, and a gang must not be recorded as released with a member it no
        longer has (the soak's ``released_twice``: the release then ends at the next pass)."""
        out = {}
        for u in release:
            m = self.caches.members.get(u)
            if m is None or m.deleting or m.terminal:
                out[u] = m.name if m is not None else u
        return out

    def _recheck_nodes(self, release: Mapping[str, str]) -> dict[str, str]:
        """``{uid: reason}`` for members whose pin target fails ``capacity.pinned_node_problems`` now."""
        dev = self.devices
        pins = [(m, n) for u, n in release.items()
                if n and (m := self.caches.members.get(u) if dev is None else dev.member(self.caches.members.get(u)))
                is not None]
        if not pins:
            return {}
        wanted = {n for _, n in pins}
        nodes = [n for n in self.caches.nodes.snapshot() if n.name in wanted]
        bound = [p for p in self.caches.bound.snapshot() if p.node_name in wanted and p.bound and not p.terminal]
        if dev is not None:  # the nodes' devices and the devices bound pods hold, as planned
            nodes, bound = dev.nodes(nodes), dev.bound_pods(bound)
        return capacity.pinned_node_problems(nodes, bound, pins)

    def dry_run_needed(self) -> bool:
        """Whether release patches are dry-run before any gate goes (``refusers.dry_run_needed``
        over the admission informers); logs each change of the answer and of what it rests on."""
        mode = self.config.validate_releases
        if mode != "auto":
            return mode == "always"
        informers = self.caches.admission
        known = self.caches.admission_known and all(i.healthy for i in informers)
        names = tuple(sorted({n for i in informers for rec in i.snapshot() for n in rec})) if known else ()
        needed = refusers.dry_run_needed(mode, known, names)
        state = (needed, names, known)
        with self._dry_run_lock:
            changed, self._dry_run_state = state != self._dry_run_state, state
        if changed:
            if not known:
                log.info("release patches are dry-run first: the admission webhooks and policies that could refuse "
                         "them are not known (not listed yet, or their watch failed)")
            elif needed:
                log.info("release patches are dry-run first: %d admission webhooks or policies intercept pod "
                         "updates (%s)", len(names), ", ".join(names[:10]) + (", ..." if len(names) > 10 else ""))
            else:
                log.info("release patches are not dry-run: no admission webhook or policy intercepts pod updates")
        return needed

    # -- refusals ------------------------------------------------------------------------------
    def refused(self, g: GroupObject, uids: set[str], memory: ReleaseMemory, *, released: int, whole_group: bool,
                now: float) -> tuple[str, float]:
        """Record a refusal of ``uids`` (back-off doubles per refusal in a row) and emit its event;
        returns its message and ``wake_at`` (monotonic seconds: just after the back-off)."""
        prev = memory.refusal
        attempts = (prev.attempts if prev is not None else 0) + 1
        delay = refusal_backoff(attempts)
        names = {}
        for u in uids:
            p = self.caches.members.get(u)
            names[p.name if p is not None else u] = self.writer.answers.get(u, "refused")
        notice = notices.release_refused(names, released, delay)
        memory.refusal = Refusal(now + delay, attempts, notice.message, frozenset(uids), whole_group)
        log.warning("PodGroup %s/%s: %s", *g.key, notice.message, extra=log_extra(*g.key))
        self.events.record(g.ref, notice)
        return notice.message, self._monotonic() + delay + WAKE_MARGIN

    @staticmethod
    def clear(memory: ReleaseMemory) -> None:
        """Members of the group were released: its refusal is over."""
        memory.refusal = None

    @staticmethod
    def holds(memory: ReleaseMemory, now: float) -> bool:
        """Whether the group is not planned now (``now``: epoch seconds): its fresh release was
        refused and the back-off lasts."""
        r = memory.refusal
        return r is not None and r.whole_group and r.until > now

    @staticmethod
    def next_retry(memories: ReleaseMemories, now: float) -> float | None:
        """Epoch seconds at which the earliest back-off after ``now`` ends (``None``: none lasts)."""
        ends = [r.until for _, m in memories.iter_release() if (r := m.refusal) is not None and r.until > now]
        return min(ends) if ends else None
