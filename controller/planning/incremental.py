"""The incremental pass (pure): verdicts kept between passes while their inputs did not change.

:class:`IncrementalPass` is the :class:`~cogate.controller.planning.planner.Pass` that
:meth:`cogate.controller.planning.planstate.PlanningState.decide` runs: it plans on the free room
the state keeps (:class:`~cogate.controller.planning.planstate.LiveSnapshot`) and gives a group the
verdict it kept (:class:`Kept`) without planning it again, while the group's inputs have not
changed; its answers equal ``decide``'s over the same input. The rules (each proved by the
property test ``tests/unit/controller/planning/test_planstate_props.py`` against ``decide``):

- the ``GroupRequest`` is equal to the one judged (no member added, removed or changed,
  same minMember, same ``released``), the planner config and the node generation are the
  same, required pod anti-affinity is in play nowhere (it makes every placement
  depend on every other: such passes are planned in full), and whether any member has hard
  topology spread is unchanged;
- a verdict of the group alone (``WaitingForMembers``, invalid minMember, and a group held
  whatever the room: an unknown scheduler, claim problems, unchecked constraints under
  ``hold``; these read only members' ``PodInfo`` and the config) is kept;
- a verdict given behind a starving group is kept while the same group starves ahead of it;
- a verdict from a plan that did not fit (``InsufficientCapacity``,
  ``ExceedsClusterCapacity``) is kept while no starving group is ahead, the group does not
  starve yet (``starvation_seconds`` since complete, checked against ``now``), none of its
  members uses host ports, pod (anti-)affinity or hard topology spread (spread counts pods on
  every node of a domain, also nodes the member cannot use), no pod being deleted was
  added, changed or removed on a node its members may use (the message names such pods),
  and for every node whose free room may differ at the group's turn (a bound pod added or removed there since the last pass; room
  taken by a reservation or by a group released earlier in this pass or the last one) that
  the group's members may use (static filters): the plan did not consider the node (no
  member fitted it) and no member fits it now, and the "short by" totals of the message
  are still not short (any change on such a node re-plans a group whose message names a
  shortfall);
- a wait for the rest of ``spec.minResources`` (``GroupVerdict.min_resources_short``: its message
  sums the free room of every node its members may use) is kept only while that whole room is
  the one it read: no bound pod added, changed or removed on any node since the last pass, the
  room at its turn equal to the kept free room (no room promised, nothing released earlier in
  the pass: then and now), the same starving groups ahead, and it does not starve yet;
- ``Released`` verdicts, released groups' new members, and a starving group (its message
  counts the seconds, and it blocks later groups) are planned every pass.

- a group to which this pass lends the room of lower-priority nominations
  (``Pass.lends``: its plan read room that is not in the kept free room) is planned again.

Room freed or taken by a group released earlier in the same pass, a reservation that
expired, and a new starving group ahead are all seen by these rules, so ordering
(priority, age, backfill, starvation) is exactly as in ``decide``. The pass reads and writes
the kept verdicts, the kept "fits the empty cluster" results and the per-node changes since the
last pass that its :class:`~cogate.controller.planning.planstate.PlanningState` holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cogate.controller.model.minresources import Short
from cogate.controller.model.records import HostPort, Promise, Reservation
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, PlannerConfig
from cogate.controller.planning.filters import static_key
from cogate.controller.planning.basis import fits_empty_key
from cogate.controller.planning.domaincache import CachedDomains, DomainCache
from cogate.controller.planning.planner import Pass
from cogate.controller.planning.room import NodeTable, copies
from cogate.controller.planning.starvation import starving



class KeptState(Protocol):
    """What an incremental pass reads and keeps in its :class:`~cogate.controller.planning.planstate.PlanningState`
    (a Protocol, so this module needs no import of the state that imports it): the free room and host
    ports per node slot, the slots whose free room or terminating pods changed since the last pass,
    the kept verdicts and "fits the empty cluster" answers, and the counters of kept and judged groups."""

    _free: list[dict[str, int]]
    _ports: list[list[HostPort]]
    _changed: dict[int, dict[str, int]]
    _deleting_changed: set[int]
    _kept: dict[tuple[str, str], Kept]
    _fits_empty: dict[Any, tuple[bool, str, tuple[Short, ...]]]
    _domains: DomainCache
    _pass_key: Any
    last_kept: int
    last_judged: int


class LiveView(Protocol):
    """What an incremental pass reads of the state's snapshot
    (:class:`~cogate.controller.planning.planstate.LiveSnapshot`) besides what :class:`Pass` reads."""

    table: NodeTable
    anti_active: bool
    spread_active: bool

__all__ = ["IncrementalPass", "Kept", "FITS_EMPTY_LIMIT", "positive"]

#: Bound on the kept "fits the empty cluster" results (cleared when exceeded).
FITS_EMPTY_LIMIT = 4096


@dataclass
class Kept:
    """A verdict kept from an earlier pass and what it was computed from (see the module doc).

    For ``reads == "room"``: ``specs`` (requests with ``pods`` of each member spec, slots its
    static filters admit), ``looked`` (slots the plan considered), ``own`` (slots changed in
    the pass before the group's turn), and for the shortfall text: ``lack`` (slots whose free
    room it summed, None when it read none), ``demand``, ``supply`` (free room it summed, with
    the plan applied), ``short`` (it named a shortfall), ``inpass`` (the part of ``supply``
    that came from changes made in the pass before the group's turn), ``since`` (complete since).
    """

    request: GroupRequest
    verdict: GroupVerdict
    reads: str
    blocker: tuple[Any, ...] = ()
    specs: tuple[tuple[tuple[tuple[str, int], ...], frozenset[int]], ...] = ()
    looked: frozenset[int] = frozenset()
    own: frozenset[int] = frozenset()
    lack: frozenset[int] | None = None
    demand: Mapping[str, int] = field(default_factory=dict)
    supply: dict[str, int] = field(default_factory=dict)
    short: bool = False
    inpass: dict[str, int] = field(default_factory=dict)
    since: float | None = None


def positive(v: int) -> int:
    """``v``, or 0 when it is negative (free room that counts)."""
    return v if v > 0 else 0


class IncrementalPass(CachedDomains, Pass):
    """A pass that keeps verdicts whose inputs did not change (module doc), and per-domain results
    of topology-constrained groups (:mod:`cogate.controller.planning.domaincache`)."""

    def __init__(self, state: KeptState, live: LiveView, groups: Sequence[GroupRequest],
                 reservations: Sequence[Reservation], now: float, config: PlannerConfig,
                 promised: Sequence[Promise] = ()) -> None:
        super().__init__(live, groups, reservations, now, config, promised)  # type: ignore[arg-type]
        self.state = state
        self.live = live
        self.domain_cache = state._domains
        self.domain_cache.begin(live.table, state._pass_key, [*state._changed, *state._deleting_changed],
                                 (state._free, state._ports))

    def fits_empty(self, g: GroupRequest, ms: Any) -> tuple[bool, str, tuple[Short, ...]]:
        cache = self.state._fits_empty
        key = fits_empty_key(g, ms, self.live.anti_active, self.live.spread_active)
        hit = cache.get(key)
        if hit is None:
            hit = super().fits_empty(g, ms)
            if len(cache) >= FITS_EMPTY_LIMIT:
                cache.clear()
            cache[key] = hit
        return hit

    def judge(self, g: GroupRequest) -> GroupVerdict:
        key = (g.namespace, g.name)
        kept = self.state._kept.get(key)
        if kept is not None and kept.request == g and not self.lends(g) and self._holds(kept):
            self.state.last_kept += 1
            return kept.verdict
        self.state.last_judged += 1
        own = self.room.own
        own_at_turn = frozenset(own) if own else frozenset()
        self.room.looked = set()
        try:
            verdict = super().judge(g)
        finally:
            looked, self.room.looked = self.room.looked, None
        kept = self._keep(g, verdict, frozenset(looked), own_at_turn)
        if kept is None:
            self.state._kept.pop(key, None)
        else:
            self.state._kept[key] = kept
        return verdict

    def _blocker_key(self) -> tuple[Any, ...]:
        """The starving groups ahead, in order, each with the nodes it could use (its scope)."""
        return tuple((b.namespace, b.name, scope) for b, scope in self.blockers)

    # -- what a verdict read

    def _keep(self, g: GroupRequest, verdict: GroupVerdict, looked: frozenset[int],
              own_at_turn: frozenset[int]) -> Kept | None:
        basis = self.basis
        if basis.reads == "group":
            return Kept(g, verdict, "group")
        if basis.reads == "blocker":
            assert basis.members is not None
            if any(m.required_pod_affinity for m in basis.members.plannable):
                return None  # its scope (eligible nodes) depends on bound pods
            return Kept(g, verdict, "blocker", blocker=self._blocker_key())
        if basis.reads == "aggregate":
            # the whole room at its turn: kept only while nothing charged it in the pass before its
            # turn (no room promised, no earlier release) and no bound pod changes (:meth:`_holds`)
            if self.live.anti_active or not self._room_is_base(own_at_turn):
                return None
            return Kept(g, verdict, "aggregate", blocker=self._blocker_key(), since=basis.since)
        if basis.reads != "room" or self.live.anti_active:
            return None
        assert basis.members is not None and basis.miss is not None
        specs: dict[int, tuple[tuple[tuple[str, int], ...], frozenset[int]]] = {}
        for m in basis.members.plannable:
            if m.host_ports or m.required_pod_affinity or m.required_pod_anti_affinity or m.topology_spread:
                return None  # read the room beyond free resources (topology spread: pods on every node): planned every pass
            spec = self.room.spec_for(m)
            if id(spec) not in specs:
                specs[id(spec)] = (spec.req_items, self.live.table.eligible_set(static_key(m)))
        short = basis.miss.short
        kept = Kept(g, verdict, "room", specs=tuple(specs.values()), looked=looked, own=own_at_turn,
                     lack=short.eligible, demand=short.demand, supply=dict(short.supply), short=bool(short.short),
                     since=basis.since)
        kept.inpass = self._inpass(kept, own_at_turn)
        return kept

    def _room_is_base(self, own: Iterable[int]) -> bool:
        """The room equals the kept free room on every slot in ``own`` (the slots this pass wrote:
        a plan rolled back leaves them equal, room promised or a release does not)."""
        base, ports = self.state._free, self.state._ports
        free = self.room.free
        for x in own:
            if {k: v for k, v in free[x].items() if v} != {k: v for k, v in base[x].items() if v}:
                return False
            if self.room.ports[x] != ports[x]:
                return False
        return True

    def _inpass(self, kept: Kept, own: Iterable[int]) -> dict[str, int]:
        """Free room (``demand`` resources, over ``lack``) that this pass's changes before the
        group's turn (reservations, earlier releases) added to the base: part of ``supply``."""
        out: dict[str, int] = {}
        if kept.lack is None:
            return out
        base = self.state._free
        free = self.room.free
        for x in own:
            if x in kept.lack:
                f, b = free[x], base[x]
                for k in kept.demand:
                    d = positive(f.get(k, 0)) - positive(b.get(k, 0))
                    if d:
                        out[k] = out.get(k, 0) + d
        return out

    def _holds(self, kept: Kept) -> bool:
        """Whether ``kept`` is the verdict ``judge`` would give now; refreshes it if so."""
        if kept.reads == "group":
            return True
        blocker = self._blocker_key()
        if kept.reads == "blocker":
            return blocker == kept.blocker
        if kept.reads == "aggregate":
            return (blocker == kept.blocker and not self.state._changed and not self.state._deleting_changed
                    and self._room_is_base(self.room.own or ())
                    and not (kept.since is not None and starving(kept.since, self.now, self.config)))
        if blocker:
            return False
        if kept.since is not None and starving(kept.since, self.now, self.config):
            return False
        room = self.room
        own = room.own or set()
        changed = self.state._changed
        nodes = set(changed)
        nodes.update(own)
        nodes.update(kept.own)
        supply = dict(kept.supply)
        deleting = self.state._deleting_changed
        for x in nodes:
            relevant = False
            for req_items, eligible in kept.specs:
                if x in eligible:
                    relevant = True
                    if x in kept.looked or copies(room.free[x], req_items) > 0:
                        return False
            if relevant and x in deleting:
                return False  # the message names pods terminating on eligible nodes
            if not relevant or kept.lack is None or x not in kept.lack:
                continue
            if kept.short:
                return False
            delta = changed.get(x)
            if delta:
                for k in kept.demand:
                    d = delta.get(k)
                    if d:
                        supply[k] = supply.get(k, 0) + d
        inpass = self._inpass(kept, own)
        for k in kept.demand:
            supply[k] = supply.get(k, 0) + inpass.get(k, 0) - kept.inpass.get(k, 0)
            if kept.demand[k] > supply[k]:
                return False
        kept.own = frozenset(own)
        kept.inpass = inpass
        kept.supply = supply
        return True
