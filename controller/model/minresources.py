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

Invalid input (:func:`parse`): a quantity that does not parse, or a negative one, raises
:class:`MinResourcesError` naming the field (``spec.minResources.cpu``); the shell turns it into an
``Unschedulable`` verdict with that text, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cogate.controller.model.resources import QuantityError, ResourceList, format_quantity, parse_quantity, to_units

__all__ = ["MinResourcesError", "parse", "asked", "rest", "free_beyond", "Short", "shortfall", "short_text",
           "short_list", "exceeds_text"]


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
