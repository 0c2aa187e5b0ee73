"""The reconcile loop: informer caches -> ``planner.decide`` -> status, gate removal, events.

Pure parts (plain functions over plain data, unit-tested table-driven):

- :func:`release_patch` / :func:`pin_ops`: the minimal JSON Patch that removes the
  scheduling gate (``test`` the entry's name, then ``remove`` it) and, with placement
  ``pinned``, first narrows the member's required node affinity to its planned node;
- :class:`Debouncer`: when the next pass is due (debounce, periodic resync, deadlines);
- :func:`build_group_requests`, :func:`verdict_event`, :func:`priority_event`;
- :func:`pinned_node` / :func:`restored_reservations`: the room of released members that
  were ungated (pinned) but are not bound yet, rebuilt from the cluster when a process
  starts deciding (start, or leadership gained), since reservations live in memory only;
- :func:`pin_target`: which node a released member is pinned to (none for members with
  constraints the planner does not evaluate: volume claims, hard topology spread, DRA);
- :func:`timeout_victims`: whom ``--evict-on-timeout`` evicts;
- :func:`left_group`, :func:`waiting_for_pod_group`: gated pods that left their group
  (the gate is removed) or whose PodGroup does not exist (an event says so).

Imperative shell: :class:`Reconciler` runs one decision pass at a time (decisions are
serialised, docs/semantics.md) on its own thread:

1. snapshot the caches: nodes, bound non-terminal pods, PodGroups, labelled members;
   on the first pass of a process (or after gaining leadership) seed the reservations
   with :func:`restored_reservations`;
2. ``planner.decide(nodes, bound_pods, groups, reservations, now, config)``; keep the
   returned reservations for the next pass;
3. per verdict, in a thread pool: ``status.compute_status`` and, when ``status_patch``
   returns a body, a merge patch of the status subresource. For ``Released`` the
   status (phase Scheduling, scheduleStartTime) is written FIRST, so that a restarted
   controller finishes the release instead of re-deciding it; only after it succeeded
   are the gates removed, concurrently, one minimal JSON Patch per member
   (``AlreadyReleased`` verdicts ungate their new members the same way);
4. events on change (:class:`cogate.controller.events.EventGate`), metrics.

Gate removal retries: 409 Conflict -> re-read the pod and rebuild the patch; 429/5xx ->
backoff; 422 (a failed ``test``) -> re-read: gate gone means someone else removed it
(fine), otherwise rebuild and retry; 404 -> the member is gone.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from collections import Counter as _Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cogate import api
from cogate.controller import planner
from cogate.controller import quota as quota_mod
from cogate.controller import status as status_mod
from cogate.controller.events import NORMAL, WARNING, EventGate, EventRecorder, ObjectRef
from cogate.controller.informer import Backoff, Informer
from cogate.controller.metrics import Metrics
from cogate.controller.model import PodInfo, Reservation
from cogate.models import PHASES, PodGroup, parse_time

log = logging.getLogger(__name__)

PLACEMENTS = ("pinned", "free")
#: Node-field key kube-scheduler's NodeAffinity plugin matches ``matchFields`` against
#: (the only field key the API accepts in a node selector term).
NODE_NAME_FIELD = "metadata.name"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


# --------------------------------------------------------------------------- pure: patches


def pin_requirement(node: str) -> dict[str, Any]:
    """``matchFields`` requirement selecting exactly node ``node``."""
    return {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}


def _term_is_empty(term: Mapping[str, Any]) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


def pin_ops(spec: Mapping[str, Any], node: str) -> list[dict[str, Any]]:
    """JSON Patch ops narrowing ``spec``'s required node affinity to node ``node``.

    Rule (kube-apiserver ``ValidatePodUpdate`` for gated pods, KEP-3838 "mutable
    scheduling directives", pkg/apis/core/validation ``validateNodeAffinityMutation`` /
    ``validateNodeSelectorTermHasOnlyAdditions``): while a pod is gated its required node
    affinity may only be narrowed —

    - no required node affinity (or an empty ``nodeSelectorTerms`` list): anything may
      be set -> add one term ``{matchFields: [metadata.name In [node]]}``, creating
      ``spec.affinity`` / ``nodeAffinity`` / the required selector as needed;
    - existing terms: the number of terms is fixed and each term may only gain
      requirements appended after its existing ``matchExpressions``/``matchFields``
      -> append the requirement to each term's ``matchFields`` (terms are ORed, so the
      pod then fits exactly the planned node, if that node passed the original terms);
    - an empty term (no requirements; it matches no node) must stay empty -> untouched.

    A term that already carries exactly this requirement is left alone (idempotent).
    Raises ``ValueError`` naming the field when the affinity has an unexpected shape.
    """
    if not node:
        return []
    req = pin_requirement(node)
    term = {"matchFields": [req]}
    affinity = spec.get("affinity")
    if affinity is None:
        return [{"op": "add", "path": "/spec/affinity",
                 "value": {"nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": [term]}}}}]
    if not isinstance(affinity, Mapping):
        raise ValueError("spec.affinity: not an object")
    node_affinity = affinity.get("nodeAffinity")
    if node_affinity is None:
        return [{"op": "add", "path": "/spec/affinity/nodeAffinity",
                 "value": {_REQUIRED: {"nodeSelectorTerms": [term]}}}]
    if not isinstance(node_affinity, Mapping):
        raise ValueError("spec.affinity.nodeAffinity: not an object")
    required = node_affinity.get(_REQUIRED)
    base = f"/spec/affinity/nodeAffinity/{_REQUIRED}"
    if required is None:
        return [{"op": "add", "path": base, "value": {"nodeSelectorTerms": [term]}}]
    if not isinstance(required, Mapping):
        raise ValueError(f"spec.affinity.nodeAffinity.{_REQUIRED}: not an object")
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return [{"op": "add", "path": f"{base}/nodeSelectorTerms", "value": [term]}]
    if not isinstance(terms, list):
        raise ValueError(f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms: not a list")
    ops: list[dict[str, Any]] = []
    for i, old in enumerate(terms):
        if old is None:
            continue  # a null term matches no node; it must stay as it is
        if not isinstance(old, Mapping):
            raise ValueError(f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms[{i}]: not an object")
        if _term_is_empty(old):
            continue
        fields = old.get("matchFields")
        if fields is not None and not isinstance(fields, list):
            raise ValueError(f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms[{i}].matchFields: not a list")
        if fields and req in fields:
            continue
        path = f"{base}/nodeSelectorTerms/{i}/matchFields"
        if fields:
            ops.append({"op": "add", "path": path + "/-", "value": req})
        else:
            ops.append({"op": "add", "path": path, "value": [req]})
    return ops


def gate_index(pod: Mapping[str, Any], gate: str) -> int | None:
    """Index of scheduling gate ``gate`` in ``pod.spec.schedulingGates``, or None."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    if not isinstance(gates, list):
        return None
    for i, entry in enumerate(gates):
        if isinstance(entry, Mapping) and entry.get("name") == gate:
            return i
    return None


def release_patch(pod: Mapping[str, Any], gate: str, node: str = "") -> list[dict[str, Any]] | None:
    """The JSON Patch releasing ``pod`` (API JSON): optional pinning ops, then ``test`` + ``remove`` of the gate.

    ``node`` '' means placement free (only the gate is removed). Returns ``None`` when
    the pod does not carry ``gate`` (nothing to do). The ``test`` makes the patch fail
    with 422 instead of removing a different gate when the list changed meanwhile.
    Raises ``ValueError`` (see :func:`pin_ops`) on an unexpected affinity shape.
    """
    idx = gate_index(pod, gate)
    if idx is None:
        return None
    ops = pin_ops(pod.get("spec") or {}, node) if node else []
    ops.append({"op": "test", "path": f"/spec/schedulingGates/{idx}/name", "value": gate})
    ops.append({"op": "remove", "path": f"/spec/schedulingGates/{idx}"})
    return ops


def pinned_node(p: PodInfo) -> str | None:
    """The single node ``p``'s required node affinity narrows it to, or ``None``.

    A pod is pinned when every non-empty ``nodeSelectorTerms`` entry carries a
    ``matchFields`` requirement ``metadata.name In [node]`` with one value, the same node
    in each: what :func:`pin_ops` writes on release (terms are ORed, so only then is the
    node certain). Empty terms match no node (kube-scheduler NodeAffinity) and are skipped.
    """
    node: str | None = None
    for term in p.required_node_affinity:
        if not term.match_expressions and not term.match_fields:
            continue
        names = {r.values[0] for r in term.match_fields
                 if r.key == NODE_NAME_FIELD and r.operator == "In" and len(r.values) == 1}
        if len(names) != 1:
            return None
        (name,) = names
        if node is not None and name != node:
            return None
        node = name
    return node


def waiting_for_pod_group(groups: Iterable[tuple[str, str]], members: Mapping[tuple[str, str], Sequence[PodInfo]],
                          gate: str) -> list[PodInfo]:
    """Gated, unbound members of ``(namespace, group)`` keys that have no PodGroup."""
    have = set(groups)
    return [p for key, ms in members.items() if key not in have for p in ms if p.gated_by(gate) and not p.bound]


def left_group(pod: Mapping[str, Any]) -> bool:
    """The pod (API JSON) carries no group any more: label absent or empty, and not being deleted."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return not labels.get(api.POD_GROUP_LABEL) and not meta.get("deletionTimestamp")


def timeout_victims(members: Iterable[PodInfo], gate: str) -> list[PodInfo]:
    """Members the opt-in ``--evict-on-timeout`` policy evicts once a group timed out.

    Those with a controller owner (so it recreates them, gated again) that are not
    terminal and either hold room (bound) or can never move (released, unbound, and pinned
    to a node by :func:`pin_ops`: node affinity cannot change once the gate is gone, so a
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


def restored_reservations(requests: Iterable[Any], gate: str, now: float, ttl: float) -> list[Reservation]:
    """Reservations for released members the scheduler has not bound yet (rebuilt after a restart).

    ``requests``: ``planner.GroupRequest`` records. A member counts when its group's release
    stands (``released``), it carries no scheduling gate at all (ours was removed; another
    gate means the scheduler is not on it yet), it is unbound, not terminal, not deleting and
    pinned to one node (:func:`pinned_node`). Each gets ``Reservation(expires=now + ttl)`` on
    that node, as the release that ungated it would have made (docs/semantics.md Reservations: room
    of released, unbound members stays reserved until they bind, go, or a TTL passes).
    Members released with placement ``free`` carry no pin and cannot be restored. Times:
    epoch seconds. ``gate`` is accepted for symmetry with the planner and not needed here
    (any remaining gate disqualifies).
    """
    del gate
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


# --------------------------------------------------------------------------- pure: groups, events


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
                         make: Callable[..., Any], gate: str = api.DEFAULT_GATE_NAME) -> list[Any]:
    """``planner.GroupRequest`` per cached PodGroup (``make`` is the GroupRequest class)."""
    out = []
    for g in groups:
        pg = g.pg
        ms = tuple(members.get(g.key, ()))
        created = parse_time(pg.metadata.creationTimestamp) if pg.metadata.creationTimestamp else 0.0
        out.append(make(namespace=pg.metadata.namespace, name=pg.metadata.name, min_member=pg.spec.minMember,
                        created=created, released=status_mod.release_stands(pg.status, ms, gate), members=ms))
    return out


def verdict_event(outcome: str, message: str) -> tuple[str, str, str] | None:
    """(type, reason, message) of the event for a verdict outcome, or None (AlreadyReleased: see shell).

    The message is the planner's, as in the ``Released=False`` condition, so both say the same.
    """
    if outcome == "WaitingForMembers":
        return (NORMAL, "WaitingForMembers", message or outcome)
    if outcome in ("InsufficientCapacity", "ExceedsClusterCapacity", "Unschedulable"):
        # Same reason as the Released=False condition (status.released_reason): a group larger
        # than the cluster is short of capacity too; its message says so.
        return (WARNING, status_mod.released_reason(outcome), message or outcome)
    return None


def pin_target(member: PodInfo | None, node: str, placement: str) -> str:
    """The node a released member is pinned to ('' = only the gate is removed).

    The planned ``node`` with placement ``pinned``, except for a member with constraints the
    planner does not evaluate (``PodInfo.unplanned``: volume claims, hard topology spread,
    resource claims): pinning it could tie it to a node its volume or spread rule excludes, for
    good (node affinity cannot change once the gate is gone), so kube-scheduler places it freely.
    """
    if placement != "pinned" or not node or member is None or member.unplanned:
        return ""
    return node


def release_message(release: Mapping[str, str], placement: str, new: bool = False) -> str:
    """Human text for a Released event: how many members and where
    ("released 4 members pinned to planned nodes: node-a x2, node-b x2"); ``new``: members
    that joined an already released group."""
    n = len(release)
    where = _Counter(node for node in release.values() if node)
    noun = ("new " if new else "") + ("member" if n == 1 else "members")
    if placement != "pinned" or not where:
        return f"released {n} {noun} (placement by kube-scheduler)"
    parts = ", ".join(f"{node} x{count}" for node, count in sorted(where.items()))
    unpinned = n - sum(where.values())
    extra = f", {unpinned} placed by kube-scheduler" if unpinned else ""
    return f"released {n} {noun} pinned to planned nodes: {parts}{extra}"


def priority_event(request: Any) -> tuple[str, str, str] | None:
    """A Warning ``MixedPriorities`` when a GroupRequest's members differ in priority
    (``planner.mixed_priorities``; the group is ordered by the highest)."""
    if not planner.mixed_priorities(request):
        return None
    prios = {p.priority for p in request.members}
    return (WARNING, "MixedPriorities",
            f"members have priorities {min(prios)}..{max(prios)}; the group is ordered by the highest")


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

    @property
    def planner_config(self) -> planner.PlannerConfig:
        """The planner's knobs, derived: one source for the gate name and the TTL."""
        return planner.PlannerConfig(gate_name=self.gate_name, starvation_seconds=self.starvation_seconds,
                                     reservation_ttl_seconds=self.reservation_ttl_seconds)


@dataclass
class Caches:
    """The informers a pass reads (records: GroupObject, PodInfo, PodInfo, NodeInfo)."""

    podgroups: Informer
    members: Informer
    bound: Informer
    nodes: Informer
    #: ResourceQuotas (records: quota.QuotaInfo), to say when a quota refuses missing members.
    quotas: Informer | None = None

    def all(self) -> list[Informer]:
        return [self.podgroups, self.members, self.bound, self.nodes] + ([self.quotas] if self.quotas else [])


@dataclass
class PassResult:
    verdicts: list[Any] = field(default_factory=list)
    status_writes: int = 0
    ungated: int = 0


def _status(exc: BaseException) -> int | None:
    s = getattr(exc, "status", None)
    return s if isinstance(s, int) else None


class Reconciler:
    """Runs decision passes; see the module doc. ``core``/``custom`` are the client APIs
    (``CoreV1Api``, ``CustomObjectsApi``) or fakes with the same methods."""

    def __init__(self, core: Any, custom: Any, caches: Caches, config: ReconcilerConfig, *,
                 recorder: EventRecorder | None = None, metrics: Metrics | None = None,
                 decide: Callable[..., Any] | None = None, group_request: Callable[..., Any] | None = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if config.placement not in PLACEMENTS:
            raise ValueError(f"placement: {config.placement!r} not in {PLACEMENTS}")
        decide = decide or planner.decide
        group_request = group_request or planner.GroupRequest
        self.core = core
        self.custom = custom
        self.caches = caches
        self.config = config
        self.recorder = recorder
        self.metrics = metrics or Metrics()
        self._decide = decide
        self._group_request = group_request
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self.reservations: tuple[Any, ...] = ()
        #: Rebuild reservations from the cluster on the next pass (first pass, leadership gained).
        self.restore_reservations = True
        self.gate = EventGate()
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
        self._pods_pool = concurrent.futures.ThreadPoolExecutor(config.workers, "cogate-ungate")

    # -- triggering ----------------------------------------------------------
    def enqueue(self, *_: Any) -> None:
        """Informer handler: request a (debounced) pass."""
        with self._cond:
            self.debouncer.trigger(self._monotonic())
            self._cond.notify()

    def run(self, stop: threading.Event, leading: Callable[[], bool] = lambda: True) -> None:
        """Run passes until ``stop``; passes run only while ``leading()``. Never raises."""
        self._leading = leading
        was_leading = False
        while not stop.is_set():
            with self._cond:
                delay = self.debouncer.deadline() - self._monotonic()
                if delay > 0:
                    self._cond.wait(min(delay, 1.0))
                    continue
                self.debouncer.started(self._monotonic())
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

    def close(self) -> None:
        self._groups_pool.shutdown(wait=False, cancel_futures=True)
        self._pods_pool.shutdown(wait=False, cancel_futures=True)
        with self._cond:
            self._cond.notify_all()

    # -- a pass ----------------------------------------------------------------
    def reconcile_once(self) -> PassResult:
        started = self._monotonic()
        now = self._clock()
        if self._orphan_checks:
            self.release_orphans()
        groups = {g.key: g for g in self.caches.podgroups.snapshot()}
        members = members_by_group(self.caches.members.snapshot())
        bound = [p for p in self.caches.bound.snapshot() if p.bound and not p.terminal]
        nodes = self.caches.nodes.snapshot()
        requests = build_group_requests(groups.values(), members, self._group_request, self.config.gate_name)
        by_key = {(r.namespace, r.name): r for r in requests}
        if self.restore_reservations:
            self.restore_reservations = False
            have = {getattr(r, "pod_uid", None) for r in self.reservations}
            restored = [r for r in restored_reservations(requests, self.config.gate_name, now,
                                                         self.config.reservation_ttl_seconds)
                        if r.pod_uid not in have]
            if restored:
                log.info("restored %d reservations of released, unbound members", len(restored))
                self.reservations = tuple(self.reservations) + tuple(restored)
        t0 = self._monotonic()
        decision = self._decide(nodes, bound, requests, self.reservations, now, self.config.planner_config)
        self.metrics.decision_seconds.observe(self._monotonic() - t0)
        self.metrics.decisions.inc()
        self.reservations = tuple(decision.reservations)
        self.metrics.reservations.set(len(self.reservations))

        result = PassResult(verdicts=list(decision.verdicts))
        quotas = self.caches.quotas.snapshot() if self.caches.quotas is not None else []
        futures = []
        for verdict in decision.verdicts:
            g = groups.get((verdict.namespace, verdict.name))
            if g is None:
                continue
            verdict = quota_mod.explain_waiting(verdict, by_key[g.key], quotas)
            futures.append(self._groups_pool.submit(self._apply_verdict, g, by_key[g.key], verdict, now))
        phases: _Counter[str] = _Counter()
        for f in futures:
            try:
                phase, writes, ungated = f.result()
                phases[phase] += 1
                result.status_writes += writes
                result.ungated += ungated
            except Exception:  # noqa: BLE001
                log.exception("applying a verdict failed")
        for phase in PHASES:
            self.metrics.groups.labels(phase).set(phases.get(phase, 0))
        self._notify_missing_groups(groups, members)
        self._after_pass(groups, now)
        self.metrics.pass_seconds.observe(self._monotonic() - started)
        return result

    def _notify_missing_groups(self, groups: Mapping[tuple[str, str], GroupObject],
                               members: Mapping[tuple[str, str], Sequence[PodInfo]]) -> None:
        """Tell each gated member whose PodGroup does not exist, once (Normal ``PodGroupNotFound``
        on the pod): it waits for it, and a typo in the label would otherwise go unnoticed."""
        waiting = waiting_for_pod_group(groups.keys(), members, self.config.gate_name)
        if self.recorder is not None:
            for p in waiting:
                if p.uid not in self._missing_notified:
                    self.recorder.record(
                        ObjectRef(p.namespace, p.name, p.uid, kind="Pod", api_version="v1"), NORMAL,
                        "PodGroupNotFound",
                        f"PodGroup {p.namespace}/{p.group} does not exist: the pod stays behind the scheduling "
                        f"gate until a PodGroup of that name is created in namespace {p.namespace}")
        self._missing_notified = {p.uid for p in waiting}

    def _after_pass(self, groups: Mapping[tuple[str, str], GroupObject], now: float) -> None:
        """Forget state of deleted groups; wake up at the next timeout or reservation expiry."""
        live_uids = {g.uid for g in groups.values()}
        for obj in self.gate.objects() - live_uids:
            self.gate.forget(obj)
        self._evicted = {e for e in self._evicted if e[0] in live_uids}
        for uid in set(self._ended) - live_uids:
            self._ended.pop(uid, None)
        deadlines = [r.expires for r in self.reservations if getattr(r, "expires", 0) > now]
        for g in groups.values():
            d = status_mod.timeout_deadline(g.pg)
            if d is not None and d > now:
                deadlines.append(d)
        if deadlines:
            with self._cond:
                self.debouncer.wake_at(self._monotonic() + (min(deadlines) - now) + 0.01)

    def _apply_verdict(self, g: GroupObject, request: Any, verdict: Any, now: float) -> tuple[str, int, int]:
        pg = g.pg
        ms = request.members
        new_status, self._ended[g.uid] = status_mod.compute(pg, ms, verdict, now, self.config.gate_name,
                                                            self._ended.get(g.uid))
        body = status_mod.status_patch(g.raw_status, new_status)
        writes = ungated = 0
        outcome = verdict.outcome
        if body is not None:
            if not self._write_status(g, body):
                return (new_status.phase or "Pending", 0, 0)  # never ungate before the decision is recorded
            writes = 1

        if pg.spec.minResources:
            self._event(g, "minresources", NORMAL, "MinResourcesNotUsed",
                        "spec.minResources is accepted for compatibility with scheduler-plugins and not used: cogate "
                        "checks each member's requests node by node instead", now)
        release = dict(verdict.release or {})
        if outcome == "Released":
            self.metrics.releases.inc()
            self.gate.clear(g.uid, "verdict")
            since = planner.complete_since(request)
            if since is not None:
                self.metrics.complete_to_release.observe(max(0.0, now - since))
        if release and outcome in ("Released", "AlreadyReleased"):
            release = {u: pin_target(self.caches.members.get(u), n, self.config.placement) for u, n in release.items()}
            results = self.ungate_members(release)
            removed = {u: n for u, n in release.items() if results.get(u) == "removed"}
            ungated = len(removed)
            if outcome == "Released":
                msg = release_message(release, self.config.placement)
                log.info("PodGroup %s/%s: %s (%s)", *g.key, msg, verdict.message)
                self._event(g, "", NORMAL, "Released", msg, now)
            elif removed:
                self._event(g, "", NORMAL, "Released", release_message(removed, self.config.placement, new=True), now)
        else:
            ev = verdict_event(outcome, verdict.message)
            if ev is not None:
                self._event(g, "verdict", ev[0], ev[1], ev[2], now, key=status_mod.situation_key(ev[2]))
        pe = priority_event(request)
        if pe is not None:
            self._event(g, "priorities", *pe, now)
        else:
            self.gate.clear(g.uid, "priorities")
        self._handle_timeout(g, ms, new_status, now)
        return (new_status.phase or "Pending", writes, ungated)

    def _event(self, g: GroupObject, slot: str, type_: str, reason: str, message: str, now: float,
               key: str | None = None) -> None:
        """Record an event on ``g``; with a ``slot`` only when it is news (:class:`EventGate`; ``key``:
        the situation, see ``status.situation_key``), else always."""
        if self.recorder is None:
            return
        if not slot or self.gate.should_emit(g.uid, slot, reason, message, now, key):
            self.recorder.record(g.ref, type_, reason, message)

    def _handle_timeout(self, g: GroupObject, ms: Sequence[PodInfo], new_status: Any, now: float) -> None:
        cond = new_status.condition(status_mod.CONDITION_TIMED_OUT)
        if cond is None or cond.status != "True":
            self.gate.clear(g.uid, "timeout")
            return
        self._event(g, "timeout", WARNING, "Timeout", cond.message, now)
        if not self.config.evict_on_timeout:
            return
        token = (g.uid, new_status.scheduleStartTime or "")
        if token in self._evicted:
            return
        self._evicted.add(token)
        victims = timeout_victims(ms, self.config.gate_name)
        for p in victims:
            self.metrics.evictions.labels(self._evict(p)).inc()
        if victims:
            self._event(g, "evict", WARNING, "Timeout",
                        f"evicted {len(victims)} members with a controller owner after the schedule timeout "
                        "(bound ones, and unbound ones held on their pinned node); they return gated", now)

    def _evict(self, p: PodInfo) -> str:
        from kubernetes import client

        body = client.V1Eviction.from_dict({"apiVersion": "policy/v1", "kind": "Eviction",
                                            "metadata": {"name": p.name, "namespace": p.namespace},
                                            "deleteOptions": {"preconditions": {"uid": p.uid}}})
        try:
            self.core.create_namespaced_pod_eviction(p.name, p.namespace, body, _preload_content=False,
                                                     _request_timeout=10)
            return "evicted"
        except Exception as exc:  # noqa: BLE001
            if _status(exc) in (404, 409):
                return "gone"
            log.warning("evicting %s/%s failed: %s", p.namespace, p.name, exc)
            return "failed"

    # -- writes ----------------------------------------------------------------
    def _write_status(self, g: GroupObject, body: dict[str, Any]) -> bool:
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(self.config.max_patch_attempts):
            try:
                resp = self.custom.patch_namespaced_custom_object_status(
                    api.GROUP, api.VERSION, g.pg.metadata.namespace, api.PLURAL, g.pg.metadata.name, body,
                    _content_type="application/merge-patch+json", _preload_content=False, _request_timeout=10)
                self.metrics.status_writes.labels("ok").inc()
                raw = _json(resp)
                if raw:
                    self.caches.podgroups.apply_local(raw)
                return True
            except Exception as exc:  # noqa: BLE001
                code = _status(exc)
                if code == 404:
                    return False
                if (code is None or code == 429 or code >= 500) and attempt + 1 < self.config.max_patch_attempts:
                    self._sleep(backoff.next())
                    continue
                self.metrics.status_writes.labels("error").inc()
                log.warning("status patch of PodGroup %s/%s failed: %s", *g.key, exc)
                return False
        return False

    def ungate_members(self, release: Mapping[str, str]) -> dict[str, str]:
        """Remove the gate from each member (uid -> node to pin to, '' for none) concurrently; uid -> result."""
        futures = {}
        for uid, node in release.items():
            p = self.caches.members.get(uid)
            if p is None:
                self.metrics.gate_removals.labels("not_found").inc()
                continue
            futures[uid] = self._pods_pool.submit(self.ungate, p.namespace, p.name, uid, node)
        out = {}
        for uid, f in futures.items():
            try:
                out[uid] = f.result()
            except Exception:  # noqa: BLE001
                log.exception("ungating %s failed", uid)
                out[uid] = "failed"
            self.metrics.gate_removals.labels(out[uid]).inc()
        return out

    def ungate(self, namespace: str, name: str, uid: str, node: str,
               only_if: Callable[[dict[str, Any]], bool] | None = None) -> str:
        """Remove the gate from one pod; returns removed | absent | not_found | skipped | failed.

        ``only_if``: a predicate on the freshly read pod (API JSON); ``skipped`` when it is false.
        """
        gate = self.config.gate_name
        backoff = Backoff(initial=0.2, maximum=5.0)
        for attempt in range(self.config.max_patch_attempts):
            last = attempt + 1 == self.config.max_patch_attempts
            try:
                pod = _json(self.core.read_namespaced_pod(name, namespace, _preload_content=False, _request_timeout=10))
            except Exception as exc:  # noqa: BLE001
                code = _status(exc)
                if code == 404:
                    return "not_found"
                if not last and (code is None or code == 429 or code >= 500):
                    self._sleep(backoff.next())
                    continue
                log.warning("reading pod %s/%s failed: %s", namespace, name, exc)
                return "failed"
            if (pod.get("metadata") or {}).get("uid") != uid:
                return "not_found"  # deleted and recreated under the same name
            if only_if is not None and not only_if(pod):
                return "skipped"
            try:
                ops = release_patch(pod, gate, node)
            except ValueError as exc:
                log.warning("pod %s/%s: cannot pin (%s); removing the gate only", namespace, name, exc)
                ops = release_patch(pod, gate, "")
            if ops is None:
                return "absent"
            try:
                resp = self.core.patch_namespaced_pod(name, namespace, ops, _content_type="application/json-patch+json",
                                                      _preload_content=False, _request_timeout=10)
                raw = _json(resp)
                if raw and not left_group(raw):
                    self.caches.members.apply_local(raw)
                return "removed"
            except Exception as exc:  # noqa: BLE001
                code = _status(exc)
                if code == 404:
                    return "not_found"
                if code in (409, 422) and not last:
                    continue  # re-read: a 422 from the test op usually means the gate is gone already
                if not last and (code is None or code == 429 or code >= 500):
                    self._sleep(backoff.next())
                    continue
                log.warning("ungating pod %s/%s failed: %s", namespace, name, exc)
                return "failed"
        return "failed"

    # -- pods that left their group ------------------------------------------
    def on_member_event(self, kind: str, old: Any, new: Any) -> None:
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
            out[uid] = self.ungate(ns, name, uid, "", only_if=left_group)
            if out[uid] == "removed":
                log.info("pod %s/%s left PodGroup %s while gated: gate removed", ns, name, group)
                self.metrics.gate_removals.labels("left_group").inc()
                if self.recorder is not None:
                    self.recorder.record(ObjectRef(ns, name, uid, kind="Pod", api_version="v1"), NORMAL,
                                         "LeftPodGroup",
                                         f"label {api.POD_GROUP_LABEL} no longer names PodGroup {group!r}: "
                                         "scheduling gate removed, the pod is scheduled on its own")
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
        msg = f"pod {meta.get('name', '?')}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        if self.gate.should_emit(ref.uid or ref.name, ("invalid", meta.get("uid")), "InvalidObject", msg,
                                 self._clock()):
            self.recorder.record(ref, WARNING, "InvalidObject", msg)

    def on_invalid_podgroup(self, raw: dict[str, Any], exc: Exception) -> None:
        """Informer callback: a PodGroup failed validation -> Warning InvalidObject on it."""
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        if self.recorder is None or not meta.get("name"):
            return
        ref = ObjectRef(str(meta.get("namespace") or ""), str(meta["name"]), str(meta.get("uid") or ""))
        msg = " ".join(str(exc).split())[:1000]
        if self.gate.should_emit(ref.uid or ref.name, "invalid-podgroup", "InvalidObject", msg, self._clock()):
            self.recorder.record(ref, WARNING, "InvalidObject", msg)


def _json(resp: Any) -> dict[str, Any]:
    """Body of a ``_preload_content=False`` response (or a dict from a fake) as a dict; {} if none."""
    if isinstance(resp, dict):
        return resp
    data = getattr(resp, "data", None)
    if not data:
        return {}
    try:
        out = json.loads(data)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}
