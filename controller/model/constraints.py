"""The scheduling constraints kube-scheduler's Filter plugins match, as pure records with their
matching rules, and their readers from API JSON (a v1 Pod's or Node's fields).

Each matching rule is in one place, on its record:

* :meth:`Toleration.tolerates` - ``v1.Toleration.ToleratesTaint`` (k8s.io/api); TaintToleration.
* :meth:`NodeSelectorTerm.matches` - kube-scheduler NodeAffinity /
  component-helpers ``nodeaffinity`` (matchExpressions ANDed, operators In,
  NotIn, Exists, DoesNotExist, Gt, Lt; matchFields on ``metadata.name``; a term
  without requirements matches nothing).
* :meth:`LabelSelector.matches` - ``metav1.LabelSelectorAsSelector``; InterPodAffinity.
* :class:`TopologySpreadConstraint` - the defaults of PodTopologySpread (the rule itself:
  :mod:`cogate.controller.planning.spread`).
* :meth:`HostPort.conflicts` - kube-scheduler NodePorts (``0.0.0.0`` conflicts
  with every IP of the same protocol and port).

The readers (:func:`taints`, :func:`tolerations`, :func:`node_selector_terms`,
:func:`label_selector`, :func:`pod_affinity_terms`, :func:`spread_constraints`,
:func:`host_ports`) take the field's value and its path, read absent fields as empty, and raise
:class:`~cogate.controller.model.readers.InvalidObject` naming the field
(:mod:`cogate.controller.model.readers`). :mod:`cogate.controller.model.records` builds
``NodeInfo`` and ``PodInfo`` from them, and every name here is importable from there too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from cogate.controller.model.readers import integer, mapping, mappings, parse_time, string_map, text, texts



class LabelledNode(Protocol):
    """What a node selector reads of a node (``records.NodeInfo`` is one): its name and labels."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

__all__ = [
    "Taint",
    "Toleration",
    "SET_OPERATORS",
    "set_based_match",
    "NodeSelectorRequirement",
    "domain_requirements",
    "NodeSelectorTerm",
    "LabelSelectorRequirement",
    "LabelSelector",
    "PodAffinityTerm",
    "TopologySpreadConstraint",
    "HostPort",
    "taints",
    "READINESS_TAINTS",
    "readiness",
    "tolerations",
    "node_selector_terms",
    "label_selector",
    "pod_affinity_terms",
    "spread_constraints",
    "host_ports",
]


# -- taints and tolerations ----------------------------------------------------


@dataclass(frozen=True)
class Taint:
    """A node taint. ``effect`` is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        kv = f"{self.key}={self.value}" if self.value else self.key
        return f"{kv}:{self.effect}" if self.effect else kv


@dataclass(frozen=True)
class Toleration:
    """A pod toleration (``operator`` Equal, the default, or Exists). ``seconds``:
    ``tolerationSeconds``, how long a matching NoExecute taint is tolerated once added (None:
    for ever; 0 or less: not at all); scheduling ignores it, the taint eviction controller reads it
    (:func:`cogate.controller.status.lifecycle.eviction_grace`)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """``v1.Toleration.ToleratesTaint``: an empty effect matches every effect,
        an empty key (with Exists) every key; Equal compares values."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        if self.operator == "Exists":
            return True
        return False


# -- node selection ------------------------------------------------------------


SET_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def set_based_match(operator: str, key: str, values: Sequence[str], labels: Mapping[str, str]) -> bool:
    """One set-based requirement against a label map (``metav1.LabelSelectorRequirement``
    and ``NodeSelectorRequirement`` semantics): In, NotIn (true when the key is absent),
    Exists, DoesNotExist; any other operator matches nothing."""
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False


@dataclass(frozen=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Evaluate against a label map (or ``{"metadata.name": name}`` for fields)."""
        op = self.operator
        present = self.key in labels
        if op in SET_OPERATORS:
            return set_based_match(op, self.key, self.values, labels)
        if op in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            try:
                have = int(labels[self.key])
                want = int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False  # unknown operator: the term is invalid and matches nothing

    def api(self) -> dict[str, Any]:
        """The requirement as API JSON (``values`` left out when empty, as ``Exists`` and
        ``DoesNotExist`` require: the API server refuses values there)."""
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


def domain_requirements(domain: Iterable[tuple[str, str | None]]) -> tuple[NodeSelectorRequirement, ...]:
    """The requirements that keep a pod inside a topology domain: per ``(label, value)``
    ``label In [value]``, or ``label Exists`` when any value goes (``value`` None). One rule for the
    planner's fences (:mod:`cogate.controller.planning.fences`) and the ProvisioningRequests
    confined to a domain (:mod:`cogate.controller.provisioning.confine`)."""
    return tuple(NodeSelectorRequirement(k, "In", (v,)) if v is not None else NodeSelectorRequirement(k, "Exists")
                 for k, v in domain)


@dataclass(frozen=True)
class NodeSelectorTerm:
    """One ``nodeSelectorTerms`` entry; requirements are ANDed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node: LabelledNode) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches no objects
        for r in self.match_expressions:
            if not r.matches(node.labels):
                return False
        for r in self.match_fields:
            # only metadata.name is a supported field, with In / NotIn
            if r.key != "metadata.name" or r.operator not in ("In", "NotIn"):
                return False
            if not r.matches({"metadata.name": node.name}):
                return False
        return True


# -- pod (anti-)affinity -------------------------------------------------------


@dataclass(frozen=True)
class LabelSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class LabelSelector:
    """``metav1.LabelSelector``; an empty selector matches every label set."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        return all(set_based_match(r.operator, r.key, r.values, labels) for r in self.match_expressions)


@dataclass(frozen=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term.

    ``label_selector`` None matches no pod. ``namespaces`` empty and
    ``namespace_selector`` None mean the owning pod's namespace; an empty
    ``namespace_selector`` means all namespaces. A non-empty namespace
    selector cannot be evaluated without Namespace objects: callers treat it
    conservatively (see planner).
    """

    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True)
class TopologySpreadConstraint:
    """A ``topologySpreadConstraints`` entry with ``whenUnsatisfiable: DoNotSchedule``
    (``ScheduleAnyway`` entries only score and are not kept).

    Defaults as kube-scheduler's ``filterTopologySpreadConstraints``
    (pkg/scheduler/framework/plugins/podtopologyspread/common.go): ``min_domains`` 1,
    ``node_affinity_policy`` Honor, ``node_taints_policy`` Ignore. ``label_selector`` None
    matches no pod (``LabelSelectorAsSelector(nil)`` is Nothing). ``match_label_keys`` are
    merged into the selector with the incoming pod's values (:mod:`cogate.controller.planning.spread`).
    """

    max_skew: int
    topology_key: str
    label_selector: LabelSelector | None = None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostPort:
    """A host port a container binds (``hostIP`` '' is stored as ``0.0.0.0``)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"

    def conflicts(self, other: "HostPort") -> bool:
        """kube-scheduler NodePorts: same protocol and port, and same IP or either is 0.0.0.0."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.host_ip == other.host_ip or "0.0.0.0" in (self.host_ip, other.host_ip)

    def __str__(self) -> str:
        ip = "" if self.host_ip == "0.0.0.0" else f"{self.host_ip}:"
        return f"{ip}{self.port}/{self.protocol}"


# -- readers from API JSON -------------------------------------------------------

_R = TypeVar("_R", NodeSelectorRequirement, LabelSelectorRequirement)


def _requirement(cls: type[_R], r: Mapping[str, Any], rp: str) -> _R:
    """A ``key``/``operator``/``values`` requirement (node or label selector) at ``rp``."""
    return cls(key=text(r.get("key"), f"{rp}.key"), operator=text(r.get("operator"), f"{rp}.operator"),
               values=texts(r.get("values"), f"{rp}.values"))


def taints(v: Any, path: str) -> tuple[Taint, ...]:
    """A node's ``spec.taints`` (at ``path``)."""
    return tuple(
        Taint(key=text(t.get("key"), f"{tp}.key"), value=text(t.get("value"), f"{tp}.value"),
              effect=text(t.get("effect"), f"{tp}.effect"))
        for tp, t in mappings(v, path)
    )


#: The taints the node lifecycle controller of kube-controller-manager puts on a node whose
#: ``Ready`` condition is False (``not-ready``) or Unknown (``unreachable``: its kubelet's lease was
#: not renewed for ``--node-monitor-grace-period``, 50 s by default), with effects NoSchedule and
#: NoExecute; both go once the node is Ready again.
READINESS_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def readiness(conditions: Any, raw_taints: Any) -> tuple[bool, float]:
    """``(ready, since)`` of a node from its ``status.conditions`` and ``spec.taints`` (API JSON).

    ``ready``: a ``Ready`` condition of status ``True`` (NotReady, Unknown and a missing condition
    are not ready). ``since``: the earliest ``timeAdded`` of its NoExecute :data:`READINESS_TAINTS`
    (epoch seconds; 0.0 without one): when the node lifecycle controller saw the node not Ready and
    the start of the clock by which the taint eviction controller counts bound pods'
    ``tolerationSeconds`` (k8s.io/kubernetes pkg/controller/tainteviction; no such taint, no clock).
    The ``Ready`` condition's ``lastTransitionTime`` is not used: a partial update of the condition
    (a merge patch of its status) keeps an old one. Raises
    :class:`~cogate.controller.model.readers.InvalidObject` naming a bad ``timeAdded``."""
    ready = False
    for _, c in mappings(conditions, "status.conditions"):
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
    added = [parse_time(t.get("timeAdded"), f"{tp}.timeAdded") for tp, t in mappings(raw_taints, "spec.taints")
             if t.get("key") in READINESS_TAINTS and t.get("effect") == "NoExecute"]
    return ready, min((a for a in added if a > 0), default=0.0)


def tolerations(v: Any, path: str) -> tuple[Toleration, ...]:
    """A pod's ``spec.tolerations`` (at ``path``; ``operator`` defaults to Equal; ``tolerationSeconds``
    an integer or absent), one shared tuple per distinct value (the sharing of equal values:
    :mod:`cogate.controller.model.records`)."""
    return _shared_tolerations(tuple(
        (
            text(t.get("key"), f"{tp}.key"),
            text(t.get("operator"), f"{tp}.operator") or "Equal",
            text(t.get("value"), f"{tp}.value"),
            text(t.get("effect"), f"{tp}.effect"),
            integer(t.get("tolerationSeconds"), f"{tp}.tolerationSeconds", None),
        )
        for tp, t in mappings(v, path)
    ))


@functools.lru_cache(maxsize=2048)
def _shared_tolerations(items: tuple[tuple[str, str, str, str, int | None], ...]) -> tuple[Toleration, ...]:
    return tuple(Toleration(*t) for t in items)


def node_selector_terms(v: Any, path: str) -> tuple[NodeSelectorTerm, ...]:
    """A ``nodeSelectorTerms`` list (at ``path``): ``matchExpressions`` and ``matchFields`` of each."""
    terms = []
    for tp, t in mappings(v, path):
        exprs = [tuple(_requirement(NodeSelectorRequirement, r, rp) for rp, r in mappings(t.get(kind), f"{tp}.{kind}"))
                 for kind in ("matchExpressions", "matchFields")]
        terms.append(NodeSelectorTerm(match_expressions=exprs[0], match_fields=exprs[1]))
    return tuple(terms)


def label_selector(v: Any, path: str) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` (API JSON) at ``path``: None when null; ``InvalidObject`` naming
    the field on garbage (also for other modules' converters, e.g. PodDisruptionBudgets)."""
    if v is None:
        return None
    m = mapping(v, path)
    ml = string_map(m.get("matchLabels"), f"{path}.matchLabels")
    exprs = tuple(_requirement(LabelSelectorRequirement, r, rp)
                  for rp, r in mappings(m.get("matchExpressions"), f"{path}.matchExpressions"))
    return LabelSelector(match_labels=tuple(sorted(ml.items())), match_expressions=exprs)


def pod_affinity_terms(v: Any, path: str) -> tuple[PodAffinityTerm, ...]:
    """A ``requiredDuringSchedulingIgnoredDuringExecution`` list of pod (anti-)affinity terms."""
    return tuple(
        PodAffinityTerm(
            topology_key=text(t.get("topologyKey"), f"{tp}.topologyKey"),
            label_selector=label_selector(t.get("labelSelector"), f"{tp}.labelSelector"),
            namespaces=texts(t.get("namespaces"), f"{tp}.namespaces"),
            namespace_selector=label_selector(t.get("namespaceSelector"), f"{tp}.namespaceSelector"),
        )
        for tp, t in mappings(v, path)
    )


def spread_constraints(v: Any, path: str) -> tuple[TopologySpreadConstraint, ...]:
    """The ``DoNotSchedule`` entries of ``topologySpreadConstraints`` (the only ones kube-scheduler's
    PodTopologySpread Filter uses; a missing ``whenUnsatisfiable`` is not defaulted here, as the API
    server requires it). An absent ``maxSkew`` reads as 1 (an explicit null is kept as None)."""
    out = []
    for cp, c in mappings(v, path):
        if text(c.get("whenUnsatisfiable"), f"{cp}.whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        skew = integer(c.get("maxSkew", 1), f"{cp}.maxSkew", None)
        min_domains = integer(c.get("minDomains"), f"{cp}.minDomains", 1)
        out.append(TopologySpreadConstraint(
            max_skew=skew,  # type: ignore[arg-type]
            topology_key=text(c.get("topologyKey"), f"{cp}.topologyKey"),
            label_selector=label_selector(c.get("labelSelector"), f"{cp}.labelSelector"),
            min_domains=min_domains,
            node_affinity_policy=text(c.get("nodeAffinityPolicy"), f"{cp}.nodeAffinityPolicy") or "Honor",
            node_taints_policy=text(c.get("nodeTaintsPolicy"), f"{cp}.nodeTaintsPolicy") or "Ignore",
            match_label_keys=texts(c.get("matchLabelKeys"), f"{cp}.matchLabelKeys"),
        ))
    return tuple(out)


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Host ports of a pod spec's containers and init containers (sidecars hold theirs while
    running; counting plain init containers too only makes the planner stricter)."""
    out: list[HostPort] = []
    for kind in ("initContainers", "containers"):
        for cp, c in mappings(spec.get(kind), f"spec.{kind}"):
            for pp, p in mappings(c.get("ports"), f"{cp}.ports"):
                hp = p.get("hostPort")
                if hp in (None, 0):
                    continue
                out.append(
                    HostPort(
                        port=integer(hp, f"{pp}.hostPort"),
                        protocol=text(p.get("protocol"), f"{pp}.protocol") or "TCP",
                        host_ip=text(p.get("hostIP"), f"{pp}.hostIP") or "0.0.0.0",
                    )
                )
    return tuple(out)
