"""What happens to a group after its release (pure): stale pins, lost members, refused releases.

A release is a promise kept by others: kube-scheduler must still be able to place each pinned
member, the API server must accept the release patch, and the gang must stay whole. This
module judges each of these from plain records; :mod:`cogate.controller.reconciler` acts on the
judgement (deletes, evictions, PodDisruptionBudgets, events). Rules (docs/semantics.md,
"After the release"):

- :func:`stuck_members`: released, unbound members pinned to a node that can no longer take
  them (the rule itself is the planner's, :func:`cogate.controller.planning.capacity.pinned_node_problems`),
  each with how long it is left to wait: a node that is only not Ready keeps its members as long
  as Kubernetes keeps bound pods on it (:func:`eviction_grace`);
- :func:`departures`: members that left a released group since the last pass, with the cause
  (the pod's ``DisruptionTarget`` reason where present);
- :func:`ungated_without_release`: members that run although cogate never released their group;
- :func:`adopted`: members released under an earlier PodGroup of the same name (taken over quietly);
- :func:`fell_below_quorum`: a group that reached minMember and lost it (the opt-in
  ``--evict-below-quorum`` policy);
- :func:`pdb_manifest`, :func:`pdb_action`: the opt-in PodDisruptionBudget per running group;
- :func:`reached_quorum`, :func:`quorum_count`, :func:`below_quorum`: the gang's health after the
  start (the ``Satisfied`` condition and the recovery deadline, :mod:`cogate.controller.model.recovery`);
- :func:`lifecycle_conditions`: the conditions ``PlannedNodesUsable``, ``ReleaseAccepted``,
  ``Disrupted``, ``MembersWaiting``, ``Satisfied`` and ``Recovery`` from these findings (their
  rules and their one writer: :mod:`cogate.controller.status.conditions`).

Times are float epoch seconds (UTC).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cogate import api
from cogate.controller.status import conditions as cond_mod
from cogate.controller.status.conditions import (  # noqa: F401 - public here too (lifecycle.CONDITION_DISRUPTED, ...)
    CONDITION_DISRUPTED,
    CONDITION_MEMBERS_WAITING,
    CONDITION_PLANNED_NODES_USABLE,
    CONDITION_RELEASE_ACCEPTED,
    REASON_QUORUM_LOST,
)
from cogate.controller.model import recovery
from cogate.controller.planning.patches import awaiting_bind
from cogate.controller.planning.capacity import pinned_node_problems
from cogate.controller.model.verdicts import GroupRequest, Outcome, min_member_of
from cogate.controller.model.records import READINESS_TAINTS, NodeInfo, PodInfo, Taint
from cogate.controller.status.status import count_members
from cogate.models import PodGroup, PodGroupStatus, parse_time

__all__ = [
    "CONDITION_PLANNED_NODES_USABLE",
    "CONDITION_RELEASE_ACCEPTED",
    "CONDITION_DISRUPTED",
    "CONDITION_MEMBERS_WAITING",
    "REASON_QUORUM_LOST",
    "Stuck",
    "stuck_members",
    "READINESS_TAINTS",
    "not_ready",
    "eviction_grace",
    "split_stuck",
    "stuck_message",
    "Departure",
    "gang_members",
    "departures",
    "cause_of",
    "ungated_without_release",
    "adopted",
    "fell_below_quorum",
    "reached_quorum",
    "quorum_count",
    "below_quorum",
    "Findings",
    "lifecycle_conditions",
    "pdb_manifest",
    "pdb_action",
    "MANAGED_BY_LABEL",
]

#: Label on objects cogate creates (PodDisruptionBudgets): cogate only changes what it made.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"

#: ``DisruptionTarget`` reasons (k8s.io/api core/v1 ``PodReason*``) -> what happened, in words.
_DISRUPTIONS = {
    "PreemptionByScheduler": "preempted by kube-scheduler",
    "PreemptionByCogate": "preempted by cogate",
    "EvictionByEvictionAPI": "evicted (Eviction API, e.g. kubectl drain)",
    "DeletionByTaintManager": "deleted by the taint manager (NoExecute taint)",
    "DeletionByPodGC": "deleted by the pod garbage collector (node gone)",
    "TerminationByKubelet": "terminated by the kubelet (node pressure or shutdown)",
}


# -- 1. stale pins -------------------------------------------------------------------------------




@dataclass(frozen=True)
class Stuck:
    """A released, unbound member pinned to ``node``, which can no longer take it (``reason``).

    ``wait``: seconds the member is left waiting for the node before cogate acts on it, beyond
    the grace of the caller (:data:`cogate.controller.release.aftercare.STUCK_GRACE_SECONDS`): 0
    unless the node's only problem is that it is not Ready, then :func:`eviction_grace`
    (``math.inf``: never)."""

    member: PodInfo
    node: str
    reason: str
    wait: float = 0.0


def not_ready(node: NodeInfo) -> bool:
    """``node`` is not Ready: its ``Ready`` condition is not True, or it carries a taint of
    :data:`READINESS_TAINTS` (the node lifecycle controller's, any effect)."""
    return not node.ready or any(t.key in READINESS_TAINTS for t in node.taints)


def eviction_grace(member: PodInfo, node: NodeInfo) -> float:
    """Seconds Kubernetes would leave ``member`` bound on ``node`` while the node is not Ready:
    the taint eviction controller deletes a pod once a NoExecute taint of :data:`READINESS_TAINTS`
    (those on the node; both while the node lifecycle controller has not added one yet) has been
    on the node for the pod's ``tolerationSeconds`` (the least of its matching tolerations; 0 or
    less, or no matching toleration: at once, 0.0; matching tolerations without seconds:
    ``math.inf``). kube-apiserver's DefaultTolerationSeconds admission plugin (on by default) gives
    every pod without its own 300 s for both keys. Source: k8s.io/kubernetes
    pkg/controller/tainteviction ``getMinTolerationTime``."""
    keys = [t.key for t in node.taints if t.key in READINESS_TAINTS] or list(READINESS_TAINTS)
    grace = math.inf
    for key in keys:
        taint = Taint(key, "", "NoExecute")
        matching = [tol.seconds for tol in member.tolerations if tol.tolerates(taint)]
        if not matching:
            return 0.0
        limited = [s for s in matching if s is not None]
        if limited:
            grace = min(grace, float(max(0, min(limited))))
    return grace


def stuck_members(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                  requests: Iterable[GroupRequest]) -> dict[str, Stuck]:
    """``{uid: Stuck}`` over every group's members that wait, released (no scheduling gate at
    all), unbound and pinned (:func:`cogate.controller.planning.patches.awaiting_bind`), on a node that
    fails :func:`cogate.controller.planning.capacity.pinned_node_problems`. ``pods``: bound, non-terminal pods.

    A member whose node would take it were the node Ready again (Ready, without
    :data:`READINESS_TAINTS`: the same check on that node) waits for the node as long as Kubernetes
    would keep it there had it bound (``Stuck.wait`` = :func:`eviction_grace`): a node that misses
    its heartbeats for a while (a loaded control plane, a network blip) comes back, and kube-scheduler
    binds the member then; deleting it would split a released gang for nothing."""
    pinned: list[tuple[PodInfo, str]] = []
    for r in requests:
        for m in r.members:
            node = awaiting_bind(m)
            if node:
                pinned.append((m, node))
    if not pinned:
        return {}
    problems = pinned_node_problems(nodes, pods, pinned)
    if not problems:
        return {}
    by_name = {n.name: n for n in nodes}
    down = {m_node for m, m_node in pinned if m.uid in problems and m_node in by_name
            and not_ready(by_name[m_node])}
    ready_again = problems
    if down:
        restored = [replace(n, ready=True, taints=tuple(t for t in n.taints if t.key not in READINESS_TAINTS))
                    if n.name in down else n for n in nodes]
        ready_again = pinned_node_problems(restored, pods, pinned)
    return {m.uid: Stuck(m, node, problems[m.uid],
                         eviction_grace(m, by_name[node]) if node in down and m.uid not in ready_again else 0.0)
            for m, node in pinned if m.uid in problems}


def split_stuck(stuck: Iterable[Stuck], recreate: bool) -> tuple[list[Stuck], list[Stuck]]:
    """``(delete, report)``: with ``recreate`` (``--recreate-stuck-members``, the default) members
    with a controller owner are deleted so it recreates them gated; bare pods (nobody would
    recreate them) and, without ``recreate``, every member are only reported."""
    delete, report = [], []
    for s in stuck:
        (delete if recreate and s.member.has_controller else report).append(s)
    return delete, report


def stuck_message(deleted: Sequence[Stuck], reported: Sequence[Stuck]) -> str:
    """Human text naming members, nodes and why, and what was done ("k-0, k-1 pinned to n1
    (node n1 has taint maint=now): deleted so their owner recreates them gated ...")."""
    parts = []
    for items, action in ((deleted, "deleted so their owner recreates them gated and they are planned again"),
                          (reported, "not deleted (no controller owner, or --no-recreate-stuck-members): "
                                     "delete them to have them planned again")):
        if not items:
            continue
        by_reason: dict[str, list[str]] = {}
        for s in sorted(items, key=lambda s: s.member.name):
            by_reason.setdefault(s.reason, []).append(s.member.name)
        where = "; ".join(f"{', '.join(_first(names))} ({reason})" for reason, names in sorted(by_reason.items()))
        parts.append(f"released members pinned to a node that can no longer take them: {where}; {action}")
    return "; ".join(parts)


def _first(names: Sequence[str], limit: int = 5) -> list[str]:
    return list(names[:limit]) + ([f"and {len(names) - limit} more"] if len(names) > limit else [])


# -- 3. members leaving a released group -----------------------------------------------------------


@dataclass(frozen=True)
class Departure:
    """A member that left its released group, and why (``cause``, in words)."""

    member: PodInfo
    cause: str


def gang_members(requests: Iterable[GroupRequest], gate: str) -> dict[str, tuple[PodInfo, tuple[str, str]]]:
    """Members that belong to a standing release now: ``{uid: (member, (namespace, group))}`` for
    released groups' members that carry no gate of ours and are neither terminal nor being
    deleted, bound or still waiting for kube-scheduler (what :func:`departures` compares between
    passes: a member released, bound and preempted between two passes left the release as much
    as one a pass saw bound; docs/semantics.md "A member leaves a released group")."""
    out = {}
    for r in requests:
        if not r.released:
            continue
        for m in r.members:
            if not m.gated_by(gate) and not m.terminal and not m.deleting:
                out[m.uid] = (m, (r.namespace, r.name))
    return out


def cause_of(p: PodInfo | None, *, gone: bool) -> str:
    """What happened to a member: its ``DisruptionTarget`` reason in words where present, else
    "failed" (phase Failed) or "deleted"."""
    if p is not None and p.disruption:
        text = _DISRUPTIONS.get(p.disruption, "disrupted")
        if p.disruption == "PreemptionByCogate" and p.disruption_message:
            # names the preemptor: "cogate: preempting to place PodGroup ns/name (priority 1000)"
            text = f"{text} ({p.disruption_message.removeprefix('cogate: ')})"
        return f"{text} (DisruptionTarget {p.disruption})"
    if p is not None and p.phase == "Failed" and not gone:
        return "failed"
    return "deleted"


def departures(previous: Mapping[str, tuple[PodInfo, tuple[str, str]]], current: Mapping[str, PodInfo],
               last_seen: Mapping[str, PodInfo] | None = None,
               ignore: Iterable[str] = ()) -> list[Departure]:
    """Members of ``previous`` (:func:`gang_members` at the last pass, with the members its releases
    ungated) that have left since without finishing:
    gone from ``current`` (every labelled pod by uid, deleting ones included), deleting, Failed, or
    relabelled to another group. ``last_seen``: the last record of pods the watch reported
    deleted (its ``DisruptionTarget`` says why); ``ignore``: uids cogate removed itself. A member
    whose last record is Succeeded finished its work: deleted afterwards (its Job deleted, a TTL) it
    is not lost (docs/semantics.md "Generations": members left it without finishing)."""
    skip = set(ignore)
    out = []
    for uid, (before, key) in sorted(previous.items(), key=lambda kv: kv[1][0].name):
        if uid in skip:
            continue
        now = current.get(uid)
        last = now if now is not None else (last_seen or {}).get(uid) or before
        if last.phase == "Succeeded":
            continue
        if now is None:
            out.append(Departure(before, cause_of(last, gone=True)))
        elif now.deleting:
            out.append(Departure(now, cause_of(now, gone=True)))
        elif now.phase == "Failed":
            out.append(Departure(now, cause_of(now, gone=False)))
        elif (now.namespace, now.group) != key:
            out.append(Departure(now, "left the group (its label changed)"))
    return out


def never_gated(m: PodInfo, gate: str) -> bool:
    """Member ``m`` never carried ``gate`` and cogate never released it: it is live, without the gate,
    and its ``metadata.generation`` is still 1. The API server sets 1 at creation and adds 1 on each
    change of ``spec`` (k8s.io/kubernetes ``pkg/registry/core/pod/strategy.go`` ``PrepareForCreate``,
    ``updatePodGeneration``; binding and status writes leave it), and cogate's release removes the
    gate from ``spec``: a released member is at 2 or more. So the label was added after cogate's
    webhook ran (a later mutating webhook or policy), the webhook was skipped, or the pod set
    ``spec.nodeName``. Never a false alarm; a member whose spec changed later (in-place resize,
    ephemeral container) is not recognised, nor any on an API server that sets no generation (0),
    except a member :attr:`~cogate.controller.model.records.PodInfo.bound_at_creation` (created with
    ``spec.nodeName``, which the API server refuses beside a gate), whatever its generation."""
    return ((m.generation == 1 or m.bound_at_creation) and not m.gated_by(gate) and not m.terminal
            and not m.deleting)


def ungated_without_release(pg: PodGroup, members: Sequence[PodInfo], gate: str) -> list[PodInfo]:
    """Members that run or wait for kube-scheduler although cogate never released them.

    In a group cogate never released (no ``scheduleStartTime`` in status): members that carry no
    gate of ours and are bound or waiting for kube-scheduler (someone removed the gate by hand,
    the pod was created with ``spec.nodeName``, or its label came after the webhook ran), except
    those :func:`adopted` from an earlier PodGroup of the same name. In a released group: the
    members that were :func:`never_gated` (cogate's release of new members never reached them)."""
    if pg.status.scheduleStartTime:
        return [m for m in members if never_gated(m, gate)]
    old = {m.uid for m in adopted(pg, members, gate)}
    return [m for m in members if not m.gated_by(gate) and not m.terminal and not m.deleting
            and not (m.gates and not m.bound) and m.uid not in old]


def adopted(pg: PodGroup, members: Sequence[PodInfo], gate: str) -> list[PodInfo]:
    """Members a PodGroup takes over quietly: created before the PodGroup itself
    (``metadata.creationTimestamp``, whole seconds: strictly earlier), carrying no gate of ours,
    not terminal, not being deleted. A member the webhook gated loses that gate only by a
    release, so such a member was released under an earlier PodGroup of the same name (deleted
    and made again: a new uid, an operator recreating its PodGroup) or before cogate knew the
    group; it counts toward the new PodGroup's gang like any placed member and is never
    reported ``UngatedWithoutRelease``. A member :func:`never_gated` (never carried the gate, so
    never released by anyone) is not adopted: it is reported. ``[]`` when the PodGroup has no
    creation time."""
    created = pg.metadata.creationTimestamp
    if not created:
        return []
    t0 = parse_time(created)
    return [m for m in members if m.created < t0 and not m.gated_by(gate) and not m.terminal and not m.deleting
            and not never_gated(m, gate)]


def fell_below_quorum(pg: PodGroup, members: Sequence[PodInfo]) -> bool:
    """The group had reached minMember (recorded phase ``Scheduled`` or ``Running``) and now
    fewer than minMember of its live members are placed (bound, not Failed)."""
    if pg.status.phase not in ("Scheduled", "Running"):
        return False
    return count_members(pg, members).placed < min_member_of(pg)


def reached_quorum(pg: PodGroup) -> bool:
    """The group had minMember members placed in its current episode, as its written status says:
    ``Satisfied`` is True, or False with ``QuorumLost``/``RecoveryFailed`` (lost since, not back);
    without that condition (written by a cogate before it), the phase ``Scheduled`` or ``Running``."""
    cond = pg.status.condition(cond_mod.CONDITION_SATISFIED)
    if cond is None:
        return pg.status.phase in ("Scheduled", "Running")
    return cond.status == "True" or cond.reason in (cond_mod.REASON_QUORUM_LOST, cond_mod.REASON_RECOVERY_FAILED)


def quorum_count(pg: PodGroup, members: Sequence[PodInfo], succeeded_total: int | None = None) -> int:
    """Members that keep a running gang's quorum: placed (bound, not Failed; a Succeeded one did its
    share) and, with ``succeeded_total`` (``status.succeeded``: the release's Succeeded members, deleted
    ones included), the Succeeded ones deleted since. A Job whose finished pods make way for the next
    ones never reads as a lost quorum."""
    c = count_members(pg, members)
    return c.placed + max(0, (succeeded_total or 0) - c.succeeded)


def below_quorum(pg: PodGroup, members: Sequence[PodInfo]) -> bool:
    """The gang lost its quorum and has not got it back: it :func:`reached_quorum`, is not Finished,
    and fewer than minMember members keep the quorum now (:func:`quorum_count`)."""
    if pg.status.phase == "Finished" or not reached_quorum(pg):
        return False
    return quorum_count(pg, members, pg.status.succeeded) < min_member_of(pg)


# -- conditions --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Findings:
    """What the shell found about one group in a pass (each empty when nothing happened).

    ``stuck``: the message of :func:`stuck_message`; ``not_ready``: who waits for which node that
    is not Ready, until when; ``refused``: which member's release patch
    the API server refused and its answer; ``lost``: the departures of this pass;
    ``runners``: members running without a release; ``quorum_evicted``: the text of an
    ``--evict-below-quorum`` eviction done in this pass.
    """

    stuck: str = ""
    #: Members waiting for nodes that are not Ready (:func:`cogate.controller.status.notready.message`).
    not_ready: str = ""
    refused: str = ""
    lost: tuple[Departure, ...] = ()
    runners: tuple[PodInfo, ...] = ()
    quorum_evicted: str = ""
    waiting: tuple[str, ...] = field(default=())
    #: The recovery deadline's step of this pass (``None``: no deadline; :func:`recovery.step`).
    recovery: recovery.Step | None = None
    #: Monotonic seconds of the pass the recovery wants (its next round or failure), ``None``: none.
    wake_at: float | None = None


def departures_text(lost: Sequence[Departure]) -> str:
    """"member k-1 left the released group: preempted by kube-scheduler (...)" for each of ``lost``
    (five at most, then "and N more"), without counts: the ``Satisfied`` message puts its own count
    before it."""
    what = "; ".join(f"member {d.member.name} left the released group: {d.cause}" for d in lost[:5])
    return f"{what}; and {len(lost) - 5} more" if len(lost) > 5 else what


def lost_message(lost: Sequence[Departure], pg: PodGroup, members: Sequence[PodInfo]) -> str:
    """"member k-1 left the released group: preempted by kube-scheduler (...); 1 of minMember 2 placed"
    (:func:`departures_text` and the members still placed)."""
    return f"{departures_text(lost)}; {_placed(pg, members)} of minMember {min_member_of(pg)} placed"


def _placed(pg: PodGroup, members: Sequence[PodInfo]) -> int:
    """Members placed and still to run (bound, neither Failed nor Succeeded): a Succeeded member
    does not make a gang that lost members whole again (docs/semantics.md "Generations")."""
    c = count_members(pg, members)
    return c.placed - c.bound_succeeded


def runners_message(runners: Sequence[PodInfo]) -> str:
    """The ``UngatedWithoutRelease`` text naming the members (``runners``, from
    :func:`ungated_without_release`), each kind with its cause: created with ``spec.nodeName``
    (:attr:`~cogate.controller.model.records.PodInfo.bound_at_creation`: the fix is to let the scheduler
    place them), never gated otherwise (generation 1: a label added after the webhook ran, with the
    webhook's fix), or released by someone else."""
    direct = [m.name for m in runners if m.bound_at_creation]
    never = [m.name for m in runners if m.generation == 1 and not m.bound_at_creation]
    others = [m.name for m in runners if m.generation != 1 and not m.bound_at_creation]
    parts = []
    if others:
        parts.append(f"members {', '.join(_first(others))} run although cogate has not released the group (their "
                     "gate was removed by someone else, or they were created before the webhook ran); the rest "
                     "of the group waits for its own release")
    if direct:
        parts.append(f"members {', '.join(_first(direct))} were created with spec.nodeName: they never pass "
                     "kube-scheduler, so no scheduling gate can hold them and they run outside any all-or-nothing "
                     "release; fix: create them without spec.nodeName (choose the node with a nodeSelector on "
                     "kubernetes.io/hostname or node affinity), or without the pod-group label if they are not "
                     "part of the gang")
    if never:
        parts.append(f"members {', '.join(_first(never))} were never gated: they go to kube-scheduler outside "
                     "any all-or-nothing release (their pod-group label was added after cogate's webhook ran, "
                     "by another mutating webhook or policy, or the webhook's late-label entry was off or down); "
                     "fix: keep cogate's webhook entries with reinvocationPolicy IfNeeded and the late-label entry "
                     "(chart webhook.lateLabels.enabled=true), then recreate these pods")
    return "; ".join(parts)


def lifecycle_conditions(status: PodGroupStatus, old: PodGroupStatus, pg: PodGroup, members: Sequence[PodInfo],
                         verdict_outcome: str | None, verdict_message: str, findings: Findings,
                         now: float) -> PodGroupStatus:
    """``status`` (from :func:`cogate.controller.status.status.compute_status`) with the after-release
    conditions set from ``findings``; a condition is only written once it has something to say
    (False/True transitions back are recorded, absent conditions are not created as "fine").
    Rules and writers (:mod:`cogate.controller.status.conditions`), in this order:

    - ``PlannedNodesUsable`` (:func:`~cogate.controller.status.conditions.write_planned_nodes_usable`)
      from ``findings.stuck``, ``findings.not_ready`` and the members placed;
    - ``ReleaseAccepted`` (:func:`~cogate.controller.status.conditions.write_release_accepted`) from
      ``findings.refused``, with ``Released=False``/``ReleaseRefused`` when nothing was released;
    - ``Disrupted`` (:func:`~cogate.controller.status.conditions.write_disrupted`) from
      ``findings.quorum_evicted``, the departures (:func:`lost_message`), the runners
      (:func:`runners_message`) and the members placed;
    - ``MembersWaiting`` (:func:`~cogate.controller.status.conditions.write_members_waiting`) from
      ``findings.waiting`` (message: the planner's ``verdict_message``);
    - ``Satisfied`` (:func:`~cogate.controller.status.conditions.write_satisfied`) from the members that
      keep the quorum (:func:`quorum_count`) and ``findings.recovery``; ``Recovery``
      (:func:`~cogate.controller.status.conditions.write_recovery`) from ``findings.recovery``, whose
      failed record makes the phase ``Failed``.
    """
    conds = cond_mod.ConditionSet(status.conditions, now, pg.metadata.generation)
    outcome = Outcome(verdict_outcome) if verdict_outcome else None
    m = min_member_of(pg)
    placed = _placed(pg, members)
    cond_mod.write_planned_nodes_usable(conds, stuck=findings.stuck, placed=placed, min_member=m,
                                       not_ready=findings.not_ready)
    cond_mod.write_release_accepted(conds, refused=findings.refused, releases=outcome is not None and outcome.releases)
    cond_mod.write_disrupted(conds, quorum_evicted=findings.quorum_evicted,
                             lost=lost_message(findings.lost, pg, members) if findings.lost else "",
                             runners=runners_message(findings.runners) if findings.runners else "",
                             fresh=outcome is Outcome.RELEASED, placed=placed, min_member=m,
                             whole=recovery.policy_of(pg.metadata.annotations).whole)
    cond_mod.write_members_waiting(conds, waiting=bool(findings.waiting), message=verdict_message, outcome=outcome)
    step = findings.recovery
    failed = step is not None and step.record is not None and step.record.failed
    cond_mod.write_satisfied(conds, released=bool(status.scheduleStartTime) and status.phase not in (None, "Pending"),
                             reached=reached_quorum(pg), placed=quorum_count(pg, members, status.succeeded),
                             min_member=m, finished=status.phase == "Finished",
                             lost=departures_text(findings.lost),
                             failed=step.message if failed and step is not None else "")
    if step is not None:
        cond_mod.write_recovery(conds, active=step.record is not None, evicted=step.record is not None
                                and step.record.rounds > 0, failed=failed, message=step.message)
    update: dict[str, Any] = {"conditions": conds.to_list()}
    if failed and status.phase != "Finished":
        update["phase"] = "Failed"  # the recovery's rounds are used up (docs/semantics.md)
    return status.model_copy(update=update)


# -- opt-in PodDisruptionBudget per running group ------------------------------------------------


def pdb_action(phase: str) -> str:
    """What the PodDisruptionBudget of a group in ``phase`` should do: ``"ensure"`` (Scheduled,
    Running: the gang holds its quorum), ``"delete"`` (Finished, Failed, Pending: nothing to
    protect), ``"keep"`` (Scheduling: a released group that lost members keeps its budget, kept
    in step with minMember, until it finishes)."""
    if phase in ("Scheduled", "Running"):
        return "ensure"
    if phase in ("Finished", "Failed", "Pending", ""):
        return "delete"
    return "keep"


def pdb_manifest(pg: PodGroup, uid: str) -> dict[str, Any]:
    """The ``policy/v1`` PodDisruptionBudget of PodGroup ``pg`` (uid ``uid``): same name and
    namespace, ``minAvailable = spec.minMember``, selecting the group label, owned by the PodGroup
    (garbage collection removes it with the group) and labelled as managed by cogate."""
    meta = pg.metadata
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "labels": {MANAGED_BY_LABEL: api.COMPONENT, api.POD_GROUP_LABEL: meta.name},
            "ownerReferences": [{"apiVersion": api.API_VERSION, "kind": api.KIND, "name": meta.name,
                                 "uid": uid, "controller": True}],
        },
        "spec": {"minAvailable": min_member_of(pg),
                 "selector": {"matchLabels": {api.POD_GROUP_LABEL: meta.name}}},
    }
