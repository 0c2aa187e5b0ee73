"""What the reconciler does once a verdict's status is written (I/O): the gates of its release go,
and the group's events are emitted (status first, then gates: :mod:`cogate.controller.reconciler`).

:class:`Releasing` is a mixin of :class:`~cogate.controller.reconciler.Reconciler`:
``_ungate_and_announce`` (called by ``Reconciler._apply_verdict`` after the status write) ungates
the members of a release (pinned, with the provisioning and topology annotations of the release
patch: :func:`~cogate.controller.planning.fenced.domain_annotations`), backs off a patch the API
server refuses (:class:`~cogate.controller.release.guard.ReleaseGuard`), counts releases
(``cogate_releases_total``, ``cogate_complete_to_release_seconds``) and emits the verdict's Event
(``Released``, or the held group's reason, de-duplicated by situation), records the chosen topology
domain on the PodGroup (annotation ``topology.cogate.dev/domain``, before the gates go; cleared when
the release no longer stands: docs/topology.md), the waiting-for-capacity
Event and the warnings about shared replicas and mixed priorities (docs/reference/events.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from cogate.controller.kube.events import Emitter
from cogate.controller.kube.metrics import Metrics
from cogate.controller.kube.writer import Writer, WriteResult
from cogate.controller.model import replicas, verdicts
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.controller.planning.fenced import domain_annotations
from cogate.controller.provisioning.room import Provisioning
from cogate.controller.release.aftercare import Aftercare
from cogate.controller.release.forcing import Forcing
from cogate.controller.release.guard import ReleaseGuard
from cogate.controller.release.memory import ReleaseMemory
from cogate.controller.release.ownership import Ownership
from cogate.controller.status import notices
from cogate.controller.status.inputs import GroupObject
from cogate.controller.status.notices import log_extra
from cogate.controller.topology.constraints import DOMAIN_ANNOTATION, recorded_domain

__all__ = ["Releasing"]

log = logging.getLogger("cogate.controller.reconciler")


class Releasing:
    """Gates and events of one applied verdict, for :class:`~cogate.controller.reconciler.Reconciler` (module doc)."""

    config: ReconcilerConfig
    metrics: Metrics
    events: Emitter
    writer: Writer
    guard: ReleaseGuard
    forcing: Forcing
    provisioning: Provisioning
    owners: Ownership
    aftercare: Aftercare
    _drop: Callable[[Iterable[str]], None]

    def _ungate_and_announce(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict,
                             release: Mapping[str, str], memory: ReleaseMemory,
                             now: float) -> tuple[int, float | None]:
        """After the status is written: the gates of ``release`` go, and the verdict's events;
        (members ungated, ``wake_at`` of a refusal)."""
        outcome = Outcome(verdict.outcome)
        self._record_domain(g, request, verdict, release)
        ungated, wake_at = 0, None
        if outcome is Outcome.RELEASED and release:
            self._count_release(g, request, now)
        if release:
            ungated, wake_at = self._release(g, request, outcome, verdict, release, memory, now)
        elif not outcome.releases:
            self._announce(g, outcome, verdict.message, now)
        if verdict.waiting:
            self.events.emit(g.ref, "waiting", notices.waiting_for_capacity(verdict.message), now)
        else:
            self.events.clear(g.uid, "waiting")
        return ungated, wake_at

    def _record_domain(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict,
                       release: Mapping[str, str]) -> None:
        """The chosen domain on the PodGroup (annotation ``topology.cogate.dev/domain``, the members'
        format; :func:`~cogate.controller.topology.constraints.recorded_domain`): written before the gates
        go, cleared once the release no longer stands; patched only when it differs from the cached
        PodGroup (a failed write is retried by the next pass)."""
        outcome = Outcome(verdict.outcome)
        fresh = outcome is Outcome.RELEASED and bool(release)
        current = (g.pg.metadata.annotations or {}).get(DOMAIN_ANNOTATION)
        wanted = recorded_domain(current, verdict.domain, stands=fresh or outcome is Outcome.ALREADY_RELEASED,
                                 fresh=fresh, constrained=request.topology is not None)
        if wanted != current:
            self.writer.annotate_group(*g.key, {DOMAIN_ANNOTATION: wanted})

    def _count_release(self, g: GroupObject, request: GroupRequest, now: float) -> None:
        self.metrics.releases.inc()
        self.events.clear(g.uid, "verdict")
        since = verdicts.complete_since(request)
        if since is not None:
            self.metrics.complete_to_release.observe(max(0.0, now - since))

    def _release(self, g: GroupObject, request: GroupRequest, outcome: Outcome, verdict: GroupVerdict,
                 release: Mapping[str, str], memory: ReleaseMemory, now: float) -> tuple[int, float | None]:
        """Ungate ``release`` (uid -> pin target); a ``Released`` event; (members ungated, ``wake_at``).
        A patch the API server refuses now (after the dry run) is reported and backed off like a
        dry-run refusal. The members ungated join the gang whose departures the next pass reports
        (:meth:`~cogate.controller.release.aftercare.Aftercare.released`)."""
        placement = self.config.placement
        results = self.writer.ungate_members(release, {**self.provisioning.consume(g), **domain_annotations(verdict.domain)})
        removed = {u: n for u, n in release.items() if results.get(u) == WriteResult.REMOVED}
        self.aftercare.released(g.key, [m for m in request.members if m.uid in removed])
        self.forcing.announce(g, verdict, removed, now)
        refused = {u for u, r in results.items() if r == WriteResult.REFUSED}
        stopped = sum(1 for r in results.values() if r == WriteResult.STOPPED)
        if stopped:
            log.info("PodGroup %s/%s: %d members left gated: the controller is stopping (the next leader "
                     "finishes the recorded release)", *g.key, stopped, extra=log_extra(*g.key))
        wake_at = None
        if refused:
            self.metrics.release_refusals.labels("patch").inc(len(refused))
            self._drop({u: "" for u in refused})
            _, wake_at = self.guard.refused(g, refused, memory, released=len(removed), whole_group=False, now=now)
        elif memory.refusal is not None and removed:
            self.guard.clear(memory)
        if outcome is Outcome.RELEASED:
            notice = notices.released(release, placement, placed_in=verdict.placed_in)
            log.info("PodGroup %s/%s: %s (%s)", *g.key, notice.message, verdict.message, extra=log_extra(*g.key))
            self.events.emit(g.ref, "", notice, now)
        elif removed:
            self.events.emit(g.ref, "", notices.released(removed, placement, new=True), now)
        return len(removed), wake_at

    def _announce(self, g: GroupObject, outcome: Outcome, message: str, now: float) -> None:
        """The event of a held group's verdict (waiting, short of capacity, unschedulable)."""
        if notices.plain_wait(outcome, message) and self.owners.arriving(g.uid):
            return  # members still arriving: the status says it; the Event once they settle (Ownership.arriving)
        notice = notices.verdict_event(outcome, message)
        if notice is not None:
            self.events.emit(g.ref, "verdict", notice, now, key=notices.situation_key(notice.message))

    def _warn_shared_replicas(self, g: GroupObject, request: GroupRequest, now: float) -> None:
        """Warning ``ReplicasSharePodGroup`` while members of several replicas share the PodGroup."""
        message = replicas.shared_message(request.members)
        if message:
            self.events.emit(g.ref, "replicas", notices.replicas_share(message), now, key=notices.situation_key(message))
        else:
            self.events.clear(g.uid, "replicas")

    def _warn_mixed_priorities(self, g: GroupObject, request: GroupRequest, now: float) -> None:
        notice = notices.priority_event(request)
        if notice is not None:
            self.events.emit(g.ref, "priorities", notice, now)
        else:
            self.events.clear(g.uid, "priorities")
