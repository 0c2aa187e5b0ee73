"""Role minimums of a PodGroup (pure): the annotations that state them and the role of a member.

Real gangs are not a bag of identical pods: an MPIJob is a launcher and workers, a RayCluster a
head, CPU workers and GPU workers. A PodGroup may state a minimum per role in the annotation
:data:`ROLE_MINIMUMS_ANNOTATION`, a JSON object of role -> minimum (an int >= 1), e.g.
``{"launcher": 1, "worker": 4}``. The role of a member is the value of the label named in
:data:`ROLE_LABEL_ANNOTATION` when set, else the first of :data:`DEFAULT_ROLE_LABELS` the pod
carries (the labels the operators already write); a LeaderWorkerSet pod's role is ``leader``
(worker-index ``0``) or ``worker``. A member of no role counts towards minMember only.

The planner (:mod:`cogate.controller.planning.roles`) releases a group only when every role's
minimum fits as well as minMember, and places every role's minimum before any extra member
(docs/semantics.md, "Roles"). An annotation that cannot be read holds the group
``Unschedulable`` with :class:`RolesError`'s text (never a crash, never a silent skip: Volcano
skips ``minTaskMember`` when its job-level minimum is below the sum; here both hold).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cogate.controller.model.records import PodInfo

__all__ = ["ROLE_MINIMUMS_ANNOTATION", "ROLE_LABEL_ANNOTATION", "DEFAULT_ROLE_LABELS", "LWS_WORKER_INDEX_LABEL",
           "Roles", "RolesError", "parse", "role_of", "count_by_role"]

#: PodGroup annotation: JSON object role -> minimum number of members of that role (int >= 1).
ROLE_MINIMUMS_ANNOTATION = "cogate.dev/role-minimums"
#: PodGroup annotation: the pod label whose value is a member's role (default: :data:`DEFAULT_ROLE_LABELS`).
ROLE_LABEL_ANNOTATION = "cogate.dev/role-label"
#: LeaderWorkerSet's label of a pod's index in its group (``0`` is the leader).
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
#: The labels operators write that name a pod's role, in the order they are read: the
#: training-operator (``training.kubeflow.org/replica-type``: ``master``, ``worker``, ``ps``, ...), the
#: MPI operator v2 (``training.kubeflow.org/job-role``: ``launcher``, ``worker``), KubeRay (``ray.io/group``: ``headgroup`` or the worker group's
#: name; ``ray.io/node-type``: ``head``/``worker``), JobSet (the replicated job), Volcano (the
#: task), LeaderWorkerSet (worker-index: ``leader`` for ``0``, else ``worker``).
DEFAULT_ROLE_LABELS = ("training.kubeflow.org/replica-type", "training.kubeflow.org/job-role", "ray.io/group", "ray.io/node-type",
                       "jobset.sigs.k8s.io/replicatedjob-name", "volcano.sh/task-spec", LWS_WORKER_INDEX_LABEL)
#: At most this many roles in one PodGroup (a bound on the planner's work and on status text).
MAX_ROLES = 32


class RolesError(ValueError):
    """An annotation of roles that cannot be read; the text names the annotation and the fault."""


@dataclass(frozen=True)
class Roles:
    """A PodGroup's role minimums: ``minimums`` sorted ``(role, minimum)`` pairs; ``label`` the
    pod label naming the role ('' = :data:`DEFAULT_ROLE_LABELS`)."""

    minimums: tuple[tuple[str, int], ...]
    label: str = ""

    @property
    def total(self) -> int:
        """The sum of the role minimums (members a release needs at least, besides minMember)."""
        return sum(n for _, n in self.minimums)

    def minimum(self, role: str) -> int:
        """The minimum of ``role`` (0 for a role without one)."""
        return dict(self.minimums).get(role, 0)


def parse(annotations: Mapping[str, str] | None) -> Roles | None:
    """The :class:`Roles` a PodGroup's ``metadata.annotations`` state, or None without
    :data:`ROLE_MINIMUMS_ANNOTATION`. Raises :class:`RolesError` when it is not a JSON object of
    non-empty role names (at most 63 characters, a label value) to ints >= 1 (at most
    :data:`MAX_ROLES` roles), or when :data:`ROLE_LABEL_ANNOTATION` is set but empty."""
    annotations = annotations or {}
    raw = annotations.get(ROLE_MINIMUMS_ANNOTATION)
    label = annotations.get(ROLE_LABEL_ANNOTATION)
    if label is not None and not label.strip():
        raise RolesError(f"annotation {ROLE_LABEL_ANNOTATION}: empty (name a pod label, or remove it)")
    if raw is None:
        return None
    where = f"annotation {ROLE_MINIMUMS_ANNOTATION}"
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise RolesError(f"{where}: not JSON ({e.msg} at character {e.pos})") from None
    if not isinstance(value, dict) or not value:
        raise RolesError(f'{where}: want a JSON object of role -> minimum, e.g. {{"launcher": 1, "worker": 4}}')
    if len(value) > MAX_ROLES:
        raise RolesError(f"{where}: {len(value)} roles, at most {MAX_ROLES}")
    out = []
    for role, n in value.items():
        if not role or len(role) > 63:
            raise RolesError(f"{where}: role {role!r} is not a label value (1 to 63 characters)")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise RolesError(f"{where}: minimum of role {role!r} is {json.dumps(n)}, want an integer >= 1")
        out.append((role, n))
    return Roles(tuple(sorted(out)), (label or "").strip())


def role_of(p: PodInfo, label: str = "") -> str:
    """The role of member ``p``: the value of pod label ``label`` when given, else of the first of
    :data:`DEFAULT_ROLE_LABELS` it carries (LeaderWorkerSet's worker-index as ``leader``/``worker``);
    '' when none."""
    labels = p.labels
    if label:
        return labels.get(label, "")
    for key in DEFAULT_ROLE_LABELS:
        value = labels.get(key)
        if value:
            if key == LWS_WORKER_INDEX_LABEL:
                return "leader" if value == "0" else "worker"
            return value
    return ""


def count_by_role(members: Iterable[PodInfo], roles: Roles) -> dict[str, int]:
    """How many of ``members`` have each role of ``roles`` (every role of its minimums a key)."""
    out = {r: 0 for r, _ in roles.minimums}
    for m in members:
        r = role_of(m, roles.label)
        if r in out:
            out[r] += 1
    return out
