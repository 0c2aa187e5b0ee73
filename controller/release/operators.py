"""Operators whose size can never complete their group (pure): RayCluster, MPIJob, PyTorchJob.

An operator keeps as many pods as its object says; when an edit makes that fewer than the
PodGroup's minMember (a RayCluster scaled from 4 to 2 workers under minMember 5, an MPIJob's
workers edited down), the gang can never form again, and operators do not update the PodGroup
they made (ray-project/kuberay#5205, open). :func:`size` reads how many pods the owner will keep
(:class:`Size`), :func:`judge` says when that is below minMember (a :class:`Verdict` with the text
for the PodGroup and the owner). Rules, each from the operator's own API:

* **RayCluster** (``ray.io/v1``, KubeRay ``ray-operator/apis/ray/v1/raycluster_types.go``): one
  head pod, plus per ``workerGroupSpecs[i]``: ``replicas`` (default ``minReplicas``, else 0)
  x ``numOfHosts`` (default 1); a group with ``suspend: true`` keeps none. With
  ``enableInTreeAutoscaling`` the autoscaler may grow a group up to ``maxReplicas``: that is
  the most it keeps. ``spec.suspend: true``: 0 until resumed (Normal, not a Warning).
* **MPIJob** (``kubeflow.org/v2beta1``, kubeflow/mpi-operator ``pkg/apis/kubeflow/v2beta1``):
  ``mpiReplicaSpecs.Launcher.replicas`` (default 1) + ``mpiReplicaSpecs.Worker.replicas``
  (default 0); ``runPolicy.suspend``: 0 until resumed.
* **PyTorchJob** (``kubeflow.org/v1``, kubeflow/training-operator ``pkg/apis/kubeflow.org/v1``):
  the sum of ``pytorchReplicaSpecs.*.replicas`` (each default 1: ``setDefaultReplicas``);
  with ``elasticPolicy.maxReplicas`` the workers may grow to it; ``runPolicy.suspend``: 0.

Plain data in, plain data out; :func:`size` raises ``ValueError`` naming the field on a
malformed object (the shell then says nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cogate.controller.model.readers import array, integer, mapping

__all__ = ["RAYCLUSTER", "MPIJOB", "PYTORCHJOB", "KINDS", "Size", "Verdict", "size", "judge"]

RAYCLUSTER = ("ray.io", "RayCluster")
MPIJOB = ("kubeflow.org", "MPIJob")
PYTORCHJOB = ("kubeflow.org", "PyTorchJob")
#: ``(API group, kind)`` -> (the API version read, the resource), for the shell's ``get``.
KINDS: Mapping[tuple[str, str], tuple[str, str]] = {
    RAYCLUSTER: ("v1", "rayclusters"), MPIJOB: ("v2beta1", "mpijobs"), PYTORCHJOB: ("v1", "pytorchjobs")}


@dataclass(frozen=True)
class Size:
    """How many pods the owner keeps at most (``pods``), in words (``detail``: "head 1 + workers 2
    (workerGroupSpecs[0] 'small' replicas 2)"), ``suspended`` (0 until resumed), and the field a
    user scales (``field``)."""

    pods: int
    detail: str
    field: str
    suspended: bool = False


def _ray(spec: Mapping[str, Any]) -> Size:
    if spec.get("suspend") is True:
        return Size(0, "suspended (spec.suspend)", "spec.suspend", suspended=True)
    autoscaling = spec.get("enableInTreeAutoscaling") is True
    workers, parts = 0, []
    for i, raw in enumerate(array(spec.get("workerGroupSpecs"), "spec.workerGroupSpecs")):
        path = f"spec.workerGroupSpecs[{i}]"
        g = mapping(raw, path)
        if g.get("suspend") is True:
            parts.append(f"{path} suspended")
            continue
        low = integer(g.get("minReplicas"), f"{path}.minReplicas", 0, minimum=0)
        n = integer(g.get("replicas"), f"{path}.replicas", low, minimum=0)
        if autoscaling:
            n = max(n, integer(g.get("maxReplicas"), f"{path}.maxReplicas", n, minimum=0))
        hosts = integer(g.get("numOfHosts"), f"{path}.numOfHosts", 1, minimum=1)
        workers += n * hosts
        what = f"{path} {g.get('groupName', '')!r} {'maxReplicas' if autoscaling else 'replicas'} {n}"
        parts.append(what + (f" x numOfHosts {hosts}" if hosts != 1 else ""))
    detail = f"head 1 + workers {workers}" + (f" ({'; '.join(parts)})" if parts else "")
    return Size(1 + workers, detail, "spec.workerGroupSpecs[*].replicas")


def _replica_specs(specs: Mapping[str, Any], path: str, default: int) -> tuple[int, list[str]]:
    total, parts = 0, []
    for role in sorted(specs):
        n = integer(mapping(specs[role], f"{path}.{role}").get("replicas"), f"{path}.{role}.replicas", default,
                    minimum=0)
        total += n
        parts.append(f"{role} {n}")
    return total, parts


def _mpi(spec: Mapping[str, Any]) -> Size:
    if mapping(spec.get("runPolicy"), "spec.runPolicy").get("suspend") is True:
        return Size(0, "suspended (spec.runPolicy.suspend)", "spec.runPolicy.suspend", suspended=True)
    specs = mapping(spec.get("mpiReplicaSpecs"), "spec.mpiReplicaSpecs")
    launcher = integer(mapping(specs.get("Launcher"), "spec.mpiReplicaSpecs.Launcher").get("replicas"),
                       "spec.mpiReplicaSpecs.Launcher.replicas", 1, minimum=0) if "Launcher" in specs else 1
    workers = integer(mapping(specs.get("Worker"), "spec.mpiReplicaSpecs.Worker").get("replicas"),
                      "spec.mpiReplicaSpecs.Worker.replicas", 0, minimum=0)
    return Size(launcher + workers, f"launcher {launcher} + workers {workers}",
                "spec.mpiReplicaSpecs.Worker.replicas")


def _pytorch(spec: Mapping[str, Any]) -> Size:
    if mapping(spec.get("runPolicy"), "spec.runPolicy").get("suspend") is True:
        return Size(0, "suspended (spec.runPolicy.suspend)", "spec.runPolicy.suspend", suspended=True)
    specs = mapping(spec.get("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs")
    total, parts = _replica_specs(specs, "spec.pytorchReplicaSpecs", 1)
    elastic = mapping(spec.get("elasticPolicy"), "spec.elasticPolicy").get("maxReplicas")
    if elastic is not None and "Worker" in specs:
        most = integer(elastic, "spec.elasticPolicy.maxReplicas", 0, minimum=0)
        workers = integer(mapping(specs["Worker"], "spec.pytorchReplicaSpecs.Worker").get("replicas"),
                          "spec.pytorchReplicaSpecs.Worker.replicas", 1, minimum=0)
        if most > workers:
            total += most - workers
            parts.append(f"elasticPolicy.maxReplicas {most}")
    return Size(total, " + ".join(parts) or "no replicas", "spec.pytorchReplicaSpecs.Worker.replicas")


def size(kind: tuple[str, str], raw: Mapping[str, Any]) -> Size | None:
    """How many pods owner ``raw`` (API JSON of ``kind``) keeps at most; ``None`` for a kind not in
    :data:`KINDS`. Raises ``ValueError`` naming the field on a malformed object."""
    spec = mapping(mapping(raw, kind[1]).get("spec"), "spec")
    read = {RAYCLUSTER: _ray, MPIJOB: _mpi, PYTORCHJOB: _pytorch}.get(kind)
    return None if read is None else read(spec)


@dataclass(frozen=True)
class Verdict:
    """The owner can never complete the group: ``message`` (for the PodGroup's condition and event,
    and the owner's event), ``warning`` (False while it is only suspended), ``most`` (its pods)."""

    message: str
    warning: bool
    most: int


def judge(owner: str, s: Size, min_member: int, following: bool = False) -> Verdict | None:
    """``owner`` (``RayCluster team/rc``) of size ``s`` can never make ``min_member`` members: the
    words and the fix (``following``: the group follows its owner's size, annotation
    ``cogate.dev/follow-owner-size``, so it is said as information); ``None`` when it can."""
    if s.pods >= min_member:
        return None
    if s.suspended:
        return Verdict(f"{owner} is {s.detail} and keeps no pods until resumed", False, 0)
    if following:
        return Verdict(f"{owner} keeps at most {s.pods} pods ({s.detail}), fewer than spec.minMember {min_member}: "
                       f"the gang follows its owner's size (annotation cogate.dev/follow-owner-size) and forms with "
                       f"{s.pods}", False, s.pods)
    return Verdict(f"{owner} keeps at most {s.pods} pods ({s.detail}), fewer than minMember {min_member}: the gang "
                   f"can never form; fix: scale {s.field} so it keeps at least {min_member}, lower the PodGroup's "
                   "minMember, or annotate the PodGroup cogate.dev/follow-owner-size=true", True, s.pods)
