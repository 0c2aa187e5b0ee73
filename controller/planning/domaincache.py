"""Per-domain results kept between planning passes (pure, issue 32 item 5).

A group with a topology constraint is planned again on every pass (its verdict is never kept: it
may release), and each pass tries its domains one by one
(:class:`~cogate.controller.planning.fenced.Fenced`): the planner restricted to a domain (a
:class:`~cogate.controller.topology.domains.Trial`), the free room summed over a domain's nodes
(the cheap bound and the best-fit order), the domain tree and the cluster's allocatable. Most of
that does not change from one pass to the next: an event changes the room of one node, so of one
domain per level. :class:`DomainCache` keeps these results between the passes of one
:class:`~cogate.controller.planning.planstate.PlanningState`, and :class:`CachedDomains` (a step of
the incremental pass) reads them instead of planning again, with these rules:

- everything is kept for one node generation and pass key (planner config, pod anti-affinity and
  topology spread in play): a new :class:`~cogate.controller.planning.room.NodeTable` or key drops
  it all (the tree, the allocatable, the domains' node slots);
- a node slot's **version** goes up when a bound pod was added, changed or removed there, room was
  held there, or a pod being deleted came or went (the state's changes since the last pass:
  exactly what the incremental pass reads, :mod:`cogate.controller.planning.incremental`); a
  domain's version is the highest of its slots';
- a trial on the live room is kept with a stamp: the domain's version and what this pass had
  written on its nodes before it (:meth:`DomainCache.written`: each node whose free room or host
  ports differ from the state's, with both, and every promise charged there, as messages name
  them: room promised, releases earlier in the pass, lent nominations); it is reused only under an
  equal stamp, when the domain's room is the room the kept trial read (free room and host ports of
  its nodes, pods being deleted there, the promises a message names). A trial the cheap bound rules
  out on a domain the pass wrote is not kept (it costs no more than the fingerprint);
- a trial on the empty room (the "fits with every node empty" answer) depends on the nodes and the
  group alone: kept for the generation;
- trials are kept per group (namespace, name) and reused only while the
  :class:`~cogate.controller.model.verdicts.GroupRequest` is equal to the one they were made for
  (members, minMember, constraint) and the gate is the same; a group none of whose members has pod
  (anti-)affinity, hard topology spread or host ports (what reads pods beyond the domain's free
  room), on a pass with neither pod anti-affinity nor topology spread in play; otherwise planned
  every pass. Groups not judged in a pass are forgotten at the next.

The property test ``tests/unit/controller/planning/test_domaincache_props.py`` checks that a
:class:`~cogate.controller.planning.planstate.PlanningState` pass with this cache decides exactly
what :func:`cogate.controller.planning.planner.decide` (no state, no cache) decides, over random
event sequences on racks and blocks. Not thread-safe: the state's lock serialises passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cogate.controller.model.verdicts import GroupRequest, GroupVerdict
from cogate.controller.model.records import HostPort
from cogate.controller.planning.members import Members
from cogate.controller.planning.room import NodeTable, Room
from cogate.controller.topology.constraints import Constraint
from cogate.controller.topology.domains import Domain, Tree, Trial, build, may_hold

__all__ = ["DomainCache", "CachedDomains"]

#: The base room a pass starts from: free room and host ports per node slot.
_Base = tuple[list[dict[str, int]], list[list[HostPort]]]

#: Groups whose trials are kept at most (the oldest entries dropped past it).
GROUPS_LIMIT = 4096


@dataclass
class _Entry:
    """Trials kept for one group: the request and gate they were made for; key -> (stamp, trial):
    the stamp is the domain's version and what the pass had written on its nodes (None: on the empty
    room)."""

    request: GroupRequest
    gate: str
    trials: dict[tuple[Any, ...], tuple[Any, Trial]] = field(default_factory=dict)


class DomainCache:
    """What :class:`CachedDomains` keeps between passes (module doc); one per planning state.

    ``hits`` / ``misses``: trials reused / planned on the last pass (for tests and the benchmark)."""

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._key: Any = None
        self._clock = 0
        self._versions: list[int] = []
        self._trees: dict[tuple[str, ...], Tree] = {}
        #: id of a domain of a kept tree -> (the domain, its slots); (the domain, version, summed free room)
        self._slots: dict[int, tuple[Domain, tuple[int, ...]]] = {}
        self._sums: dict[int, tuple[Domain, int, dict[str, int]]] = {}
        self._allocatable: dict[str, int] | None = None
        self._groups: dict[tuple[str, str], _Entry] = {}
        self._used: set[tuple[str, str]] = set()
        self._base: _Base = ([], [])
        #: this pass: domain id -> version; room promised per slot (of the pass's room, indexed so far)
        self._domain_versions: dict[int, int] = {}
        self._promised: dict[int, list[tuple[Any, ...]]] = {}
        self._promised_seen = 0
        #: this turn: domain id -> what the pass wrote on its nodes (:meth:`written`)
        self._written: dict[int, tuple[Any, ...]] = {}
        self._turn_sums: dict[int, dict[str, int]] = {}
        self.hits = 0
        self.misses = 0

    def begin(self, table: NodeTable, key: Any, changed: Iterable[int], base: _Base) -> None:
        """A pass starts on ``table`` with pass key ``key`` (anything comparable); ``changed``: node
        slots whose room changed since the last pass (the state's changed and deleting slots);
        ``base``: the state's free room and host ports per slot (what the pass's room starts from)."""
        self._base = base
        self.hits = self.misses = 0
        self._domain_versions = {}
        self._promised, self._promised_seen = {}, 0
        self._written, self._turn_sums = {}, {}
        if table is not self._table or key != self._key:
            self._table, self._key = table, key
            self._versions = [0] * len(table.nodes)
            self._trees, self._slots, self._sums, self._groups = {}, {}, {}, {}
            self._allocatable = None
            self._used = set()
            return
        for x in changed:
            self._clock += 1
            self._versions[x] = self._clock
        for k in [k for k in self._groups if k not in self._used]:
            del self._groups[k]
        self._used = set()

    def turn(self) -> None:
        """A group's turn starts: the room may differ from the last turn's (a release)."""
        self._written = {}
        self._turn_sums = {}

    # -- kept per node generation

    def tree(self, levels: tuple[str, ...]) -> Tree:
        """The domain tree of the generation's nodes over ``levels``."""
        t = self._trees.get(levels)
        if t is None:
            assert self._table is not None
            t = self._trees[levels] = build(levels, {n.name: n.labels for n in self._table.nodes})
        return t

    def allocatable(self) -> dict[str, int]:
        """Allocatable summed over the generation's nodes, per resource."""
        if self._allocatable is None:
            assert self._table is not None
            total: dict[str, int] = {}
            for n in self._table.nodes:
                for r, v in n.allocatable.items():
                    total[r] = total.get(r, 0) + v
            self._allocatable = total
        return self._allocatable

    def slots(self, d: Domain) -> tuple[int, ...]:
        """``d``'s node slots (kept for the domains of the kept trees, which live as long)."""
        kept = self._slots.get(id(d))
        if kept is not None and kept[0] is d:
            return kept[1]
        assert self._table is not None
        index = self._table.index
        s = tuple(index[n] for n in d.nodes if n in index)
        self._slots[id(d)] = (d, s)
        return s

    def version(self, d: Domain) -> int:
        """The highest version of ``d``'s slots (0: unchanged since the generation began)."""
        v = self._domain_versions.get(id(d))
        if v is None:
            versions = self._versions
            v = self._domain_versions[id(d)] = max((versions[x] for x in self.slots(d)), default=0)
        return v

    def written(self, room: Room, d: Domain) -> tuple[Any, ...]:
        """What ``room`` holds on ``d``'s nodes beyond the base room the pass started from: each node
        whose free room (zero entries aside) or host ports differ from the base (room promised, a
        release earlier in the pass, a lent nomination; a plan rolled back leaves its nodes equal)
        with both; and every promise charged on them (its kind, holder, pod, priority, requests and
        ports: what messages name). ``()``: nothing. Equal fingerprints and equal versions: equal
        room on ``d``'s nodes. Kept for the turn."""
        w = self._written.get(id(d))
        if w is None:
            w = self._written[id(d)] = self._differs(room, self.slots(d))
        return w

    def _differs(self, room: Room, slots: Iterable[int]) -> tuple[Any, ...]:
        own = room.own
        if own is None:
            return (("not a live room",),)
        promised = self._index_promised(room)
        if not own and not promised:
            return ()
        free, ports = room.free, room.ports
        bfree, bports = self._base
        out: list[tuple[Any, ...]] = []
        for x in slots:
            if x in own and (ports[x] != bports[x] or (free[x] != bfree[x] and _nonzero(free[x]) != _nonzero(bfree[x]))):
                out.append((x, tuple(sorted(_nonzero(free[x]).items())), tuple(ports[x])))
            if x in promised:
                out.append((x, tuple(promised[x])))
        return tuple(out)

    def _index_promised(self, room: Room) -> dict[int, list[tuple[Any, ...]]]:
        """Room promised on the pass's room per slot (``Room.promised`` only grows in a pass)."""
        index = self._promised
        for p, i in room.promised[self._promised_seen:]:
            pod = p.pod
            index.setdefault(i, []).append((p.kind, p.holder, pod.namespace, pod.name, pod.uid, pod.group,
                                            p.priority, p.node_name, tuple(sorted(p.requests.items())),
                                            tuple(map(str, p.host_ports))))
        self._promised_seen = len(room.promised)
        return index

    def written_any(self, room: Room, d: Domain) -> bool:
        """Whether the pass wrote one of ``d``'s nodes (``Room.own``) or promised room there."""
        own = room.own
        if own is None:
            return True
        promised = self._index_promised(room)
        return any(x in own or x in promised for x in self.slots(d))

    def free_sums(self, room: Room, d: Domain) -> dict[str, int]:
        """Free room summed over ``d``'s nodes on the live ``room`` (kept, or summed once a turn)."""
        sums = self.sums(room, d)
        if sums is not None:
            return sums
        total = self._turn_sums.get(id(d))
        if total is None:
            free = room.free
            total = self._turn_sums[id(d)] = {}
            for x in self.slots(d):
                for r, v in free[x].items():
                    if v > 0:
                        total[r] = total.get(r, 0) + v
        return total

    def sums(self, room: Room, d: Domain) -> dict[str, int] | None:
        """Free room summed over ``d``'s nodes (``max(free, 0)`` per resource) on the live ``room``,
        kept per domain version; None when this pass wrote one of its nodes (the caller sums)."""
        own = room.own
        if own is None or (own and any(x in own for x in self.slots(d))):
            return None
        version = self.version(d)
        kept = self._sums.get(id(d))
        if kept is not None and kept[0] is d and kept[1] == version:
            return kept[2]
        free = room.free
        total: dict[str, int] = {}
        for x in self.slots(d):
            for r, v in free[x].items():
                if v > 0:
                    total[r] = total.get(r, 0) + v
        self._sums[id(d)] = (d, version, total)
        return total

    # -- trials per group

    def entry(self, g: GroupRequest, gate: str) -> _Entry:
        """The kept trials of ``g`` (a new entry when its request or the gate changed)."""
        key = (g.namespace, g.name)
        self._used.add(key)
        e = self._groups.get(key)
        if e is None or e.gate != gate or e.request != g:
            if len(self._groups) >= GROUPS_LIMIT:
                self._groups.pop(next(iter(self._groups)))
            e = self._groups[key] = _Entry(g, gate)
        return e


def _nonzero(free: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in free.items() if v}


def cacheable(g: GroupRequest, room: Room) -> bool:
    """Whether ``g``'s trials on ``room`` read only the free room of the domain's nodes (module doc)."""
    if room.anti_active or room.spread is not None:
        return False
    return not any(m.host_ports or m.required_pod_affinity or m.required_pod_anti_affinity or m.topology_spread
                   for m in g.members)


class CachedDomains:
    """The :class:`~cogate.controller.planning.fenced.Fenced` step with its per-domain results read
    from a :class:`DomainCache` (module doc). Mixed in before the pass; reads the pass's ``room``,
    ``gate`` and ``_empty`` and the cache ``domain_cache``."""

    room: Room
    gate: str
    _empty: Room | None
    domain_cache: DomainCache
    _domain_entry: _Entry | None = None

    def judge_in_domains(self, g: GroupRequest, ms: Members) -> GroupVerdict:
        cache = self.domain_cache
        self._domain_entry = cache.entry(g, self.gate) if cacheable(g, self.room) else None
        cache.turn()
        try:
            return super().judge_in_domains(g, ms)  # type: ignore[misc,no-any-return]
        finally:
            self._domain_entry = None

    def _tree(self, levels: tuple[str, ...]) -> Tree:
        return self.domain_cache.tree(levels)

    def _allocatable(self) -> dict[str, int]:
        return self.domain_cache.allocatable()

    def _free(self, d: Domain, resource: str) -> int:
        if self.room.own is None:
            return super()._free(d, resource)  # type: ignore[misc,no-any-return]
        return self.domain_cache.free_sums(self.room, d).get(resource, 0)

    def _trial(self, room: Room, c: Constraint, d: Domain, ms: Members, need: int, demand: Mapping[str, int],
               main: str, prune: bool = True) -> Trial:
        e = self._domain_entry
        if e is None:
            return super()._trial(room, c, d, ms, need, demand, main, prune)  # type: ignore[misc,no-any-return]
        cache = self.domain_cache
        key = (c, d.level, d.values, need, main, prune, room.empty)
        version: tuple[int, tuple[Any, ...]] | None = None
        if not room.empty:
            if room is not self.room:
                return super()._trial(room, c, d, ms, need, demand, main, prune)  # type: ignore[misc,no-any-return]
            if not cache.written_any(room, d):
                version = (cache.version(d), ())
            elif prune and not may_hold(cache.free_sums(room, d), demand):  # the bound alone: cheap, not kept
                return super()._trial(room, c, d, ms, need, demand, main, prune)  # type: ignore[misc,no-any-return]
            else:
                version = (cache.version(d), cache.written(room, d))
        kept = e.trials.get(key)
        if kept is not None and kept[0] == version:
            cache.hits += 1
            return kept[1]
        cache.misses += 1
        t: Trial = super()._trial(room, c, d, ms, need, demand, main, prune)  # type: ignore[misc]
        e.trials[key] = (version, t)
        return t
