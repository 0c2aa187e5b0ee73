"""Replicas of a LeaderWorkerSet or JobSet sharing one PodGroup are released whole (issue 21, item 11).

Pods labelled as the LeaderWorkerSet controller labels them (``leaderworkerset.sigs.k8s.io/name``,
``group-index``, ``worker-index``, annotation ``leaderworkerset.sigs.k8s.io/size``; the leader
is created before its workers) and as JobSet labels them (``jobset.sigs.k8s.io/jobset-name``,
``replicatedjob-name``, ``job-index``). End to end: tests/e2e/test_promised_room.py.
"""

from __future__ import annotations

import pytest

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model import records, replicas
from cogate.controller.planning.planner import GroupRequest, Outcome, PlannerConfig, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.model.records import PodInfo
from tests.builders import node

NOW = 60_000.0
CFG = PlannerConfig()


def lws_pod(replica: int, worker: int, size: int, *, cpu: int = 1, bound_to: str = "", lws: str = "llm",
            group: str = "llm") -> PodInfo:
    name = f"{lws}-{replica}" if worker == 0 else f"{lws}-{replica}-{worker}"
    return PodInfo("team", name, f"uid-{name}",
                   labels={POD_GROUP_LABEL: group, replicas.LWS_NAME_LABEL: lws,
                           replicas.LWS_GROUP_INDEX_LABEL: str(replica),
                           "leaderworkerset.sigs.k8s.io/worker-index": str(worker)},
                   node_name=bound_to, phase="Running" if bound_to else "Pending",
                   requests={"cpu": cpu * 1000}, gates=() if bound_to else (GATE,),
                   created=float(replica * 100 + worker), replica_size=size)


def jobset_pod(job: int, pod: int, *, cpu: int = 1, bound_to: str = "", rjob: str = "workers") -> PodInfo:
    name = f"js-{rjob}-{job}-{pod}"
    return PodInfo("team", name, f"uid-{name}",
                   labels={POD_GROUP_LABEL: "js", replicas.JOBSET_NAME_LABEL: "js",
                           replicas.JOBSET_REPLICATED_JOB_LABEL: rjob, replicas.JOBSET_JOB_INDEX_LABEL: str(job)},
                   node_name=bound_to, phase="Running" if bound_to else "Pending",
                   requests={"cpu": cpu * 1000}, gates=() if bound_to else (GATE,), created=float(job * 100 + pod))


def released(name: str, members, min_member: int) -> GroupRequest:
    return GroupRequest("team", name, min_member, 0.0, True, tuple(members))


def running_replicas(count: int, size: int, node_name: str = "big", cpu: int = 1) -> list[PodInfo]:
    return [lws_pod(r, w, size, cpu=cpu, bound_to=node_name) for r in range(count) for w in range(size)]


def test_replica_of_reads_the_controllers_labels():
    raw = {"metadata": {"name": "llm-1-2", "namespace": "team", "uid": "u",
                        "labels": {POD_GROUP_LABEL: "llm", replicas.LWS_NAME_LABEL: "llm",
                                   replicas.LWS_GROUP_INDEX_LABEL: "1"},
                        "annotations": {records.LWS_SIZE_ANNOTATION: "4"}},
           "spec": {"containers": [{"name": "c"}]}, "status": {}}
    p = records.pod_info(raw)
    assert (replicas.replica_of(p), p.replica_size) == (replicas.Replica("LeaderWorkerSet", "llm", "", "1"), 4)
    for odd in ("0", "-3", "four", "", "٣"):
        raw["metadata"]["annotations"][records.LWS_SIZE_ANNOTATION] = odd
        assert records.pod_info(raw).replica_size == 0
    assert replicas.replica_of(jobset_pod(2, 0)) == replicas.Replica("JobSet", "js", "workers", "2")
    assert str(replicas.replica_of(jobset_pod(2, 0))) == "JobSet js job workers-2"
    assert replicas.replica_of(PodInfo("team", "x", "x", labels={POD_GROUP_LABEL: "g"})) is None


@pytest.mark.parametrize("running,size", [(1, 2), (2, 3), (3, 4), (1, 8)])
def test_a_new_replicas_leader_waits_for_its_workers_then_all_go_together(running, size):
    """Scale-out by one replica: the leader is created first (gated), alone it is not released even
    though there is room for it; once every worker exists, the whole replica is released at once."""
    nodes = [node("big").cpu(running * size).info(), node("free").cpu(size).info()]
    base = running_replicas(running, size)
    leader = lws_pod(running, 0, size)
    d = decide(nodes, base, [released("llm", base + [leader], running * size)], [], NOW, CFG)
    v = d.verdicts[0]
    assert v.outcome == Outcome.ALREADY_RELEASED
    assert v.release == {} and v.waiting == (leader.name,)
    assert f"LeaderWorkerSet llm group {running}: 1 of {size} members present" in v.message
    assert f"members of {running + 1} replicas share this PodGroup" in v.message
    assert d.reservations == ()
    workers = [lws_pod(running, w, size) for w in range(1, size)]
    if size > 2:  # all but the last worker: still waits
        d = decide(nodes, base, [released("llm", base + [leader] + workers[:-1], running * size)], [], NOW, CFG)
        assert d.verdicts[0].release == {}
        assert f"{size - 1} of {size} members present" in d.verdicts[0].message
    d = decide(nodes, base, [released("llm", base + [leader] + workers, running * size)], [], NOW, CFG)
    v = d.verdicts[0]
    assert v.release == {m.uid: "free" for m in [leader] + workers}
    assert v.waiting == ()
    assert v.message == f"released; ungating {size} new members"
    assert len(d.reservations) == size


@pytest.mark.parametrize("size,room", [(2, 1), (3, 2), (4, 3), (4, 1)])
def test_a_replica_that_does_not_fit_whole_releases_none(size, room):
    """Room for only part of the new replica: none of its members goes (not the leader alone)."""
    nodes = [node("big").cpu(size).info(), node("free").cpu(room).info()]
    base = running_replicas(1, size)
    new = [lws_pod(1, w, size) for w in range(size)]
    d = decide(nodes, base, [released("llm", base + new, size)], [], NOW, CFG)
    v = d.verdicts[0]
    assert v.outcome == Outcome.ALREADY_RELEASED
    assert v.release == {} and set(v.waiting) == {m.name for m in new}
    assert f"LeaderWorkerSet llm group 1: {room} of {size} new members fit, released whole or not at all" in v.message
    assert d.reservations == ()


@pytest.mark.parametrize("new_replicas,room_for", [(2, 1), (3, 2), (3, 3)])
def test_several_new_replicas_go_each_whole_as_room_allows(new_replicas, room_for):
    size = 3
    nodes = [node("big").cpu(size).info(), node("free").cpu(room_for * size).info()]
    base = running_replicas(1, size)
    new = [lws_pod(r, w, size) for r in range(1, 1 + new_replicas) for w in range(size)]
    v = decide(nodes, base, [released("llm", base + new, size)], [], NOW, CFG).verdicts[0]
    released_replicas = {replicas.replica_of(m).index for m in new if m.uid in v.release}
    assert released_replicas == {str(r) for r in range(1, 1 + room_for)}  # lowest indexes first, each whole
    assert len(v.release) == room_for * size
    assert len(v.waiting) == (new_replicas - room_for) * size


@pytest.mark.parametrize("jobs,per_job", [(1, 2), (2, 3), (3, 2)])
def test_jobset_replica_size_comes_from_its_siblings(jobs, per_job):
    """JobSet pods carry no size: a new Job waits until it has as many pods as its running siblings."""
    nodes = [node("big").cpu(jobs * per_job).info(), node("free").cpu(per_job).info()]
    base = [jobset_pod(j, p, bound_to="big") for j in range(jobs) for p in range(per_job)]
    partial = [jobset_pod(jobs, p) for p in range(per_job - 1)]
    v = decide(nodes, base, [released("js", base + partial, jobs * per_job)], [], NOW, CFG).verdicts[0]
    assert v.release == {}
    assert f"JobSet js job workers-{jobs}: {per_job - 1} of {per_job} members present" in v.message
    whole = partial + [jobset_pod(jobs, per_job - 1)]
    v = decide(nodes, base, [released("js", base + whole, jobs * per_job)], [], NOW, CFG).verdicts[0]
    assert v.release == {m.uid: "free" for m in whole}


def test_members_of_no_replica_are_still_released_one_by_one():
    nodes = [node("n1").cpu(2).info()]
    bound = PodInfo("team", "a", "uid-a", labels={POD_GROUP_LABEL: "g"}, node_name="n1", phase="Running",
                    requests={"cpu": 1000})
    new = [PodInfo("team", f"b{i}", f"uid-b{i}", labels={POD_GROUP_LABEL: "g"}, requests={"cpu": 1000},
                   gates=(GATE,), created=float(i)) for i in range(2)]
    v = decide(nodes, [bound], [released("g", [bound] + new, 1)], [], NOW, CFG).verdicts[0]
    assert v.release == {"uid-b0": "n1"} and v.waiting == ("b1",)


@pytest.mark.parametrize("size,min_member", [(2, 2), (3, 3), (4, 8)])
def test_first_release_leaves_an_incomplete_replica_waiting_when_min_member_is_met_without_it(size, min_member):
    """Not released yet: replicas complete enough for minMember go; the leader of a replica whose
    workers do not exist yet waits gated (and is released with them)."""
    complete = min_member // size
    nodes = [node("n1").cpu(4 * size).info()]
    ms = [lws_pod(r, w, size) for r in range(complete) for w in range(size)] + [lws_pod(complete, 0, size)]
    g = GroupRequest("team", "llm", min_member, 0.0, False, tuple(ms))
    v = decide(nodes, [], [g], [], NOW, CFG).verdicts[0]
    assert v.outcome == Outcome.RELEASED
    assert set(v.release) == {m.uid for m in ms[:-1]}
    assert v.waiting == (ms[-1].name,)
    assert f"fits {min_member} of {min_member}" in v.message
    assert f"LeaderWorkerSet llm group {complete}" in v.message and "wait gated, each replica released whole" in v.message


def test_first_release_needing_an_incomplete_replica_waits_for_it_whole():
    """minMember 5 with replicas of 4 needs two whole replicas (issue 33 item 3): the second's leader
    alone is never released; the group waits for its workers, then both replicas go together."""
    nodes = [node("n1").cpu(8).info()]
    ms = [lws_pod(0, w, 4) for w in range(4)] + [lws_pod(1, 0, 4)]
    v = decide(nodes, [], [GroupRequest("team", "llm", 5, 0.0, False, tuple(ms))], [], NOW, CFG).verdicts[0]
    assert v.outcome == Outcome.WAITING_FOR_MEMBERS and v.release == {}, v
    assert v.message == ("4 of 5 members in complete replicas (replicas of 2 share this PodGroup, each released "
                         "whole); LeaderWorkerSet llm group 1: not all members present, each replica released "
                         "whole once all exist")
    ms += [lws_pod(1, w, 4) for w in range(1, 4)]
    v = decide(nodes, [], [GroupRequest("team", "llm", 5, 0.0, False, tuple(ms))], [], NOW, CFG).verdicts[0]
    assert v.outcome == Outcome.RELEASED and set(v.release) == {m.uid for m in ms}


@pytest.mark.parametrize("size", [2, 3, 4])
def test_first_release_needing_a_replica_that_fits_only_in_part_waits(size):
    """minMember needs two replicas; room for one and a half: no member is released (before issue 33
    item 3, minMember decided and the second replica ran half-placed)."""
    nodes = [node("n1").cpu(size + size // 2).info()]
    ms = [lws_pod(r, w, size) for r in range(2) for w in range(size)]
    v = decide(nodes, [], [GroupRequest("team", "llm", size + 1, 0.0, False, tuple(ms))], [], NOW, CFG).verdicts[0]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.release == {}, v
    assert v.message.startswith(f"fits {size} of {size + 1}: counting whole replicas only"), v.message


@pytest.mark.parametrize("size", [2, 3])
def test_incremental_planner_agrees_on_replicas(size):
    nodes = [node("big").cpu(size).info(), node("free").cpu(size).info()]
    base = running_replicas(1, size)
    state = PlanningState.build(nodes, base)
    for k in range(1, size + 1):
        g = released("llm", base + [lws_pod(1, w, size) for w in range(k)], size)
        assert state.decide([g], [], NOW + k, CFG) == decide(nodes, base, [g], [], NOW + k, CFG)


@pytest.mark.parametrize("size,replicas_present,room_replicas,fits", [
    (2, 3, 2, "fits all 2 (room for 4)"), (3, 2, 1, "fits 3 of 3"), (4, 3, 2, "fits all 4 (room for 8)")])
def test_first_release_never_places_a_replica_in_part(size, replicas_present, room_replicas, fits):
    """Room for ``room_replicas`` whole replicas and part of the next: minMember (one replica) is met
    by whole replicas, so the one that would fit only in part waits gated, all of it."""
    nodes = [node("n1").cpu(room_replicas * size + size - 1).info()]
    ms = [lws_pod(r, w, size) for r in range(replicas_present) for w in range(size)]
    v = decide(nodes, [], [GroupRequest("team", "llm", size, 0.0, False, tuple(ms))], [], NOW, CFG).verdicts[0]
    assert v.outcome == Outcome.RELEASED
    released_replicas = {replicas.replica_of(m).index for m in ms if m.uid in v.release}
    assert released_replicas == {str(r) for r in range(room_replicas)}
    assert len(v.release) == room_replicas * size
    assert len(v.waiting) == (replicas_present - room_replicas) * size
    assert v.message.startswith(f"{fits}: releasing {room_replicas * size} gated members"), v.message


@pytest.mark.parametrize("count,named", [(2, "LeaderWorkerSet llm group 0, LeaderWorkerSet llm group 1"),
                                         (5, "LeaderWorkerSet llm group 2 and 2 more")])
def test_shared_message_names_the_replicas_and_the_fix(count, named):
    ms = [lws_pod(r, w, 2) for r in range(count) for w in range(2)]
    text = replicas.shared_message(ms)
    assert text.startswith(f"members of {count} replicas share this PodGroup (")
    assert named in text
    assert "give each replica its own PodGroup" in text and "minMember = the replica's size" in text
    assert replicas.shared_message([lws_pod(0, w, 2) for w in range(2)]) == ""
    assert replicas.shared_message([jobset_pod(0, 0), jobset_pod(1, 0), jobset_pod(1, 0, rjob="driver")]).startswith(
        "members of 3 replicas")


@pytest.mark.parametrize("count", [2, 3])
def test_reconciler_warns_once_while_replicas_share_a_pod_group(count):
    """Warning ReplicasSharePodGroup on the PodGroup (a Kubernetes Event), once per situation."""
    from tests.builders import Harness, raw_pg, raw_pod, verdict

    raws = []
    for r in range(count):
        raw = raw_pod(f"llm-{r}", group="llm", gates=(), node="n1", phase="Running")
        raw["metadata"]["labels"].update({replicas.LWS_NAME_LABEL: "llm", replicas.LWS_GROUP_INDEX_LABEL: str(r)})
        raws.append(raw)
    status = {"phase": "Running", "scheduleStartTime": "2024-01-01T00:01:00Z"}
    h = Harness(raws, [raw_pg("llm", 1, status=status)], [verdict("AlreadyReleased", name="llm", message="released")])
    h.run()
    h.run()
    warned = [e for e in h.events if e[1] == "ReplicasSharePodGroup"]
    assert len(warned) == 1 and warned[0][0] == "Warning"
    assert warned[0][2].startswith(f"members of {count} replicas share this PodGroup (LeaderWorkerSet llm group 0")
    h2 = Harness(raws[:1], [raw_pg("llm", 1, status=status)], [verdict("AlreadyReleased", name="llm")])
    h2.run()
    assert not [e for e in h2.events if e[1] == "ReplicasSharePodGroup"]
