"""The owners of waiting groups' members: remembered, read by name when needed, judged by :mod:`owners`.

One verb a verdict goes through (:meth:`Ownership.explain`) and one after each pass
(:meth:`Ownership.forget`). A group that waits for members (verdict ``WaitingForMembers``
with fewer than minMember present) whose owners can never make minMember
(:func:`cogate.controller.release.owners.judge`: a Job failed, suspended or complete, a StatefulSet
with ``podManagementPolicy: OrderedReady``, a ReplicaSet or Job with too few replicas or too
little parallelism, an owner deleted) gets the finding appended to its message (so the
``Released=False`` condition says it) and an ``OwnerCannotComplete`` event (Warning; Normal for
a suspended or complete Job), de-duplicated on its situation.

How the controller learns about owners, and why so:

* **No informers on Jobs, ReplicaSets or StatefulSets.** On a big cluster those are tens of
  thousands of objects cogate would hold in memory (and list/watch RBAC on them) to answer a
  question that only arises for the few groups that wait for members. Instead each such
  group's owners are read by name (``get``, the only verb the chart grants on them), at most
  once per :data:`CACHE_SECONDS` per owner while its members are unchanged; a change of the
  members it owns (a pod created, deleted, bound) reads it again, once the group has settled
  (below). A released group, or one waiting for room, costs no request. Errors are cached as
  "unknown" for the same time (no retry storm; a 403 is logged once per kind): an unknown owner
  is never judged.
* **Settling** (issue 40): while a group's members are still being created, its owners are not
  read: every owner creates its pods over some time, and reading it on every pass in which
  another member arrived cost 2.65 ReplicaSet GETs per group of 8 (100 groups created at once).
  Owners are read once no member has arrived for :data:`SETTLE_SECONDS` (:func:`settled`), and
  at once when a member left or failed (a failed Job deletes its pods, an owner scaled down);
  the first sight of a group counts as an arrival. Until then the last state read of each
  owner is judged, if any (stale by at most the settle time), and the reconciler is woken
  when the settle time ends (:meth:`Ownership.wake_at`). So a finding comes at most
  :data:`SETTLE_SECONDS` after the owner's last member appeared, plus one pass. The reconciler
  holds the ``WaitingForMembers`` Event of a group whose members are still arriving the same
  way (:meth:`Ownership.arriving`): that wait is every gang's first moment and the status says it.
* **Remembered owners.** A failed or suspended Job deletes its pods, so the owners of a group's
  members are remembered per PodGroup uid from every pass in which members exist (at most
  :data:`REMEMBERED`: beyond, the oldest that own no member now go), and forgotten with the
  PodGroup.
* **Leader election.** Only the leader runs passes, so only it reads owners; a new leader (or a
  restart) starts with nothing remembered: a group whose members were all deleted before it
  led says only "0 of N members present" until a member appears again.

**Staged creation** (:mod:`cogate.controller.release.stages`): before the owners are judged, a group
that waits for members and has an owner of a kind in :data:`cogate.controller.release.stages.KINDS`
(the PodGroup's controller ``ownerReference``, a member's controller owner, or the JobSet a
member's ``jobset.sigs.k8s.io/jobset-name`` label names) has that owner read by name (``get``
on ``mpijobs.kubeflow.org``, ``jobsets.jobset.x-k8s.io``; cached as the others). A 404 (no
such object, or no such resource type: the CRD is not installed) is quiet: nothing is said.
When the owner creates its later members only after the first are Ready and the first are
fewer than minMember, the finding is appended to the message and a Warning
``StagedCreation`` event goes to the PodGroup and to the owner; the owners' judgment is then
skipped (the Jobs a JobSet made so far would be misread as too few).

Handed the read functions (:func:`api_reader`, :func:`custom_reader`; ``None`` reads
nothing), the event emitter, the metrics and a monotonic clock. Thread-safe: verdicts are
explained in the reconciler's pool. :meth:`Ownership.explained` says whether the last
verdict of a group was explained by a finding (:mod:`cogate.controller.release.relaying` relays such a
``WaitingForMembers``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from cogate.controller.status import notices
from cogate.controller.release import owners as owners_mod
from cogate.controller.release import stages
from cogate.controller.kube.events import Emitter
from cogate.controller.status.inputs import GroupObject
from cogate.controller.kube.metrics import Metrics
from cogate.controller.status.notices import ObjectRef, log_extra, situation_key
from cogate.controller.release.owners import OwnerRef, OwnerState
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome, with_note
from cogate.kube import api_status, json_body

log = logging.getLogger(__name__)

#: ``read(ref) -> object (API JSON) | None``: None when not found (404); raises on other errors.
ReadFn = Callable[[OwnerRef], "Mapping[str, Any] | None"]

#: ``read((API group, kind), version, namespace, name) -> object (API JSON) | None`` of a staged
#: owner (:data:`cogate.controller.release.stages.KINDS`): None on a 404 (no such object or resource type).
CustomReadFn = Callable[[tuple[str, str], str, str, str], "Mapping[str, Any] | None"]
#: How many staged owners are read per group.
STAGED_READ = 3

#: How long an owner's state read is used while the members it owns are unchanged (seconds).
CACHE_SECONDS = 10.0
#: How many distinct owners are remembered per PodGroup (the most recent).
REMEMBERED = 16
#: Per-request timeout of an owner read (seconds): a slow API server delays one group's verdict only.
REQUEST_TIMEOUT_SECONDS = 5.0
#: How long no new member must have arrived before a waiting group's owners are read (seconds;
#: :func:`settled`). Issue 40: an owner creates its pods in bursts (a ReplicaSet's slow start:
#: 1, 2, 4, ... per sync) over seconds under load; 5 s covers one group's arrivals, not a stuck one.
SETTLE_SECONDS = 5.0
#: Seconds past the settle time the reconciler is woken (clock rounding never finds it unsettled).
_WAKE_MARGIN = 0.01


def settled(before: frozenset[str] | None, present: frozenset[str], last_arrival: float | None, t: float,
            settle: float = SETTLE_SECONDS) -> tuple[bool, float]:
    """Whether a waiting group's owners may be read now, and the time of its last arrival after
    this pass (pure; times in seconds on one monotonic clock).

    ``before``: the uids of the members present at the group's last pass (None: never seen by
    this process); ``present``: those present now (not ``Failed``); ``last_arrival``: when a
    member last arrived (None: never). A member that left or failed (``before - present``
    non-empty) settles the group at once: its owner may have given up. A new uid, or the first
    sight of a group (its owner is about to create its members, or a restarted controller sees
    them), is an arrival at ``t``. Settled when the last arrival is at least ``settle`` seconds
    old (and always when there never was one). Raises ``ValueError`` if ``settle < 0``."""
    if settle < 0:
        raise ValueError(f"settle must be >= 0 seconds, got {settle}")
    if before is not None and before - present:
        return True, last_arrival if last_arrival is not None else t
    if before is None or present - before:
        last_arrival = t
    if last_arrival is None:
        return True, t
    return t - last_arrival >= settle, last_arrival


def api_reader(api_client: Any) -> ReadFn | None:
    """A :data:`ReadFn` over the official client (``get`` on Jobs, ReplicaSets, StatefulSets),
    or None without a client (unit tests' fakes)."""
    if api_client is None:
        return None
    from kubernetes import client

    apps, batch = client.AppsV1Api(api_client), client.BatchV1Api(api_client)
    calls = {("batch", "Job"): batch.read_namespaced_job, ("apps", "ReplicaSet"): apps.read_namespaced_replica_set,
             ("apps", "StatefulSet"): apps.read_namespaced_stateful_set}

    def read(ref: OwnerRef) -> Mapping[str, Any] | None:
        return _body_or_none(lambda: calls[(ref.group, ref.kind)](ref.name, ref.namespace, _preload_content=False,
                                                                  _request_timeout=REQUEST_TIMEOUT_SECONDS))

    return read


def _body_or_none(get: Callable[[], Any]) -> Mapping[str, Any] | None:
    """The JSON body of the (unpreloaded) response of ``get()``, or None on a 404 (the object, or its
    resource type, does not exist); any other API error is raised to the caller, which counts it."""
    try:
        resp = get()
    except Exception as exc:  # noqa: BLE001 - classified by status
        if api_status(exc) == 404:
            return None
        raise
    return json_body(resp)


def custom_reader(api_client: Any) -> CustomReadFn | None:
    """A :data:`CustomReadFn` over the official client's ``CustomObjectsApi`` (``get`` only),
    or None without a client."""
    if api_client is None:
        return None
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)

    def read(kind: tuple[str, str], version: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        plural = stages.KINDS[kind][1]
        return _body_or_none(lambda: custom.get_namespaced_custom_object(
            kind[0], version, namespace, plural, name, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT_SECONDS))

    return read


class Ownership:
    """Owners of members: remembered per PodGroup, read by name when a group waits for members."""

    def __init__(self, read: ReadFn | None, events: Emitter, metrics: Metrics,
                 monotonic: Callable[[], float] = time.monotonic, cache_seconds: float = CACHE_SECONDS,
                 read_custom: CustomReadFn | None = None, settle_seconds: float = SETTLE_SECONDS) -> None:
        if settle_seconds < 0:
            raise ValueError(f"settle_seconds must be >= 0, got {settle_seconds}")
        self._settle = settle_seconds
        #: PodGroup uid -> (uids of its members present at the last pass, time of the last arrival).
        self._arrivals: dict[str, tuple[frozenset[str], float]] = {}
        #: PodGroup uid -> when its owners may be read (monotonic s): a verdict held back by settling.
        self._settles_at: dict[str, float] = {}
        self._read = read
        self._read_custom = read_custom
        #: (kind, namespace, name) -> (read at, the members then, object, or None: absent or unknown).
        self._staged_cache: dict[tuple[tuple[str, str], str, str], tuple[float, tuple[Any, ...], Any]] = {}
        #: PodGroup uids whose last verdict a finding explained.
        self._explained: set[str] = set()
        #: PodGroup uid -> uid of the staged owner its last verdict named (told by a StagedCreation event).
        self._staged_owner: dict[str, str] = {}
        self._events = events
        self._metrics = metrics
        self._monotonic = monotonic
        self._cache_seconds = cache_seconds
        self._lock = threading.Lock()
        #: PodGroup uid -> owner uid -> ref (insertion order: oldest first).
        self._seen: dict[str, dict[str, OwnerRef]] = {}
        #: owner uid -> (read at, what its members looked like, state or None for unknown).
        self._cache: dict[str, tuple[float, tuple[Any, ...], OwnerState | None]] = {}
        self._forbidden: set[str] = set()

    def explain(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float) -> GroupVerdict:
        """``verdict``, with the owners' finding appended to its message when the group waits
        for members its owners can never make (module doc); an ``OwnerCannotComplete`` event
        then. Remembers the owners of ``request.members`` in any case. Never raises."""
        try:
            return self._explain(g, request, verdict, now)
        except Exception:  # noqa: BLE001 - an odd owner must not cost the group its verdict
            log.exception("judging the owners of PodGroup %s/%s failed", *g.key, extra=log_extra(*g.key))
            return verdict

    def explained(self, group_uid: str) -> bool:
        """Whether the group's last verdict was explained by a finding (staged creation or owners)."""
        with self._lock:
            return group_uid in self._explained

    def wake_at(self, group_uid: str) -> float | None:
        """When the group's owners may be read (monotonic seconds), if its last verdict waited for
        members and was judged without reading them because members were still arriving; else None.
        The reconciler runs a pass then (module doc, "Settling")."""
        with self._lock:
            return self._settles_at.get(group_uid)

    def arriving(self, group_uid: str) -> bool:
        """Whether the group's last verdict waited for members that are still arriving (no
        :data:`SETTLE_SECONDS` without an arrival yet, no member left): its ``WaitingForMembers``
        Event is held until then (issue 40: one Event per gang for a wait of a few seconds that
        the ``Released`` condition already says)."""
        with self._lock:
            return group_uid in self._settles_at

    def staged_owner(self, group_uid: str) -> str:
        """The uid of the staged owner the group's last verdict named ('' if none): it heard the
        finding already (``StagedCreation``), so the relayed wait skips it."""
        with self._lock:
            return self._staged_owner.get(group_uid, "")

    def _explain(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float) -> GroupVerdict:
        with self._lock:
            self._staged_owner.pop(g.uid, None)
        out = self._judge(g, request, verdict, now)
        with self._lock:
            if out is verdict:
                self._explained.discard(g.uid)
            else:
                self._explained.add(g.uid)
        return out

    def _judge(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float) -> GroupVerdict:
        known = self._remember(g.uid, request)
        uids = frozenset(m.uid for m in request.members if m.phase != "Failed")
        present = len(uids)
        waits = Outcome(verdict.outcome) is Outcome.WAITING_FOR_MEMBERS and present < request.min_member
        may_read = self._settled(g.uid, uids, waits)
        found = self._staged(g, request, now, may_read) if waits else None
        if found is not None:
            self._events.clear(g.uid, "owner")
            return with_note(verdict, found)
        self._events.clear(g.uid, "staged")
        self._events.clear(g.uid, "staged-owner")
        if (self._read is None or Outcome(verdict.outcome) is not Outcome.WAITING_FOR_MEMBERS
                or present >= request.min_member or not known
                or not all(owners_mod.readable(r) for r in known)):
            self._events.clear(g.uid, "owner")
            return verdict
        states = {r.uid: self._state(r, request, may_read) for r in known}
        finding = owners_mod.judge(request.min_member, request.members, known, states)
        if finding is None:
            self._events.clear(g.uid, "owner")
            return verdict
        notice = notices.owner_cannot_complete(finding.message, finding.warning)
        self._events.emit(g.ref, "owner", notice, now, key=situation_key(finding.message))
        return with_note(verdict, finding.message)

    def _settled(self, group_uid: str, present: frozenset[str], waits: bool) -> bool:
        """Whether the group's owners may be read in this pass (:func:`settled`); remembers its
        members and last arrival, and the settle time of a waiting group held back."""
        t = self._monotonic()
        with self._lock:
            before = self._arrivals.get(group_uid)
            ok, last = settled(before[0] if before else None, present, before[1] if before else None, t,
                               self._settle)
            self._arrivals[group_uid] = (present, last)
            if waits and not ok:
                self._settles_at[group_uid] = last + self._settle + _WAKE_MARGIN
            else:
                self._settles_at.pop(group_uid, None)
        return ok

    # -- staged creation ---------------------------------------------------------------
    def _staged(self, g: GroupObject, request: GroupRequest, now: float, may_read: bool = True) -> str | None:
        """The staged-creation finding's message for a group waiting for members (events
        emitted), or None. Never raises for an odd owner: it is logged and left unjudged."""
        if self._read_custom is None:
            return None
        for kind, version, name, uid in _staged_candidates(g, request)[:STAGED_READ]:
            raw = self._staged_object(kind, version, g.key[0], name, request, may_read)
            if not isinstance(raw, Mapping):
                continue
            meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
            if uid and meta.get("uid") and meta.get("uid") != uid:
                continue  # another object under that name
            try:
                found = stages.staged(kind, raw, g.key[1], request.members, request.min_member)
            except ValueError as exc:
                log.warning("%s %s/%s: %s; not judged", kind[1], g.key[0], name, exc, extra=log_extra(*g.key))
                continue
            if found is None:
                continue
            notice = notices.staged_creation(found.message)
            key = situation_key(found.message)
            self._events.emit(g.ref, "staged", notice, now, key=key)
            owner = ObjectRef(g.key[0], name, str(meta.get("uid") or uid), kind=kind[1],
                              api_version=str(raw.get("apiVersion") or f"{kind[0]}/{version}"))
            self._events.emit(owner, "staged-owner", notice, now, key=key, obj=g.uid)
            with self._lock:
                self._staged_owner[g.uid] = owner.uid
            return found.message
        return None

    def _staged_object(self, kind: tuple[str, str], version: str, namespace: str, name: str,
                       request: GroupRequest, may_read: bool = True) -> Any:
        """The owner's object, cached while the group's members are unchanged and for the
        cache time (None: absent, or unknown after an error); without ``may_read`` (members
        still arriving) the last one read, whatever its age, and nothing is read."""
        assert self._read_custom is not None
        mine = tuple(sorted((m.uid, m.phase) for m in request.members))
        key = (kind, namespace, name)
        t = self._monotonic()
        with self._lock:
            hit = self._staged_cache.get(key)
        if not may_read:
            return hit[2] if hit is not None else None
        if hit is not None and hit[1] == mine and t - hit[0] < self._cache_seconds:
            return hit[2]
        try:
            raw = self._read_custom(kind, version, namespace, name)
            self._metrics.owner_reads.labels(kind[1], "ok" if raw is not None else "not_found").inc()
        except Exception as exc:  # noqa: BLE001 - unknown, tried again after the cache time
            self._read_failed(kind[1], f"{kind[1]} {namespace}/{name}", exc)
            raw = None
        with self._lock:
            self._staged_cache[key] = (t, mine, raw)
        return raw

    def _remember(self, group_uid: str, request: GroupRequest) -> list[OwnerRef]:
        """Add the owners of ``request.members`` to the group's remembered ones; all of them."""
        with self._lock:
            seen = self._seen.setdefault(group_uid, {})
            for m in request.members:
                o = m.owner
                if o and o[3] not in seen:
                    seen[o[3]] = OwnerRef(o[0], o[1], m.namespace, o[2], o[3])
            if len(seen) > REMEMBERED:  # drop the oldest that own no member now
                current = {m.owner[3] for m in request.members if m.owner}
                for uid in [u for u in seen if u not in current][:len(seen) - REMEMBERED]:
                    del seen[uid]
            return list(seen.values())

    def _state(self, ref: OwnerRef, request: GroupRequest, may_read: bool = True) -> OwnerState | None:
        """``ref``'s state: cached while its members are unchanged and for :data:`CACHE_SECONDS`,
        else read (None: unknown, after an error or a malformed object); without ``may_read``
        (members still arriving) the last state read, whatever its age, and nothing is read."""
        mine = tuple(sorted((m.uid, m.phase, m.node_name, m.gates) for m in request.members
                            if m.owner and m.owner[3] == ref.uid))
        t = self._monotonic()
        with self._lock:
            hit = self._cache.get(ref.uid)
        if not may_read:
            return hit[2] if hit is not None else None
        if hit is not None and hit[1] == mine and t - hit[0] < self._cache_seconds:
            return hit[2]
        state = self._fetch(ref)
        with self._lock:
            self._cache[ref.uid] = (t, mine, state)
        return state

    def _read_failed(self, kind: str, what: str, exc: Exception) -> None:
        """Count and log a failed owner read (a 403 once per kind: the right is missing)."""
        self._metrics.owner_reads.labels(kind, "error").inc()
        if api_status(exc) == 403:
            if kind not in self._forbidden:
                self._forbidden.add(kind)
                log.warning("cannot read %s objects (403 Forbidden): owners of that kind are not judged; grant get "
                            "on them (the chart does)", kind)
        else:
            log.warning("reading owner %s failed: %s", what, exc)

    def _fetch(self, ref: OwnerRef) -> OwnerState | None:
        assert self._read is not None
        try:
            raw = self._read(ref)
        except Exception as exc:  # noqa: BLE001 - unknown, tried again after the cache time
            self._read_failed(ref.kind, str(ref), exc)
            return None
        if raw is None:
            self._metrics.owner_reads.labels(ref.kind, "not_found").inc()
            return owners_mod.gone(ref)
        try:
            state = owners_mod.owner_state(ref, raw)
        except ValueError as exc:
            self._metrics.owner_reads.labels(ref.kind, "invalid").inc()
            log.warning("owner %s: %s; not judged", ref, exc)
            return None
        self._metrics.owner_reads.labels(ref.kind, "ok").inc()
        return state

    def forget(self, live_uids: Collection[str]) -> None:
        """Forget PodGroups not in ``live_uids`` and the cached owners none of the rest remembers."""
        with self._lock:
            for uid in [u for u in self._seen if u not in live_uids]:
                del self._seen[uid]
            for memo in (self._arrivals, self._settles_at):
                for uid in [u for u in memo if u not in live_uids]:
                    del memo[uid]
            kept = {o for seen in self._seen.values() for o in seen}
            for o in [o for o in self._cache if o not in kept]:
                del self._cache[o]
            self._explained &= set(live_uids)
            for uid in [u for u in self._staged_owner if u not in live_uids]:
                del self._staged_owner[uid]
            t = self._monotonic()
            for k in [k for k, v in self._staged_cache.items() if t - v[0] >= self._cache_seconds]:
                del self._staged_cache[k]


def _staged_candidates(g: GroupObject, request: GroupRequest) -> list[tuple[tuple[str, str], str, str, str]]:
    """``((API group, kind), version, name, uid)`` of the group's owners of a staged kind: the
    PodGroup's controller owner, the members' controller owners, the JobSets the members'
    ``jobset.sigs.k8s.io/jobset-name`` labels name (uid ''); each once, in that order."""
    out: dict[tuple[tuple[str, str], str], tuple[tuple[str, str], str, str, str]] = {}

    def add(api_version: str, kind: str, name: str, uid: str) -> None:
        group, _, version = api_version.rpartition("/")
        k = (group, kind)
        if k in stages.KINDS and name and (k, name) not in out:
            out[(k, name)] = (k, version or stages.KINDS[k][0], name, uid)

    if len(g.owner) == 4:
        add(*g.owner)
    for m in request.members:
        if len(m.owner) == 4:
            add(*m.owner)
    for m in request.members:
        name = m.labels.get(stages.JOBSET_NAME_LABEL)
        if name:
            add(f"{stages.JOBSET[0]}/{stages.KINDS[stages.JOBSET][0]}", stages.JOBSET[1], name, "")
    return list(out.values())
