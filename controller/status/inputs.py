"""The planner's input, read from the informer caches (pure).

- :class:`GroupObject`, :func:`group_object`: a cached PodGroup (the PodGroups informer's converter);
- :func:`members_by_group`, :func:`build_group_requests`: live members per group and the
  ``verdicts.GroupRequest`` of each (docs/semantics.md, "Members"), ``spec.minResources`` read
  with :func:`cogate.controller.model.minresources.parse`; :func:`after_departures`:
  ``released`` judged again for groups that lost members in this pass ("Generations");
- :func:`resolve_volumes`: members with their claims' and bound PVs' constraints filled in
  (:func:`cogate.controller.model.volumes.resolve`) from the PVC and PV informers;
- :func:`restored_reservations`: the room of released members that were ungated (pinned) but
  are not bound yet, rebuilt from the cluster when a process starts deciding (start, or
  leadership gained), since reservations live in memory only;
- :func:`timeout_victims`: whom ``--evict-on-timeout`` (and ``--evict-below-quorum``) evicts;
- :func:`waiting_for_pod_group`: gated pods whose PodGroup does not exist (an event says so).

Times are epoch seconds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cogate import api
from cogate.controller.model import leftovers
from cogate.controller.model import minresources as minres
from cogate.controller.model import recovery
from cogate.controller.model import groupsets
from cogate.controller.model import roles as roles_mod
from cogate.controller.topology import constraints as topology
from cogate.controller.status import status as status_mod
from cogate.controller.model import volumes as volumes_mod
from cogate.controller.status.notices import ObjectRef
from cogate.controller.planning.patches import awaiting_bind
from cogate.controller.model.verdicts import GroupRequest, min_member_of
from cogate.controller.model.records import PodInfo, Reservation, controller_owner, member_key
from cogate.models import PodGroup, parse_time


@dataclass(frozen=True)
class GroupObject:
    """A cached PodGroup: the validated model plus the raw status (for ``status_patch``)."""

    pg: PodGroup
    raw_status: Mapping[str, Any] | None
    uid: str
    resource_version: str = field(default="", compare=False)
    #: Other managers that own status fields cogate writes (``leftovers.foreign_status_writers``).
    status_writers: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    #: The PodGroup's controller owner (``ownerReferences`` entry with ``controller: true``) as
    #: ``(apiVersion, kind, name, uid)``, ``()`` when none: an operator's PodGroup names its
    #: MPIJob, RayCluster, ... (where explanations are relayed, :mod:`cogate.controller.release.relaying`).
    owner: tuple[str, ...] = field(default=(), compare=False)
    #: Who last set the annotation ``cogate.dev/force-release`` and when: ``(manager, time)`` from
    #: ``metadata.managedFields`` (:func:`annotation_writer`), ``()`` when unknown or not set.
    force_release_by: tuple[str, ...] = field(default=(), compare=False)

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
    phase = leftovers.phase_for_release(raw)  # another writer's phase is never taken for a release
    if phase is not None:
        pg = pg.model_copy(update={"status": pg.status.model_copy(update={"phase": phase})})
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    return GroupObject(pg, status if isinstance(status, dict) else None, pg.metadata.uid or "",
                       pg.metadata.resourceVersion or "", leftovers.foreign_status_writers(raw),
                       controller_owner(meta.get("ownerReferences")),
                       annotation_writer(meta, api.FORCE_RELEASE_ANNOTATION))


def annotation_writer(meta: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """``(manager, time)`` of the ``metadata.managedFields`` entry that owns annotation ``key``
    (server-side field management: the last manager that set it, and the RFC 3339 time of that
    entry's last change), ``()`` when none does or the entries are unreadable. Never raises:
    managedFields are the API server's bookkeeping, not the object's meaning."""
    entries = meta.get("managedFields") if isinstance(meta, Mapping) else None
    for e in entries if isinstance(entries, list) else ():
        fields = e.get("fieldsV1") if isinstance(e, Mapping) else None
        m = fields.get("f:metadata") if isinstance(fields, Mapping) else None
        a = m.get("f:annotations") if isinstance(m, Mapping) else None
        if isinstance(a, Mapping) and f"f:{key}" in a and isinstance(e.get("manager"), str):
            when = e.get("time")
            return (e["manager"], when if isinstance(when, str) else "")
    return ()


def members_by_group(pods: Iterable[PodInfo]) -> dict[tuple[str, str], list[PodInfo]]:
    """Live members per (namespace, group) (:func:`cogate.controller.model.records.member_key`, docs/semantics.md)."""
    out: dict[tuple[str, str], list[PodInfo]] = {}
    for p in pods:
        key = member_key(p)
        if key:
            out.setdefault(key, []).append(p)
    for ms in out.values():
        ms.sort(key=lambda p: (p.created, p.name))
    return out


def build_group_requests(groups: Iterable[GroupObject], members: Mapping[tuple[str, str], Sequence[PodInfo]],
                         gate: str = api.DEFAULT_GATE_NAME, levels: tuple[str, ...] = (),
                         kueue_levels: Sequence[tuple[str, ...]] = ()) -> list[GroupRequest]:
    """``verdicts.GroupRequest`` per cached PodGroup. ``levels``: the controller's topology levels
    (node labels coarse to fine, ``--topology-levels``); ``kueue_levels``: each Kueue ``Topology``'s
    levels, in name order (:func:`cogate.controller.topology.constraints.parse`)."""
    out = []
    for g in groups:
        pg = g.pg
        ms = tuple(members.get(g.key, ()))
        created = parse_time(pg.metadata.creationTimestamp) if pg.metadata.creationTimestamp else 0.0
        m = min_member_of(pg)
        out.append(GroupRequest(namespace=pg.metadata.namespace, name=pg.metadata.name, min_member=m,
                                created=created, released=status_mod.release_stands(pg.status, ms, gate, min_member=m,
                                                                                   whole=_whole(pg)),
                                members=ms, **_min_resources(pg.spec.minResources), released_at=_released_at(pg),
                                **_topology(pg.metadata.annotations or {}, ms, levels, kueue_levels),
                                **_roles(pg.metadata.annotations),
                                **_group_set(pg.metadata.namespace, pg.metadata.name, pg.metadata.annotations)))
    return out


def _released_at(pg: PodGroup) -> float:
    """``GroupRequest.released_at``: ``status.scheduleStartTime`` in epoch seconds, 0.0 without one
    or when it does not parse."""
    start = pg.status.scheduleStartTime if pg.status is not None else None
    if not start:
        return 0.0
    try:
        return parse_time(start)
    except (TypeError, ValueError):
        return 0.0


def _whole(pg: PodGroup) -> bool:
    """The group's recovery rule is ``whole`` (:func:`cogate.controller.model.recovery.policy_of`)."""
    return recovery.policy_of(pg.metadata.annotations).whole


def _group_set(namespace: str, name: str, annotations: Mapping[str, str] | None) -> dict[str, Any]:
    """``GroupRequest``'s ``group_set`` (:func:`cogate.controller.model.groupsets.parse`) or
    ``group_set_error`` naming the annotation."""
    try:
        return {"group_set": groupsets.parse(namespace, name, annotations)}
    except groupsets.SetError as e:
        return {"group_set_error": str(e)}


def _roles(annotations: Mapping[str, str] | None) -> dict[str, Any]:
    """``GroupRequest``'s ``roles`` (:func:`cogate.controller.model.roles.parse`) or ``roles_error``
    naming the annotation."""
    try:
        return {"roles": roles_mod.parse(annotations)}
    except roles_mod.RolesError as e:
        return {"roles_error": str(e)}


def _topology(annotations: Mapping[str, str], members: Sequence[PodInfo], levels: tuple[str, ...],
              kueue_levels: Sequence[tuple[str, ...]]) -> dict[str, Any]:
    """``GroupRequest``'s ``topology`` or ``topology_error`` naming the annotation."""
    try:
        parsed = topology.parse(annotations, (dict(m.topology_asked) for m in members if m.topology_asked),
                                levels, kueue_levels)
    except topology.TopologyError as e:
        return {"topology_error": str(e)}
    return {"topology": parsed}


def _min_resources(raw: Mapping[str, str | int] | None) -> dict[str, Any]:
    """``GroupRequest``'s ``min_resources`` (sorted pairs, :func:`cogate.controller.model.minresources.parse`)
    or ``min_resources_error`` naming the field."""
    try:
        parsed = minres.parse(raw)
    except minres.MinResourcesError as e:
        return {"min_resources_error": str(e)}
    return {"min_resources": None if parsed is None else tuple(sorted(parsed.items()))}


def after_departures(requests: Iterable[GroupRequest], groups: Mapping[tuple[str, str], GroupObject],
                     lost: Collection[tuple[str, str]], gate: str = api.DEFAULT_GATE_NAME) -> list[GroupRequest]:
    """``requests`` with ``released`` judged again for the groups in ``lost`` (members left them in
    this pass, before ``Disrupted`` records it): ``status.release_stands(..., lost=True)``, so a
    Job's pods deleted and its new ones created between two passes are decided as a gang."""
    out = []
    for r in requests:
        key = (r.namespace, r.name)
        if r.released and key in lost and key in groups:
            stands = status_mod.release_stands(groups[key].pg.status, r.members, gate, min_member=r.min_member,
                                               lost=True, whole=_whole(groups[key].pg))
            r = replace(r, released=stands) if not stands else r
        out.append(r)
    return out


def restored_reservations(requests: Iterable[GroupRequest], now: float, ttl: float) -> list[Reservation]:
    """Reservations for released members the scheduler has not bound yet (rebuilt after a restart).

    A member counts when it carries no scheduling gate at all (ours was removed; another gate
    means the scheduler is not on it yet), it is unbound, not terminal, not deleting and pinned
    to one node (:func:`cogate.controller.planning.patches.awaiting_bind`), whether or not its group's
    release still stands (a timed-out group's pinned members still bind there and nowhere
    else). Each gets ``Reservation(expires=now + ttl)`` on that node, as the release that
    ungated it would have made; the planner keeps it for as long as the member stays pinned
    there and unbound, the TTL notwithstanding (docs/semantics.md, "Reservations, order and
    starvation"; :meth:`cogate.controller.planning.planner.Pass._still_holds`). Members released with
    placement ``free`` carry no pin and cannot be restored. Times: epoch seconds.
    """
    out: list[Reservation] = []
    for r in requests:
        for m in r.members:
            node = awaiting_bind(m)
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
    to a node: :func:`cogate.controller.planning.patches.awaiting_bind`; node affinity cannot change once the gate is gone, so a
    member whose planned node lost its room or went away would wait there for ever and the
    group could not form again). Gated members hold nothing and are left alone.
    """
    out = []
    for p in members:
        if p.terminal or not p.has_controller or p.deleting:
            continue
        if p.bound or awaiting_bind(p, gate) is not None:
            out.append(p)
    return out


def resolve_volumes(pods: Iterable[PodInfo], claims: Mapping[Any, Any] | None,
                    volumes: Mapping[Any, Any] | None) -> list[PodInfo]:
    """``pods`` with volume constraints resolved (:func:`cogate.controller.model.volumes.resolve`).

    ``claims``: ClaimInfo by (namespace, name); ``volumes``: VolumeInfo by name. Without the
    informers (``None``) the pods are returned unchanged: their claims stay unchecked."""
    if claims is None or volumes is None:
        return list(pods)
    return [volumes_mod.resolve(p, claims, volumes) if p.volume_claims else p for p in pods]
