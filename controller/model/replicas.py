"""Replicas of a workload that share one PodGroup (pure): which members belong together.

A LeaderWorkerSet or a JobSet whose pod template names one PodGroup puts the pods of all its
replicas in it. The PodGroup's ``minMember`` then holds for the pods together, but a replica
(a LeaderWorkerSet group: a leader and its workers; a JobSet Job) is useless half-placed, so
the planner releases the members of a *new* replica of a released group together or not at
all (:meth:`cogate.controller.planning.planner.Pass.ungate_new_members`; docs/semantics.md, "Release").

The labels, as their controllers write them on every pod:

* LeaderWorkerSet: ``leaderworkerset.sigs.k8s.io/name`` (the LeaderWorkerSet),
  ``leaderworkerset.sigs.k8s.io/group-index`` (the replica), and the pod annotation
  ``leaderworkerset.sigs.k8s.io/size`` (pods per replica, leader included:
  ``PodInfo.replica_size``). The leader is created first, its workers once the leader exists.
* JobSet: ``jobset.sigs.k8s.io/jobset-name``, ``jobset.sigs.k8s.io/replicatedjob-name`` and
  ``jobset.sigs.k8s.io/job-index`` (one Job of a replicated job is one replica). Pods carry
  no replica size; the size of a replica is then taken from its largest sibling (same JobSet
  and replicated job) in the group.

:func:`replica_of` reads a member's replica; :func:`expected_size` how many members a replica
must have before it can be released; :func:`by_replica` splits members; :func:`shared_message`
is the Warning ``ReplicasSharePodGroup`` a PodGroup gets while members of several replicas share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cogate.controller.model.records import PodInfo
from cogate.controller.model.words import name_list

__all__ = ["Replica", "replica_of", "by_replica", "expected_size", "shared_message", "LWS_NAME_LABEL", "LWS_GROUP_INDEX_LABEL",
           "JOBSET_NAME_LABEL", "JOBSET_REPLICATED_JOB_LABEL", "JOBSET_JOB_INDEX_LABEL"]

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


@dataclass(frozen=True, order=True)
class Replica:
    """One replica: ``kind`` (``"LeaderWorkerSet"`` or ``"JobSet"``), ``owner`` (its name),
    ``role`` (JobSet: the replicated job; '' for LeaderWorkerSet), ``index`` (group-index or
    job-index, as written)."""

    kind: str
    owner: str
    role: str
    index: str

    @property
    def siblings(self) -> tuple[str, str, str]:
        """Replicas with the same key are of one shape (same LeaderWorkerSet, same replicated job)."""
        return (self.kind, self.owner, self.role)

    def __str__(self) -> str:
        if self.kind == "JobSet":
            return f"JobSet {self.owner} job {self.role}-{self.index}"
        return f"LeaderWorkerSet {self.owner} group {self.index}"


def replica_of(p: PodInfo) -> Replica | None:
    """The replica ``p`` belongs to, from its labels (module doc), or None (not a replica's pod)."""
    labels = p.labels
    index = labels.get(LWS_GROUP_INDEX_LABEL)
    if index:
        return Replica("LeaderWorkerSet", labels.get(LWS_NAME_LABEL, ""), "", index)
    index = labels.get(JOBSET_JOB_INDEX_LABEL)
    if index:
        return Replica("JobSet", labels.get(JOBSET_NAME_LABEL, ""), labels.get(JOBSET_REPLICATED_JOB_LABEL, ""),
                       index)
    return None


def by_replica(members: Iterable[PodInfo]) -> dict[Replica, list[PodInfo]]:
    """Members per replica (members of no replica left out), each list in the given order."""
    out: dict[Replica, list[PodInfo]] = {}
    for m in members:
        r = replica_of(m)
        if r is not None:
            out.setdefault(r, []).append(m)
    return out


def expected_size(replica: Replica, replicas: Mapping[Replica, Sequence[PodInfo]]) -> int:
    """How many members ``replica`` has when complete: the largest
    ``leaderworkerset.sigs.k8s.io/size`` its members carry, else the largest number of members
    a sibling replica (:attr:`Replica.siblings`) has in ``replicas``; 0 when neither is known.
    ``replicas``: the group's live, not Failed members per replica (:func:`by_replica`)."""
    members = replicas.get(replica, ())
    size = max((m.replica_size for m in members), default=0)
    if size:
        return size
    return max((len(ms) for r, ms in replicas.items() if r != replica and r.siblings == replica.siblings),
               default=0)


def shared_message(members: Iterable[PodInfo]) -> str:
    """The text of the Warning ``ReplicasSharePodGroup`` when live members of more than one replica
    share the PodGroup (the first 3 replicas named, then "and N more"), else ''."""
    found = sorted({r for m in members if not m.deleting and (r := replica_of(m)) is not None},
                   key=lambda r: (r.kind, r.owner, r.role, (int(r.index), "") if r.index.isdigit() else (1 << 62, r.index)))
    if len(found) < 2:
        return ""
    shown = name_list([str(r) for r in found])
    return (f"members of {len(found)} replicas share this PodGroup ({shown}): minMember counts them together, and "
            "cogate releases each new replica whole or not at all; give each replica its own PodGroup (its own "
            "scheduling.x-k8s.io/pod-group label value, minMember = the replica's size) to gang-schedule each")
