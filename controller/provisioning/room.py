"""Asking cluster-autoscaler for a waiting gang's nodes (``--provisioning-class``, issue 16): the
room that carries it out.

The rules are pure (:mod:`cogate.controller.provisioning.provreq`: who asks, for how many of which shape,
what the autoscaler's conditions mean); this room finds what they apply to and makes the API
calls. Verbs, once a pass (the reconciler's thread), after planning and after the preemption
room (:class:`~cogate.controller.preemption.room.Preempting`), whose note says whether victims can
make room (preemption comes first, as kube-scheduler's does before cluster-autoscaler adds a node):

- :meth:`Provisioning.step`: judge each group's standing request
  (``provreq.state``) and act on it: delete it once the group's minMember are bound (its
  capacity used, or not needed after all), when it failed (the group asks again after a
  back-off, :func:`provreq.backoff_seconds`), when its booking expired before the release (the
  group asks again now), when the new nodes it brought were taken by others before the release
  (:func:`provreq.booking_taken`; asks again at once, then with back-off), when the group no longer waits for room, or when its PodGroup is gone;
  then ask for the groups that need new nodes and have no request: a PodTemplate per member
  shape (the shape's first member, read from the API server, its node affinity narrowed to
  nodes that do not exist yet) and one ProvisioningRequest with the counts
  (:func:`provreq.shortfalls`: exactly the difference, in the planner's order, on one room; with
  ``--preemption``, after the pods preemption may evict are counted as gone,
  :func:`mixed.evictable`: no victim is evicted before the nodes came);
- :meth:`Provisioning.consume`: the annotations the release patch of a group adds to each
  member while its request says ``Provisioned=True`` (``autoscaling.x-k8s.io/consume-provisioning-request``);
- :meth:`Provisioning.conditions`: ``Provisioning`` on the group's status.

The requests and their templates are objects in the cluster, owned by the PodGroup (garbage
collected with it) and labelled ``cogate.dev/podgroup``: a restarted controller finds them
through its informer and goes on; the back-off of failed requests is the only thing lost.

Handed the config, the caches (``caches.provreqs``: the requests cogate made, as
:class:`provreq.RequestInfo`), the writer, the metrics, the event emitter and the monotonic
clock (the writer's :attr:`~cogate.controller.kube.writer.Writer.objects` creates and deletes the
requests at :data:`PROVISIONING_REQUESTS`), and the incremental planner's state with its lock
(``planning``, ``planning_lock``): the shortfalls are then computed on its kept free room
(``provreq.shortfalls(view=...)``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from cogate.controller.status import conditions as cond_mod
from cogate.controller.status import notices
from cogate.controller.provisioning import confine, mixed, provreq
from cogate.controller.provisioning.memory import ProvisioningMemories, ProvisioningMemory
from cogate.controller.planning.capacity import nominated_pods, promised_room
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.kube.events import Emitter
from cogate.controller.planning.explanations import held_reason, plural
from cogate.controller.model.groupsets import not_alone
from cogate.controller.planning.roles import for_role_minimums
from cogate.controller.kube.informer import Caches
from cogate.controller.status.inputs import GroupObject
from cogate.controller.kube.metrics import Metrics
from cogate.controller.status.notices import log_extra
from cogate.controller.planning.planner import classify, order_key
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.memory import PreemptionMemory
from cogate.controller.preemption.victims import Reason as PreemptionReason
from cogate.controller.model.records import PodInfo, Promise, Reservation
from cogate.controller.model.resources import format_resources
from cogate.controller.model.verdicts import Decision, GroupRequest, GroupVerdict, Outcome
from cogate.controller.model.wakeups import WAKE_MARGIN, earliest
from cogate.controller.kube.objects import CustomResource
from cogate.controller.kube.writer import Writer, WriteResult
from cogate.models import PodGroupStatus

log = logging.getLogger(__name__)

#: The ProvisioningRequest's API coordinates, for the writer (kube/ knows no feature's API).
PROVISIONING_REQUESTS = CustomResource(provreq.GROUP, provreq.VERSION, provreq.PLURAL, provreq.KIND)
#: Notes of the preemption room that say no victim can make room (then new nodes may).
NO_VICTIM_HELPS = frozenset({PreemptionReason.NO_LOWER_PRIORITY_PODS.value,
                             PreemptionReason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION.value,
                             PreemptionReason.ONLY_PROTECTED_PODS.value,
                             PreemptionReason.PREEMPTION_POLICY_NEVER.value,
                             PreemptionReason.ROLE_MINIMUMS.value})

# ``Provisioning`` reasons (the condition's; True while a request stands).
REASON_REQUESTED = "Requested"
REASON_NOT_PROVISIONED = "NotProvisioned"
REASON_PROVISIONED = "Provisioned"
REASON_FAILED = "Failed"
REASON_BOOKING_EXPIRED = "BookingExpired"
REASON_CAPACITY_TAKEN = "CapacityTaken"
REASON_CONSUMED = "Consumed"
REASON_NOT_NEEDED = "NotNeeded"
REASON_CREATE_FAILED = "CreateFailed"
REASON_OPTED_OUT = "OptedOut"
REASON_MIN_RESOURCES_ONLY = "MinResourcesOnly"
REASON_IN_SET = "InSet"
#: Added to ``FitsCluster=False`` while a request stands: that verdict is about the current nodes.
NOTE = " (the current nodes; ProvisioningRequest "


class Provisioning:
    """Asks cluster-autoscaler for waiting gangs' nodes; see the module doc."""

    def __init__(self, config: ReconcilerConfig, caches: Caches, writer: Writer, metrics: Metrics, events: Emitter,
                 monotonic: Callable[[], float], *, planning: PlanningState | None = None,
                 planning_lock: AbstractContextManager[Any] | None = None) -> None:
        self.config = config
        self.caches = caches
        self.writer = writer
        self.metrics = metrics
        self.events = events
        self._monotonic = monotonic
        self.planning = planning
        self.planning_lock = planning_lock

    @property
    def enabled(self) -> bool:
        return bool(self.config.provisioning_class) and self.caches.provreqs is not None

    def _by_group(self) -> dict[tuple[str, str], list[provreq.RequestInfo]]:
        out: dict[tuple[str, str], list[provreq.RequestInfo]] = {}
        assert self.caches.provreqs is not None
        for info in self.caches.provreqs.snapshot():
            out.setdefault((info.namespace, info.group), []).append(info)
        for infos in out.values():
            infos.sort(key=lambda i: (i.created, i.name))
        return out

    # -- after planning ---------------------------------------------------------------------------
    def step(self, decision: Decision, groups: Mapping[tuple[str, str], GroupObject],
             requests: Mapping[tuple[str, str], GroupRequest], memories: ProvisioningMemories,
             reservations: Sequence[Reservation], held: Sequence[Promise], now: float) -> float | None:
        """Judge every standing request, then ask for the groups that need nodes (module doc).
        ``reservations``: the pass's kept reservations; ``held``: room held for a preemption in
        flight (:meth:`Preempting.promises <cogate.controller.preemption.room.Preempting.promises>`).
        Returns ``wake_at`` (monotonic seconds) of the earliest end of a back-off, ``None`` for none."""
        if not self.enabled:
            return None
        verdicts = {(v.namespace, v.name): v for v in decision.verdicts}
        by_group = self._by_group()
        for key, infos in by_group.items():  # requests whose PodGroup is gone (or was recreated)
            g = groups.get(key)
            for info in infos:
                if not info.deleting and (g is None or (info.owner and info.owner != g.uid)):
                    self._delete(info)
        standing: set[tuple[str, str]] = set()
        asking: list[tuple[str, str]] = []
        wakes: list[float | None] = []
        for key, g in groups.items():
            r = requests.get(key)
            if r is None:
                continue
            memory = memories.recall_provisioning(g.uid)
            mine = [i for i in by_group.get(key, ()) if not i.deleting and (not i.owner or i.owner == g.uid)]
            for old in mine[:-1]:  # one request per group: the newest stands
                self._delete(old)
            if mine and self._judge(g, r, verdicts.get(key), memory, mine[-1], now):
                standing.add(key)
                continue
            if self._may_ask(g, r, verdicts.get(key), memory, memories.recall_preemption(g.uid), now):
                asking.append(key)
            elif memory.until > now:
                wakes.append(self._monotonic() + (memory.until - now) + WAKE_MARGIN)
        if asking:
            self._ask_for(asking, standing, groups, requests, verdicts, memories, reservations, held, now)
        return earliest(*wakes)

    def _judge(self, g: GroupObject, r: GroupRequest, v: GroupVerdict | None, memory: ProvisioningMemory,
               info: provreq.RequestInfo, now: float) -> bool:
        """Act on the standing request ``info`` of group ``g``; True while it stands. A request whose
        end was counted already (its delete failed) is deleted again, and nothing more."""
        if info.name == memory.ended:
            self._delete(info)
            return False
        a = provreq.state(info)
        ref = f"ProvisioningRequest {info.namespace}/{info.name}"
        ms = classify(r, self.config.gate_name)
        released = r.released or (v is not None and Outcome(v.outcome).releases)
        if len(ms.bound) >= r.min_member or (released and a.state is not provreq.State.PROVISIONED):
            used = a.state is provreq.State.PROVISIONED
            self._end(info, memory)
            self.metrics.provisioning_requests.labels("consumed" if used else "not_needed").inc()
            memory.failures = memory.taken = 0
            memory.note = (
                (REASON_CONSUMED, f"released on the capacity of {ref}; the request is deleted now that "
                                  f"{len(ms.bound)} of {r.min_member} members are bound") if used else
                (REASON_NOT_NEEDED, f"released without the capacity of {ref} ({_answer_text(a)}); "
                                    f"the request is deleted"))
            return False
        if a.state is provreq.State.FAILED:
            self._end(info, memory)
            memory.failures += 1
            wait = provreq.backoff_seconds(memory.failures)
            memory.until = now + wait
            memory.note = (REASON_FAILED, f"{ref} failed ({_answer_text(a)}); asking again in "
                                          f"{wait:.0f} s")
            self.metrics.provisioning_requests.labels("failed").inc()
            self.events.record(g.ref, notices.provisioning_failed(memory.note[1]))
            return False
        if a.state is provreq.State.BOOKING_EXPIRED:
            self._end(info, memory)
            memory.note = (REASON_BOOKING_EXPIRED, f"{ref}: the booking expired before the group "
                                                   f"was released ({_answer_text(a)}); asking again")
            self.metrics.provisioning_requests.labels("booking_expired").inc()
            self.events.record(g.ref, notices.provisioning_failed(memory.note[1]))
            return False
        held = held_reason(ms.gated, self.config.planner_config)
        if not released and (v is None or not provreq.wants_nodes(v.outcome, r) or held):
            self._end(info, memory)  # the group waits for something new nodes do not give (members, a scheduler)
            why = held or (v.outcome if v is not None else "no verdict")
            memory.note = (REASON_NOT_NEEDED, f"{ref} deleted: the group no longer waits for room "
                                              f"({why})")
            self.metrics.provisioning_requests.labels("not_needed").inc()
            return False
        if not released and provreq.opted_out(g.pg.metadata.annotations):
            self._end(info, memory)  # opted out after asking: withdrawn (:meth:`_may_ask` says so)
            self.metrics.provisioning_requests.labels("not_needed").inc()
            return False
        if a.state is provreq.State.PROVISIONED and not released and self._taken(g, memory, info, a, now):
            return False
        if a.state is provreq.State.PROVISIONED and memory.seen != info.name:
            memory.seen = info.name
            self.metrics.provisioning_requests.labels("provisioned").inc()
            if info.created and a.since >= info.created:
                self.metrics.provisioning_seconds.observe(a.since - info.created)
            self.events.record(g.ref, notices.provisioned(f"{ref} is provisioned ({_answer_text(a)}); the group "
                                                          f"is released once the new nodes are Ready"))
        return True

    def _taken(self, g: GroupObject, memory: ProvisioningMemory, info: provreq.RequestInfo, a: provreq.Answer,
               now: float) -> bool:
        """Withdraw a ``Provisioned`` request whose new nodes others took before the group was
        released (:func:`provreq.booking_taken`), so that the group asks again at once (then with
        back-off, :func:`provreq.retake_seconds`) instead of waiting for the booking to expire."""
        why = provreq.booking_taken(a, memory.asked_nodes, self.caches.nodes.snapshot(),
                                    self.caches.bound.snapshot(), g.key)
        if not why:
            return False
        self._end(info, memory)
        memory.taken += 1
        wait = provreq.retake_seconds(memory.taken)
        memory.until = now + wait
        memory.note = (REASON_CAPACITY_TAKEN, f"ProvisioningRequest {info.namespace}/{info.name} was provisioned, "
                                              f"but {why}; withdrawn, asking again "
                                              + (f"in {wait:.0f} s" if wait else "now"))
        self.metrics.provisioning_requests.labels("capacity_taken").inc()
        log.info("PodGroup %s/%s: %s", *g.key, memory.note[1], extra=log_extra(*g.key))
        self.events.record(g.ref, notices.provisioning_failed(memory.note[1]))
        return True

    def _may_ask(self, g: GroupObject, r: GroupRequest, v: GroupVerdict | None, memory: ProvisioningMemory,
                 preemption: PreemptionMemory, now: float) -> bool:
        """Module doc of :mod:`cogate.controller.provisioning.provreq`, rule 1 (the back-off aside);
        ``preemption``: the group's preemption record (its note says whether victims can make room)."""
        only_min_resources = v is not None and bool(v.min_resources_short) and v.fits >= r.min_member
        note = memory.note
        if note is not None and note[0] == REASON_MIN_RESOURCES_ONLY and not only_min_resources:
            # no longer waiting for minResources alone: the note would mislead
            memory.note = (REASON_NOT_NEEDED, f"no longer waiting for spec.minResources alone (earlier: "
                                              f"{note[1]})")
        if v is None or r.released or not provreq.wants_nodes(v.outcome, r):
            return False
        if provreq.opted_out(g.pg.metadata.annotations):
            memory.note = (REASON_OPTED_OUT, f"the PodGroup says {provreq.OPT_OUT_ANNOTATION}: "
                                             f"\"false\": cogate asks no nodes for it")
            return False
        if (in_set := not_alone(r.group_set, r.namespace, "cogate asks for no nodes")) and not r.released:
            memory.note = (REASON_IN_SET, in_set)  # issue 33: a set is admitted whole
            return False
        if only_min_resources:  # minMember fits the current nodes: no member to ask for
            memory.note = (REASON_MIN_RESOURCES_ONLY, provreq.min_resources_text(v.min_resources_short))
            return False
        if memory.until > now:
            return False
        ms = classify(r, self.config.gate_name)
        if held_reason(ms.gated, self.config.planner_config):
            return False
        if self.config.preemption and Outcome(v.outcome) is Outcome.INSUFFICIENT_CAPACITY:
            note = preemption.note
            if preemption.in_flight is not None or note is None or note[0] not in NO_VICTIM_HELPS:
                return False  # preemption first: it runs, or has not been tried yet
        return True

    def _ask_for(self, asking: Sequence[tuple[str, str]], standing: set[tuple[str, str]],
                 groups: Mapping[tuple[str, str], GroupObject], requests: Mapping[tuple[str, str], GroupRequest],
                 verdicts: Mapping[tuple[str, str], GroupVerdict], memories: ProvisioningMemories,
                 reservations: Sequence[Reservation], held: Sequence[Promise], now: float) -> None:
        """The shortfalls of the asking groups (standing ones counted), then one request each."""
        planned = [k for k, v in verdicts.items() if k in requests and provreq.wants_nodes(v.outcome, requests[k])
                   and (k in standing or k in asking)]
        planned.sort(key=lambda k: order_key(requests[k]))
        wants = set(asking)
        promised = [*self._promised(requests, reservations), *held]
        lock = self.planning_lock if self.planning is not None and self.planning_lock is not None else nullcontext()
        asked = [(for_role_minimums(requests[k]), k in wants) for k in planned]
        with lock:
            if self.planning is not None:
                view = self.planning.bound_view()
                gone = self._gone(asked, requests, view.pods)
                short = provreq.shortfalls(asked, [], [], promised, self.config.gate_name, view=view, gone=gone)
                nodes = list(view.nodes)
            else:
                nodes = self.caches.nodes.snapshot()
                pods = [p for p in self.caches.bound.snapshot() if p.bound and not p.terminal]
                short = provreq.shortfalls(asked, nodes, pods, promised, self.config.gate_name,
                                           gone=self._gone(asked, requests, pods))
        for key in planned:
            members = short.get(key)
            if key in wants and members:
                g = groups[key]
                self._ask(g, requests[key], verdicts[key], members, nodes, memories.recall_provisioning(g.uid), now)

    def _gone(self, asked: Sequence[tuple[GroupRequest, bool]], requests: Mapping[tuple[str, str], GroupRequest],
              pods: Sequence[PodInfo]) -> dict[tuple[str, str], tuple[PodInfo, ...]]:
        """With ``--preemption``, the pods each asking group may count as gone
        (:func:`mixed.evictable`: the shortfall after preemption, issue 37 kind 5); else none."""
        if not self.config.preemption:
            return {}
        gangs = {k: r.min_member for k, r in requests.items()}
        natives = self.caches.native_groups.snapshot() if self.caches.native_groups is not None else []
        return {(r.namespace, r.name): mixed.evictable(r, pods, gangs, self.config.gate_name,
                                                       protected=self.config.protected_namespaces, natives=natives)
                for r, asks in asked if asks}

    def _promised(self, requests: Mapping[tuple[str, str], GroupRequest],
                  reservations: Sequence[Reservation]) -> list[Promise]:
        """Room promised to others (``capacity.promised_room``: kept reservations, nominations)."""
        member = {m.uid: (m, r) for r in requests.values() for m in r.members}
        kept = [(res, member[res.pod_uid][0]) for res in reservations if res.pod_uid in member]
        nominated: list[PodInfo] = []
        if self.caches.nominated is not None:
            nominated = nominated_pods([p for p in self.caches.nominated.snapshot() if p is not None])
        return promised_room(kept, nominated)

    def _ask(self, g: GroupObject, r: GroupRequest, v: GroupVerdict, members: Sequence[PodInfo],
             nodes: Sequence[Any], memory: ProvisioningMemory, now: float) -> None:
        """Create the PodTemplates and the request for ``members`` (module doc)."""
        ns, group = g.key
        name = provreq.request_name(group, g.uid, int(now * 1000))
        made: list[tuple[str, int]] = []
        described: list[str] = []
        by_shape = provreq.shapes(members)
        carry = confine.new_node_labels(v, r)  # a gang fenced into a domain asks for nodes there (issue 32)
        if len(by_shape) > provreq.MAX_POD_SETS:  # the API server would refuse it (after the templates)
            self._create_failed(g, memory, f"the {plural(len(members), 'member')} to ask for have "
                                           f"{len(by_shape)} shapes; a ProvisioningRequest takes at most "
                                           f"{provreq.MAX_POD_SETS} pod sets", now)
            return
        for i, (rep, count) in enumerate(by_shape):
            pod = self.writer.objects.read_pod(rep.namespace, rep.name)
            if pod is None or (pod.get("metadata") or {}).get("uid") != rep.uid:
                self._undo(ns, made)  # the member went meanwhile: the next pass asks again
                return
            try:
                body = provreq.template_body(pod, f"{name}-{i}", group, g.uid, nodes, carry)
            except ValueError as exc:
                self._undo(ns, made)
                self._create_failed(g, memory, f"member {rep.name} cannot stand in a PodTemplate ({exc})", now)
                return
            result, answer, _ = self.writer.objects.create_pod_template(body)
            if result != WriteResult.CREATED:
                self._undo(ns, made)
                self._create_failed(g, memory, f"creating PodTemplate {ns}/{name}-{i} failed: {answer}", now)
                return
            made.append((f"{name}-{i}", count))
            described.append(f"{count} like {rep.name} ({format_resources(rep.requests)})")
        body = provreq.request_body(name, ns, group, g.uid, self.config.provisioning_class, made, carry)
        result, answer, raw = self.writer.objects.create_custom_object(PROVISIONING_REQUESTS, body)
        if result != WriteResult.CREATED:
            self._undo(ns, made)
            self._create_failed(g, memory, f"creating ProvisioningRequest {ns}/{name} failed: {answer}", now)
            return
        if raw and self.caches.provreqs is not None:
            self.caches.provreqs.apply_local(raw)  # the next pass sees it even before the watch does
        memory.note = None
        memory.seen = ""
        memory.asked_nodes = frozenset(getattr(n, "name", "") for n in nodes)
        self.metrics.provisioning_requests.labels("created").inc()
        message = (f"asked cluster-autoscaler for {plural(len(members), 'pod')} on new nodes"
                   f"{confine.words(carry)} (ProvisioningRequest {ns}/{name}, class {self.config.provisioning_class}): "
                   f"{'; '.join(described)}; {v.message}")
        log.info("PodGroup %s/%s: %s", ns, group, message, extra=log_extra(ns, group))
        self.events.record(g.ref, notices.provisioning_requested(message))

    def _create_failed(self, g: GroupObject, memory: ProvisioningMemory, why: str, now: float) -> None:
        memory.failures += 1
        wait = provreq.backoff_seconds(memory.failures)
        memory.until = now + wait
        memory.note = (REASON_CREATE_FAILED, f"{why}; asking again in {wait:.0f} s")
        self.metrics.provisioning_requests.labels("create_failed").inc()
        log.warning("PodGroup %s/%s: %s", *g.key, memory.note[1], extra=log_extra(*g.key))
        self.events.record(g.ref, notices.provisioning_failed(memory.note[1]))

    def _undo(self, namespace: str, templates: Sequence[tuple[str, int]]) -> None:
        for t, _ in templates:
            self.writer.objects.delete_pod_template(namespace, t)

    def _end(self, info: provreq.RequestInfo, memory: ProvisioningMemory) -> None:
        """Delete a request that has ended for its group, remembered as counted (:meth:`_judge`)."""
        memory.ended = info.name
        self._delete(info)

    def _delete(self, info: provreq.RequestInfo) -> None:
        """Delete a request (uid precondition) and its PodTemplates."""
        result = self.writer.objects.delete_custom_object(PROVISIONING_REQUESTS, info.namespace, info.name, info.uid)
        if result != WriteResult.FAILED and self.caches.provreqs is not None:
            self.caches.provreqs.forget_local((info.namespace, info.name))
        for t, _ in info.templates:
            self.writer.objects.delete_pod_template(info.namespace, t)

    # -- the release, and the status ----------------------------------------------------------------
    def consume(self, g: GroupObject) -> dict[str, str]:
        """Annotations for the release patch of ``g``'s members: cluster-autoscaler's consume
        annotation (and the class) while the group's request says ``Provisioned=True``; else none."""
        if not self.enabled:
            return {}
        info = self._standing(g)
        if info is None or provreq.state(info).state is not provreq.State.PROVISIONED:
            return {}
        return {provreq.CONSUME_ANNOTATION: info.name, provreq.CLASS_ANNOTATION: info.class_name}

    def _standing(self, g: GroupObject, ended: str = "") -> provreq.RequestInfo | None:
        """The group's newest request, but ``ended`` (one whose end was counted, its delete failed)."""
        assert self.caches.provreqs is not None
        mine = [i for i in self.caches.provreqs.snapshot()
                if (i.namespace, i.group) == g.key and not i.deleting and (not i.owner or i.owner == g.uid)
                and i.name != ended]
        return max(mine, key=lambda i: (i.created, i.name)) if mine else None

    def conditions(self, status: PodGroupStatus, g: GroupObject, memory: ProvisioningMemory,
                   now: float) -> PodGroupStatus:
        """``status`` with ``Provisioning`` (:func:`conditions.write_provisioning`): True while a
        request stands (Requested, NotProvisioned or Provisioned, with the autoscaler's reason),
        else False with how the last one ended. Unchanged while provisioning is off or the group
        never asked."""
        if not self.enabled:
            return status
        info = self._standing(g, ended=memory.ended)
        reason, message, active = "", "", False
        if info is not None:
            a = provreq.state(info)
            ref = (f"ProvisioningRequest {info.namespace}/{info.name} asks for {plural(info.count, 'pod')} "
                   f"on new nodes{confine.words(info.carry)}")
            active = True
            if a.state is provreq.State.PROVISIONED:
                reason, message = REASON_PROVISIONED, f"{ref}: provisioned ({_answer_text(a)}); the group is " \
                                                      f"released once the new nodes are Ready"
            elif a.state is provreq.State.NOT_PROVISIONED:
                reason, message = REASON_NOT_PROVISIONED, f"{ref}: not provisioned ({_answer_text(a)}); " \
                                                          f"cluster-autoscaler tries again"
            elif a.state.ended:
                active = False
            else:
                reason, message = REASON_REQUESTED, f"{ref}: cluster-autoscaler has not answered yet" + (
                    f" ({_answer_text(a)})" if a.reason else "")
        if not active and memory.note is not None:
            reason, message = memory.note
        if not reason:
            return status
        conds = cond_mod.ConditionSet(status.conditions, now, g.pg.metadata.generation)
        cond_mod.write_provisioning(conds, active=active, reason=reason, message=message)
        fits = conds.get(cond_mod.CONDITION_FITS_CLUSTER)
        if active and info is not None and fits is not None and fits.status == "False" and NOTE not in fits.message:
            # "even with every eligible node empty" is said of the current nodes: the cluster can grow
            conds.put(cond_mod.CONDITION_FITS_CLUSTER, "False", fits.reason,
                      f"{fits.message}{NOTE}{info.namespace}/{info.name} asks cluster-autoscaler for more)")
        return status.model_copy(update={"conditions": conds.to_list()})


def _answer_text(a: provreq.Answer) -> str:
    """``"reason: message"`` of the autoscaler's condition, or its state without one."""
    if a.reason and a.message:
        return f"{a.reason}: {a.message}"
    return a.reason or a.message or a.state.value
