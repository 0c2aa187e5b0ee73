"""Operators' size against their gang (I/O room): RayCluster, MPIJob, PyTorchJob read by name.

The rules are pure (:mod:`cogate.controller.release.operators`; docs/semantics.md "Health after the
start"); this room finds the owner, reads it and says what it found. Verbs:

- :meth:`OwnerSizes.adjust` (once a pass, before planning): for each PodGroup whose owner is an
  operator object (its controller ``ownerReference``, else a member's controller owner of such a
  kind) and that is short of minMember (fewer live members) or follows its owner's size
  (annotation ``cogate.dev/follow-owner-size: "true"``), the owner is read (``get``, cached
  :data:`CACHE_SECONDS` while the group's members stay unchanged from one judging pass to the next:
  a scale-down deletes pods, so the pass that sees them go reads it again, also when the members
  left are a set the group had before, e.g. the first 3 pods of a RayCluster created moments ago)
  and judged. A group that can never form gets a Warning ``OwnerCannotComplete`` event on the
  PodGroup **and on the owner** in that pass; a following group is planned, counted and reported
  with minMember lowered to its owner's size and without its
  ``spec.minResources`` (summed for the larger gang; the PodGroup's spec is left as written),
  with a Normal ``FollowingOwnerSize`` event.
- :meth:`OwnerSizes.conditions` (per group, with the other conditions): ``OwnerCanComplete``.

A 404 (no such object, or the CRD is not installed) or an unreadable object says nothing; a 403
is logged once per kind (RBAC: ``get`` on ``rayclusters.ray.io``, ``mpijobs.kubeflow.org``,
``pytorchjobs.kubeflow.org``). Only the leader runs passes; what is kept is rebuilt by reading.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cogate.controller.kube.events import Emitter
from cogate.controller.kube.metrics import Metrics
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import min_member_of
from cogate.controller.release import operators as ops
from cogate.controller.status import conditions as cond_mod
from cogate.controller.status import notices
from cogate.controller.status.inputs import GroupObject
from cogate.controller.status.notices import ObjectRef, log_extra, situation_key
from cogate.kube import api_status, json_body
from cogate.models import PodGroupStatus

log = logging.getLogger(__name__)

__all__ = ["OwnerSizes", "Found", "FOLLOW_ANNOTATION", "operator_reader", "operator_owner", "follows"]

#: ``read((API group, kind), namespace, name) -> object (API JSON) | None`` (None: 404).
ReadFn = Callable[[tuple[str, str], str, str], "Mapping[str, Any] | None"]
#: How long an owner read is used while the group's members are unchanged (seconds).
CACHE_SECONDS = 10.0
#: :meth:`OwnerSizes._judge`'s answer for an operator that could not be read or judged.
_UNKNOWN = object()
#: The opt-in annotation: the gang follows its operator's size (minMember lowered to it).
FOLLOW_ANNOTATION = "cogate.dev/follow-owner-size"


def operator_reader(api_client: Any, timeout: float = 5.0) -> ReadFn | None:
    """A :data:`ReadFn` over the official client's ``CustomObjectsApi`` (``get`` only), or None."""
    if api_client is None:
        return None
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)

    def read(kind: tuple[str, str], namespace: str, name: str) -> Mapping[str, Any] | None:
        version, plural = ops.KINDS[kind]
        try:
            resp = custom.get_namespaced_custom_object(kind[0], version, namespace, plural, name,
                                                       _preload_content=False, _request_timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - classified by status
            if api_status(exc) == 404:
                return None
            raise
        return json_body(resp)

    return read


@dataclass(frozen=True)
class Found:
    """What the last read said of one group's owner: ``owner`` (the Event's object), ``size``,
    ``verdict`` (``None``: it can complete the group), ``spec_min`` (the PodGroup's own minMember),
    ``following`` (minMember lowered to ``size.pods``)."""

    owner: ObjectRef
    size: ops.Size
    verdict: ops.Verdict | None
    spec_min: int
    following: bool


def follows(annotations: Mapping[str, str] | None) -> bool:
    """The PodGroup opts in to following its owner's size (``"true"``, case and blanks ignored)."""
    return (annotations or {}).get(FOLLOW_ANNOTATION, "").strip().lower() == "true"


def operator_owner(g: GroupObject, members: Sequence[PodInfo]) -> tuple[tuple[str, str], str, str] | None:
    """``((API group, kind), name, uid)`` of the group's operator owner: the PodGroup's controller
    owner, else the first member's controller owner, of a kind in :data:`operators.KINDS`."""
    for owner in (g.owner, *(m.owner for m in members)):
        if len(owner) == 4:
            api_version, kind, name, uid = owner
            key = (api_version.rpartition("/")[0], kind)
            if key in ops.KINDS and name:
                return key, name, uid
    return None


class OwnerSizes:
    """Operators' size against their gang; see the module doc."""

    def __init__(self, read: ReadFn | None, events: Emitter, metrics: Metrics, monotonic: Callable[[], float],
                 cache_seconds: float = CACHE_SECONDS) -> None:
        self._read = read
        self._events = events
        self._metrics = metrics
        self._monotonic = monotonic
        self._cache_seconds = cache_seconds
        self._lock = threading.Lock()
        #: (kind, namespace, name) -> (read at, object or None).
        self._cache: dict[tuple[tuple[str, str], str, str], tuple[float, Any]] = {}
        #: PodGroup uid -> its members at the last pass that judged it ((uid, phase, deleting), sorted;
        #: dropped by a pass that did not judge it): a change makes the judgement read the owner again.
        self._seen: dict[str, tuple[tuple[str, str, bool], ...]] = {}
        #: PodGroup uid -> what the last pass found.
        self._found: dict[str, Found] = {}
        #: PodGroup uids whose operator could not be read or judged in the last pass (404, error,
        #: malformed): their condition is left as it is.
        self._unknown: set[str] = set()
        self._forbidden: set[str] = set()

    def adjust(self, groups: Mapping[tuple[str, str], GroupObject],
               members: Mapping[tuple[str, str], Sequence[PodInfo]], now: float) -> dict[tuple[str, str], GroupObject]:
        """``groups`` with following ones' minMember lowered to their owner's size; the events of
        this pass's findings. Never raises for an odd owner (logged, left unjudged)."""
        out = dict(groups)
        found: dict[str, Found] = {}
        unknown: set[str] = set()
        for key, g in groups.items():
            try:
                f = self._judge(g, members.get(key, ()))
            except Exception:  # noqa: BLE001 - an odd owner must not cost the pass
                log.exception("judging the operator owner of PodGroup %s/%s failed", *key, extra=log_extra(*key))
                f = None
            if f is _UNKNOWN:
                unknown.add(g.uid)
            if not isinstance(f, Found):
                self._events.clear(g.uid, "operator")
                self._events.clear(g.uid, "operator-owner")
                continue
            found[g.uid] = f
            self._tell(g, f, now)
            if f.following:
                # spec.minResources was summed for the larger gang (KubeRay sums every pod's
                # requests): it is not applied while the gang follows a smaller owner.
                spec = g.pg.spec.model_copy(update={"minMember": f.size.pods, "minResources": None})
                out[key] = replace(g, pg=g.pg.model_copy(update={"spec": spec}))
        with self._lock:
            self._found, self._unknown = found, unknown
            live = {g.uid for g in groups.values()}
            self._seen = {uid: m for uid, m in self._seen.items() if uid in live}
            t = self._monotonic()
            for k in [k for k, v in self._cache.items() if t - v[0] >= self._cache_seconds]:
                del self._cache[k]
        return out

    def _judge(self, g: GroupObject, members: Sequence[PodInfo]) -> Found | object | None:
        """What the group's operator says (:class:`Found`), ``None`` when nothing is to be judged
        (no operator, or not short and not following), :data:`_UNKNOWN` when it could not be read."""
        following = follows(g.pg.metadata.annotations)
        spec_min = min_member_of(g.pg)
        present = sum(1 for m in members if m.phase != "Failed" and not m.deleting)
        if self._read is None or (not following and present >= spec_min):
            with self._lock:
                self._seen.pop(g.uid, None)  # the next judgement reads the owner afresh
            return None
        who = operator_owner(g, members)
        if who is None:
            return None
        kind, name, uid = who
        mine = tuple(sorted((m.uid, m.phase, m.deleting) for m in members))
        with self._lock:
            changed, self._seen[g.uid] = self._seen.get(g.uid) != mine, mine
        raw = self._object(kind, g.key[0], name, fresh=changed)
        if not isinstance(raw, Mapping):
            return _UNKNOWN
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
        if uid and meta.get("uid") and meta.get("uid") != uid:
            return _UNKNOWN  # another object under that name
        try:
            size = ops.size(kind, raw)
        except ValueError as exc:
            log.warning("%s %s/%s: %s; not judged", kind[1], g.key[0], name, exc, extra=log_extra(*g.key))
            return _UNKNOWN
        if size is None:
            return None
        owner = ObjectRef(g.key[0], name, str(meta.get("uid") or uid), kind=kind[1],
                          api_version=str(raw.get("apiVersion") or f"{kind[0]}/{ops.KINDS[kind][0]}"))
        lowered = following and 0 < size.pods < spec_min
        verdict = ops.judge(f"{kind[1]} {g.key[0]}/{name}", size, spec_min, following=lowered)
        return Found(owner, size, verdict, spec_min, lowered)

    def _tell(self, g: GroupObject, f: Found, now: float) -> None:
        """The finding on the PodGroup and on the owner, each once per situation."""
        if f.verdict is None:
            self._events.clear(g.uid, "operator")
            self._events.clear(g.uid, "operator-owner")
            return
        notice = (notices.following_owner_size(f.verdict.message) if f.following
                  else notices.owner_cannot_complete(f.verdict.message, f.verdict.warning))
        key = situation_key(f.verdict.message)
        self._events.emit(g.ref, "operator", notice, now, key=key)
        relayed = notice._replace(message=f"PodGroup {g.key[0]}/{g.key[1]}: {notice.message}"[:1000])
        self._events.emit(f.owner, "operator-owner", relayed, now, key=key, obj=g.uid)

    def _object(self, kind: tuple[str, str], namespace: str, name: str, *, fresh: bool) -> Any:
        """The owner's object (None: absent or unknown), read again when ``fresh`` (the group's members
        changed since the last pass that judged it) or the read is :data:`CACHE_SECONDS` old. Comparing the members
        with those at the read instead would miss a change and its undoing between two reads."""
        assert self._read is not None
        key = (kind, namespace, name)
        t = self._monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and not fresh and t - hit[0] < self._cache_seconds:
            return hit[1]
        try:
            raw = self._read(kind, namespace, name)
            self._metrics.owner_reads.labels(kind[1], "ok" if raw is not None else "not_found").inc()
        except Exception as exc:  # noqa: BLE001 - unknown, tried again after the cache time
            self._metrics.owner_reads.labels(kind[1], "error").inc()
            if api_status(exc) != 403:
                log.warning("reading %s %s/%s failed: %s", kind[1], namespace, name, exc)
            elif kind[1] not in self._forbidden:
                self._forbidden.add(kind[1])
                log.warning("cannot read %s objects (403 Forbidden): their size is not judged; grant get on them "
                            "(the chart does)", kind[1])
            raw = None
        with self._lock:
            self._cache[key] = (t, raw)
        return raw

    def conditions(self, status: PodGroupStatus, g: GroupObject, now: float) -> PodGroupStatus:
        """``status`` with ``OwnerCanComplete`` written from the last pass's finding for ``g``."""
        with self._lock:
            f = self._found.get(g.uid)
            if g.uid in self._unknown:
                return status  # not read or not readable: left as it is
        conds = cond_mod.ConditionSet(status.conditions, now, g.pg.metadata.generation)
        if f is None:
            cond_mod.write_owner_can_complete(conds, verdict="", following="", suspended=False, fine="")
        else:
            text = f.verdict.message if f.verdict is not None else ""
            cond_mod.write_owner_can_complete(
                conds, verdict=text if f.verdict is not None and not f.following else "",
                following=text if f.following else "", suspended=f.size.suspended,
                fine=f"{f.owner.kind} {f.owner.namespace}/{f.owner.name} keeps {f.size.pods} pods "
                     f"({f.size.detail}) for minMember {f.spec_min}")
        return status.model_copy(update={"conditions": conds.to_list()})
