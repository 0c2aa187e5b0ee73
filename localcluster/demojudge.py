"""What ``cogate demo`` expects to see in each case of the README example, and whether it saw it.

Pure: :func:`observe` reads the pods and the PodGroup as ``kubectl get -o json`` returns them;
:func:`judge` compares that with the README's promise and returns what to print. The demo prints
what it saw, not a fixed conclusion, and exits non-zero when the cluster did not show the
promised outcome (``localcluster/demo.py``).

The promise (README "The example"; one node that fits 3 pods of 3 CPU, a ReplicaSet of 6):
- minMember 3: 3 members Running, 3 Pending behind cogate's scheduling gate, none sent to
  kube-scheduler without room; PodGroup phase ``Running``; condition ``MembersWaiting=True``
  (``WaitingForCapacity``) naming the 3 gated members.
- minMember 4: all 6 Pending behind the gate, none bound; PodGroup phase ``Pending``; a condition
  with reason ``InsufficientCapacity`` saying ``fits 3 of 4``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cogate import gates
from cogate.api import DEFAULT_GATE_NAME

#: Pod states the demo tells apart (:func:`pod_state`).
RUNNING, GATED, PENDING, OTHER = "Running", "gated", "Pending (not gated)", "other"


def pod_state(pod: Mapping[str, Any], gate: str = DEFAULT_GATE_NAME) -> str:
    """One pod (API JSON) as the demo counts it: :data:`RUNNING` (bound and phase Running),
    :data:`GATED` (unbound, holding ``gate``), :data:`PENDING` (unbound, without ``gate``: sent to
    kube-scheduler), else :data:`OTHER` (bound but not Running yet, terminating, ...)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    bound = bool(spec.get("nodeName"))
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return OTHER
    if bound:
        return RUNNING if status.get("phase") == "Running" else OTHER
    return GATED if gates.find(pod, gate) is not None else PENDING


@dataclass(frozen=True)
class Seen:
    """What the demo read back: ``pods`` (name -> :func:`pod_state`) and the PodGroup's
    ``phase`` and ``conditions`` (type -> the condition object)."""

    pods: Mapping[str, str]
    phase: str
    conditions: Mapping[str, Mapping[str, Any]]

    def named(self, state: str) -> list[str]:
        return sorted(n for n, s in self.pods.items() if s == state)


def observe(pods: Sequence[Mapping[str, Any]], pod_group: Mapping[str, Any] | None,
            gate: str = DEFAULT_GATE_NAME) -> Seen:
    """:class:`Seen` from the pods of the example and its PodGroup (``None`` when absent)."""
    status = (pod_group or {}).get("status") or {}
    conditions = {c.get("type", ""): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}
    return Seen({p["metadata"]["name"]: pod_state(p, gate) for p in pods}, status.get("phase", ""), conditions)


@dataclass(frozen=True)
class Verdict:
    """``ok`` when ``seen`` is the promised outcome; ``lines``: what was seen, then each
    difference from the promise (empty when ``ok``)."""

    ok: bool
    lines: tuple[str, ...]


def _names(names: list[str]) -> str:
    return f" ({', '.join(names)})" if names else ""


def _line(cond: Mapping[str, Any] | None) -> str:
    if not cond:
        return "absent"
    return f"{cond.get('status')} {cond.get('reason')}: {cond.get('message')}"


def judge(min_member: int, seen: Seen, *, replicas: int = 6, fit: int = 3) -> Verdict:
    """Compare ``seen`` with the README's promise for ``min_member`` (``replicas`` pods, ``fit``
    of which the node holds). Released when ``min_member <= fit``: ``fit`` Running and the rest
    gated, phase ``Running``, ``MembersWaiting=True``/``WaitingForCapacity`` naming every gated
    member; otherwise all gated, phase ``Pending``, an ``InsufficientCapacity`` condition saying
    ``fits <fit> of <min_member>``."""
    running, gated, pending, other = (seen.named(s) for s in (RUNNING, GATED, PENDING, OTHER))
    lines = [f"seen: {len(running)} Running{_names(running)}, {len(gated)} gated{_names(gated)}"
             + (f", {len(pending)} Pending without the gate{_names(pending)}" if pending else "")
             + (f", {len(other)} other{_names(other)}" if other else "")
             + f"; PodGroup phase {seen.phase or '(none yet)'}"]
    wrong: list[str] = []
    if len(seen.pods) != replicas:
        wrong.append(f"expected {replicas} pods, saw {len(seen.pods)}")
    if pending:
        wrong.append(f"{len(pending)} pods were sent to kube-scheduler without the gate: {', '.join(pending)}")
    if min_member <= fit:
        waiting = seen.conditions.get("MembersWaiting")
        lines.append(f"MembersWaiting: {_line(waiting)}")
        if len(running) != fit or len(gated) != replicas - fit:
            wrong.append(f"expected {fit} Running and {replicas - fit} gated")
        if seen.phase != "Running":
            wrong.append(f"expected PodGroup phase Running, saw {seen.phase or 'none'}")
        message = (waiting or {}).get("message", "")
        if not waiting or waiting.get("status") != "True" or waiting.get("reason") != "WaitingForCapacity":
            wrong.append("expected condition MembersWaiting=True WaitingForCapacity")
        elif any(n not in message for n in gated):
            wrong.append(f"MembersWaiting does not name every gated member ({', '.join(gated)})")
    else:
        why = next((c for c in seen.conditions.values() if c.get("reason") == "InsufficientCapacity"), None)
        lines.append(f"InsufficientCapacity: {_line(why)}")
        if running or other or len(gated) != replicas:
            wrong.append(f"expected all {replicas} gated and none bound")
        if seen.phase != "Pending":
            wrong.append(f"expected PodGroup phase Pending, saw {seen.phase or 'none'}")
        if not why or f"fits {fit} of {min_member}" not in why.get("message", ""):
            wrong.append(f"expected an InsufficientCapacity condition saying 'fits {fit} of {min_member}'")
    return Verdict(not wrong, tuple(lines + [f"NOT AS PROMISED: {w}" for w in wrong]))
