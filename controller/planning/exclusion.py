"""Exclusive gangs in the planner's pass (pure, issue 32; the rule:
:mod:`cogate.controller.topology.exclusive`, docs/topology.md "Exclusive").

:class:`Exclusion` is a mixin of :class:`~cogate.controller.planning.planner.Pass`. It reads where
every gang of the pass is placed (members bound, pinned and waiting to bind, reservations kept and
made earlier in this pass) each time a group is judged, so a gang released earlier in the pass
claims its nodes for the groups after it (two exclusive gangs in one pass never share a domain).
With no exclusive gang in the pass every method is a no-op.

- :meth:`Exclusion.kept_out`: a group's members restricted off the nodes other exclusive gangs hold
  (``metadata.name NotIn``, ANDed into each required node-affinity term: every filter still applies);
- :meth:`Exclusion.refused`: why a domain tried for a topology group is refused (an exclusive gang:
  its required-level domain holds another gang's member or another exclusive gang's hold; any group:
  every node of the domain is held by another exclusive gang);
- :meth:`Exclusion.excluded_nodes`: per group, the nodes preemption and ProvisioningRequests must
  not look at (:func:`cogate.controller.planning.fenced.fence_requests`);
- :func:`holds_key`: what the holds are read from at the start of a pass (the incremental planner's
  pass key: kept verdicts are dropped when it changes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cogate.controller.model.records import PodInfo, Reservation
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict
from cogate.controller.planning.explanations import plural
from cogate.controller.planning.fences import kept_off
from cogate.controller.planning.patches import awaiting_bind
from cogate.controller.planning.room import Room
from cogate.controller.topology.constraints import Constraint
from cogate.controller.topology.domains import Domain, Tree
from cogate.controller.topology.exclusive import Claims, Key, claims, group_text, refusal

__all__ = ["Exclusion", "holds_key", "placed_node"]


def placed_node(m: PodInfo, gate: str) -> str | None:
    """The node member ``m`` is placed on for exclusivity: bound (not terminal), or pinned and waiting
    to bind; None otherwise (a reservation is read apart)."""
    if m.terminal:
        return None
    if m.bound:
        return m.node_name
    return awaiting_bind(m, gate)


def holds_key(groups: Sequence[GroupRequest], reservations: Iterable[Reservation], gate: str) -> tuple[Any, ...]:
    """What the exclusive gangs' holds are read from at the start of a pass: each exclusive gang with
    the nodes its members are placed on (reservations included), sorted; ``()`` without one."""
    exclusive = [g for g in groups if g.topology is not None and g.topology.exclusive]
    if not exclusive:
        return ()
    reserved: dict[str, str] = {r.pod_uid: r.node_name for r in reservations}
    out = []
    for g in exclusive:
        nodes = {n for m in g.members if (n := placed_node(m, gate) or reserved.get(m.uid))}
        out.append((g.namespace, g.name, g.topology, tuple(sorted(nodes))))
    return tuple(sorted(out, key=lambda t: (t[0], t[1])))


class Exclusion:
    """The exclusive-gang steps of a :class:`~cogate.controller.planning.planner.Pass` (module doc).
    Reads the pass's ``member_of``, ``kept``, ``new_reservations``, ``gate``, ``room`` and the
    domain tree of :class:`~cogate.controller.planning.fenced.Fenced` (``_tree``)."""

    member_of: dict[str, tuple[PodInfo, GroupRequest]]
    kept: list[Reservation]
    new_reservations: list[Reservation]
    gate: str
    room: Room

    if TYPE_CHECKING:
        def _tree(self, levels: tuple[str, ...]) -> Tree: ...

    def _exclusive(self) -> dict[Key, Constraint]:
        """The exclusive gangs of the pass and their constraints (read once)."""
        found = self.__dict__.get("_exclusive_gangs")
        if found is None:
            found = {(g.namespace, g.name): g.topology for _, g in self.member_of.values()
                     if g.topology is not None and g.topology.exclusive}
            self.__dict__["_exclusive_gangs"] = found
        return found

    def _required_domains(self, c: Constraint) -> Mapping[str, Sequence[str]]:
        """node -> the nodes of its domain at ``c``'s required level (cached per levels and level)."""
        cache = self.__dict__.setdefault("_required_domains_cache", {})
        key = (c.levels, c.required)
        if key not in cache:
            assert c.required is not None
            cache[key] = {n: d.nodes for d in self._tree(c.levels).domains.get(c.required, ()) for n in d.nodes}
        return cache[key]  # type: ignore[no-any-return]

    def claims(self) -> Claims:
        """Who claims each node now (:class:`cogate.controller.topology.exclusive.Claims`): built once
        from the members and the reservations kept, then grown by each reservation this pass makes
        (a release earlier in the pass claims its nodes for the groups after it); built again when a
        set of groups rolled its releases back (the reservations seen are no longer all there)."""
        state = self.__dict__.get("_claims")
        made = self.new_reservations
        if state is not None and state[0] and (state[0] > len(made) or made[state[0] - 1] is not state[4]):
            state = None  # a set of groups rolled back its releases (planning/groupsets.py): read again
        if state is None:
            exclusive = {k: self._required_domains(c) for k, c in self._exclusive().items()}
            placed: dict[Key, set[str]] = {}
            for m, g in self.member_of.values():
                if (n := placed_node(m, self.gate)) is not None:
                    placed.setdefault((g.namespace, g.name), set()).add(n)
            for r in self.kept:
                if (known := self.member_of.get(r.pod_uid)) is not None and not known[0].terminal:
                    placed.setdefault((known[1].namespace, known[1].name), set()).add(r.node_name)
            state = self.__dict__["_claims"] = [0, claims(placed, exclusive), exclusive, {}, None]
        seen, cl, exclusive, others, _ = state
        if seen < len(made):
            for r in made[seen:]:
                if (known := self.member_of.get(r.pod_uid)) is not None:
                    key = (known[1].namespace, known[1].name)
                    cl.place(key, r.node_name, exclusive.get(key))
            state[0], state[4] = len(made), made[-1]
            others.clear()
        return cl  # type: ignore[no-any-return]

    def _held_by_others(self, key: Key) -> tuple[dict[str, Key], tuple[str, ...]]:
        """``claims().held_by_others(key)`` and its nodes sorted, kept until the claims grow: every
        gang that is not exclusive is kept off the same nodes, so they share one answer."""
        cl = self.claims()
        state = self.__dict__["_claims"]
        slot = key if key in state[2] else None
        cache: dict[Key | None, tuple[dict[str, Key], tuple[str, ...]]] = state[3]
        if slot not in cache:
            held = cl.held_by_others(key if slot is not None else ("", ""))
            cache[slot] = (held, tuple(sorted(held)))
        return cache[slot]

    def kept_out(self, g: GroupRequest) -> tuple[GroupRequest, dict[str, Key]]:
        """``g`` with its members restricted off the nodes other exclusive gangs hold, and those nodes
        (node -> holder); ``g`` itself and ``{}`` when none."""
        if not self._exclusive():
            return g, {}
        held, nodes = self._held_by_others((g.namespace, g.name))
        if not held:
            return g, {}
        return replace(g, members=tuple(kept_off(m, nodes) for m in g.members)), held

    def refused(self, g: GroupRequest, c: Constraint, d: Domain) -> str:
        """Why topology group ``g`` may not take domain ``d`` (module doc), ``""`` when it may."""
        if not self._exclusive():
            return ""
        key = (g.namespace, g.name)
        cl = self.claims()
        if c.exclusive and c.required is not None and d.level >= c.required:
            whole = self._ancestor(c, d)
            why = refusal(key, whole.nodes, cl)
            if why and whole is not d:
                return f"its {_level_word(c, whole)} {whole.name} {why}"
            return why
        held = self._held_by_others(key)[0]
        if d.nodes and all(n in held for n in d.nodes):
            return f"held by exclusive {group_text(held[d.nodes[0]])}"
        return ""

    def _ancestor(self, c: Constraint, d: Domain) -> Domain:
        assert c.required is not None
        if d.level == c.required:
            return d
        values = d.values[: c.required + 1]
        return next(a for a in self._tree(c.levels).domains[c.required] if a.values == values)

    def excluded_nodes(self) -> dict[Key, frozenset[str]]:
        """Per group, the nodes preemption and new nodes must not be sought on (module doc): nodes
        other exclusive gangs hold; for an exclusive gang also every node outside the required-level
        domains free for it. Empty without an exclusive gang."""
        exclusive = self._exclusive()
        if not exclusive:
            return {}
        cl = self.claims()
        everyone = {n.name for n in self.room.nodes}
        out: dict[Key, frozenset[str]] = {}
        for key in dict.fromkeys((g.namespace, g.name) for _, g in self.member_of.values()):
            nodes = set(self._held_by_others(key)[0])
            c = exclusive.get(key)
            if c is not None and c.required is not None:
                free = [d.nodes for d in self._tree(c.levels).domains.get(c.required, ())
                        if not refusal(key, d.nodes, cl)]
                nodes |= everyone.difference(*free)
            if nodes:
                out[key] = frozenset(nodes)
        return out

    @staticmethod
    def held_note(verdict: GroupVerdict, held: Mapping[str, Key]) -> GroupVerdict:
        """A waiting ``verdict`` (or one with members left gated: ``waiting``) with the nodes kept for
        other exclusive gangs named (``"4 nodes held by exclusive PodGroup ns/x"``); ``verdict`` itself
        otherwise."""
        if not held or (verdict.outcome.releases and not verdict.waiting):
            return verdict
        by: dict[Key, int] = {}
        for k in held.values():
            by[k] = by.get(k, 0) + 1
        text = ", ".join(f"{plural(n, 'node')} held by exclusive {group_text(k)}" for k, n in sorted(by.items()))
        return replace(verdict, message=f"{verdict.message}; {text}")


def _level_word(c: Constraint, d: Domain) -> str:
    return c.levels[d.level].rpartition("/")[2]
