"""Explanation wording (pure): the text of a verdict's ``message`` that says why a group waits.

The decision sequence (:mod:`cogate.controller.planning.planner`) decides; this module words what it
read. Messages go to PodGroup status, Events and logs, for people (never parsed): pods are
named (at most :data:`NAMES_SHOWN`, then "and N more"), quantities written as in manifests
(:func:`cogate.controller.model.resources.format_quantity`: CPU millicores as ``1500m``, memory
bytes as ``512Mi``).

* :func:`shortfall`: why more members do not fit a room
  (:class:`cogate.controller.planning.room.Room`): what the smallest missing ones lack, resources
  summed over their eligible nodes ("cpu short by 1500m on eligible nodes (at most 500m free
  on one node, a member requests 1)"), or room for one member on one node when the totals
  suffice (fragmentation); the pods terminating on those nodes (kube-scheduler counts a
  terminating pod's requests until it is gone, and so does the planner); how many nodes
  each filter excluded. The :class:`Short` it returns also records what it read of the free
  room, so that the incremental planner (:mod:`cogate.controller.planning.planstate`) knows while the
  text still holds.
  When resources are short, the room reserved on those nodes for other gangs' released
  members that are not bound yet (restored after a restart or failover too) is named: which
  PodGroup, how many members, on which nodes, how much of the short resources
  (:func:`held_for_others`), and so is the room kube-scheduler promised there to pods it
  nominated that count against the group (:func:`promised_to_nominated`). Members that no node can ever take because of their **own**
  constraints (:func:`unplaceable`) are named apart, as theirs and not a want of capacity
  (:func:`own_constraints`), and their exclusions are not counted among the capacity text.
* :func:`held_reason`: why a group stays gated whatever the room.
* :func:`held_by_other_gates`, :func:`waiting_text`, :func:`unchecked_note`: the parts that
  name members held by other scheduling gates, members left gated for want of room, and
  members released without a pin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cogate.controller.model import volumes as _volumes
from cogate.controller.planning.room import Room, Spec, req_with_pod
from cogate.controller.model.records import PodInfo
from cogate.controller.model.resources import format_quantity, format_resources
from cogate.controller.model.verdicts import DEFAULT_SCHEDULER, PlannerConfig, held_constraints
from cogate.controller.model.words import NAMES_SHOWN, name_list, plural

__all__ = ["NAMES_SHOWN", "name_list", "plural", "held_by_other_gates", "held_reason", "unchecked_note", "waiting_text",
           "Short", "shortfall", "own_reason", "unplaceable", "own_constraints", "unplaceable_message", "held_for_others",
           "promised_to_nominated"]


def held_by_other_gates(members: Sequence[PodInfo], gate: str) -> str:
    """Message part naming the first members held by scheduling gates other than ``gate``:
    ``"2 held by other scheduling gates (w-1: example.com/quota, w-2: example.com/quota)"``;
    ``""`` when none is."""
    held = [m for m in members if not m.bound and not m.terminal and any(g != gate for g in m.gates)]
    if not held:
        return ""
    names = [f"{m.name}: {', '.join(g for g in m.gates if g != gate)}" for m in held]
    return f"{len(held)} held by other scheduling gates ({name_list(names)})"


def held_reason(gated: Sequence[PodInfo], config: PlannerConfig) -> str:
    """Why a group whose gated members are ``gated`` must stay gated whatever the room, or ''.

    - a member names a scheduler outside ``config.scheduler_names``: cogate cannot know
      whether (or where) it will ever be scheduled;
    - a member's volumes make it unschedulable now (``PodInfo.volume_problems``, e.g. a claim
      that does not exist), as kube-scheduler's VolumeBinding would say;
    - a member carries constraints the planner does not evaluate (``PodInfo.unplanned``) that
      ``config.unchecked`` holds for (:func:`~cogate.controller.model.verdicts.held_constraints`: DRA
      resource claims by default, all under ``hold``).
    """
    parts = []
    unknown = [m for m in gated if m.scheduler_name not in config.scheduler_names]
    if unknown:
        names = sorted({m.scheduler_name for m in unknown})
        parts.append(f"{name_list([m.name for m in unknown])} name{'s' if len(unknown) == 1 else ''} scheduler "
                     f"{', '.join(repr(n) for n in names)}, which cogate does not plan for (configured: "
                     f"{', '.join(sorted(config.scheduler_names))}; add it with --scheduler-name if that scheduler runs, "
                     f"or list it in the webhook's --adopt-scheduler-name and recreate the pods)")
    for m in gated:
        if m.volume_problems:
            parts.append(f"{m.name}: {'; '.join(m.volume_problems)}")
    held = {m.name: found for m in gated if m.unplanned and (found := held_constraints(m.unplanned, config.unchecked))}
    if held:
        names = sorted(held)
        parts.append(f"{name_list(names)} {'has' if len(names) == 1 else 'have'} constraints cogate does "
                     f"not check ({', '.join(sorted({u for found in held.values() for u in found}))}) and "
                     f"--unchecked-constraints={config.unchecked} (release them unchecked, with the risk that "
                     "kube-scheduler places part of the group, with --unchecked-constraints=release)")
    return "; ".join(parts)


def unchecked_note(gated: Sequence[PodInfo], config: PlannerConfig) -> str:
    """Suffix of a release message naming members released without a pin and why."""
    parts = []
    unchecked = [m for m in gated if m.unplanned]
    if unchecked:
        what = sorted({u for m in unchecked for u in m.unplanned})
        parts.append(f"not checked by cogate, placed by kube-scheduler: {name_list([m.name for m in unchecked])} ({', '.join(what)})")
    other = [m for m in gated if m.scheduler_name != DEFAULT_SCHEDULER and m.scheduler_name in config.scheduler_names]
    if other:
        parts.append(f"placed by their own scheduler: {name_list([m.name for m in other])}")
    return "".join(f"; {p}" for p in parts)


def waiting_text(members: Sequence[PodInfo], short: "Short | str") -> str:
    """``"2 members (a, b) wait gated for capacity: <short>"``: members of a released group the
    plan leaves without room (present at the release or new since; the same words for both).
    When every one of them is one no node can take by its own constraints (``Short.own``), they
    wait gated "by their own constraints, not for capacity"."""
    text = short.text if isinstance(short, Short) else short
    own = set(short.own) if isinstance(short, Short) else set()
    verb = "waits" if len(members) == 1 else "wait"
    why = "by their own constraints, not for capacity" if own and all(m.name in own for m in members) else "for capacity"
    return f"{plural(len(members), 'member')} ({name_list([m.name for m in members])}) {verb} gated {why}: {text}"


@dataclass(frozen=True)
class Short:
    """Why members do not fit (:func:`shortfall`): ``text``, and what it read of the free room:
    ``supply`` (free ``demand`` resources summed over the ``eligible`` nodes; ``eligible`` None
    when the text reads no free room), ``short`` (demand beyond supply); ``own``: the names of
    the members it names as placeable on no node by their own constraints (:func:`unplaceable`)."""

    text: str
    eligible: frozenset[int] | None = None
    demand: Mapping[str, int] = field(default_factory=dict)
    supply: Mapping[str, int] = field(default_factory=dict)
    short: Mapping[str, int] = field(default_factory=dict)
    own: tuple[str, ...] = ()


def shortfall(room: Room, unplaced: Sequence[PodInfo], missing: int) -> Short:
    """Explain why ``missing`` more of ``unplaced`` do not fit on ``room``: what the smallest
    ``missing`` of them lack, the room reserved there for other gangs (when resources are
    short: :func:`held_for_others`), the pods terminating on their eligible nodes, then how
    many nodes each filter excluded. Members no node takes by their own constraints
    (:func:`unplaceable`) are not among those "smallest": they are named apart
    (:func:`own_constraints`), last."""
    if missing <= 0:
        return Short("")
    if len(unplaced) < missing:
        return Short(f"only {len(unplaced)} more gated members can be planned (others carry other scheduling gates)")
    own = unplaceable(room, unplaced)
    own_uids = {m.uid for m in own}
    rest = [m for m in unplaced if m.uid not in own_uids]
    own_text = own_constraints(room, own)
    names = tuple(m.name for m in own)
    if not rest:
        return Short(own_text, own=names)
    specs = [room.spec_for(m) for m in rest]
    pairs = sorted(zip(specs, rest), key=lambda sp: (sp[0].size, sp[1].name))[:missing]
    smallest = [s for s, _ in pairs]
    lack = _lacking(room, smallest)
    parts = [lack.text]
    if lack.short and lack.eligible and (held := held_for_others(room, lack.eligible, lack.short, pairs[0][1])):
        parts.append(held)
    if lack.short and lack.eligible and (promised := promised_to_nominated(
            room, lack.eligible, lack.short, min(m.priority for _, m in pairs))):
        parts.append(promised)
    eligible = {i for s in smallest for i in s.eligible}
    if eligible and (terminating := _terminating(room, eligible)):
        parts.append(terminating)
    reasons = _exclusions(room, smallest)
    for r in sorted(reasons, key=lambda r: (-reasons[r], r)):
        c = reasons[r]
        parts.append(f"{c} node{'s' if c != 1 else ''} excluded by {r}")
    if own_text:
        parts.append(own_text)
    return Short("; ".join(parts), lack.eligible, lack.demand, lack.supply, lack.short, names)


def held_for_others(room: Room, eligible: frozenset[int] | set[int], short: Mapping[str, int],
                    member: PodInfo) -> str:
    """Message part naming the room reserved on ``eligible`` nodes for released members of
    *other* PodGroups that are not bound yet (the reservations among ``Room.promised``: those the
    pass charged, restored after a restart or failover included, and the releases earlier in the
    same pass), with the amount of each ``short`` resource they hold:
    ``"room reserved for released members not bound yet: PodGroup team/a (3 members on n1:
    cpu 9)"``; ``""`` when there is none. ``member``: one of the waiting group's members (its
    own group's reservations are not "others")."""
    own = (member.namespace, member.group or "")
    by_group: dict[tuple[str, str], tuple[list[str], set[str], dict[str, int]]] = {}
    for r, i in room.promised:
        if r.kind != "reserved" or i not in eligible:
            continue
        pod = r.pod
        key = (pod.namespace, pod.group or "")
        if key == own:
            continue
        pods, nodes, amount = by_group.setdefault(key, ([], set(), {}))
        pods.append(pod.name)
        nodes.add(r.node_name)
        req = req_with_pod(r.requests)
        for k in short:
            if req.get(k, 0) > 0:
                amount[k] = amount.get(k, 0) + req[k]
    if not by_group:
        return ""
    texts = []
    for (ns, group), (pods, nodes, amount) in sorted(by_group.items(), key=lambda kv: (-len(kv[1][0]), kv[0])):
        held = ", ".join(f"{k} {format_quantity(k, v)}" for k, v in sorted(amount.items()))
        who = f"PodGroup {ns}/{group}" if group else f"pod {ns}/{pods[0]}"
        texts.append(f"{who} ({plural(len(pods), 'member')} on {name_list(sorted(nodes))}"
                     + (f": {held}" if held else "") + ")")
    return "room reserved for released members not bound yet: " + name_list(texts)


def promised_to_nominated(room: Room, eligible: frozenset[int] | set[int], short: Mapping[str, int],
                          priority: int) -> str:
    """Message part naming the room kube-scheduler promised on ``eligible`` nodes to pods it
    nominated there (``status.nominatedNodeName``: a preemptor whose victims are gone or going and
    that is not bound yet) and that count against a member of ``priority`` (the nominated pod's
    priority is equal or higher; kube-scheduler's ``addGENominatedPods``, the same rule that
    charged them: :meth:`~cogate.controller.planning.room.Room.lend`), with the amount of each
    ``short`` resource each holds: ``"room promised to pods kube-scheduler nominated, not bound
    yet: pod team/hp (priority 1000, on n1: cpu 2)"``; ``""`` when there is none. Why: the node
    shows that room free (the victim is gone) while the planner counts it taken (issue 37
    kind 10). Pods listed by the room they hold, most first (at most ``NAMES_SHOWN``)."""
    held: list[tuple[int, str]] = []
    for p, i in room.promised:
        if not p.nominated or i not in eligible or p.priority < priority:
            continue
        req = req_with_pod(p.requests)
        amount = {k: req[k] for k in short if req.get(k, 0) > 0}
        if not amount:
            continue
        text = ", ".join(f"{k} {format_quantity(k, v)}" for k, v in sorted(amount.items()))
        pod = p.pod
        held.append((-sum(amount.values()), f"pod {pod.namespace}/{pod.name} (priority {p.priority}, "
                                            f"on {p.node_name}: {text})"))
    if not held:
        return ""
    return "room promised to pods kube-scheduler nominated, not bound yet: " + name_list([t for _, t in sorted(held)])


# -- a member's own constraints ------------------------------------------------------------

#: Exclusions of :func:`cogate.controller.planning.filters.static_reason` that the member's own spec
#: decides (its nodeSelector, required node affinity, tolerations, its bound volumes' node
#: affinity), as opposed to the node's state (not Ready, cordoned).
_OWN_REASONS = frozenset({"nodeSelector", "node affinity", _volumes.REASON})


#: Taint key prefixes the node lifecycle controller and cloud providers set for a node's state
#: (``node.kubernetes.io/not-ready``, ``unreachable``, ``memory-pressure``, ...,
#: ``node.cloudprovider.kubernetes.io/uninitialized``): they come and go with the node.
NODE_STATE_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")


def own_reason(reason: str) -> bool:
    """Whether a node exclusion ``reason`` (:func:`cogate.controller.planning.filters.static_reason`)
    comes from the member's own spec: its ``nodeSelector``, required node affinity, a taint it
    has no toleration for (``"taint key=value"``; not the node-state taints of
    :data:`NODE_STATE_TAINTS`, such as a new node's ``node.kubernetes.io/not-ready``), its bound
    volumes' node affinity. ``not Ready`` and ``unschedulable (cordoned)`` are the node's state."""
    if reason.startswith("taint "):
        return not reason[len("taint "):].startswith(NODE_STATE_TAINTS)
    return reason in _OWN_REASONS


def unplaceable(room: Room, members: Sequence[PodInfo]) -> list[PodInfo]:
    """The ``members`` that no node can take whatever the load, because of their own
    constraints: no node passes the load-independent filters for them (kube-scheduler
    NodeAffinity, TaintToleration, NodeUnschedulable, VolumeBinding's PV node affinity; none
    excluded by pod affinity, which depends on other pods) and at least one node was excluded
    by :func:`own_reason`. (A member that only NotReady or cordoned nodes exclude waits for the
    nodes: capacity.) Order kept."""
    out = []
    for m in members:
        s = room.spec_for(m)
        if not s.eligible and not s.affinity_unmet and any(own_reason(r) for r in s.reasons):
            out.append(m)
    return out


def _nodes(n: int) -> str:
    return plural(n, "node")


def _constraint_words(spec: Spec) -> list[str]:
    """What excludes each node for ``spec``'s members, in their words: ``"its nodeSelector
    disktype=ssd excludes 2 nodes"``, ``"it has no toleration for taint gpu=true (1 node)"``,
    ``"1 node not Ready"``."""
    pod = spec.pod
    words = []
    for r in sorted(spec.reasons, key=lambda r: (not own_reason(r), -spec.reasons[r], r)):
        c = spec.reasons[r]
        if r == "nodeSelector":
            sel = ",".join(f"{k}={v}" for k, v in sorted(pod.node_selector.items()))
            words.append(f"nodeSelector {sel} excludes {_nodes(c)}")
        elif r == "node affinity":
            words.append(f"required node affinity excludes {_nodes(c)}")
        elif r == _volumes.REASON:
            words.append(f"bound volumes' node affinity excludes {_nodes(c)}")
        elif r.startswith("taint "):
            words.append(f"no toleration for {r} ({_nodes(c)})")
        else:
            words.append(f"{_nodes(c)} {r}")
    return words


def own_constraints(room: Room, own: Sequence[PodInfo]) -> str:
    """Message part naming members that no node takes by their own constraints
    (:func:`unplaceable`) and why, per spec: ``"member w-2 fits no node by its own
    constraints, not for want of capacity: nodeSelector disktype=ssd excludes 3 nodes"``; ``""``
    for none."""
    by_spec: dict[int, tuple[Spec, list[str]]] = {}
    for m in own:
        s = room.spec_for(m)
        by_spec.setdefault(id(s), (s, []))[1].append(m.name)
    texts = []
    for s, names in by_spec.values():
        who = f"member {names[0]}" if len(names) == 1 else f"members {name_list(names)}"
        their = "its" if len(names) == 1 else "their"
        texts.append(f"{who} {'fits' if len(names) == 1 else 'fit'} no node by {their} own constraints, not for "
                     f"want of capacity: {', '.join(_constraint_words(s))}")
    return "; ".join(texts)


def unplaceable_message(room: Room, own: Sequence[PodInfo], others: int, min_member: int) -> str:
    """The message of a group that can never be released because members no node takes by
    their own constraints (:func:`unplaceable`) leave ``others`` placeable members (bound ones
    included), fewer than ``min_member``: :func:`own_constraints`, then how few remain."""
    text = own_constraints(room, own)
    if others:
        text += f"; the other {plural(others, 'member')} cannot reach minMember {min_member} alone"
    return text


def _terminating(room: Room, eligible: set[int]) -> str:
    """Message part naming pods being deleted on ``eligible`` nodes: kube-scheduler (and the
    planner) count their requests until they are gone, so the room they hold frees soon."""
    deleting = room.terminating_pods() if room.terminating_pods is not None else room.bound_pods
    pods = sorted((p.name for p, i in deleting if p.deleting and i in eligible))
    if not pods:
        return ""
    noun = "pod" if len(pods) == 1 else "pods"
    return (f"{len(pods)} {noun} terminating on eligible nodes ({name_list(pods)}) still "
            f"hold{'s' if len(pods) == 1 else ''} room until gone")


def _lacking(room: Room, specs: Sequence[Spec]) -> Short:
    """What ``specs`` (one per missing member) lack: resources summed over their eligible
    nodes, or, when the totals suffice, room for one member on one node (fragmentation)."""
    demand: dict[str, int] = {}
    for s in specs:
        for k, v in s.req.items():
            demand[k] = demand.get(k, 0) + v
    eligible: set[int] = set()
    for s in specs:
        eligible.update(s.eligible)
    supply: dict[str, int] = {}
    for i in eligible:
        f = room.free[i]
        for k in demand:
            v = f.get(k, 0)
            if v > 0:
                supply[k] = supply.get(k, 0) + v
    short = {k: demand[k] - supply.get(k, 0) for k in sorted(demand) if demand[k] > supply.get(k, 0)}
    if not eligible:
        return Short("no eligible node")
    keys = {s.static_key for s in specs}
    if len(keys) == 1 and not any(s.affinity_unmet for s in specs) and not room.empty:
        summed = room.table.eligible_set(keys.pop())  # shared by every group of these specs
    else:
        summed = frozenset(eligible)
    read = (summed, demand, supply, short)
    s0 = specs[0]
    if not short:
        return Short(f"no eligible node has room for a member requesting {format_resources(s0.req)}", *read)
    # Totals alone would hide fragmentation: also say what one node has and one member needs.
    texts = []
    for k, v in short.items():
        most = max((room.free[i].get(k, 0) for i in eligible), default=0)
        texts.append(f"{k} short by {format_quantity(k, v)} on eligible nodes (at most "
                     f"{format_quantity(k, max(most, 0))} free on one node, a member requests "
                     f"{format_quantity(k, s0.req.get(k, 0))})")
    return Short(", ".join(texts), *read)


def _exclusions(room: Room, specs: Sequence[Spec]) -> dict[str, int]:
    """Nodes excluded per filter, the most over ``specs``: the static filters and pod affinity
    (counted when the spec was built), anti-affinity and host ports (on ``room`` as it is now)."""
    reasons: dict[str, int] = {}
    for s in specs:
        for r, c in s.reasons.items():
            reasons[r] = max(reasons.get(r, 0), c)
        if s.affinity_unmet:
            reasons["pod affinity"] = max(reasons.get("pod affinity", 0), s.affinity_unmet)
        dyn: dict[str, int] = {}
        for i in s.eligible:
            if s.forbidden and any(
                room.dom(k, i) is not None and room.dom(k, i) in d for k, d in s.forbidden.items()
            ):
                dyn["pod anti-affinity"] = dyn.get("pod anti-affinity", 0) + 1
            elif s.ports and any(p.conflicts(q) for p in s.ports for q in room.ports[i]):
                dyn["host port in use"] = dyn.get("host port in use", 0) + 1
            elif room.spread is not None and (why := room.spread.reason(s.pod, i)) is not None:
                dyn[why] = dyn.get(why, 0) + 1  # hook: PodTopologySpread
        for r, c in dyn.items():
            reasons[r] = max(reasons.get(r, 0), c)
    return reasons
