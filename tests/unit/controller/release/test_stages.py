"""Staged creation named (issue 20 item 3): the pure rule (controller/release/stages.py) for each owner
kind and policy, and the room that reads such owners (controller/release/ownership.py) with its events."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import POD_GROUP_LABEL
from cogate.controller.release import stages
from cogate.controller.kube.events import Emitter
from cogate.controller.status.inputs import group_object
from cogate.controller.kube.metrics import Metrics
from cogate.controller.release.ownership import Ownership
from cogate.controller.model.records import PodInfo
from cogate.controller.release.stages import JOBSET, MPIJOB, staged
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome

from tests.builders import Harness, raw_pg, raw_pod, verdict

NS = "team"
GATE = ("scheduling.x-k8s.io/pod-group",)
WAIT = "WaitForWorkersReady"
MPI_OWNER = ("kubeflow.org/v2beta1", "MPIJob", "pi", "mpi-uid")


def mpijob(workers=4, policy="WaitForWorkersReady", **spec):
    replicas = {"Launcher": {"replicas": 1, "template": {}}}
    if workers is not None:
        replicas["Worker"] = {"replicas": workers, "template": {}}
    body = {"mpiReplicaSpecs": replicas, **spec}
    if policy is not None:
        body["launcherCreationPolicy"] = policy
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": NS, "uid": "mpi-uid"}, "spec": body}


def mpi_member(i, role="worker", phase="Pending"):
    return PodInfo(NS, f"pi-{role}-{i}", f"u-{role}-{i}", labels={POD_GROUP_LABEL: "pi", stages.JOB_ROLE_LABEL: role},
                   phase=phase, gates=GATE, owner=MPI_OWNER)


def rj(name, replicas=1, parallelism=None, completions=None, group="pg", depends=()):
    job_spec = {"template": {"metadata": {"labels": {POD_GROUP_LABEL: group} if group else {}}, "spec": {}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    out = {"name": name, "replicas": replicas, "template": {"spec": job_spec}}
    if depends:
        out["dependsOn"] = [{"name": d, "status": s} for d, s in depends]
    return out


def jobset(*rjs, **spec):
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": NS, "uid": "js-uid"},
            "spec": {"replicatedJobs": list(rjs), **spec}}


def js_member(i, rjob="driver", phase="Pending"):
    return PodInfo(NS, f"js-{rjob}-0-{i}", f"u-{rjob}-{i}",
                   labels={POD_GROUP_LABEL: "pg", stages.JOBSET_NAME_LABEL: "js", stages.REPLICATED_JOB_LABEL: rjob},
                   phase=phase, gates=GATE, owner=("batch/v1", "Job", f"js-{rjob}-0", f"job-{rjob}"))


# -- MPIJob ------------------------------------------------------------------------------------


def test_mpijob_waiting_for_ready_workers_with_the_launcher_counted_is_named_with_the_fix():
    found = staged(MPIJOB, mpijob(4), "pi", [mpi_member(i) for i in range(4)], 5)
    assert found is not None and found.owner == "MPIJob team/pi" and found.most == 4
    assert found.message == (
        "MPIJob team/pi creates its launcher only after its 4 workers are Ready (launcherCreationPolicy: "
        "WaitForWorkersReady), but minMember 5 counts the launcher: the workers stay gated and a gated pod is "
        "never Ready, so the gang cannot form (kubeflow/mpi-operator#608); set launcherCreationPolicy: "
        "AtStartup, or minMember to 4 (spec.runPolicy.schedulingPolicy.minAvailable)")


@pytest.mark.parametrize("raw, members, min_member", [
    (mpijob(4, policy="AtStartup"), [mpi_member(0)], 5),  # the launcher comes with the workers
    (mpijob(4, policy=None), [mpi_member(0)], 5),  # the default is AtStartup
    (mpijob(4), [mpi_member(0)], 4),  # minMember counts the workers only: the gang forms without the launcher
    (mpijob(4), [mpi_member(0)], 3),
    (mpijob(4), [mpi_member(0), mpi_member(0, "launcher")], 5),  # the launcher exists: staging is over
    (mpijob(4, runPolicy={"suspend": True}), [], 5),  # suspended: no workers are created at all
])
def test_mpijob_not_named(raw, members, min_member):
    assert staged(MPIJOB, raw, "pi", members, min_member) is None


def test_mpijob_members_are_counted_by_role_and_failed_ones_are_not_present():
    ms = [mpi_member(0), mpi_member(1, phase="Failed"), mpi_member(2)]
    found = staged(MPIJOB, mpijob(3), "pi", ms, 4)
    assert found is not None and "after its 3 workers are Ready" in found.message
    assert "after its 1 worker is Ready" in staged(MPIJOB, mpijob(1), "pi", [], 2).message
    # a Failed launcher is not a launcher present: staging is not over
    assert staged(MPIJOB, mpijob(3), "pi", ms + [mpi_member(0, "launcher", phase="Failed")], 4) is not None


def test_mpijob_without_workers_says_atstartup_only():
    found = staged(MPIJOB, mpijob(None), "pi", [], 1)
    assert found is not None and found.most == 0
    assert found.message.endswith("set launcherCreationPolicy: AtStartup") and "minMember to 0" not in found.message


# -- JobSet ------------------------------------------------------------------------------------


def test_jobset_depends_on_a_member_replicated_job_is_named():
    raw = jobset(rj("driver"), rj("workers", replicas=2, parallelism=2, depends=[("driver", "Ready")]))
    found = staged(JOBSET, raw, "pg", [js_member(0)], 5)
    assert found is not None and found.most == 1
    assert found.message == (
        "JobSet team/js creates replicated job 'workers' only after 'driver' is Ready (dependsOn), whose pods are "
        "members of this PodGroup too: before that at most 1 of minMember 5 members exist, and a gated pod is never "
        "Ready, so the gang cannot form; remove that dependsOn, or give the later replicated jobs a PodGroup of their "
        "own, or set minMember to 1")


def test_jobset_startup_policy_in_order_is_staged_too():
    raw = jobset(rj("a", replicas=2), rj("b", replicas=3), startupPolicy={"startupPolicyOrder": "InOrder"})
    found = staged(JOBSET, raw, "pg", [], 5)
    assert found is not None and found.most == 2 and "'b' only after 'a' is Ready" in found.message


def test_jobset_chain_through_a_non_member_is_blocked_and_said_so():
    raw = jobset(rj("a", replicas=2), rj("init", group="", depends=[("a", "Complete")]),
                 rj("b", replicas=2, depends=[("init", "Complete")]))
    found = staged(JOBSET, raw, "pg", [], 4)
    assert found is not None and found.most == 2
    assert "'b' only after 'init' is Complete (dependsOn), which itself waits for members" in found.message
    assert "a gated pod is never Complete" in found.message


@pytest.mark.parametrize("raw, members, min_member", [
    # depends on a non-member (an initializer that runs on its own): only staged, not stuck
    (jobset(rj("init", group=""), rj("workers", replicas=4, depends=[("init", "Complete")])), [], 4),
    # the first stage alone reaches minMember: the later one joins the released group
    (jobset(rj("driver", replicas=4), rj("workers", replicas=2, depends=[("driver", "Ready")])), [], 4),
    # the later replicated job is not a member of this group
    (jobset(rj("driver", replicas=1), rj("workers", group="other", depends=[("driver", "Ready")])), [], 2),
    # members of the later replicated job exist: its dependency was met
    (jobset(rj("driver"), rj("workers", replicas=2, depends=[("driver", "Ready")])), [js_member(0, "workers")], 3),
    (jobset(rj("driver"), rj("workers", replicas=2)), [], 3),  # no dependsOn
    (jobset(rj("driver"), rj("workers", depends=[("driver", "Ready")]), suspend=True), [], 2),
    (jobset(), [], 2),
])
def test_jobset_not_named(raw, members, min_member):
    assert staged(JOBSET, raw, "pg", members, min_member) is None


def test_jobset_pods_of_a_replicated_job_are_replicas_times_parallelism_at_most_completions():
    raw = jobset(rj("a", replicas=3, parallelism=4, completions=2), rj("b", depends=[("a", "Ready")]))
    assert staged(JOBSET, raw, "pg", [], 7).most == 6
    assert staged(JOBSET, raw, "pg", [], 6) is None


def test_jobset_member_replicated_job_known_from_a_member_label():
    # the template carries no label (the pods got it another way): a present member names its replicated job
    raw = jobset(rj("driver", group=""), rj("workers", group="", depends=[("driver", "Ready")]))
    assert staged(JOBSET, raw, "pg", [js_member(0)], 3) is None  # 'workers' is not known as a member
    raw["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["metadata"]["labels"] = {POD_GROUP_LABEL: "pg"}
    assert staged(JOBSET, raw, "pg", [js_member(0)], 3) is not None


# -- unknown kinds and malformed owners ----------------------------------------------------------


def test_unknown_kind_is_never_judged():
    assert staged(("ray.io", "RayCluster"), {"spec": {}}, "pg", [], 5) is None


@pytest.mark.parametrize("kind, raw, field", [
    (MPIJOB, {"spec": {"launcherCreationPolicy": 3}}, "spec.launcherCreationPolicy"),
    (MPIJOB, {"spec": {"launcherCreationPolicy": WAIT, "mpiReplicaSpecs": {"Worker": {"replicas": "4"}}}},
     "spec.mpiReplicaSpecs.Worker.replicas"),
    (MPIJOB, {"spec": {"launcherCreationPolicy": WAIT, "mpiReplicaSpecs": []}}, "spec.mpiReplicaSpecs"),
    (JOBSET, {"spec": {"replicatedJobs": {}}}, "spec.replicatedJobs"),
    (JOBSET, {"spec": {"replicatedJobs": [{"name": "a", "replicas": -1}]}}, "spec.replicatedJobs[0].replicas"),
    (JOBSET, {"spec": {"replicatedJobs": [{"name": "a", "dependsOn": ["b"]}]}}, "spec.replicatedJobs[0].dependsOn[0]"),
    (JOBSET, {"metadata": "x"}, "metadata"),
    (JOBSET, [], "JobSet"),
])
def test_malformed_owner_raises_value_error_naming_the_field(kind, raw, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        staged(kind, raw, "pg", [], 3)


@settings(max_examples=200, deadline=None)
@given(workers=st.integers(0, 8), min_member=st.integers(1, 10), here=st.integers(0, 8),
       launcher=st.booleans(), policy=st.sampled_from(["AtStartup", "WaitForWorkersReady", None]))
def test_mpijob_property_named_exactly_when_the_workers_alone_cannot_reach_minmember(workers, min_member, here,
                                                                                      launcher, policy):
    ms = [mpi_member(i) for i in range(min(here, workers))] + ([mpi_member(0, "launcher")] if launcher else [])
    found = staged(MPIJOB, mpijob(workers, policy=policy), "pi", ms, min_member)
    assert (found is not None) == (policy == "WaitForWorkersReady" and not launcher and workers < min_member)
    if found is not None:
        assert found.most == workers < min_member


# -- the room: read by name, cached, quiet on 404, events on the PodGroup and the owner -------------


class CustomReads:
    def __init__(self, objects):
        self.objects = objects
        self.calls = []

    def __call__(self, kind, version, namespace, name):
        self.calls.append((kind[1], version, name))
        obj = self.objects.get((kind[1], name))
        if isinstance(obj, Exception):
            raise obj
        return obj


class Recorded:
    def __init__(self):
        self.events = []

    def record(self, ref, notice):
        self.events.append((ref.kind, ref.name, notice.type, notice.reason, notice.message))


def room(reads, clock):
    events = Emitter(None)
    rec = Recorded()
    events.recorder = rec
    events.record = rec.record  # type: ignore[method-assign]
    return Ownership(None, events, Metrics(), lambda: clock[0], read_custom=reads, settle_seconds=0), rec


def mpi_group(min_member=5):
    raw = raw_pg("pi", min_member=min_member)
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi",
                                           "uid": "mpi-uid", "controller": True}]
    return group_object(raw)


def waiting(ms, min_member=5, name="pi"):
    return (GroupRequest(NS, name, min_member, 0.0, False, tuple(ms)),
            GroupVerdict(NS, name, Outcome.WAITING_FOR_MEMBERS, {}, 0, f"{len(ms)} of {min_member} members present"))


def test_room_names_the_staged_mpijob_once_on_the_podgroup_and_the_owner_and_caches_the_read():
    clock = [0.0]
    reads = CustomReads({("MPIJob", "pi"): mpijob(4)})
    r, rec = room(reads, clock)
    g = mpi_group()
    req, v = waiting([mpi_member(i) for i in range(4)])
    out = r.explain(g, req, v, 1.0)
    assert out.message.startswith("4 of 5 members present; MPIJob team/pi creates its launcher only after")
    assert r.explained(g.uid)
    assert [e[:4] for e in rec.events] == [("PodGroup", "pi", "Warning", "StagedCreation"),
                                           ("MPIJob", "pi", "Warning", "StagedCreation")]
    assert rec.events[0][4] == rec.events[1][4] == out.message.split("; ", 1)[1]
    assert reads.calls == [("MPIJob", "v2beta1", "pi")]
    r.explain(g, req, v, 2.0)
    assert len(rec.events) == 2 and len(reads.calls) == 1  # de-duplicated, cached
    # released: nothing read, the finding forgotten
    released = GroupVerdict(NS, "pi", Outcome.RELEASED, {}, 5, "fits 5 of 5")
    assert r.explain(g, req, released, 3.0) is released and not r.explained(g.uid)


@pytest.mark.parametrize("obj", [None, RuntimeError("connection reset"), {"spec": {"launcherCreationPolicy": 1}},
                                 mpijob(4, policy="AtStartup")])
def test_room_says_nothing_for_an_absent_unreadable_malformed_or_unstaged_owner(obj):
    r, rec = room(CustomReads({("MPIJob", "pi"): obj}), [0.0])
    req, v = waiting([mpi_member(i) for i in range(4)])
    assert r.explain(mpi_group(), req, v, 1.0) is v and rec.events == []


def test_room_reads_only_groups_waiting_for_members_with_an_owner_of_a_staged_kind():
    reads = CustomReads({("MPIJob", "pi"): mpijob(4)})
    r, _ = room(reads, [0.0])
    ms = [mpi_member(i) for i in range(4)]
    req, _ = waiting(ms)
    for v in (GroupVerdict(NS, "pi", Outcome.INSUFFICIENT_CAPACITY, {}, 0, "fits 0 of 5"),
              GroupVerdict(NS, "pi", Outcome.UNSCHEDULABLE, {}, 0, "no")):
        assert r.explain(mpi_group(), req, v, 1.0) is v
    plain = group_object(raw_pg("pi", min_member=5))  # no owner of a staged kind
    bare = [PodInfo(NS, f"p{i}", f"p{i}", labels={POD_GROUP_LABEL: "pi"}, gates=GATE) for i in range(2)]
    req2, v2 = waiting(bare)
    assert r.explain(plain, req2, v2, 1.0) is v2
    assert reads.calls == []


def test_room_finds_a_jobset_from_its_members_label_and_skips_the_owners_judgment():
    reads = CustomReads({("JobSet", "js"): jobset(rj("driver"), rj("workers", replicas=4,
                                                                   depends=[("driver", "Ready")]))})
    r, rec = room(reads, [0.0])
    req, v = waiting([js_member(0)], name="pg")
    out = r.explain(group_object(raw_pg("pg", min_member=5)), req, v, 1.0)
    assert "JobSet team/js creates replicated job 'workers' only after 'driver' is Ready" in out.message
    assert "OwnerCannotComplete" not in {e[3] for e in rec.events}
    assert ("JobSet", "js", "Warning", "StagedCreation") in {e[:4] for e in rec.events}
    assert reads.calls == [("JobSet", "v1alpha2", "js")]


def test_room_ignores_another_object_under_the_owners_name():
    other = mpijob(4)
    other["metadata"]["uid"] = "someone-else"
    r, rec = room(CustomReads({("MPIJob", "pi"): other}), [0.0])
    req, v = waiting([mpi_member(i) for i in range(4)])
    assert r.explain(mpi_group(), req, v, 1.0) is v and rec.events == []


# -- a reconciler pass: the Released condition says it, the owner hears it -----------------------


def test_reconciler_pass_names_the_staged_owner_in_the_released_condition():
    pods = [raw_pod(f"w{i}") for i in range(4)]
    for p in pods:
        p["metadata"]["labels"][stages.JOB_ROLE_LABEL] = "worker"
        p["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi",
                                             "uid": "mpi-uid", "controller": True}]
    pg = raw_pg(min_member=5)
    h = Harness(pods, [pg], [verdict("WaitingForMembers", message="4 of 5 members present")])
    reads = CustomReads({("MPIJob", "pi"): mpijob(4)})
    h.rec.owners = Ownership(None, h.rec.events, h.rec.metrics, lambda: h.now, read_custom=reads, settle_seconds=0)
    h.run()
    rel = next(c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Released")
    assert rel["reason"] == "WaitingForMembers"
    assert rel["message"].startswith("4 of 5 members present; MPIJob team/pi creates its launcher only after its 4 "
                                     "workers are Ready")
    assert ("Warning", "StagedCreation", rel["message"].split("; ", 1)[1]) in h.events
    # explained, so the wait is relayed to the gated workers; their owner heard StagedCreation already
    assert sorted((kind, name, reason) for kind, name, _, reason, _ in h.relayed) == [
        ("Pod", f"w{i}", "WaitingForMembers") for i in range(4)]
    assert all(t == "Warning" for _, _, t, _, _ in h.relayed)
