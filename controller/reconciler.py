"""The reconcile loop: informer caches -> ``planner.decide`` -> status, gate removal, events.

This module schedules and runs decision passes and applies their verdicts; the rules live
in pure modules (``planner``, ``status``, :mod:`~cogate.controller.patches`,
:mod:`~cogate.controller.notices`) and the API calls in :mod:`~cogate.controller.writer`.

Pure helpers here (unit-tested table-driven):

- :class:`Debouncer`: when the next pass is due (debounce, periodic resync, deadlines);
- :func:`group_object`, :func:`members_by_group`, :func:`build_group_requests`: the planner's
  input from the caches;
- :func:`restored_reservations`: the room of released members that were ungated (pinned) but
  are not bound yet, rebuilt from the cluster when a process starts deciding (start, or
  leadership gained), since reservations live in memory only;
- :func:`resolve_volumes`: members with their claims' and bound PVs' constraints filled in
  (:func:`cogate.controller.volumes.resolve`) from the PVC and PV informers;
- :func:`timeout_victims`: whom ``--evict-on-timeout`` evicts;
- :func:`waiting_for_pod_group`: gated pods whose PodGroup does not exist (an event says so).

:class:`Reconciler` runs one decision pass at a time (decisions are serialised,
docs/semantics.md) on its own thread:

1. snapshot the caches: PodGroups, labelled members; on the first pass of a process (or
   after gaining leadership) seed the reservations with :func:`restored_reservations`;
2. ``PlanningState.decide(groups, reservations, now, config)``
   (:mod:`~cogate.controller.planstate`: the nodes and bound non-terminal pods are fed to it
   from the informers' deltas, and only groups whose inputs changed are planned again; the
   same decision as ``planner.decide`` over the caches); keep the returned reservations for
   the next pass;
3. per verdict, in a thread pool: ``status.compute_status`` and, when ``status_patch``
   returns a body, a merge patch of the status subresource. For ``Released`` the
   status (phase Scheduling, scheduleStartTime) is written FIRST, so that a restarted
   controller finishes the release instead of re-deciding it; only after it succeeded
   are the gates removed, concurrently, one minimal JSON Patch per member
   (``AlreadyReleased`` verdicts ungate their new members the same way);
4. events on change (:class:`cogate.controller.events.EventDeduplicator`), metrics.

Gated pods that leave their group (label removed) have their gate removed before the
next pass (:meth:`Reconciler.release_orphans`); invalid objects are reported as
``InvalidObject`` events on their PodGroup.
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

from cogate import api
from cogate.controller import notices, planner
from cogate.controller import quota as quota_mod
from cogate.controller import status as status_mod
from cogate.controller import volumes as volumes_mod
from cogate.controller.events import EventDeduplicator, EventRecorder, ObjectRef
from cogate.controller.informer import Informer
from cogate.controller.metrics import Metrics
from cogate.controller.notices import Notice, log_extra
from cogate.controller.patches import PLACEMENTS, left_group, pin_target, pinned_node
from cogate.controller.planner import Decision, GroupRequest, GroupVerdict, Outcome, PlannerConfig
from cogate.controller.planstate import PlanningState
from cogate.controller.records import NodeInfo, PodInfo, Reservation
from cogate.controller.writer import Writer
from cogate.models import PHASES, PodGroup, PodGroupStatus, parse_time

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api, CustomObjectsApi

log = logging.getLogger(__name__)

#: ``decide(nodes, bound_pods, groups, reservations, now, config) -> Decision`` (``planner.decide``).
DecideFn = Callable[[Sequence[NodeInfo], Sequence[PodInfo], Sequence[GroupRequest], Sequence[Reservation], float,
                     PlannerConfig], Decision]


# --------------------------------------------------------------------------- pure: scheduling of passes


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


# --------------------------------------------------------------------------- pure: the planner's input


@dataclass(frozen=True)
class GroupObject:
    """A cached PodGroup: the validated model plus the raw status (for ``status_patch``)."""

    pg: PodGroup
    raw_status: Mapping[str, Any] | None
    uid: str
    resource_version: str = field(default="", compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.pg.metadata.namespace, self.pg.metadata.name)

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.pg.metadata.namespace, self.pg.metadata.name, self.uid)


def group_object(raw: dict[str, Any]) -> GroupObject:
    """Convert a PodGroup's API JSON; raises ``ValueError`` (pydantic ``ValidationError``) naming the field."""
    if not isinstance(raw, dict):
        raise ValueError("PodGroup: not an object")
    obj = dict(raw)
    obj.setdefault("apiVersion", api.API_VERSION)  # list items may omit them
    obj.setdefault("kind", api.KIND)
    pg = PodGroup.from_api(obj)
    status = raw.get("status")
    return GroupObject(pg, status if isinstance(status, dict) else None, pg.metadata.uid or "",
                       pg.metadata.resourceVersion or "")


def members_by_group(pods: Iterable[PodInfo]) -> dict[tuple[str, str], list[PodInfo]]:
    """Live members per (namespace, group): pods whose label names the group, not deleting (docs/semantics.md)."""
    out: dict[tuple[str, str], list[PodInfo]] = {}
    for p in pods:
        g = p.group
        if g and not p.deleting:
            out.setdefault((p.namespace, g), []).append(p)
    for ms in out.values():
        ms.sort(key=lambda p: (p.created, p.name))
    return out


def build_group_requests(groups: Iterable[GroupObject], members: Mapping[tuple[str, str], Sequence[PodInfo]],
                         gate: str = api.DEFAULT_GATE_NAME) -> list[GroupRequest]:
    """``planner.GroupRequest`` per cached PodGroup."""
    out = []
    for g in groups:
        pg = g.pg
        ms = tuple(members.get(g.key, ()))
        created = parse_time(pg.metadata.creationTimestamp) if pg.metadata.creationTimestamp else 0.0
        out.append(GroupRequest(namespace=pg.metadata.namespace, name=pg.metadata.name, min_member=pg.spec.minMember,
                                created=created, released=status_mod.release_stands(pg.status, ms, gate),
                                members=ms))
    return out


def restored_reservations(requests: Iterable[GroupRequest], now: float, ttl: float) -> list[Reservation]:
    """Reservations for released members the scheduler has not bound yet (rebuilt after a restart).

    A member counts when its group's release stands (``released``), it carries no scheduling
    gate at all (ours was removed; another gate means the scheduler is not on it yet), it is
    unbound, not terminal, not deleting and pinned to one node
    (:func:`cogate.controller.patches.pinned_node`). Each gets ``Reservation(expires=now + ttl)``
    on that node, as the release that ungated it would have made (docs/semantics.md
    Reservations: room of released, unbound members stays reserved until they bind, go, or a
    TTL passes). Members released with placement ``free`` carry no pin and cannot be restored.
    Times: epoch seconds.
    """
    out: list[Reservation] = []
    for r in requests:
        if not r.released:
            continue
        for m in r.members:
            if m.gates or m.bound or m.terminal or m.deleting:
                continue
            node = pinned_node(m)
            if node:
                out.append(Reservation(pod_uid=m.uid, namespace=m.namespace, name=m.name, node_name=node,
                                       requests=dict(m.requests), host_ports=m.host_ports, expires=now + ttl))
    return out


def waiting_for_pod_group(groups: Iterable[tuple[str, str]], members: Mapping[tuple[str, str], Sequence[PodInfo]],
                          gate: str) -> list[PodInfo]:
    """Gated, unbound members of ``(namespace, group)`` keys that have no PodGroup."""
    have = set(groups)
    return [p for key, ms in members.items() if key not in have for p in ms if p.gated_by(gate) and not p.bound]


def timeout_victims(members: Iterable[PodInfo], gate: str) -> list[PodInfo]:
    """Members the opt-in ``--evict-on-timeout`` policy evicts once a group timed out.

    Those with a controller owner (so it recreates them, gated again) that are not
    terminal and either hold room (bound) or can never move (released, unbound, and pinned
    to a node by :func:`cogate.controller.patches.pin_ops`: node affinity cannot change once the gate is gone, so a
    member whose planned node lost its room or went away would wait there for ever and the
    group could not form again). Gated members hold nothing and are left alone.
    """
    out = []
    for p in members:
        if p.terminal or not p.has_controller or p.deleting:
            continue
        if p.bound or (not p.gated_by(gate) and pinned_node(p) is not None):
            out.append(p)
    return out


def resolve_volumes(pods: Iterable[PodInfo], claims: Mapping[Any, Any] | None,
                    volumes: Mapping[Any, Any] | None) -> list[PodInfo]:
    """``pods`` with volume constraints resolved (:func:`cogate.controller.volumes.resolve`).

    ``claims``: ClaimInfo by (namespace, name); ``volumes``: VolumeInfo by name. Without the
    informers (``None``) the pods are returned unchanged: their claims stay unchecked."""
    if claims is None or volumes is None:
        return list(pods)
    return [volumes_mod.resolve(p, claims, volumes) if p.volume_claims else p for p in pods]


# --------------------------------------------------------------------------- shell


@dataclass
class ReconcilerConfig:
    gate_name: str = api.DEFAULT_GATE_NAME
    placement: str = "pinned"
    debounce: float = 0.05
    resync: float = 30.0
    evict_on_timeout: bool = False
    workers: int = 8
    max_patch_attempts: int = 6
    starvation_seconds: float = 300.0
    reservation_ttl_seconds: float = 60.0
    scheduler_names: frozenset[str] = frozenset({planner.DEFAULT_SCHEDULER})
    unchecked: str = "release"

    @property
    def planner_config(self) -> planner.PlannerConfig:
        """The planner's knobs, derived: one source for the gate name and the TTL."""
        return planner.PlannerConfig(gate_name=self.gate_name, starvation_seconds=self.starvation_seconds,
                                     reservation_ttl_seconds=self.reservation_ttl_seconds,
                                     scheduler_names=self.scheduler_names, unchecked=self.unchecked)


@dataclass
class Caches:
    """The informers a pass reads (records: GroupObject, PodInfo, PodInfo, NodeInfo)."""

    podgroups: Informer
    members: Informer
    bound: Informer
    nodes: Informer
    #: PersistentVolumeClaims (ClaimInfo by (namespace, name)) and PersistentVolumes (VolumeInfo by
    #: name); optional: without them members' claims stay unchecked.
    claims: Informer | None = None
    volumes: Informer | None = None
    #: ResourceQuotas (records: quota.QuotaInfo), to say when a quota refuses missing members.
    quotas: Informer | None = None

    def all(self) -> list[Informer]:
        return [i for i in (self.podgroups, self.members, self.bound, self.nodes, self.claims, self.volumes,
                            self.quotas) if i is not None]


@dataclass
class PassResult:
    verdicts: list[GroupVerdict] = field(default_factory=list)
    status_writes: int = 0
    ungated: int = 0


@dataclass(frozen=True)
class _Applied:
    """What applying one verdict did: the group's phase, status writes, members ungated."""

    phase: str
    writes: int = 0
    ungated: int = 0


class Reconciler:
    """Runs decision passes; see the module doc. ``core``/``custom`` are the client APIs
    (``CoreV1Api``, ``CustomObjectsApi``) or fakes with the same methods. Without ``decide``
    passes plan on a :class:`PlanningState` kept current by handlers on the bound-pods and
    nodes informers (registered here, seeded from their stores); a test may script ``decide``
    (``planner.decide``'s signature) instead, which then gets the caches' snapshots."""

    def __init__(self, core: CoreV1Api, custom: CustomObjectsApi, caches: Caches, config: ReconcilerConfig, *,
                 recorder: EventRecorder | None = None, metrics: Metrics | None = None,
                 decide: DecideFn | None = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if config.placement not in PLACEMENTS:
            raise ValueError(f"placement: {config.placement!r} not in {PLACEMENTS}")
        self.caches = caches
        self.config = config
        self.recorder = recorder
        self.metrics = metrics or Metrics()
        self.writer = Writer(core, custom, podgroups=caches.podgroups, members=caches.members,
                             gate=config.gate_name, attempts=config.max_patch_attempts, metrics=self.metrics,
                             workers=config.workers, sleep=sleep)
        self._decide = decide
        #: The incremental planner's state (None when ``decide`` is scripted); guarded by its lock.
        self.planning: PlanningState | None = None
        self._planning_lock = threading.Lock()
        if decide is None:
            self.planning = PlanningState()
            caches.bound.add_handler(self.on_bound_pod_event)
            caches.nodes.add_handler(self.on_node_event)
            for n in caches.nodes.snapshot():
                self.on_node_event("ADDED", None, n)
            for p in caches.bound.snapshot():
                self.on_bound_pod_event("ADDED", None, p)
        self._clock = clock
        self._monotonic = monotonic
        self.reservations: tuple[Reservation, ...] = ()
        #: Rebuild reservations from the cluster on the next pass (first pass, leadership gained).
        self.restore_reservations = True
        self.dedup = EventDeduplicator()
        self._cond = threading.Condition()
        self.debouncer = Debouncer(config.debounce, config.resync, monotonic())
        self._evicted: set[tuple[str, str]] = set()
        #: PodGroup uid -> members seen ended during its release (status.EndedMembers).
        self._ended: dict[str, status_mod.EndedMembers] = {}
        #: Whether this process leads (set by :meth:`run`); tests drive passes directly.
        self._leading: Callable[[], bool] = lambda: True
        #: uids of gated members already told that their PodGroup does not exist.
        self._missing_notified: set[str] = set()
        #: (namespace, name, uid, group) of gated members whose watch reported DELETED.
        self._orphan_checks: set[tuple[str, str, str, str]] = set()
        self._groups_pool = concurrent.futures.ThreadPoolExecutor(max(1, config.workers // 2), "cogate-status")

    # -- triggering ----------------------------------------------------------
    def enqueue(self, *_: object) -> None:
        """Informer handler: request a (debounced) pass."""
        with self._cond:
            self.debouncer.trigger(self._monotonic())
            self._cond.notify()

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
                with self._cond:
                    self.debouncer.wake_at(self._monotonic() + 1.0)

    def _wait_until_due(self) -> bool:
        """Wait (at most 1 s) for the next pass; True when it is due (and marked started)."""
        with self._cond:
            delay = self.debouncer.deadline() - self._monotonic()
            if delay > 0:
                self._cond.wait(min(delay, 1.0))
                return False
            self.debouncer.started(self._monotonic())
            return True

    def close(self) -> None:
        self._groups_pool.shutdown(wait=False, cancel_futures=True)
        self.writer.close()
        with self._cond:
            self._cond.notify_all()

    # -- a pass ----------------------------------------------------------------
    def reconcile_once(self) -> PassResult:
        started = self._monotonic()
        now = self._clock()
        if self._orphan_checks:
            self.release_orphans()
        groups = {g.key: g for g in self.caches.podgroups.snapshot()}
        members = members_by_group(resolve_volumes(
            self.caches.members.snapshot(),
            self.caches.claims.snapshot_map() if self.caches.claims is not None else None,
            self.caches.volumes.snapshot_map() if self.caches.volumes is not None else None))
        requests = build_group_requests(groups.values(), members, self.config.gate_name)
        if self.restore_reservations:
            self._restore_reservations(requests, now)
        decision = self._plan(requests, now)
        result = self._apply_verdicts(decision, groups, {(r.namespace, r.name): r for r in requests}, now)
        self._notify_missing_groups(groups, members)
        self._after_pass(groups, now)
        self.metrics.pass_seconds.observe(self._monotonic() - started)
        return result

    def _restore_reservations(self, requests: Sequence[GroupRequest], now: float) -> None:
        """Seed the reservations with those of released, unbound members (:func:`restored_reservations`)."""
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
                self.planning.upsert_pod(new)
            elif new is not None or old is not None:
                self.planning.remove_pod((new or old).uid)  # type: ignore[union-attr]

    def on_node_event(self, kind: str, old: NodeInfo | None, new: NodeInfo | None) -> None:
        """Nodes informer handler: the delta goes into the planning state."""
        with self._planning_lock:
            assert self.planning is not None
            if new is not None:
                self.planning.upsert_node(new)
            elif old is not None:
                self.planning.remove_node(old.name)

    def _plan(self, requests: Sequence[GroupRequest], now: float) -> Decision:
        """Plan the pass (on the planning state, or the scripted ``decide`` over the caches'
        nodes and bound pods); keeps its reservations for the next pass."""
        t0 = self._monotonic()
        if self.planning is not None:
            with self._planning_lock:
                decision = self.planning.decide(requests, self.reservations, now, self.config.planner_config)
        else:
            assert self._decide is not None
            bound = [p for p in self.caches.bound.snapshot() if p.bound and not p.terminal]
            nodes = self.caches.nodes.snapshot()
            t0 = self._monotonic()
            decision = self._decide(nodes, bound, requests, self.reservations, now, self.config.planner_config)
        self.metrics.decision_seconds.observe(self._monotonic() - t0)
        self.metrics.decisions.inc()
        self.reservations = tuple(decision.reservations)
        self.metrics.reservations.set(len(self.reservations))
        return decision

    def _apply_verdicts(self, decision: Decision, groups: Mapping[tuple[str, str], GroupObject],
                        requests: Mapping[tuple[str, str], GroupRequest], now: float) -> PassResult:
        """Apply each verdict (concurrently, one task per group); counts phases into the metrics."""
        result = PassResult(verdicts=list(decision.verdicts))
        quotas = self.caches.quotas.snapshot() if self.caches.quotas is not None else []
        futures = []
        for verdict in decision.verdicts:
            g = groups.get((verdict.namespace, verdict.name))
            if g is not None:
                verdict = quota_mod.explain_waiting(verdict, requests[g.key], quotas)
                futures.append((g.key, self._groups_pool.submit(self._apply_verdict, g, requests[g.key], verdict, now)))
        phases: Counter[str] = Counter()
        for key, f in futures:
            try:
                applied = f.result()
            except Exception:  # noqa: BLE001
                log.exception("applying the verdict of PodGroup %s/%s failed", *key, extra=log_extra(*key))
                continue
            phases[applied.phase] += 1
            result.status_writes += applied.writes
            result.ungated += applied.ungated
        for phase in PHASES:
            self.metrics.groups.labels(phase).set(phases.get(phase, 0))
        return result

    def _notify_missing_groups(self, groups: Mapping[tuple[str, str], GroupObject],
                               members: Mapping[tuple[str, str], Sequence[PodInfo]]) -> None:
        """Tell each gated member whose PodGroup does not exist, once (Normal ``PodGroupNotFound``
        on the pod): it waits for it, and a typo in the label would otherwise go unnoticed."""
        waiting = waiting_for_pod_group(groups.keys(), members, self.config.gate_name)
        for p in waiting:
            if p.uid not in self._missing_notified:
                self._record(_pod_ref(p.namespace, p.name, p.uid), notices.pod_group_not_found(p))
        self._missing_notified = {p.uid for p in waiting}

    def _after_pass(self, groups: Mapping[tuple[str, str], GroupObject], now: float) -> None:
        """Forget state of deleted groups; wake up at the next timeout or reservation expiry."""
        live_uids = {g.uid for g in groups.values()}
        for obj in self.dedup.objects() - live_uids:
            self.dedup.forget(obj)
        self._evicted = {e for e in self._evicted if e[0] in live_uids}
        for uid in set(self._ended) - live_uids:
            self._ended.pop(uid, None)
        deadlines = [r.expires for r in self.reservations if r.expires > now]
        for g in groups.values():
            d = status_mod.timeout_deadline(g.pg)
            if d is not None and d > now:
                deadlines.append(d)
        if deadlines:
            with self._cond:
                self.debouncer.wake_at(self._monotonic() + (min(deadlines) - now) + 0.01)

    # -- one verdict -------------------------------------------------------------
    def _apply_verdict(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float) -> _Applied:
        """Status first, then gates (a restarted controller finishes a recorded release), then events."""
        new_status, self._ended[g.uid] = status_mod.compute(g.pg, request.members, verdict, now,
                                                            self.config.gate_name, self._ended.get(g.uid))
        phase = new_status.phase or "Pending"
        body = status_mod.status_patch(g.raw_status, new_status)
        if body is not None and not self.writer.write_status(*g.key, body):
            return _Applied(phase)  # never ungate before the decision is recorded
        writes = int(body is not None)
        if g.pg.spec.minResources:
            self._event(g, "minresources", notices.MIN_RESOURCES_NOT_USED, now)
        outcome = Outcome(verdict.outcome)
        ungated = 0
        if outcome is Outcome.RELEASED:
            self._count_release(g, request, now)
        if outcome.releases and verdict.release:
            ungated = self._release(g, outcome, verdict, now)
        else:
            self._announce(g, outcome, verdict.message, now)
        self._warn_mixed_priorities(g, request, now)
        self._handle_timeout(g, request.members, new_status, now)
        return _Applied(phase, writes, ungated)

    def _count_release(self, g: GroupObject, request: GroupRequest, now: float) -> None:
        self.metrics.releases.inc()
        self.dedup.clear(g.uid, "verdict")
        since = planner.complete_since(request)
        if since is not None:
            self.metrics.complete_to_release.observe(max(0.0, now - since))

    def _release(self, g: GroupObject, outcome: Outcome, verdict: GroupVerdict, now: float) -> int:
        """Ungate the verdict's members (pinned per placement); a ``Released`` event; members ungated."""
        placement = self.config.placement
        release = {u: pin_target(self.caches.members.get(u), n, placement) for u, n in verdict.release.items()}
        results = self.writer.ungate_members(release)
        removed = {u: n for u, n in release.items() if results.get(u) == "removed"}
        if outcome is Outcome.RELEASED:
            notice = notices.released(release, placement)
            log.info("PodGroup %s/%s: %s (%s)", *g.key, notice.message, verdict.message, extra=log_extra(*g.key))
            self._event(g, "", notice, now)
        elif removed:
            self._event(g, "", notices.released(removed, placement, new=True), now)
        return len(removed)

    def _announce(self, g: GroupObject, outcome: Outcome, message: str, now: float) -> None:
        """The event of a held group's verdict (waiting, short of capacity, unschedulable)."""
        notice = notices.verdict_event(outcome, message)
        if notice is not None:
            self._event(g, "verdict", notice, now, key=notices.situation_key(notice.message))

    def _warn_mixed_priorities(self, g: GroupObject, request: GroupRequest, now: float) -> None:
        notice = notices.priority_event(request)
        if notice is not None:
            self._event(g, "priorities", notice, now)
        else:
            self.dedup.clear(g.uid, "priorities")

    def _handle_timeout(self, g: GroupObject, ms: Sequence[PodInfo], new_status: PodGroupStatus, now: float) -> None:
        """A ``Timeout`` event while ``TimedOut=True``; with ``--evict-on-timeout`` evict once per release."""
        cond = new_status.condition(status_mod.CONDITION_TIMED_OUT)
        if cond is None or cond.status != "True":
            self.dedup.clear(g.uid, "timeout")
            return
        self._event(g, "timeout", notices.timed_out(cond.message), now)
        if not self.config.evict_on_timeout:
            return
        token = (g.uid, new_status.scheduleStartTime or "")
        if token in self._evicted:
            return
        self._evicted.add(token)
        victims = timeout_victims(ms, self.config.gate_name)
        for p in victims:
            self.writer.evict(p)
        if victims:
            self._event(g, "evict", notices.evicted_after_timeout(len(victims)), now)

    # -- events ------------------------------------------------------------------
    def _event(self, g: GroupObject, slot: str, notice: Notice, now: float, key: str | None = None) -> None:
        """Record ``notice`` on ``g``; with a ``slot`` only when it is news (:class:`EventDeduplicator`;
        ``key``: the situation, :func:`cogate.controller.notices.situation_key`), else always."""
        if self.recorder is None:
            return
        if not slot or self.dedup.should_emit(g.uid, slot, notice.reason, notice.message, now, key):
            self._record(g.ref, notice)

    def _record(self, ref: ObjectRef, notice: Notice) -> None:
        if self.recorder is not None:
            self.recorder.record(ref, notice.type, notice.reason, notice.message)

    # -- pods that left their group ------------------------------------------
    def on_member_event(self, kind: str, old: PodInfo | None, new: PodInfo | None) -> None:
        """Members informer handler: requests a pass, and remembers gated members that vanish.

        A label-selector watch reports a pod whose group label was removed as DELETED, exactly
        like a deleted pod. Such a pod would keep cogate's gate for ever (no PodGroup names it
        any more), so the next pass reads it back and, if it still exists without the label,
        removes the gate: it is scheduled as a plain pod (:meth:`release_orphans`).
        """
        # A pod still watched but whose label value became empty names no group either.
        gone = old if kind == "DELETED" else (new if new is not None and not new.group else None)
        # Only the leader acts (its informer sees the same event); followers would only pile these up.
        if gone is not None and not gone.bound and gone.gated_by(self.config.gate_name) and self._leading():
            with self._cond:
                self._orphan_checks.add((gone.namespace, gone.name, gone.uid, (old or gone).group or ""))
        self.enqueue()

    def release_orphans(self) -> dict[str, str]:
        """Remove the gate from pods that left their group while gated; ``{uid: result}``."""
        with self._cond:
            checks, self._orphan_checks = self._orphan_checks, set()
        out: dict[str, str] = {}
        for ns, name, uid, group in checks:
            out[uid] = self.writer.ungate(ns, name, uid, "", only_if=left_group, group=group)
            if out[uid] == "removed":
                log.info("pod %s/%s left PodGroup %s while gated: gate removed", ns, name, group,
                         extra=log_extra(ns, group))
                self.metrics.gate_removals.labels("left_group").inc()
                self._record(_pod_ref(ns, name, uid), notices.left_pod_group(group))
        return out

    # -- invalid objects -------------------------------------------------------
    def on_invalid_member(self, raw: dict[str, Any], exc: Exception) -> None:
        """Informer callback: a labelled pod failed conversion -> Warning InvalidObject on its PodGroup."""
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        group = labels.get(api.POD_GROUP_LABEL)
        ns = str(meta.get("namespace") or "")
        if not group or self.recorder is None:
            return
        g = self.caches.podgroups.get((ns, group))
        ref = g.ref if g is not None else ObjectRef(ns, str(group))
        notice = notices.invalid_member(meta.get("name", "?"), exc)
        if self.dedup.should_emit(ref.uid or ref.name, ("invalid", meta.get("uid")), notice.reason, notice.message,
                                  self._clock()):
            self._record(ref, notice)

    def on_invalid_podgroup(self, raw: dict[str, Any], exc: Exception) -> None:
        """Informer callback: a PodGroup failed validation -> Warning InvalidObject on it."""
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        if self.recorder is None or not meta.get("name"):
            return
        ref = ObjectRef(str(meta.get("namespace") or ""), str(meta["name"]), str(meta.get("uid") or ""))
        notice = notices.invalid_podgroup(exc)
        if self.dedup.should_emit(ref.uid or ref.name, "invalid-podgroup", notice.reason, notice.message,
                                  self._clock()):
            self._record(ref, notice)


def _pod_ref(namespace: str, name: str, uid: str) -> ObjectRef:
    return ObjectRef(namespace, name, uid, kind="Pod", api_version="v1")
