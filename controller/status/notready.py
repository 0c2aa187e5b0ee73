"""Released members that wait for a node that is not Ready (pure): where, how many, until when.

Issue 29: a node that is only not Ready keeps the released members pinned to it as long as
Kubernetes keeps bound pods on such a node (:func:`cogate.controller.status.lifecycle.eviction_grace`,
docs/semantics.md "After the release"). Meanwhile the gang waits, and the PodGroup says why:
``PlannedNodesUsable=False`` with reason ``NodeNotReady`` and a Warning ``NodeNotReady`` event,
whose text (:func:`message`) names each node, the members that wait on it and the deadline.

A member waits for a node when its group stands released and the member is not terminal, not
being deleted, and either pinned there and not bound, with the node's readiness its only problem
(``lifecycle.Stuck`` with ``wait`` > 0, before its deadline), or bound there and not started
(phase ``Pending``: a node that is not Ready starts nothing) on a node that is not Ready
(:func:`cogate.controller.status.lifecycle.not_ready`). Members running there are not waiting and
are not named.

The deadline of a member is :func:`start` (when the node stopped being Ready) plus its grace
(``tolerationSeconds`` of the node's NoExecute readiness taints). At it cogate gives up on a pinned
member (``PlannedNodeUnusable``: deleted so its owner recreates it gated, and planned again), and the
taint eviction controller of Kubernetes deletes a bound one; the node Ready again before ends the
wait. Times are float epoch seconds (UTC); ``math.inf``: never.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cogate.controller.model.records import READINESS_TAINTS, NodeInfo, PodInfo
from cogate.controller.model.words import name_list
from cogate.controller.status.lifecycle import Stuck, eviction_grace, not_ready
from cogate.models import format_time

__all__ = ["NodeWait", "start", "deadline", "waits", "message", "situation", "MAX_NODES", "MAX_NAMES"]

#: Nodes named in a message; the rest are counted ("and 2 more nodes").
MAX_NODES = 5
#: Members named per node and kind; the rest are counted ("and 3 more").
MAX_NAMES = 5


@dataclass(frozen=True)
class NodeWait:
    """Members of one group that wait for ``node``, which is not Ready.

    ``state``: what is wrong with it in words ("Ready is not True; taint
    node.kubernetes.io/unreachable"); ``since``: when it stopped being Ready (:func:`start`);
    ``pinned``: names of members released pinned to it and not bound; ``bound``: names of members
    bound to it and not started; ``deadline``: the earliest of their deadlines (:func:`deadline`),
    ``grace`` the ``tolerationSeconds`` it counts (``math.inf``: they tolerate the node's state
    without a limit)."""

    node: str
    state: str
    since: float
    pinned: tuple[str, ...] = ()
    bound: tuple[str, ...] = ()
    deadline: float = math.inf
    grace: float = math.inf


def start(node: NodeInfo, seen: Mapping[str, float], now: float) -> float:
    """When ``node`` stopped being Ready: its own time (``NodeInfo.not_ready_since``: the ``timeAdded``
    of its NoExecute readiness taint, where Kubernetes starts counting ``tolerationSeconds``), else
    when cogate first saw it not Ready (``seen``, by node name), else ``now``."""
    return node.not_ready_since or seen.get(node.name) or now


def deadline(node: NodeInfo, grace: float, seen: Mapping[str, float], now: float) -> float:
    """When a member waiting for ``node`` with ``grace`` seconds (its ``tolerationSeconds``:
    :func:`~cogate.controller.status.lifecycle.eviction_grace`) is given up: :func:`start` + ``grace``
    (``math.inf`` with an infinite grace)."""
    return math.inf if grace == math.inf else start(node, seen, now) + grace


def _state(node: NodeInfo) -> str:
    taints = sorted({t.key for t in node.taints if t.key in READINESS_TAINTS})
    parts = ([] if node.ready else ["Ready is not True"]) + [f"taint {k}" for k in taints]
    return "; ".join(parts)


def waits(members: Iterable[PodInfo], nodes: Mapping[str, NodeInfo], stuck: Mapping[str, Stuck],
          seen: Mapping[str, float], now: float) -> tuple[NodeWait, ...]:
    """The members of one released group (``members``) that wait for a node that is not Ready, by
    node (sorted by name); see the module doc for which count.

    ``nodes``: nodes by name (those not Ready suffice; a node missing here keeps nobody waiting);
    ``stuck``: :func:`cogate.controller.status.lifecycle.stuck_members` of the pass, by uid (a pinned
    member waits only with ``wait`` > 0, and not past its deadline: then cogate gives it up and the
    ``PlannedNodeUnusable`` rule reports it); ``seen``: when cogate first saw each node not Ready
    (:func:`start`). A bound member stays listed past its deadline (Kubernetes evicts it)."""
    by_node: dict[str, tuple[list[str], list[str], list[tuple[float, float]]]] = {}
    for m in members:
        if m.terminal or m.deleting:
            continue
        if m.bound:
            node = nodes.get(m.node_name)
            if m.phase != "Pending" or node is None or not not_ready(node):
                continue
            grace, kind = eviction_grace(m, node), 1
        else:
            s = stuck.get(m.uid)
            node = nodes.get(s.node) if s is not None else None
            if s is None or s.wait <= 0 or node is None:
                continue
            grace, kind = s.wait, 0
            if deadline(node, grace, seen, now) <= now:
                continue
        entry = by_node.setdefault(node.name, ([], [], []))
        entry[kind].append(m.name)
        entry[2].append((deadline(node, grace, seen, now), grace))
    out = []
    for name, (pinned, bound, due) in sorted(by_node.items()):
        node = nodes[name]
        first, grace = min(due)
        out.append(NodeWait(name, _state(node), start(node, seen, now), tuple(sorted(pinned)), tuple(sorted(bound)),
                            first, grace))
    return tuple(out)


def _seconds(grace: float) -> str:
    return f"{grace:g}" if grace != int(grace) else str(int(grace))


def _one(w: NodeWait, now: float) -> str:
    who = []
    if w.pinned:
        who.append(f"{len(w.pinned)} pinned, not bound ({name_list(w.pinned, MAX_NAMES)})")
    if w.bound:
        who.append(f"{len(w.bound)} bound, not started ({name_list(w.bound, MAX_NAMES)})")
    if w.deadline == math.inf:
        until = "no deadline (they tolerate the node's state without a limit)"
    else:
        passed = " (passed)" if w.deadline <= now else ""
        until = f"deadline {format_time(w.deadline)}{passed} (tolerationSeconds {_seconds(w.grace)})"
    return f"node {w.node} ({w.state}, since {format_time(w.since)}): {', '.join(who)}; {until}"


def message(node_waits: Sequence[NodeWait], now: float) -> str:
    """The text of ``PlannedNodesUsable=False``/``NodeNotReady`` and of the ``NodeNotReady`` event,
    '' when nothing waits: how many members wait for how many nodes, each node (the first
    :data:`MAX_NODES`) with its state, since when, its members and its deadline, then what happens
    at the deadline. E.g. "2 released members wait for 1 node that is not Ready: node n1 (Ready is
    not True; taint node.kubernetes.io/unreachable, since 2026-12-07T01:00:00Z): 2 pinned, not bound
    (k-0, k-1); deadline 2026-12-07T01:05:00Z (tolerationSeconds 300); at its deadline cogate gives up
    on a pinned member and plans it again (PlannedNodeUnusable) unless the node is Ready before"."""
    if not node_waits:
        return ""
    members = sum(len(w.pinned) + len(w.bound) for w in node_waits)
    nodes = len(node_waits)
    head = (f"{members} released member{'s' if members != 1 else ''} wait{'s' if members == 1 else ''} for "
            f"{nodes} node{'s' if nodes != 1 else ''} that {'is' if nodes == 1 else 'are'} not Ready")
    parts = [_one(w, now) for w in node_waits[:MAX_NODES]]
    if nodes > MAX_NODES:
        parts.append(f"and {nodes - MAX_NODES} more nodes")
    then = []
    if any(w.pinned for w in node_waits):
        then.append("cogate gives up on a pinned member and plans it again (PlannedNodeUnusable)")
    if any(w.bound for w in node_waits):
        then.append("Kubernetes evicts a bound one (its NoExecute taint)")
    tail = f"at its deadline {' and '.join(then)} unless the node is Ready before"
    return f"{head}: {'; '.join(parts)}; {tail}"


def situation(node_waits: Sequence[NodeWait]) -> str:
    """The situation the ``NodeNotReady`` event describes, for its de-duplication: the nodes waited
    for (a node more or fewer is news; members that come and go on them are not)."""
    return ",".join(w.node for w in node_waits)
