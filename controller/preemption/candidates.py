"""The candidates of one victim selection and the rooms it works on (pure), for
:func:`cogate.controller.preemption.victims.select_victims` (its module docstring, rules 1, 4 and 6):
:class:`Candidates` (the bound pods of strictly lower priority that may be taken, by node),
:func:`candidate_rule` and :func:`gang_members` (who may be a victim, the other gangs' bound members),
and the rooms: :func:`lent_room` (a :class:`~cogate.controller.planning.capacity.Snapshot`'s, as
``planner.Pass`` plans on it), :func:`base_room` and :func:`gone_from_view` (on the incremental
planner's :class:`~cogate.controller.planning.planstate.BoundView`, when :func:`fast_path` allows).

Units: requests in the units of :mod:`cogate.controller.model.resources`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from cogate.api import POD_GROUP_LABEL
from cogate.controller.planning.capacity import Snapshot, reserve_room
from cogate.controller.planning.room import NodeTable, Room, req_with_pod
from cogate.controller.planning.planner import members_anti, members_spread
from cogate.controller.planning.planstate import BoundView
from cogate.controller.model.nativegroups import native_key
from cogate.controller.model.records import HostPort, PodInfo, Promise, member_key
from cogate.controller.model.verdicts import GroupRequest

__all__ = ["Candidates", "candidate_rule", "gang_members", "lent", "lent_room", "base_room", "fast_path",
           "gone_from_view"]


class Candidates:
    """The candidates (rule 1) of one call, by node slot: ``get(i)`` node ``i``'s (a list the
    selection may sort), :meth:`pairs` all of them as ``(pod, slot)``, ``count`` how many. Built
    from a list (the from-scratch path) or read node by node from a
    :class:`~cogate.controller.planning.planstate.BoundView` when first asked (the fast path)."""

    def __init__(self, count: int, by_node: dict[int, list[PodInfo]],
                 read: Callable[[int], list[PodInfo]] | None = None, slots: Iterable[int] = ()) -> None:
        self.count = count
        self._by_node = by_node
        self._read = read
        self._slots = sorted(slots) if read is not None else sorted(by_node)

    @classmethod
    def listed(cls, candidates: Sequence[tuple[PodInfo, int]]) -> Candidates:
        by_node: dict[int, list[PodInfo]] = {}
        for p, i in candidates:
            by_node.setdefault(i, []).append(p)
        return cls(len(candidates), by_node)

    def get(self, i: int) -> list[PodInfo] | None:
        ps = self._by_node.get(i)
        if ps is None and self._read is not None:
            ps = self._by_node[i] = self._read(i)
        return ps

    def pairs(self) -> list[tuple[PodInfo, int]]:
        return [(p, i) for i in self._slots for p in (self.get(i) or ())]


def candidate_rule(priority: int, own: set[str], group: tuple[str, str],
                   untouchable: set[tuple[str, str]],
                   protected: frozenset[str] = frozenset()) -> Callable[[PodInfo], bool]:
    """Rules 1, 6 and 8 as a test of one bound pod: its priority strictly below ``priority``
    (kube-scheduler ``SelectVictimsOnNode``), not being deleted, never a member of the group
    (``group``: its namespace and name; ``own``: its members' uids), even one the members' cache
    does not show yet (the pod-group label is read only in the group's namespace), nor of a gang in
    ``untouchable`` (one with a member of the group's priority or higher; a native ``all`` group by
    its :func:`~cogate.controller.model.nativegroups.native_key`), and never a pod of a
    ``protected`` namespace, whatever its priority (rule 8, ``--protected-namespace``: cogate's own
    pods). The one place of the rule: every candidate of every path passes this test."""
    ns, name = group

    def is_candidate(p: PodInfo) -> bool:
        if p.priority >= priority or p.deleting or p.uid in own or p.namespace in protected:
            return False
        if p.native_group and native_key(p.namespace, p.native_group) in untouchable:
            return False  # a native all group never touched (units.native_units)
        g = p.labels.get(POD_GROUP_LABEL)
        return g is None or ((p.namespace != ns or g != name) and (p.namespace, g) not in untouchable)

    return is_candidate


def gang_members(gang_min: Mapping[tuple[str, str], int], index: Mapping[str, int], *,
                 view: BoundView | None = None, snapshot: Snapshot | None = None
                 ) -> dict[tuple[str, str], list[tuple[PodInfo, int]]]:
    """The bound members of the gangs in ``gang_min`` (``(namespace, name)`` -> minMember), as
    ``(pod, node slot)`` per gang that has any (``index``: node name -> slot): pods not being
    deleted (``member_key``), read by pod-group label from ``view`` (the fast path), else from
    ``snapshot``'s bound pods."""
    gang_pods: dict[tuple[str, str], list[tuple[PodInfo, int]]] = {}
    if view is not None:
        for gk in gang_min:
            if gk[1]:  # member_key: a pod-group label that is not empty, a pod not being deleted
                ps = [(p, index[p.node_name]) for p in view.by_group(*gk) if not p.deleting and p.node_name in index]
                if ps:
                    gang_pods[gk] = ps
    elif gang_min:
        assert snapshot is not None
        for p, i in snapshot.bound:
            gk = member_key(p)
            if gk in gang_min:
                gang_pods.setdefault(gk, []).append((p, i))
    return gang_pods


def lent(room: Room, group: GroupRequest) -> Room:
    """``room`` with the nominations below the group's lowest member priority lent (as ``planner.Pass``)."""
    if room.nominations:
        room.lend(min((m.priority for m in group.members), default=0))
        room.commit()
    return room


def lent_room(snapshot: Snapshot, promised: Sequence[Promise], group: GroupRequest,
              without: Iterable[str] = ()) -> Room:
    """The room the planner plans ``group`` on (``planner.Pass``: bound pods, room promised,
    nominations below the group's lowest member priority lent), without the pods ``without``."""
    return lent(snapshot.room(promised, frozenset(without)), group)


def base_room(table: NodeTable, free: Sequence[dict[str, int]], ports: Sequence[list[HostPort]],
              promised: Sequence[Promise], group: GroupRequest) -> Room:
    """The same room on free room already charged with the bound pods (``free``/``ports`` per slot,
    read only: :class:`~cogate.controller.planning.room.Room` copies a node's entry before changing it),
    as the incremental planner builds its rooms (``Room(base=...)``)."""
    room = Room(table, False, empty=False, base=(list(free), list(ports)))
    reserve_room(room, table.index, promised)
    return lent(room, group)


def fast_path(view: BoundView | None, group: GroupRequest, snapshot: Snapshot | None) -> bool:
    """The view's free room can stand for the bound pods: no required pod anti-affinity on a
    bound pod or a member, no hard topology spread, no required pod affinity on a member (those
    read where every pod sits, so the selection builds a :class:`Snapshot` then)."""
    return (view is not None and snapshot is None and not view.anti_active and not members_anti([group])
            and not members_spread([group]) and not any(m.required_pod_affinity for m in group.members))


def gone_from_view(view: BoundView, is_candidate: Callable[[PodInfo], bool], priority: int, own: set[str],
                   key: tuple[str, str], untouchable: set[tuple[str, str]], promised: Sequence[Promise],
                   group: GroupRequest, protected: frozenset[str] = frozenset(), held: Iterable[PodInfo] = ()
                   ) -> tuple[Candidates, Callable[[], Room]]:
    """The candidates read from ``view`` node by node (counted from the per-priority sums), and a
    function building the room with every one of them gone (the fast path of ``select_victims``): per
    node the requests of the pods below ``priority`` not being deleted (``BoundView.by_priority``) added
    back, the non-candidates among them (the group's own, untouchable gangs' members, ``held``: native
    ``all`` groups never touched, pods of ``protected`` namespaces, via ``BoundView.in_namespace``)
    charged again, host ports read again; the room promised, lent as ``planner.Pass`` does."""
    table = view.table
    index = table.index
    excluded: dict[str, tuple[PodInfo, int]] = {}

    def exclude(ps: Iterable[PodInfo]) -> None:
        for p in ps:
            if p.priority < priority and not p.deleting and p.node_name in index and not is_candidate(p):
                excluded[p.uid] = (p, index[p.node_name])

    exclude(view.by_group(*key))
    for gk in untouchable:
        exclude(view.by_group(*gk))
    exclude([*(p for p in (view.pod(uid) for uid in own) if p is not None), *held])  # held: units.native_units
    for ns in protected:
        in_ns = view.in_namespace(ns)
        exclude(in_ns if in_ns is not None else (p for p in view.pods if p.namespace == ns and p.bound
                                                  and not p.terminal))
    by_priority = view.by_priority_all()
    count = 0
    slots: list[int] = []
    for i, at in enumerate(by_priority):
        if at:
            n = sum(t["pods"] for q, t in at.items() if q < priority)
            if n:
                count += n
                slots.append(i)
    count -= len(excluded)

    def gone() -> Room:
        free = list(view.free)
        ports = list(view.ports)
        for i in slots:
            f = dict(free[i])
            for q, t in by_priority[i].items():
                if q < priority:
                    for k, v in t.items():
                        f[k] = f.get(k, 0) + v
            free[i] = f
            if ports[i]:
                ports[i] = [hp for p in view.on_node(i) if not is_candidate(p) for hp in p.host_ports]
        for p, i in excluded.values():
            f = free[i]  # a copy: the pod is below the priority, so its node was copied above
            for k, v in req_with_pod(p.requests).items():
                f[k] = f.get(k, 0) - v
        room = Room(table, False, empty=False, base=(free, ports))
        reserve_room(room, index, promised)
        return lent(room, group)

    candidates = Candidates(count, {}, lambda i: [p for p in view.on_node(i) if is_candidate(p)], slots)
    return candidates, gone
