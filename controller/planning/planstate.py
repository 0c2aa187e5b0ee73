"""Incremental planning state (pure): the planner's view of the cluster, kept between passes.

:func:`cogate.controller.planning.planner.decide` starts every pass from scratch: it charges every
bound pod to its node and plans every waiting group. :class:`PlanningState` keeps what does
not change between passes, the way kube-scheduler keeps its cache and snapshot, and gives the
same :class:`~cogate.controller.model.verdicts.Decision` as ``decide`` over the same input (the
property test ``tests/unit/controller/planning/test_planstate_props.py`` checks both claims over random event
sequences):

* **per-node free room** (resources, the ``pods`` slot, host ports) after the bound
  non-terminal pods, updated from informer deltas (:meth:`PlanningState.upsert_pod`,
  :meth:`~PlanningState.remove_pod`, :meth:`~PlanningState.upsert_node`,
  :meth:`~PlanningState.remove_node`) at a cost that follows the pods of the changed node,
  never all pods. Bound pods are kept by reference (the informer's records, not copies).
* **node filter results** (NodeUnschedulable, TaintToleration, NodeAffinity, bound PVs' node
  affinity per member spec class: ``filters.static_key``), the largest allocatable, topology domains and the "fits the empty cluster" result
  per group shape: kept for one *node generation* (any node added, changed or removed
  starts a new one).
* **verdicts**: a group's verdict is kept, without planning it again, while its inputs have
  not changed (:mod:`cogate.controller.planning.incremental`: the pass that keeps them, and the
  rules, each proved by the property test against ``decide``).

Room promised (reservations and nominations, :func:`cogate.controller.planning.capacity.promised_room`)
is charged on each pass's room like a reservation; nominated pods are kept apart from the
bound ones (:meth:`PlanningState.upsert_pod` keeps an unbound pod with a nomination,
:meth:`~PlanningState.remove_nominated` forgets one).

Not thread-safe: the shell serialises deltas and passes (one lock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cogate.api import POD_GROUP_LABEL
from cogate.controller.planning.capacity import nominated_pods, reserve_room
from cogate.controller.planning.room import NodeTable, Room, req_with_pod
from cogate.controller.model.minresources import Short
from cogate.controller.planning.domaincache import DomainCache
from cogate.controller.planning.exclusion import holds_key
from cogate.controller.planning.incremental import IncrementalPass, Kept, positive
from cogate.controller.planning.planner import members_anti, members_spread, run_pass
from cogate.controller.model.records import HostPort, NodeInfo, PodInfo, Promise, Reservation
from cogate.controller.model.verdicts import Decision, GroupRequest, PlannerConfig

__all__ = ["PlanningState", "NodeRoom", "BoundView"]

#: Free room of one node: (free resources without zero entries, host ports in use sorted by text).
NodeRoom = tuple[dict[str, int], tuple[HostPort, ...]]

class PlanningState:
    """Nodes and bound pods (from informer deltas) and what passes keep; see the module doc.

    ``decide(groups, reservations, now, config)`` returns what
    ``planner.decide(nodes, pods, groups, reservations, now, config)`` returns for the nodes
    and pods given so far. Units as in :mod:`cogate.controller.model.resources`; times epoch seconds.
    """

    def __init__(self, indexed_namespaces: Iterable[str] = ()) -> None:
        self._nodes: list[NodeInfo] = []
        self._index: dict[str, int] = {}
        self._free: list[dict[str, int]] = []
        self._ports: list[list[HostPort]] = []
        #: Slot -> priority -> summed requests with ``pods`` (:func:`req_with_pod`) of the pods
        #: charged there that are not being deleted (victim selection: :meth:`bound_view`).
        self._by_priority: list[dict[int, dict[str, int]]] = []
        #: Every bound pod given (any phase, any node), by uid.
        self._pods: dict[str, PodInfo] = {}
        #: Node name -> its bound non-terminal pods by uid (also for nodes not known yet).
        self._on_node: dict[str, dict[str, PodInfo]] = {}
        #: (namespace, pod-group label) -> bound non-terminal pods carrying it, by uid (any node).
        self._by_group: dict[tuple[str, str], dict[str, PodInfo]] = {}
        #: Namespace -> its bound non-terminal pods by uid, for the namespaces given (preemption's
        #: protected namespaces: :meth:`BoundView.in_namespace`); other namespaces are not indexed.
        self._in_namespace: dict[str, dict[str, PodInfo]] = {ns: {} for ns in indexed_namespaces}
        #: Pods charged to a known node that carry required pod anti-affinity.
        self._anti_pods = 0
        #: Unbound pods with a nomination (``status.nominatedNodeName``), by uid: room promised.
        self._nominated: dict[str, PodInfo] = {}
        #: Node name -> room taken there by nothing the planner holds as a pod (:meth:`set_held`).
        self._held: dict[str, dict[str, int]] = {}
        #: Bound non-terminal pods being deleted, by uid (waiting messages name them).
        self._deleting: dict[str, PodInfo] = {}
        #: Slots where a pod being deleted was charged or uncharged since the last pass.
        self._deleting_changed: set[int] = set()
        self._table: NodeTable | None = None
        #: Slot -> change of max(free, 0) per resource since the last pass (slot in: changed).
        self._changed: dict[int, dict[str, int]] = {}
        self._kept: dict[tuple[str, str], Kept] = {}
        self._fits_empty: dict[Any, tuple[bool, str, tuple[Short, ...]]] = {}
        self._empty: Room | None = None
        self._pass_key: tuple[PlannerConfig, bool, bool, tuple[Any, ...]] | None = None
        #: Per-domain results of topology-constrained groups kept between passes.
        self._domains = DomainCache()
        #: Groups of the last pass whose verdict was kept / judged again (for metrics and tests).
        self.last_kept = 0
        self.last_judged = 0

    @classmethod
    def build(cls, nodes: Iterable[NodeInfo], pods: Iterable[PodInfo],
              indexed_namespaces: Iterable[str] = ()) -> PlanningState:
        """A state holding ``nodes`` and ``pods`` (as ``planner.decide`` takes them)."""
        state = cls(indexed_namespaces)
        for n in nodes:
            state.upsert_node(n)
        for p in pods:
            state.upsert_pod(p)
        return state

    # -- deltas -----------------------------------------------------------------------

    def upsert_node(self, node: NodeInfo) -> None:
        """A node was added or changed (a change of what the planner reads starts a new node
        generation; an equal record only replaces the reference)."""
        i = self._index.get(node.name)
        if i is None:
            i = len(self._nodes)
            self._index[node.name] = i
            self._nodes.append(node)
            self._free.append(dict(node.allocatable))
            self._ports.append([])
            self._by_priority.append({})
            for p in self._on_node.get(node.name, {}).values():
                self._charge(i, p, 1)
            self._charge_room(i, self._held.get(node.name), 1)
        elif self._nodes[i] == node:
            self._nodes[i] = node
            return
        else:
            self._nodes[i] = node
            self._free[i] = dict(node.allocatable)
            self._ports[i] = []
            self._by_priority[i] = {}
            for p in self._on_node.get(node.name, {}).values():
                if p.required_pod_anti_affinity:
                    self._anti_pods -= 1
                self._charge(i, p, 1)
            self._charge_room(i, self._held.get(node.name), 1)
        self._table = None

    def remove_node(self, name: str) -> None:
        """A node was deleted; its pods stay known (charged again if the node comes back)."""
        i = self._index.pop(name, None)
        if i is None:
            return
        for p in self._on_node.get(name, {}).values():
            if p.required_pod_anti_affinity:
                self._anti_pods -= 1
        last = len(self._nodes) - 1
        if i != last:  # keep slots dense: the last node takes the freed slot
            self._nodes[i], self._free[i], self._ports[i] = self._nodes[last], self._free[last], self._ports[last]
            self._by_priority[i] = self._by_priority[last]
            self._index[self._nodes[i].name] = i
        self._nodes.pop()
        self._free.pop()
        self._ports.pop()
        self._by_priority.pop()
        self._table = None

    def set_held(self, name: str, held: Mapping[str, int] | None) -> None:
        """Room on node ``name`` that no pod the planner holds takes, though it is not free: DRA
        devices allocated to claims no bound pod holds (:mod:`cogate.controller.devices.dra`). Charged on
        the node's free room like a pod's requests (no ``pods`` slot, never a victim's), kept while
        the node changes or goes and comes back; replaces the node's earlier held room. A change
        is a change of free room, not of the node (no new node generation)."""
        new = {k: v for k, v in (held or {}).items() if v}
        old = self._held.get(name, {})
        if new == old:
            return
        if new:
            self._held[name] = new
        else:
            self._held.pop(name, None)
        i = self._index.get(name)
        if i is not None:
            self._charge_room(i, old, -1)
            self._charge_room(i, new, 1)

    def _charge_room(self, i: int, req: Mapping[str, int] | None, sign: int) -> None:
        """Take (``sign`` 1) or give back (-1) ``req`` on slot ``i``'s free room."""
        if not req:
            return
        f = self._free[i]
        changed = self._changed.setdefault(i, {})
        for k, v in req.items():
            before = f.get(k, 0)
            after = before - sign * v
            f[k] = after
            d = positive(after) - positive(before)
            if d:
                changed[k] = changed.get(k, 0) + d

    def upsert_pod(self, pod: PodInfo) -> None:
        """A pod was added or changed. Bound pods are kept (terminal ones hold no room); an
        unbound one is removed, and kept apart as room promised while it has a nomination
        (``decide`` reads only those of the unbound pods: :func:`capacity.nominated_pods`)."""
        if nominated_pods([pod]):
            self._nominated[pod.uid] = pod
        else:
            self._nominated.pop(pod.uid, None)
        old = self._pods.get(pod.uid)
        if old is not None:
            if old == pod:  # nothing the planner reads changed: keep the newer record only
                self._pods[pod.uid] = pod
                on = self._on_node.get(pod.node_name)
                if on is not None and pod.uid in on:
                    on[pod.uid] = pod
                    if pod.uid in self._deleting:
                        self._deleting[pod.uid] = pod
                    g = pod.labels.get(POD_GROUP_LABEL)
                    if g is not None:
                        self._by_group[(pod.namespace, g)][pod.uid] = pod
                    ns = self._in_namespace.get(pod.namespace)
                    if ns is not None:
                        ns[pod.uid] = pod
                return
            self._drop(old)
        if not pod.bound:
            return
        self._pods[pod.uid] = pod
        if not pod.terminal:
            self._on_node.setdefault(pod.node_name, {})[pod.uid] = pod
            g = pod.labels.get(POD_GROUP_LABEL)
            if g is not None:
                self._by_group.setdefault((pod.namespace, g), {})[pod.uid] = pod
            ns = self._in_namespace.get(pod.namespace)
            if ns is not None:
                ns[pod.uid] = pod
            if pod.deleting:
                self._deleting[pod.uid] = pod
            i = self._index.get(pod.node_name)
            if i is not None:
                self._charge(i, pod, 1)

    def upsert_nominated(self, pod: PodInfo) -> None:
        """The nominated-pods informer's record of an unbound pod: kept as room promised while it
        has a nomination (:func:`capacity.nominated_pods`), forgotten otherwise. A pod the
        bound-pods informer already shows bound is left to that record (the two watches lag
        each other)."""
        if nominated_pods([pod]) and pod.uid not in self._pods:
            self._nominated[pod.uid] = pod
        else:
            self._nominated.pop(pod.uid, None)

    def remove_nominated(self, uid: str) -> None:
        """A nominated pod went (deleted, bound, or no longer watched by the nominated-pods
        informer); a bound record of the same uid is left alone."""
        self._nominated.pop(uid, None)

    def remove_pod(self, uid: str) -> None:
        """A pod was deleted (or is no longer watched: e.g. it became terminal)."""
        self._nominated.pop(uid, None)
        old = self._pods.get(uid)
        if old is not None:
            self._drop(old)

    def _drop(self, old: PodInfo) -> None:
        del self._pods[old.uid]
        if old.terminal:
            return
        self._deleting.pop(old.uid, None)
        on = self._on_node[old.node_name]
        del on[old.uid]
        if not on:
            del self._on_node[old.node_name]
        g = old.labels.get(POD_GROUP_LABEL)
        if g is not None:
            members = self._by_group[(old.namespace, g)]
            del members[old.uid]
            if not members:
                del self._by_group[(old.namespace, g)]
        ns = self._in_namespace.get(old.namespace)
        if ns is not None:
            ns.pop(old.uid, None)
        i = self._index.get(old.node_name)
        if i is not None:
            self._charge(i, old, -1)

    def _charge(self, i: int, p: PodInfo, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) pod ``p``'s requests and host ports on slot ``i``."""
        req = req_with_pod(p.requests)
        self._charge_room(i, req, sign)
        if not p.deleting:
            at = self._by_priority[i]
            total = at.setdefault(p.priority, {})
            for k, v in req.items():
                total[k] = total.get(k, 0) + sign * v
            if not total["pods"]:
                del at[p.priority]
        if p.host_ports:
            if sign > 0:
                self._ports[i].extend(p.host_ports)
            else:
                for hp in p.host_ports:
                    self._ports[i].remove(hp)
        if p.required_pod_anti_affinity:
            self._anti_pods += sign
        if p.deleting:
            self._deleting_changed.add(i)

    # -- views ------------------------------------------------------------------------

    def room_by_node(self) -> dict[str, NodeRoom]:
        """Free room per node name, as :func:`cogate.controller.planning.capacity.room_by_node` computes
        it from scratch for the same nodes and pods."""
        return {
            n.name: ({k: v for k, v in self._free[i].items() if v}, tuple(sorted(self._ports[i], key=str)))
            for i, n in enumerate(self._nodes)
        }

    def bound_view(self) -> BoundView:
        """A read-only view of the nodes and bound pods held, for victim selection
        (:func:`cogate.controller.preemption.victims.select_victims` ``view=``); valid until the next delta
        (the shell holds the planning lock while it is used)."""
        table = self._table if self._table is not None else NodeTable(list(self._nodes))
        return BoundView(self, table)

    @property
    def nominated(self) -> int:
        """How many nominated pods are held (room promised besides reservations)."""
        return len(self._nominated)

    @property
    def nodes(self) -> list[NodeInfo]:
        return list(self._nodes)

    @property
    def pods(self) -> list[PodInfo]:
        """Every bound pod held, then the nominated ones (the ``pods`` argument ``planner.decide``
        would take)."""
        return list(self._pods.values()) + list(self._nominated.values())

    # -- passes -----------------------------------------------------------------------

    def decide(
        self,
        groups: Sequence[GroupRequest],
        reservations: Sequence[Reservation],
        now: float,
        config: PlannerConfig = PlannerConfig(),
        promised: Sequence[Promise] = (),
    ) -> Decision:
        """``planner.decide(nodes, pods, groups, reservations, now, config, promised)`` for the nodes and
        pods held, planning only groups whose inputs changed (module doc). Never raises on
        well-typed records; if a pass fails anyway, every kept verdict is dropped."""
        anti = members_anti(groups) or self._anti_pods > 0
        spread = members_spread(groups)
        if self._table is None:
            self._table = NodeTable(list(self._nodes))
            self._pass_key = None
            self._changed.clear()
            self._deleting_changed.clear()
        holds = holds_key(groups, reservations, config.gate_name)  # exclusive gangs (planning/exclusion.py)
        if self._pass_key != (config, anti, spread, holds):
            self._pass_key = (config, anti, spread, holds)
            self._kept.clear()
            self._fits_empty.clear()
            self._empty = None
        self.last_kept = self.last_judged = 0
        run = IncrementalPass(self, LiveSnapshot(self, self._table, anti, spread), groups, reservations, now, config,
                               promised)
        try:
            decision = run_pass(run, groups)
        except BaseException:
            self._kept.clear()
            raise
        finally:
            self._changed.clear()
            self._deleting_changed.clear()
        if len(self._kept) > len(groups):
            live = {(g.namespace, g.name) for g in groups}
            for key in [k for k in self._kept if k not in live]:
                del self._kept[key]
        return decision


class BoundView:
    """The bound pods and free room a :class:`PlanningState` holds, as victim selection reads them
    (:func:`cogate.controller.preemption.victims.select_victims` ``view=``), without listing every pod.

    ``table``: the nodes (slot order; ``nodes`` the same list); ``free``/``ports``: per slot, the
    free room after every bound non-terminal pod (resources with the ``pods`` slot, CPU millicores,
    memory bytes; host ports), as :meth:`capacity.Snapshot.room <cogate.controller.planning.capacity.Snapshot.room>`
    builds it without room promised (read only: a :class:`~cogate.controller.planning.room.Room` built on
    them copies a node's entry before changing it); ``anti_active``: a bound pod on a known node has
    required pod anti-affinity. :meth:`on_node` / :meth:`by_priority` / :meth:`by_group` read one
    node's pods, one node's requests summed per priority, one pod-group label's pods. ``pods``: the
    ``pods`` argument ``planner.decide`` would take (lists every pod: for a from-scratch fallback).
    """

    def __init__(self, state: PlanningState, table: NodeTable) -> None:
        self._state = state
        self.table = table
        self.nodes = table.nodes
        self.free = state._free
        self.ports = state._ports
        self.anti_active = state._anti_pods > 0

    @property
    def pods(self) -> list[PodInfo]:
        return self._state.pods

    def on_node(self, i: int) -> Iterable[PodInfo]:
        """Bound non-terminal pods on node slot ``i`` (being deleted included)."""
        return self._state._on_node.get(self.nodes[i].name, {}).values()

    def by_priority(self, i: int) -> Mapping[int, Mapping[str, int]]:
        """Priority -> summed requests with the ``pods`` slot (so ``["pods"]`` counts them) of the
        pods on node slot ``i`` that are not being deleted."""
        return self._state._by_priority[i]

    def by_priority_all(self) -> Sequence[Mapping[int, Mapping[str, int]]]:
        """:meth:`by_priority` of every slot, in slot order."""
        return self._state._by_priority

    def pod(self, uid: str) -> PodInfo | None:
        """The bound non-terminal pod ``uid`` (on any node), or None."""
        p = self._state._pods.get(uid)
        return None if p is None or p.terminal else p

    def in_namespace(self, namespace: str) -> Iterable[PodInfo] | None:
        """Bound non-terminal pods of ``namespace`` (any node; being deleted included), or None
        when the state does not index that namespace (``PlanningState(indexed_namespaces=)``)."""
        ns = self._state._in_namespace.get(namespace)
        return None if ns is None else ns.values()

    def by_group(self, namespace: str, group: str) -> Iterable[PodInfo]:
        """Bound non-terminal pods of ``namespace`` whose pod-group label is ``group`` (any node,
        known or not; being deleted included)."""
        return self._state._by_group.get((namespace, group), {}).values()


class LiveSnapshot:
    """The planner's snapshot interface (:class:`cogate.controller.planning.capacity.Snapshot`) over a
    :class:`PlanningState`."""

    def __init__(self, state: PlanningState, table: NodeTable, anti_active: bool, spread_active: bool) -> None:
        self.state = state
        self.table = table
        self.anti_active = anti_active
        self.spread_active = spread_active
        self.bound_uids = state._pods
        self.nominated = list(state._nominated.values())

    def _bound(self) -> list[tuple[PodInfo, int]]:
        index = self.table.index
        return [(p, index[name]) for name, on in self.state._on_node.items() if name in index for p in on.values()]

    def _terminating(self) -> list[tuple[PodInfo, int]]:
        index = self.table.index
        return [(p, index[p.node_name]) for p in self.state._deleting.values() if p.node_name in index]

    def room(self, promised: Sequence[Promise]) -> Room:
        room = Room(self.table, self.anti_active, empty=False, base=(self.state._free, self.state._ports),
                     spread_active=self.spread_active)
        room.bound_pods = self._bound
        room.terminating_pods = self._terminating
        if self.anti_active or room.spread is not None:
            bound = self._bound()
            if self.anti_active:
                room.placed = list(bound)
            if room.spread is not None:  # bound pods count for topology spread (as Snapshot.room)
                for p, i in bound:
                    room.spread.add(p, i)
        reserve_room(room, self.table.index, promised)
        return room

    def empty_room(self) -> Room:
        if self.state._empty is None:
            self.state._empty = Room(self.table, self.anti_active, empty=True, spread_active=self.spread_active)
        return self.state._empty
