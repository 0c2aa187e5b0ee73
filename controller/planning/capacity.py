"""The capacity model (pure): the cluster a pass plans against, and where members fit it.

kube-scheduler's filters, applied node by node, never to cluster totals: the rules of one
node's free room, and where one member fits it, are the :class:`~cogate.controller.planning.room.Room`'s
(:mod:`cogate.controller.planning.room`: NodeResourcesFit, NodeUnschedulable, TaintToleration,
NodeAffinity, VolumeBinding's bound PVs' node affinity, NodePorts, InterPodAffinity,
PodTopologySpread). Here: a :class:`Snapshot` (nodes and bound pods, with the static filter
cache of its :class:`~cogate.controller.planning.room.NodeTable`) yields the room of a pass,
after the bound pods and the room promised that pass keeps; :func:`pack` places a group's
members on it. Free room and requests are per resource, in the units of
:mod:`cogate.controller.model.resources` (CPU millicores, memory bytes, counts; ``pods`` slots).

Packing (:func:`pack`) is a heuristic (identical member specs are placed as a batch, the most
constrained spec first, each onto the tightest nodes first; when a group has
more gated members than it needs, a smallest-first pass is tried too). It may
miss a placement that exists, but every placement it returns is valid against
the rules above, so it never releases a group that cannot be placed.

Members the filters cannot tell apart share one :class:`~cogate.controller.planning.room.Spec`. The
incremental planner (:mod:`cogate.controller.planning.planstate`) keeps one ``NodeTable`` per node
generation and builds its rooms on free room kept between passes (``Room(base=...)``).

Room promised (:class:`~cogate.controller.model.records.Promise`, :func:`promised_room`): the one
notion of room held for pods not bound yet, subtracted from the free room before any group is
planned: cogate's reservations (members it released to a node) and kube-scheduler's
nominations (``status.nominatedNodeName``: a preemptor waiting for its victims to go). A
nomination counts only against pods of its priority or lower (kube-scheduler
``framework.addGENominatedPods``, used by ``RunFilterPluginsWithNominatedPods``: nominated
pods of equal or higher priority are added to the node before filtering); the planner lends
the room of lower-priority nominations to a group of higher priority
(:meth:`Room.lend <cogate.controller.planning.room.Room.lend>`). The preemption issue extends this
notion, not a second one.

For the shell: :func:`room_by_node` (free room from scratch, the reference the incremental
planner is tested against) and :func:`pinned_node_problems` (these filters applied to the
node a released member is pinned to).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from cogate.controller.planning.filters import static_reason
from cogate.controller.planning.room import NodeTable, Room, Spec, req_with_pod
from cogate.controller.model.records import HostPort, NodeInfo, PodInfo, Promise, Reservation
from cogate.controller.model.resources import format_quantity

__all__ = ["pack", "Snapshot", "reserve_room", "room_by_node", "pinned_node_problems", "promised_room",
           "nominated_pods", "reservation_promise"]


def nominated_pods(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """The pods among ``pods`` that hold a nomination (``status.nominatedNodeName``): unbound, not
    terminal, not being deleted (kube-scheduler's nominator drops a pod once it binds or goes)."""
    return [p for p in pods if p.nominated_node and not p.bound and not p.terminal and not p.deleting]


def promised_room(reservations: Sequence[tuple[Reservation, PodInfo]], nominated: Sequence[PodInfo],
                  holders: Mapping[str, str] | None = None) -> list[Promise]:
    """Every room promised on a node, as one list (:class:`~cogate.controller.model.records.Promise`).

    ``reservations``: ``(reservation, its member)`` that still hold (the planner prunes them:
    :meth:`cogate.controller.planning.planner.Pass._still_holds`); ``nominated``: pods with a nomination
    (:func:`nominated_pods`); ``holders``: pod uid -> ``"PodGroup ns/name"`` of reserved members.
    A pod with both (a released member kube-scheduler nominated elsewhere after preemption)
    counts once, as its reservation; a reservation counts for every pod, a nomination for pods of
    ``pod.priority`` or lower. Order: reservations as given, then nominations by (node, created,
    name), so a pass is deterministic.
    """
    holders = holders or {}
    out = [reservation_promise(r, pod, holders.get(r.pod_uid, "")) for r, pod in reservations]
    seen = {r.pod_uid for r, _ in reservations}
    for p in sorted(nominated, key=lambda p: (p.nominated_node, p.created, p.namespace, p.name, p.uid)):
        if p.uid in seen:
            continue
        seen.add(p.uid)
        out.append(Promise(p, p.nominated_node, dict(p.requests), p.host_ports, "nominated", p.priority,
                           f"pod {p.namespace}/{p.name}"))
    return out


def reservation_promise(r: Reservation, pod: PodInfo, holder: str = "") -> Promise:
    """The room reservation ``r`` of member ``pod`` promises: on ``r.node_name``, ``r``'s requests
    and host ports, for every pod; ``holder`` ``"PodGroup ns/name"`` (default ``"pod ns/name"``)."""
    return Promise(pod, r.node_name, dict(r.requests), r.host_ports, "reserved", pod.priority,
                   holder or f"pod {r.namespace}/{r.name}")


#: :func:`pack` searches exhaustively (:func:`_search`) when the greedy strategies miss and the group has
#: at most this many members (no topology spread: that has its own order, ``Room._place_spread``).
SEARCH_MEMBERS = 8
#: The most placements :func:`_search` tries before the greedy answer stands.
SEARCH_STEPS = 500


def pack(room: Room, members: Sequence[PodInfo], needed: int) -> dict[str, int]:
    """Plan ``members`` on ``room`` (left applied). Returns uid -> node index: at least ``needed``
    entries when that many fit, else the best attempt (applied, so the caller can explain the
    shortfall).

    A member nominated to a node (``PodInfo.nominated_node``: only cogate nominates gated members,
    to the node of its preemption plan, :mod:`cogate.controller.preemption.room`) is placed there first
    when it fits: kube-scheduler counts each nomination against pods of equal or lower priority
    (``addGENominatedPods``), so a member pinned to a node nominated for another member does not
    fit there in its view, and kube-scheduler preempts elsewhere for it (measured: 99 of 100
    members pinned away from their nomination, 82 victims too many)."""
    by_spec: dict[int, tuple[Spec, list[PodInfo]]] = {}
    for m in members:
        s = room.spec_for(m)
        by_spec.setdefault(id(s), (s, []))[1].append(m)
    groups = list(by_spec.values())
    nominated = any(m.nominated_node for m in members)
    strategies = [lambda g: (len(g[0].eligible), -g[0].size, g[1][0].name)]
    if len(members) > needed:
        strategies.append(lambda g: (g[0].size, len(g[0].eligible), g[1][0].name))
    mark = room.mark()
    best: dict[str, int] | None = None
    for strategy in strategies:
        out: dict[str, int] = {}
        if nominated:
            _place_nominated(room, groups, out)
        for spec, ms in sorted(groups, key=strategy):
            room.place_batch(spec, [m for m in ms if m.uid not in out] if out else ms, out)
        if len(out) >= needed:
            return out
        if best is None or len(out) > len(best):
            best = out
        room.rollback(mark)
    if (len(members) <= SEARCH_MEMBERS and not any(spec.pod.topology_spread for spec, _ in groups)
            and _may_fit(room, groups, needed)):
        found = _search(room, groups, needed, nominated)
        if found is not None:
            return found
        room.rollback(mark)
    # leave the best attempt applied so the caller can explain the shortfall
    return _replay(room, groups, best or {})


def _may_fit(room: Room, groups: list[tuple[Spec, list[PodInfo]]], needed: int) -> bool:
    """A cheap bound before :func:`_search`: per resource, the free room of every node some member
    may go on holds the ``needed`` smallest requests of it (False: no placement can exist, the
    search is skipped; the usual case of a group waiting on a full cluster)."""
    nodes = set().union(*(spec.eligible for spec, _ in groups))
    count = sum(len(ms) for _, ms in groups)
    asks: dict[str, list[int]] = {}
    for spec, ms in groups:
        for k, v in spec.req_items:
            asks.setdefault(k, []).extend([v] * len(ms))
    for k, vs in asks.items():
        free = sum(max(room.free[i].get(k, 0), 0) for i in nodes)
        if free < sum(sorted(vs + [0] * (count - len(vs)))[:needed]):  # members that ask none of it: 0
            return False
    return True


def _search(room: Room, groups: list[tuple[Spec, list[PodInfo]]], needed: int, nominated: bool) -> dict[str, int] | None:
    """Exhaustive search for a plan of ``needed`` members once the greedy strategies of :func:`pack`
    missed one (bin packing: placing the largest member on the tightest node first can leave two
    smaller ones without room, e.g. members of 3, 2 and 2 devices on nodes of 4 and 3). Members
    largest first, each on every eligible node where it fits (nodes alike in free room, host
    ports and which members may go there tried once; every node when anti-affinity is in play)
    or left out, at most :data:`SEARCH_STEPS` placements tried; nominated members are placed
    first as :func:`pack` does. Returns the plan (left applied) or None (nothing applied
    beyond what the caller rolls back)."""
    out: dict[str, int] = {}
    if nominated:
        _place_nominated(room, groups, out)
    todo = sorted(((spec, m) for spec, ms in groups for m in ms if m.uid not in out),
                  key=lambda sm: (-sm[0].size, len(sm[0].eligible), sm[1].name))
    steps = 0
    specs = list({id(spec): spec for spec, _ in todo}.values())
    eligible = [frozenset(spec.eligible) for spec in specs]

    def go(k: int) -> bool:
        nonlocal steps
        if len(out) >= needed:
            return True
        if len(out) + len(todo) - k < needed or steps >= SEARCH_STEPS:
            return False
        spec, m = todo[k]
        seen: set[tuple] = set()
        for i in spec.eligible:
            if not room.fits(spec, i):
                continue
            # nodes alike for what is left (free room, ports, which members may go there) are tried once
            same = ((tuple(sorted(room.free[i].items())), tuple(sorted(map(str, room.ports[i]))),
                     tuple(i in e for e in eligible)) if not room.anti_active else (i,))
            if same in seen:
                continue
            seen.add(same)
            steps += 1
            mark = room.mark()
            room.occupy(m, spec.req, spec.ports, i)
            out[m.uid] = i
            if go(k + 1):
                return True
            del out[m.uid]
            room.rollback(mark)
        return go(k + 1)

    return out if go(0) else None


def _place_nominated(room: Room, groups: list[tuple[Spec, list[PodInfo]]], out: dict[str, int]) -> None:
    """Place each member with a nomination on its nominated node where it is eligible and fits
    (:func:`pack`)."""
    index = room.table.index
    for spec, ms in groups:
        for m in ms:
            i = index.get(m.nominated_node) if m.nominated_node else None
            if i is not None and i in spec.eligible and room.fits(spec, i):
                room.occupy(m, spec.req, spec.ports, i)
                out[m.uid] = i


def _replay(room: Room, groups: list[tuple[Spec, list[PodInfo]]], plan: dict[str, int]) -> dict[str, int]:
    for spec, ms in groups:
        for m in ms:
            i = plan.get(m.uid)
            if i is not None:
                room.occupy(m, spec.req, spec.ports, i)
    return plan


class Snapshot:
    """The cluster a pass plans against: nodes, the pods bound to them, and the filter cache.

    Built from nodes and bound pods (and one flag from the groups: whether any member has
    required anti-affinity); nothing here depends on reservations or the clock. The
    incremental planner (:class:`cogate.controller.planning.planstate.PlanningState`) offers the same
    interface (``table``, ``anti_active``, ``bound_uids``, ``room``, ``empty_room``) from
    state kept between passes. :meth:`room` adds the reservations a pass keeps.
    """

    def __init__(self, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo], members_anti: bool,
                 members_spread: bool = False) -> None:
        """``pods``: as given to :func:`cogate.controller.planning.planner.decide` (unbound, terminal and
        unknown-node entries hold no room; unbound ones with a nomination are kept in
        ``nominated``). ``members_anti``: some group member has required pod anti-affinity;
        ``members_spread``: some group member has hard topology spread constraints."""
        self.table = NodeTable(nodes)
        self.index = self.table.index
        bound = [p for p in pods if p.bound and not p.terminal and p.node_name in self.index]
        self.bound = [(p, self.index[p.node_name]) for p in bound]
        self.bound_uids = frozenset(p.uid for p in pods if p.bound)
        #: Unbound pods kube-scheduler nominated a node for (:func:`nominated_pods`).
        self.nominated = nominated_pods(pods)
        #: Track where pods sit for anti-affinity (InterPodAffinity works in both directions).
        self.anti_active = members_anti or any(p.required_pod_anti_affinity for p in bound)
        #: Count pods per topology domain (PodTopologySpread) only when a member needs it.
        self.spread_active = members_spread

    def room(self, promised: Sequence[Promise], without: Collection[str] = ()) -> Room:
        """Free room after every bound pod and every room promised (:func:`promised_room`), committed.
        ``without``: uids of bound pods left out (preemption victims: the room once they are gone)."""
        room = Room(self.table, self.anti_active, empty=False, spread_active=self.spread_active)
        room.bound_pods = [pi for pi in self.bound if pi[0].uid not in without] if without else list(self.bound)
        for p, i in room.bound_pods:
            if room.spread is not None:  # bound pods count for topology spread
                room.spread.add(p, i)
            # hot path (every bound pod): subtract directly, no undo entry needed
            f = room.free[i]
            for k, v in req_with_pod(p.requests).items():
                f[k] = f.get(k, 0) - v
            if p.host_ports:
                room.ports[i].extend(p.host_ports)
            if self.anti_active:
                room.placed.append((p, i))
        reserve_room(room, self.index, promised)
        return room

    def empty_room(self) -> Room:
        """Every eligible node empty: bound pods and reservations ignored."""
        return Room(self.table, self.anti_active, empty=True, spread_active=self.spread_active)


def reserve_room(room: Room, index: Mapping[str, int], promised: Sequence[Promise]) -> None:
    """Charge each room promised on its node (unknown nodes skipped), committed; the room keeps
    them in ``promised`` (for :meth:`Room.lend` and for messages). Room held for a preempting
    PodGroup (``Promise.preempting``) charges its resources and the ``pods`` slot only (no host
    ports, no place for anti-affinity or spread: it stands for the group's own members, who are
    lent it, :meth:`Room.lend`)."""
    for p in promised:
        i = index.get(p.node_name)
        if i is not None:
            if p.preempting:  # resources only: the member itself must not see its own place taken
                room.charge(p, i, resources_only=True)
                room.holds.append((p, i))
            else:
                room.charge(p, i)
            room.promised.append((p, i))
            if p.nominated:
                room.nominations.append((p, i))
    room.commit()


def room_by_node(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo]) -> dict[str, tuple[dict[str, int], tuple[HostPort, ...]]]:
    """Free room per node name after the bound non-terminal pods (as
    :func:`cogate.controller.planning.planner.decide` computes it from scratch): ``(free resources
    without zero entries, host ports in use, sorted)``. The reference that the incremental
    planner's state is tested against."""
    snap = Snapshot(nodes, pods, False)
    return _by_node(snap.table.nodes, snap.room([]))


def _by_node(nodes: Sequence[NodeInfo], room: Room) -> dict[str, tuple[dict[str, int], tuple[HostPort, ...]]]:
    return {
        n.name: ({k: v for k, v in room.free[i].items() if v}, tuple(sorted(room.ports[i], key=str)))
        for i, n in enumerate(nodes)
    }


# -- released members pinned to a node -------------------------------------------------------


def pinned_node_problems(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                         pinned: Sequence[tuple[PodInfo, str]]) -> dict[str, str]:
    """Why each pinned node can no longer take its member: ``{uid: reason}``, usable ones left out.

    ``pinned``: ``(member, node name)`` for released, unbound members whose required node
    affinity pins them to that node (the pin cannot be loosened once the gate is gone).
    ``pods``: as for :func:`cogate.controller.planning.planner.decide` (bound, non-terminal pods). The
    rules are ``decide``'s filters, applied to the pinned node only: the node is gone, it fails
    a load-independent filter (NotReady, cordoned, an untolerated NoSchedule/NoExecute taint,
    nodeSelector, node affinity: kube-scheduler NodeUnschedulable, TaintToleration,
    NodeAffinity; :func:`cogate.controller.planning.filters.static_reason`), or its room no longer
    holds the member (NodeResourcesFit, NodePorts, required pod anti-affinity) after the bound
    pods and the pinned members before it (oldest first, then name). Reservations are not
    charged: kube-scheduler does not see them, so this is the room it will find. A member whose
    uid is among the bound ``pods`` (the member cache lags) is skipped.
    """
    snapshot = Snapshot(nodes, pods, any(m.required_pod_anti_affinity for m, _ in pinned))
    room = snapshot.room(())
    out: dict[str, str] = {}
    for m, name in sorted(pinned, key=lambda mn: (mn[0].created, mn[0].name, mn[0].uid)):
        if m.uid in snapshot.bound_uids or m.bound or m.terminal:
            continue
        i = snapshot.index.get(name)
        if i is None:
            out[m.uid] = f"node {name} no longer exists"
            continue
        why = static_reason(nodes[i], m)
        if why is not None:
            verb = "is" if why.startswith(("not ", "unschedulable")) else "has" if why.startswith("taint") else "fails"
            out[m.uid] = f"node {name} {verb} {why}"
            continue
        spec = room.spec_for(m)
        if not room.fits(spec, i):
            out[m.uid] = f"node {name}: {_room_taken(room, spec, i)}"
            continue
        room.occupy(m, spec.req, spec.ports, i)
    return out


def _room_taken(room: Room, spec: Spec, i: int) -> str:
    """What node ``i`` lacks for ``spec`` now (the first filter that fails, as :meth:`Room.fits`)."""
    free = room.free[i]
    for k, v in spec.req_items:
        if free.get(k, 0) < v:
            return (f"room taken ({k}: {format_quantity(k, max(free.get(k, 0), 0))} free, "
                    f"the member requests {format_quantity(k, v)})")
    if spec.ports and any(p.conflicts(q) for p in spec.ports for q in room.ports[i]):
        return "host port taken"
    return "required pod anti-affinity now excludes it"
