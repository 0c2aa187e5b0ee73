"""Gangs fenced into one topology domain (pure, issue 32 item 2): the planner's step for a group
whose annotations ask a topology (``GroupRequest.topology``).

The domain tree is built from the nodes' labels (:func:`cogate.controller.topology.domains.build`);
for each level the constraint allows, tightest first, each domain that holds the group's running
members and passes the cheap bound (:func:`~cogate.controller.topology.domains.may_hold`: its summed
free room against the least the missing members request together) is tried with the planner itself:
the members restricted to the domain (its labels added to every required node-affinity term, so a
member's own nodeSelector and affinity still apply, ANDed) and packed on this pass's room
(:func:`cogate.controller.planning.capacity.pack`), which is then rolled back. The choice is
:func:`cogate.controller.topology.domains.choose`'s. The chosen domain's restricted group then goes
through the ordinary rules (:meth:`Pass._try_release`, :meth:`Pass._explain`): every filter,
reservation and message as for any group. A group no allowed domain holds waits:
``InsufficientCapacity`` when some allowed domain holds it with its nodes empty, else
``ExceedsClusterCapacity``; the message names, per level, the best few domains and what each lacks
(:func:`cogate.controller.planning.explanations.shortfall`), and when a required level holds nothing,
a domain of the next coarser level that would.

Slices (``Constraint.slice_size``): a domain coarser than the slice level is tried slice by slice
(:mod:`cogate.controller.planning.sliced`), and the chosen one is released with that plan, each
member fenced into its slice's domain; members whose ranks cannot be read hold the group
``Unschedulable``. Exclusive gangs (:mod:`cogate.controller.planning.exclusion`): a domain the rule
refuses is a :class:`~cogate.controller.topology.domains.Trial` with ``refused`` (named with why in the
explanation, never planned, never the closest domain for preemption and new nodes); after a release
of an exclusive gang the pass's claims are read again (its reservations).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from cogate.controller.model.records import HOSTNAME_LABEL, NodeInfo, PodInfo
from cogate.controller.planning.filters import static_reason
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.controller.model.words import fits_of
from cogate.controller.planning.basis import Basis
from cogate.controller.planning.capacity import pack
from cogate.controller.planning.explanations import plural, shortfall
from cogate.controller.planning.fences import kept_off, least_demand, restricted, restricted_to
from cogate.controller.planning.members import Members, classify
from cogate.controller.planning.patches import awaiting_bind
from cogate.controller.planning.room import Room
from cogate.controller.planning.balanced import applies as balanced_applies
from cogate.controller.planning.balanced import plan_balanced
from cogate.controller.planning.sliced import SlicePlan, applies, member_ranks, plan_slices
from cogate.controller.topology.constraints import Constraint, TopologyError, domain_annotations
from cogate.controller.model.resources import format_quantity
from cogate.controller.topology.domains import Choice, Domain, Tree, Trial, Tried, build, choose, dominant, may_hold

__all__ = ["DOMAINS_SHOWN", "Fenced", "restricted", "restricted_to", "fence_requests", "waiting_fence", "least_demand",
           "domain_text", "domain_annotations"]

#: How many domains a level's explanation names (the best first).
DOMAINS_SHOWN = 3


def domain_text(c: Constraint, d: Domain) -> str:
    """``"rack r3"``: the domain's level label (last path segment) and name."""
    return "the cluster" if d.level < 0 else f"{_word(c.levels[d.level])} {d.name}"


def _word(label: str) -> str:
    """A level's name in messages: its label's name part (``example.com/rack`` -> ``rack``)."""
    return label.rpartition("/")[2]


class Fenced:
    """The :class:`~cogate.controller.planning.planner.Pass` step for a group with a topology
    constraint (module doc). Reads the pass's ``room``, ``snapshot``, ``gate`` and sets ``basis``."""

    room: Room
    gate: str
    basis: Basis
    _empty: Room | None
    #: For the group judged: the nodes other exclusive gangs hold and its members kept off them
    #: (``Exclusion.kept_out``); None when no node is held.
    _held_for: tuple[frozenset[str], GroupRequest, Members] | None = None

    def judge_in_domains(self, g: GroupRequest, ms: Members) -> GroupVerdict:
        """The verdict of ``g`` (classified ``ms``) placed in one domain its constraint allows."""
        c = g.topology
        assert c is not None
        kept, held = self.kept_out(g)  # type: ignore[attr-defined]
        self._held_for = (frozenset(held), kept, classify(kept, self.gate)) if held else None
        try:
            return self.held_note(self._judge_in_domains(g, c, ms), held)  # type: ignore[attr-defined,no-any-return]
        finally:
            self._held_for = None

    def _judge_in_domains(self, g: GroupRequest, c: Constraint, ms: Members) -> GroupVerdict:
        self.basis = Basis("pass", ms)
        if c.slice_size:
            try:
                member_ranks(ms)
            except TopologyError as e:
                return GroupVerdict(g.namespace, g.name, Outcome.UNSCHEDULABLE, {}, len(ms.bound), f"topology: {e}")
        tree = self._tree(c.levels)
        need = g.min_member - len(ms.bound)
        demand = least_demand(ms.plannable, need)
        main = dominant(demand, self._allocatable())
        home = frozenset(m.node_name for m in ms.bound if m.node_name)
        # every plannable member needed: each domain holding the gang keeps the same room, so the
        # best fit is the first holding one in order of free room (domains.choose, ``order``)
        order = (lambda d: (self._free(d, main), d.children, d.values)) if len(ms.plannable) == need else None
        choice = choose(c, tree, g.min_member, lambda d: self._refused(g, c, d, ms)
                        or self._try(self.room, c, d, ms, need, demand, main),
                        lambda d: home <= frozenset(d.nodes), order)
        if choice.domain is not None:
            return self._in_domain(g, c, choice)
        return self._nowhere(g, c, ms, tree, choice, need, demand, home)

    # -- a domain tried

    def _try(self, room: Room, c: Constraint, d: Domain, ms: Members, need: int, demand: Mapping[str, int],
             main: str, prune: bool = True) -> Trial:
        """:meth:`_trial`, with the members kept off the nodes of ``d`` other exclusive gangs hold
        (``_held_for``); such a trial is planned every pass (the per-domain cache keeps trials of the
        request as given: a domain no held node touches plans the same either way)."""
        if self._held_for is not None and not self._held_for[0].isdisjoint(d.nodes):
            return Fenced._trial(self, room, c, d, self._held_for[2], need, demand, main, prune)
        return self._trial(room, c, d, ms, need, demand, main, prune)

    def _kept(self, g: GroupRequest, d: Domain) -> GroupRequest:
        """``g`` kept off the held nodes when ``d`` has some (as :meth:`_try` planned it)."""
        if self._held_for is not None and not self._held_for[0].isdisjoint(d.nodes):
            return self._held_for[1]
        return g

    def _refused(self, g: GroupRequest, c: Constraint, d: Domain, ms: Members) -> Trial | None:
        """A refused trial when the exclusive-gang rule refuses ``d`` to ``g`` (``Exclusion.refused``)."""
        why = self.refused(g, c, d)  # type: ignore[attr-defined]
        return Trial(len(ms.bound), 0, note=why, pruned=True, refused=True) if why else None

    def _tree(self, levels: tuple[str, ...]) -> Tree:
        trees = self.__dict__.setdefault("_trees", {})
        if levels not in trees:
            trees[levels] = build(levels, {n.name: n.labels for n in self.room.nodes})
        return trees[levels]

    def _free(self, d: Domain, resource: str) -> int:
        """Free units of ``resource`` summed over ``d``'s nodes on this pass's room."""
        index, free = self.room.table.index, self.room.free
        return sum(max(free[index[n]].get(resource, 0), 0) for n in d.nodes if n in index)

    def _allocatable(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for n in self.room.nodes:
            for r, v in n.allocatable.items():
                total[r] = total.get(r, 0) + v
        return total

    def _trial(self, room: Room, c: Constraint, d: Domain, ms: Members, need: int, demand: Mapping[str, int],
               main: str, prune: bool = True) -> Trial:
        """The planner restricted to ``d`` on ``room``, rolled back (:class:`Trial`); a domain the bound
        rules out is not planned (``prune``), its ``leftover`` then the free units of ``main``."""
        index = room.table.index
        slots = [index[n] for n in d.nodes if n in index]
        free: dict[str, int] = {}
        for i in slots:
            for r, v in room.free[i].items():
                free[r] = free.get(r, 0) + max(v, 0)
        if prune and not may_hold(free, demand):
            r = sorted(r for r, v in demand.items() if free.get(r, 0) < v)[0]
            return Trial(len(ms.bound), free.get(main, 0), note=f"{r} {format_quantity(r, free.get(r, 0))} free of "
                         f"at least {format_quantity(r, demand[r])} needed", pruned=True)
        mark = room.mark()
        if (sp := self._split(room, c, d, ms, need, main)) is not None:
            left = sum(max(room.free[i].get(main, 0), 0) for i in slots)
            room.rollback(mark)
            fits = len(ms.bound) + sp.assignment.fits
            return Trial(min(fits, len(ms.bound) + need - 1) if sp.whole else fits, left, sp.note)
        members = [restricted(m, c.levels, d) for m in ms.plannable]
        plan = pack(room, members, need)
        left = sum(max(room.free[i].get(main, 0), 0) for i in slots)
        note = ""
        if len(plan) < need:
            unplaced = [m for m in ms.plannable if m.uid not in plan]
            note = shortfall(room, [restricted(m, c.levels, d) for m in unplaced], need - len(plan)).text
            note = _in_domain_words(note, [room.nodes[i] for i in slots], unplaced[0])
        room.rollback(mark)
        return Trial(len(ms.bound) + len(plan), left, note)

    def _split(self, room: Room, c: Constraint, d: Domain, ms: Members, need: int, main: str) -> SlicePlan | None:
        """The plan of a gang split inside ``d`` (left applied on ``room``): balanced
        (:func:`~cogate.controller.planning.balanced.plan_balanced`) or in slices
        (:func:`~cogate.controller.planning.sliced.plan_slices`); None when ``d`` needs neither."""
        if balanced_applies(c, d):
            try:
                by_rank: dict[str, int] | None = member_ranks(ms)
            except TopologyError:  # ranks only order a balanced split (slices were checked before)
                by_rank = None
            return plan_balanced(room, c, self._tree(c.levels), d, ms, main, by_rank)
        if applies(c, d):
            return plan_slices(room, c, self._tree(c.levels), d, ms, need, member_ranks(ms), main)
        return None

    # -- the verdicts

    def _in_domain(self, g: GroupRequest, c: Constraint, choice: Choice) -> GroupVerdict:
        """The ordinary rules on ``g`` restricted to the chosen domain; the domain named."""
        d = choice.domain
        assert d is not None
        g = self._kept(g, d)
        if applies(c, d) or balanced_applies(c, d):
            verdict = self._in_split(g, c, d)
        else:
            fenced = replace(g, members=tuple(restricted(m, c.levels, d) for m in g.members))
            ms = classify(fenced, self.gate)
            attempt = self._try_release(fenced, ms)  # type: ignore[attr-defined]
            verdict = attempt if isinstance(attempt, GroupVerdict) else self._explain(fenced, ms, attempt)  # type: ignore[attr-defined]
            self.basis = Basis("pass", ms)
        where = domain_text(c, d)
        start = c.start()
        if start is not None and d.level < start:
            where += f" (wider than the preferred {_word(c.levels[start])}: none holds {g.min_member} now)"
        if not verdict.outcome.releases:
            return replace(verdict, message=f"{verdict.message}; in {where}")
        return replace(verdict, message=f"{verdict.message}; in {where}", domain=tuple(d.selector(c.levels).items()),
                       placed_in=where)

    def _in_split(self, g: GroupRequest, c: Constraint, d: Domain) -> GroupVerdict:
        """``g`` released split inside ``d`` (:meth:`_split` on this pass's room, kept when it
        reaches minMember): each member fenced into its slice's or part's domain, then the ordinary
        release of that plan (``spec.minResources``, reservations, members left out waiting gated
        and named)."""
        ms = classify(g, self.gate)
        need = g.min_member - len(ms.bound)
        main = dominant(least_demand(ms.plannable, need), self._allocatable())
        mark = self.room.mark()
        sp = self._split(self.room, c, d, ms, need, main)
        assert sp is not None
        fenced = replace(g, members=tuple(restricted(m, c.levels, sp.home.get(m.uid, d)) for m in g.members))
        fms = classify(fenced, self.gate)
        self.basis = Basis("pass", fms)
        fits = len(ms.bound) + sp.assignment.fits
        if fits < g.min_member:  # the trial on this room said it holds: not expected
            self.room.rollback(mark)
            return GroupVerdict(g.namespace, g.name, Outcome.INSUFFICIENT_CAPACITY, {}, fits,
                                f"{fits_of(fits, g.min_member)}: {sp.note}")
        short = self._min_resources_wait(fenced, fms, sp.plan, mark)  # type: ignore[attr-defined]
        if short is not None:
            return short
        verdict: GroupVerdict = self._released(fenced, fms, sp.plan, [])  # type: ignore[attr-defined]
        told = "; ".join(x for x in (sp.told, sp.note) if x)
        return replace(verdict, message=f"{verdict.message}; {told}") if told else verdict

    # -- members after the release

    def ungate_new_members(self, g: GroupRequest) -> GroupVerdict:
        """A released group's new members (replacements, late members) planned only inside the
        domain its placed members share (the tightest level tried whose one domain holds every member
        bound or pinned; :meth:`ReleasedGroups.ungate_new_members` otherwise unchanged: one without room
        there waits gated, named). A group placed in the whole cluster, or with nothing placed, is not
        fenced."""
        g, held = self.kept_out(g)  # type: ignore[attr-defined]
        verdict = self._ungate_at_home(g)
        return self.held_note(verdict, held)  # type: ignore[attr-defined,no-any-return]

    def _ungate_at_home(self, g: GroupRequest) -> GroupVerdict:
        c = g.topology
        home = frozenset(n for m in g.members
                         if not m.terminal and (n := m.node_name or awaiting_bind(m, self.gate)))
        d = self._home(c, home) if c is not None and home else None
        if c is None or d is None:
            return super().ungate_new_members(g)  # type: ignore[misc]
        homes: Mapping[str, Domain] = {}
        if applies(c, d) and (ms := classify(g, self.gate)).plannable:
            try:
                by_rank = member_ranks(ms)
            except TopologyError:
                by_rank = {}
            if by_rank:  # each new member in its slice's domain (the one its running members are in)
                mark = self.room.mark()
                main = dominant(least_demand(ms.plannable, len(ms.plannable)), self._allocatable())
                homes = plan_slices(self.room, c, self._tree(c.levels), d, ms, 0, by_rank, main).home
                self.room.rollback(mark)
        fenced = replace(g, members=tuple(restricted(m, c.levels, homes.get(m.uid, d)) for m in g.members))
        verdict: GroupVerdict = super().ungate_new_members(fenced)  # type: ignore[misc]
        message = verdict.message
        if not any(m.required_node_affinity for m in g.members):  # every node-affinity exclusion is the fence's
            message = _FENCE.sub("", message)
        return replace(verdict, message=f"{message}; new members kept in {domain_text(c, d)}",
                       domain=tuple(d.selector(c.levels).items()))

    def _home(self, c: Constraint, home: frozenset[str]) -> Domain | None:
        tree = self._tree(c.levels)
        for level in c.tried():
            if level is None:
                return None
            for d in tree.domains.get(level, ()):
                if home <= frozenset(d.nodes):
                    return d
        return None

    def _nowhere(self, g: GroupRequest, c: Constraint, ms: Members, tree: Tree, choice: Choice, need: int,
                 demand: Mapping[str, int], home: frozenset[str]) -> GroupVerdict:
        """No allowed domain holds the group now: per level, the best few domains and what each lacks."""
        if self._empty is None:  # type: ignore[has-type]
            self._empty = self.snapshot.empty_room()  # type: ignore[attr-defined]
        empty = self._empty
        mark = empty.mark()
        self._charge_bound_members(empty, ms)  # type: ignore[attr-defined]
        # with every node empty, the nodes exclusive gangs hold are empty too (their gangs end)
        ever = choose(c, tree, g.min_member, lambda d: self._trial(empty, c, d, ms, need, demand, "pods"),
                      lambda d: home <= frozenset(d.nodes))
        empty.rollback(mark)
        main = dominant(demand, self._allocatable())
        tried = [self._explained(c, t, ms, need, demand, main) for t in choice.tried]
        best = max((t.fits for level in tried for _, t in level.trials), default=len(ms.bound))
        parts = [_level_text(c, tree, level.level, level.trials, g.min_member) for level in tried]
        if c.required is not None and (wider := self._wider(c, tree, ms, need, demand, home)):
            parts.append(wider)
        if home and not any(tried.trials for tried in choice.tried):
            parts.append(f"its {plural(len(home), 'running member')} span more than one domain")
        closest = _closest(c, tried, ever.tried, g.min_member)
        if ever.domain is None:
            text = f"{fits_of(best, g.min_member)} in no allowed domain even with every node empty: " + "; ".join(parts)
            return GroupVerdict(g.namespace, g.name, Outcome.EXCEEDS_CLUSTER_CAPACITY, {}, best, text, domain=closest)
        text = f"{fits_of(best, g.min_member)}: " + "; ".join(parts)
        return GroupVerdict(g.namespace, g.name, Outcome.INSUFFICIENT_CAPACITY, {}, best, text, domain=closest)

    def _explained(self, c: Constraint, tried: Tried, ms: Members, need: int, demand: Mapping[str, int],
                   main: str) -> Tried:
        """``tried`` with the domains an explanation names planned for real: pruned ones (ranked by the
        free room of the dominant resource) are planned until :data:`DOMAINS_SHOWN` are."""
        planned = [dt for dt in tried.trials if not dt[1].pruned]
        refused = [dt for dt in tried.trials if dt[1].refused]
        pruned = sorted((dt for dt in tried.trials if dt[1].pruned and not dt[1].refused),
                        key=lambda dt: (-dt[1].leftover, dt[0].values))
        wanted = pruned[: max(DOMAINS_SHOWN - len(planned), 0)]
        again = [(d, self._try(self.room, c, d, ms, need, demand, main, prune=False)) for d, _ in wanted]
        return Tried(tried.level, tuple(planned + again + pruned[len(wanted):] + refused))

    def _wider(self, c: Constraint, tree: Tree, ms: Members, need: int, demand: Mapping[str, int],
               home: frozenset[str]) -> str:
        """A domain of the next coarser level than the required one that would hold the group now."""
        assert c.required is not None
        level = c.required - 1 if c.required > 0 else None
        wide = Constraint(c.levels, required=level) if level is not None else Constraint(c.levels)
        got = choose(wide, tree, len(ms.bound) + need, lambda d: self._try(self.room, c, d, ms, need, demand,
                                                                                   "pods"),
                     lambda d: home <= frozenset(d.nodes))
        if got.domain is None or got.level != level:
            return ""
        return f"{domain_text(c, got.domain)} would fit (not allowed: required={_word(c.levels[c.required])})"


#: The node counts :func:`shortfall` appends: over every node, so the domain's own are counted apart.
_EXCLUSIONS = re.compile(r"; \d+ nodes? excluded by [^;]*")
#: The nodes outside the domain, which :func:`shortfall` counts as excluded by node affinity.
_FENCE = re.compile(r"; \d+ nodes? excluded by node affinity")


def _in_domain_words(text: str, nodes: Sequence[NodeInfo], member: PodInfo) -> str:
    """:func:`shortfall`'s ``text`` for one domain: the nodes each static filter excludes counted over
    the domain's ``nodes`` only (for ``member``, the first unplaced), not over the cluster, where the
    fence itself would count."""
    reasons = Counter(r for n in nodes if (r := static_reason(n, member)) is not None)
    base = "no node of it takes them" if "by their own constraints" in text else _EXCLUSIONS.sub("", text)
    counted = [f"{plural(k, 'node')} excluded by {r}" for r, k in sorted(reasons.items(), key=lambda rk: (-rk[1], rk[0]))]
    return "; ".join([base, *counted])


def _closest(c: Constraint, tried: Sequence[Tried], empty: Sequence[Tried], needed: int
             ) -> tuple[tuple[str, str], ...]:
    """Under a required level, the domain of that level closest to holding the gang now (most members
    placed, then the trial order) among those that hold it with their nodes empty (``empty``; all of
    them when none does: new nodes may): where preemption and ProvisioningRequests look
    (:func:`fence_requests`)."""
    if c.required is None:
        return ()
    trials = next((t.trials for t in tried if t.level == c.required), ())
    could = {d.values for level in empty if level.level == c.required for d, t in level.trials
             if t.fits >= needed and not t.pruned}
    free = [dt for dt in trials if not dt[1].refused]
    pool = [dt for dt in free if dt[0].values in could] or free
    if not pool:
        return ()
    d = max(pool, key=lambda dt: (dt[1].fits, not dt[1].pruned, dt[1].leftover))[0]
    return tuple(d.selector(c.levels).items())


def waiting_fence(v: GroupVerdict, r: GroupRequest) -> tuple[tuple[str, str | None], ...]:
    """Where a waiting group's preemption and new nodes must be (issue 32), as ``(node label, value)``
    pairs coarse to fine (``None``: any value): under a required level, the closest domain
    (``v.domain``, :func:`_closest`); with none (no node carries the level's labels, or every domain
    is refused to an exclusive gang), the labels of the required level and every coarser one with
    any value but the hostname (a node without them is in no domain of the level and can never hold
    a member). ``()`` without a required level (preferred only: the gang may end anywhere) or for a
    verdict that does not wait."""
    c = r.topology
    if c is None or c.required is None or not Outcome(v.outcome).waiting:
        return ()
    if v.domain:
        return tuple(v.domain)
    return tuple((label, None) for label in c.levels[: c.required + 1] if label != HOSTNAME_LABEL)


def fence_requests(verdicts: Sequence[GroupVerdict], requests: Mapping[tuple[str, str], GroupRequest],
                   excluded: Mapping[tuple[str, str], frozenset[str]] | None = None
                   ) -> dict[tuple[str, str], GroupRequest]:
    """``requests`` with each waiting group under a required level restricted to its
    :func:`waiting_fence` (:func:`restricted_to`), and each group kept off the nodes
    ``excluded`` names for it (``Decision.excluded``: domains exclusive gangs hold, and for an
    exclusive gang the domains refused to it; :func:`kept_off`): what gang preemption selects victims
    for and ProvisioningRequests ask nodes for, so neither looks outside the domain the gang may use."""
    out = dict(requests)
    for v in verdicts:
        r = out.get((v.namespace, v.name))
        if r is not None and (fence := waiting_fence(v, r)):
            out[(v.namespace, v.name)] = replace(r, members=tuple(restricted_to(m, fence) for m in r.members))
    for key, nodes in (excluded or {}).items():
        if (r := out.get(key)) is not None and nodes:
            off = tuple(sorted(nodes))
            out[key] = replace(r, members=tuple(kept_off(m, off) for m in r.members))
    return out


def _level_text(c: Constraint, tree: Tree, level: int | None, trials: Sequence[tuple[Domain, Trial]],
                needed: int) -> str:
    """``"rack: no rack holds 8; rack r3 fits 7 (cpu short ...); rack r1 fits 6 (...)"``."""
    word = "cluster" if level is None else _word(c.levels[level])
    if level is not None and not trials:
        text = f"{word}: no node carries the label {c.levels[level]}"
    else:
        text = f"{word}: no {word} holds {needed}" if level is not None else f"the cluster holds {needed} only"
        ranked = sorted(trials, key=lambda dt: (dt[1].refused, -dt[1].fits, dt[1].pruned, dt[0].values))[:DOMAINS_SHOWN]
        for d, t in ranked:
            text += f"; {d.name} refused ({t.note})" if t.refused else f"; {d.name} too small ({t.note})" if t.pruned \
                else (f"; {d.name} fits {t.fits}" + (f" ({t.note})" if t.note else ""))
        if len(trials) > DOMAINS_SHOWN:
            text += f" and {len(trials) - DOMAINS_SHOWN} more"
    if level is not None and (lacking := tree.excluded.get(level, 0)):
        text += f" ({plural(lacking, 'node')} {'lacks' if lacking == 1 else 'lack'} a label of this level)"
    return text

