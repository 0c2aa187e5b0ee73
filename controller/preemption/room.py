"""Acting on a preemption decision (``--preemption``, issue 15): the room that carries it out.

The choice is pure (:func:`cogate.controller.preemption.victims.select_victims`), so are the in-flight
record and its rules (:mod:`cogate.controller.preemption.inflight`); this room finds what they apply to and
makes the API calls. Verbs, once a pass (the reconciler's thread; groups' memories are not being
applied then):

- :meth:`Preempting.promises` (before planning): the room held for the preemption in flight
  (``Promise`` kind ``"preempting"``): the planner charges it for every other group and lends it
  to its holder;
- :meth:`Preempting.present` (before planning): the bound, non-terminal pods now, by uid (a victim
  among them is still there);
- :meth:`Preempting.step` (after planning, before verdicts are applied): judge each preemption in
  flight (:func:`inflight.judge`; its planned nodes checked, :func:`inflight.room_lost`) and act on
  how it ended; then start what :func:`coordination.choose` picks: waiting groups whose verdict is
  ``InsufficientCapacity`` (never ``ExceedsClusterCapacity`` or ``Unschedulable``: no victim can
  help) and standing releases whose new members wait (``AlreadyReleased`` with ``waiting``),
  highest priority first, not backing off, none with a preemption in flight;
- :meth:`Preempting.conditions` (per group, while its status is computed): ``Preempting``;
- :meth:`Preempting.resume` (a process's first pass, or on gaining leadership): rebuild the
  preemptions left in flight (below);
- :meth:`Preempting.on_scheduler_lease` (the Lease informer's thread): a new kube-scheduler leader
  has the nominations in flight refreshed by the next :meth:`~Preempting.step` (a
  ``scheduling.x-k8s.io/RoomHeld`` pod condition: an update its queue sees; docs/semantics.md
  "Preemption": what protects the freed room, and when).

On a process's first pass (and on gaining leadership), :meth:`Preempting.resume` rebuilds the
preemptions an earlier process left in flight from the cluster (:func:`inflight.rebuild`: cogate's
nominations on gated members, victims marked ``PreemptionByCogate`` naming the group) and carries
them on. A gated member still carrying cogate's ``nominatedNodeName`` while its group has no
preemption in flight has it cleared.

Preemptions side by side (issue 37): groups preempt at once whenever their victims and room do
not overlap (:mod:`cogate.controller.preemption.coordination`: each selection is made with the room
the others hold charged, and is not acted on while one of its victims is another's), as
kube-scheduler's asynchronous preemption (KEP-4832) runs independent pods' preemptions
concurrently; a higher priority takes over a lower one's room (the lower one ends ``Superseded``).
Starting one (docs/semantics.md "Preemption": hold, nominate, mark, delete):

1. the record goes into the group's memory (:class:`~cogate.controller.preemption.memory.PreemptionMemory`):
   its plan is held room from the next pass on;
2. each planned gated member gets ``status.nominatedNodeName`` = its planned node (status
   subresource, field manager cogate-controller) BEFORE any victim goes, so kube-scheduler filters
   lower- and equal-priority pods (a ReplicaSet's replacements of the victims) against it
   (KEP-5278; kube-scheduler ``addGENominatedPods``); the members concurrently
   (:meth:`Writer.nominate_all <cogate.controller.kube.writer.Writer.nominate_all>`), every one answered
   before the first victim is marked;
3. each victim not already terminating: ``DisruptionTarget=True`` reason ``PreemptionByCogate``,
   then DELETE with a uid precondition and its own grace period (:meth:`Writer.preempt
   <cogate.controller.kube.writer.Writer.preempt>`), the victims concurrently on the writer's threads
   (:meth:`Writer.preempt_all <cogate.controller.kube.writer.Writer.preempt_all>`, at most ``--workers``
   in flight); Events: ``Preempted`` on each victim, ``Preempting`` on the group;
4. the group stays gated until every victim is gone; the normal pass then releases it (pinned) on
   the lent room. A preemption that ends otherwise clears cogate's nominations (KEP-5278: the
   setter clears), says why (``Preempting=False``, a Warning ``PreemptionEnded``) and backs off
   (:func:`inflight.backoff_seconds`).

Handed the config, the caches, the writer, the metrics, the event emitter and the monotonic
clock, and the incremental planner's state with its lock (``planning``, ``planning_lock``; the
shell's :class:`~cogate.controller.planning.planstate.PlanningState`): the selection then reads its
:meth:`~cogate.controller.planning.planstate.PlanningState.bound_view` under that lock
(``select_victims(view=...)``: no pass over every bound pod; bench/preemption.py), else it
selects from scratch over the caches' nodes and the bound pods read before planning. Wake-ups: the deadline of the preemption in flight, the re-check after its victims went.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from cogate.controller.status import conditions as cond_mod
from cogate.controller.preemption import coordination, inflight
from cogate.controller.preemption.memory import PreemptionMemories, PreemptionMemory
from cogate.controller.status import notices
from cogate.controller.planning.capacity import nominated_pods, promised_room
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.kube.events import Emitter
from cogate.controller.kube.informer import Caches
from cogate.controller.status.inputs import GroupObject
from cogate.controller.model.leftovers import FIELD_MANAGER
from cogate.controller.kube.metrics import Metrics
from cogate.controller.status.notices import ObjectRef, log_extra
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.victims import (Gang, NoPreemption, Preemption, Reason, Victim,
                                                  select_victims)
from cogate.controller.model.records import PodInfo, Promise, Reservation
from cogate.controller.model.verdicts import Decision, GroupRequest, Outcome
from cogate.controller.model.wakeups import WAKE_MARGIN, earliest
from cogate.controller.kube.writer import PREEMPTION_REASON, Writer, WriteResult
from cogate.models import PodGroupStatus, format_time

log = logging.getLogger(__name__)

#: Seconds before a group whose selection preempted nothing is selected again (its verdict and
#: the cluster change under it; a selection is not free at scale: bench/preemption.py).
RECHECK_SECONDS = 5.0
#: Groups a pass may run the selection for before one preempts (the highest priorities first).
SELECTIONS_PER_PASS = 3


class Preempting:
    """Carries out gang preemptions; see the module doc."""

    def __init__(self, config: ReconcilerConfig, caches: Caches, writer: Writer, metrics: Metrics, events: Emitter,
                 monotonic: Callable[[], float], *, planning: PlanningState | None = None,
                 planning_lock: AbstractContextManager[Any] | None = None) -> None:
        self.config = config
        #: The incremental planner's state and the lock its deltas take (module doc); None: from scratch.
        self.planning = planning
        self.planning_lock = planning_lock
        self.caches = caches
        self.writer = writer
        self.metrics = metrics
        self.events = events
        self._monotonic = monotonic
        #: kube-scheduler's leader Lease as last seen, and the monotonic times at which the
        #: nominations in flight are to be refreshed (:meth:`on_scheduler_lease`; guarded by _lease_lock).
        self._lease: inflight.SchedulerLease | None = None
        self._refresh_at: list[float] = []
        self._lease_lock = threading.Lock()

    # -- kube-scheduler's leader (the Lease informer's thread) ----------------------------------------
    def on_scheduler_lease(self, kind: str, old: object, new: object) -> bool:
        """Informer handler of kube-scheduler's leader Lease: on a leader not seen before
        (:func:`inflight.new_scheduler_leader`) the nominations in flight are refreshed in the next
        pass and once more :data:`inflight.REFRESH_AGAIN_SECONDS` later. A kube-scheduler process
        registers a gated pod's ``nominatedNodeName`` only on an update of the pod (its queue's
        ``Add`` puts a gated pod aside without ``AddNominatedPod``; ``Update`` calls
        ``UpdateNominatedPod``: pkg/scheduler/backend/queue/scheduling_queue.go), and it takes the
        Lease only after its informers synced (cmd/kube-scheduler/app/server.go, unless
        ``DelayCacheUntilActive``). True when a pass is wanted."""
        lease = new if isinstance(new, inflight.SchedulerLease) else None
        with self._lease_lock:
            seen, self._lease = self._lease, lease if kind != "DELETED" else None
            if kind == "DELETED" or not inflight.new_scheduler_leader(seen, lease):
                return False
            if seen is not None:
                log.info("kube-scheduler has a new leader (%s, %d transitions): refreshing the nominations of "
                         "preemptions in flight", lease.holder, lease.transitions)
            now = self._monotonic()
            self._refresh_at = [now, now + inflight.REFRESH_AGAIN_SECONDS]
        return True

    def _refresh_due(self, now: float) -> tuple[bool, float | None]:
        """Whether a refresh is due at monotonic ``now`` (taken off the list), and the next one."""
        with self._lease_lock:
            due = [t for t in self._refresh_at if t <= now]
            self._refresh_at = [t for t in self._refresh_at if t > now]
            return bool(due), min(self._refresh_at, default=None)

    def _refresh_nominations(self, rec: inflight.InFlight, now: float) -> None:
        """Write :func:`inflight.refresh_condition` on each planned member still gated and nominated
        to its planned node (status subresource): an update kube-scheduler's queue sees, so it
        registers the nomination again (``UpdateNominatedPod``). Counted in
        ``cogate_controller_preemption_nomination_refreshes_total{result}``."""
        with self._lease_lock:
            holder = self._lease.holder if self._lease is not None else ""
        stamp = format_time(now)
        for uid, node in sorted(rec.plan.items(), key=lambda kv: kv[1]):
            m = self.caches.members.get(uid)
            if m is None or m.bound or not m.gated_by(self.config.gate_name) or m.nominated_node != node:
                continue
            result = self.writer.patch_pod_status(m, {"conditions": [inflight.refresh_condition(rec, node, holder,
                                                                                                 stamp)]})
            self.metrics.nomination_refreshes.labels(result).inc()
        log.info("PodGroup %s/%s: refreshed the nominations of %d members", rec.namespace, rec.name, len(rec.plan),
                 extra=log_extra(rec.namespace, rec.name))

    # -- on a process's first pass (or on gaining leadership) -------------------------------------
    def resume(self, groups: Mapping[tuple[str, str], GroupObject], requests: Sequence[GroupRequest],
               memories: PreemptionMemories, now: float) -> None:
        """Take over the preemptions an earlier process left in flight (:func:`inflight.rebuild`):
        each rebuilt record goes into its group's memory, so its room is held from this pass on
        and it ends as the earlier process's would have; a victim marked but not yet deleted is
        deleted now (step 3). Said in the log, an Event ``Preempting`` on the group and
        ``cogate_controller_preemptions_total{result="Resumed"}``. Groups that already have a record
        (this process's own) are left alone."""
        if not self.config.preemption:
            return
        members = {(r.namespace, r.name): r.members for r in requests if (r.namespace, r.name) in groups
                   and memories.recall_preemption(groups[(r.namespace, r.name)].uid).in_flight is None}
        bound = [p for p in self.caches.bound.snapshot() if p.bound and not p.terminal]
        found = inflight.rebuild(members, bound, self.config.gate_name, PREEMPTION_REASON, FIELD_MANAGER, now)
        for i in found.ignored:
            log.info("resuming preemptions: %s ignored: %s", i.ref, i.reason)
        pending = set(found.to_delete)
        by_uid = {p.uid: p for p in bound if p.uid in pending}
        for rec in found.records:
            g = groups[(rec.namespace, rec.name)]
            memory = memories.recall_preemption(g.uid)
            memory.in_flight, memory.note = rec, None
            group = f"{rec.namespace}/{rec.name}"
            graces: dict[str, float] = {}
            mark, stamp = notices.disruption_message(group, rec.priority), format_time(now)
            for v in rec.victims:  # the earlier process stopped between its mark and its DELETE
                p = by_uid.get(v.uid)
                if p is None:
                    continue
                result, grace = self.writer.preempt(p, mark, stamp)
                if grace is not None:
                    graces[v.uid] = grace
                if result == WriteResult.DELETED:
                    self.events.record(_pod_ref(p), notices.preempted(group, rec.priority, v.node))
            memory.in_flight = inflight.regraced(rec, graces, now)
            self._refresh_nominations(rec, now)  # a kube-scheduler started meanwhile would not count them
            self.metrics.preemptions.labels(inflight.RESUMED).inc()
            log.info("PodGroup %s: %s", group, rec.message, extra=log_extra(rec.namespace, rec.name))
            self.events.record(g.ref, notices.preempting(rec.message))

    # -- before planning -------------------------------------------------------------------------
    def promises(self, groups: Mapping[tuple[str, str], GroupObject], requests: Mapping[tuple[str, str], GroupRequest],
                 memories: PreemptionMemories) -> list[Promise]:
        """The room held for the preemptions in flight (:func:`inflight.holds`, less what their victims
        still there take), for the planner."""
        out: list[Promise] = []
        if not self.config.preemption:
            return out
        for g in groups.values():
            rec = memories.recall_preemption(g.uid).in_flight
            r = requests.get(g.key)
            if rec is not None and r is not None:
                out.extend(inflight.holds(rec, r.members, self.config.gate_name, self._victims_there([rec])))
        return out

    def _victims_there(self, records: Sequence[inflight.InFlight]) -> dict[str, PodInfo]:
        """The victims of ``records`` still bound and not terminal, by uid (the bound pods' cache)."""
        out = {}
        for rec in records:
            for v in rec.victims:
                p = self.caches.bound.get(v.uid)
                if p is not None and p.bound and not p.terminal:
                    out[v.uid] = p
        return out

    def present(self, memories: PreemptionMemories) -> dict[str, PodInfo]:
        """Bound, non-terminal pods by uid, as the caches hold them now: what a preemption in flight
        is judged by (its victims gone or not), and the from-scratch selection's pods. Empty when
        neither is needed (no preemption in flight, the planning state kept): a copy of every bound
        pod each pass would cost the pass that much at 100,000 pods."""
        if not self.config.preemption:
            return {}
        if self.planning is not None and not any(m.in_flight is not None for _, m in memories.iter_preemption()):
            return {}
        return {p.uid: p for p in self.caches.bound.snapshot() if p.bound and not p.terminal}

    # -- after planning --------------------------------------------------------------------------
    def step(self, decision: Decision, groups: Mapping[tuple[str, str], GroupObject],
             requests: Mapping[tuple[str, str], GroupRequest], memories: PreemptionMemories,
             present: Mapping[str, PodInfo], reservations: Sequence[Reservation], now: float) -> float | None:
        """Judge the preemption in flight and act on it; without one, start at most one. Returns
        ``wake_at`` (monotonic seconds) of its deadline or re-check, ``None`` for none."""
        if not self.config.preemption:
            return None
        verdicts = {(v.namespace, v.name): v for v in decision.verdicts}
        by_uid = {g.uid: g for g in groups.values()}
        wakes: list[float | None] = []
        in_flight = False
        had = set()  # groups with a record at the start of this step (their nominations are handled)
        refresh, next_refresh = self._refresh_due(self._monotonic())
        nodes = self.caches.nodes.snapshot_map()
        for uid, memory in memories.iter_preemption():
            rec = memory.in_flight
            if rec is None:
                continue
            had.add(uid)
            g = by_uid.get(uid)
            request = requests.get(g.key) if g is not None else None
            v = verdicts.get(g.key) if g is not None else None
            released = request is not None and (request.released or (v is not None and Outcome(v.outcome).releases))
            ungated = frozenset(u for u, node in v.release.items() if node) if v is not None else frozenset()
            j = inflight.judge(rec, request.members if request is not None else None, released, present, now,
                               self.config.gate_name, nodes, ungated)
            if j.step.ends:
                self._ended(g, memory, rec, j, now)
                continue
            in_flight = True
            memory.in_flight = j.record
            if refresh:
                self._refresh_nominations(j.record, now)
            due = rec.deadline if j.step is inflight.Step.WAITING else now + inflight.GONE_RECHECK_SECONDS
            wakes.append(self._monotonic() + (due - now) + WAKE_MARGIN)
        if in_flight:
            wakes.append(next_refresh)
        self._released_anyway(decision, groups, memories)
        self._stale_nominations(groups, requests, memories, had)
        wakes.append(self._start(decision, groups, requests, memories, present, reservations, now))
        return earliest(*wakes)

    def _stale_nominations(self, groups: Mapping[tuple[str, str], GroupObject],
                           requests: Mapping[tuple[str, str], GroupRequest], memories: PreemptionMemories,
                           handled: set[str]) -> None:
        """Clear ``nominatedNodeName`` on gated members of groups with no preemption in flight when
        it is cogate's (its field manager owns it, or the owner is unknown: no managedFields): left
        by a preemption whose record is gone (one :meth:`resume` could not rebuild, or whose clear
        failed). Left there, kube-scheduler would keep that room nominated for a pod that may never
        come (KEP-5278: the setter clears; another manager's nomination is its own to clear).
        ``handled``: groups whose record this step judged (an ended one cleared its own already;
        the members here predate that)."""
        for key, r in requests.items():
            g = groups.get(key)
            if g is None or g.uid in handled or memories.recall_preemption(g.uid).in_flight is not None:
                continue
            for m in r.members:
                if (m.nominated_node and not m.bound and m.gated_by(self.config.gate_name)
                        and m.nominated_by in (FIELD_MANAGER, "")):
                    log.info("PodGroup %s/%s: clearing member %s's nominatedNodeName %s left by an earlier "
                             "preemption", *key, m.name, m.nominated_node, extra=log_extra(*key))
                    self.writer.nominate(m, "")

    def _released_anyway(self, decision: Decision, groups: Mapping[tuple[str, str], GroupObject],
                         memories: PreemptionMemories) -> None:
        """A group released while its note says why nothing was preempted: the note says it was
        released without preemption (a stale "does not fit even with preemption" would mislead)."""
        stale = {r.value for r in Reason}
        for v in decision.verdicts:
            g = groups.get((v.namespace, v.name))
            if g is None or not Outcome(v.outcome).releases:
                continue
            memory = memories.recall_preemption(g.uid)
            if memory.note is not None and memory.note[0] in stale:
                memory.note = (cond_mod.REASON_RELEASED_WITHOUT_PREEMPTION,
                               f"released without preemption (earlier: {memory.note[1]})")

    def _ended(self, g: GroupObject | None, memory: PreemptionMemory, rec: inflight.InFlight, j: inflight.Judgement,
               now: float) -> None:
        """A preemption ended: clear cogate's nominations where they remain, say how, back off
        unless the group was placed."""
        memory.in_flight = None
        self.metrics.preemptions.labels(j.step.value).inc()
        key = (rec.namespace, rec.name)
        log.info("PodGroup %s/%s: preemption ended (%s): %s", *key, j.step.value, j.message, extra=log_extra(*key))
        if j.step is not inflight.Step.PLACED:
            self._clear_nominations(rec)
        if g is None:
            return
        memory.note = (j.step.value, j.message)
        if j.step is inflight.Step.PLACED:
            memory.attempts = 0
            memory.until = now
            return
        if j.again:  # no failure of the group's: it is chosen again at once (this very step, if it waits)
            memory.until = memory.checked = -math.inf
        else:
            memory.attempts += 1
            memory.until = now + inflight.backoff_seconds(memory.attempts)
        self.events.record(g.ref, notices.preemption_ended(j.step.value, j.message))

    def _clear_nominations(self, rec: inflight.InFlight) -> None:
        """Clear ``status.nominatedNodeName`` of planned members that still carry cogate's (gated,
        unbound, nominated to the planned node): KEP-5278, the component that set it clears it."""
        for uid, node in sorted(rec.plan.items()):
            m = self.caches.members.get(uid)
            if m is not None and not m.bound and m.nominated_node == node:
                self.writer.nominate(m, "")

    # -- starting ----------------------------------------------------------------------------------
    def _waiting(self, decision: Decision, groups: Mapping[tuple[str, str], GroupObject],
                 requests: Mapping[tuple[str, str], GroupRequest], memories: PreemptionMemories,
                 now: float) -> list[coordination.Waiting]:
        """The groups that may start a preemption, highest priority first (their lowest gated
        member's), then the oldest: a waiting group whose verdict is ``InsufficientCapacity``, and a
        standing release whose new members the planner found no room for (``AlreadyReleased`` with
        ``waiting``: kind 3), neither with a preemption in flight nor backing off."""
        out = []
        gate = self.config.gate_name
        for v in decision.verdicts:
            key = (v.namespace, v.name)
            g, r = groups.get(key), requests.get(key)
            outcome = Outcome(v.outcome)
            joining = outcome is Outcome.ALREADY_RELEASED and bool(v.waiting)
            if g is None or r is None or not (joining or (not r.released and outcome is Outcome.INSUFFICIENT_CAPACITY)):
                continue
            memory = memories.recall_preemption(g.uid)
            if memory.in_flight is not None:
                continue
            if memory.until > now or now - memory.checked < RECHECK_SECONDS:
                continue
            if joining:
                asked = tuple(q for t in coordination.joining_targets(r, v.waiting, gate)
                              if (q := coordination.joining_request(r, v.waiting, gate, t)) is not None)
            else:
                asked = (r,)
            gated = [m.priority for q in asked[:1] for m in q.members if m.gated_by(gate)]
            if gated:
                out.append((-min(gated), g.pg.metadata.creationTimestamp or "", key,
                            coordination.Waiting(key, asked, joining)))
        out.sort(key=lambda t: t[:3])
        return [w for *_, w in out]

    def _start(self, decision: Decision, groups: Mapping[tuple[str, str], GroupObject],
               requests: Mapping[tuple[str, str], GroupRequest], memories: PreemptionMemories,
               present: Mapping[str, PodInfo], reservations: Sequence[Reservation], now: float) -> float | None:
        """Start every preemption :func:`coordination.choose` picks this pass (concurrent ones
        never share victims or room; a takeover ends the lower ones first). Returns the earliest
        ``wake_at`` of their deadlines."""
        waiting = self._waiting(decision, groups, requests, memories, now)
        if not waiting:
            return None
        flying = {}
        for g in groups.values():
            rec, r = memories.recall_preemption(g.uid).in_flight, requests.get(g.key)
            if rec is not None and r is not None:
                flying[g.key] = (rec, r.members)
        promised = self._promised(requests, reservations)
        budgets = self.caches.budgets.snapshot() if self.caches.budgets is not None else []
        config, protected = self.config.planner_config, self.config.protected_namespaces
        natives = self.caches.native_groups.snapshot() if self.caches.native_groups is not None else []
        with self.planning_lock if self.planning is not None and self.planning_lock is not None else nullcontext():
            if self.planning is not None:  # the planner's free room and pods by node (under its lock)
                view = self.planning.bound_view()
                nodes, pods = view.nodes, []
            else:
                view, nodes, pods = None, self.caches.nodes.snapshot(), list(present.values())

            def gangs(key: tuple[str, str]) -> list[Gang]:
                return [Gang(o.namespace, o.name, o.min_member) for k, o in requests.items() if k != key]

            def select(r: GroupRequest, room: Sequence[Promise]) -> Preemption | NoPreemption:
                return select_victims(r, nodes, pods, room, budgets, gangs((r.namespace, r.name)), config, view=view,
                                      protected=protected, natives=natives)

            def take(r: GroupRequest, lower: Sequence[inflight.InFlight],
                     room: Sequence[Promise]) -> coordination.Takeover | None:
                everyone = view.pods if view is not None else pods  # from scratch: rare (a takeover's try)
                return coordination.takeover(r, lower, nodes, everyone, room, budgets, gangs((r.namespace, r.name)),
                                             config, protected=protected, natives=natives)

            choice = coordination.choose(waiting, flying, promised, select, take, self.config.gate_name, now,
                                         SELECTIONS_PER_PASS, self._victims_there([rec for rec, _ in flying.values()]))
        return self._act_on(choice, groups, requests, memories, now)

    def _act_on(self, choice: coordination.Choice, groups: Mapping[tuple[str, str], GroupObject],
                requests: Mapping[tuple[str, str], GroupRequest], memories: PreemptionMemories,
                now: float) -> float | None:
        """Outside the planner's lock (API calls): notes of selections that preempted nothing,
        the records taken over ended (``Superseded``), then each chosen preemption started."""
        for key, no in choice.notes.items():
            memory = memories.recall_preemption(groups[key].uid)
            memory.checked = now
            if no.reason is not Reason.FITS_WITHOUT_PREEMPTION:
                earlier = memory.note
                memory.note = _note(no)
                if earlier is not None and earlier[0] == inflight.Step.SUPERSEDED:  # who took its room stays said
                    memory.note = (no.reason.value, f"{no.message} (earlier: {earlier[1]})")
        for key, clash in choice.clashed.items():
            log.info("PodGroup %s/%s: its selection chose victims another preemption has (%s); choosing again",
                     *key, ", ".join(clash), extra=log_extra(*key))
        wakes: list[float | None] = []
        for c in choice.start:
            for rec, why in c.taken:
                old = groups.get((rec.namespace, rec.name))
                if old is not None:
                    j = inflight.Judgement(inflight.Step.SUPERSEDED, None, message=why, again=True)
                    self._ended(old, memories.recall_preemption(old.uid), rec, j, now)
            g = groups[c.key]
            wakes.append(self._act(g, requests[c.key], memories.recall_preemption(g.uid), c.record, c.victims, now))
        return earliest(*wakes)

    def _promised(self, requests: Mapping[tuple[str, str], GroupRequest],
                  reservations: Sequence[Reservation]) -> list[Promise]:
        """Room promised to others, which victims cannot free (``capacity.promised_room``: the
        reservations the pass kept and made, the nominations of unbound non-members)."""
        member = {m.uid: (m, r) for r in requests.values() for m in r.members}
        kept = [(res, member[res.pod_uid][0]) for res in reservations if res.pod_uid in member]
        holders = {res.pod_uid: inflight.holder(member[res.pod_uid][1].namespace, member[res.pod_uid][1].name)
                   for res, _ in kept}
        nominated: list[PodInfo] = []
        if self.caches.nominated is not None:
            nominated = nominated_pods([p for p in self.caches.nominated.snapshot() if p is not None])
        return promised_room(kept, nominated, holders)

    def _act(self, g: GroupObject, r: GroupRequest, memory: PreemptionMemory, rec: inflight.InFlight,
             victims: Sequence[Victim], now: float) -> float | None:
        """Hold, nominate, mark and delete (module doc) for ``rec``, ``victims`` its own victims (a
        takeover's inherited ones are terminating already); ``wake_at`` of the deadline."""
        ns, name = g.key
        group = f"{ns}/{name}"
        memory.in_flight = rec  # 1. held from the next pass on
        memory.note = None
        by_uid = {m.uid: m for m in r.members}
        planned = [(by_uid[uid], node) for uid, node in sorted(rec.plan.items(), key=lambda kv: kv[1])
                   if uid in by_uid]
        t0 = self._monotonic()
        # 2. nominate every planned member (concurrently); all are answered before any victim goes
        for (m, node), result in zip(planned, self.writer.nominate_all(planned)):
            if result != WriteResult.OK:
                message = f"setting member {m.name}'s nominatedNodeName to {node} failed ({result}); nothing preempted"
                self._ended(g, memory, rec, inflight.Judgement(inflight.Step.PLAN_CHANGED, None, message=message), now)
                return None
        self.metrics.preemptions.labels("Started").inc()
        log.info("PodGroup %s: %s", group, rec.message, extra=log_extra(ns, name))
        self.events.record(g.ref, notices.preempting(rec.message))
        mark = notices.disruption_message(group, rec.priority)
        stamp = format_time(now)
        graces: dict[str, float] = {}
        t1 = self._monotonic()
        # 3. mark, then delete, each victim (victims concurrently)
        for v, (result, grace) in zip(victims, self.writer.preempt_all([v.pod for v in victims], mark, stamp)):
            if grace is not None:
                graces[v.pod.uid] = grace
            if result == WriteResult.DELETED:
                self.events.record(_pod_ref(v.pod), notices.preempted(group, rec.priority, v.node))
        log.info("PodGroup %s: nominated %d members in %.2f s, marked and deleted %d victims in %.2f s", group,
                 len(planned), t1 - t0, len(victims), self._monotonic() - t1, extra=log_extra(ns, name))
        if graces:  # the deadline follows the grace periods the API server answered
            rec = memory.in_flight = inflight.regraced(rec, graces, now)
        return self._monotonic() + (rec.deadline - now) + WAKE_MARGIN

    # -- per group, while its status is computed ---------------------------------------------------
    def conditions(self, status: PodGroupStatus, g: GroupObject, memory: PreemptionMemory,
                   now: float) -> PodGroupStatus:
        """``status`` with ``Preempting`` written (:func:`conditions.write_preempting`): True while
        a preemption is in flight (victims still terminating named), else False with the last
        note. Unchanged without ``--preemption``."""
        if not self.config.preemption:
            return status
        rec = memory.in_flight
        active = ""
        if rec is not None:
            remaining = [v for v in rec.victims if self.caches.bound.get(v.uid) is not None]
            active = inflight.waiting_message(rec, remaining) if remaining else f"{rec.message}; every victim is gone"
        reason, message = memory.note or ("", "")
        if not active and not reason and not any(c.type == cond_mod.CONDITION_PREEMPTING and c.status == "True"
                                                 for c in status.conditions):
            return status
        conds = cond_mod.ConditionSet(status.conditions, now, g.pg.metadata.generation)
        cond_mod.write_preempting(conds, active=active, reason=reason, message=message)
        return status.model_copy(update={"conditions": conds.to_list()})


def _note(no: NoPreemption) -> tuple[str, str]:
    """``PreemptionMemory.note`` of a :class:`NoPreemption`."""
    return (no.reason.value, no.message)


def _pod_ref(p: PodInfo) -> ObjectRef:
    return ObjectRef(p.namespace, p.name, p.uid, kind="Pod", api_version="v1")

