"""Owners that create their members in stages (pure): why such a gang can never form.

A gang scheduler releases a group once minMember members exist and fit. Some owners create
part of their pods only after the others are **Ready**; a gated pod is never Ready, so when
the members created first are fewer than minMember, the owner waits for the gang and the
gang for the owner, for ever: every gang scheduler deadlocks there (kubeflow/mpi-operator
#608). :func:`staged` names such an owner and the fix, from the owner's object as the shell
read it (API JSON), the group's live members and minMember. Rules, each from the owner
controller's source:

* **MPIJob** (``kubeflow.org``, kubeflow/mpi-operator v0.8.0 ``pkg/apis/kubeflow/v2beta1/types.go``
  ``LauncherCreationPolicy``; ``pkg/controller/mpi_job_controller.go`` ``syncHandler``): with
  ``spec.launcherCreationPolicy: WaitForWorkersReady`` the launcher Job is created only once
  every worker pod is Ready (``countReadyWorkerPods(worker) == len(worker)``); before that at
  most ``mpiReplicaSpecs.Worker.replicas`` (default 0, ``setDefaultsTypeWorker``) members
  exist. The operator's PodGroup counts the launcher (minMember = workers + 1 unless
  ``runPolicy.schedulingPolicy.minAvailable``, ``pkg/controller/podgroup.go``
  ``calculateMinAvailable``), so minMember above the workers is the deadlock. Not judged
  once a launcher member exists (label ``training.kubeflow.org/job-role: launcher``) or while
  the MPIJob is suspended (``runPolicy.suspend``: the operator creates no workers).
* **JobSet** (``jobset.x-k8s.io/v1alpha2``, kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``):
  a replicated job with ``dependsOn`` is created only once the named replicated job is
  ``Ready`` (all its Jobs' pods ready or done) or ``Complete``; with the deprecated
  ``startupPolicy.startupPolicyOrder: InOrder`` each replicated job waits for the previous
  one to be Ready. A replicated job is *blocked* when it waits for one whose pods are
  members (they are gated: never Ready, never Complete) or for a blocked one; replicated
  jobs that wait only for non-members (an initializer) are not (it runs on its own). Members
  of a replicated job: its pod template's label ``scheduling.x-k8s.io/pod-group`` names the
  group, or a live member carries ``jobset.sigs.k8s.io/replicatedjob-name`` naming it. Pods
  of one: ``replicas`` (default 1) x ``parallelism`` (default 1; at most ``completions``).
  The deadlock: a blocked member replicated job and fewer than minMember pods in the
  unblocked ones. A replicated job with members present is never blocked (its dependency
  was met). Not judged while the JobSet is suspended (``spec.suspend``).
* any other kind: never judged.

Plain data in, plain data out. :func:`staged` raises ``ValueError`` naming the field on a
malformed object (the shell treats it as unknown); never on a well-formed one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.readers import array, integer, mapping, text
from cogate.controller.model.records import PodInfo

__all__ = ["MPIJOB", "JOBSET", "KINDS", "JOB_ROLE_LABEL", "JOBSET_NAME_LABEL", "REPLICATED_JOB_LABEL", "Staged",
           "staged"]

#: ``(API group, kind)`` of the owners judged here.
MPIJOB = ("kubeflow.org", "MPIJob")
JOBSET = ("jobset.x-k8s.io", "JobSet")
#: Each kind's API version read and resource (plural), for the shell's ``get``.
KINDS: Mapping[tuple[str, str], tuple[str, str]] = {MPIJOB: ("v2beta1", "mpijobs"), JOBSET: ("v1alpha2", "jobsets")}
#: The MPI operator's role label on its pods (``launcher``, ``worker``).
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
#: The JobSet controller's labels on its Jobs' pods.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


@dataclass(frozen=True)
class Staged:
    """A staged owner that cannot complete the group: ``owner`` (``MPIJob team/x``), how many
    members ``most`` can exist before its later stage, and ``message`` (the cause and the fix)."""

    owner: str
    most: int
    message: str


def staged(kind: tuple[str, str], raw: Mapping[str, Any], group: str, members: Sequence[PodInfo],
           min_member: int) -> Staged | None:
    """The staged-creation finding of owner ``raw`` (API JSON, of ``kind`` = ``(API group,
    kind)``) for PodGroup ``group`` (its name) with live ``members`` and ``min_member``, or None
    (module doc for the rules). Raises ``ValueError`` naming the field on a malformed object."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{kind[1]}: not an object")
    meta = mapping(raw.get("metadata"), "metadata")
    spec = mapping(raw.get("spec"), "spec")
    name = f"{kind[1]} {text(meta.get('namespace'), 'metadata.namespace')}/{text(meta.get('name'), 'metadata.name')}"
    present = [m for m in members if m.phase != "Failed"]
    if kind == MPIJOB:
        return _mpijob(name, spec, present, min_member)
    if kind == JOBSET:
        return _jobset(name, spec, group, present, min_member)
    return None


def _mpijob(name: str, spec: Mapping[str, Any], present: Sequence[PodInfo], min_member: int) -> Staged | None:
    policy = text(spec.get("launcherCreationPolicy"), "spec.launcherCreationPolicy") or "AtStartup"
    run_policy = mapping(spec.get("runPolicy"), "spec.runPolicy")
    if policy != WAIT_FOR_WORKERS_READY or run_policy.get("suspend") is True:
        return None
    replicas = mapping(spec.get("mpiReplicaSpecs"), "spec.mpiReplicaSpecs")
    worker = mapping(replicas.get("Worker"), "spec.mpiReplicaSpecs.Worker")
    workers = integer(worker.get("replicas"), "spec.mpiReplicaSpecs.Worker.replicas", 0, minimum=0)
    if any(m.labels.get(JOB_ROLE_LABEL) == "launcher" for m in present) or workers >= min_member:
        return None
    noun = "worker is" if workers == 1 else "workers are"
    fix = (f"set launcherCreationPolicy: AtStartup, or minMember to {workers} "
           "(spec.runPolicy.schedulingPolicy.minAvailable)" if workers else "set launcherCreationPolicy: AtStartup")
    return Staged(name, workers,
                  f"{name} creates its launcher only after its {workers} {noun} Ready (launcherCreationPolicy: "
                  f"WaitForWorkersReady), but minMember {min_member} counts the launcher: the workers stay gated "
                  "and a gated pod is never Ready, so the gang cannot form "
                  f"(kubeflow/mpi-operator#608); {fix}")


@dataclass(frozen=True)
class _Replicated:
    name: str
    pods: int
    member: bool
    waits_for: tuple[tuple[str, str], ...]  # (replicated job, status)


def _replicated_jobs(spec: Mapping[str, Any], group: str, present: Sequence[PodInfo]) -> list[_Replicated]:
    if spec.get("replicatedJobs") is None:
        return []
    rjs = array(spec.get("replicatedJobs"), "spec.replicatedJobs")
    startup = mapping(spec.get("startupPolicy"), "spec.startupPolicy")
    in_order = startup.get("startupPolicyOrder") == "InOrder"
    with_members = {m.labels.get(REPLICATED_JOB_LABEL) for m in present}
    out: list[_Replicated] = []
    for i, rj in enumerate(rjs):
        path = f"spec.replicatedJobs[{i}]"
        rj = mapping(rj, path)
        rname = text(rj.get("name"), f"{path}.name")
        job_spec = mapping(mapping(rj.get("template"), f"{path}.template").get("spec"), f"{path}.template.spec")
        pod_meta = mapping(mapping(job_spec.get("template"), f"{path}.template.spec.template").get("metadata"),
                        f"{path}.template.spec.template.metadata")
        labels = mapping(pod_meta.get("labels"), f"{path}.template.spec.template.metadata.labels")
        parallelism = integer(job_spec.get("parallelism"), f"{path}.template.spec.parallelism", 1, minimum=0)
        completions = job_spec.get("completions")
        if completions is not None:
            parallelism = min(parallelism, integer(completions, f"{path}.template.spec.completions", 1, minimum=0))
        deps = []
        for j, d in enumerate(rj.get("dependsOn") or ()):
            d = mapping(d, f"{path}.dependsOn[{j}]")
            deps.append((text(d.get("name"), f"{path}.dependsOn[{j}].name"),
                         text(d.get("status"), f"{path}.dependsOn[{j}].status") or "Ready"))
        if in_order and i > 0 and not deps:
            deps.append((out[-1].name, "Ready"))
        out.append(_Replicated(rname, integer(rj.get("replicas"), f"{path}.replicas", 1, minimum=0) * parallelism,
                               labels.get(POD_GROUP_LABEL) == group or rname in with_members, tuple(deps)))
    return out


def _jobset(name: str, spec: Mapping[str, Any], group: str, present: Sequence[PodInfo],
            min_member: int) -> Staged | None:
    if spec.get("suspend") is True:
        return None
    rjs = _replicated_jobs(spec, group, present)
    by_name = {r.name: r for r in rjs}
    with_members = {m.labels.get(REPLICATED_JOB_LABEL) for m in present}
    blocked: dict[str, tuple[str, str]] = {}  # replicated job -> (the one it waits for, status)
    changed = True
    while changed:  # dependsOn names earlier replicated jobs only; a fixpoint is robust to any order
        changed = False
        for r in rjs:
            if r.name in blocked or r.name in with_members:
                continue
            for dep, status in r.waits_for:
                d = by_name.get(dep)
                if d is not None and (d.member or dep in blocked):
                    blocked[r.name] = (dep, status)
                    changed = True
                    break
    waiting = [r for r in rjs if r.member and r.name in blocked]
    if not waiting:
        return None
    most = sum(r.pods for r in rjs if r.member and r.name not in blocked)
    if most >= min_member:
        return None
    first = waiting[0]
    dep, status = blocked[first.name]
    more = f" (and {len(waiting) - 1} more)" if len(waiting) > 1 else ""
    whose = ("whose pods are members of this PodGroup too" if by_name[dep].member
             else "which itself waits for members of this PodGroup")
    fix = f", or set minMember to {most}" if most else ""
    return Staged(name, most,
                  f"{name} creates replicated job {first.name!r}{more} only after {dep!r} is {status} (dependsOn), "
                  f"{whose}: before that at most {most} of minMember {min_member} members exist, and a gated pod is "
                  f"never {status}, so the gang cannot form; remove that dependsOn, or give the later replicated "
                  f"jobs a PodGroup of their own{fix}")
