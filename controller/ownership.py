"""The owners of waiting groups' members: remembered, read by name when needed, judged by :mod:`owners`.

One verb a verdict goes through (:meth:`Ownership.explain`) and one after each pass
(:meth:`Ownership.forget`). A group that waits for members (verdict ``WaitingForMembers``
with fewer than minMember present) whose owners can never make minMember
(:func:`cogate.controller.owners.judge`: a Job failed, suspended or complete, a StatefulSet
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
  members it owns (a pod created, deleted, bound) reads it again on the next pass. A released
  group, or one waiting for room, costs no request. Errors are cached as "unknown" for the
  same time (no retry storm; a 403 is logged once per kind): an unknown owner is never judged.
* **Remembered owners.** A failed or suspended Job deletes its pods, so the owners of a group's
  members are remembered per PodGroup uid from every pass in which members exist (at most
  :data:`REMEMBERED`: beyond, the oldest that own no member now go), and forgotten with the
  PodGroup.
* **Leader election.** Only the leader runs passes, so only it reads owners; a new leader (or a
  restart) starts with nothing remembered: a group whose members were all deleted before it
  led says only "0 of N members present" until a member appears again.

Handed the read function (:func:`api_reader`; ``None`` reads nothing), the event emitter, the
metrics and a monotonic clock. Thread-safe: verdicts are explained in the reconciler's pool.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from cogate.controller import notices
from cogate.controller import owners as owners_mod
from cogate.controller.events import Emitter
from cogate.controller.inputs import GroupObject
from cogate.controller.metrics import Metrics
from cogate.controller.notices import log_extra, situation_key
from cogate.controller.owners import OwnerRef, OwnerState
from cogate.controller.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.kube import api_status, json_body

log = logging.getLogger(__name__)

#: ``read(ref) -> object (API JSON) | None``: None when not found (404); raises on other errors.
ReadFn = Callable[[OwnerRef], "Mapping[str, Any] | None"]

#: How long an owner's state read is used while the members it owns are unchanged (seconds).
CACHE_SECONDS = 10.0
#: How many distinct owners are remembered per PodGroup (the most recent).
REMEMBERED = 16
#: Per-request timeout of an owner read (seconds): a slow API server delays one group's verdict only.
REQUEST_TIMEOUT_SECONDS = 5.0


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
        try:
            resp = calls[(ref.group, ref.kind)](ref.name, ref.namespace, _preload_content=False,
                                                _request_timeout=REQUEST_TIMEOUT_SECONDS)
        except Exception as exc:  # noqa: BLE001 - classified by status
            if api_status(exc) == 404:
                return None
            raise
        return json_body(resp)

    return read


class Ownership:
    """Owners of members: remembered per PodGroup, read by name when a group waits for members."""

    def __init__(self, read: ReadFn | None, events: Emitter, metrics: Metrics,
                 monotonic: Callable[[], float] = time.monotonic, cache_seconds: float = CACHE_SECONDS) -> None:
        self._read = read
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

    def _explain(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float) -> GroupVerdict:
        known = self._remember(g.uid, request)
        present = sum(1 for m in request.members if m.phase != "Failed")
        if (self._read is None or Outcome(verdict.outcome) is not Outcome.WAITING_FOR_MEMBERS
                or present >= request.min_member or not known
                or not all(owners_mod.readable(r) for r in known)):
            self._events.clear(g.uid, "owner")
            return verdict
        states = {r.uid: self._state(r, request) for r in known}
        finding = owners_mod.judge(request.min_member, request.members, known, states)
        if finding is None:
            self._events.clear(g.uid, "owner")
            return verdict
        notice = notices.owner_cannot_complete(finding.message, finding.warning)
        self._events.emit(g.ref, "owner", notice, now, key=situation_key(finding.message))
        return dataclasses.replace(verdict, message=f"{verdict.message}; {finding.message}")

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

    def _state(self, ref: OwnerRef, request: GroupRequest) -> OwnerState | None:
        """``ref``'s state: cached while its members are unchanged and for :data:`CACHE_SECONDS`,
        else read (None: unknown, after an error or a malformed object)."""
        mine = tuple(sorted((m.uid, m.phase, m.node_name, m.gates) for m in request.members
                            if m.owner and m.owner[3] == ref.uid))
        t = self._monotonic()
        with self._lock:
            hit = self._cache.get(ref.uid)
        if hit is not None and hit[1] == mine and t - hit[0] < self._cache_seconds:
            return hit[2]
        state = self._fetch(ref)
        with self._lock:
            self._cache[ref.uid] = (t, mine, state)
        return state

    def _fetch(self, ref: OwnerRef) -> OwnerState | None:
        assert self._read is not None
        try:
            raw = self._read(ref)
        except Exception as exc:  # noqa: BLE001 - unknown, tried again after the cache time
            code = api_status(exc)
            self._metrics.owner_reads.labels(ref.kind, "error").inc()
            if code == 403:
                if ref.kind not in self._forbidden:
                    self._forbidden.add(ref.kind)
                    log.warning("cannot read %s objects (403 Forbidden): owners of that kind are not judged; grant "
                                "get on them (the chart does)", ref.kind)
            else:
                log.warning("reading owner %s failed: %s", ref, exc)
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
            kept = {o for seen in self._seen.values() for o in seen}
            for o in [o for o in self._cache if o not in kept]:
                del self._cache[o]
