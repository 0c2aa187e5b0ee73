"""Free room per node (pure): the :class:`Room` a pass plans on, and where one member fits it.

kube-scheduler's filters, applied node by node, never to cluster totals. A :class:`Room` is the
free room per node after the bound pods and the room promised a pass charges (built by
:meth:`cogate.controller.planning.capacity.Snapshot.room`, or by the incremental planner on free
room kept between passes, ``Room(base=...)``), with an undo log (``mark``, ``rollback``,
``commit``) so that a plan that does not fit leaves no trace. Free room and requests are per
resource, in the units of :mod:`cogate.controller.model.resources` (CPU millicores, memory bytes,
counts; ``pods`` slots).

* NodeResourcesFit: a member fits a node when, for every resource it requests
  (``pods`` = 1 included, :func:`req_with_pod`), ``request <= allocatable - requests of bound
  non-terminal pods - reservations - members planned earlier in this decision``.
  Resources the member does not request never block (the scheduler skips zero
  requests), a node without a resource in allocatable has 0 of it.
* NodeUnschedulable, TaintToleration, NodeAffinity, VolumeBinding (bound PVs' node
  affinity): load-independent, :mod:`cogate.controller.planning.filters`; cached per node table and
  member spec (:meth:`Room._static_filter`).
* NodePorts: a host port may not conflict with ports used on the node (bound
  pods, reservations, members planned earlier).
* InterPodAffinity, required anti-affinity: evaluated for any topology key
  against bound pods, reserved pods and planned members, in both directions
  (the member's terms and the terms of pods already there); terms and topology domains as
  :func:`cogate.controller.planning.filters.term_matches` and :func:`~cogate.controller.planning.filters.domain`
  read them.
* InterPodAffinity, required affinity: satisfied only by pods already bound
  (planned, unbound members never count; the "first pod matches its own term"
  exception is not used). A group whose members' pod affinity no node
  satisfies gets ``Unschedulable`` (:mod:`cogate.controller.planning.planner`). Both choices can
  only make the planner say "does not fit" where the scheduler might succeed, never the
  reverse.
* PodTopologySpread, ``DoNotSchedule`` constraints
  (:mod:`cogate.controller.planning.spread`, kube-scheduler v1.36 ``podtopologyspread/filtering.go``):
  counted over bound pods, reservations and members planned earlier; members with such
  constraints are placed one at a time, least crowded domain first (``Room._place_spread``).

A pod takes its requests plus one ``pods`` slot (:func:`req_with_pod`); :meth:`Room.charge` is
the one way to charge a pod (or room promised to one) on a node, :meth:`Room.vacate` takes a
bound pod off. Members the filters cannot tell apart share one :class:`Spec` (eligible nodes,
size, the domains anti-affinity forbids them); :class:`NodeTable` holds what depends on the
nodes alone (one per node generation in the incremental planner,
:mod:`cogate.controller.planning.planstate`). Nominations of lower priority, and room held for a
group's own preemption, are lent to the group while it is planned (:meth:`Room.lend`, module
doc of :mod:`cogate.controller.planning.capacity`, "Room promised").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from cogate.controller.planning import spread as _spread
from cogate.controller.planning.filters import SpecKey, StaticKey, domain, spec_key, static_reason, term_matches
from cogate.controller.model.records import HostPort, NodeInfo, PodInfo, Promise

__all__ = ["req_with_pod", "Spec", "NodeTable", "copies", "Room"]


def req_with_pod(requests: Mapping[str, int]) -> dict[str, int]:
    """A pod's effective requests plus the one ``pods`` slot it takes (NodeResourcesFit)."""
    r = {k: v for k, v in requests.items() if v > 0 and k != "pods"}
    r["pods"] = 1
    return r


#: Eligible node indexes, and how many nodes each reason excluded (``static_reason``).
_StaticResult = tuple[list[int], dict[str, int]]
#: ``Room`` undo log entries: room taken on a node (requests, number of host ports), a pod
#: recorded as placed (anti-affinity), a pod counted for topology spread, a topology domain
#: forbidden to a spec.
_Undo = (
    tuple[Literal["occupy"], int, Mapping[str, int], int]
    | tuple[Literal["placed"]]
    | tuple[Literal["spread"]]
    | tuple[Literal["forbid"], "Spec", str, str]
    | tuple[Literal["vacate"], int, Mapping[str, int], list[tuple[int, HostPort]], int, PodInfo, int]
    | tuple[Literal["spec"], SpecKey, "Spec"]
)


class Spec:
    """Members that the filters cannot tell apart share one Spec (and its caches).

    ``pod``: the first such member; ``req``: its requests with the ``pods`` slot
    (:func:`req_with_pod`), ``req_items`` the same sorted; ``ports``: its host ports;
    ``eligible``: node slots that pass the static filters (and, on a live room, required pod
    affinity), ``reasons``: how many nodes each static filter excluded, ``affinity_unmet``:
    nodes excluded by pod affinity alone; ``forbidden``: topology key -> domains its required
    anti-affinity forbids now (undone with the room); ``size``: its largest request as a
    fraction of the largest allocatable of that resource (``inf`` when no node has it).
    """

    __slots__ = ("pod", "static_key", "req", "req_items", "ports", "eligible", "reasons", "forbidden",
                 "affinity_unmet", "size")

    def __init__(self, pod: PodInfo, req: dict[str, int], static_key: StaticKey) -> None:
        self.pod = pod
        self.static_key = static_key
        self.req = req
        self.req_items = tuple(sorted(req.items()))
        self.ports = pod.host_ports
        self.eligible: list[int] = []
        self.reasons: dict[str, int] = {}
        self.forbidden: dict[str, set[str]] = {}
        self.affinity_unmet = 0  # nodes that pass static filters but not pod affinity
        self.size = 0.0


class NodeTable:
    """Everything that depends on the nodes alone (one node generation): the nodes in slot
    order, name -> slot, the static filter results per ``StaticKey`` (shared by the live and
    the empty room), the largest allocatable per resource (member size), topology domains.

    The incremental planner (:mod:`cogate.controller.planning.planstate`) keeps one per node generation;
    ``decide`` builds one per call.
    """

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self.nodes = nodes
        self.index = {n.name: i for i, n in enumerate(nodes)}
        self.static_cache: dict[StaticKey, _StaticResult] = {}
        self.dom_cache: dict[str, list[str | None]] = {}
        self._eligible_sets: dict[StaticKey, frozenset[int]] = {}
        maxalloc: dict[str, int] = {}
        for n in nodes:
            for k, v in n.allocatable.items():
                if v > maxalloc.get(k, 0):
                    maxalloc[k] = v
        self.maxalloc = maxalloc

    def eligible_set(self, key: StaticKey) -> frozenset[int]:
        """The slots of ``static_cache[key]`` as a set (filled once the key was filtered)."""
        out = self._eligible_sets.get(key)
        if out is None:
            out = frozenset(self.static_cache[key][0])
            self._eligible_sets[key] = out
        return out


#: Base free room per node slot (``free``, host ``ports``) that a live room starts from and
#: copies a node's entry of only when it first changes it (the incremental planner's base).
_Base = tuple[list[dict[str, int]], list[list[HostPort]]]


def copies(free: Mapping[str, int], req_items: Sequence[tuple[str, int]]) -> int:
    """How many members requesting ``req_items`` (with ``pods``) the free room holds by
    resources alone (NodeResourcesFit); host ports and anti-affinity are checked by ``fits``."""
    n = 1 << 62
    for k, v in req_items:
        c = free.get(k, 0) // v
        if c < n:
            n = c
    return n


class Room:
    """Free room per node with an undo log, for one decision (or the empty cluster).

    ``mark``/``rollback`` undo what was placed since a mark (a plan that did not
    fit); ``commit`` keeps it (a release). Built by :meth:`~cogate.controller.planning.capacity.Snapshot.room` (from the
    nodes and bound pods) or from a ``_Base`` kept between passes, whose per-node
    entries are copied on first write (``own``: the slots this room changed).
    """

    def __init__(
        self,
        table: NodeTable,
        anti_active: bool,
        empty: bool,
        base: _Base | None = None,
        spread_active: bool = False,
    ) -> None:
        nodes = table.nodes
        self.nodes = nodes
        #: hook: PodTopologySpread counts (None while no member has hard spread constraints)
        self.spread: _spread.Tracker | None = _spread.Tracker(nodes) if spread_active else None
        self.empty = empty
        self.own: set[int] | None = None
        if base is None:
            self.free: list[dict[str, int]] = [dict(n.allocatable) for n in nodes]
            self.ports: list[list[HostPort]] = [[] for _ in nodes]
        else:
            self.free = list(base[0])
            self.ports = list(base[1])
            self.own = set()
        self.placed: list[tuple[PodInfo, int]] = []  # only tracked when anti-affinity is in play
        #: Bound pods for pod affinity, or a function that lists them when first needed.
        self._bound_pods: list[tuple[PodInfo, int]] | Callable[[], list[tuple[PodInfo, int]]] = []
        self.anti_active = anti_active
        self.static_cache = table.static_cache
        self.table = table
        self.specs: dict[SpecKey, Spec] = {}
        self.log: list[_Undo] = []
        self._dom_cache = table.dom_cache
        self.maxalloc = table.maxalloc
        #: Bound pods being deleted, or a function that lists them (the incremental planner keeps
        #: them apart); None: read them from ``bound_pods``.
        self.terminating_pods: Callable[[], list[tuple[PodInfo, int]]] | None = None
        #: When a set: every node some batch considered (free room for one more member), for
        #: the incremental planner to know which nodes a plan depends on.
        self.looked: set[int] | None = None
        #: ``(promise, node slot)`` of the room promised charged on this room (:func:`~cogate.controller.planning.capacity.reserve_room`):
        #: what a waiting message can name as held for another gang or pod.
        self.promised: list[tuple[Promise, int]] = []
        #: The nominations among them (what :meth:`lend` may lend).
        self.nominations: list[tuple[Promise, int]] = []
        #: The room held for a preempting PodGroup among them (``Promise.kind`` ``"preempting"``:
        #: what :meth:`lend` lends to its holder only).
        self.holds: list[tuple[Promise, int]] = []
        #: uids of pods :meth:`vacate` took off this room (they no longer satisfy pod affinity).
        self.gone: set[str] = set()

    @property
    def bound_pods(self) -> list[tuple[PodInfo, int]]:
        """``(pod, node slot)`` of the bound non-terminal pods (listed on first use)."""
        if callable(self._bound_pods):
            self._bound_pods = self._bound_pods()
        return self._bound_pods

    @bound_pods.setter
    def bound_pods(self, value: list[tuple[PodInfo, int]] | Callable[[], list[tuple[PodInfo, int]]]) -> None:
        self._bound_pods = value

    def _own(self, i: int) -> dict[str, int]:
        """Node ``i``'s free room, copied from the base on first write."""
        if self.own is not None and i not in self.own:
            self.own.add(i)
            self.free[i] = dict(self.free[i])
            self.ports[i] = list(self.ports[i])
        return self.free[i]

    # -- room promised
    def lend(self, priority: int, holder: str = "") -> list[tuple[Promise, int]]:
        """Give back, uncommitted, the resources of the nominations charged here whose priority is
        below ``priority``: a pod of ``priority`` does not see them (kube-scheduler counts only
        nominated pods of equal or higher priority). Their host ports, and their place for pod
        anti-affinity and topology spread, stay (so the answer can only be "does not fit" where
        kube-scheduler could place, never the reverse). With ``holder`` (``"PodGroup ns/name"``)
        the room held for that group's preemption (:attr:`holds`) is lent too: it is that group's
        own. Returns what was lent, for :meth:`repay`."""
        lent = [(p, i) for p, i in self.nominations if p.priority < priority]
        if holder:
            lent += [(p, i) for p, i in self.holds if p.holder == holder]
        for p, i in lent:
            self.charge(p, i, resources_only=True, sign=-1)
        return lent

    def repay(self, lent: Sequence[tuple[Promise, int]]) -> None:
        """Charge what :meth:`lend` gave back again and commit (call once the borrower's plan is
        committed or rolled back: room it took from a lent nomination stays taken, so pods of
        that nomination's priority or lower see both)."""
        for p, i in lent:
            self.charge(p, i, resources_only=True)
        self.commit()

    # -- domains
    def dom(self, key: str, i: int) -> str | None:
        """Node ``i``'s topology domain for label ``key`` (:func:`~cogate.controller.planning.filters.domain`, cached)."""
        col = self._dom_cache.get(key)
        if col is None:
            col = [domain(n, key) for n in self.nodes]
            self._dom_cache[key] = col
        return col[i]

    # -- accounting
    def charge(self, pod: PodInfo | Promise, i: int, *, resources_only: bool = False, sign: int = 1) -> None:
        """Charge the room ``pod`` takes on node ``i``, undone by :meth:`rollback`: its requests with
        the ``pods`` slot (:func:`req_with_pod`, NodeResourcesFit), its host ports (NodePorts) and its
        place for required anti-affinity (InterPodAffinity) and topology spread (PodTopologySpread).
        A :class:`~cogate.controller.model.records.Promise` charges its own requests and host ports,
        placed as its pod. ``resources_only``: the requests and the ``pods`` slot alone (room held
        for a preempting group, nominations lent and repaid: :meth:`lend`); with it, ``sign`` -1
        gives them back. :meth:`vacate` takes a charged pod off again. Raises ``ValueError`` for
        ``sign`` -1 without ``resources_only``."""
        if not resources_only:
            if sign != 1:
                raise ValueError(f"sign {sign} needs resources_only")
            self.occupy(pod if isinstance(pod, PodInfo) else pod.pod, req_with_pod(pod.requests), pod.host_ports, i)
        elif sign == 1:
            self.occupy(None, req_with_pod(pod.requests), (), i)
        else:
            self.occupy(None, {k: -v for k, v in req_with_pod(pod.requests).items()}, (), i)

    def occupy(self, pod: PodInfo | None, req: Mapping[str, int], ports: Sequence[HostPort], i: int) -> None:
        """Charge ``req`` (with ``pods``) and ``ports`` on node ``i``; ``pod`` counts for spread and anti-affinity."""
        f = self._own(i)
        for k, v in req.items():
            f[k] = f.get(k, 0) - v
        self.ports[i].extend(ports)
        self.log.append(("occupy", i, req, len(ports)))
        if self.spread is not None and pod is not None:  # hook: spread counts
            self.spread.add(pod, i)
            self.log.append(("spread",))
        if self.anti_active and pod is not None:
            self.placed.append((pod, i))
            self.log.append(("placed",))
            for spec in self.specs.values():
                self._forbid_for(spec, pod, i)

    def vacate(self, pod: PodInfo, i: int) -> None:
        """Give back the room ``pod`` takes on node ``i`` (a bound pod charged by
        :meth:`~cogate.controller.planning.capacity.Snapshot.room`, or a pod placed with :meth:`occupy`), undone by :meth:`rollback`:
        its requests with the ``pods`` slot (NodeResourcesFit), its host ports (NodePorts), its
        place for required anti-affinity (InterPodAffinity, both directions) and topology spread
        counts (PodTopologySpread); it no longer satisfies required pod affinity. Used by
        :mod:`cogate.controller.preemption.selection` to take a victim off the room: the room is then the
        one :meth:`~cogate.controller.planning.capacity.Snapshot.room` builds without that pod (property test
        ``tests/unit/controller/preemption/test_preemption_props.py``). Cached specs whose answer the pod could change
        (every spec while anti-affinity is tracked, specs with pod affinity) are dropped and
        rebuilt on next use. Cost: its requests and ports, plus a scan of the pods placed when
        anti-affinity or spread is tracked."""
        req = req_with_pod(pod.requests)
        f = self._own(i)
        for k, v in req.items():
            f[k] = f.get(k, 0) + v
        removed: list[tuple[int, HostPort]] = []
        used = self.ports[i]
        for hp in pod.host_ports:
            for j in range(len(used) - 1, -1, -1):
                if used[j] == hp:
                    removed.append((j, hp))
                    del used[j]
                    break
        placed_at = -1
        if self.anti_active:
            for j in range(len(self.placed) - 1, -1, -1):
                other, k = self.placed[j]
                if k == i and other.uid == pod.uid:
                    placed_at = j
                    del self.placed[j]
                    break
        spread_at = self.spread.remove(pod, i) if self.spread is not None else -1
        self.gone.add(pod.uid)
        self._drop_specs()
        self.log.append(("vacate", i, req, removed, placed_at, pod, spread_at))

    def _drop_specs(self) -> None:
        """Forget cached specs a pod's arrival or departure outside :meth:`occupy` could change."""
        if self.anti_active:
            self.specs = {}
        elif any(s.pod.required_pod_affinity for s in self.specs.values()):
            self.specs = {k: s for k, s in self.specs.items() if not s.pod.required_pod_affinity}

    def mark(self) -> int:
        """A point of the undo log for :meth:`rollback`."""
        return len(self.log)

    def rollback(self, mark: int) -> None:
        """Undo everything placed since ``mark``."""
        while len(self.log) > mark:
            e = self.log.pop()
            if e[0] == "occupy":
                _, i, req, nports = e
                f = self.free[i]
                for k, v in req.items():
                    f[k] = f.get(k, 0) + v
                if nports:
                    del self.ports[i][-nports:]
            elif e[0] == "placed":
                self.placed.pop()
            elif e[0] == "spread":
                self.spread.pop()  # type: ignore[union-attr]
            elif e[0] == "forbid":
                _, spec, key, d = e
                spec.forbidden[key].discard(d)
            elif e[0] == "spec":
                _, key, spec = e
                if self.specs.get(key) is spec:
                    del self.specs[key]
            elif e[0] == "vacate":
                _, i, req, removed, placed_at, pod, spread_at = e
                f = self.free[i]
                for k, v in req.items():
                    f[k] = f.get(k, 0) - v
                for j, hp in reversed(removed):
                    self.ports[i].insert(j, hp)
                if placed_at >= 0:
                    self.placed.insert(placed_at, (pod, i))
                if spread_at >= 0:
                    self.spread.insert(spread_at, pod, i)  # type: ignore[union-attr]
                self.gone.discard(pod.uid)
                self._drop_specs()

    def commit(self) -> None:
        """Keep everything placed so far (the undo log is emptied)."""
        self.log.clear()

    def _add_forbidden(self, spec: Spec, key: str, d: str | None) -> None:
        if d is None:
            return
        s = spec.forbidden.setdefault(key, set())
        if d not in s:
            s.add(d)
            self.log.append(("forbid", spec, key, d))

    def _forbid_for(self, spec: Spec, other: PodInfo, i: int) -> None:
        """``other`` now sits on node i: forbid domains for ``spec`` per anti-affinity."""
        me = spec.pod
        for term in me.required_pod_anti_affinity:
            if term_matches(term, me.namespace, other, anti=True):
                self._add_forbidden(spec, term.topology_key, self.dom(term.topology_key, i))
        for term in other.required_pod_anti_affinity:
            if term_matches(term, other.namespace, me, anti=True):
                self._add_forbidden(spec, term.topology_key, self.dom(term.topology_key, i))

    # -- specs
    def spec_for(self, pod: PodInfo) -> Spec:
        """The shared ``Spec`` of ``pod``: its eligible nodes (static filters, then required pod
        affinity against bound pods), its size, and the domains anti-affinity forbids it now."""
        key = spec_key(pod, self.anti_active, self.spread is not None)
        static_key = key[0]
        spec = self.specs.get(key)
        if spec is not None:
            return spec
        spec = Spec(pod, req_with_pod(pod.requests), static_key)
        eligible, reasons = self._static_filter(static_key, pod)
        spec.reasons = dict(reasons)
        if pod.required_pod_affinity and not self.empty:
            kept = [i for i in eligible if self._affinity_ok(pod, i)]
            spec.affinity_unmet = len(eligible) - len(kept)
            eligible = kept
        spec.eligible = list(eligible)
        spec.size = max(
            (v / self.maxalloc[k] if self.maxalloc.get(k) else float("inf") for k, v in spec.req.items()),
            default=0.0,
        )
        if self.anti_active:
            # Its forbidden domains go into the undo log: a rollback past this point forgets the
            # spec too, else it would stay cached without the domains of the pods placed before
            # it (a member could then be planned next to a pod its anti-affinity excludes).
            self.log.append(("spec", key, spec))
            for other, i in self.placed:
                self._forbid_for(spec, other, i)
        self.specs[key] = spec
        return spec

    def _static_filter(self, key: StaticKey, pod: PodInfo) -> _StaticResult:
        """Nodes that pass the load-independent filters for ``pod``, cached per ``key``."""
        cached = self.static_cache.get(key)
        if cached is None:
            eligible: list[int] = []
            reasons: dict[str, int] = {}
            for i, n in enumerate(self.nodes):
                r = static_reason(n, pod)
                if r is None:
                    eligible.append(i)
                else:
                    reasons[r] = reasons.get(r, 0) + 1
            cached = (eligible, reasons)
            self.static_cache[key] = cached
        return cached

    def _affinity_ok(self, pod: PodInfo, i: int) -> bool:
        for term in pod.required_pod_affinity:
            d = self.dom(term.topology_key, i)
            if d is None:
                return False
            if not any(
                self.dom(term.topology_key, j) == d and term_matches(term, pod.namespace, other, anti=False)
                and other.uid not in self.gone
                for other, j in self.bound_pods
            ):
                return False
        return True

    # -- fit
    def fits(self, spec: Spec, i: int) -> bool:
        """One more member of ``spec`` fits node ``i`` now (resources, host ports, anti-affinity, spread)."""
        f = self.free[i]
        for k, v in spec.req_items:
            if f.get(k, 0) < v:
                return False
        if spec.ports:
            used = self.ports[i]
            for p in spec.ports:
                for q in used:
                    if p.conflicts(q):
                        return False
        if spec.forbidden:
            for key, doms in spec.forbidden.items():
                if doms:
                    d = self.dom(key, i)
                    if d is not None and d in doms:
                        return False
        if spec.pod.topology_spread and self.spread is not None:  # hook: PodTopologySpread Filter
            return self.spread.allows(spec.pod, i)
        return True

    def _place_spread(self, spec: Spec, members: Sequence[PodInfo], out: dict[str, int]) -> None:
        """Members with hard topology spread: each onto a node the Filter allows now, the one whose
        domains hold the fewest matching pods first (then the tightest, then by name); as
        kube-scheduler re-evaluates the skew for every pod, so does this loop.

        A lazy heap keyed by (load, copies, name): loads only grow during the batch, so a stored
        key is a lower bound and is refreshed when it reaches the top. A node refused only by the
        skew is set aside until the next placement (which may raise the minimum); a node without
        room (or refused by ports or anti-affinity, which only get worse) is dropped.
        """
        tracker = self.spread
        assert tracker is not None
        pod = spec.pod
        heap = []
        for i in spec.eligible:
            c = self.copies(spec, i)
            if c > 0:
                heap.append((tracker.load(pod, i), c, self.nodes[i].name, i))
        heapq.heapify(heap)
        aside: list[tuple[int, int, str, int]] = []
        k = 0
        while k < len(members) and heap:
            load, _, name, i = heapq.heappop(heap)
            key = (tracker.load(pod, i), self.copies(spec, i), name, i)
            if key[1] <= 0:
                continue
            if key[0] > load:
                heapq.heappush(heap, key)
                continue
            if not self.fits(spec, i):
                if not tracker.allows(pod, i):
                    aside.append(key)
                continue
            m = members[k]
            self.occupy(m, spec.req, spec.ports, i)
            out[m.uid] = i
            k += 1
            heapq.heappush(heap, (tracker.load(pod, i), self.copies(spec, i), name, i))
            for a in aside:
                heapq.heappush(heap, a)
            aside.clear()

    def copies(self, spec: Spec, i: int) -> int:
        """How many members of ``spec`` node ``i``'s free resources hold (:func:`copies`)."""
        return copies(self.free[i], spec.req_items)

    def place_batch(self, spec: Spec, members: Sequence[PodInfo], out: dict[str, int]) -> None:
        """Place as many of ``members`` (same spec) as possible, tightest nodes first."""
        if not members:
            return
        if spec.pod.topology_spread and self.spread is not None:  # hook: one at a time, least crowded domain
            self._place_spread(spec, members, out)
            return
        order = []
        for i in spec.eligible:
            c = self.copies(spec, i)
            if c > 0:
                order.append((c, self.nodes[i].name, i))
        order.sort()
        if self.looked is not None:
            self.looked.update(i for _, _, i in order)
        k = 0
        for _, _, i in order:
            while k < len(members) and self.fits(spec, i):
                m = members[k]
                self.occupy(m, spec.req, spec.ports, i)
                out[m.uid] = i
                k += 1
            if k >= len(members):
                break
