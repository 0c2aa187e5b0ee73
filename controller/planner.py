"""Gang admission planner (pure): which PodGroups may lose their scheduling gate now.

``decide`` takes a snapshot (nodes, bound pods, groups, reservations, clock) and
returns one :class:`GroupVerdict` per group plus the reservations to keep. It does
no I/O and is deterministic for a given input.

Capacity model (kube-scheduler's filters, applied node by node, never to cluster
totals):

* NodeResourcesFit: a member fits a node when, for every resource it requests
  (``pods`` = 1 included), ``request <= allocatable - requests of bound
  non-terminal pods - reservations - members planned earlier in this decision``.
  Resources the member does not request never block (the scheduler skips zero
  requests), a node without a resource in allocatable has 0 of it.
* NodeUnschedulable: a cordoned node only with a toleration of
  ``node.kubernetes.io/unschedulable:NoSchedule``; nodes that are not Ready are
  excluded (stricter than the scheduler, which relies on the not-ready taint).
* TaintToleration: NoSchedule and NoExecute taints must be tolerated;
  PreferNoSchedule never blocks.
* NodeAffinity: ``nodeSelector`` and required node affinity
  (:meth:`cogate.controller.model.NodeSelectorTerm.matches`).
* NodePorts: a host port may not conflict with ports used on the node (bound
  pods, reservations, members planned earlier).
* InterPodAffinity, required anti-affinity: evaluated for any topology key
  against bound pods, reserved pods and planned members, in both directions
  (the member's terms and the terms of pods already there). A node without the
  topology label is not in any domain, except ``kubernetes.io/hostname``, which
  falls back to the node name (stricter). A term with a non-empty
  ``namespaceSelector`` (Namespace labels are not known here) is taken to match
  pods of every namespace (stricter).
* InterPodAffinity, required affinity: satisfied only by pods already bound
  (planned, unbound members never count; the "first pod matches its own term"
  exception is not used). A group whose members' pod affinity no node
  satisfies gets ``Unschedulable``. Both choices can only make the planner say
  "does not fit" where the scheduler might succeed, never the reverse.

Packing is a heuristic (identical member specs are placed as a batch, the most
constrained spec first, each onto the tightest nodes first; when a group has
more gated members than it needs, a smallest-first pass is tried too). It may
miss a placement that exists, but every placement it returns is valid against
the rules above, so it never releases a group that cannot be placed.

Order, backfill and starvation:

* Released groups (``GroupRequest.released``: a release that still stands, see
  :func:`cogate.controller.status.release_stands`) are handled first: their new
  gated members (replacements, Job pods) are ungated unconditionally. Each gets
  its planned node, or ``''`` when the planner has no room for it; planned ones
  get a reservation. The shell stops passing ``released=True`` once the group
  timed out or failed, so members that come back gated then are planned as a
  gang again.
* Other groups follow by priority (highest member ``spec.priority``) descending,
  then ``created`` (oldest first), then namespace/name.
* A group that cannot be placed even on the empty eligible nodes (bound pods
  and reservations ignored) is ``ExceedsClusterCapacity``; ``Unschedulable``
  and ``WaitingForMembers`` groups are skipped the same way: none blocks others.
* A group that fits the empty cluster but not the current one does not block
  later groups (backfill) until it has waited ``starvation_seconds`` since it
  became complete (``max(created, created of its minMember-th oldest
  member)``). From then on it is *starving* and **no later (unreleased) group
  is released** while it waits: the simplest policy that guarantees no later
  group takes room it needs (holding only the currently free room would let
  later groups take fragments the starving group needs as more room frees).
  Only the first starving group in order blocks; released groups' new members
  are not blocked.

Reservations: room of members released by an earlier decision stays reserved
until the pod is bound (it appears bound in ``pods`` and is counted there), is
deleted (its uid is no longer a member of any given group nor a bound pod; so
pass every group to ``decide``), becomes terminal, or ``expires`` passes
(``now + reservation_ttl_seconds`` at release). A reservation whose pod is still
gated in a group that is not released is dropped: that release never took
effect and is planned afresh. A gated member of a released group that still has
a reservation is ungated again towards its reserved node.

Membership accounting for a group:

* present = live members not in phase Failed; fewer than ``min_member`` ->
  ``WaitingForMembers``; so is a group whose bound + plannable members are
  fewer than ``min_member`` because others are held by other scheduling gates
  (or pending ungated without a node: the scheduler is already on them).
* bound = members bound to a node (not Failed) or Succeeded.
* gated = unbound members carrying our gate. Only those whose *only* gate is
  ours are planned; members that also carry other gates are ungated on release
  (node ``''``) but do not count, and members gated only by other gates are not
  ours (neither placed nor bound).
* ``fits = bound + planned gated``; ``Released`` iff ``fits >= min_member``;
  then every gated member is in ``release`` (``''`` for those not planned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cogate.api import DEFAULT_GATE_NAME
from cogate.controller.model import (
    HOSTNAME_LABEL,
    UNSCHEDULABLE_TAINT_KEY,
    HostPort,
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
    Reservation,
    Taint,
)
from cogate.controller.resources import format_quantity, format_resources

__all__ = [
    "GroupRequest",
    "PlannerConfig",
    "GroupVerdict",
    "Decision",
    "decide",
    "mixed_priorities",
    "group_priority",
    "complete_since",
    "Outcome",
]


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
    ``created``: PodGroup creationTimestamp (epoch seconds).
    """

    namespace: str
    name: str
    min_member: int
    created: float
    released: bool
    members: tuple[PodInfo, ...]


@dataclass(frozen=True)
class PlannerConfig:
    """``starvation_seconds`` and ``reservation_ttl_seconds`` in seconds."""

    gate_name: str = DEFAULT_GATE_NAME
    starvation_seconds: float = 300.0
    reservation_ttl_seconds: float = 60.0


@dataclass(frozen=True)
class GroupVerdict:
    """Outcome for one group; ``release`` maps pod uid -> planned node ('' = none)."""

    namespace: str
    name: str
    outcome: Outcome
    release: Mapping[str, str]
    fits: int
    message: str


@dataclass(frozen=True)
class Decision:
    verdicts: tuple[GroupVerdict, ...]
    reservations: tuple[Reservation, ...]


# -- small public helpers ---------------------------------------------------------


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


# -- internals -------------------------------------------------------------------------


def _dom(node: NodeInfo, key: str) -> str | None:
    v = node.labels.get(key)
    if v is None and key == HOSTNAME_LABEL:
        return "\x00node:" + node.name
    return v


def _term_namespaces_match(term: PodAffinityTerm, owner_ns: str, ns: str, *, anti: bool) -> bool:
    if term.namespace_selector is not None:
        sel = term.namespace_selector
        if not sel.match_labels and not sel.match_expressions:
            return True  # {} selects every namespace
        if anti:
            return True  # unknown namespace labels: assume it matches (stricter)
        return ns in term.namespaces
    return ns in (term.namespaces or (owner_ns,))


def _term_matches(term: PodAffinityTerm, owner_ns: str, pod: PodInfo, *, anti: bool) -> bool:
    if term.label_selector is None:
        return False
    if not _term_namespaces_match(term, owner_ns, pod.namespace, anti=anti):
        return False
    return term.label_selector.matches(pod.labels)


def _blocking_taint(node: NodeInfo, pod: PodInfo) -> Taint | None:
    for t in node.taints:
        if t.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tol.tolerates(t) for tol in pod.tolerations):
            return t
    return None


def _static_reason(node: NodeInfo, pod: PodInfo) -> str | None:
    """Why ``node`` can never take ``pod`` regardless of load, or None."""
    if not node.ready:
        return "not Ready"
    if node.unschedulable:
        cordon = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
        if not any(tol.tolerates(cordon) for tol in pod.tolerations):
            return "unschedulable (cordoned)"
    t = _blocking_taint(node, pod)
    if t is not None:
        kv = f"{t.key}={t.value}" if t.value else t.key
        return f"taint {kv}"
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return "nodeSelector"
    if pod.required_node_affinity and not any(term.matches(node) for term in pod.required_node_affinity):
        return "node affinity"
    return None


def _req_with_pod(requests: Mapping[str, int]) -> dict[str, int]:
    """A pod's effective requests plus the one ``pods`` slot it takes (NodeResourcesFit)."""
    r = {k: v for k, v in requests.items() if v > 0 and k != "pods"}
    r["pods"] = 1
    return r


def _items_key(m: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(m.items()))


class _Spec:
    """Members that the filters cannot tell apart share one _Spec (and its caches)."""

    __slots__ = ("pod", "req", "req_items", "ports", "eligible", "reasons", "forbidden", "affinity_unmet", "size")

    def __init__(self, pod: PodInfo, req: dict[str, int]) -> None:
        self.pod = pod
        self.req = req
        self.req_items = tuple(sorted(req.items()))
        self.ports = pod.host_ports
        self.eligible: list[int] = []
        self.reasons: dict[str, int] = {}
        self.forbidden: dict[str, set[str]] = {}
        self.affinity_unmet = 0  # nodes that pass static filters but not pod affinity
        self.size = 0.0


class _State:
    """Free room per node with an undo log, for one decision (or the empty cluster)."""

    def __init__(
        self,
        nodes: Sequence[NodeInfo],
        static_cache: dict[tuple[Any, ...], tuple[list[int], dict[str, int]]],
        anti_active: bool,
        empty: bool,
    ) -> None:
        self.nodes = nodes
        self.empty = empty
        self.free: list[dict[str, int]] = [dict(n.allocatable) for n in nodes]
        self.ports: list[list[HostPort]] = [[] for _ in nodes]
        self.placed: list[tuple[PodInfo, int]] = []  # only tracked when anti-affinity is in play
        self.bound_pods: list[tuple[PodInfo, int]] = []  # for pod affinity
        self.anti_active = anti_active
        self.static_cache = static_cache
        self.specs: dict[tuple[Any, ...], _Spec] = {}
        self.log: list[tuple[Any, ...]] = []
        self._dom_cache: dict[str, list[str | None]] = {}
        maxalloc: dict[str, int] = {}
        for n in nodes:
            for k, v in n.allocatable.items():
                if v > maxalloc.get(k, 0):
                    maxalloc[k] = v
        self.maxalloc = maxalloc

    # -- domains
    def dom(self, key: str, i: int) -> str | None:
        col = self._dom_cache.get(key)
        if col is None:
            col = [_dom(n, key) for n in self.nodes]
            self._dom_cache[key] = col
        return col[i]

    # -- accounting
    def occupy(self, pod: PodInfo | None, req: Mapping[str, int], ports: Sequence[HostPort], i: int) -> None:
        f = self.free[i]
        for k, v in req.items():
            f[k] = f.get(k, 0) - v
        self.ports[i].extend(ports)
        self.log.append(("occupy", i, req, len(ports)))
        if self.anti_active and pod is not None:
            self.placed.append((pod, i))
            self.log.append(("placed",))
            for spec in self.specs.values():
                self._forbid_for(spec, pod, i)

    def mark(self) -> int:
        return len(self.log)

    def rollback(self, mark: int) -> None:
        while len(self.log) > mark:
            e = self.log.pop()
            if e[0] == "occupy":
                _, i, req, nports = e
                f = self.free[i]
                for k, v in req.items():
                    f[k] = f.get(k, 0) + v
                if nports:
                    del self.ports[i][-nports:]
            elif e[0] == "placed":
                self.placed.pop()
            elif e[0] == "forbid":
                _, spec, key, d = e
                spec.forbidden[key].discard(d)

    def commit(self) -> None:
        self.log.clear()

    def _add_forbidden(self, spec: _Spec, key: str, d: str | None) -> None:
        if d is None:
            return
        s = spec.forbidden.setdefault(key, set())
        if d not in s:
            s.add(d)
            self.log.append(("forbid", spec, key, d))

    def _forbid_for(self, spec: _Spec, other: PodInfo, i: int) -> None:
        """``other`` now sits on node i: forbid domains for ``spec`` per anti-affinity."""
        me = spec.pod
        for term in me.required_pod_anti_affinity:
            if _term_matches(term, me.namespace, other, anti=True):
                self._add_forbidden(spec, term.topology_key, self.dom(term.topology_key, i))
        for term in other.required_pod_anti_affinity:
            if _term_matches(term, other.namespace, me, anti=True):
                self._add_forbidden(spec, term.topology_key, self.dom(term.topology_key, i))

    # -- specs
    def spec_for(self, pod: PodInfo) -> _Spec:
        static_key = (
            _items_key(pod.node_selector),
            pod.required_node_affinity,
            pod.tolerations,
        )
        key = (
            static_key,
            _items_key(pod.requests),
            pod.host_ports,
            pod.namespace,
            pod.required_pod_anti_affinity,
            pod.required_pod_affinity,
            _items_key(pod.labels) if self.anti_active else (),
        )
        spec = self.specs.get(key)
        if spec is not None:
            return spec
        spec = _Spec(pod, _req_with_pod(pod.requests))
        cached = self.static_cache.get(static_key)
        if cached is None:
            eligible: list[int] = []
            reasons: dict[str, int] = {}
            for i, n in enumerate(self.nodes):
                r = _static_reason(n, pod)
                if r is None:
                    eligible.append(i)
                else:
                    reasons[r] = reasons.get(r, 0) + 1
            cached = (eligible, reasons)
            self.static_cache[static_key] = cached
        eligible, reasons = cached
        spec.reasons = dict(reasons)
        if pod.required_pod_affinity and not self.empty:
            kept = [i for i in eligible if self._affinity_ok(pod, i)]
            spec.affinity_unmet = len(eligible) - len(kept)
            eligible = kept
        spec.eligible = list(eligible)
        spec.size = max(
            (v / self.maxalloc[k] if self.maxalloc.get(k) else float("inf") for k, v in spec.req.items()),
            default=0.0,
        )
        if self.anti_active:
            for other, i in self.placed:
                self._forbid_for(spec, other, i)
        self.specs[key] = spec
        return spec

    def _affinity_ok(self, pod: PodInfo, i: int) -> bool:
        for term in pod.required_pod_affinity:
            d = self.dom(term.topology_key, i)
            if d is None:
                return False
            if not any(
                self.dom(term.topology_key, j) == d and _term_matches(term, pod.namespace, other, anti=False)
                for other, j in self.bound_pods
            ):
                return False
        return True

    # -- fit
    def fits(self, spec: _Spec, i: int) -> bool:
        f = self.free[i]
        for k, v in spec.req_items:
            if f.get(k, 0) < v:
                return False
        if spec.ports:
            used = self.ports[i]
            for p in spec.ports:
                for q in used:
                    if p.conflicts(q):
                        return False
        if spec.forbidden:
            for key, doms in spec.forbidden.items():
                if doms:
                    d = self.dom(key, i)
                    if d is not None and d in doms:
                        return False
        return True

    def copies(self, spec: _Spec, i: int) -> int:
        f = self.free[i]
        n = 1 << 62
        for k, v in spec.req_items:
            c = f.get(k, 0) // v
            if c < n:
                n = c
        return n

    def place_batch(self, spec: _Spec, members: Sequence[PodInfo], out: dict[str, int]) -> None:
        """Place as many of ``members`` (same spec) as possible, tightest nodes first."""
        if not members:
            return
        order = []
        for i in spec.eligible:
            c = self.copies(spec, i)
            if c > 0:
                order.append((c, self.nodes[i].name, i))
        order.sort()
        k = 0
        for _, _, i in order:
            while k < len(members) and self.fits(spec, i):
                m = members[k]
                self.occupy(m, spec.req, spec.ports, i)
                out[m.uid] = i
                k += 1
            if k >= len(members):
                break


@dataclass
class _Members:
    present: list[PodInfo] = field(default_factory=list)
    bound: list[PodInfo] = field(default_factory=list)
    gated: list[PodInfo] = field(default_factory=list)  # carry our gate, unbound
    plannable: list[PodInfo] = field(default_factory=list)  # our gate is the only gate


def _classify(group: GroupRequest, gate: str) -> _Members:
    r = _Members()
    for m in sorted(group.members, key=lambda p: (p.created, p.name, p.uid)):
        if m.phase != "Failed":
            r.present.append(m)
        if (m.bound and m.phase != "Failed") or m.phase == "Succeeded":
            r.bound.append(m)
        elif m.gated_by(gate) and not m.bound and not m.terminal:
            r.gated.append(m)
            if all(g == gate for g in m.gates):
                r.plannable.append(m)
    return r


def _plan(state: _State, members: Sequence[PodInfo], needed: int) -> dict[str, int]:
    """Plan ``members`` on ``state`` (left applied). Returns uid -> node index."""
    by_spec: dict[int, tuple[_Spec, list[PodInfo]]] = {}
    for m in members:
        s = state.spec_for(m)
        by_spec.setdefault(id(s), (s, []))[1].append(m)
    groups = list(by_spec.values())
    strategies = [lambda g: (len(g[0].eligible), -g[0].size, g[1][0].name)]
    if len(members) > needed:
        strategies.append(lambda g: (g[0].size, len(g[0].eligible), g[1][0].name))
    mark = state.mark()
    best: dict[str, int] | None = None
    for strategy in strategies:
        out: dict[str, int] = {}
        for spec, ms in sorted(groups, key=strategy):
            state.place_batch(spec, ms, out)
        if len(out) >= needed:
            return out
        if best is None or len(out) > len(best):
            best = out
        state.rollback(mark)
    # leave the best attempt applied so the caller can explain the shortfall
    return _replay(state, groups, best or {})


def _replay(state: _State, groups: list[tuple[_Spec, list[PodInfo]]], plan: dict[str, int]) -> dict[str, int]:
    for spec, ms in groups:
        for m in ms:
            i = plan.get(m.uid)
            if i is not None:
                state.occupy(m, spec.req, spec.ports, i)
    return plan


#: How many pod names a waiting message lists before "and N more".
NAMES_SHOWN = 3


def _names(names: Sequence[str], limit: int = NAMES_SHOWN) -> str:
    """``"a, b, c and 2 more"``: the first ``limit`` names of a message."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def held_by_other_gates(members: Sequence[PodInfo], gate: str) -> str:
    """Message part naming the first members held by scheduling gates other than ``gate``:
    ``"2 held by other scheduling gates (w-1: example.com/quota, w-2: example.com/quota)"``;
    ``""`` when none is."""
    held = [m for m in members if not m.bound and not m.terminal and any(g != gate for g in m.gates)]
    if not held:
        return ""
    names = [f"{m.name}: {', '.join(g for g in m.gates if g != gate)}" for m in held]
    return f"{len(held)} held by other scheduling gates ({_names(names)})"


def _terminating(state: _State, eligible: set[int]) -> str:
    """Message part naming pods being deleted on ``eligible`` nodes: kube-scheduler (and the
    planner) count their requests until they are gone, so the room they hold frees soon."""
    pods = sorted((p.name for p, i in state.bound_pods if p.deleting and i in eligible))
    if not pods:
        return ""
    noun = "pod" if len(pods) == 1 else "pods"
    return (f"{len(pods)} {noun} terminating on eligible nodes ({_names(pods)}) still "
            f"hold{'s' if len(pods) == 1 else ''} room until gone")


def _shortfall(state: _State, unplaced: Sequence[PodInfo], missing: int) -> str:
    """Explain why ``missing`` more of ``unplaced`` do not fit on ``state``."""
    if missing <= 0:
        return ""
    if len(unplaced) < missing:
        return f"only {len(unplaced)} more gated members can be planned (others carry other scheduling gates)"
    specs = [state.spec_for(m) for m in unplaced]
    pairs = sorted(zip(specs, unplaced), key=lambda sp: (sp[0].size, sp[1].name))[:missing]
    demand: dict[str, int] = {}
    for s, _ in pairs:
        for k, v in s.req.items():
            demand[k] = demand.get(k, 0) + v
    eligible: set[int] = set()
    for s, _ in pairs:
        eligible.update(s.eligible)
    supply: dict[str, int] = {}
    for i in eligible:
        f = state.free[i]
        for k in demand:
            v = f.get(k, 0)
            if v > 0:
                supply[k] = supply.get(k, 0) + v
    parts: list[str] = []
    short = {k: demand[k] - supply.get(k, 0) for k in sorted(demand) if demand[k] > supply.get(k, 0)}
    if not eligible:
        parts.append("no eligible node")
    elif short:
        # Totals alone would hide fragmentation: also say what one node has and one member needs.
        s0 = pairs[0][0]
        texts = []
        for k, v in short.items():
            most = max((state.free[i].get(k, 0) for i in eligible), default=0)
            texts.append(f"{k} short by {format_quantity(k, v)} on eligible nodes (at most "
                         f"{format_quantity(k, max(most, 0))} free on one node, a member requests "
                         f"{format_quantity(k, s0.req.get(k, 0))})")
        parts.append(", ".join(texts))
    else:
        s0 = pairs[0][0]
        parts.append(f"no eligible node has room for a member requesting {format_resources(s0.req)}")
    if eligible and (terminating := _terminating(state, eligible)):
        parts.append(terminating)
    reasons: dict[str, int] = {}
    for s, _ in pairs:
        for r, c in s.reasons.items():
            reasons[r] = max(reasons.get(r, 0), c)
        if s.affinity_unmet:
            reasons["pod affinity"] = max(reasons.get("pod affinity", 0), s.affinity_unmet)
        dyn: dict[str, int] = {}
        for i in s.eligible:
            if s.forbidden and any(
                state.dom(k, i) is not None and state.dom(k, i) in d for k, d in s.forbidden.items()
            ):
                dyn["pod anti-affinity"] = dyn.get("pod anti-affinity", 0) + 1
            elif s.ports and any(p.conflicts(q) for p in s.ports for q in state.ports[i]):
                dyn["host port in use"] = dyn.get("host port in use", 0) + 1
        for r, c in dyn.items():
            reasons[r] = max(reasons.get(r, 0), c)
    for r in sorted(reasons, key=lambda r: (-reasons[r], r)):
        c = reasons[r]
        parts.append(f"{c} node{'s' if c != 1 else ''} excluded by {r}")
    return "; ".join(parts)


# -- decide -----------------------------------------------------------------------------


def decide(
    nodes: Sequence[NodeInfo],
    pods: Sequence[PodInfo],
    groups: Sequence[GroupRequest],
    reservations: Sequence[Reservation],
    now: float,
    config: PlannerConfig = PlannerConfig(),
) -> Decision:
    """Plan every group against one shrinking copy of the free room.

    ``nodes``: all nodes. ``pods``: every non-terminal pod bound to a node
    (members included; unbound or terminal entries are ignored). ``groups``:
    every PodGroup with its live members. ``reservations``: the previous
    decision's reservations. ``now``: epoch seconds.

    Returns verdicts in the order ``groups`` were given and the reservations to
    keep (pruned, plus one per member planned in this decision). Rules: see the
    module docstring. Never raises on well-typed records.
    """
    gate = config.gate_name
    index = {n.name: i for i, n in enumerate(nodes)}
    member_of: dict[str, tuple[PodInfo, GroupRequest]] = {}
    for g in groups:
        for m in g.members:
            member_of[m.uid] = (m, g)
    bound_pods = [p for p in pods if p.bound and not p.terminal and p.node_name in index]
    bound_uids = {p.uid for p in pods if p.bound}

    # prune reservations
    kept: list[Reservation] = []
    for r in reservations:
        if r.expires <= now or r.pod_uid in bound_uids:
            continue
        mg = member_of.get(r.pod_uid)
        if mg is None:
            continue
        m, g = mg
        if m.bound or m.terminal:
            continue
        if m.gated_by(gate) and not g.released:
            continue
        kept.append(r)
    reserved_uid = {r.pod_uid: r for r in kept}

    anti_active = any(p.required_pod_anti_affinity for p in bound_pods) or any(
        m.required_pod_anti_affinity for g in groups for m in g.members
    )
    static_cache: dict[tuple[Any, ...], tuple[list[int], dict[str, int]]] = {}
    state = _State(nodes, static_cache, anti_active, empty=False)
    state.bound_pods = [(p, index[p.node_name]) for p in bound_pods]
    for p, i in state.bound_pods:
        # hot path (every bound pod): subtract directly, no undo entry needed
        f = state.free[i]
        for k, v in _req_with_pod(p.requests).items():
            f[k] = f.get(k, 0) - v
        if p.host_ports:
            state.ports[i].extend(p.host_ports)
        if anti_active:
            state.placed.append((p, i))
    for r in kept:
        i = index.get(r.node_name)
        if i is None:
            continue
        known = member_of.get(r.pod_uid)
        state.occupy(known[0] if known else None, _req_with_pod(r.requests), r.host_ports, i)
    state.commit()

    empty_state: _State | None = None

    def fits_empty(ms: _Members, g: GroupRequest) -> tuple[bool, str]:
        nonlocal empty_state
        if empty_state is None:
            empty_state = _State(nodes, static_cache, anti_active, empty=True)
        mark = empty_state.mark()
        needed = g.min_member - len(ms.bound)
        # every bound member would sit somewhere in the empty cluster too; count it as placed
        plan = _plan(empty_state, ms.plannable, needed)
        msg = ""
        ok = len(plan) >= needed
        if not ok:
            unplaced = [m for m in ms.plannable if m.uid not in plan]
            msg = f"fits {len(ms.bound) + len(plan)} of {g.min_member} even with every eligible node empty: " + _shortfall(
                empty_state, unplaced, needed - len(plan)
            )
        empty_state.rollback(mark)
        return ok, msg

    verdicts: dict[int, GroupVerdict] = {}
    new_res: list[Reservation] = []

    def reserve(m: PodInfo, i: int) -> None:
        new_res.append(
            Reservation(
                pod_uid=m.uid,
                namespace=m.namespace,
                name=m.name,
                node_name=nodes[i].name,
                requests=dict(m.requests),
                host_ports=m.host_ports,
                expires=now + config.reservation_ttl_seconds,
            )
        )

    def order_key(pair: tuple[int, GroupRequest]) -> tuple[Any, ...]:
        _, g = pair
        return (-group_priority(g), g.created, g.namespace, g.name)

    ordered = sorted(enumerate(groups), key=order_key)

    # 1. released groups: ungate new members
    for gi, g in ordered:
        if not g.released:
            continue
        ms = _classify(g, gate)
        release: dict[str, str] = {}
        to_plan = []
        plannable_uids = {m.uid for m in ms.plannable}
        for m in ms.gated:
            r = reserved_uid.get(m.uid)
            if r is not None:
                release[m.uid] = r.node_name
            elif m.uid in plannable_uids:
                to_plan.append(m)
            else:
                release[m.uid] = ""
        plan = _plan(state, to_plan, len(to_plan)) if to_plan else {}
        state.commit()
        for m in to_plan:
            i = plan.get(m.uid)
            release[m.uid] = nodes[i].name if i is not None else ""
            if i is not None:
                reserve(m, i)
        planned = sum(1 for v in release.values() if v)
        verdicts[gi] = GroupVerdict(
            g.namespace,
            g.name,
            Outcome.ALREADY_RELEASED,
            release,
            len(ms.bound) + planned,
            f"released; ungating {len(release)} new member{'s' if len(release) != 1 else ''}"
            if release
            else "released",
        )

    # 2. the rest, in order
    blocker: GroupRequest | None = None
    for gi, g in ordered:
        if g.released:
            continue
        ms = _classify(g, gate)
        bound_n = len(ms.bound)

        def verdict(outcome: Outcome, fits: int, message: str, release: Mapping[str, str] | None = None) -> None:
            verdicts[gi] = GroupVerdict(g.namespace, g.name, outcome, release or {}, fits, message)

        if g.min_member < 1:
            verdict(Outcome.UNSCHEDULABLE, bound_n, f"invalid minMember {g.min_member}")
            continue
        if len(ms.present) < g.min_member:
            verdict(Outcome.WAITING_FOR_MEMBERS, bound_n, f"{len(ms.present)} of {g.min_member} members present")
            continue
        needed = g.min_member - bound_n
        if bound_n + len(ms.plannable) < g.min_member:
            queued = sum(1 for m in ms.present if not m.gates and not m.bound and not m.terminal)
            why = []
            if held := held_by_other_gates(ms.present, gate):
                why.append(held)
            if queued:
                why.append(f"{queued} ungated and waiting for kube-scheduler")
            verdict(
                Outcome.WAITING_FOR_MEMBERS,
                bound_n,
                f"{len(ms.present)} of {g.min_member} members present, {bound_n} bound; " + ", ".join(why),
            )
            continue
        if blocker is not None:
            ok, msg = fits_empty(ms, g)
            if not ok:
                verdict(Outcome.EXCEEDS_CLUSTER_CAPACITY, bound_n, msg)
            else:
                verdict(
                    Outcome.INSUFFICIENT_CAPACITY,
                    bound_n,
                    f"waiting behind starving PodGroup {blocker.namespace}/{blocker.name}, "
                    "which has priority for freed room",
                )
            continue
        mark = state.mark()
        plan = _plan(state, ms.plannable, max(needed, 0))
        fits = bound_n + len(plan)
        if fits >= g.min_member:
            state.commit()
            release = {}
            for m in ms.gated:
                i = plan.get(m.uid)
                release[m.uid] = nodes[i].name if i is not None else ""
                if i is not None:
                    reserve(m, i)
            verdict(
                Outcome.RELEASED,
                fits,
                f"fits {fits} of {g.min_member}: releasing {len(release)} gated member"
                f"{'s' if len(release) != 1 else ''}",
                release,
            )
            continue
        unplaced = [m for m in ms.plannable if m.uid not in plan]
        short = _shortfall(state, unplaced, needed - len(plan))
        state.rollback(mark)
        ok, empty_msg = fits_empty(ms, g)
        if not ok:
            verdict(Outcome.EXCEEDS_CLUSTER_CAPACITY, fits, empty_msg)
            continue
        affinity_dead = [
            m
            for m in unplaced
            if m.required_pod_affinity and not state.spec_for(m).eligible and state.spec_for(m).affinity_unmet
        ]
        if affinity_dead:
            verdict(
                Outcome.UNSCHEDULABLE,
                fits,
                f"fits {fits} of {g.min_member}: required pod affinity of {affinity_dead[0].name} is not "
                "satisfied by any bound pod (cogate only plans pod affinity against pods already running)",
            )
            continue
        msg = f"fits {fits} of {g.min_member}: {short}"
        since = complete_since(g)
        if since is not None and now - since >= config.starvation_seconds:
            blocker = g
            msg += f"; starving for {int(now - since)}s: later groups wait"
        verdict(Outcome.INSUFFICIENT_CAPACITY, fits, msg)

    return Decision(
        verdicts=tuple(verdicts[i] for i in range(len(groups))),
        reservations=tuple(kept) + tuple(new_res),
    )
