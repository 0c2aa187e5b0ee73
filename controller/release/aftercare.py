"""The after-release duties: stuck pins, departures, quorum loss, timeouts, the opt-in budget.

The rules are pure (:mod:`cogate.controller.status.lifecycle`, docs/semantics.md "After the
release"); this room finds what they apply to and acts on it. Verbs:

- :meth:`Aftercare.departed` (members informer event): the last state of a gang member the
  watch reported deleted (it says why it went: ``DisruptionTarget``);
- :meth:`Aftercare.survey` (once a pass, before planning): released members whose pinned node
  cannot take them any more, confirmed after :data:`STUCK_GRACE_SECONDS` (at their deadline when
  the node is only not Ready, ``notready.deadline``: as long as Kubernetes keeps bound pods on such
  a node, 300 s by default, from when it stopped being Ready), the members that wait for a node
  that is not Ready meanwhile (``notready.waits``), and members of
  standing releases that left since the last pass, as a :class:`Context` per group;
- :meth:`Aftercare.find` (per group, before its status is computed): the
  ``lifecycle.Findings`` its conditions say; carries out the opt-in ``--evict-below-quorum``
  eviction, which the ``Disrupted`` condition reports; the recovery deadline's step
  (:func:`cogate.controller.model.recovery.step`), recorded in the ``Recovery`` condition;
- :meth:`Aftercare.act` (per group, after its status is written and its gates removed): delete
  stuck owned members (once each), the events of the findings (``NodeNotReady`` once per set of
  nodes waited for), the opt-in PodDisruptionBudget,
  a recovery round's evictions (once the status that records the round is written);
- :meth:`Aftercare.time_out` (per group, last): a ``Timeout`` event while ``TimedOut=True``
  and, with ``--evict-on-timeout``, the eviction, once per release.

Handed the config, the caches, the writer, the metrics, the event emitter, the monotonic clock
and the ``PolicyV1Api`` (budgets); what it remembers per group is in the group's
:class:`cogate.controller.release.memory.ReleaseMemory` (budget, eviction tokens), per member here
(when a pin was first seen unusable, what was acted on, the gang of the last pass). Only
:meth:`survey` wants a pass of its own (``wake_at``, monotonic seconds): at the end of a grace.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cogate.controller.model import recovery
from cogate.controller.status import lifecycle, notices, notready
from cogate.controller.status import status as status_mod
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.devices.room import Devices
from cogate.controller.kube.events import Emitter
from cogate.controller.kube.informer import Caches
from cogate.controller.status.inputs import GroupObject, timeout_victims
from cogate.controller.kube.metrics import Metrics
from cogate.controller.release.sizing import OwnerSizes, operator_reader
from cogate.controller.release.memory import BUDGET_DELETED, BUDGET_FOREIGN, Budget, BudgetState, ReleaseMemory
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, min_member_of
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.model.wakeups import WAKE_MARGIN
from cogate.controller.kube.writer import Writer, WriteResult
from cogate.models import PodGroupStatus

#: Seconds a pinned node must stay unusable for its member before cogate acts (a member the
#: scheduler binds this instant may still look unbound in the member cache); a node that is only
#: not Ready keeps its members longer (``lifecycle.Stuck.wait``).
STUCK_GRACE_SECONDS = 3.0
#: Seconds before a recovery round's failed evictions are tried again (a PodDisruptionBudget that
#: refuses, API Priority and Fairness under load); ``kubectl drain`` retries a refused eviction every 5 s.
RETRY_EVICTION_SECONDS = 5.0

log = logging.getLogger(__name__)


@dataclass
class Context:
    """What the pass found about one group before its verdict is applied."""

    stuck: list[lifecycle.Stuck] = field(default_factory=list)
    lost: list[lifecycle.Departure] = field(default_factory=list)
    #: Members waiting for nodes that are not Ready, by node (``notready.waits``).
    waits: tuple[notready.NodeWait, ...] = ()


@dataclass(frozen=True)
class Survey:
    """What :meth:`Aftercare.survey` found: a :class:`Context` per (namespace, group), the uids
    of confirmed stuck members (their reservations go now), and ``wake_at`` (monotonic seconds:
    just after the earliest grace that has not passed yet; ``None``: none)."""

    contexts: dict[tuple[str, str], Context]
    unreserve: frozenset[str] = frozenset()
    wake_at: float | None = None


class Aftercare:
    """Acts on what follows a release; see the module doc."""

    def __init__(self, config: ReconcilerConfig, caches: Caches, writer: Writer, metrics: Metrics, events: Emitter,
                 monotonic: Callable[[], float], policy: Any = None, devices: Devices | None = None) -> None:
        self.config = config
        self.caches = caches
        #: DRA devices as the planner counted them (a node's devices are room like its CPU).
        self.devices = devices
        self.writer = writer
        self.metrics = metrics
        self.events = events
        self.policy = policy
        self._monotonic = monotonic
        #: uid -> when its pinned node was first seen unusable (acted on after STUCK_GRACE_SECONDS).
        self._stuck_since: dict[str, float] = {}
        #: uids of stuck members already deleted or reported.
        self._stuck_acted: set[str] = set()
        #: node name -> when first seen not Ready with a member waiting for it (epoch seconds; the start
        #: of its deadline when the node gives no time of its own: ``notready.start``).
        self._not_ready_seen: dict[str, float] = {}
        #: Members of standing releases at the last pass (lifecycle.gang_members), and those its
        #: releases ungated (:meth:`released`).
        self._gang: dict[str, tuple[PodInfo, tuple[str, str]]] = {}
        self._gang_lock = threading.Lock()  # the pass's group workers add, the informer thread reads
        #: The last record of members the watch reported deleted since the last pass.
        self._departed: dict[str, PodInfo] = {}
        self._departed_lock = threading.Lock()  # the informer thread adds, the pass takes
        #: uids of members cogate deleted or evicted itself (not reported as lost).
        self._removed_by_us: set[str] = set()
        #: uids of those whose deletion or eviction went through, while the watch still shows them
        #: (:meth:`mark_going`).
        self._going: set[str] = set()
        #: Operators' size against their gang (RayCluster, MPIJob, PyTorchJob: ``sizing.OwnerSizes``,
        #: the reconciler calls its ``adjust`` before planning and its ``conditions`` with the others).
        self.sizes = OwnerSizes(operator_reader(getattr(writer.core, "api_client", None)), events, metrics,
                                monotonic)

    def departed(self, pod: PodInfo) -> None:
        """The watch reported ``pod`` deleted: keep its last state if it was in a gang."""
        if pod.uid in self._gang:
            with self._departed_lock:
                self._departed[pod.uid] = pod

    def released(self, key: tuple[str, str], members: Sequence[PodInfo]) -> None:
        """A release of this pass ungated ``members`` of group ``key`` (namespace, name): they are
        in its gang from now on, so the next pass reports them should they leave before it (bound
        and preempted, deleted): the gang of the pass was taken before its releases, with them
        gated. Called from the pass's group workers."""
        # workers of one pass add at once; the informer thread's ``in`` needs no lock, and
        # :meth:`survey`, which iterates it, runs before the pass's workers start
        with self._gang_lock:
            self._gang.update((m.uid, (m, key)) for m in members)

    def mark_going(self, pods: Sequence[PodInfo]) -> Sequence[PodInfo]:
        """``pods`` (the members' watch) with those cogate evicted or deleted itself, and that the API
        server took, marked ``deleting``: no longer members, whatever the watch says yet. Why: the
        watch of the members and that of the bound pods are two streams; under load the room may
        already be free of an evicted member (its node empty) while the members' watch still shows it
        bound, and the gang would count it placed and release its replacements into the room its
        eviction freed (seen in CI: a recovery round's survivors, evicted, counted again).
        An eviction that failed is not marked: that member still holds its place."""
        if not self._going:
            return pods  # usually: no copy on the pass's path
        return [dataclasses.replace(p, deleting=True) if p.uid in self._going and not p.deleting else p for p in pods]

    # -- once a pass -----------------------------------------------------------------------------
    def survey(self, requests: Sequence[GroupRequest], labelled: Sequence[PodInfo], now: float) -> Survey:
        """Stuck members (``lifecycle.stuck_members``, confirmed once seen for :data:`STUCK_GRACE_SECONDS`)
        and departures (``lifecycle.departures``) of this pass; ``now``: epoch seconds."""
        contexts: dict[tuple[str, str], Context] = {}
        bound = [p for p in self.caches.bound.snapshot() if p.bound and not p.terminal]
        nodes = self.caches.nodes.snapshot()
        if self.devices is not None:
            nodes, bound = self.devices.nodes(nodes), self.devices.bound_pods(bound)
        found = lifecycle.stuck_members(nodes, bound, requests)
        down = {n.name: n for n in nodes if not n.ready or n.taints and lifecycle.not_ready(n)}  # usually none
        self._stuck_since = {u: self._stuck_since.get(u, now) for u in found}
        self._stuck_acted &= set(found)
        due = {u: self._stuck_since[u] + STUCK_GRACE_SECONDS if s.wait <= 0 or s.node not in down
               else max(self._stuck_since[u] + STUCK_GRACE_SECONDS,
                        notready.deadline(down[s.node], s.wait, self._not_ready_seen, now))
               for u, s in found.items()}
        confirmed = {u: s for u, s in found.items() if now >= due[u]}
        pending = [due[u] for u in found if u not in confirmed and due[u] != math.inf]
        wake_at = self._monotonic() + (min(pending) - now) + WAKE_MARGIN if pending else None
        for s in confirmed.values():
            contexts.setdefault((s.member.namespace, s.member.group or ""), Context()).stuck.append(s)
        self._waits(requests, down, found, contexts, now)

        with self._departed_lock:
            departed, self._departed = self._departed, {}
        current = {p.uid: p for p in labelled}
        lost = lifecycle.departures(self._gang, current, departed, ignore=self._removed_by_us)
        for d in lost:
            _, key = self._gang[d.member.uid]
            contexts.setdefault(key, Context()).lost.append(d)
        self.metrics.members_lost.inc(len(lost))
        with self._gang_lock:
            self._gang = lifecycle.gang_members(requests, self.config.gate_name)
        self._removed_by_us &= set(current)
        self._going &= set(current)
        return Survey(contexts, frozenset(confirmed), wake_at)

    def _waits(self, requests: Sequence[GroupRequest], down: dict[str, NodeInfo], found: dict[str, lifecycle.Stuck],
               contexts: dict[tuple[str, str], Context], now: float) -> None:
        """Put the members of each standing release that wait for a node that is not Ready (``down``:
        those nodes by name) into its :class:`Context`; log a group's wait once when it starts."""
        seen: dict[str, float] = {}
        for r in requests if down else ():
            waits = notready.waits(r.members, down, found, self._not_ready_seen, now) if r.released else ()
            if not waits:
                continue
            contexts.setdefault((r.namespace, r.name), Context()).waits = waits
            if any(w.node not in self._not_ready_seen for w in waits):
                log.info("PodGroup %s/%s: %s", r.namespace, r.name, notready.message(waits, now),
                         extra=notices.log_extra(r.namespace, r.name))
            seen.update((w.node, self._not_ready_seen.get(w.node, now)) for w in waits)
        for s in found.values():  # pinned members past their deadline: their node's start holds until they go
            if s.node in down and s.node in self._not_ready_seen:
                seen.setdefault(s.node, self._not_ready_seen[s.node])
        self._not_ready_seen = seen

    # -- per group ---------------------------------------------------------------------------------
    def find(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, ctx: Context, memory: ReleaseMemory,
             refused: str, now: float) -> lifecycle.Findings:
        """The after-release findings of one group for its conditions (``refused``: the release
        guard's text; ``now``: epoch seconds); acts on the opt-in quorum policy (once per release)."""
        delete, report = lifecycle.split_stuck(ctx.stuck, self.config.recreate_stuck_members)
        quorum = ""
        if self.config.evict_below_quorum and lifecycle.fell_below_quorum(g.pg, request.members):
            token = g.pg.status.scheduleStartTime or ""
            if token not in memory.quorum_evicted:
                memory.quorum_evicted.add(token)
                if self.config.pod_disruption_budgets and self.policy is not None:
                    # The gang is broken: its budget would refuse these evictions (429). It is
                    # made again once the re-formed group reaches minMember.
                    self.writer.objects.delete_pdb(self.policy, *g.key)
                    memory.budget = BUDGET_DELETED
                victims = timeout_victims(request.members, self.config.gate_name)
                evicted, failed = self._evict(victims)
                placed = status_mod.count_members(g.pg, request.members).placed
                quorum = (f"fell below minMember {request.min_member} ({placed} placed) after reaching it: evicted "
                          f"{evicted} remaining members with a controller owner so the gang frees its room "
                          f"and re-forms whole (--evict-below-quorum){notices.failed_evictions(len(failed))}")
        step = self._recovery(g, request, memory, now)
        return lifecycle.Findings(
            recovery=step, wake_at=self._wake_at(step, now),
            stuck=lifecycle.stuck_message(delete, report) if ctx.stuck else "",
            not_ready=notready.message(ctx.waits, now),
            refused=refused,
            lost=tuple(ctx.lost),
            runners=tuple(lifecycle.ungated_without_release(g.pg, request.members, self.config.gate_name)),
            quorum_evicted=quorum,
            waiting=verdict.waiting,
        )

    def _recovery(self, g: GroupObject, request: GroupRequest, memory: ReleaseMemory,
                  now: float) -> recovery.Step | None:
        """The recovery deadline's step of this pass (``None`` without a deadline and no record):
        from the record in the written ``Recovery`` condition, or this process's newer one."""
        policy = recovery.policy_of(g.pg.metadata.annotations)
        written = recovery.record_of(g.pg.status.condition(lifecycle.cond_mod.CONDITION_RECOVERY))
        record = _newer(written, memory.recovery)
        if policy.deadline is None and record is None:
            return None
        return recovery.step(policy, record, below=lifecycle.below_quorum(g.pg, request.members), now=now)

    def _wake_at(self, step: recovery.Step | None, now: float) -> float | None:
        """Monotonic seconds of the pass the recovery wants (its next round or failure), ``None``: none."""
        due = step.due if step is not None else None
        return None if due is None else self._monotonic() + max(0.0, due - now) + WAKE_MARGIN

    def retry_wake(self, memory: ReleaseMemory, now: float) -> float | None:
        """Monotonic seconds of the pass that tries a recovery round's failed evictions again
        (after :meth:`act`; ``now``: epoch seconds), ``None``: none failed."""
        if not memory.recovery_retry:
            return None
        return self._monotonic() + max(0.0, memory.recovery_retry_at - now) + WAKE_MARGIN

    def act(self, g: GroupObject, request: GroupRequest, findings: lifecycle.Findings, ctx: Context,
            memory: ReleaseMemory, phase: str, now: float) -> None:
        """Delete stuck owned members (once each), events for what the findings say, the opt-in
        budget of a group now in ``phase``; ``now``: epoch seconds."""
        if ctx.stuck:
            delete, _ = lifecycle.split_stuck(ctx.stuck, self.config.recreate_stuck_members)
            for s in delete:
                if s.member.uid not in self._stuck_acted:
                    self._removed_by_us.add(s.member.uid)
                    if self.writer.delete(s.member) != WriteResult.FAILED:
                        self._going.add(s.member.uid)
            self._stuck_acted.update(s.member.uid for s in ctx.stuck)
            self.events.emit(g.ref, "stuck", notices.planned_node_unusable(findings.stuck), now)
        else:
            self.events.clear(g.uid, "stuck")
        if ctx.waits:  # once when it starts (or another node is waited for), not each pass
            self.events.emit(g.ref, "notready", notices.node_not_ready(findings.not_ready), now,
                             key=notready.situation(ctx.waits))
        else:
            self.events.clear(g.uid, "notready")
        if findings.lost:
            self.events.record(g.ref, notices.member_lost(lifecycle.lost_message(findings.lost, g.pg,
                                                                                 request.members)))
        if findings.runners:
            self.events.emit(g.ref, "runners",
                             notices.ungated_without_release(lifecycle.runners_message(findings.runners)), now,
                             key=",".join(sorted(m.name for m in findings.runners)))  # a new member is news
        else:
            self.events.clear(g.uid, "runners")
        if findings.quorum_evicted:
            self.events.record(g.ref, notices.quorum_lost(findings.quorum_evicted))
        if self.config.pod_disruption_budgets and self.policy is not None:
            self._keep_budget(g, memory, phase, now)
        self._recover(g, request, findings.recovery, memory, now)

    def _recover(self, g: GroupObject, request: GroupRequest, step: recovery.Step | None, memory: ReleaseMemory,
                 now: float) -> None:
        """After the status that records ``step`` is written: a round's evictions (once: the record
        says the round is done), the events, the policy's problems reported."""
        policy = recovery.policy_of(g.pg.metadata.annotations)
        if policy.problems:
            self.events.emit(g.ref, "recovery-policy", notices.invalid_recovery_policy(policy.problems), now,
                             key=";".join(policy.problems))
        else:
            self.events.clear(g.uid, "recovery-policy")
        if step is None:
            memory.recovery = None
            memory.recovery_evicted.clear()
            memory.recovery_retry.clear()
            return
        memory.recovery = step.record
        # kept while the member exists or the watch still shows it (:meth:`mark_going`)
        memory.recovery_evicted &= {m.uid for m in request.members} | self._going
        if step.action is recovery.Action.EVICT and step.record is not None:
            if self.config.pod_disruption_budgets and self.policy is not None and memory.budget != BUDGET_FOREIGN:
                # cogate's own budget (minAvailable = minMember) would refuse every eviction of a
                # gang below minMember; it is made again once the group reaches minMember.
                self.writer.objects.delete_pdb(self.policy, *g.key)
                memory.budget = BUDGET_DELETED
            victims = timeout_victims(request.members, self.config.gate_name)
            going = len(memory.recovery_evicted & self._going)  # evicted before, still shown by the watch
            memory.recovery_retry = set()
            evicted, failed = self._evict_round(memory, victims, now)  # those evicted before are not members
            self.metrics.recovery_rounds.labels("evicted").inc()
            self.events.record(g.ref, notices.recovery_evicted(evicted, step.record.rounds, policy.limit,
                                                               step.message, failed=failed, going=going))
        elif step.action is recovery.Action.NONE and memory.recovery_retry and now >= memory.recovery_retry_at:
            # Evictions of this round that failed (the API server busy, a budget in the way): tried
            # again every RETRY_EVICTION_SECONDS while the member is still a victim, until the round's next step.
            again = [p for p in timeout_victims(request.members, self.config.gate_name) if p.uid in memory.recovery_retry]
            memory.recovery_retry = set()
            evicted, failed = self._evict_round(memory, again, now)
            if evicted and step.record is not None:
                self.events.record(g.ref, notices.recovery_evicted_again(evicted, failed, step.record.rounds,
                                                                         policy.limit))
        elif step.action is recovery.Action.FAIL:
            memory.recovery_retry = set()
            self.metrics.recovery_rounds.labels("failed").inc()
            self.events.record(g.ref, notices.recovery_failed(step.message))

    def _evict(self, victims: Sequence[PodInfo]) -> tuple[int, list[PodInfo]]:
        """Evict ``victims`` (Eviction API, uid precondition); returns how many went through and those
        whose eviction failed (the API server refused it or did not answer; already gone counts as
        neither). Evicted members are not reported as lost (the policy's own event tells)."""
        evicted, failed = 0, []
        for p in victims:
            self._removed_by_us.add(p.uid)
            result = self.writer.evict(p)
            if result == WriteResult.FAILED:
                failed.append(p)
                continue
            self._going.add(p.uid)
            evicted += result == WriteResult.EVICTED
        return evicted, failed

    def _evict_round(self, memory: ReleaseMemory, victims: Sequence[PodInfo], now: float) -> tuple[int, int]:
        """Evict ``victims`` for a recovery round (``now``: epoch seconds); returns (evicted, failed).
        Evicted (or already gone) members go into ``memory.recovery_evicted`` (the next round's event
        counts those the watch still shows; :meth:`mark_going` keeps them from being members), failed
        ones into ``memory.recovery_retry``, tried again :data:`RETRY_EVICTION_SECONDS` later."""
        evicted, failed = self._evict(victims)
        refused = {p.uid for p in failed}
        memory.recovery_retry |= refused
        memory.recovery_evicted |= {p.uid for p in victims if p.uid not in refused}
        memory.recovery_retry_at = now + RETRY_EVICTION_SECONDS
        self.metrics.recovery_evictions.inc(evicted)
        return evicted, len(failed)

    def _keep_budget(self, g: GroupObject, memory: ReleaseMemory, phase: str, now: float) -> None:
        """The opt-in PodDisruptionBudget (``lifecycle.pdb_action``), written only when it changes."""
        action = lifecycle.pdb_action(phase)
        state = memory.budget
        want = Budget.ensured(min_member_of(g.pg))
        if action == "ensure" and state not in (want, BUDGET_FOREIGN):
            result = self.writer.objects.ensure_pdb(self.policy, lifecycle.pdb_manifest(g.pg, g.uid))
            if result == WriteResult.FOREIGN:
                memory.budget = BUDGET_FOREIGN
                self.events.emit(g.ref, "pdb", notices.pdb_conflict(g.pg.metadata.name), now)
            elif result != WriteResult.FAILED:
                memory.budget = want
        elif action == "keep" and state is not None and state.state is BudgetState.ENSURED and state != want:
            if self.writer.objects.ensure_pdb(self.policy, lifecycle.pdb_manifest(g.pg, g.uid)) != WriteResult.FAILED:
                memory.budget = want
        elif action == "delete" and state not in (BUDGET_DELETED, BUDGET_FOREIGN):
            if self.writer.objects.delete_pdb(self.policy, *g.key) != WriteResult.FAILED:
                memory.budget = BUDGET_DELETED

    def time_out(self, g: GroupObject, members: Sequence[PodInfo], new_status: PodGroupStatus, memory: ReleaseMemory,
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
        victims = timeout_victims(members, self.config.gate_name)
        evicted, failed = self._evict(victims)
        if victims:
            self.events.emit(g.ref, "evict", notices.evicted_after_timeout(evicted, len(failed)), now)


def _newer(written: recovery.Record | None, kept: recovery.Record | None) -> recovery.Record | None:
    """The later of the record in the cached status and the one this process last acted on: more
    rounds, or failed, or (same rounds) the one the cache has. A record kept while the cache has none
    is one whose status write the cache has not seen yet."""
    if kept is None:
        return written
    if written is None:
        return kept
    return kept if (kept.rounds, kept.failed) > (written.rounds, written.failed) else written
