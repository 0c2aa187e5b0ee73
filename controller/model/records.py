"""Pure, immutable records the planner works on, and converters from API JSON.

The informers hand over API objects as plain dicts (a watch event's
``raw_object``); :func:`node_info` and :func:`pod_info` reduce them to the few
fields capacity planning needs, reading each field with :mod:`cogate.controller.model.readers`
(absent is the default, another type an :class:`InvalidObject` naming the field). The
scheduling constraints a pod or node carries (taints and tolerations, node and label
selectors, pod (anti-)affinity terms, topology spread, host ports) are records of
:mod:`cogate.controller.model.constraints`, with their matching rules and readers; they are
importable from here too.

Units: ResourceList values as in :mod:`cogate.controller.model.resources`; times in
float epoch seconds (UTC).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cogate import gates
from cogate.api import DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL, native_gang_field
from cogate.controller.topology.constraints import KUEUE_ANNOTATIONS
from cogate.controller.model.constraints import (READINESS_TAINTS, HostPort, LabelSelector, LabelSelectorRequirement,
                                                  NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, Taint,
                                                  Toleration, TopologySpreadConstraint, host_ports, label_selector,
                                                  node_selector_terms, pod_affinity_terms, readiness, spread_constraints,
                                                  taints, tolerations)
from cogate.controller.model.managedfields import spec_field_set, status_field_manager
from cogate.controller.model.nativegroups import pod_group_name
from cogate.controller.model.readers import (InvalidObject, array, integer, mapping, mappings, parse_time, sections,
                                              string_map, text)
from cogate.controller.model.resources import QuantityError, ResourceList, effective_request, parse_quantity, to_units

# InvalidObject and parse_time (readers) and the constraint records (constraints) are re-exported: callers import
# them from here.
__all__ = [
    "InvalidObject",
    "Taint",
    "Toleration",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "LabelSelectorRequirement",
    "LabelSelector",
    "PodAffinityTerm",
    "TopologySpreadConstraint",
    "HostPort",
    "NodeInfo",
    "PodInfo",
    "Reservation",
    "Promise",
    "member_key",
    "is_member",
    "node_info",
    "pod_info",
    "controller_owner",
    "nominated_pod_info",
    "parse_time",
    "label_selector",
    "PREEMPTION_POLICIES",
    "HOSTNAME_LABEL",
    "UNSCHEDULABLE_TAINT_KEY",
    "READINESS_TAINTS",
    "VOLUME_CLAIMS",
    "RESOURCE_CLAIMS",
    "ResourceClaimRef",
]

#: ``PodInfo.unplanned`` entry of a pod with volume claims not yet resolved against PVCs and PVs.
VOLUME_CLAIMS = "volume claims"
#: ``PodInfo.unplanned`` entry of a pod with DRA resource claims not yet resolved against the
#: ResourceClaims, templates, DeviceClasses and ResourceSlices (:mod:`cogate.controller.devices.dra`).
RESOURCE_CLAIMS = "resource claims"
#: Topology key for "one per node" pod (anti-)affinity.
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Taint a pod must tolerate (effect NoSchedule) to land on a cordoned node
#: (kube-scheduler NodeUnschedulable plugin).
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class ResourceClaimRef:
    """One entry of a pod's ``spec.resourceClaims``: ``name`` (the pod's name for it), the
    ResourceClaim it names (``claim``, ``resourceClaimName``) or the template its claim is made from
    (``template``, ``resourceClaimTemplateName``), and for a template the claim made for this pod
    (``generated``, from ``status.resourceClaimStatuses``; '' until the controller made it)."""

    name: str
    claim: str = ""
    template: str = ""
    generated: str = ""


# -- nodes and pods ------------------------------------------------------------


@dataclass(frozen=True)
class NodeInfo:
    """A node as the planner sees it. ``allocatable`` in ResourceList units."""

    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    allocatable: ResourceList = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    #: When the node stopped being Ready, epoch seconds (``constraints.readiness``: its NoExecute readiness
    #: taint's ``timeAdded``; 0.0: none). Not compared: it changes only with ``ready`` or ``taints``.
    not_ready_since: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class PodInfo:
    """A pod as the planner sees it. ``requests`` = effective request
    (:func:`cogate.controller.model.resources.effective_request`)."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    node_name: str = ""
    phase: str = "Pending"
    requests: ResourceList = field(default_factory=dict)
    gates: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    required_node_affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    required_pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    required_pod_affinity: tuple[PodAffinityTerm, ...] = ()
    priority: int = 0
    created: float = 0.0
    deleting: bool = False
    has_controller: bool = False
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    #: Not compared: two records that differ only here mean the same to the planner.
    resource_version: str = field(default="", compare=False)
    #: Scheduling constraints the planner does not evaluate, as text for messages ("volume claims"
    #: until :func:`cogate.controller.model.volumes.resolve` replaced it, "unbound volume claim x",
    #: "resource claims"); such members are released without a pin and without a reservation,
    #: or hold their group (``PlannerConfig.unchecked``).
    unplanned: tuple[str, ...] = ()
    #: Hard (``DoNotSchedule``) topology spread constraints (kube-scheduler PodTopologySpread).
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    #: Names of the PersistentVolumeClaims the pod uses (``persistentVolumeClaim.claimName``;
    #: ``<pod>-<volume>`` for generic ephemeral volumes), in volume order.
    volume_claims: tuple[str, ...] = ()
    #: The pod's DRA resource claims (``spec.resourceClaims``), in spec order.
    resource_claims: tuple[ResourceClaimRef, ...] = ()
    #: Node affinity of the bound PVs of those claims: one entry per PV with a required node
    #: affinity, each a tuple of ORed terms; every entry must match (kube-scheduler VolumeBinding,
    #: ``CheckNodeAffinity`` against node labels). Filled by :func:`cogate.controller.model.volumes.resolve`.
    volume_node_affinity: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    #: Why the pod cannot be scheduled yet because of its claims ("persistentvolumeclaim "x" not
    #: found"); a member with problems keeps its group gated. Filled by ``volumes.resolve``.
    volume_problems: tuple[str, ...] = ()
    #: Reason of the pod's ``DisruptionTarget`` condition when it is True (``PreemptionByScheduler``,
    #: ``EvictionByEvictionAPI``, ``DeletionByTaintManager``, ``TerminationByKubelet``, ...), else ''.
    disruption: str = ""
    #: Message of that condition ('' without one): who disrupted the pod, e.g. cogate's
    #: "cogate: preempting to place PodGroup ns/name (priority 1000)".
    disruption_message: str = ""
    #: ``spec.affinity`` as received (API JSON, not copied), kept only while the pod carries a
    #: scheduling gate, so that its release patch (:func:`cogate.controller.planning.patches.release_patch`)
    #: is built from this record instead of a fresh read (:meth:`cogate.controller.kube.writer.Writer.ungate`).
    #: Not compared: the parsed fields above are what the planner reads.
    affinity: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    #: ``status.nominatedNodeName``: the node kube-scheduler nominated this unbound pod for after
    #: preemption (its victims are going); '' when none. Room promised there (:class:`Promise`).
    nominated_node: str = ""
    #: Pods per replica as the LeaderWorkerSet controller annotates them
    #: (``leaderworkerset.sigs.k8s.io/size``, leader included); 0 when absent or not a positive
    #: integer (:mod:`cogate.controller.model.replicas`).
    replica_size: int = 0
    #: Kueue's topology annotations the pod carries (``kueue.x-k8s.io/podset-*-topology``,
    #: ``podset-slice-size``), sorted pairs: :func:`cogate.controller.topology.constraints.parse`.
    topology_asked: tuple[tuple[str, str], ...] = ()
    #: ``metadata.generation`` (0 when absent: API servers before 1.33). The API server sets 1 at
    #: creation and adds 1 on every change of ``spec`` (binding and status writes do not), so a
    #: release (the gate's removal) always makes it at least 2 (:func:`cogate.controller.status.lifecycle.never_gated`).
    generation: int = 0
    #: The controller owner (``ownerReferences`` entry with ``controller: true``) as
    #: ``(apiVersion, kind, name, uid)``, kept for members only (pods with the pod-group label;
    #: ``()`` otherwise): what :mod:`cogate.controller.release.owners` judges when a group waits for members.
    owner: tuple[str, str, str, str] = ()
    #: ``spec.preemptionPolicy``: ``PreemptLowerPriority`` (the API default) or ``Never`` (the pod
    #: never preempts others: kube-scheduler ``PodEligibleToPreemptOthers``; a gang with such a
    #: member preempts nothing, :mod:`cogate.controller.preemption.victims`).
    preemption_policy: str = "PreemptLowerPriority"
    #: ``status.startTime`` (epoch seconds; 0.0 when absent: not started yet). Victim order
    #: (kube-scheduler ``util.MoreImportantPod``, ``GetPodStartTime``).
    started: float = 0.0
    #: ``metadata.deletionTimestamp`` (epoch seconds; 0.0 when not being deleted): the API server
    #: sets it to the DELETE's time plus the grace period, so it is when the kubelet kills the
    #: containers. A rebuilt preemption's deadline (:func:`cogate.controller.preemption.inflight.rebuild`).
    #: Not compared (``deleting`` is).
    deletion_at: float = field(default=0.0, compare=False)
    #: ``lastTransitionTime`` of the True ``DisruptionTarget`` condition (epoch seconds; 0.0 without
    #: one): when the pod was marked (a rebuilt preemption's start). Not compared.
    disruption_since: float = field(default=0.0, compare=False)
    #: The field manager that owns ``status.nominatedNodeName`` (``metadata.managedFields``, entry of
    #: the ``status`` subresource; ``cogate-controller`` when cogate's preemption nominated the pod),
    #: '' without a nomination or when unknown (no managedFields). Read only for gated pods. Not compared.
    nominated_by: str = field(default="", compare=False)
    #: ``"spec.schedulingGroup"`` / ``"spec.workloadRef"`` when the pod is in Kubernetes' own gang
    #: scheduling (:func:`cogate.api.native_gang_field`), else ''. Such a pod is no member, whatever
    #: its label (:func:`member_key`; :mod:`cogate.controller.release.native` names it in the status).
    native: str = ""
    #: ``spec.schedulingGroup.podGroupName`` ('' when none): :mod:`cogate.controller.model.nativegroups`.
    native_group: str = ""
    #: Created with ``spec.nodeName`` (read for members only): it never passed kube-scheduler and
    #: can never have carried a scheduling gate (the API server refuses both together), so no
    #: release of cogate's covered it. From ``metadata.managedFields``
    #: (:func:`cogate.controller.model.managedfields.spec_field_set`); False when unknown.
    bound_at_creation: bool = False

    @property
    def group(self) -> str | None:
        """The PodGroup name from the pod-group label, or None."""
        return self.labels.get(POD_GROUP_LABEL)

    @property
    def bound(self) -> bool:
        return bool(self.node_name)

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def gated_by(self, gate: str) -> bool:
        return gate in self.gates


def member_key(p: PodInfo) -> tuple[str, str] | None:
    """``(namespace, group)`` of the PodGroup ``p`` is a live member of, or ``None``.

    The one membership rule (docs/semantics.md, "Members and PodGroups"): a member of PodGroup
    ``ns/name`` is a pod of namespace ``ns`` whose pod-group label names ``name`` (not empty)
    and that is not being deleted (no ``deletionTimestamp``). A same-named PodGroup in another
    namespace never matches. A pod in Kubernetes' own gang scheduling (``native``: it sets
    ``spec.schedulingGroup`` or ``spec.workloadRef``) is no member either, whatever its label:
    native gang scheduling places it (issue 18; the leader removes cogate's gate: :mod:`cogate.controller.release.strays`).
    """
    group = p.group
    return (p.namespace, group) if group and not p.deleting and not p.native else None


def is_member(p: PodInfo, namespace: str, group: str) -> bool:
    """``p`` is a live member of PodGroup ``namespace/group`` (:func:`member_key`)."""
    return member_key(p) == (namespace, group)


@dataclass(frozen=True)
class Reservation:
    """Room held on ``node_name`` for a released, not yet bound pod until ``expires``."""

    pod_uid: str
    namespace: str
    name: str
    node_name: str
    requests: ResourceList
    host_ports: tuple[HostPort, ...] = ()
    expires: float = 0.0


@dataclass(frozen=True)
class Promise:
    """Room on ``node_name`` promised to a pod that is not bound there yet: the one notion of
    "room promised" the planner subtracts from a node's free room before planning
    (:func:`cogate.controller.planning.capacity.promised_room`).

    ``kind``: ``"reserved"`` (cogate released the member ``pod`` to that node: a
    :class:`Reservation`; it counts for every pod), ``"preempting"`` (cogate is preempting for
    the gated member ``pod``'s group: it counts for every pod but that group's, which is lent it)
    or ``"nominated" (kube-scheduler nominated
    ``pod`` there after preemption, ``status.nominatedNodeName``; it counts only against pods of
    ``priority`` or lower, as kube-scheduler's ``addGENominatedPods`` counts nominated pods of
    equal or higher priority when it filters a node). ``holder``: who the room is held for, for
    messages: ``"PodGroup ns/name"`` for a reservation, ``"pod ns/name"`` for a nomination.
    ``requests``: ResourceList as in :mod:`cogate.controller.model.resources`.
    """

    pod: PodInfo
    node_name: str
    requests: ResourceList
    host_ports: tuple[HostPort, ...] = ()
    kind: str = "reserved"
    priority: int = 0
    holder: str = ""

    @property
    def nominated(self) -> bool:
        return self.kind == "nominated"

    @property
    def preempting(self) -> bool:
        """Room cogate freed by preemption for PodGroup ``holder`` (``kind`` ``"preempting"``,
        :mod:`cogate.controller.preemption.inflight`): it counts for every pod but that group's members."""
        return self.kind == "preempting"


#: LeaderWorkerSet's pod annotation: pods per replica (leader included).
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"


# -- API JSON converters ---------------------------------------------------------


def _shared_strings(v: Any, path: str) -> Mapping[str, str]:
    """A string map field (labels, node selector: :func:`~cogate.controller.model.readers.string_map`),
    interned and shared with the records that hold an equal map."""
    return _shared_map(tuple((sys.intern(k), sys.intern(val)) for k, val in string_map(v, path).items()))


# Sharing equal values between records: the informer caches hold one record per pod, and
# most pods repeat their neighbours' labels, node selectors and tolerations (a ReplicaSet's
# pods have one label map; nearly every pod carries the same two default tolerations:
# :func:`cogate.controller.model.constraints.tolerations`).
# One canonical object per distinct value (bounded caches, strings interned) cut a record
# from about 2.7 KB to 0.6 KB in the controller-memory benchmark (bench/controller_memory.py).


@functools.lru_cache(maxsize=8192)
def _shared_map(items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return MappingProxyType(dict(items)) if items else _EMPTY


def node_info(obj: Mapping[str, Any]) -> NodeInfo:
    """Reduce a v1 Node (API JSON) to a :class:`NodeInfo`.

    ``ready`` is True only with a ``Ready`` condition of status ``True``
    (NotReady, Unknown and a missing condition are not ready).
    Raises :class:`InvalidObject` naming the field (e.g. a bad allocatable quantity).
    """
    meta, spec, status = sections(obj, "node")
    name = text(meta.get("name"), "metadata.name")
    if not name:
        raise InvalidObject("metadata.name: missing")
    alloc: ResourceList = {}
    for k, raw in mapping(status.get("allocatable"), "status.allocatable").items():
        try:
            alloc[str(k)] = to_units(str(k), parse_quantity(raw))
        except QuantityError as e:
            raise InvalidObject(f"node {name}: status.allocatable.{k}: {e}") from None
    ready, since = readiness(status.get("conditions"), spec.get("taints"))
    return NodeInfo(
        name=name,
        labels=_shared_strings(meta.get("labels"), "metadata.labels"),
        allocatable=alloc,
        taints=taints(spec.get("taints"), "spec.taints"),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        not_ready_since=since,
    )


def pod_info(obj: Mapping[str, Any]) -> PodInfo:
    """Reduce a v1 Pod (API JSON) to a :class:`PodInfo`.

    Raises :class:`InvalidObject` naming the field on malformed input (bad
    quantity, wrong types, bad timestamp).
    """
    meta, spec, status = sections(obj, "pod")
    ns = text(meta.get("namespace"), "metadata.namespace")
    name = text(meta.get("name"), "metadata.name")
    try:
        return _pod_info(meta, spec, status, ns, name)
    except QuantityError as e:
        raise InvalidObject(f"pod {ns}/{name}: {e}") from None
    except InvalidObject as e:
        raise InvalidObject(f"pod {ns}/{name}: {e}") from None


def _pod_info(
    meta: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any], ns: str, name: str
) -> PodInfo:
    """The fields of :class:`PodInfo`, read in this order (the first malformed one raises)."""
    requests = effective_request(spec, status)
    affinity = mapping(spec.get("affinity"), "spec.affinity")
    node_terms = _required_node_affinity(affinity)
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pa = mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    paa = mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    tolerated = tolerations(spec.get("tolerations"), "spec.tolerations")
    priority = integer(spec.get("priority"), "spec.priority")
    owners = array(meta.get("ownerReferences"), "metadata.ownerReferences")
    created = parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    gate_names = _gate_names(spec)
    return PodInfo(
        namespace=sys.intern(ns),
        name=name,
        uid=text(meta.get("uid"), "metadata.uid"),
        labels=_shared_strings(meta.get("labels"), "metadata.labels"),
        node_name=sys.intern(text(spec.get("nodeName"), "spec.nodeName")),
        phase=sys.intern(text(status.get("phase"), "status.phase") or "Pending"),
        requests=requests,
        gates=gate_names,
        node_selector=_shared_strings(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_node_affinity=node_terms,
        tolerations=tolerated,
        host_ports=host_ports(spec),
        required_pod_anti_affinity=pod_affinity_terms(paa.get(req), f"spec.affinity.podAntiAffinity.{req}"),
        required_pod_affinity=pod_affinity_terms(pa.get(req), f"spec.affinity.podAffinity.{req}"),
        priority=priority,
        created=created,
        deleting=meta.get("deletionTimestamp") is not None,
        has_controller=any(isinstance(o, Mapping) and o.get("controller") is True for o in owners),
        scheduler_name=sys.intern(text(spec.get("schedulerName"), "spec.schedulerName") or DEFAULT_SCHEDULER_NAME),
        resource_version=text(meta.get("resourceVersion"), "metadata.resourceVersion"),
        unplanned=_unplanned(spec),
        topology_spread=spread_constraints(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints"),
        volume_claims=_volume_claims(spec, name),
        resource_claims=_resource_claims(spec, status) if spec.get("resourceClaims") else (),
        disruption=_disruption(status),
        disruption_message=_disruption(status, "message") if status.get("conditions") else "",
        affinity=(affinity or None) if gate_names else None,
        nominated_node=sys.intern(text(status.get("nominatedNodeName"), "status.nominatedNodeName")),
        replica_size=_replica_size(meta.get("annotations")),
        topology_asked=_topology_asked(meta.get("annotations")),
        generation=_generation(meta.get("generation")),
        owner=controller_owner(owners) if POD_GROUP_LABEL in (meta.get("labels") or {}) else (),
        preemption_policy=_preemption_policy(spec.get("preemptionPolicy")),
        started=parse_time(status.get("startTime"), "status.startTime"),
        deletion_at=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        disruption_since=_disruption_since(status) if status.get("conditions") else 0.0,
        nominated_by=(status_field_manager(meta, "nominatedNodeName")
                      if gate_names and status.get("nominatedNodeName") else ""),
        bound_at_creation=bool(spec.get("nodeName")) and POD_GROUP_LABEL in (meta.get("labels") or {})
        and spec_field_set(meta, "nodeName"),
        native=native_gang_field(spec),
        native_group=pod_group_name(spec),
    )


def _required_node_affinity(affinity: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """``nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`` of
    ``spec.affinity``; a required selector without terms is one empty term (it matches nothing)."""
    node_aff = mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    req_na = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    na_path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms = node_selector_terms(mapping(req_na, na_path).get("nodeSelectorTerms"), f"{na_path}.nodeSelectorTerms")
    if req_na is not None and not terms:
        # API validation requires at least one term; an empty selector matches nothing.
        terms = (NodeSelectorTerm(),)
    return terms


def _gate_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """``spec.schedulingGates`` names (:func:`cogate.gates.names`); a malformed list is an InvalidObject."""
    try:
        return gates.names({"spec": spec})
    except gates.GateShapeError as exc:
        raise InvalidObject(str(exc)) from None


#: ``spec.preemptionPolicy`` values (core/v1 ``PreemptionPolicy``).
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


def _preemption_policy(v: Any) -> str:
    """``spec.preemptionPolicy``; absent or null is the API default ``PreemptLowerPriority``;
    any other value than :data:`PREEMPTION_POLICIES` is an :class:`InvalidObject` naming the field."""
    if v is None or v == "":
        return PREEMPTION_POLICIES[0]
    if v not in PREEMPTION_POLICIES:
        raise InvalidObject(f"spec.preemptionPolicy: expected PreemptLowerPriority or Never, got {v!r}")
    return sys.intern(v)


def nominated_pod_info(obj: Mapping[str, Any]) -> PodInfo | None:
    """The nominated-pods informer's converter (unbound pods): a pod kube-scheduler has nominated
    a node for (``status.nominatedNodeName`` set, not bound) as a :class:`PodInfo`, else None
    (stored as None: such a pod promises no room, and its changes trigger no pass). Raises
    :class:`InvalidObject` as :func:`pod_info` on a malformed nominated pod."""
    status = obj.get("status") if isinstance(obj, Mapping) else None
    if not isinstance(status, Mapping) or not status.get("nominatedNodeName"):
        return None
    p = pod_info(obj)
    return None if p.bound else p


def _topology_asked(annotations: Any) -> tuple[tuple[str, str], ...]:
    """Kueue's topology annotations among ``annotations`` (strings only), sorted."""
    if not isinstance(annotations, Mapping):
        return ()
    return tuple(sorted((k, v) for k in KUEUE_ANNOTATIONS if isinstance(v := annotations.get(k), str)))


def _replica_size(annotations: Any) -> int:
    """``leaderworkerset.sigs.k8s.io/size`` as a positive integer, else 0 (never raises: an odd
    annotation of another controller must not make the pod unreadable)."""
    if not isinstance(annotations, Mapping):
        return 0
    v = annotations.get(LWS_SIZE_ANNOTATION)
    if isinstance(v, str) and v.isdigit() and v.isascii():
        n = int(v)
        return n if 0 < n <= 1_000_000 else 0
    return 0


def _generation(v: Any) -> int:
    """``metadata.generation`` as an int (0 when absent or not a whole number)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def controller_owner(owners: Any) -> tuple[str, str, str, str]:
    """``(apiVersion, kind, name, uid)`` of the ``ownerReferences`` entry with ``controller: true``, or ``()``
    (also when ``owners`` is not a list: never raises)."""
    for o in owners if isinstance(owners, (list, tuple)) else ():
        if isinstance(o, Mapping) and o.get("controller") is True:
            return (sys.intern(str(o.get("apiVersion") or "")), sys.intern(str(o.get("kind") or "")),
                    str(o.get("name") or ""), str(o.get("uid") or ""))
    return ()


def _volume_claims(spec: Mapping[str, Any], pod_name: str) -> tuple[str, ...]:
    """PVC names of the pod's volumes: ``persistentVolumeClaim.claimName``, and ``<pod>-<volume>``
    for a generic ephemeral volume (k8s.io/component-helpers ``ephemeral.VolumeClaimName``)."""
    out = []
    for vp, v in mappings(spec.get("volumes"), "spec.volumes"):
        pvc = v.get("persistentVolumeClaim")
        if pvc is not None:
            out.append(text(mapping(pvc, f"{vp}.persistentVolumeClaim").get("claimName"),
                            f"{vp}.persistentVolumeClaim.claimName"))
        elif v.get("ephemeral") is not None:
            out.append(f"{pod_name}-{text(v.get('name'), f'{vp}.name')}")
    return tuple(out)


def _resource_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[ResourceClaimRef, ...]:
    """``spec.resourceClaims`` with the claims made from templates (``status.resourceClaimStatuses``:
    ``name`` -> ``resourceClaimName``, core/v1 ``PodResourceClaimStatus``); raises InvalidObject
    naming the field."""
    made: dict[str, str] = {}
    for sp, st in mappings(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses"):
        made[text(st.get("name"), f"{sp}.name")] = text(st.get("resourceClaimName"), f"{sp}.resourceClaimName")
    out = []
    for cp, c in mappings(spec.get("resourceClaims"), "spec.resourceClaims"):
        name = text(c.get("name"), f"{cp}.name")
        claim = text(c.get("resourceClaimName"), f"{cp}.resourceClaimName")
        template = text(c.get("resourceClaimTemplateName"), f"{cp}.resourceClaimTemplateName")
        if bool(claim) == bool(template):
            raise InvalidObject(f"{cp}: exactly one of resourceClaimName and resourceClaimTemplateName must be set")
        out.append(ResourceClaimRef(sys.intern(name), claim, template, made.get(name, "") if template else ""))
    return tuple(out)


def _disruption(status: Mapping[str, Any], key: str = "reason") -> str:
    """Reason (``key`` ``"message"``: message) of a True ``DisruptionTarget`` pod condition (set by
    the scheduler, the Eviction API, the taint manager, the kubelet or cogate's preemption before
    they delete or stop a pod), '' without one."""
    for cp, c in mappings(status.get("conditions"), "status.conditions"):
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            if key == "message":
                return text(c.get("message"), f"{cp}.message")
            return text(c.get("reason"), f"{cp}.reason") or "DisruptionTarget"
    return ""


def _disruption_since(status: Mapping[str, Any]) -> float:
    """``lastTransitionTime`` of a True ``DisruptionTarget`` condition (epoch seconds), 0.0
    without one or when it is unreadable (never raises: the time only dates a rebuilt record)."""
    for _, c in mappings(status.get("conditions"), "status.conditions"):
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            try:
                return parse_time(c.get("lastTransitionTime"), "lastTransitionTime")
            except InvalidObject:
                return 0.0
    return 0.0


def _unplanned(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Constraints of a pod spec that the planner does not model from the spec alone: volume claims
    (kube-scheduler VolumeBinding; :func:`cogate.controller.model.volumes.resolve` replaces this entry with
    what stays unchecked once the claims and their PVs are known) and DRA ``resourceClaims``
    (DynamicResources). Hard topology spread is modelled (:mod:`cogate.controller.planning.spread`)."""
    out = []
    volumes = array(spec.get("volumes"), "spec.volumes")
    if any(isinstance(v, Mapping) and (v.get("persistentVolumeClaim") or v.get("ephemeral")) for v in volumes):
        out.append(VOLUME_CLAIMS)
    if array(spec.get("resourceClaims"), "spec.resourceClaims"):
        out.append(RESOURCE_CLAIMS)
    return tuple(out)
