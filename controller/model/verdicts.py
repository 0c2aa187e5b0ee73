"""The planner's vocabulary (pure): what a planning pass is asked and what it answers.

A pass (:func:`cogate.controller.planning.planner.decide`, or
:meth:`cogate.controller.planning.planstate.PlanningState.decide`) takes one :class:`GroupRequest` per
PodGroup and a :class:`PlannerConfig`, and returns a :class:`Decision`: one
:class:`GroupVerdict` per group, whose :class:`Outcome` the shell turns into status, events
and gate removals, plus the reservations to keep. The small rules that the shell reads as
well live here: a group's priority (:func:`group_priority`, :func:`mixed_priorities`) and
when it became complete (:func:`complete_since`, the start of its starvation clock).

Times are epoch seconds; pod and node records are :mod:`cogate.controller.model.records`'
(requests in CPU millicores and bytes, as :mod:`cogate.controller.model.resources` says).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from cogate.api import DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME
from cogate.controller.model.minresources import Short as MinResourcesShort
from cogate.controller.model.records import RESOURCE_CLAIMS, PodInfo, Reservation
from cogate.controller.model.groupsets import SetSpec
from cogate.controller.model.roles import Roles
from cogate.controller.topology.constraints import Constraint

if TYPE_CHECKING:
    from cogate.models import PodGroup

__all__ = ["Outcome", "GroupRequest", "DEFAULT_SCHEDULER", "UNCHECKED_POLICIES", "DEFAULT_UNCHECKED", "held_constraints", "PlannerConfig", "GroupVerdict",
           "Decision", "with_note", "mixed_priorities", "group_priority", "complete_since", "min_member_of"]


class Outcome(StrEnum):
    """What ``decide`` says of one group (``GroupVerdict.outcome``).

    A ``StrEnum``: each member equals its string, so status JSON, event reasons and
    metrics labels carry the same text as before (``Outcome.RELEASED == "Released"``).
    """

    #: Release now: ``GroupVerdict.release`` maps every gated member to its planned node.
    RELEASED = "Released"
    #: A release that still stands: ``release`` holds new gated members to ungate.
    ALREADY_RELEASED = "AlreadyReleased"
    #: Fewer than minMember members exist.
    WAITING_FOR_MEMBERS = "WaitingForMembers"
    #: The group would fit the empty eligible nodes, but the room is taken now.
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    #: The group does not fit even on the empty eligible nodes.
    EXCEEDS_CLUSTER_CAPACITY = "ExceedsClusterCapacity"
    #: A member spec the planner can never place (e.g. unsupported pod affinity).
    UNSCHEDULABLE = "Unschedulable"

    @property
    def releases(self) -> bool:
        """The group is (being) released."""
        return self in (Outcome.RELEASED, Outcome.ALREADY_RELEASED)

    @property
    def waiting(self) -> bool:
        """The group is held: the outcome is the reason of ``Released=False``."""
        return not self.releases

    @property
    def fits_empty_cluster(self) -> bool:
        """The planner showed that the group fits the empty eligible nodes."""
        return self in (Outcome.RELEASED, Outcome.INSUFFICIENT_CAPACITY)


@dataclass(frozen=True)
class GroupRequest:
    """A PodGroup as the planner sees it.

    ``members``: live members (label names the group, same namespace, not
    deleting), any phase. ``released``: the PodGroup status records a release.
    ``created``: PodGroup creationTimestamp (epoch seconds). ``min_resources``: ``spec.minResources``
    as sorted ``(resource, units)`` pairs (:func:`cogate.controller.model.minresources.parse`: CPU
    millicores, bytes, counts), None when the PodGroup has none; ``min_resources_error``: why it
    could not be read (the field named), which holds the group ``Unschedulable``. ``topology``: the
    domain constraint its annotations ask (:func:`cogate.controller.topology.constraints.parse`), None
    when none; ``topology_error``: why they could not be read (the annotation named), which holds the
    group ``Unschedulable``. ``roles``: the role minimums of its annotations
    (:mod:`cogate.controller.model.roles`), None without; ``roles_error``: why they could not be read
    (holds the group ``Unschedulable``). ``group_set``: the set of PodGroups it is admitted with
    (:mod:`cogate.controller.model.groupsets`), None without; ``group_set_error``: why its set
    annotations could not be read (holds it ``Unschedulable``).
    """

    namespace: str
    name: str
    min_member: int
    created: float
    released: bool
    members: tuple[PodInfo, ...]
    min_resources: tuple[tuple[str, int], ...] | None = None
    min_resources_error: str = ""
    topology: Constraint | None = None
    topology_error: str = ""
    roles: Roles | None = None
    roles_error: str = ""
    group_set: SetSpec | None = None
    group_set_error: str = ""
    #: The standing release's ``status.scheduleStartTime`` (epoch seconds), 0.0 when not released
    #: or unknown: when the room held for the rest of ``spec.minResources`` ends
    #: (``PlannerConfig.min_resources_hold_seconds`` after it; :mod:`cogate.controller.planning.minimum`).
    released_at: float = 0.0


def min_member_of(pg: PodGroup) -> int:
    """PodGroup ``pg``'s ``spec.minMember``: the controller's one reader of it. An int32 >= 1,
    1 when unset (:class:`cogate.models.PodGroupSpec` validates and defaults it, as the CRD does).
    :func:`cogate.controller.status.inputs.build_group_requests` builds ``GroupRequest.min_member``
    from it, and code holding a :class:`GroupRequest` reads that; this is for code that has only
    the PodGroup (its status, lifecycle conditions, PodDisruptionBudget)."""
    return pg.spec.minMember


#: kube-scheduler's default profile: the scheduler whose filters the planner models.
DEFAULT_SCHEDULER = DEFAULT_SCHEDULER_NAME
#: ``PlannerConfig.unchecked`` values: release every group with unchecked constraints, hold those
#: whose unchecked constraints are DRA resource claims (the default: kube-scheduler may place part
#: of a gang whose devices run short, issue 17) and release the others, or hold every one.
UNCHECKED_POLICIES = ("release", "hold-devices", "hold")
#: The default of ``--unchecked-constraints``.
DEFAULT_UNCHECKED = "hold-devices"


def held_constraints(unplanned: Sequence[str], policy: str) -> list[str]:
    """The entries of a member's ``PodInfo.unplanned`` that hold its group under ``policy``
    (:data:`UNCHECKED_POLICIES`): none under ``release``, the resource-claim ones (``"resource
    claims"``, ``"resource claim x: ..."``) under ``hold-devices``, all under ``hold``."""
    if policy == "hold":
        return list(unplanned)
    if policy == "hold-devices":
        return [u for u in unplanned if u == RESOURCE_CLAIMS or u.startswith("resource claim ")]
    return []


@dataclass(frozen=True)
class PlannerConfig:
    """``starvation_seconds`` and ``reservation_ttl_seconds`` in seconds.

    ``scheduler_names``: the ``spec.schedulerName`` values cogate plans for. Members of
    :data:`DEFAULT_SCHEDULER` are planned, pinned and reserved; members of another name in
    the set are planned with the same filters (a necessary condition only) but released
    unpinned and unreserved, as that scheduler decides; a gated member naming a scheduler
    outside the set holds its group (``Unschedulable``, the message names the pods).
    ``unchecked``: what to do with a group whose gated members carry constraints the planner
    does not evaluate (``PodInfo.unplanned``: unbound volume claims, DRA resource claims the
    device model does not cover): ``release`` plans them like others and releases them unpinned
    and unreserved, naming them in the verdict message; ``hold`` keeps the group gated;
    ``hold-devices`` (default) holds for resource claims and releases for the rest
    (:func:`held_constraints`). ``min_resources_hold_seconds``: how long after its release the
    rest of a group's ``spec.minResources`` stays held for its later members (0: not held;
    :mod:`cogate.controller.planning.minimum`).
    """

    gate_name: str = DEFAULT_GATE_NAME
    starvation_seconds: float = 300.0
    reservation_ttl_seconds: float = 60.0
    scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER})
    unchecked: str = DEFAULT_UNCHECKED
    min_resources_hold_seconds: float = 300.0


@dataclass(frozen=True)
class GroupVerdict:
    """Outcome for one group; ``release`` maps pod uid -> planned node ('' = none).

    ``waiting``: names of new gated members of a released group that stay gated because the
    planner found them no room (``AlreadyReleased`` only); ``message`` then says what they lack.
    ``min_resources_short``: the resources the rest of ``spec.minResources`` lacks
    (:mod:`cogate.controller.model.minresources`), each by how much, when that is why the group waits:
    ``InsufficientCapacity`` with ``fits`` >= minMember (its members fit the room now), or
    ``ExceedsClusterCapacity`` (its members fit the empty nodes, the rest does not); empty otherwise.
    """

    namespace: str
    name: str
    outcome: Outcome
    release: Mapping[str, str]
    fits: int
    message: str
    waiting: tuple[str, ...] = ()
    min_resources_short: tuple[MinResourcesShort, ...] = ()
    #: The topology domain the members released go to, ``(node label, value)`` coarse to fine
    #: (:mod:`cogate.controller.planning.fenced`); () without a topology constraint.
    domain: tuple[tuple[str, str], ...] = ()
    #: That domain in words for the ``Released`` event ("rack r3"; "block b1 (wider than the preferred
    #: rack: none holds 8 now)"); '' without one.
    placed_in: str = ""
    #: A release the annotation ``cogate.dev/force-release`` asked for, not the planner
    #: (:func:`cogate.controller.release.force.forced`): its outcome says nothing of the room.
    forced: bool = False
    #: The end of ``message`` that names the members a ``Released`` verdict leaves gated
    #: (``"; 3 members (a, b, c) wait gated for capacity: ..."``): it goes to ``MembersWaiting``,
    #: which follows them, and not to the ``Released`` condition, which records the release and
    #: would keep naming members long gone; '' for none.
    waiting_note: str = ""


@dataclass(frozen=True)
class Decision:
    """One pass's answer: ``verdicts`` in the order the groups were given, and the
    ``reservations`` to keep (the previous ones that still hold, plus one per member the pass
    pinned to a node; :class:`cogate.controller.model.records.Reservation`). ``excluded``: per group
    (namespace, name), the nodes preemption and ProvisioningRequests must not seek room on for it
    (domains exclusive gangs hold, :mod:`cogate.controller.planning.exclusion`); empty without
    exclusive gangs."""

    verdicts: tuple[GroupVerdict, ...]
    reservations: tuple[Reservation, ...]
    excluded: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)


# -- small public helpers ---------------------------------------------------------


def with_note(verdict: GroupVerdict, text: str) -> GroupVerdict:
    """``verdict`` (a copy) with ``text`` added to its message after planning: ``"; "`` between
    the two, none when the message is empty; ``verdict`` itself when ``text`` is empty. The one
    joining rule for what the shell adds to a verdict's message (a quota that refuses members,
    pods Kubernetes gang-schedules itself, an owner that cannot complete the group)."""
    if not text:
        return verdict
    return replace(verdict, message=f"{verdict.message}; {text}" if verdict.message else text)


def mixed_priorities(group: GroupRequest) -> bool:
    """True when the group's members carry different ``spec.priority`` values
    (the group is ordered by the highest; the shell emits a warning event)."""
    return len({m.priority for m in group.members}) > 1


def group_priority(group: GroupRequest) -> int:
    """Highest member priority (0 for a group without members)."""
    return max((m.priority for m in group.members), default=0)


def complete_since(group: GroupRequest) -> float | None:
    """When the group became complete: ``max(created, created of the
    min_member-th oldest present member)``; None while fewer are present."""
    present = sorted(m.created for m in group.members if m.phase != "Failed")
    if group.min_member < 1 or len(present) < group.min_member:
        return None
    return max(group.created, present[group.min_member - 1])
