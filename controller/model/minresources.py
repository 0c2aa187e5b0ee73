"""PodGroup ``spec.minResources`` (pure): what is asked, what is left to find, and whether the free
room holds it (issue 20 item 2; docs/semantics.md, "minResources").

scheduler-plugins checks ``minResources`` once, at PreFilter (``pkg/coscheduling/core/core.go``
``PreFilter``, ``CheckClusterResource``, ``getNodeResource``): ``minResources`` with ``pods`` set to
minMember must not exceed the free room summed over every node, the group's own pods not counted
as used. Operators rely on it: the Spark operator creates ``minMember: 1`` with the whole
application (driver and executors) in ``minResources``, so the check is its only gang.

cogate's rule, applied by :mod:`cogate.controller.planning.planner` once minMember members are planned:

* **Asked** (:func:`asked`): ``minResources`` in ResourceList units (:mod:`cogate.controller.model.resources`:
  CPU millicores, memory bytes, extended resources and ``pods`` counts), with ``pods`` set to
  minMember as scheduler-plugins sets it (a ``pods`` entry of the user's is replaced).
* **The rest** (:func:`rest`): per resource, what is asked minus the requests (with the ``pods``
  slot, :func:`~cogate.controller.planning.room.req_with_pod`) of the group's members counted, clamped at
  0: its bound, non-terminal members and the members this release plans. The same sum as
  scheduler-plugins' (its own pods given back to the free room, then the whole ``minResources``
  compared), said the other way round.
* **Where** (:func:`free_beyond`): the free room left once those members are planned (after bound
  pods, the room promised to others: reservations, nominations, room held for a preemption, and
  the groups planned before this one), summed over the nodes at least one of the group's members
  is eligible for (load-independent filters: Ready, cordon, taints, nodeSelector, node affinity),
  each node's room clamped at 0 per resource, and only nodes with a ``pods`` slot free: a node that
  can take no further pod adds nothing. The later members' shapes are not known (minResources is a
  sum), so the check is an aggregate, never a placement; it is at least scheduler-plugins' check
  (fewer nodes, room promised charged, nothing negative), so a group cogate releases passes
  scheduler-plugins' too.
* **Short** (:func:`shortfall`): every resource whose rest exceeds that free room, by how much.
* **Held** (:class:`Hold`, :func:`clash`; issue 37 kind 9): once released, the rest of a group's
  minResources stays held for its later members until they are placed or the hold's deadline
  passes (``PlannerConfig.min_resources_hold_seconds`` after the release). Holds are aggregates
  too, so "the room holds them all" is a transportation problem per resource: each hold's rest
  must be found on its own nodes, a node's free room shared. By Hall's theorem (the supply/demand
  form: Gale 1957) it is feasible exactly when every set of holds wants no more than the free room
  of the union of their nodes; :func:`clash` checks every set (holds on the same nodes merged) up
  to :data:`HALL_SETS` distinct node sets, beyond that a sufficient bound. A plan is refused when
  it leaves some set of holds wanting more than its nodes' free room and took room on those nodes.

Invalid input (:func:`parse`): a quantity that does not parse, or a negative one, raises
:class:`MinResourcesError` naming the field (``spec.minResources.cpu``); the shell turns it into an
``Unschedulable`` verdict with that text, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from cogate.controller.model.resources import QuantityError, ResourceList, format_quantity, parse_quantity, to_units

__all__ = ["MinResourcesError", "parse", "asked", "rest", "free_beyond", "Short", "shortfall", "short_text",
           "short_list", "exceeds_text", "Hold", "Clash", "clash", "HALL_SETS", "held_text", "name_list_short"]


class MinResourcesError(ValueError):
    """A ``spec.minResources`` entry that is not a non-negative Kubernetes quantity; the text names the field."""


def parse(raw: Mapping[str, str | int] | None) -> ResourceList | None:
    """``spec.minResources`` as a ResourceList (CPU millicores, bytes, counts; zero entries dropped),
    or None when the field is absent. Raises :class:`MinResourcesError` naming
    ``spec.minResources.<name>`` on a value :func:`~cogate.controller.model.resources.parse_quantity`
    refuses or on a negative one."""
    if raw is None:
        return None
    out: ResourceList = {}
    for name, q in sorted(raw.items()):
        try:
            value = parse_quantity(q)
        except QuantityError as e:
            raise MinResourcesError(f"spec.minResources.{name}: {e}") from None
        if value < 0:
            raise MinResourcesError(f"spec.minResources.{name}: {q!r} is negative")
        units = to_units(str(name), value)
        if units:
            out[str(name)] = units
    return out


def asked(min_resources: Mapping[str, int], min_member: int) -> ResourceList:
    """What the group asks: ``min_resources`` with ``pods`` = ``min_member`` (scheduler-plugins
    ``PreFilter``: ``minResources[corev1.ResourcePods] = MinMember``)."""
    out = {k: v for k, v in min_resources.items() if k != "pods" and v > 0}
    out["pods"] = max(min_member, 0)
    return out


def rest(wanted: Mapping[str, int], counted: Iterable[Mapping[str, int]]) -> ResourceList:
    """Per resource of ``wanted`` (:func:`asked`), what is left once the requests ``counted`` (each a
    member's requests with its ``pods`` slot) are taken off, clamped at 0; zero entries dropped."""
    left = dict(wanted)
    for req in counted:
        for k, v in req.items():
            if k in left:
                left[k] -= v
    return {k: v for k, v in left.items() if v > 0}


def free_beyond(free: Sequence[Mapping[str, int]], nodes: Iterable[int], names: Iterable[str]) -> ResourceList:
    """The free room of resources ``names`` summed over node slots ``nodes`` of ``free`` (a room's
    free room per node), each node's value clamped at 0, nodes without a ``pods`` slot free left
    out (they take no further pod)."""
    keys = tuple(names)
    out = {k: 0 for k in keys}
    for i in nodes:
        f = free[i]
        if f.get("pods", 0) < 1:
            continue
        for k in keys:
            v = f.get(k, 0)
            if v > 0:
                out[k] += v
    return out


@dataclass(frozen=True)
class Short:
    """One resource the free room lacks: ``asked`` (minResources, ``pods`` = minMember), ``placed``
    (requests of the members counted), ``free`` (:func:`free_beyond`), ``by`` (how much more is needed)."""

    resource: str
    asked: int
    placed: int
    free: int

    @property
    def by(self) -> int:
        return self.asked - self.placed - self.free


def shortfall(wanted: Mapping[str, int], counted: Sequence[Mapping[str, int]],
              free: Mapping[str, int]) -> tuple[Short, ...]:
    """The resources of ``wanted`` whose rest (:func:`rest`) exceeds ``free``, sorted by name; empty
    when the room holds the rest."""
    left = rest(wanted, counted)
    out = []
    for k in sorted(left):
        if left[k] > free.get(k, 0):
            placed = sum(req.get(k, 0) for req in counted)
            out.append(Short(k, wanted[k], placed, free.get(k, 0)))
    return tuple(out)


def _member_word(n: int) -> str:
    return f"{n} member" if n == 1 else f"{n} members"


def short_text(shorts: Sequence[Short], members: int, where: str = "free") -> str:
    """``"minResources cpu short by 2500m: 1500m free beyond the 1 member placed, minResources asks 4"``
    for each short resource (``; `` between them); ``where``: ``"free"``, or ``"allocatable"`` on the
    empty cluster."""
    parts = []
    for s in shorts:
        f = lambda v: format_quantity(s.resource, v)  # noqa: E731
        parts.append(f"minResources {s.resource} short by {f(s.by)}: {f(s.free)} {where} beyond the "
                     f"{_member_word(members)} placed, minResources asks {f(s.asked)}")
    return "; ".join(parts)


def short_list(shorts: Sequence[Short]) -> str:
    """``"cpu short by 2500m, memory short by 1Gi"``."""
    return ", ".join(f"{s.resource} short by {format_quantity(s.resource, s.by)}" for s in shorts)


def exceeds_text(shorts: Sequence[Short], members: int) -> str:
    """The ``ExceedsClusterCapacity`` message of a group whose minResources does not fit even with
    every node it may use empty."""
    return ("spec.minResources does not fit even with every eligible node empty: "
            + short_text(shorts, members, "allocatable"))


# -- room held for released groups (issue 37 kind 9) ----------------------------------------------


@dataclass(frozen=True)
class Hold:
    """The rest of a released group's ``spec.minResources`` held for its later members:
    ``holder`` (``"PodGroup ns/name"``), ``rest`` (:func:`rest`: ResourceList, CPU millicores,
    bytes, counts; zero entries dropped), ``nodes`` (node slots some present member is eligible
    for: where its later members may go), ``until`` (epoch seconds: the hold's deadline)."""

    holder: str
    rest: Mapping[str, int]
    nodes: frozenset[int]
    until: float


@dataclass(frozen=True)
class Clash:
    """A set of holds the free room cannot hold together: ``resource``, ``holders`` (sorted),
    ``wanted`` (their rests summed), ``free`` (the free room of the union of their nodes,
    :func:`free_beyond`); ``by``: how much more is needed."""

    resource: str
    holders: tuple[str, ...]
    wanted: int
    free: int

    @property
    def by(self) -> int:
        return self.wanted - self.free


#: :func:`clash` checks every set of holds exactly up to this many distinct node sets per resource
#: (2**10 sums); beyond, the sufficient bound "all rests fit the smallest room of any one of them".
HALL_SETS = 10


def _room_of(free: Sequence[Mapping[str, int]], nodes: Iterable[int], name: str) -> int:
    return free_beyond(free, nodes, (name,))[name]


def clash(holds: Sequence[Hold], free: Sequence[Mapping[str, int]],
          taken: frozenset[int] | None = None) -> Clash | None:
    """The first set of ``holds`` (fewest holds first, then resource name) whose rests summed exceed
    the free room of the union of their nodes (``free``: a room's free room per node slot, each
    node clamped at 0, nodes without a ``pods`` slot left out), or None when the room holds them
    all (Hall's condition, module doc). ``taken``: when given, only sets whose nodes meet it count
    (the nodes a plan placed members on: a plan is refused only for the holds whose room it took).
    Beyond :data:`HALL_SETS` distinct node sets the bound is sufficient, not necessary: a Clash
    naming every hold of that resource may then be one a finer check would not find."""
    names = sorted({k for h in holds for k, v in h.rest.items() if v > 0})
    found: list[tuple[int, str, Clash]] = []
    for name in names:
        wanting = [h for h in holds if h.rest.get(name, 0) > 0]
        by_nodes: dict[frozenset[int], list[Hold]] = {}
        for h in wanting:
            by_nodes.setdefault(h.nodes, []).append(h)
        sets = sorted(by_nodes.items(), key=lambda kv: sorted(h.holder for h in kv[1]))
        c = _hall(sets, free, name, taken) if len(sets) <= HALL_SETS else _bound(sets, free, name, taken)
        if c is not None:
            found.append((len(c.holders), name, c))
    return min(found, key=lambda t: (t[0], t[1]))[2] if found else None


def _hall(sets: Sequence[tuple[frozenset[int], list[Hold]]], free: Sequence[Mapping[str, int]], name: str,
          taken: frozenset[int] | None) -> Clash | None:
    """Every non-empty subset of ``sets``, fewest first: the first whose demand exceeds its room."""
    k = len(sets)
    for mask in sorted(range(1, 1 << k), key=lambda m: (bin(m).count("1"), m)):
        chosen = [sets[j] for j in range(k) if mask >> j & 1]
        nodes = frozenset().union(*(ns for ns, _ in chosen))
        if taken is not None and not nodes & taken:
            continue
        wanted = sum(h.rest[name] for _, hs in chosen for h in hs)
        room = _room_of(free, sorted(nodes), name)
        if wanted > room:
            return Clash(name, tuple(sorted(h.holder for _, hs in chosen for h in hs)), wanted, room)
    return None


def _bound(sets: Sequence[tuple[frozenset[int], list[Hold]]], free: Sequence[Mapping[str, int]], name: str,
           taken: frozenset[int] | None) -> Clash | None:
    """Beyond :data:`HALL_SETS`: every rest summed must fit the smallest room of one node set (then
    every subset fits its union, which is no smaller)."""
    everyone = [h for _, hs in sets for h in hs]
    nodes = frozenset().union(*(ns for ns, _ in sets))
    if taken is not None and not nodes & taken:
        return None
    wanted = sum(h.rest[name] for h in everyone)
    room = min(_room_of(free, sorted(ns), name) for ns, _ in sets)
    if wanted <= room:
        return None
    return Clash(name, tuple(sorted(h.holder for h in everyone)), wanted, room)


def held_text(c: Clash, me: str, until: float | None) -> str:
    """``"the room left is held for the rest of spec.minResources of PodGroup ns/a (cpu 26 wanted
    by PodGroup ns/a and this group, 15 free on their nodes), held until 2026-12-06T19:40:00Z"``;
    ``me``: the group judged (named "this group"); ``until``: the earliest deadline of the others'
    holds (epoch seconds), None when only this group's own minResources is in the set."""
    others = [h for h in c.holders if h != me]
    who = name_list_short(others + (["this group"] if me in c.holders else []))
    f = lambda v: format_quantity(c.resource, v)  # noqa: E731
    text = (f"the room left is held for the rest of spec.minResources of {name_list_short(others)} "
            f"({c.resource} {f(c.wanted)} wanted by {who}, {f(c.free)} free on their nodes)")
    if until is not None:
        text += ", held until " + datetime.fromtimestamp(until, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return text


def name_list_short(names: Sequence[str], shown: int = 3) -> str:
    """``"a, b and c"``; more than ``shown``: ``"a, b, c and 2 more"``."""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    if len(names) > shown:
        return ", ".join(names[:shown]) + f" and {len(names) - shown} more"
    return ", ".join(names[:-1]) + " and " + names[-1]
