"""The reconcile loop: informer caches -> ``planner.decide`` -> status, gate removal, events.

This module schedules and runs decision passes and applies their verdicts; the rules live
in pure modules (``planner``, ``status``, :mod:`~cogate.controller.planning.patches`,
:mod:`~cogate.controller.status.notices`, :mod:`~cogate.controller.status.inputs` for the planner's input,
:mod:`~cogate.controller.model.wakeups` for when a pass is due), the API calls in
:mod:`~cogate.controller.kube.writer`, and the duties around a release in rooms of their own,
each handed what it uses (docs/internals.md, "The reconciler and its rooms"):

- :class:`~cogate.controller.release.guard.ReleaseGuard`: the checks before any gate goes, refused releases;
- :class:`~cogate.controller.release.aftercare.Aftercare`: stuck pins, departures, quorum loss,
  timeouts, the opt-in PodDisruptionBudget;
- :class:`~cogate.controller.preemption.room.Preempting`: gang preemption (``--preemption``): the room
  held for a preemption in flight, victims marked and deleted, how it ended;
- :class:`~cogate.controller.provisioning.room.Provisioning`: asking cluster-autoscaler for a waiting
  gang's nodes (``--provisioning-class``): ProvisioningRequests made, judged, consumed, deleted;
- :class:`~cogate.controller.release.strays.Strays`: gated pods that left their group or are stored with a
  native gang field (ungated), pods whose PodGroup does not exist, invalid objects;
- :class:`~cogate.controller.memory.Memories`: what is remembered about each PodGroup between passes;
- :class:`~cogate.controller.release.relaying.Relaying`: a held group's reason told to its owner and members;
- :class:`~cogate.controller.kube.events.Emitter`: the Events, de-duplicated.
- :class:`~cogate.controller.releasing.Releasing` (a mixin): the gates of a release and the verdict's events.

:class:`Reconciler` runs one decision pass at a time (decisions are serialised,
docs/semantics.md) on its own thread:

1. snapshot the caches: PodGroups, labelled members; on the first pass of a process (or
   after gaining leadership) seed the reservations with ``inputs.restored_reservations`` and
   take over the preemptions left in flight (``Preempting.resume``);
2. ``PlanningState.decide(groups, reservations, now, config)``
   (:mod:`~cogate.controller.planning.planstate`: the nodes and bound non-terminal pods are fed to it
   from the informers' deltas, and only groups whose inputs changed are planned again; the
   same decision as ``planner.decide`` over the caches); keep the returned reservations for
   the next pass;
3. per verdict, in a thread pool (verdicts with gates to remove first): ``status.compute_status`` and, when ``status_patch``
   returns a body, a merge patch of the status subresource. For ``Released`` the
   status (phase Scheduling, scheduleStartTime) is written FIRST, so that a restarted
   controller finishes the release instead of re-deciding it; only after it succeeded
   are the gates removed, concurrently, one minimal JSON Patch per member
   (``AlreadyReleased`` verdicts ungate their new members the same way);
4. events on change (:class:`cogate.controller.kube.events.EventDeduplicator`), metrics;
5. wake up for the earliest ``wake_at`` of a room, a reservation expiry or a schedule timeout (``debouncer.wake_at``,
   one place); at once when a member event completes its group (``on_member_event``), else after the debounce.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cogate.controller.status import lifecycle
from cogate.controller.release import native, refusers
from cogate.controller import topologies
from cogate.controller.planning.fenced import fence_requests
from cogate.controller.model import quota as quota_mod
from cogate.controller.status import status as status_mod
from cogate.controller.status import writes as status_writes
from cogate.controller.status import waiting
from cogate.controller.release.ownership import Ownership, api_reader, custom_reader
from cogate.controller.release.relaying import Relaying
from cogate.controller.release.aftercare import Aftercare, Context
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.kube.events import Emitter, EventRecorder
from cogate.controller.release.guard import ReleaseGuard
from cogate.controller.release.forcing import Forcing
from cogate.controller.devices.room import Devices
from cogate.controller.kube.informer import Caches
from cogate.controller.status.inputs import (
    GroupObject,
    after_departures,
    build_group_requests,
    members_by_group,
    resolve_volumes,
    restored_reservations,
)
from cogate.controller.memory import GroupMemory, Memories
from cogate.controller.status.memory import StatusMemory
from cogate.controller.kube.metrics import Metrics
from cogate.controller.status.notices import log_extra
from cogate.controller.planning.patches import PLACEMENTS
from cogate.controller.model.verdicts import Decision, GroupRequest, GroupVerdict, Outcome
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.room import Preempting
from cogate.controller.provisioning.room import Provisioning
from cogate.controller.model.records import NodeInfo, PodInfo, Promise, Reservation
from cogate.controller.release.strays import Strays
from cogate.controller.model.wakeups import WAKE_MARGIN, Arrivals, Debouncer, earliest
from cogate.controller.kube.writer import Writer
from cogate.controller.releasing import Releasing
from cogate.models import PHASES, PodGroupStatus

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api, CustomObjectsApi

log = logging.getLogger(__name__)

#: ``decide(nodes, bound_pods, groups, reservations, now, config[, promised]) -> Decision``
#: (``planner.decide``; ``promised`` only while a preemption holds room).
DecideFn = Callable[..., Decision]


@dataclass
class PassResult:
    verdicts: list[GroupVerdict] = field(default_factory=list)
    status_writes: int = 0
    ungated: int = 0
    #: Monotonic time each group whose gates went this pass had sent them, by (namespace, name).
    ungated_at: dict[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True)
class Applied:
    """What one verdict did: phase, writes, members ungated, ``wake_at`` (monotonic s; None), its wait and
    when it was done (monotonic s)."""

    phase: str
    writes: int = 0
    ungated: int = 0
    wake_at: float | None = None
    wait: waiting.Wait | None = None
    done: float = 0.0


def _check(config: ReconcilerConfig) -> None:
    """Raises ``ValueError`` for a ``placement`` or ``validate_releases`` the reconciler does not know."""
    if config.placement not in PLACEMENTS:
        raise ValueError(f"placement: {config.placement!r} not in {PLACEMENTS}")
    if config.validate_releases not in refusers.VALIDATION_MODES:
        raise ValueError(f"validate_releases: {config.validate_releases!r} not in {refusers.VALIDATION_MODES}")


class Reconciler(Releasing):
    """Runs decision passes; see the module doc. ``core``/``custom`` are the client APIs
    (``CoreV1Api``, ``CustomObjectsApi``) or fakes with the same methods. Without ``decide``
    passes plan on a :class:`PlanningState` kept current by handlers on the bound-pods and
    nodes informers (registered here, seeded from their stores); a test may script ``decide``
    (``planner.decide``'s signature) instead, which then gets the caches' snapshots.
    ``policy``: the ``PolicyV1Api`` of the opt-in PodDisruptionBudgets. ``clock``: epoch
    seconds; ``monotonic``: the debouncer's seconds."""

    #: Monotonic seconds the last pass's planning started and ended (:meth:`_observe_path`).
    _plan_span: tuple[float, float] = (0.0, 0.0)

    def __init__(self, core: CoreV1Api, custom: CustomObjectsApi, caches: Caches, config: ReconcilerConfig, *,
                 recorder: EventRecorder | None = None, metrics: Metrics | None = None,
                 decide: DecideFn | None = None, policy: Any = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        _check(config)
        self.caches = caches
        self.config = config
        self.metrics = metrics or Metrics()
        self.writer = Writer(core, custom, podgroups=caches.podgroups, members=caches.members,
                             gate=config.gate_name, attempts=config.max_patch_attempts, metrics=self.metrics,
                             workers=config.workers, sleep=sleep, monotonic=monotonic)
        self._decide = decide
        #: The incremental planner's state (None when ``decide`` is scripted); guarded by its lock.
        self.planning: PlanningState | None = (PlanningState(config.protected_namespaces) if decide is None
                                               else None)
        self._planning_lock = threading.Lock()
        #: DRA devices in the planning state (:mod:`cogate.controller.devices.room`).
        self.devices = Devices(caches.resource_slices, caches.device_classes, caches.resource_claims,
                               caches.claim_templates, caches.nodes, caches.bound)
        if self.planning is not None:
            self._follow_cluster(caches)
        self._clock, self._monotonic = clock, monotonic
        self.reservations: tuple[Reservation, ...] = ()
        #: Rebuild reservations from the cluster on the next pass (first pass, leadership gained).
        self.restore_reservations = True
        self._cond = threading.Condition()
        self.debouncer = Debouncer(config.debounce, config.resync, monotonic())
        self.arrivals, self._arrivals_lock = Arrivals(), threading.Lock()  # which event completes a group
        #: Whether this process leads (set by :meth:`run`); tests drive passes directly.
        self._leading: Callable[[], bool] = lambda: True
        self._groups_pool = concurrent.futures.ThreadPoolExecutor(max(1, config.workers // 2), "cogate-status")
        #: uids whose reservation a worker dropped during the pass (applied after it).
        self._drop_reservations: set[str] = set()
        #: This pass's labelled pods left to Kubernetes' own gang scheduling, by (namespace, label).
        self._native: dict[tuple[str, str], tuple[PodInfo, ...]] = {}
        self._drop_lock = threading.Lock()
        #: What is remembered about each PodGroup between passes, by uid (memory.GroupMemory).
        self.memory = Memories()
        self.events = Emitter(recorder)
        # The rooms: each is handed what it uses and returns when it wants the next pass.
        self.guard = ReleaseGuard(config, caches, self.writer, self.metrics, self.events, self._drop, monotonic,
                                  self.devices)
        self.aftercare = Aftercare(config, caches, self.writer, self.metrics, self.events, monotonic, policy,
                                   self.devices)
        # Victim selection reads the planning state's kept room (under its lock) instead of
        # rebuilding it from every bound pod; None with a scripted decide: from scratch then.
        self.preempting = Preempting(config, caches, self.writer, self.metrics, self.events, monotonic,
                                     planning=self.planning, planning_lock=self._planning_lock)
        # Asking cluster-autoscaler for nodes (``--provisioning-class``) plans on the same kept room.
        self.provisioning = Provisioning(config, caches, self.writer, self.metrics, self.events, monotonic,
                                         planning=self.planning, planning_lock=self._planning_lock)
        self.strays = Strays(config.gate_name, caches.podgroups, self.writer, self.metrics, self.events, clock,
                             lambda: self._leading())
        api_client = getattr(core, "api_client", None)
        self.owners = Ownership(api_reader(api_client), self.events, self.metrics, monotonic,
                                read_custom=custom_reader(api_client))
        # A held group's reason, told to its owner and gated members where users look.
        self.relaying = Relaying(self.events, config.gate_name)
        self.forcing = Forcing(self.events, config.gate_name, self._drop, caches.members.get)  # cogate.dev/force-release

    def _follow_cluster(self, caches: Caches) -> None:
        """Keep the planning state current from the nodes, bound-pods and nominated-pods informers:
        their handlers registered (after the devices room's), their stores fed in as ADDED."""
        caches.bound.add_handler(self.on_bound_pod_event)
        caches.nodes.add_handler(self.on_node_event)
        for n in caches.nodes.snapshot():
            self.on_node_event("ADDED", None, n)
        for p in caches.bound.snapshot():
            self.on_bound_pod_event("ADDED", None, p)
        if caches.nominated is not None:
            caches.nominated.add_handler(self.on_nominated_pod_event)
            for p in caches.nominated.snapshot():
                self.on_nominated_pod_event("ADDED", None, p)

    # -- triggering ----------------------------------------------------------
    def enqueue(self, *_: object, at_once: bool = False) -> None:
        """Informer handler: request a (debounced) pass; ``at_once``: due now (a group completed)."""
        with self._cond:
            self.debouncer.trigger(self._monotonic(), at_once)
            self._cond.notify()

    def on_member_event(self, kind: str, old: PodInfo | None, new: PodInfo | None) -> None:
        """Members informer handler: requests a pass, at once for an event that completes its group (``Arrivals``);
        a member the watch reported deleted goes to the after-release duties (its last state says why it went),
        a gated member that left its group to ``Strays.left`` (ungated before the next pass)."""
        if kind == "DELETED" and old is not None:
            self.aftercare.departed(old)
        self.strays.left(kind, old, new)
        with self._arrivals_lock:  # the watch thread and the writer's apply_local (never under _cond)
            at_once = self.arrivals.completed(old, new, self.config.gate_name, self.caches.podgroups.get,
                                              self._monotonic())
        self.enqueue(at_once=at_once)

    def _wake(self, when: float | None) -> None:
        """The one place the next pass is set for a deadline: ``when`` (monotonic seconds; None: no change)."""
        if when is not None:
            with self._cond:
                self.debouncer.wake_at(when)

    def run(self, stop: threading.Event, leading: Callable[[], bool] = lambda: True) -> None:
        """Run passes until ``stop``; passes run only while ``leading()``. Never raises."""
        self._leading = leading
        was_leading = False
        while not stop.is_set():
            if not self._wait_until_due():
                continue
            if not leading():
                was_leading = False
                continue
            if not was_leading:
                was_leading = True
                self.restore_reservations = True  # another process may have released meanwhile
                log.info("reconciler active")
            if stop.is_set():
                break
            try:
                self.reconcile_once()
            except Exception:  # noqa: BLE001 - the loop must survive a bad pass
                self.metrics.decision_errors.inc()
                log.exception("reconcile pass failed")
                self._wake(self._monotonic() + 1.0)

    def _wait_until_due(self) -> bool:
        """Wait (at most 1 s) for the next pass; True when it is due (and marked started)."""
        with self._cond:
            delay = self.debouncer.deadline() - self._monotonic()
            if delay > 0:
                self._cond.wait(min(delay, 1.0))
                return False
            self.debouncer.started(self._monotonic())
            return True

    def stop_releasing(self) -> None:
        """On SIGTERM: send no more gate patches (:meth:`cogate.controller.kube.writer.Writer.stop_releasing`);
        the pass in flight ends soon, its recorded releases are finished by the next leader."""
        self.writer.stop_releasing()

    def close(self) -> None:
        self._groups_pool.shutdown(wait=False, cancel_futures=True)
        self.writer.close()
        with self._cond:
            self._cond.notify_all()

    # -- a pass ----------------------------------------------------------------
    def reconcile_once(self) -> PassResult:
        """One pass (see the module doc). The wake-ups its rooms return are combined here: the
        next pass is set for the earliest, once, even when the pass fails."""
        started = self._monotonic()
        now = self._clock()
        wakes: list[float | None] = []
        try:
            groups = {g.key: g for g in self.caches.podgroups.snapshot()}
            labelled = resolve_volumes(
                self.caches.members.snapshot(),
                self.caches.claims.snapshot_map() if self.caches.claims is not None else None,
                self.caches.volumes.snapshot_map() if self.caches.volumes is not None else None)
            with self._planning_lock:  # members' device requests; nodes' and bound pods' devices
                labelled = self.devices.resolve(labelled, self.planning)
            labelled = self.aftercare.mark_going(labelled)  # evicted or deleted by us: going, whatever the watch says
            groups = self.aftercare.sizes.adjust(groups, members := members_by_group(labelled), now)  # operators' size
            natives = [p for p in labelled if p.native]  # one scan: usually none
            self._native = native.ignored_by_group(natives)  # no members: said so in their group's status
            self.strays.native(natives)  # stored with a native gang field: cogate's gate comes off
            if self.strays.pending:  # those, and gated pods that left their group
                self.strays.release()
            requests = build_group_requests(groups.values(), members, self.config.gate_name,
                                            self.config.topology_levels, topologies.kueue_levels(self.caches))
            if self.restore_reservations:
                self.preempting.resume(groups, requests, self.memory, now)  # preemptions left in flight
                self._restore_reservations(requests, now)
            survey = self.aftercare.survey(requests, labelled, now)
            wakes.append(survey.wake_at)
            lost = {key for key, ctx in survey.contexts.items() if ctx.lost}
            if lost:  # members left in this pass: does their release still stand? ("Generations")
                requests = after_departures(requests, groups, lost, self.config.gate_name)
            if survey.unreserve:
                self.reservations = tuple(r for r in self.reservations if r.pod_uid not in survey.unreserve)
            self.guard.dry_run_needed()  # logs when what could refuse a release changes
            held = {uid for uid, m in self.memory.iter_release() if self.guard.holds(m, now)}
            by_key = {(r.namespace, r.name): r for r in requests}
            promised = self.preempting.promises(groups, by_key, self.memory)  # room held for a preemption
            present = self.preempting.present(self.memory)  # read before planning: a victim gone now is gone for it
            decision = self._plan([r for r in requests if groups[(r.namespace, r.name)].uid not in held], now,
                                  promised)
            fenced = fence_requests(decision.verdicts, by_key, decision.excluded)  # topology: one domain, exclusive ones
            wakes.append(self.preempting.step(decision, groups, fenced, self.memory, present, self.reservations, now))
            held_now = self.preempting.promises(groups, by_key, self.memory)  # with a preemption started just now
            wakes.append(self.provisioning.step(decision, groups, fenced, self.memory, self.reservations, held_now,
                                                now))
            result, wake_at = self._apply_verdicts(decision, groups, {(r.namespace, r.name): r for r in requests},
                                                   now, survey.contexts)
            wakes.append(wake_at)
            self._observe_path(decision, started, result)
            with self._drop_lock:
                dropped, self._drop_reservations = self._drop_reservations, set()
            if dropped:
                self.reservations = tuple(r for r in self.reservations if r.pod_uid not in dropped)
            self.strays.missing(groups, members)
            self.strays.leftovers(groups, now)  # scheduler-plugins' CRD or controller left behind
            wakes.append(self._after_pass(groups, now))
        finally:
            self._wake(earliest(*wakes))
        self.metrics.pass_seconds.observe(self._monotonic() - started)
        return result

    def _observe_path(self, decision: Decision, started: float, result: PassResult) -> None:
        """The path from a group's last member to its release (``cogate_controller_arrival_to_release_seconds``,
        per group this pass freshly released, from ``Arrivals.settle``; ``released``: when its gates were sent)
        and, at debug level, where this pass's time went (monotonic seconds: ``started``, caches read,
        planned, verdicts applied now; ``_plan_span``: when planning started and ended)."""
        (read, planned), applied = self._plan_span, self._monotonic()
        fresh = [(v.namespace, v.name) for v in decision.verdicts
                 if Outcome(v.outcome) is Outcome.RELEASED and v.release]
        with self._arrivals_lock:
            arrived = self.arrivals.settle(fresh, started)
        for key, at in arrived.items():
            for step, t in (("pass_started", started), ("planned", planned),
                            ("released", result.ungated_at.get(key, applied))):
                self.metrics.arrival_to_release.labels(step).observe(max(0.0, t - at))
        log.debug("pass: %d groups, %d released (%d completed by an arrival): read %.0f ms, planned %.0f ms, "
                  "applied %.0f ms (%d status writes, %d gates removed)", len(decision.verdicts), len(fresh),
                  len(arrived), (read - started) * 1e3, (planned - read) * 1e3, (applied - planned) * 1e3,
                  result.status_writes, result.ungated)

    def _restore_reservations(self, requests: Sequence[GroupRequest], now: float) -> None:
        """Seed the reservations with those of released, unbound members (``inputs.restored_reservations``)."""
        self.restore_reservations = False
        have = {r.pod_uid for r in self.reservations}
        restored = [r for r in restored_reservations(requests, now, self.config.reservation_ttl_seconds)
                    if r.pod_uid not in have]
        if restored:
            log.info("restored %d reservations of released, unbound members", len(restored))
            self.reservations = tuple(self.reservations) + tuple(restored)

    def on_bound_pod_event(self, kind: str, old: PodInfo | None, new: PodInfo | None) -> None:
        """Bound-pods informer handler: the delta goes into the planning state (bound,
        non-terminal pods hold room; others are dropped)."""
        with self._planning_lock:
            assert self.planning is not None
            if new is not None and new.bound and not new.terminal:
                self.planning.upsert_pod(self.devices.bound_pod(new))
            elif new is not None or old is not None:
                self.planning.remove_pod((new or old).uid)  # type: ignore[union-attr]

    def on_nominated_pod_event(self, kind: str, old: PodInfo | None, new: PodInfo | None) -> None:
        """Nominated-pods informer handler: a nomination is room promised (``PlanningState.upsert_nominated``
        keeps it apart from the bound pods); one that went is forgotten (a bound record stays)."""
        with self._planning_lock:
            assert self.planning is not None
            if new is not None:
                self.planning.upsert_nominated(new)
            elif old is not None:
                self.planning.remove_nominated(old.uid)

    def on_node_event(self, kind: str, old: NodeInfo | None, new: NodeInfo | None) -> None:
        """Nodes informer handler: the delta goes into the planning state."""
        with self._planning_lock:
            assert self.planning is not None
            if new is not None:
                self.planning.upsert_node(self.devices.node(new))
            elif old is not None:
                self.planning.remove_node(old.name)

    def _plan(self, requests: Sequence[GroupRequest], now: float, promised: Sequence[Promise] = ()) -> Decision:
        """Plan the pass (on the planning state, or the scripted ``decide`` over the caches'
        nodes and bound pods); keeps its reservations for the next pass. ``promised``: room held
        for a preemption in flight (:meth:`Preempting.promises <cogate.controller.preemption.room.Preempting.promises>`)."""
        t0 = start = self._monotonic()
        if self.planning is not None:
            with self._planning_lock:
                decision = self.planning.decide(requests, self.reservations, now, self.config.planner_config,
                                                promised)
        else:
            assert self._decide is not None
            bound = [self.devices.bound_pod(p) for p in self.caches.bound.snapshot() if p.bound and not p.terminal]
            if self.caches.nominated is not None:  # room promised by nominations (unbound pods)
                bound += [p for p in self.caches.nominated.snapshot() if p is not None]
            nodes = self.devices.nodes(self.caches.nodes.snapshot())
            t0 = self._monotonic()
            extra = (promised,) if promised else ()
            decision = self._decide(nodes, bound, requests, self.reservations, now, self.config.planner_config,
                                    *extra)
        self._plan_span = (start, self._monotonic())  # for _observe_path
        self.metrics.decision_seconds.observe(self._plan_span[1] - t0)
        self.metrics.decisions.inc()
        self.reservations = tuple(decision.reservations)
        self.metrics.reservations.set(len(self.reservations))
        if self.planning is not None:
            self.metrics.nominated_pods.set(self.planning.nominated)
        return decision

    def _apply_verdicts(self, decision: Decision, groups: Mapping[tuple[str, str], GroupObject],
                        requests: Mapping[tuple[str, str], GroupRequest], now: float,
                        contexts: Mapping[tuple[str, str], Context] | None = None) -> tuple[PassResult, float | None]:
        """Apply each verdict (concurrently, one task per group); counts phases into the metrics.
        Returns the pass's result and the earliest ``wake_at`` the verdicts asked for."""
        result = PassResult(verdicts=list(decision.verdicts))
        quotas = self.caches.quotas.snapshot() if self.caches.quotas is not None else []
        futures = []
        # Verdicts with gates to remove first (a stable sort keeps the planner's order within each part): a
        # group released in this pass does not wait behind the status work of every other group (issue 40).
        for verdict in sorted(decision.verdicts, key=lambda v: not v.release):
            g = groups.get((verdict.namespace, verdict.name))
            if g is not None:
                verdict = quota_mod.explain_waiting(verdict, requests[g.key], quotas)
                verdict = self.devices.explain(verdict, requests[g.key])  # device pools mid-update named
                ctx = (contexts or {}).get(g.key) or Context()
                futures.append((g.key, self._groups_pool.submit(self._apply_verdict, g, requests[g.key], verdict, now,
                                                                ctx)))
        phases: Counter[str] = Counter()
        wake_at: float | None = None
        waits = []
        for key, f in futures:
            try:
                applied = f.result()
            except Exception:  # noqa: BLE001
                log.exception("applying the verdict of PodGroup %s/%s failed", *key, extra=log_extra(*key))
                continue
            phases[applied.phase] += 1
            waits.append(applied.wait)
            result.status_writes += applied.writes
            result.ungated += applied.ungated
            if applied.ungated:
                result.ungated_at[key] = applied.done
            wake_at = earliest(wake_at, applied.wake_at)
        for phase in PHASES:
            self.metrics.groups.labels(phase).set(phases.get(phase, 0))
        self.metrics.observe_waiting(waiting.summarize(waits))
        return result, wake_at

    def _after_pass(self, groups: Mapping[tuple[str, str], GroupObject], now: float) -> float | None:
        """Forget what is remembered of deleted groups; the ``wake_at`` (monotonic seconds) of the
        next timeout, reservation expiry or end of a refusal's back-off."""
        live_uids = {g.uid for g in groups.values()}
        self.events.forget(live_uids)
        self.memory.forget(live_uids)
        self.owners.forget(live_uids)
        self.relaying.forget(live_uids)
        deadlines = [r.expires for r in self.reservations if r.expires > now]
        retry = self.guard.next_retry(self.memory, now)
        if retry is not None:
            deadlines.append(retry)
        for g in groups.values():
            d = status_mod.timeout_deadline(g.pg, self.memory.recall(g.uid).status.binding)
            if d is not None and d > now:
                deadlines.append(d)
        return self._monotonic() + (min(deadlines) - now) + WAKE_MARGIN if deadlines else None

    def _drop(self, uids: Iterable[str]) -> None:
        """Drop the reservations of ``uids`` after this pass (their release did not happen)."""
        with self._drop_lock:
            self._drop_reservations.update(uids)

    # -- one verdict -------------------------------------------------------------
    def _apply_verdict(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float,
                       ctx: Context | None = None) -> Applied:
        """Check the release (planned nodes, dry run), status first, then gates (a restarted
        controller finishes a recorded release), then after-release duties and events."""
        ctx = ctx or Context()
        verdict = self.owners.explain(g, request, verdict, now)  # owners that cannot complete the group
        verdict = native.explain(verdict, self._native.get(g.key, ()))  # labelled pods native gang-schedules
        verdict = self.forcing.apply(g, request, verdict, now)  # the annotation cogate.dev/force-release
        memory = self.memory.recall(g.uid)
        checked = self.guard.check(g, verdict, memory.release, now)  # planned nodes again, back-off, dry run
        findings = self.aftercare.find(g, request, verdict, ctx, memory.release, checked.refused, now)
        new_status = self._new_status(g, request, verdict, checked.release, findings, memory, now)
        phase, wait = new_status.phase or "Pending", waiting.wait_of(new_status, now)
        body, later = self._status_body(g, new_status, checked.release, memory.status)
        if body is not None and not self.writer.write_status(*g.key, body):
            self._drop(checked.release)
            return Applied(phase, wake_at=checked.wake_at, wait=wait)  # never ungate before the decision is recorded
        if body is not None:
            memory.status.progress_written = self._monotonic()
        ungated, refused_at = self._ungate_and_announce(g, request, verdict, checked.release, memory.release, now)
        self.relaying.tell(g, request, new_status, now, self.owners.explained(g.uid),
                           self.owners.staged_owner(g.uid))  # its reason, where users look
        self.aftercare.act(g, request, findings, ctx, memory.release, phase, now)
        self._warn_mixed_priorities(g, request, now)
        self._warn_shared_replicas(g, request, now)
        self.aftercare.time_out(g, request.members, new_status, memory.release, now)
        return Applied(phase, int(body is not None), ungated, earliest(checked.wake_at, later, refused_at, findings.wake_at,
                                                                  self.owners.wake_at(g.uid),
                                                                  self.aftercare.retry_wake(memory.release, now)), wait,
                       self._monotonic())

    def _new_status(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, release: Mapping[str, str],
                    findings: lifecycle.Findings, memory: GroupMemory, now: float) -> PodGroupStatus:
        """``status.compute`` (the members seen ended go back into ``memory.status``) with the
        after-release conditions; a fresh release that releases nothing is not recorded as one."""
        nothing = Outcome(verdict.outcome) is Outcome.RELEASED and bool(verdict.release) and not release
        status_verdict = None if nothing else verdict
        kept = memory.status
        new_status, kept.ended, kept.binding = status_mod.compute_all(
            g.pg, request.members, status_verdict, now, self.config.gate_name, kept.ended, kept.binding,
            lost=bool(findings.lost))
        new_status = lifecycle.lifecycle_conditions(
            new_status, g.pg.status, g.pg, request.members, status_verdict.outcome if status_verdict else None,
            verdict.message, findings, now)
        new_status = self.forcing.conditions(new_status, g, status_verdict, now)
        new_status = self.preempting.conditions(new_status, g, memory.preemption, now)
        return self.aftercare.sizes.conditions(self.provisioning.conditions(new_status, g, memory.provisioning, now), g, now)

    def _status_body(self, g: GroupObject, new_status: PodGroupStatus, release: Mapping[str, str],
                     memory: StatusMemory) -> tuple[dict[str, Any] | None, float | None]:
        """The status merge patch to write now (``None``: nothing, or not yet) and ``wake_at``
        (monotonic seconds) of a numbers-only change held back (``writes.write_due``: it waits
        ``writes.PROGRESS_WRITE_SECONDS`` after it first appeared and after the group's last write;
        a release never waits)."""
        body = status_writes.status_patch(g.raw_status, new_status)
        now = self._monotonic()
        due = status_writes.write_due(g.raw_status, body, memory.progress_written, now,
                                      pending_since=memory.progress_pending, releasing=bool(release))
        if due is not None:  # numbers only ("5 of 8 members present"): the pass at ``due`` writes the latest
            if memory.progress_pending is None:
                memory.progress_pending = now
            return None, due + WAKE_MARGIN
        memory.progress_pending = None  # written now, or nothing to write
        return body, None
