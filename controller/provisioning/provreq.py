"""Growing the cluster for a gang (pure): what cogate asks cluster-autoscaler for, and what its
answer means (``--provisioning-class``, issue 16).

cluster-autoscaler never scales up for a pod that carries a scheduling gate (it counts it as
"ignored"; kubernetes/autoscaler #5279), so a gated gang short of nodes never makes the cluster
grow by itself. cogate asks for the gang's missing nodes with a ProvisioningRequest
(``autoscaling.x-k8s.io/v1``): one PodTemplate per distinct member shape, one request whose
``podSets`` count the members that do not fit the current nodes. With the class
``best-effort-atomic-scale-up.autoscaling.x-k8s.io`` the autoscaler scales up only when every
one of them fits the nodes it would add (cluster-autoscaler
``provisioningrequest/besteffortatomic``: ``ScaleUp(..., allOrNothing=true)``). The I/O room is
:mod:`cogate.controller.provisioning.room`; the rules are here (docs/semantics.md, "Cluster
autoscaler"):

1. **Who asks.** A group that is not released and whose verdict says new nodes may place it
   (:func:`wants_nodes`: ``InsufficientCapacity`` or ``ExceedsClusterCapacity``, the current nodes
   cannot hold minMember: short of room, or too small; or ``Unschedulable`` because no current node
   admits members by their own node constraints, e.g. a nodeSelector on a node group scaled to
   zero: cluster-autoscaler judges whether a new node would), whose PodGroup does not
   carry ``cogate.dev/provisioning: "false"``, that the planner does not hold whatever the room
   (``explanations.held_reason``), and for which preemption cannot make room (the preemption
   room's note says no victim helps, or preemption is off): kube-scheduler preempts before
   cluster-autoscaler adds nodes (cluster-autoscaler ignores pods that can be placed by
   preemption), and so does cogate. A group whose minMember members fit and that waits only for
   the rest of ``spec.minResources`` (``GroupVerdict.min_resources_short`` with ``fits`` at least
   minMember) asks nothing, and its ``Provisioning`` condition says why (:func:`min_resources_text`);
   one whose members do not fit the current nodes either asks for them as any group.
2. **Exactly the difference.** :func:`shortfalls` plans the waiting groups in the planner's order
   (priority, then age) on one room: the free room after every bound pod and every room
   promised (reservations of released members, nominations, room held for a preemption), each
   group's placeable members left charged before the next group is planned, so two groups never
   count the same free room. A group's shortfall is minMember minus its bound members minus those
   placed: the members still to place (the first in the planner's order that ``pack`` did not
   place). A group with a request already standing is planned too (its room counts) but asks
   nothing more. With preemption on, the pods preemption may evict for the group count as gone
   (``gone``; :mod:`cogate.controller.provisioning.mixed`): the shortfall after preemption.
3. **New nodes only.** cluster-autoscaler first places the request's pods on the existing nodes
   (``filterOutSchedulable``), and it does not see cogate's reservations or the room of gated
   members: asked as they are, the missing members could be "found" in room cogate has planned
   for another member. So each PodTemplate narrows the member's required node affinity to nodes
   other than the current ones (:func:`exclude_nodes`: ``kubernetes.io/hostname NotIn`` the
   current nodes' hostnames, ``metadata.name NotIn`` for a node without that label), and the
   autoscaler can only answer with nodes it adds (its template nodes get new names and hostnames,
   ``SanitizeNodeInfo``). A gang under a required topology level is asked for in its closest domain:
   the templates also require that domain's labels (:mod:`cogate.controller.provisioning.confine`),
   so only node groups whose nodes carry them can answer.
4. **What the answer means** (:func:`state`, cluster-autoscaler ``provisioningrequest/conditions``):
   ``Failed=True`` (invalid request, or not provisioned within 7 days) and ``BookingExpired=True``
   (provisioned more than 10 minutes ago) end it; ``Provisioned=True`` (``CapacityIsProvisioned``
   or ``CapacityIsFound``) means the nodes are there or coming; ``Provisioned=False``
   (``CapacityIsNotFound``: the node groups cannot hold every pod, or are at their maximum) is
   retried by the autoscaler itself with back-off (1 to 10 minutes); no condition or
   ``Accepted`` only: not looked at yet.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cogate.controller.model import minresources as minres
from cogate.controller.provisioning import confine
from cogate.controller.planning.capacity import Snapshot, pack, reserve_room
from cogate.controller.planning.room import Room
from cogate.controller.planning.filters import spec_key
from cogate.controller.planning.planner import classify, members_anti, members_spread
from cogate.controller.planning.planstate import BoundView
from cogate.controller.model.records import HOSTNAME_LABEL, InvalidObject, NodeInfo, PodInfo, Promise, parse_time
from cogate.controller.model.verdicts import GroupRequest, Outcome

__all__ = ["GROUP", "VERSION", "PLURAL", "KIND", "API_VERSION", "CONSUME_ANNOTATION", "CLASS_ANNOTATION",
           "ATOMIC_CLASS", "CHECK_CAPACITY_CLASS", "KNOWN_CLASSES", "OPT_OUT_ANNOTATION", "GROUP_LABEL", "MANAGED_BY", "State", "RequestInfo", "Answer",
           "request_info", "state", "opted_out", "wants_nodes", "min_resources_text", "shortfalls", "shapes", "MAX_POD_SETS",
           "exclude_nodes", "template_body",
           "request_body", "request_name", "BACKOFF_SECONDS", "MAX_BACKOFF_SECONDS", "backoff_seconds",
           "booking_taken", "retake_seconds"]

GROUP = "autoscaling.x-k8s.io"
VERSION = "v1"
PLURAL = "provisioningrequests"
KIND = "ProvisioningRequest"
API_VERSION = f"{GROUP}/{VERSION}"
#: The annotation that tells cluster-autoscaler a pod uses a request's capacity (its ``v1`` API:
#: ``ProvisioningRequestPodAnnotationKey``; such a pod, if it were pending, triggers no scale-up).
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
#: Set beside it, as cluster-autoscaler sets it on the pods it books (``ProvisioningClassPodAnnotationKey``).
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
#: The class whose scale-up is all or nothing (cluster-autoscaler 1.30.2 and later).
ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: cluster-autoscaler's other class: it only checks the capacity exists (and books it), never scales up.
CHECK_CAPACITY_CLASS = "check-capacity.autoscaling.x-k8s.io"
#: The classes cluster-autoscaler 1.36 processes (``provisioningrequest/supported_classes.go``).
KNOWN_CLASSES = (ATOMIC_CLASS, CHECK_CAPACITY_CLASS)
#: A PodGroup annotation: ``"false"`` keeps cogate from asking for nodes for that group.
OPT_OUT_ANNOTATION = "cogate.dev/provisioning"
#: Label on the requests and PodTemplates cogate creates: the PodGroup's name (same namespace).
GROUP_LABEL = "cogate.dev/podgroup"
MANAGED_BY = ("app.kubernetes.io/managed-by", "cogate")
#: Seconds before a group whose request failed asks again (doubling per failure in a row, at most
#: :data:`MAX_BACKOFF_SECONDS`), as cluster-autoscaler's own retry of a request it could not provision
#: (``--provisioning-request-initial-backoff-time`` 1 min, ``--provisioning-request-max-backoff-time`` 10 min).
BACKOFF_SECONDS = 60.0
MAX_BACKOFF_SECONDS = 600.0


def backoff_seconds(failures: int) -> float:
    """Seconds to wait after ``failures`` (>= 1) failed requests in a row: 60, 120, 240, ... at most 600."""
    return min(MAX_BACKOFF_SECONDS, BACKOFF_SECONDS * 2 ** max(0, failures - 1))


def retake_seconds(taken: int) -> float:
    """Seconds to wait before asking again after the capacity of ``taken`` (>= 1) requests in a row
    was taken by others: none the first time (ask again at once), then :func:`backoff_seconds` of
    one fewer (60, 120, ... at most 600): a cluster whose new nodes are always taken first does not
    make cogate ask without end."""
    return 0.0 if taken <= 1 else backoff_seconds(taken - 1)


def _per_node(p: PodInfo) -> bool:
    """``p`` is pinned to its own node by ``metadata.name`` (a DaemonSet's pod: one per node, on the
    new nodes too; cluster-autoscaler counts them in its node template) and no gang member."""
    if p.group:
        return False
    for term in p.required_node_affinity:
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In" and tuple(req.values) == (p.node_name,):
                return True
    return False


def booking_taken(answer: Answer, asked_nodes: frozenset[str] | None, nodes: Sequence[NodeInfo],
                  pods: Sequence[PodInfo], group: tuple[str, str]) -> str:
    """Why the capacity a ``Provisioned`` request brought is gone ('' when it is not, or cannot be
    told): nodes that did not exist when the group asked (``asked_nodes``: the node names then;
    ``None`` when unknown, after a restart) run pods that are not the group's members (ordinary
    pods, another gang's members; not DaemonSet-style pods pinned to their node by
    ``metadata.name``, which every new node gets). Call it for a group that is not released and
    still wants nodes: the new nodes were taken before cogate could release it, and the request
    stays ``Provisioned`` until its 10-minute booking expires (issue 37 kind 6). Units: none;
    ``group``: ``(namespace, name)`` of the PodGroup. Limit: with the class
    ``check-capacity.autoscaling.x-k8s.io`` no node is added, so capacity taken on the existing
    nodes is not told apart (the booking's expiry ends it)."""
    if answer.state is not State.PROVISIONED or asked_nodes is None:
        return ""
    new = {n.name for n in nodes if n.name not in asked_nodes}
    if not new:
        return ""
    takers = sorted(f"{p.namespace}/{p.name}" for p in pods
                    if p.node_name in new and p.bound and not p.terminal and not p.deleting
                    and (p.namespace, p.group) != group and not _per_node(p))
    if not takers:
        return ""
    shown = ", ".join(takers[:5]) + (f" and {len(takers) - 5} more" if len(takers) > 5 else "")
    where = ", ".join(sorted(new)[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
    return (f"{len(takers)} pod{'s' if len(takers) != 1 else ''} of others took the new node"
            f"{'s' if len(new) != 1 else ''} ({where}) before the group was released: {shown}")


class State(StrEnum):
    """What a request's conditions say (:func:`state`)."""

    #: No ``Provisioned`` condition yet (``Accepted`` at most): the autoscaler has not decided.
    PENDING = "Pending"
    #: ``Provisioned=False``: the autoscaler found no scale-up that places every pod; it retries.
    NOT_PROVISIONED = "NotProvisioned"
    #: ``Provisioned=True``: the capacity is there (``CapacityIsFound``) or being added
    #: (``CapacityIsProvisioned``), booked for 10 minutes.
    PROVISIONED = "Provisioned"
    #: ``Failed=True``: the autoscaler gave up (an invalid request, or 7 days without capacity).
    FAILED = "Failed"
    #: ``BookingExpired=True``: provisioned more than 10 minutes ago; the capacity is no longer held.
    BOOKING_EXPIRED = "BookingExpired"

    @property
    def ended(self) -> bool:
        """The request is of no further use: a new one is needed."""
        return self in (State.FAILED, State.BOOKING_EXPIRED)


@dataclass(frozen=True)
class RequestInfo:
    """A ProvisioningRequest as the informer keeps it (only those carrying :data:`GROUP_LABEL`).

    ``group``: the PodGroup's name (the label); ``owner``: uid of its PodGroup owner reference ('' if
    none); ``created``: creationTimestamp (epoch seconds, 0 if absent); ``templates``: the podSets as
    ``(podTemplateRef name, count)``; ``conditions``: type -> ``(status, reason, message,
    lastTransitionTime epoch seconds)``; ``carry``: the domain labels its templates require
    (:func:`cogate.controller.provisioning.confine.parse` of its annotation)."""

    namespace: str
    name: str
    uid: str
    group: str
    owner: str = ""
    created: float = 0.0
    class_name: str = ""
    templates: tuple[tuple[str, int], ...] = ()
    conditions: Mapping[str, tuple[str, str, str, float]] = field(default_factory=dict)
    deleting: bool = False
    carry: confine.Carry = ()

    @property
    def count(self) -> int:
        """Pods asked for, over every podSet."""
        return sum(c for _, c in self.templates)


def request_info(raw: Mapping[str, Any]) -> RequestInfo:
    """Parse a ProvisioningRequest (API JSON). Raises :class:`InvalidObject` naming the field when
    ``metadata`` lacks a name, namespace, uid or :data:`GROUP_LABEL`, or a podSet or condition has
    the wrong shape (the informer records the object as invalid and goes on)."""
    meta = raw.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InvalidObject("metadata: not an object")
    for f in ("name", "namespace", "uid"):
        if not isinstance(meta.get(f), str) or not meta.get(f):
            raise InvalidObject(f"metadata.{f}: missing")
    labels = meta.get("labels") or {}
    group = labels.get(GROUP_LABEL) if isinstance(labels, Mapping) else None
    if not isinstance(group, str) or not group:
        raise InvalidObject(f"metadata.labels[{GROUP_LABEL}]: missing")
    owner = ""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "PodGroup" and isinstance(ref.get("uid"), str):
            owner = ref["uid"]
    spec = raw.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidObject("spec: not an object")
    sets = []
    for i, ps in enumerate(spec.get("podSets") or ()):
        ref = ps.get("podTemplateRef") if isinstance(ps, Mapping) else None
        name = ref.get("name") if isinstance(ref, Mapping) else None
        count = ps.get("count") if isinstance(ps, Mapping) else None
        if not isinstance(name, str) or not isinstance(count, int) or isinstance(count, bool):
            raise InvalidObject(f"spec.podSets[{i}]: needs podTemplateRef.name and an integer count")
        sets.append((name, count))
    conds: dict[str, tuple[str, str, str, float]] = {}
    status = raw.get("status") or {}
    for i, c in enumerate((status.get("conditions") if isinstance(status, Mapping) else None) or ()):
        if not isinstance(c, Mapping) or not isinstance(c.get("type"), str):
            raise InvalidObject(f"status.conditions[{i}]: needs a type")
        conds[c["type"]] = (str(c.get("status") or ""), str(c.get("reason") or ""), str(c.get("message") or ""),
                            _time(c.get("lastTransitionTime")))
    return RequestInfo(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"], group=group, owner=owner,
                       created=_time(meta.get("creationTimestamp")), class_name=str(spec.get("provisioningClassName") or ""),
                       templates=tuple(sets), conditions=conds, deleting=bool(meta.get("deletionTimestamp")),
                       carry=confine.parse(meta.get("annotations")))


def _time(value: Any) -> float:
    try:
        return parse_time(value) if isinstance(value, str) and value else 0.0
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class Answer:
    """:func:`state`'s reading of a request: the state, and the condition that says so
    (``reason``, ``message``, ``since``: its lastTransitionTime, epoch seconds; '' / 0 without one)."""

    state: State
    reason: str = ""
    message: str = ""
    since: float = 0.0


def state(info: RequestInfo) -> Answer:
    """What ``info``'s conditions say (module doc, rule 4). ``Failed`` wins over ``BookingExpired``,
    which wins over ``Provisioned`` (cluster-autoscaler ``ShouldCapacityBeBooked``: either ends the
    booking)."""
    c = info.conditions
    for type_, st in (("Failed", State.FAILED), ("BookingExpired", State.BOOKING_EXPIRED)):
        if type_ in c and c[type_][0] == "True":
            return Answer(st, c[type_][1], c[type_][2], c[type_][3])
    if "Provisioned" in c:
        s, reason, message, since = c["Provisioned"]
        if s == "True":
            return Answer(State.PROVISIONED, reason, message, since)
        if s == "False":
            return Answer(State.NOT_PROVISIONED, reason, message, since)
    if "Accepted" in c and c["Accepted"][0] == "True":
        return Answer(State.PENDING, c["Accepted"][1], c["Accepted"][2], c["Accepted"][3])
    return Answer(State.PENDING)


def opted_out(annotations: Mapping[str, str] | None) -> bool:
    """The PodGroup says ``cogate.dev/provisioning: "false"`` (any case): never ask for it."""
    return str((annotations or {}).get(OPT_OUT_ANNOTATION, "")).strip().lower() == "false"


def min_resources_text(shorts: Sequence[minres.Short]) -> str:
    """Why nothing is asked for a group whose minMember members fit and that waits only for the rest
    of ``spec.minResources`` (module doc, rule 1): a ProvisioningRequest counts pods of given shapes,
    and the rest has no pods yet; one pod the size of the rest could ask for a node no node group
    offers, and cluster-autoscaler places the request's pods on the current nodes first."""
    return (f"asks no nodes for spec.minResources ({minres.short_list(shorts)}): its minMember members fit, and a "
            "ProvisioningRequest needs the pods' shapes, which the rest of minResources does not have yet; "
            "add nodes, or lower spec.minResources")


def wants_nodes(outcome: str, group: GroupRequest) -> bool:
    """Whether new nodes may let ``group`` place minMember, by the planner's verdict ``outcome``
    (module doc, rule 1): ``InsufficientCapacity`` and ``ExceedsClusterCapacity`` (the current
    nodes lack room); ``Unschedulable`` when members fit no current node by their own node
    constraints (nodeSelector, required node affinity, tolerations, their volumes' node affinity:
    ``planner`` ``_never_fits``, issue 21 item 9): a node group may add nodes that match them, as
    cluster-autoscaler scales up for such pods (a gang for a node pool at zero nodes while other
    pools have nodes). Not for the other ``Unschedulable`` verdicts: an invalid minMember, or a
    member with required pod affinity (cogate meets it only with bound pods; new nodes do not).
    Members held whatever the room (``explanations.held_reason``) are the caller's to check."""
    o = Outcome(outcome)
    if o in (Outcome.INSUFFICIENT_CAPACITY, Outcome.EXCEEDS_CLUSTER_CAPACITY):
        return True
    if o is not Outcome.UNSCHEDULABLE or group.min_member < 1:
        return False
    return not any(m.required_pod_affinity for m in group.members if not m.bound)


# -- how many, of which shape ---------------------------------------------------------------------


def _fast(view: BoundView | None, groups: Sequence[GroupRequest]) -> bool:
    return (view is not None and not view.anti_active and not members_anti(groups) and not members_spread(groups)
            and not any(m.required_pod_affinity for g in groups for m in g.members))


def shortfalls(groups: Sequence[tuple[GroupRequest, bool]], nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
               promised: Sequence[Promise], gate: str, *, view: BoundView | None = None,
               gone: Mapping[tuple[str, str], Sequence[PodInfo]] | None = None
               ) -> dict[tuple[str, str], tuple[PodInfo, ...]]:
    """The members each asking group cannot place on the current nodes (module doc, rule 2).

    ``groups``: ``(group, asks)`` in the planner's order (highest priority first, then oldest);
    every one is planned on one shared room, placed members left charged; only groups with
    ``asks`` get an entry: ``(namespace, name) -> members to ask for`` (empty when minMember fits,
    or when the group has not enough plannable members to reach minMember: new nodes would not
    help). ``nodes``/``pods``: as ``planner.decide`` takes them; ``promised``: room promised to
    others (``capacity.promised_room`` plus room held for a preemption), charged first.
    ``view``: the incremental planner's kept free room
    (:meth:`~cogate.controller.planning.planstate.PlanningState.bound_view`); ``nodes``/``pods`` are then
    ignored, and without pod (anti-)affinity or topology spread no pass over the pods is made.
    ``gone``: per asking group, the bound pods preemption may evict for it
    (:func:`cogate.controller.provisioning.mixed.evictable`): its members that do not fit the
    free room are then planned on the room without them, and only those still unplaced are asked
    for (the shortfall after preemption, issue 37 kind 5); that room is given back before the next
    group is planned (the pods are not evicted yet), the members placed on free room stay charged.
    Deterministic; never raises on well-typed records."""
    gs = [g for g, _ in groups]
    room: Room
    if _fast(view, gs):
        assert view is not None
        room = Room(view.table, False, empty=False, base=(list(view.free), list(view.ports)))
        reserve_room(room, view.table.index, promised)
    else:
        if view is not None:
            nodes, pods = view.nodes, view.pods
        room = Snapshot(nodes, pods, members_anti(gs), members_spread(gs)).room(promised)
    out: dict[tuple[str, str], tuple[PodInfo, ...]] = {}
    for g, asks in groups:
        ms = classify(g, gate)
        needed = g.min_member - len(ms.bound)
        if needed <= 0 or len(ms.plannable) < needed:
            if asks:
                out[(g.namespace, g.name)] = ()
            continue
        plan = pack(room, ms.plannable, needed)
        room.commit()  # placed members hold their room for the groups after this one
        if asks:
            rest = [m for m in ms.plannable if m.uid not in plan]
            victims = (gone or {}).get((g.namespace, g.name), ())
            if victims and len(plan) < needed:
                rest = _after_preemption(room, rest, needed - len(plan), victims)
            out[(g.namespace, g.name)] = tuple(rest[: max(0, needed - len(plan))])
    return out


def _after_preemption(room: Room, rest: Sequence[PodInfo], needed: int, victims: Sequence[PodInfo]) -> list[PodInfo]:
    """``rest`` less those ``pack`` places on ``room`` with ``victims`` taken off (``Room.vacate``,
    as victim selection does); ``room`` is left as it was."""
    mark = room.mark()
    index = room.table.index
    for p in victims:
        if p.node_name in index:
            room.vacate(p, index[p.node_name])
    plan = pack(room, rest, needed)
    room.rollback(mark)
    return [m for m in rest if m.uid not in plan]


#: The most podSets one ProvisioningRequest takes (its CRD: ``spec.podSets`` ``maxItems: 32``).
MAX_POD_SETS = 32


def shapes(members: Sequence[PodInfo]) -> list[tuple[PodInfo, int]]:
    """``members`` by shape (what kube-scheduler's filters read: ``filters.spec_key`` with labels),
    each ``(representative, count)``: the representative is the shape's first member by name; shapes
    in the order of their representatives' names (stable request bodies).

    When that makes more than :data:`MAX_POD_SETS` shapes (members told apart by labels only, as an
    Indexed Job's ``batch.kubernetes.io/job-completion-index`` or a StatefulSet's pod name tell each
    pod), only the labels the members' own pod (anti-)affinity and topology spread selectors read
    tell shapes apart (:func:`_selected_keys`: the only labels by which cluster-autoscaler's
    simulation of the request's pods tells them apart, another pod's anti-affinity aside). The caller
    refuses a request of more shapes than that still."""
    full = _by_shape(members, lambda m: tuple(sorted(m.labels.items())))
    if len(full) <= MAX_POD_SETS:
        return full
    read = _selected_keys(members)
    return _by_shape(members, lambda m: tuple(sorted((k, v) for k, v in m.labels.items() if k in read)))


def _by_shape(members: Sequence[PodInfo], labels: Any) -> list[tuple[PodInfo, int]]:
    by: dict[Any, list[PodInfo]] = {}
    for m in members:
        by.setdefault((spec_key(m, False, False), labels(m)), []).append(m)
    reps = [(min(ms, key=lambda p: p.name), len(ms)) for ms in by.values()]
    return sorted(reps, key=lambda t: t[0].name)


def _selected_keys(members: Sequence[PodInfo]) -> frozenset[str]:
    """Label keys read by the members' required pod (anti-)affinity terms and topology spread
    constraints (``matchLabels``, ``matchExpressions``, ``matchLabelKeys``)."""
    keys: set[str] = set()
    for m in members:
        selectors = [t.label_selector for t in (*m.required_pod_affinity, *m.required_pod_anti_affinity)]
        selectors += [c.label_selector for c in m.topology_spread]
        for sel in selectors:
            if sel is not None:
                keys.update(k for k, _ in sel.match_labels)
                keys.update(r.key for r in sel.match_expressions)
        for c in m.topology_spread:
            keys.update(c.match_label_keys)
    return frozenset(keys)


# -- the objects ----------------------------------------------------------------------------------


def exclude_nodes(affinity: Mapping[str, Any] | None, nodes: Sequence[NodeInfo],
                  carry: confine.Carry = ()) -> dict[str, Any]:
    """``affinity`` (a pod's ``spec.affinity``, API JSON; not changed) with its required node
    affinity narrowed to nodes other than ``nodes`` (module doc, rule 3): each term gains
    ``kubernetes.io/hostname NotIn`` the nodes' hostname labels and, per node without that label,
    ``metadata.name NotIn [name]`` (a field requirement takes exactly one value: API validation of
    ``matchFields``), and to nodes carrying ``carry`` (a topology domain's labels,
    :func:`cogate.controller.provisioning.confine.requirements`: ``In [value]`` or ``Exists``); without
    required node affinity one such term is added. Terms are ORed, so every term must exclude the
    nodes. An empty term (it matches no node) is left empty. Raises ``ValueError`` naming the field
    when the affinity has an unexpected shape."""
    out: dict[str, Any] = copy.deepcopy(dict(affinity)) if affinity else {}
    if not nodes and not carry:
        return out
    hostnames = sorted({n.labels[HOSTNAME_LABEL] for n in nodes if n.labels.get(HOSTNAME_LABEL)})
    unlabelled = sorted(n.name for n in nodes if not n.labels.get(HOSTNAME_LABEL))
    exprs = confine.requirements(carry)
    exprs += [{"key": HOSTNAME_LABEL, "operator": "NotIn", "values": hostnames}] if hostnames else []
    fields_ = [{"key": "metadata.name", "operator": "NotIn", "values": [n]} for n in unlabelled]
    na = out.setdefault("nodeAffinity", {})
    if not isinstance(na, dict):
        raise ValueError("spec.affinity.nodeAffinity: not an object")
    req = na.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    if not isinstance(req, dict):
        raise ValueError("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: not an object")
    terms = req.get("nodeSelectorTerms")
    terms = [] if terms is None else terms
    if not isinstance(terms, list):
        raise ValueError("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                         "nodeSelectorTerms: not a list")
    if not terms:
        terms = [{}]
    new_terms = []
    for i, t in enumerate(terms):
        if not isinstance(t, dict):
            raise ValueError(f"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                             f"nodeSelectorTerms[{i}]: not an object")
        if len(terms) > 1 and not t.get("matchExpressions") and not t.get("matchFields"):
            new_terms.append(t)  # matches no node; stays so
            continue
        t = dict(t)
        if exprs:
            t["matchExpressions"] = [*(t.get("matchExpressions") or []), *copy.deepcopy(exprs)]
        if fields_:
            t["matchFields"] = [*(t.get("matchFields") or []), *copy.deepcopy(fields_)]
        new_terms.append(t)
    req["nodeSelectorTerms"] = new_terms
    return out


#: Pod spec fields that say where or when the pod runs now, not what it needs: left out of a template.
#: ``ephemeralContainers`` (``kubectl debug`` adds them to a pod, none asks for room) too: the API server
#: refuses a PodTemplate that has them (``ValidatePodTemplateSpec``: "ephemeral containers not allowed in
#: pod template").
_DROPPED_SPEC = ("nodeName", "schedulingGates", "ephemeralContainers")


def _labels(group: str) -> dict[str, str]:
    return {GROUP_LABEL: group, MANAGED_BY[0]: MANAGED_BY[1]}


def _owner(group: str, uid: str) -> list[dict[str, Any]]:
    from cogate import api

    return [{"apiVersion": api.API_VERSION, "kind": api.KIND, "name": group, "uid": uid, "controller": True,
             "blockOwnerDeletion": False}]


def template_body(pod: Mapping[str, Any], name: str, group: str, group_uid: str,
                  exclude: Sequence[NodeInfo], carry: confine.Carry = ()) -> dict[str, Any]:
    """The PodTemplate (``v1``) that stands for member ``pod`` (API JSON, as read) in a request:
    the pod's spec without ``nodeName``, its scheduling gates and ephemeral containers
    (:data:`_DROPPED_SPEC`), its required node affinity narrowed away from ``exclude`` and to nodes
    carrying ``carry`` (:func:`exclude_nodes`), its labels (pod affinity and spread read them); owned by the PodGroup (``group``, ``group_uid``: garbage collected with it), labelled
    :data:`GROUP_LABEL`. Raises ``ValueError`` naming the field when the pod has no spec or an
    affinity of an unexpected shape."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping) or not spec.get("containers"):
        raise ValueError("spec.containers: missing")
    meta = pod.get("metadata") or {}
    tspec = {k: copy.deepcopy(v) for k, v in spec.items() if k not in _DROPPED_SPEC}
    tspec["affinity"] = exclude_nodes(spec.get("affinity"), exclude, carry)
    pod_labels = dict(meta.get("labels") or {}) if isinstance(meta.get("labels"), Mapping) else {}
    return {
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": meta.get("namespace") or "", "labels": _labels(group),
                     "ownerReferences": _owner(group, group_uid)},
        "template": {"metadata": {"labels": pod_labels}, "spec": tspec},
    }


def request_body(name: str, namespace: str, group: str, group_uid: str, class_name: str,
                 templates: Sequence[tuple[str, int]], carry: confine.Carry = ()) -> dict[str, Any]:
    """The ProvisioningRequest (``autoscaling.x-k8s.io/v1``) asking for ``templates``
    (``(PodTemplate name, count)``) with ``class_name``; owned by the PodGroup, labelled
    :data:`GROUP_LABEL`, annotated with the domain labels its templates require (``carry``,
    :func:`cogate.controller.provisioning.confine.annotations`). Its spec is immutable (the CRD's
    validation): a different ask is a new request."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": _labels(group),
                            "ownerReferences": _owner(group, group_uid)}
    if carry:
        meta["annotations"] = confine.annotations(carry)
    return {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": meta,
        "spec": {"provisioningClassName": class_name,
                 "podSets": [{"podTemplateRef": {"name": t}, "count": c} for t, c in templates]},
    }


def request_name(group: str, group_uid: str, attempt: int) -> str:
    """A request's name: ``<group>-<6 hex of (uid, attempt)>``, at most 63 characters (the group's
    name is cut to fit), so that its PodTemplates ``<request>-<i>`` stay valid names too."""
    digest = hashlib.sha256(f"{group_uid}/{attempt}".encode()).hexdigest()[:6]
    return f"{group[:50].rstrip('-.')}-{digest}"
