"""The reconcile loop: informer caches -> ``planner.decide`` -> status, gate removal, events.

This module schedules and runs decision passes and applies their verdicts; the rules live
in pure modules (``planner``, ``status``, :mod:`~cogate.controller.patches`,
:mod:`~cogate.controller.notices`, :mod:`~cogate.controller.inputs` for the planner's input
from the caches, :mod:`~cogate.controller.wakeups` for when a pass is due and the back-off
of refused releases) and the API calls in :mod:`~cogate.controller.writer`.

:class:`Reconciler` runs one decision pass at a time (decisions are serialised,
docs/semantics.md) on its own thread:

1. snapshot the caches: PodGroups, labelled members; on the first pass of a process (or
   after gaining leadership) seed the reservations with ``inputs.restored_reservations``;
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
4. events on change (:class:`cogate.controller.events.Emitter`), metrics.

Gated pods that leave their group (label removed) have their gate removed before the
next pass, gated pods whose PodGroup does not exist are told so, and invalid objects are
reported as ``InvalidObject`` events on their PodGroup: :class:`cogate.controller.strays.Strays`.
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

from cogate.controller import lifecycle, notices, planner, refusers
from cogate.controller import quota as quota_mod
from cogate.controller import status as status_mod
from cogate.controller.config import ReconcilerConfig
from cogate.controller.events import Emitter, EventRecorder
from cogate.controller.informer import Caches
from cogate.controller.inputs import (
    GroupObject,
    build_group_requests,
    members_by_group,
    resolve_volumes,
    restored_reservations,
    timeout_victims,
)
from cogate.controller.memory import BUDGET_DELETED, BUDGET_FOREIGN, Budget, BudgetState, GroupMemory, Memories, Refusal
from cogate.controller.metrics import Metrics
from cogate.controller.notices import log_extra
from cogate.controller.patches import PLACEMENTS, pin_target
from cogate.controller.planner import Decision, GroupRequest, GroupVerdict, Outcome, PlannerConfig
from cogate.controller.planstate import PlanningState
from cogate.controller.records import NodeInfo, PodInfo, Reservation
from cogate.controller.strays import Strays
from cogate.controller.wakeups import Debouncer, refusal_backoff
from cogate.controller.writer import Writer
from cogate.models import PHASES, PodGroupStatus

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api, CustomObjectsApi

log = logging.getLogger(__name__)

#: ``decide(nodes, bound_pods, groups, reservations, now, config) -> Decision`` (``planner.decide``).
DecideFn = Callable[[Sequence[NodeInfo], Sequence[PodInfo], Sequence[GroupRequest], Sequence[Reservation], float,
                     PlannerConfig], Decision]


@dataclass
class PassResult:
    verdicts: list[GroupVerdict] = field(default_factory=list)
    status_writes: int = 0
    ungated: int = 0


#: Seconds a pinned node must stay unusable for its member before cogate acts (a member the
#: scheduler binds this instant may still look unbound in the member cache).
STUCK_GRACE_SECONDS = 3.0


@dataclass
class _Context:
    """What the pass found about one group before its verdict is applied."""

    stuck: list[lifecycle.Stuck] = field(default_factory=list)
    lost: list[lifecycle.Departure] = field(default_factory=list)


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
                 decide: DecideFn | None = None, policy: Any = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if config.placement not in PLACEMENTS:
            raise ValueError(f"placement: {config.placement!r} not in {PLACEMENTS}")
        if config.validate_releases not in refusers.VALIDATION_MODES:
            raise ValueError(f"validate_releases: {config.validate_releases!r} not in {refusers.VALIDATION_MODES}")
        self.caches = caches
        self.config = config
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
        self.events = Emitter(recorder)
        self._cond = threading.Condition()
        self.debouncer = Debouncer(config.debounce, config.resync, monotonic())
        #: What is remembered about each PodGroup between passes, by uid (memory.GroupMemory).
        self.memory = Memories()
        #: Whether this process leads (set by :meth:`run`); tests drive passes directly.
        self._leading: Callable[[], bool] = lambda: True
        self.strays = Strays(config.gate_name, caches.podgroups, self.writer, self.metrics, self.events, clock,
                             lambda: self._leading())
        self._groups_pool = concurrent.futures.ThreadPoolExecutor(max(1, config.workers // 2), "cogate-status")
        #: uid -> when its pinned node was first seen unusable (acted on after STUCK_GRACE_SECONDS).
        self._stuck_since: dict[str, float] = {}
        #: uids of stuck members already deleted or reported.
        self._stuck_acted: set[str] = set()
        #: Members of standing releases at the last pass (lifecycle.gang_members).
        self._gang: dict[str, tuple[PodInfo, tuple[str, str]]] = {}
        #: The last record of members the watch reported deleted since the last pass.
        self._departed: dict[str, PodInfo] = {}
        #: uids of members cogate deleted or evicted itself (not reported as lost).
        self._removed_by_us: set[str] = set()
        #: uids whose reservation a worker dropped during the pass (applied after it).
        self._drop_reservations: set[str] = set()
        self._drop_lock = threading.Lock()
        self.policy = policy
        #: (dry run needed, interceptors, known) last logged by :meth:`release_dry_run_needed`.
        self._dry_run_state: tuple[bool, tuple[str, ...], bool] | None = None
        self._dry_run_lock = threading.Lock()  # groups are applied concurrently

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
        if self.strays.pending:
            self.strays.release()
        groups = {g.key: g for g in self.caches.podgroups.snapshot()}
        labelled = resolve_volumes(
            self.caches.members.snapshot(),
            self.caches.claims.snapshot_map() if self.caches.claims is not None else None,
            self.caches.volumes.snapshot_map() if self.caches.volumes is not None else None)
        members = members_by_group(labelled)
        requests = build_group_requests(groups.values(), members, self.config.gate_name)
        if self.restore_reservations:
            self._restore_reservations(requests, now)
        contexts: dict[tuple[str, str], _Context] = {}
        self._find_stuck(requests, now, contexts)
        self._find_departures(requests, labelled, contexts)
        self.release_dry_run_needed()  # logs when what could refuse a release changes
        held = {uid for uid, m in self.memory.items()  # a refused fresh release backs off whole
                if (r := m.refusal) is not None and r.whole_group and r.until > now}
        decision = self._plan([r for r in requests if groups[(r.namespace, r.name)].uid not in held], now)
        result = self._apply_verdicts(decision, groups, {(r.namespace, r.name): r for r in requests}, now, contexts)
        with self._drop_lock:
            dropped, self._drop_reservations = self._drop_reservations, set()
        if dropped:
            self.reservations = tuple(r for r in self.reservations if r.pod_uid not in dropped)
        self.strays.missing(groups, members)
        self._after_pass(groups, now)
        self.metrics.pass_seconds.observe(self._monotonic() - started)
        return result

    # -- after the release: stuck pins, departures (docs/semantics.md "After the release") -------
    def _find_stuck(self, requests: Sequence[GroupRequest], now: float,
                    contexts: dict[tuple[str, str], _Context]) -> None:
        """Released members whose pinned node cannot take them any more (``lifecycle.stuck_members``),
        confirmed once seen for :data:`STUCK_GRACE_SECONDS`: their reservations are dropped and
        they go into the group's context (deleted or reported when the verdict is applied)."""
        bound = [p for p in self.caches.bound.snapshot() if p.bound and not p.terminal]
        found = lifecycle.stuck_members(self.caches.nodes.snapshot(), bound, requests)
        self._stuck_since = {u: self._stuck_since.get(u, now) for u in found}
        self._stuck_acted &= set(found)
        confirmed = {u: s for u, s in found.items() if now - self._stuck_since[u] >= STUCK_GRACE_SECONDS}
        pending = [self._stuck_since[u] + STUCK_GRACE_SECONDS for u in found if u not in confirmed]
        if pending:
            with self._cond:
                self.debouncer.wake_at(self._monotonic() + (min(pending) - now) + 0.01)
        if confirmed:
            self.reservations = tuple(r for r in self.reservations if r.pod_uid not in confirmed)
        for s in confirmed.values():
            contexts.setdefault((s.member.namespace, s.member.group or ""), _Context()).stuck.append(s)

    def _find_departures(self, requests: Sequence[GroupRequest], labelled: Sequence[PodInfo],
                         contexts: dict[tuple[str, str], _Context]) -> None:
        """Members of standing releases at the last pass that left since (``lifecycle.departures``)."""
        with self._cond:
            departed, self._departed = self._departed, {}
        current = {p.uid: p for p in labelled}
        lost = lifecycle.departures(self._gang, current, departed, ignore=self._removed_by_us)
        for d in lost:
            _, key = self._gang[d.member.uid]
            contexts.setdefault(key, _Context()).lost.append(d)
        self.metrics.members_lost.inc(len(lost))
        self._gang = lifecycle.gang_members(requests, self.config.gate_name)
        self._removed_by_us &= set(current)

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
                        requests: Mapping[tuple[str, str], GroupRequest], now: float,
                        contexts: Mapping[tuple[str, str], _Context] | None = None) -> PassResult:
        """Apply each verdict (concurrently, one task per group); counts phases into the metrics."""
        result = PassResult(verdicts=list(decision.verdicts))
        quotas = self.caches.quotas.snapshot() if self.caches.quotas is not None else []
        futures = []
        for verdict in decision.verdicts:
            g = groups.get((verdict.namespace, verdict.name))
            if g is not None:
                verdict = quota_mod.explain_waiting(verdict, requests[g.key], quotas)
                ctx = (contexts or {}).get(g.key) or _Context()
                futures.append((g.key, self._groups_pool.submit(self._apply_verdict, g, requests[g.key], verdict, now,
                                                                ctx)))
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

    def _after_pass(self, groups: Mapping[tuple[str, str], GroupObject], now: float) -> None:
        """Forget state of deleted groups; wake up at the next timeout or reservation expiry."""
        live_uids = {g.uid for g in groups.values()}
        self.events.forget(live_uids)
        self.memory.forget(live_uids)
        deadlines = [r.expires for r in self.reservations if r.expires > now]
        deadlines += [r.until for _, m in self.memory.items() if (r := m.refusal) is not None and r.until > now]
        for g in groups.values():
            d = status_mod.timeout_deadline(g.pg)
            if d is not None and d > now:
                deadlines.append(d)
        if deadlines:
            with self._cond:
                self.debouncer.wake_at(self._monotonic() + (min(deadlines) - now) + 0.01)

    # -- one verdict -------------------------------------------------------------
    def _apply_verdict(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float,
                       ctx: _Context | None = None) -> _Applied:
        """Check the release (planned nodes, dry run), status first, then gates (a restarted
        controller finishes a recorded release), then after-release duties and events."""
        ctx = ctx or _Context()
        outcome = Outcome(verdict.outcome)
        memory = self.memory.recall(g.uid)
        release: dict[str, str] = {}
        status_verdict: GroupVerdict | None = verdict
        refused = ""
        if outcome.releases and verdict.release:
            release, refused = self._checked_release(g, outcome, verdict, memory, now)
            if outcome is Outcome.RELEASED and not release:
                status_verdict = None  # nothing released: not recorded as a release
        elif outcome.waiting:
            memory.refusal = None  # the group waits for other reasons now
        standing = memory.refusal
        if release and not refused and standing is not None and (standing.whole_group or standing.uids <= set(release)):
            memory.refusal = None  # what was refused is released now
        if not refused and memory.refusal is not None:
            refused = memory.refusal.message  # while what it refused is not released yet
        findings = self._findings(g, request, verdict, ctx, memory, refused)
        new_status, memory.ended = status_mod.compute(g.pg, request.members, status_verdict, now,
                                                      self.config.gate_name, memory.ended)
        new_status = lifecycle.lifecycle_conditions(
            new_status, g.pg.status, g.pg, request.members, status_verdict.outcome if status_verdict else None,
            verdict.message, findings, now)
        phase = new_status.phase or "Pending"
        body = status_mod.status_patch(g.raw_status, new_status)
        if body is not None and not release and status_mod.progress_only(g.raw_status, body):
            due = memory.progress_written + status_mod.PROGRESS_WRITE_SECONDS
            if self._monotonic() < due:  # messages only ("5 of 8 members present"): later
                with self._cond:
                    self.debouncer.wake_at(due + 0.01)
                body = None
        if body is not None and not self.writer.write_status(*g.key, body):
            self._drop(release)
            return _Applied(phase)  # never ungate before the decision is recorded
        if body is not None:
            memory.progress_written = self._monotonic()
        writes = int(body is not None)
        if g.pg.spec.minResources:
            self.events.emit(g.ref, "minresources", notices.MIN_RESOURCES_NOT_USED, now)
        ungated = 0
        if outcome is Outcome.RELEASED and release:
            self._count_release(g, request, now)
        if release:
            ungated = self._release(g, outcome, verdict, release, memory, now)
        elif not outcome.releases:
            self._announce(g, outcome, verdict.message, now)
        if verdict.waiting:
            self.events.emit(g.ref, "waiting", notices.waiting_for_capacity(verdict.message), now)
        else:
            self.events.clear(g.uid, "waiting")
        self._after_release_duties(g, request, findings, ctx, memory, phase, now)
        self._warn_mixed_priorities(g, request, now)
        self._handle_timeout(g, request.members, new_status, memory, now)
        return _Applied(phase, writes, ungated)

    def _findings(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, ctx: _Context,
                  memory: GroupMemory, refused: str) -> lifecycle.Findings:
        """The after-release findings of one group for its conditions; acts on the opt-in quorum policy."""
        delete, report = lifecycle.split_stuck(ctx.stuck, self.config.recreate_stuck_members)
        quorum = ""
        if self.config.evict_below_quorum and lifecycle.fell_below_quorum(g.pg, request.members):
            token = g.pg.status.scheduleStartTime or ""
            if token not in memory.quorum_evicted:
                memory.quorum_evicted.add(token)
                if self.config.pod_disruption_budgets and self.policy is not None:
                    # The gang is broken: its budget would refuse these evictions (429). It is
                    # made again once the re-formed group reaches minMember.
                    self.writer.delete_pdb(self.policy, *g.key)
                    memory.budget = BUDGET_DELETED
                victims = timeout_victims(request.members, self.config.gate_name)
                for p in victims:
                    self._removed_by_us.add(p.uid)
                    self.writer.evict(p)
                placed = status_mod.count_members(g.pg, request.members).placed
                quorum = (f"fell below minMember {g.pg.spec.minMember} ({placed} placed) after reaching it: evicted "
                          f"{len(victims)} remaining members with a controller owner so the gang frees its room "
                          "and re-forms whole (--evict-below-quorum)")
        return lifecycle.Findings(
            stuck=lifecycle.stuck_message(delete, report) if ctx.stuck else "",
            refused=refused,
            lost=tuple(ctx.lost),
            runners=tuple(lifecycle.ungated_without_release(g.pg, request.members, self.config.gate_name)),
            quorum_evicted=quorum,
            waiting=verdict.waiting,
        )

    def _after_release_duties(self, g: GroupObject, request: GroupRequest, findings: lifecycle.Findings,
                              ctx: _Context, memory: GroupMemory, phase: str, now: float) -> None:
        """Delete stuck owned members (once each), events for what the findings say, the opt-in budget."""
        if ctx.stuck:
            delete, _ = lifecycle.split_stuck(ctx.stuck, self.config.recreate_stuck_members)
            for s in delete:
                if s.member.uid not in self._stuck_acted:
                    self._removed_by_us.add(s.member.uid)
                    self.writer.delete(s.member)
            self._stuck_acted.update(s.member.uid for s in ctx.stuck)
            self.events.emit(g.ref, "stuck", notices.planned_node_unusable(findings.stuck), now)
        else:
            self.events.clear(g.uid, "stuck")
        if findings.lost:
            self.events.record(g.ref, notices.member_lost(lifecycle.lost_message(findings.lost, g.pg, request.members)))
        if findings.runners:
            self.events.emit(g.ref, "runners", notices.ungated_without_release(lifecycle.runners_message(findings.runners)),
                        now)
        else:
            self.events.clear(g.uid, "runners")
        if findings.quorum_evicted:
            self.events.record(g.ref, notices.quorum_lost(findings.quorum_evicted))
        if self.config.pod_disruption_budgets and self.policy is not None:
            self._keep_budget(g, memory, phase, now)

    def _keep_budget(self, g: GroupObject, memory: GroupMemory, phase: str, now: float) -> None:
        """The opt-in PodDisruptionBudget (``lifecycle.pdb_action``), written only when it changes."""
        action = lifecycle.pdb_action(phase)
        state = memory.budget
        want = Budget.ensured(g.pg.spec.minMember)
        if action == "ensure" and state not in (want, BUDGET_FOREIGN):
            result = self.writer.ensure_pdb(self.policy, lifecycle.pdb_manifest(g.pg, g.uid))
            if result == "foreign":
                memory.budget = BUDGET_FOREIGN
                self.events.emit(g.ref, "pdb", notices.pdb_conflict(g.pg.metadata.name), now)
            elif result != "failed":
                memory.budget = want
        elif action == "keep" and state is not None and state.state is BudgetState.ENSURED and state != want:
            if self.writer.ensure_pdb(self.policy, lifecycle.pdb_manifest(g.pg, g.uid)) != "failed":
                memory.budget = want
        elif action == "delete" and state not in (BUDGET_DELETED, BUDGET_FOREIGN):
            if self.writer.delete_pdb(self.policy, *g.key) != "failed":
                memory.budget = BUDGET_DELETED

    # -- checking a release before any gate goes ------------------------------------------------
    def _checked_release(self, g: GroupObject, outcome: Outcome, verdict: GroupVerdict, memory: GroupMemory,
                         now: float) -> tuple[dict[str, str], str]:
        """The members to ungate now (uid -> pin target) and the text of a refusal ('' if none).

        1. Each planned node is checked again just before the patch (``planner.pinned_node_problems``
           on the current node and pod caches): a fresh release with a planned node that went bad
           meanwhile releases nothing (planned again at once); a new member of a released group
           is held this pass.
        2. Members whose release patch was refused recently wait for their back-off.
        3. When :meth:`release_dry_run_needed`, every release patch is sent as a dry run first: if the API
           server refuses one, a fresh release releases none, a released group holds the refused
           members; both back off (5 s doubling to 300 s) and report the member and the answer.
        """
        placement = self.config.placement
        release = {u: pin_target(self.caches.members.get(u), n, placement) for u, n in verdict.release.items()}
        problems = self._recheck_nodes(release)
        if problems:
            log.info("PodGroup %s/%s: planned nodes changed before the release (%s); planning again", *g.key,
                     "; ".join(sorted(set(problems.values()))), extra=log_extra(*g.key))
            if outcome is Outcome.RELEASED:
                self._drop(verdict.release)
                self.enqueue()
                return {}, ""
            self._drop(problems)
            release = {u: n for u, n in release.items() if u not in problems}
        standing = memory.refusal
        if standing is not None and standing.until > now and not standing.whole_group:
            self._drop({u: "" for u in standing.uids if u in release})
            release = {u: n for u, n in release.items() if u not in standing.uids}
        if not release or not self.release_dry_run_needed():
            return release, ""
        checks = self.writer.check_release(release)
        refused = {u for u, r in checks.items() if r == "refused"}
        if not refused:
            return release, ""
        self.metrics.release_refusals.labels("dry_run").inc(len(refused))
        whole = outcome is Outcome.RELEASED
        message = self._refused(g, refused, memory, released=0, whole_group=whole, now=now)
        if whole:
            self._drop(verdict.release)
            return {}, message
        self._drop({u: "" for u in refused})
        return {u: n for u, n in release.items() if u not in refused}, message

    def release_dry_run_needed(self) -> bool:
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

    def _refused(self, g: GroupObject, uids: set[str], memory: GroupMemory, *, released: int, whole_group: bool,
                 now: float) -> str:
        """Record a refusal of ``uids`` (back-off doubles per refusal in a row) and emit its event."""
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
        with self._cond:
            self.debouncer.wake_at(self._monotonic() + delay + 0.01)
        return notice.message

    def _recheck_nodes(self, release: Mapping[str, str]) -> dict[str, str]:
        """``{uid: reason}`` for members whose pin target fails ``planner.pinned_node_problems`` now."""
        pins = [(m, n) for u, n in release.items() if n and (m := self.caches.members.get(u)) is not None]
        if not pins:
            return {}
        wanted = {n for _, n in pins}
        nodes = [n for n in self.caches.nodes.snapshot() if n.name in wanted]
        bound = [p for p in self.caches.bound.snapshot() if p.node_name in wanted and p.bound and not p.terminal]
        return planner.pinned_node_problems(nodes, bound, pins)

    def _drop(self, uids: Iterable[str]) -> None:
        """Drop the reservations of ``uids`` after this pass (their release did not happen)."""
        with self._drop_lock:
            self._drop_reservations.update(uids)

    def _count_release(self, g: GroupObject, request: GroupRequest, now: float) -> None:
        self.metrics.releases.inc()
        self.events.clear(g.uid, "verdict")
        since = planner.complete_since(request)
        if since is not None:
            self.metrics.complete_to_release.observe(max(0.0, now - since))

    def _release(self, g: GroupObject, outcome: Outcome, verdict: GroupVerdict, release: Mapping[str, str],
                 memory: GroupMemory, now: float) -> int:
        """Ungate ``release`` (uid -> pin target); a ``Released`` event; members ungated. A patch the
        API server refuses now (after the dry run) is reported and backed off like a dry-run refusal."""
        placement = self.config.placement
        results = self.writer.ungate_members(release)
        removed = {u: n for u, n in release.items() if results.get(u) == "removed"}
        refused = {u for u, r in results.items() if r == "refused"}
        if refused:
            self.metrics.release_refusals.labels("patch").inc(len(refused))
            self._drop({u: "" for u in refused})
            self._refused(g, refused, memory, released=len(removed), whole_group=False, now=now)
        elif memory.refusal is not None and removed:
            memory.refusal = None
        if outcome is Outcome.RELEASED:
            notice = notices.released(release, placement)
            log.info("PodGroup %s/%s: %s (%s)", *g.key, notice.message, verdict.message, extra=log_extra(*g.key))
            self.events.emit(g.ref, "", notice, now)
        elif removed:
            self.events.emit(g.ref, "", notices.released(removed, placement, new=True), now)
        return len(removed)

    def _announce(self, g: GroupObject, outcome: Outcome, message: str, now: float) -> None:
        """The event of a held group's verdict (waiting, short of capacity, unschedulable)."""
        notice = notices.verdict_event(outcome, message)
        if notice is not None:
            self.events.emit(g.ref, "verdict", notice, now, key=notices.situation_key(notice.message))

    def _warn_mixed_priorities(self, g: GroupObject, request: GroupRequest, now: float) -> None:
        notice = notices.priority_event(request)
        if notice is not None:
            self.events.emit(g.ref, "priorities", notice, now)
        else:
            self.events.clear(g.uid, "priorities")

    def _handle_timeout(self, g: GroupObject, ms: Sequence[PodInfo], new_status: PodGroupStatus, memory: GroupMemory,
                        now: float) -> None:
        """A ``Timeout`` event while ``TimedOut=True``; with ``--evict-on-timeout`` evict once per release."""
        cond = new_status.condition(status_mod.CONDITION_TIMED_OUT)
        if cond is None or cond.status != "True":
            self.events.clear(g.uid, "timeout")
            return
        self.events.emit(g.ref, "timeout", notices.timed_out(cond.message), now)
        if not self.config.evict_on_timeout:
            return
        token = new_status.scheduleStartTime or ""
        if token in memory.timeout_evicted:
            return
        memory.timeout_evicted.add(token)
        victims = timeout_victims(ms, self.config.gate_name)
        for p in victims:
            self._removed_by_us.add(p.uid)  # not reported as lost members
            self.writer.evict(p)
        if victims:
            self.events.emit(g.ref, "evict", notices.evicted_after_timeout(len(victims)), now)

    # -- pods that left their group ------------------------------------------
    def on_member_event(self, kind: str, old: PodInfo | None, new: PodInfo | None) -> None:
        """Members informer handler: requests a pass, remembers the last state of a gang member the
        watch reported deleted (it says why it went: DisruptionTarget), and hands a gated member
        that left its group to :meth:`Strays.left <cogate.controller.strays.Strays.left>` (ungated
        before the next pass)."""
        if kind == "DELETED" and old is not None and old.uid in self._gang:
            with self._cond:
                self._departed[old.uid] = old
        self.strays.left(kind, old, new)
        self.enqueue()
